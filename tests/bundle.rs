//! The bundle format: determinism, the fixture snapshot, git tree ids, round trips, and
//! compatibility with GNU tar.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use common::*;

/// The optional members: spec, lock, logs and results, written beside the archive.
fn write_side_files(t: &TestContext) {
    let files = [
        (
            "spec.toml",
            "python = \"3.11\"\ntest_cmd = \"pytest -rA\"\n",
        ),
        (
            "pylock.toml",
            "lock-version = \"1.0\"\ncreated-by = \"swe-ark tests\"\n",
        ),
        ("pre.log", "tests/test_core.py::test_f FAILED\n"),
        ("post.log", "tests/test_core.py::test_f PASSED\n"),
        (
            "results.json",
            "{\"FAIL_TO_PASS\": [\"tests/test_core.py::test_f\"]}\n",
        ),
    ];
    for (name, content) in files {
        fs::write(t.path(name), content).unwrap();
    }
}

/// Packs the fixture with every optional member, as the snapshot test and others use it.
fn pack_full(t: &TestContext, codebase: &Path, extra: &[&str]) -> String {
    write_side_files(t);
    let inst = t.instance_file();
    let mut args: Vec<String> = vec![
        "pack".into(),
        "--instance".into(),
        inst.display().to_string(),
        "--codebase".into(),
        codebase.display().to_string(),
        "--spec".into(),
        "spec.toml".into(),
        "--lock".into(),
        "pylock.toml".into(),
        "--pre-log".into(),
        "pre.log".into(),
        "--post-log".into(),
        "post.log".into(),
        "--results".into(),
        "results.json".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    last_line(&t.run_expect(&args, 0).stdout)
}

fn set_mtimes(root: &Path, when: SystemTime) {
    for e in fs::read_dir(root).unwrap() {
        let p = e.unwrap().path();
        let meta = fs::symlink_metadata(&p).unwrap();
        if meta.is_dir() {
            set_mtimes(&p, when);
        } else if meta.is_file() {
            fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(when)
                .unwrap();
        }
    }
}

#[test]
fn fixture_bundle_id_matches_the_snapshot() {
    let t = TestContext::new();
    make_fixture_codebase(&t.path("cb"));
    let id = pack_full(&t, &t.path("cb"), &[]);
    let snapshot = Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots/fixture-bundle.sha256");
    let expected = fs::read_to_string(&snapshot).unwrap();
    assert_eq!(
        id,
        expected.trim(),
        "the fixture bundle's id changed: the bundle format (or the fixture) changed. If that is \
         intended, it is a new format version; otherwise find what made packing differ. \
         To accept it: echo {id} > {}",
        snapshot.display()
    );
}

#[test]
fn same_inputs_give_byte_identical_bundles_anywhere() {
    // The first packing: modes 0644/0755, umask 022, one zstd worker.
    let a = TestContext::new();
    make_fixture_codebase(&a.path("cb"));
    let id_a = pack_full(&a, &a.path("cb"), &["--threads", "1"]);

    // The second: another absolute path, umask-077-like modes, other mtimes, another umask for
    // the packing process, other thread count, another working directory.
    let b = TestContext::new();
    let cb_b = b.path("elsewhere/deeper/codebase");
    make_fixture_codebase_with_modes(&cb_b, 0o600, 0o700);
    set_mtimes(
        &cb_b,
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
    );
    write_side_files(&b);
    let inst = b.instance_file();
    // Quoted: the clone (and so the binary) may be at a path with spaces.
    let q = |p: &std::path::Path| swe_ark::shell::quote(&p.display().to_string());
    let script = format!(
        "umask 077 && cd {} && exec {} --ark {} --no-progress pack --threads 2 --instance {} \
         --codebase {} --spec {} --lock {} --pre-log {} --post-log {} --results {}",
        q(&b.path("elsewhere")),
        q(std::path::Path::new(env!("CARGO_BIN_EXE_swe-ark"))),
        q(&b.ark()),
        q(&inst),
        q(&cb_b),
        q(&b.path("spec.toml")),
        q(&b.path("pylock.toml")),
        q(&b.path("pre.log")),
        q(&b.path("post.log")),
        q(&b.path("results.json")),
    );
    let out = Command::new("sh").arg("-c").arg(&script).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let id_b = last_line(&out.stdout);

    assert_eq!(id_a, id_b);
    assert_eq!(
        fs::read(a.bundle_path(&id_a)).unwrap(),
        fs::read(b.bundle_path(&id_b)).unwrap(),
        "the compressed files differ"
    );
    // The id is the sha256 of the uncompressed tar.
    assert_eq!(sha256_hex(&decompress(&a.bundle_path(&id_a))), id_a);
}

#[test]
fn tar_layout_is_canonical() {
    let t = TestContext::new();
    make_fixture_codebase(&t.path("cb"));
    let id = t.pack(&t.path("cb"));
    let tar_bytes = decompress(&t.bundle_path(&id));
    let mut archive = tar::Archive::new(&tar_bytes[..]);
    let mut paths = Vec::new();
    for entry in archive.entries().unwrap() {
        let entry = entry.unwrap();
        let h = entry.header();
        assert_eq!(h.mtime().unwrap(), 0);
        assert_eq!(h.uid().unwrap(), 0);
        assert_eq!(h.gid().unwrap(), 0);
        assert_eq!(h.username_bytes().unwrap_or_default(), b"");
        assert_eq!(h.groupname_bytes().unwrap_or_default(), b"");
        assert!(h.as_ustar().is_some(), "every header is ustar");
        let mode = h.mode().unwrap();
        match h.entry_type() {
            tar::EntryType::Regular => assert!(mode == 0o644 || mode == 0o755, "mode {mode:o}"),
            tar::EntryType::Symlink => assert_eq!(mode, 0o777),
            other => panic!("unexpected entry type {other:?}"),
        }
        paths.push(entry.path_bytes().into_owned());
    }
    assert_eq!(paths[0], b"bundle.json");
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted, "members are sorted by path bytes");
    assert!(
        paths.iter().all(|p| !p.windows(4).any(|w| w == b".git")),
        "no .git"
    );
    assert!(paths.iter().any(|p| p.len() > 100), "a long path survives");
    assert!(
        paths.iter().any(|p| std::str::from_utf8(p).is_err()),
        "a non-UTF-8 name survives"
    );
    // Nothing after the two end-of-archive blocks.
    assert!(tar_bytes.len().is_multiple_of(512));
    assert!(tar_bytes[tar_bytes.len() - 1024..].iter().all(|&b| b == 0));
}

fn git_tree_matches(codebase: &Path) {
    let t = TestContext::new();
    let out = t.run_expect(
        &[
            "pack",
            "--json",
            "--instance",
            &t.instance_file().display().to_string(),
            "--codebase",
            &codebase.display().to_string(),
        ],
        0,
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ours = v["codebase_tree"].as_str().unwrap().to_string();
    git(codebase, &["init", "-q", "-b", "main"]);
    git(codebase, &["add", "-A"]);
    assert_eq!(ours, git(codebase, &["write-tree"]), "git write-tree");
    git(codebase, &["commit", "-q", "-m", "base"]);
    assert_eq!(ours, git(codebase, &["rev-parse", "HEAD^{tree}"]));
}

#[test]
fn codebase_tree_id_equals_gits() {
    let t = TestContext::new();
    let cb = t.path("cb");
    make_fixture_codebase(&cb);
    // Git refuses nested `.git`s; the pack leaves them out anyway.
    fs::remove_dir_all(cb.join(".git")).unwrap();
    fs::remove_file(cb.join("widgets/.git")).unwrap();
    git_tree_matches(&cb);
}

#[test]
fn codebase_tree_id_equals_gits_on_a_generated_tree() {
    // Names chosen to stress git's ordering: prefixes, separators that sort around `/`, digits,
    // spaces and Unicode; empty and executable files; links to files and directories.
    let t = TestContext::new();
    let cb = t.path("gen");
    let names = [
        "a", "a.b", "a-b", "a_b", "a0", "ab", "A", "z z", "é", "x.y.z", "-", "~",
    ];
    let mut n = 0u32;
    for (i, d1) in names.iter().enumerate() {
        for (j, d2) in names.iter().enumerate().take(6) {
            let dir = cb.join(d1).join(d2);
            fs::create_dir_all(&dir).unwrap();
            for (k, f) in names.iter().enumerate().take(3 + (i + j) % 4) {
                n += 1;
                let p = dir.join(f);
                fs::write(&p, format!("{i} {j} {k}\n").repeat(n as usize % 7)).unwrap();
                if (i + j + k) % 5 == 0 {
                    use std::os::unix::fs::PermissionsExt;
                    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
                }
            }
        }
        std::os::unix::fs::symlink(format!("{d1}/a"), cb.join(format!("link-{i}"))).unwrap();
    }
    fs::write(cb.join("a.b").join("a").join("empty"), b"").unwrap();
    git_tree_matches(&cb);
}

#[test]
fn unpack_restores_the_codebase_exactly() {
    let t = TestContext::new();
    let (cb, id) = t.packed_fixture();
    let out = t.run_expect(&["unpack", &id[..12], "-o", "out"], 0);
    assert_eq!(last_line(&out.stdout), id);
    let mut expected = tree_listing(&cb);
    expected.retain(|(p, _, _)| !p.starts_with(b".git") && p.as_slice() != b"widgets/.git");
    assert_eq!(tree_listing(&t.path("out/codebase")), expected);
    assert_eq!(
        fs::read_to_string(t.path("out/patches/test.diff")).unwrap(),
        serde_json::from_str::<serde_json::Value>(&fixture_instance_json()).unwrap()["test_patch"]
            .as_str()
            .unwrap()
    );
    let inst: serde_json::Value =
        serde_json::from_slice(&fs::read(t.path("out/instance.json")).unwrap()).unwrap();
    assert_eq!(
        inst["FAIL_TO_PASS"],
        serde_json::json!(["tests/test_core.py::test_f"])
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&fs::read(t.path("out/bundle.json")).unwrap()).unwrap();
    assert_eq!(manifest["format"], "swe-ark-bundle");
    assert_eq!(manifest["version"], 1);
    // The non-UTF-8 name is listed by its bytes in hex.
    let hex_name = hex::encode(b"codebase/data/caf\xe9-latin1.txt");
    assert!(
        manifest["members"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["path_hex"] == hex_name.as_str())
    );
}

#[test]
fn gnu_tar_reads_bundles_the_same_way() {
    let t = TestContext::new();
    let (_, id) = t.packed_fixture();
    fs::create_dir(t.path("by-tar")).unwrap();
    let status = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -o pipefail; zstd -dc {} | tar -xf - -C {}",
            t.bundle_path(&id).display(),
            t.path("by-tar").display()
        ))
        .status()
        .unwrap();
    assert!(status.success());
    t.run_expect(&["unpack", &id, "-o", "by-swe-ark"], 0);
    assert_eq!(
        tree_listing(&t.path("by-tar")),
        tree_listing(&t.path("by-swe-ark"))
    );
    // And `sha256sum` of the decompressed stream is the id, as the format page says.
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "zstd -dc {} | sha256sum",
            t.bundle_path(&id).display()
        ))
        .output()
        .unwrap();
    assert!(stdout(&out).starts_with(&id));
}

#[test]
fn a_different_codebase_gives_a_different_id() {
    let t = TestContext::new();
    let (cb, id1) = t.packed_fixture();
    // Only the executable bit changes.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(cb.join("setup.py"), fs::Permissions::from_mode(0o755)).unwrap();
    let id2 = t.pack(&cb);
    assert_ne!(id1, id2);
    // A symlink's target changes.
    fs::remove_file(cb.join("widgets-alias")).unwrap();
    std::os::unix::fs::symlink("widgets/", cb.join("widgets-alias")).unwrap();
    let id3 = t.pack(&cb);
    assert_ne!(id2, id3);
}
