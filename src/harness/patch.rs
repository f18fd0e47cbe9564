//! Applying a model's patch: untrusted input. Its paths are checked first (nothing absolute,
//! no `..`, nothing through a symlink), then the harness's ways are tried in its order
//! ([`apply`]). Also what is put back before the tests: the files the test patch touches
//! (`crate::harness::paths`) and those a prediction may not change because they decide
//! how tests are collected or reported ([`test_config_changes`]).

use std::path::{Component, Path};
use std::process::Command;

use crate::harness::paths::touched_paths;
use crate::logparse::Grading;

/// Why the patch may not be applied in `root`, if it may not.
pub fn unsafe_path(patch: &str, root: &Path) -> Option<String> {
    for p in touched_paths(patch) {
        let path = Path::new(&p);
        if path.is_absolute() {
            return Some(format!("the patch writes the absolute path `{p}`"));
        }
        let mut at = root.to_path_buf();
        for c in path.components() {
            match c {
                Component::Normal(name) => {
                    at.push(name);
                    if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
                        return Some(format!(
                            "the patch writes `{p}` through the symbolic link `{}`",
                            at.strip_prefix(root).unwrap_or(&at).display()
                        ));
                    }
                }
                Component::CurDir => {}
                _ => return Some(format!("the patch writes `{p}`, outside the codebase")),
            }
        }
    }
    None
}

fn git(src: &Path, args: &[&str]) -> std::process::Output {
    crate::gitcmd::output(src, args)
}

/// Puts the tree back to its commit: nothing the last attempt changed or added survives
/// (ignored files, such as an in-place build's, stay, as the harness's `git clean -fd` leaves
/// them).
pub fn reset(src: &Path) {
    for args in [
        &["reset", "-q", "--hard", "HEAD"][..],
        &["clean", "-q", "-f", "-d"],
    ] {
        // Byte for byte, as the tree was committed.
        let _ = crate::gitcmd::command_bytewise()
            .args(args)
            .current_dir(src)
            .output();
    }
}

/// The ways a model's patch is tried, in the harness's order (`GIT_APPLY_CMDS` of
/// `swebench/harness/run_evaluation.py`), the patch file's path appended to each.
fn ways(grading: Grading) -> &'static [&'static str] {
    match grading {
        Grading::Swebench5 => &[
            "git apply --verbose",
            "git apply --verbose --3way",
            "git apply --verbose --reject",
            "patch --batch --forward --fuzz=5 -p1 -i",
        ],
        Grading::Swebench4 => &[
            "git apply --verbose",
            "git apply --verbose --reject",
            "patch --batch --fuzz=5 -p1 -i",
        ],
    }
}

/// What swebench 5 says of a patch that every way refused but that `git apply --check
/// --reverse` finds already in the tree.
pub const ALREADY_APPLIED: &str = "already applied (git apply --check --reverse)";

/// Runs one way (`argv` then the patch file) in `src`: whether it exited 0, and its output.
fn attempt(src: &Path, argv: &[&str], file: &str) -> (bool, String) {
    let out = crate::gitcmd::hermetic(&mut Command::new(argv[0]))
        .args(&argv[1..])
        .arg(file)
        .current_dir(src)
        .output();
    match out {
        Ok(o) => (
            o.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
        ),
        Err(e) => (false, e.to_string()),
    }
}

/// Applies `patch_file` in the git work tree `src` as the harness of `grading` does; returns
/// the way that worked and the transcript of every attempt.
///
/// swebench 5 starts every attempt after the first from a clean tree (a failed `--reject`
/// leaves part of the patch behind), and when all fail, counts a patch that `git apply
/// --check --reverse` accepts as applied. swebench 4.1.0 runs its three ways one after the
/// other on whatever the last left. A patch that did not go in leaves the tree clean.
pub fn apply(src: &Path, patch_file: &Path, grading: Grading) -> (Option<&'static str>, String) {
    let file = patch_file.to_string_lossy().into_owned();
    let mut transcript = String::new();
    for (i, way) in ways(grading).iter().enumerate() {
        if i > 0 && grading == Grading::Swebench5 {
            reset(src);
        }
        let argv: Vec<&str> = way.split(' ').collect();
        let (ok, text) = attempt(src, &argv, &file);
        transcript.push_str(&format!(">>> {way}\n{text}\n"));
        if ok {
            return (Some(way), transcript);
        }
    }
    if grading == Grading::Swebench5 {
        let (ok, text) = attempt(src, &["git", "apply", "--check", "--reverse"], &file);
        transcript.push_str(&format!(">>> git apply --check --reverse\n{text}\n"));
        if ok {
            return (Some(ALREADY_APPLIED), transcript);
        }
    }
    reset(src);
    (None, transcript)
}

/// The files of the work tree, changed or added since its commit or named by the patch
/// (`patched`, which covers ignored files), that decide how tests are collected or reported
/// rather than what they test ([`is_test_config`]), with why each is one. `runner_scripts`
/// are the test command's own files (django's `tests/runtests.py`, sympy's `bin/test`).
pub fn test_config_changes(
    src: &Path,
    patched: &[String],
    runner_scripts: &[String],
) -> Vec<(String, &'static str)> {
    let out = git(
        src,
        &[
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--no-renames",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let changed = text
        .split('\0')
        .filter_map(|entry| entry.get(3..))
        .filter(|p| !p.is_empty())
        .map(str::to_string);
    let mut found = Vec::new();
    for path in changed.chain(patched.iter().cloned()) {
        let path = path.as_str();
        let why = if runner_scripts.iter().any(|r| r == path) {
            Some("the test command runs it")
        } else {
            is_test_config(path, || pytest_section_changed(src, path))
        };
        if let Some(why) = why {
            found.push((path.to_string(), why));
        }
    }
    found.sort();
    found.dedup();
    found
}

/// Why a file at `path` configures test collection or reporting, if it does: pytest's
/// `conftest.py` (any directory) and `pytest.ini`, Python's `sitecustomize.py`,
/// `usercustomize.py` and `.pth` files (run at every interpreter start), and `setup.cfg`,
/// `tox.ini` or `pyproject.toml` when `section_changed` says their pytest section changed.
fn is_test_config(path: &str, section_changed: impl Fn() -> bool) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    match name {
        "conftest.py" => Some("pytest loads it to collect and report tests"),
        "pytest.ini" => Some("it configures pytest"),
        "sitecustomize.py" | "usercustomize.py" => Some("Python runs it at every start"),
        _ if name.ends_with(".pth") => Some("Python runs it at every start"),
        "setup.cfg" | "tox.ini" | "pyproject.toml" if section_changed() => {
            Some("its pytest section changed")
        }
        _ => None,
    }
}

/// Whether the pytest section of the ini or toml file `path` differs between the commit and
/// the work tree (`[pytest]`, `[tool:pytest]`, `[tool.pytest.ini_options]` and its subtables).
fn pytest_section_changed(src: &Path, path: &str) -> bool {
    let before = git(src, &["show", &format!("HEAD:{path}")]);
    let before = if before.status.success() {
        String::from_utf8_lossy(&before.stdout).into_owned()
    } else {
        String::new()
    };
    let after = std::fs::read_to_string(src.join(path)).unwrap_or_default();
    pytest_section(&before) != pytest_section(&after)
}

/// The lines of a file's pytest sections, in order.
fn pytest_section(text: &str) -> Vec<&str> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            let header = t.trim_start_matches('[').trim_end_matches(']').trim();
            inside = header == "pytest"
                || header == "tool:pytest"
                || header == "tool.pytest"
                || header.starts_with("tool.pytest.");
        }
        if inside {
            out.push(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A git work tree at one commit holding `a.txt` = `text`.
    fn tree(text: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let out = crate::gitcmd::output(d.path(), args);
            assert!(out.status.success(), "{args:?}: {out:?}");
        };
        git(&["init", "-q"]);
        std::fs::write(d.path().join("a.txt"), text).unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "base"]);
        d
    }

    const ONE_TO_TWO: &str =
        "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n";

    #[test]
    fn the_ways_of_each_release() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("p.diff");
        std::fs::write(&file, ONE_TO_TWO).unwrap();
        // The first way works for both.
        for g in Grading::ALL {
            let t = tree("one\n");
            assert_eq!(apply(t.path(), &file, g).0, Some("git apply --verbose"));
            assert_eq!(
                std::fs::read_to_string(t.path().join("a.txt")).unwrap(),
                "two\n"
            );
        }
        // Already in the tree: swebench 5's reverse check counts it applied; 4.1.0's `patch`
        // (no --forward) takes it for a reversed patch in batch mode and undoes it, exit 0.
        let t = tree("two\n");
        let (way, transcript) = apply(t.path(), &file, Grading::Swebench5);
        assert_eq!(way, Some(ALREADY_APPLIED), "{transcript}");
        assert!(
            transcript.contains(">>> git apply --verbose --3way"),
            "{transcript}"
        );
        let t = tree("two\n");
        let (way, transcript) = apply(t.path(), &file, Grading::Swebench4);
        assert_eq!(way, Some("patch --batch --fuzz=5 -p1 -i"), "{transcript}");
        assert!(transcript.contains("Assuming -R"), "{transcript}");
        assert_eq!(
            std::fs::read_to_string(t.path().join("a.txt")).unwrap(),
            "one\n"
        );
        assert!(!transcript.contains("--3way"), "{transcript}");
        // Nothing applies: the tree is back as its commit has it.
        let t = tree("zero\n");
        let (way, _) = apply(t.path(), &file, Grading::Swebench5);
        assert_eq!(way, None);
        assert_eq!(
            std::fs::read_to_string(t.path().join("a.txt")).unwrap(),
            "zero\n"
        );
        assert!(!t.path().join("a.txt.rej").exists());
    }

    #[test]
    fn added_files_and_test_configuration() {
        let never = || panic!("not asked");
        assert!(is_test_config("a/b/conftest.py", never).is_some());
        assert!(is_test_config("pytest.ini", never).is_some());
        assert!(is_test_config("x/evil.pth", never).is_some());
        assert!(is_test_config("sitecustomize.py", never).is_some());
        assert!(is_test_config("src/conftest_helpers.py", never).is_none());
        assert!(is_test_config("setup.cfg", || true).is_some());
        assert!(is_test_config("setup.cfg", || false).is_none());
        let cfg = "[metadata]\nname = x\n[tool:pytest]\naddopts = -q\n[flake8]\nmax = 1\n";
        assert_eq!(pytest_section(cfg), vec!["[tool:pytest]", "addopts = -q"]);
        let toml = "[project]\n[tool.pytest.ini_options]\na = 1\n[tool.ruff]\n";
        assert_eq!(
            pytest_section(toml),
            vec!["[tool.pytest.ini_options]", "a = 1"]
        );
    }

    #[test]
    fn paths_are_read_and_unsafe_ones_refused() {
        let p = "diff --git a/src/x.py b/src/x.py\n--- a/src/x.py\t2020-01-01\n+++ b/src/x.py\n\
                 diff --git a/old b/new\nrename from old\nrename to new\n";
        assert_eq!(touched_paths(p), vec!["new", "old", "src/x.py"]);
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("src")).unwrap();
        std::os::unix::fs::symlink("/etc", d.path().join("link")).unwrap();
        assert_eq!(unsafe_path(p, d.path()), None);
        let up = "--- a/../etc/passwd\n+++ b/../etc/passwd\n";
        assert!(
            unsafe_path(up, d.path())
                .unwrap()
                .contains("outside the codebase")
        );
        let abs = "--- /etc/passwd\n+++ /etc/passwd\n";
        assert!(unsafe_path(abs, d.path()).unwrap().contains("absolute"));
        let through = "diff --git a/link/passwd b/link/passwd\n";
        assert!(
            unsafe_path(through, d.path())
                .unwrap()
                .contains("symbolic link `link`")
        );
    }
}
