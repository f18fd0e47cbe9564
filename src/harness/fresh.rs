//! Each run from the state a fresh container would have. Multi-SWE-bench (like SWE-bench) runs
//! the run, test and fix phases each in a new container from the instance's image, so every
//! phase configures and builds from the image's tree. Here one work tree serves every
//! evaluation and run, so what a run leaves (a configured `build/`, an in-tree `make`'s
//! objects) would reach the next: cmake then prints no configure checks (which Catch2's parser
//! reads as tests), ctest orders by the last run's costs. For the kinds that ask for it
//! ([`crate::context::Kind::kept_between_runs`]), every file and directory that was not in the
//! tree at a recorded state, and is not under a kept path (a build cache whose reuse cannot
//! change a result, such as cargo's `target`), is removed before the next evaluation or run,
//! and every file the tree had that a run changed or removed is put back as it was (a test
//! that rewrites a fixture, a build that regenerates a committed file). Links are removed,
//! never followed.
//!
//! What the files were is kept as git keeps a tree: a git index of the tree's own (a file of
//! the work directory, outside the tree), filled with `git add -A -f` at the recorded state,
//! whose blobs go into the tree's repository. Putting back asks that index which files
//! differ (`update-index --refresh`, then `diff-files`) and checks out only those, so files
//! no run touched keep their times (cargo does not rebuild what did not change).

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The paths (relative to the tree) a tree held at one moment, `.git` and the kept paths left
/// out, and a git index of its files then.
#[derive(Debug, Clone, Default)]
pub struct TreeState {
    paths: BTreeSet<PathBuf>,
    index: PathBuf,
}

/// Whether `rel` is `.git` or a kept path (or under one).
fn skipped(rel: &Path, kept: &[&str]) -> bool {
    rel.starts_with(".git") || kept.iter().any(|k| rel.starts_with(k))
}

/// Calls `each` with every path under `tree` (not following links), parents before their
/// children; `each` returns whether to look inside a directory.
fn walk(
    tree: &Path,
    kept: &[&str],
    each: &mut dyn FnMut(&Path, &Path, bool) -> io::Result<bool>,
) -> io::Result<()> {
    let mut stack = vec![tree.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)?
            .map(|e| e.map(|e| e.path()))
            .collect::<io::Result<_>>()?;
        entries.sort();
        for path in entries {
            let rel = path.strip_prefix(tree).unwrap_or(&path).to_path_buf();
            if skipped(&rel, kept) {
                continue;
            }
            let is_dir = std::fs::symlink_metadata(&path)?.is_dir();
            if each(&path, &rel, is_dir)? && is_dir {
                stack.push(path);
            }
        }
    }
    Ok(())
}

/// What putting a tree back did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Restored {
    /// Files and directories removed (a directory counts once).
    pub removed: usize,
    /// Files checked out again as they were (changed or removed by a run).
    pub put_back: usize,
}

/// `git ARGS` in `tree` with `index` as its index; stdin from `input` when given. Err: what git
/// said, as an I/O error naming the command.
fn git(tree: &Path, index: &Path, args: &[&str], input: Option<&[u8]>) -> io::Result<Vec<u8>> {
    let mut cmd = crate::gitcmd::command_bytewise();
    cmd.args(args)
        .current_dir(tree)
        .env("GIT_INDEX_FILE", index)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(bytes)?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out.stdout)
}

/// The pathspec of the whole tree but for `kept`.
fn pathspec(kept: &[&str]) -> Vec<String> {
    let mut spec = vec![".".to_string()];
    spec.extend(kept.iter().map(|k| format!(":(exclude){k}")));
    spec
}

impl TreeState {
    /// What `tree` holds now, but for `.git` and `kept`; its files go into a git index at
    /// `index` (made anew).
    pub fn of(tree: &Path, kept: &[&str], index: &Path) -> io::Result<TreeState> {
        let mut paths = BTreeSet::new();
        walk(tree, kept, &mut |_, rel, _| {
            paths.insert(rel.to_path_buf());
            Ok(true)
        })?;
        match std::fs::remove_file(index) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        // From the repository's own index, whose times spare hashing the files it knows.
        let own = tree.join(".git/index");
        if own.is_file() {
            std::fs::copy(&own, index)?;
        }
        let spec = pathspec(kept);
        let mut args = vec!["add", "-A", "-f", "--"];
        args.extend(spec.iter().map(String::as_str));
        git(tree, index, &args, None)?;
        Ok(TreeState {
            paths,
            index: index.to_path_buf(),
        })
    }

    /// Removes from `tree` everything that is not in this state (but for `.git` and `kept`),
    /// then checks out again every file of the state that differs from it or is gone.
    pub fn restore(&self, tree: &Path, kept: &[&str]) -> io::Result<Restored> {
        let mut removed = 0;
        walk(tree, kept, &mut |path, rel, is_dir| {
            if self.paths.contains(rel) {
                return Ok(true);
            }
            if is_dir {
                crate::fsutil::remove_tree(path)?;
            } else {
                std::fs::remove_file(path)?;
            }
            removed += 1;
            Ok(false)
        })?;
        // `--refresh` exits 1 when files differ: what differs is asked next.
        let _ = git(
            tree,
            &self.index,
            &["update-index", "-q", "--refresh"],
            None,
        );
        // Only outside the kept paths (the copied index may hold committed files there).
        let spec = pathspec(kept);
        let mut args = vec!["diff-files", "--name-only", "-z", "--"];
        args.extend(spec.iter().map(String::as_str));
        let changed = git(tree, &self.index, &args, None)?;
        let put_back = changed.split(|b| *b == 0).filter(|p| !p.is_empty()).count();
        if put_back > 0 {
            git(
                tree,
                &self.index,
                &["checkout-index", "-f", "-z", "--stdin"],
                Some(&changed),
            )?;
        }
        Ok(Restored { removed, put_back })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn git_init(tree: &Path) {
        for args in [
            &["init", "-q"][..],
            &["add", "-A"],
            &["commit", "-q", "-m", "base"],
        ] {
            let out = crate::gitcmd::output(tree, args);
            assert!(out.status.success(), "{args:?}: {out:?}");
        }
    }

    #[test]
    fn what_a_run_made_is_removed_and_what_it_changed_put_back() {
        let t = tempfile::tempdir().unwrap();
        let tree = &t.path().join("src");
        fs::create_dir_all(tree.join("src")).unwrap();
        fs::write(tree.join("src/a.c"), "a").unwrap();
        fs::write(tree.join("src/b.c"), "b").unwrap();
        fs::write(tree.join("src/c.c"), "c").unwrap();
        fs::create_dir_all(tree.join("target")).unwrap();
        fs::write(tree.join("target/committed"), "old").unwrap();
        git_init(tree);
        // After the base commit: a patch's new file, and a cache under a kept path.
        fs::write(tree.join("src/new_test.c"), "test").unwrap();
        fs::create_dir_all(tree.join("target/debug")).unwrap();
        let untouched = fs::metadata(tree.join("src/c.c"))
            .unwrap()
            .modified()
            .unwrap();
        let state = TreeState::of(tree, &["target"], &t.path().join("state.index")).unwrap();

        // What a run makes: a build directory (one of its directories unreadable), a file
        // beside the sources, a link to outside, a cache under a kept path, git's own files;
        // what it changes: a committed file rewritten, one removed, the patch's file edited.
        fs::create_dir_all(tree.join("build/CMakeFiles/sealed")).unwrap();
        fs::write(tree.join("build/CMakeCache.txt"), "cache").unwrap();
        fs::write(tree.join("src/a.o"), "obj").unwrap();
        fs::write(tree.join("src/a.c"), "changed").unwrap();
        fs::remove_file(tree.join("src/b.c")).unwrap();
        fs::write(tree.join("src/new_test.c"), "edited").unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("keep.txt"), "keep").unwrap();
        std::os::unix::fs::symlink(outside.path(), tree.join("out")).unwrap();
        fs::write(tree.join("target/debug/dep"), "dep").unwrap();
        fs::write(tree.join("target/committed"), "new").unwrap();
        fs::write(tree.join(".git/description"), "changed by git").unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(
            tree.join("build/CMakeFiles/sealed"),
            fs::Permissions::from_mode(0o000),
        )
        .unwrap();
        fs::set_permissions(tree.join("build"), fs::Permissions::from_mode(0o500)).unwrap();

        let restored = state.restore(tree, &["target"]).unwrap();
        assert_eq!(restored.removed, 3, "build, src/a.o and the link");
        assert_eq!(restored.put_back, 3, "a.c, b.c and new_test.c");
        assert!(!tree.join("build").exists());
        assert!(!tree.join("src/a.o").exists());
        assert!(fs::symlink_metadata(tree.join("out")).is_err());
        assert_eq!(
            fs::read_to_string(outside.path().join("keep.txt")).unwrap(),
            "keep"
        );
        for (file, text) in [
            ("a.c", "a"),
            ("b.c", "b"),
            ("c.c", "c"),
            ("new_test.c", "test"),
        ] {
            assert_eq!(
                fs::read_to_string(tree.join("src").join(file)).unwrap(),
                text
            );
        }
        // A file no run touched keeps its time; kept paths and .git are not touched.
        let now = fs::metadata(tree.join("src/c.c"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(now, untouched);
        assert!(tree.join("target/debug/dep").exists());
        assert_eq!(
            fs::read_to_string(tree.join("target/committed")).unwrap(),
            "new"
        );
        assert_eq!(
            fs::read_to_string(tree.join(".git/description")).unwrap(),
            "changed by git"
        );
        // Restoring again finds nothing to do.
        assert_eq!(
            state.restore(tree, &["target"]).unwrap(),
            Restored::default()
        );
    }

    #[test]
    fn files_come_back_byte_for_byte_whatever_the_attributes_say() {
        // jq's decNumber files: committed with CRLF, under `* text=auto eol=lf`.
        let t = tempfile::tempdir().unwrap();
        let tree = &t.path().join("src");
        fs::create_dir_all(tree.join("vendor")).unwrap();
        fs::write(tree.join(".gitattributes"), "* text=auto eol=lf\n").unwrap();
        let crlf = b"int a;\r\nint b;\r\n";
        fs::write(tree.join("vendor/dec.c"), crlf).unwrap();
        crate::vcs::build_work_tree(tree, None).unwrap();
        let state = TreeState::of(tree, &[], &t.path().join("state.index")).unwrap();
        fs::write(tree.join("vendor/dec.c"), "changed by a run\n").unwrap();
        let restored = state.restore(tree, &[]).unwrap();
        assert_eq!(restored.put_back, 1);
        assert_eq!(fs::read(tree.join("vendor/dec.c")).unwrap(), crlf);
        // The tree's own commit holds the file as it is, as the repository's blob does.
        let out = crate::gitcmd::command()
            .args(["cat-file", "blob", "HEAD:vendor/dec.c"])
            .current_dir(tree)
            .output()
            .unwrap();
        assert_eq!(out.stdout, crlf);
    }
}
