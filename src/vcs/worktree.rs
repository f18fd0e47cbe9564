//! A directory holding a codebase, made a git work tree whose history answers as the record
//! says: `git describe --tags --long` gives the recorded tag and distance, `git rev-list
//! --count HEAD` the recorded number of commits, so setuptools_scm, versioneer and the like
//! compute the version SWE-bench's image gives (apart from the local `+g<hash>` part).
//!
//! The history is a line of empty commits with the recorded tags at their distances below
//! HEAD, and HEAD a commit holding the codebase, all written by one `git fast-import` (a
//! history of 45,000 commits takes a quarter of a second). Names, e-mails and dates are fixed
//! or come from the record, so two builds anywhere give the same commit ids.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use super::{MAX_TAGS, TagRecord, VcsError, VcsRecord};

/// Who made every commit and tag of a work tree.
const IDENTITY: &str = "swe-ark <swe-ark@localhost>";

/// The date of HEAD when there is no record (old bundles): 2000-01-01T00:00:00Z.
const NO_RECORD_DATE: (u64, &str) = (946_684_800, "+0000");

/// The branch HEAD is on.
const BRANCH: &str = "refs/heads/main";

/// Every command here reads files into the index as they are ([`crate::gitcmd::command_bytewise`]):
/// the tree's blobs are the repository's.
fn run(dir: &Path, args: &[&str]) -> Result<Vec<u8>, VcsError> {
    run_with(dir, args, &mut crate::gitcmd::command_bytewise())
}

/// Runs `git` (a git command, its environment set) with `args` in `dir`: its stdout, or what
/// went wrong.
fn run_with(dir: &Path, args: &[&str], git: &mut Command) -> Result<Vec<u8>, VcsError> {
    match git.args(args).current_dir(dir).output() {
        Ok(o) if o.status.success() => Ok(o.stdout),
        Ok(o) => Err(git_failed(
            dir,
            args,
            String::from_utf8_lossy(&o.stderr).trim().to_string(),
        )),
        Err(e) => Err(git_failed(
            dir,
            args,
            format!("git could not be started: {e}"),
        )),
    }
}

fn git_failed(dir: &Path, args: &[&str], detail: String) -> VcsError {
    VcsError::Git {
        args: args.join(" "),
        dir: dir.to_path_buf(),
        detail,
    }
}

/// How far below HEAD each tag goes, in the record's order. The first tag sits at its
/// distance. A later one sits at its own distance unless that would make `git describe`
/// prefer it to an earlier one (on a line of commits, describe takes the nearest tag; on one
/// commit, an annotated tag before a lightweight one, the newer of two annotated ones, the
/// first by name of two lightweight ones): then it goes just far enough down not to.
pub fn placements(tags: &[TagRecord]) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::with_capacity(tags.len());
    for (i, t) in tags.iter().enumerate() {
        let at = match out.last() {
            None => t.distance,
            Some(&prev) => {
                let at = t.distance.max(prev);
                if at == prev && beats_on_one_commit(t, &tags[i - 1]) {
                    at + 1
                } else {
                    at
                }
            }
        };
        out.push(at);
    }
    out
}

/// Whether `later` would be describe's name for a commit that `earlier` also tags. Annotated
/// tags are dated here so that an earlier one is always the newer.
fn beats_on_one_commit(later: &TagRecord, earlier: &TagRecord) -> bool {
    match (later.annotated, earlier.annotated) {
        (true, false) => true,
        (false, false) => later.name < earlier.name,
        _ => false,
    }
}

/// The `git fast-import` stream of the history `record` describes (or of HEAD alone), with
/// HEAD holding `tree`.
fn stream(record: Option<&VcsRecord>, tree: &str) -> Result<Vec<u8>, VcsError> {
    let (secs, tz) = match record {
        Some(r) => r.date().map_err(|e| VcsError::Malformed(e.to_string()))?,
        None => NO_RECORD_DATE,
    };
    let tags: &[TagRecord] = record.map_or(&[], |r| &r.tags);
    let at = placements(tags);
    let commits = record.map_or(1, |r| r.commits);
    let length = commits.max(at.last().map_or(0, |&p| p + 1)).max(1);
    let date = |below_head: u64| format!("{} {tz}", secs.saturating_sub(below_head));
    let (history_msg, head_msg) = match record {
        Some(r) => (
            format!("history of {}\n", r.base_commit),
            format!("the codebase of {}\n", r.base_commit),
        ),
        None => ("history\n".to_string(), "base\n".to_string()),
    };
    let mut out = Vec::with_capacity(length as usize * 160);
    let mut put = |s: &str| out.extend_from_slice(s.as_bytes());
    put("feature done\n");
    // Mark n is the commit length - n below HEAD: the oldest is mark 1, HEAD mark `length`.
    for mark in 1..=length {
        let below = length - mark;
        let when = date(below);
        let msg = if below == 0 { &head_msg } else { &history_msg };
        put(&format!(
            "commit {BRANCH}\nmark :{mark}\nauthor {IDENTITY} {when}\ncommitter {IDENTITY} {when}\n\
             data {}\n{msg}",
            msg.len()
        ));
        if mark > 1 {
            put(&format!("from :{}\n", mark - 1));
        }
        if below == 0 {
            put(&format!("M 040000 {tree} \"\"\n"));
        }
        put("\n");
    }
    for (i, (t, &below)) in tags.iter().zip(&at).enumerate() {
        let mark = length - below;
        if t.annotated {
            // An earlier tag is newer than a later one on the same commit (see placements).
            let when = format!(
                "{} {tz}",
                secs.saturating_sub(below) + (MAX_TAGS - i) as u64
            );
            let msg = format!("{}\n", t.name);
            put(&format!(
                "tag {}\nfrom :{mark}\ntagger {IDENTITY} {when}\ndata {}\n{msg}\n",
                t.name,
                msg.len()
            ));
        } else {
            put(&format!("reset refs/tags/{}\nfrom :{mark}\n\n", t.name));
        }
    }
    put("done\n");
    Ok(out)
}

/// Every file under `dir` (but `.git`) given the one modification time `when`, as a checkout
/// leaves a tree (the kernel stamps files with a clock of a few milliseconds' grain, so git's
/// checkout gives a commit's files one time or nearly). Files written in another order, in
/// parallel or from a tar, would tell make that a file generated and committed beside its
/// source is older than it (jq's `src/lexer.c` beside `src/lexer.l`), and the build would
/// regenerate it with a tool the image never had (`flex: command not found`). What a patch
/// changes afterwards is newer, as it should be.
fn one_instant(dir: &Path, when: std::time::SystemTime) -> Result<(), VcsError> {
    let io = |path: &Path, source: std::io::Error| VcsError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| io(&d, e))? {
            let entry = entry.map_err(|e| io(&d, e))?;
            let path = entry.path();
            let kind = entry.file_type().map_err(|e| io(&path, e))?;
            if kind.is_dir() {
                if !(d == dir && entry.file_name() == ".git") {
                    stack.push(path);
                }
            } else if kind.is_file() {
                std::fs::File::open(&path)
                    .and_then(|f| f.set_modified(when))
                    .map_err(|e| io(&path, e))?;
            }
        }
    }
    Ok(())
}

/// Makes `dir`, which holds a codebase (and no `.git`), a git work tree: everything in it
/// committed as HEAD, on a history that answers `git describe` as `record` says. With no
/// record (a bundle from before format version 2), HEAD is the only commit and there are no
/// tags.
pub fn build_work_tree(dir: &Path, record: Option<&VcsRecord>) -> Result<(), VcsError> {
    if let Some(r) = record {
        r.check().map_err(|e| VcsError::Malformed(e.to_string()))?;
    }
    one_instant(dir, std::time::SystemTime::now())?;
    run(dir, &["init", "-q", "--initial-branch=main"])?;
    // Every file streamed into one pack (git's bulk check-in) rather than one loose object
    // each: a third of the time on a 5,000-file codebase, the same blobs.
    run(
        dir,
        &[
            "-c",
            "core.bigFileThreshold=1",
            "-c",
            "core.compression=0",
            "add",
            "-A",
            "-f",
        ],
    )?;
    let tree = run(dir, &["write-tree"])?;
    let tree = String::from_utf8_lossy(&tree).trim().to_string();
    let input = stream(record, &tree)?;
    let args = [
        "-c",
        "pack.compression=0",
        "fast-import",
        "--quiet",
        "--done",
    ];
    let mut child = crate::gitcmd::command_bytewise()
        .args(args)
        .current_dir(dir)
        // fast-import allocates and frees a compressor per object; glibc would give the
        // memory back to the system each time (four-fifths of the time on long histories).
        .env("MALLOC_TOP_PAD_", "67108864")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| git_failed(dir, &args, format!("git could not be started: {e}")))?;
    let stdin = child.stdin.take();
    let written = std::thread::scope(|s| {
        let writer = s.spawn(move || match stdin {
            Some(mut w) => w.write_all(&input),
            None => Ok(()),
        });
        let out = child.wait_with_output();
        (writer.join(), out)
    });
    let out = match written {
        (_, Err(e)) => Err(e.to_string()),
        (Ok(Ok(())), Ok(o)) if o.status.success() => Ok(()),
        (_, Ok(o)) => Err(String::from_utf8_lossy(&o.stderr).trim().to_string()),
    };
    out.map_err(|detail| git_failed(dir, &args, detail))
}

/// The message of the commit SWE-bench's image makes after its setup.
pub const SETUP_COMMIT_MESSAGE: &str = "SWE-bench";

/// Commits what the context's setup (`pre_install`) changed in the work tree `dir`, as
/// SWE-bench's image does after its setup (`git commit --allow-empty -am SWE-bench`, with
/// nothing changed too): evaluation starts from that commit, so patches apply to it, the
/// test files go back to it, and `git describe` counts it, as in SWE-bench's image. The same
/// identity and date as HEAD's, so the commit id is the same everywhere.
pub fn commit_setup(dir: &Path, record: Option<&VcsRecord>) -> Result<(), VcsError> {
    let (secs, tz) = match record {
        Some(r) => r.date().map_err(|e| VcsError::Malformed(e.to_string()))?,
        None => NO_RECORD_DATE,
    };
    let when = format!("{secs} {tz}");
    run(dir, &["add", "-A", "-f"])?;
    let args = [
        "commit",
        "-q",
        "--allow-empty",
        "--no-verify",
        "-m",
        SETUP_COMMIT_MESSAGE,
    ];
    run_with(
        dir,
        &args,
        crate::gitcmd::command_bytewise()
            .env("GIT_AUTHOR_DATE", &when)
            .env("GIT_COMMITTER_DATE", &when),
    )
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_work_trees_files_share_one_time_and_git_keeps_its_own() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::create_dir_all(t.path().join(".git")).unwrap();
        let (generated, source, git) = (
            src.join("lexer.c"),
            src.join("lexer.l"),
            t.path().join(".git/HEAD"),
        );
        for (f, secs) in [(&generated, 100), (&source, 200), (&git, 300)] {
            std::fs::write(f, "x").unwrap();
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
            std::fs::File::open(f).unwrap().set_modified(at).unwrap();
        }
        let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000);
        one_instant(t.path(), when).unwrap();
        let mtime = |f: &Path| std::fs::metadata(f).unwrap().modified().unwrap();
        assert_eq!(mtime(&generated), when);
        assert_eq!(
            mtime(&source),
            when,
            "no longer newer than what it generates"
        );
        assert_ne!(mtime(&git), when, ".git is left alone");
    }

    fn tag(name: &str, distance: u64, annotated: bool) -> TagRecord {
        TagRecord {
            annotated,
            distance,
            name: name.into(),
        }
    }

    #[test]
    fn placements_keep_describes_order() {
        let cases = [
            // In order, apart: each at its distance.
            (vec![tag("b", 3, true), tag("a", 9, false)], vec![3, 9]),
            // describe preferred a farther tag (a merge): the nearer one goes below it.
            (vec![tag("far", 7, true), tag("near", 2, true)], vec![7, 7]),
            (vec![tag("far", 7, false), tag("near", 2, true)], vec![7, 8]),
            // Two lightweight tags on one commit: git keeps the first by name.
            (vec![tag("v2", 4, false), tag("v1", 4, false)], vec![4, 5]),
            (vec![tag("v1", 4, false), tag("v2", 4, false)], vec![4, 4]),
            // An annotated tag after a lightweight one on one commit would win: moved down.
            (
                vec![
                    tag("light", 0, false),
                    tag("ann", 0, true),
                    tag("z", 1, false),
                ],
                vec![0, 1, 1],
            ),
        ];
        for (tags, want) in cases {
            assert_eq!(placements(&tags), want, "{tags:?}");
        }
    }
}
