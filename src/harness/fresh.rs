//! Each run from the state a fresh container would have. Multi-SWE-bench (like SWE-bench) runs
//! the run, test and fix phases each in a new container from the instance's image, so every
//! phase configures and builds from the image's tree. Here one work tree serves every
//! evaluation and run, so what a run leaves (a configured `build/`, an in-tree `make`'s
//! objects) would reach the next: cmake then prints no configure checks (which Catch2's parser
//! reads as tests), ctest orders by the last run's costs. For the kinds that ask for it
//! ([`crate::context::Kind::kept_between_runs`]), every file and directory that was not in the
//! tree at a recorded state, and is not under a kept path (a build cache whose reuse cannot
//! change a result, such as cargo's `target`), is removed before the next evaluation or run.
//! Files the tree had are left as they are; links are removed, never followed.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

/// The paths (relative to the tree) a tree held at one moment, `.git` and the kept paths left
/// out.
#[derive(Debug, Clone, Default)]
pub struct TreeState {
    paths: BTreeSet<PathBuf>,
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

impl TreeState {
    /// What `tree` holds now, but for `.git` and `kept`.
    pub fn of(tree: &Path, kept: &[&str]) -> io::Result<TreeState> {
        let mut paths = BTreeSet::new();
        walk(tree, kept, &mut |_, rel, _| {
            paths.insert(rel.to_path_buf());
            Ok(true)
        })?;
        Ok(TreeState { paths })
    }

    /// Removes from `tree` everything that is not in this state (but for `.git` and `kept`);
    /// returns how many files and directories were removed (a directory counts once).
    pub fn restore(&self, tree: &Path, kept: &[&str]) -> io::Result<usize> {
        let mut removed = 0;
        walk(tree, kept, &mut |path, rel, is_dir| {
            if self.paths.contains(rel) {
                return Ok(true);
            }
            if is_dir {
                remove_dir(path)?;
            } else {
                std::fs::remove_file(path)?;
            }
            removed += 1;
            Ok(false)
        })?;
        Ok(removed)
    }
}

/// Removes a directory a run made, making unreadable directories in it readable first (a
/// test may leave one, `chmod 000`, which only root could otherwise remove).
fn remove_dir(dir: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(first) if first.kind() == io::ErrorKind::PermissionDenied => {
            use std::os::unix::fs::PermissionsExt;
            let mut stack = vec![dir.to_path_buf()];
            while let Some(d) = stack.pop() {
                let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
                if let Ok(rd) = std::fs::read_dir(&d) {
                    for e in rd.flatten() {
                        if e.file_type().is_ok_and(|t| t.is_dir()) {
                            stack.push(e.path());
                        }
                    }
                }
            }
            std::fs::remove_dir_all(dir)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn what_a_run_made_is_removed_and_the_rest_kept() {
        let t = tempfile::tempdir().unwrap();
        let tree = t.path();
        fs::create_dir_all(tree.join(".git/objects")).unwrap();
        fs::create_dir_all(tree.join("src")).unwrap();
        fs::write(tree.join("src/a.c"), "a").unwrap();
        fs::create_dir_all(tree.join("target/debug")).unwrap();
        let state = TreeState::of(tree, &["target"]).unwrap();

        // What a run makes: a build directory (one of its directories unreadable), a file
        // beside the sources, a link to outside, a cache under a kept path, git's own files.
        fs::create_dir_all(tree.join("build/CMakeFiles/sealed")).unwrap();
        fs::write(tree.join("build/CMakeCache.txt"), "cache").unwrap();
        fs::write(tree.join("src/a.o"), "obj").unwrap();
        fs::write(tree.join("src/a.c"), "changed").unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("keep.txt"), "keep").unwrap();
        std::os::unix::fs::symlink(outside.path(), tree.join("out")).unwrap();
        fs::write(tree.join("target/debug/dep"), "dep").unwrap();
        fs::write(tree.join(".git/index"), "index").unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(
            tree.join("build/CMakeFiles/sealed"),
            fs::Permissions::from_mode(0o000),
        )
        .unwrap();
        fs::set_permissions(tree.join("build"), fs::Permissions::from_mode(0o500)).unwrap();

        let removed = state.restore(tree, &["target"]).unwrap();
        assert_eq!(removed, 3, "build, src/a.o and the link");
        assert!(!tree.join("build").exists());
        assert!(!tree.join("src/a.o").exists());
        assert!(fs::symlink_metadata(tree.join("out")).is_err());
        assert_eq!(
            fs::read_to_string(outside.path().join("keep.txt")).unwrap(),
            "keep"
        );
        // Files the tree had stay as the run left them; kept paths and .git are not touched.
        assert_eq!(fs::read_to_string(tree.join("src/a.c")).unwrap(), "changed");
        assert!(tree.join("target/debug/dep").exists());
        assert!(tree.join(".git/index").exists());
        // Restoring again finds nothing to remove.
        assert_eq!(state.restore(tree, &["target"]).unwrap(), 0);
    }
}
