//! The split of a real `git diff` into the gold patch and the test patch loses nothing: both
//! halves applied to the base commit give the pull request's tree, byte for byte and mode for
//! mode.

mod common;
use common::*;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use swe_ark::collect::rules::{is_test_path, split_diff};

fn put(root: &Path, rel: &str, content: &[u8]) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

fn chmod(root: &Path, rel: &str, mode: u32) {
    fs::set_permissions(root.join(rel), fs::Permissions::from_mode(mode)).unwrap();
}

/// Forty lines, so that a small change keeps a file similar enough to be seen as renamed.
fn lines(tag: &str) -> String {
    (0..40).map(|i| format!("{tag} line {i}\n")).collect()
}

fn binary(seed: u8) -> Vec<u8> {
    (0..3000u32)
        .map(|i| {
            if i % 7 == 0 {
                0
            } else {
                (i as u8).wrapping_mul(seed)
            }
        })
        .collect()
}

#[test]
fn split_patches_applied_to_the_base_give_the_head_tree() {
    let ctx = TestContext::new();
    let repo = ctx.path("repo");
    fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);

    // The base commit.
    put(&repo, "src/core.py", b"def f():\n    return 1\n");
    put(&repo, "src/remove_me.py", lines("removed").as_bytes());
    put(&repo, "src/old_name.py", lines("renamed").as_bytes());
    put(&repo, "tests/test_old.py", lines("test renamed").as_bytes());
    put(&repo, "tests/test_gone.py", b"def test_gone(): pass\n");
    put(&repo, "lib/a b/c.py", lines("ambiguous").as_bytes());
    put(&repo, "x b/y.py", b"spaces\n");
    put(&repo, "scripts/run.sh", b"#!/bin/sh\necho run\n");
    put(&repo, "data/blob.bin", &binary(3));
    put(&repo, "docs/naïve notes.txt", b"first\n");
    put(&repo, "src/latest/util.py", b"X = 1\n");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    let base = git(&repo, &["rev-parse", "HEAD"]);

    // The pull request's head.
    put(&repo, "src/core.py", b"def f():\n    return 2\n");
    fs::remove_file(repo.join("src/remove_me.py")).unwrap();
    fs::remove_file(repo.join("tests/test_gone.py")).unwrap();
    fs::remove_file(repo.join("src/old_name.py")).unwrap();
    put(
        &repo,
        "src/new_name.py",
        format!("{}one more\n", lines("renamed")).as_bytes(),
    );
    fs::remove_file(repo.join("tests/test_old.py")).unwrap();
    put(
        &repo,
        "tests/test_renamed.py",
        lines("test renamed").as_bytes(),
    );
    fs::remove_file(repo.join("lib/a b/c.py")).unwrap();
    put(&repo, "lib/a b/d.py", lines("ambiguous").as_bytes());
    put(&repo, "x b/y.py", b"spaces changed\n");
    chmod(&repo, "scripts/run.sh", 0o755);
    put(&repo, "data/blob.bin", &binary(5));
    put(&repo, "docs/naïve notes.txt", b"second\n");
    put(
        &repo,
        "tests/test_core.py",
        b"from src.core import f\n\ndef test_f():\n    assert f() == 2\n",
    );
    put(&repo, "tests/fixtures/café data.bin", &binary(7));
    put(&repo, "src/latest/util.py", b"X = 2\n");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "the pull request"]);
    let head_tree = git(&repo, &["rev-parse", "HEAD^{tree}"]);

    let diff = git_raw(&repo, &["diff", "--binary", "-M", &base, "HEAD"]);
    let diff = String::from_utf8(diff).expect("the diff is UTF-8");
    // The fixture exercises what it claims to.
    for needle in [
        "rename from src/old_name.py",
        "rename from lib/a b/c.py",
        "deleted file mode",
        "new file mode",
        "old mode 100644\nnew mode 100755",
        "GIT binary patch",
        "diff --git \"a/docs/na\\303\\257ve notes.txt\"",
        "\"b/tests/fixtures/caf\\303\\251 data.bin\"",
        "diff --git a/x b/y.py b/x b/y.py",
    ] {
        assert!(diff.contains(needle), "no `{needle}` in the diff:\n{diff}");
    }

    let split = split_diff(&diff).expect("a git diff splits");
    let mut gold = split.gold_files.clone();
    gold.sort();
    let mut tests = split.test_files.clone();
    tests.sort();
    assert_eq!(
        gold,
        vec![
            "data/blob.bin",
            "docs/naïve notes.txt",
            "lib/a b/d.py",
            "scripts/run.sh",
            "src/core.py",
            "src/new_name.py",
            "src/remove_me.py",
            "x b/y.py",
        ]
    );
    assert_eq!(
        tests,
        vec![
            "src/latest/util.py",
            "tests/fixtures/café data.bin",
            "tests/test_core.py",
            "tests/test_gone.py",
            "tests/test_renamed.py",
        ]
    );
    assert!(tests.iter().all(|p| is_test_path(p)));
    assert!(gold.iter().all(|p| !is_test_path(p)));
    // Every section is kept: the two halves hold the whole diff, byte for byte.
    assert_eq!(
        split.patch.len() + split.test_patch.len(),
        diff.len(),
        "sections were lost or repeated"
    );
    assert!(split.test_patch.contains("rename to tests/test_renamed.py"));
    assert!(split.patch.contains("rename to lib/a b/d.py"));

    // Apply the gold patch, then the test patch, onto a checkout of the base.
    let work = ctx.path("work");
    detached_worktree(&repo, &work, &base);
    fs::write(ctx.path("gold.diff"), &split.patch).unwrap();
    fs::write(ctx.path("test.diff"), &split.test_patch).unwrap();
    for patch in ["gold.diff", "test.diff"] {
        let p = ctx.path(patch);
        git(&work, &["apply", "--binary", p.to_str().unwrap()]);
    }
    git(&work, &["add", "-A"]);
    assert_eq!(git(&work, &["write-tree"]), head_tree);

    // And the gold patch alone gives the head tree without the test files' changes.
    let gold_only = ctx.path("gold-only");
    detached_worktree(&repo, &gold_only, &base);
    let p = ctx.path("gold.diff");
    git(&gold_only, &["apply", "--binary", p.to_str().unwrap()]);
    assert!(gold_only.join("tests/test_gone.py").exists());
    assert!(!gold_only.join("tests/test_core.py").exists());
    assert!(!gold_only.join("src/remove_me.py").exists());
    let exe = fs::metadata(gold_only.join("scripts/run.sh")).unwrap();
    assert_eq!(exe.permissions().mode() & 0o111, 0o111);
    assert_eq!(
        fs::read(gold_only.join(OsStr::from_bytes("docs/naïve notes.txt".as_bytes()))).unwrap(),
        b"second\n"
    );
    assert_eq!(
        fs::read(gold_only.join("data/blob.bin")).unwrap(),
        binary(5)
    );
}

/// Checks `commit` of `repo` out at `dir`, as a detached work tree.
fn detached_worktree(repo: &Path, dir: &Path, commit: &str) {
    let dir = dir.to_str().unwrap();
    git(repo, &["worktree", "add", "-q", "--detach", dir, commit]);
}

/// The published Lite dev split: joining each instance's gold and test patches and splitting
/// them again by our rules gives back exactly the published two halves.
#[test]
fn the_split_reproduces_the_published_lite_dev_patches() {
    let Some(path) = lite_dev() else {
        return;
    };
    let text = std::fs::read_to_string(&path).unwrap();
    let mut checked = 0;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let patch = v["patch"].as_str().unwrap();
        let test_patch = v["test_patch"].as_str().unwrap();
        let split = swe_ark::collect::rules::split_diff(&format!("{patch}{test_patch}"))
            .unwrap_or_else(|e| panic!("{}: {e}", v["instance_id"]));
        assert_eq!(split.patch, patch, "{}", v["instance_id"]);
        assert_eq!(split.test_patch, test_patch, "{}", v["instance_id"]);
        checked += 1;
    }
    assert_eq!(checked, 23);
}
