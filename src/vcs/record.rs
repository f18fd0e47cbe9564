//! The record of a base commit, computed from a repository with the git program (the reference
//! for what `git describe` says).
//!
//! Which tags count is SWE-bench's rule: its setup script deletes every tag whose commit's
//! committer date is later than the base commit's, comparing the `git show -s --format=%ci`
//! strings (each in its own time zone) as bash's `[[ > ]]` does, byte by byte. Only tags
//! reachable from the base commit matter to `git describe`.
//!
//! Five git runs whatever the repository's size: whether it is shallow, the base commit, one walk of its history in
//! topological order (`rev-list --topo-order --parents`), the tags (`for-each-ref`), and one
//! `git describe`. The distance of every reachable tag comes out of the one walk: each
//! commit's set of "tags it is an ancestor of" flows from children to parents, so a tag's
//! ancestor count is the number of commits whose set holds it, and its distance is the base's
//! count less the tag's.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;

use super::{MAX_TAGS, TagRecord, VcsError, VcsRecord};
use crate::digest::GitOid;

/// Runs `git --git-dir=<git_dir> args`; its stdout.
fn git(git_dir: &Path, args: &[OsString]) -> Result<Vec<u8>, VcsError> {
    let out = crate::gitcmd::command()
        .arg("--git-dir")
        .arg(git_dir)
        .args(args)
        // What a clone sees: no replacement objects.
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .output();
    let shown = || {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    };
    match out {
        Ok(o) if o.status.success() => Ok(o.stdout),
        Ok(o) => Err(VcsError::Git {
            args: shown(),
            dir: git_dir.to_path_buf(),
            detail: String::from_utf8_lossy(&o.stderr).trim().to_string(),
        }),
        Err(e) => Err(VcsError::Git {
            args: shown(),
            dir: git_dir.to_path_buf(),
            detail: format!("git could not be started: {e}"),
        }),
    }
}

fn args(list: &[&str]) -> Vec<OsString> {
    list.iter().map(OsString::from).collect()
}

/// A tag as `for-each-ref` lists it, peeled to its commit.
struct Tag {
    name: Vec<u8>,
    annotated: bool,
    commit: Vec<u8>,
    /// `%ci` of the commit.
    date: Vec<u8>,
}

/// Every tag that names a commit (tags of trees and blobs describe nothing).
fn tags(git_dir: &Path) -> Result<Vec<Tag>, VcsError> {
    let out = git(
        git_dir,
        &args(&[
            "for-each-ref",
            "--format=%(refname)%00%(objecttype)%00%(objectname)%00%(committerdate:iso)\
             %00%(*objecttype)%00%(*objectname)%00%(*committerdate:iso)",
            "refs/tags",
        ]),
    )?;
    let mut found = Vec::new();
    for line in out.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let f: Vec<&[u8]> = line.split(|&b| b == 0).collect();
        let [
            refname,
            kind,
            object,
            date,
            peeled_kind,
            peeled,
            peeled_date,
        ] = f[..]
        else {
            return Err(VcsError::History {
                dir: git_dir.to_path_buf(),
                detail: format!(
                    "git for-each-ref gave the line `{}`, not seven fields",
                    String::from_utf8_lossy(line)
                ),
            });
        };
        let name = refname
            .strip_prefix(b"refs/tags/")
            .unwrap_or(refname)
            .to_vec();
        let (annotated, commit, date) = match (kind, peeled_kind) {
            (b"commit", _) => (false, object.to_vec(), date.to_vec()),
            (b"tag", b"commit") => (true, peeled.to_vec(), peeled_date.to_vec()),
            // A tag of a tag: peeled fully, as `git rev-list -n 1 TAG` does.
            (b"tag", b"tag") => {
                let mut spec = refname.to_vec();
                spec.extend_from_slice(b"^{commit}");
                let Ok(out) = git(
                    git_dir,
                    &[
                        "show".into(),
                        "-s".into(),
                        "--format=%H%x00%ci".into(),
                        OsString::from_vec(spec),
                    ],
                ) else {
                    continue;
                };
                let out = out.strip_suffix(b"\n").unwrap_or(&out);
                match out.iter().position(|&b| b == 0) {
                    Some(i) => (true, out[..i].to_vec(), out[i + 1..].to_vec()),
                    None => continue,
                }
            }
            _ => continue,
        };
        found.push(Tag {
            name,
            annotated,
            commit,
            date,
        });
    }
    Ok(found)
}

/// The number of commits each tag's commit has in its own history, for the tags whose commit
/// is in `history` (a topological walk, children first: `commit parent…` per line).
fn ancestor_counts(history: &[u8], tag_commits: &[&[u8]]) -> (u64, Vec<Option<u64>>) {
    let words = tag_commits.len().div_ceil(64).max(1);
    let mut own: HashMap<&[u8], Vec<usize>> = HashMap::new();
    for (i, c) in tag_commits.iter().enumerate() {
        own.entry(*c).or_default().push(i);
    }
    let mut counts = vec![0u64; tag_commits.len()];
    let mut reached = vec![false; tag_commits.len()];
    // The tags each commit not yet walked is an ancestor of, from the children walked so far.
    let mut pending: HashMap<&[u8], Vec<u64>> = HashMap::new();
    let mut total = 0u64;
    for line in history.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        total += 1;
        let mut ids = line.split(|&b| b == b' ');
        let Some(commit) = ids.next() else { continue };
        let mut bits = pending.remove(commit).unwrap_or_else(|| vec![0u64; words]);
        if let Some(list) = own.get(commit) {
            for &i in list {
                bits[i / 64] |= 1 << (i % 64);
                reached[i] = true;
            }
        }
        for (w, word) in bits.iter().enumerate() {
            let mut rest = *word;
            while rest != 0 {
                let bit = rest.trailing_zeros() as usize;
                counts[w * 64 + bit] += 1;
                rest &= rest - 1;
            }
        }
        for parent in ids {
            let slot = pending.entry(parent).or_insert_with(|| vec![0u64; words]);
            for (s, b) in slot.iter_mut().zip(&bits) {
                *s |= b;
            }
        }
    }
    let counts = counts
        .into_iter()
        .zip(reached)
        .map(|(n, r)| r.then_some(n))
        .collect();
    (total, counts)
}

/// A `git describe --exclude` pattern that matches `name` only.
fn literal_pattern(name: &[u8]) -> OsString {
    let mut out = Vec::with_capacity(name.len() + 2);
    for &b in name {
        if matches!(b, b'\\' | b'*' | b'?' | b'[') {
            out.push(b'\\');
        }
        out.push(b);
    }
    OsString::from_vec(out)
}

fn history_error(git_dir: &Path, detail: String) -> VcsError {
    VcsError::History {
        dir: git_dir.to_path_buf(),
        detail,
    }
}

/// The base commit, as `git show` gives it.
struct Base {
    oid: GitOid,
    /// The full id, as git spells it.
    full: String,
    /// `%cd` with `--date=raw`: the record's committer date.
    raw_date: String,
    /// `%ci`: what the tags' dates are compared with.
    ci: String,
}

/// Reads the base commit `commit` names; refused when `commit` is no commit id or the
/// repository is shallow.
fn read_base(git_dir: &Path, commit: &str) -> Result<Base, VcsError> {
    let history_err = |detail: String| history_error(git_dir, detail);
    if commit.len() < 4 || commit.len() > 40 || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(history_err(format!("`{commit}` is not a commit id")));
    }
    let shallow = git(git_dir, &args(&["rev-parse", "--is-shallow-repository"]))?;
    if shallow.starts_with(b"true") {
        return Err(history_err(
            "the repository is shallow: its history is cut, so its tags and counts are not \
             the project's"
                .into(),
        ));
    }
    let spec = format!("{commit}^{{commit}}");
    let base = git(
        git_dir,
        &args(&["show", "-s", "--date=raw", "--format=%H%n%cd%n%ci", &spec]),
    )?;
    let base = String::from_utf8_lossy(&base);
    let mut lines = base.lines();
    let (Some(full), Some(raw_date), Some(ci)) = (lines.next(), lines.next(), lines.next()) else {
        return Err(history_err(format!(
            "git show gave `{}` for commit {commit}",
            base.trim()
        )));
    };
    let oid: GitOid = full
        .parse()
        .map_err(|e| history_err(format!("commit {commit}: {e}")))?;
    Ok(Base {
        oid,
        full: full.to_string(),
        raw_date: raw_date.to_string(),
        ci: ci.to_string(),
    })
}

/// `git describe` of the commit `full`, with the tags SWE-bench's script deletes excluded:
/// what it says, and the tag it names with its distance.
fn describe(
    git_dir: &Path,
    full: &str,
    excluded: &[&[u8]],
) -> Result<(String, String, u64), VcsError> {
    let mut describe_args = args(&["describe", "--tags", "--long", "--abbrev=40"]);
    for name in excluded {
        describe_args.push("--exclude".into());
        describe_args.push(literal_pattern(name));
    }
    describe_args.push(full.into());
    let described = git(git_dir, &describe_args)?;
    let described = String::from_utf8_lossy(&described).trim().to_string();
    let parsed = described
        .strip_suffix(&format!("-g{full}"))
        .and_then(|rest| rest.rsplit_once('-'))
        .and_then(|(name, n)| Some((name.to_string(), n.parse::<u64>().ok()?)));
    let Some((first_name, first_distance)) = parsed else {
        return Err(history_error(
            git_dir,
            format!("git describe gave `{described}` for {full}, not TAG-N-g{full}"),
        ));
    };
    Ok((described, first_name, first_distance))
}

/// What git says about `commit` in the repository `git_dir` (a bare mirror, or a clone's
/// `.git`): see [`VcsRecord`].
pub fn record(git_dir: &Path, commit: &str) -> Result<VcsRecord, VcsError> {
    let history_err = |detail: String| history_error(git_dir, detail);
    let base = read_base(git_dir, commit)?;
    let full = &base.full;

    let history = git(
        git_dir,
        &args(&["rev-list", "--topo-order", "--parents", full]),
    )?;
    let all_tags = tags(git_dir)?;
    let commits: Vec<&[u8]> = all_tags.iter().map(|t| &t.commit[..]).collect();
    let (total, counts) = ancestor_counts(&history, &commits);

    // The reachable tags: those that count, and those SWE-bench's script deletes.
    let mut counting: Vec<(&Tag, u64)> = Vec::new();
    let mut excluded: Vec<&[u8]> = Vec::new();
    for (tag, count) in all_tags.iter().zip(&counts) {
        let Some(count) = count else { continue };
        let utf8 = std::str::from_utf8(&tag.name).is_ok();
        if tag.date.as_slice() > base.ci.as_bytes() || !utf8 {
            excluded.push(&tag.name);
        } else {
            counting.push((tag, total - count));
        }
    }
    if counting.is_empty() {
        return Ok(VcsRecord {
            base_commit: base.oid,
            commits: total,
            committer_date: base.raw_date,
            describe: None,
            tags: Vec::new(),
        });
    }

    let (described, first_name, first_distance) = describe(git_dir, full, &excluded)?;
    let Some(&(first, walked)) = counting
        .iter()
        .find(|(t, _)| t.name == first_name.as_bytes())
    else {
        return Err(history_err(format!(
            "git describe names tag `{first_name}`, which is not among the reachable tags \
             that count"
        )));
    };
    if walked != first_distance {
        // describe is what the tools read: its number is kept.
        tracing::warn!(
            "git describe counts {first_distance} commits from {first_name} to {full}, \
             rev-list {walked}"
        );
    }
    let as_record = |t: &Tag, distance: u64| TagRecord {
        annotated: t.annotated,
        distance,
        name: String::from_utf8_lossy(&t.name).into_owned(),
    };
    let mut rest: Vec<(&Tag, u64)> = counting
        .into_iter()
        .filter(|(t, _)| t.name != first.name)
        .collect();
    rest.sort_by(|(a, da), (b, db)| (da, !a.annotated, &a.name).cmp(&(db, !b.annotated, &b.name)));
    let mut tags = vec![as_record(first, first_distance)];
    tags.extend(
        rest.into_iter()
            .take(MAX_TAGS - 1)
            .map(|(t, d)| as_record(t, d)),
    );
    let record = VcsRecord {
        base_commit: base.oid,
        commits: total,
        committer_date: base.raw_date,
        describe: Some(described),
        tags,
    };
    record.check().map_err(|e| history_err(e.to_string()))?;
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestor_counts_on_a_merge() {
        // d merges b and c, both children of a; tags on b and a.
        let history = b"d b c\nc a\nb a\na\n";
        let (total, counts) = ancestor_counts(history, &[b"b", b"a", b"zz"]);
        assert_eq!(total, 4);
        assert_eq!(counts, vec![Some(2), Some(1), None]);
    }

    #[test]
    fn patterns_match_one_name() {
        assert_eq!(
            literal_pattern(b"v1.*[x]?\\"),
            OsString::from("v1.\\*\\[x]\\?\\\\")
        );
    }
}
