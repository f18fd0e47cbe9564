//! Mirrors of local repositories that lack objects of their history: fetched snapshots,
//! damaged or partial clones. A fetch cannot take them (the sending side walks the history and
//! stops at the first object it lacks), so the mirror is made as `git clone --local` makes a
//! clone: the object files are taken as they are, with no walk. Then the refs a fetch would
//! have taken are kept, the others dropped, and the objects the history names but the source
//! lacks are listed beside the mirror ([`MISSING_OBJECTS_FILE`]). Instances whose commits are
//! whole are used as from any mirror; one whose tree needs a missing object is refused by
//! name where its files are read (`check_tree`, `codebase_at`).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use git2::{ObjectType, Oid, Repository};

use crate::progress::Progress;

use super::{FETCH_REFSPECS, FetchReport, Mirror, MirrorError, RepoName, diff_refs, upstream_refs};

/// The file, in a mirror's directory, that lists the objects its history names and it lacks:
/// one line per object, `<id> <kind> <commit> <path>`, sorted by id (`path` is where the
/// object was first met, `-` for a commit or a tag).
pub const MISSING_OBJECTS_FILE: &str = "swe-ark-missing-objects";

/// An object the history names that the mirror does not have.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MissingObject {
    pub oid: String,
    /// `commit`, `tree`, `blob` or `object` (a ref or tag target of unknown kind).
    pub kind: &'static str,
    /// The commit (or ref) whose history names it.
    pub commit: String,
    /// Where in that commit's tree; empty for a commit or a tag target.
    pub path: String,
}

impl std::fmt::Display for MissingObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{} {} (named by {})", self.kind, self.oid, self.commit)
        } else {
            write!(
                f,
                "{} {} at `{}` of commit {}",
                self.kind, self.oid, self.path, self.commit
            )
        }
    }
}

/// Whether `dest` is a ref a fetch with [`FETCH_REFSPECS`] writes.
fn fetched_ref(name: &str) -> bool {
    ["refs/heads/", "refs/tags/", "refs/notes/"]
        .iter()
        .any(|p| name.starts_with(p))
        || name
            .strip_prefix("refs/pull/")
            .and_then(|rest| rest.strip_suffix("/head"))
            .is_some_and(|n| !n.is_empty() && !n.contains('/'))
}

/// The local repository that `url` names (a path or a `file://` URL), if it names one.
fn local_source(url: &str) -> Option<PathBuf> {
    let path = url.strip_prefix("file://").unwrap_or(url);
    let path = Path::new(path);
    path.is_dir().then(|| path.to_path_buf())
}

/// Copies the repository at `source` into `built` (a new bare repository) as `git clone
/// --local` does: its object files as they are (or linked), with no walk of the history,
/// which is what lets a repository with holes in it be taken at all. `scratch` is where git
/// runs; `fail` makes the error of a sentence saying why not.
fn copy_objects(
    source: &Path,
    built: &Path,
    scratch: &Path,
    fail: impl Fn(String) -> MirrorError,
) -> Result<(), MirrorError> {
    let source_arg = source.to_string_lossy().into_owned();
    let built_arg = built.to_string_lossy().into_owned();
    let args = [
        "clone",
        "--mirror",
        "--local",
        "-q",
        &source_arg,
        &built_arg,
    ];
    let out = crate::gitcmd::output(scratch, &args);
    if !out.status.success() {
        return Err(fail(
            crate::gitcmd::GitError::of(scratch, &args, &out).to_string(),
        ));
    }
    if built.join("objects/info/alternates").exists() {
        return Err(fail(
            "it borrows objects from another repository (objects/info/alternates): a mirror \
             holds its own; clone it with `git clone --mirror --dissociate` first"
                .to_string(),
        ));
    }
    Ok(())
}

/// Makes the copy in `repo` what a fetch from `url` would have made: the remote with the
/// mirror's refspecs, and only the refs a fetch takes (no remote-tracking refs, no merge refs,
/// no pins of another archive).
fn as_fetched(repo: &Repository, url: &str) -> Result<(), git2::Error> {
    {
        let mut config = repo.config()?;
        config.remove_multivar("remote.origin.fetch", ".*")?;
        let _ = config.remove("remote.origin.mirror");
    }
    repo.remote_set_url("origin", url)?;
    for spec in FETCH_REFSPECS {
        repo.remote_add_fetch("origin", spec)?;
    }
    let mut dropped = Vec::new();
    for r in repo.references()? {
        let r = r?;
        if let Ok(n) = std::str::from_utf8(r.name_bytes())
            && !fetched_ref(n)
        {
            dropped.push(n.to_string());
        }
    }
    for n in dropped {
        repo.find_reference(&n)?.delete()?;
    }
    Ok(())
}

impl Mirror {
    /// Makes mirror `name` from the local repository at `url` with every object it has, though
    /// its history lacks some; returns the mirror, what was taken, and what is missing. The
    /// mirror is built under a temporary name and renamed into place only when it is whole
    /// as far as the source goes; an existing mirror is refused (a fetch keeps it up to date).
    pub fn add_incomplete(
        mirrors_dir: &Path,
        name: &RepoName,
        url: &str,
        progress: &dyn Progress,
    ) -> Result<(Mirror, FetchReport, Vec<MissingObject>), MirrorError> {
        let started = Instant::now();
        let fail = |detail: String| MirrorError::Fetch {
            name: name.to_string(),
            url: url.to_string(),
            detail,
        };
        let source = local_source(url).ok_or_else(|| {
            fail(
                "--allow-missing-objects takes a local repository (a path or a file:// URL): a \
                 server sends whole histories, or nothing"
                    .to_string(),
            )
        })?;
        let dest = Self::dir(mirrors_dir, name);
        if dest.exists() {
            return Err(fail(format!(
                "mirror {name} is already in the archive; --allow-missing-objects makes a new \
                 mirror (`swe-ark mirror update {name}` fetches into this one)"
            )));
        }
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| MirrorError::Io { path, source }
        };
        std::fs::create_dir_all(mirrors_dir).map_err(io_err(mirrors_dir))?;
        let tmp = crate::fsutil::work_dir(
            mirrors_dir,
            &format!("{}{}-", crate::fsutil::TEMP_PREFIX, name.dir_name()),
        )
        .map_err(io_err(mirrors_dir))?;
        let built = tmp.path().join("mirror.git");
        progress.start("copying objects", None);
        let copied = copy_objects(&source, &built, tmp.path(), fail);
        progress.finish();
        copied?;
        let git = |source| MirrorError::Git {
            name: name.to_string(),
            source,
        };
        let repo = Repository::open_bare(&built).map_err(git)?;
        as_fetched(&repo, url).map_err(git)?;
        let refs = upstream_refs(&repo).map_err(git)?;
        progress.start("listing missing objects", None);
        let missing = missing_objects(&repo).map_err(git)?;
        progress.finish();
        let mut listing = String::new();
        for m in &missing {
            let path = if m.path.is_empty() { "-" } else { &m.path };
            listing.push_str(&format!("{} {} {} {path}\n", m.oid, m.kind, m.commit));
        }
        let list_path = built.join(MISSING_OBJECTS_FILE);
        crate::fsutil::write_atomic(&list_path, listing.as_bytes()).map_err(io_err(&list_path))?;
        let mut objects = 0usize;
        repo.odb()
            .and_then(|odb| {
                odb.foreach(|_| {
                    objects += 1;
                    true
                })
            })
            .map_err(git)?;
        drop(repo);
        std::fs::rename(&built, &dest).map_err(io_err(&dest))?;
        let mirror = Self::open(mirrors_dir, name)?;
        let report = FetchReport {
            name: name.to_string(),
            url: url.to_string(),
            changes: diff_refs(&BTreeMap::new(), &refs),
            refs: refs.len(),
            received_objects: objects,
            received_bytes: super::disk_size(&dest) as usize,
            seconds: started.elapsed().as_secs_f64(),
            created: true,
        };
        Ok((mirror, report, missing))
    }

    /// The objects listed missing when the mirror was made from an incomplete source; none
    /// for a mirror made by a fetch.
    pub fn missing_objects(&self) -> Result<Vec<String>, MirrorError> {
        let path = self.path.join(MISSING_OBJECTS_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(text.lines().map(str::to_string).collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(source) => Err(MirrorError::Io { path, source }),
        }
    }
}

/// Every object the history of `repo`'s refs names that its object database lacks, each with
/// where it was first met, sorted by id. Each commit, tree and blob is looked at once.
fn missing_objects(repo: &Repository) -> Result<Vec<MissingObject>, git2::Error> {
    let odb = repo.odb()?;
    let mut missing: BTreeMap<Oid, MissingObject> = BTreeMap::new();
    let mut note = |oid: Oid, kind: &'static str, commit: String, path: String| {
        missing.entry(oid).or_insert(MissingObject {
            oid: oid.to_string(),
            kind,
            commit,
            path,
        });
    };
    // The refs' targets, tags peeled to what they name.
    let mut commits: Vec<(Oid, String)> = Vec::new();
    let mut names: Vec<(String, Oid)> = Vec::new();
    for r in repo.references()? {
        let r = r?;
        if let Some(t) = r.target() {
            names.push((String::from_utf8_lossy(r.name_bytes()).into_owned(), t));
        }
    }
    names.sort();
    for (name, mut oid) in names {
        loop {
            let kind = match odb.read_header(oid) {
                Ok((_, kind)) => kind,
                Err(_) => {
                    note(oid, "object", name.clone(), String::new());
                    break;
                }
            };
            match kind {
                ObjectType::Tag => match repo.find_tag(oid) {
                    Ok(tag) => oid = tag.target_id(),
                    Err(_) => {
                        note(oid, "object", name.clone(), String::new());
                        break;
                    }
                },
                ObjectType::Commit => {
                    commits.push((oid, name.clone()));
                    break;
                }
                // A tag of a tree or a blob (rare): nothing of a history to walk.
                _ => break,
            }
        }
    }
    let mut seen_commits: HashSet<Oid> = HashSet::new();
    let mut seen: HashSet<Oid> = HashSet::new();
    while let Some((oid, named_by)) = commits.pop() {
        if !seen_commits.insert(oid) {
            continue;
        }
        let commit = match repo.find_commit(oid) {
            Ok(c) => c,
            Err(_) => {
                note(oid, "commit", named_by, String::new());
                continue;
            }
        };
        let id = oid.to_string();
        for parent in commit.parent_ids() {
            commits.push((parent, id.clone()));
        }
        let mut trees = vec![(String::new(), commit.tree_id())];
        while let Some((prefix, tree_id)) = trees.pop() {
            if !seen.insert(tree_id) {
                continue;
            }
            let tree = match repo.find_tree(tree_id) {
                Ok(t) => t,
                Err(_) => {
                    let at = if prefix.is_empty() { "/" } else { &prefix };
                    note(
                        tree_id,
                        "tree",
                        id.clone(),
                        at.trim_end_matches('/').to_string(),
                    );
                    continue;
                }
            };
            for entry in tree.iter() {
                let path = format!("{prefix}{}", String::from_utf8_lossy(entry.name_bytes()));
                match entry.filemode() {
                    0o040000 => trees.push((format!("{path}/"), entry.id())),
                    0o160000 => {}
                    _ => {
                        if seen.insert(entry.id()) && !odb.exists(entry.id()) {
                            note(entry.id(), "blob", id.clone(), path);
                        }
                    }
                }
            }
        }
    }
    Ok(missing.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_refs_a_fetch_takes_are_kept() {
        for kept in [
            "refs/heads/main",
            "refs/tags/v1.0",
            "refs/notes/commits",
            "refs/pull/12/head",
        ] {
            assert!(fetched_ref(kept), "{kept}");
        }
        for dropped in [
            "refs/pull/12/merge",
            "refs/pull//head",
            "refs/remotes/origin/main",
            "refs/swe-ark/instances/x/base",
            "refs/stash",
        ] {
            assert!(!fetched_ref(dropped), "{dropped}");
        }
    }
}
