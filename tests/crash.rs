//! A pack or gc killed at any point leaves no visible partial pack, an index that `verify`
//! reports clean, and every bundle readable; running it again finishes the job. The crashes
//! are real: the process aborts (as `kill -9` would leave it) or is killed with SIGKILL while
//! it writes.

mod common;

use std::ffi::OsStr;
use std::fs;
use std::io::{BufRead, BufReader, Lines};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStderr, Stdio};

use common::*;

fn pack_dir_files(t: &TestContext) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(t.ark().join("packs"))
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn temp_files(t: &TestContext) -> Vec<String> {
    pack_dir_files(t)
        .into_iter()
        .filter(|n| n.starts_with(".tmp-"))
        .collect()
}

fn pack_args(t: &TestContext) -> Vec<String> {
    if !t.path("cb").exists() {
        make_fixture_codebase(&t.path("cb"));
    }
    vec![
        "pack".into(),
        "--instance".into(),
        t.instance_file().display().to_string(),
        "--codebase".into(),
        t.path("cb").display().to_string(),
    ]
}

/// Runs swe-ark with `args`, aborting at `point`; checks it died of the abort.
fn crash_running(t: &TestContext, point: &str, args: &[String]) {
    let out = t
        .cmd()
        .env("SWE_ARK_FAILPOINT", point)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.signal(),
        Some(6),
        "aborted at {point}: {}",
        stderr(&out)
    );
}

/// Runs a pack that aborts at `point`.
fn crash_at(t: &TestContext, point: &str) {
    let args = pack_args(t);
    // The archive exists before the crash, as it would after earlier work.
    t.run_expect(&["ls"], 2);
    fs::create_dir_all(t.ark()).unwrap();
    crash_running(t, point, &args);
}

/// Starts `swe-ark args` and returns once it is stalled half-way through writing its pieces
/// (failpoint `pack.mid-store`), with its stderr, kept open.
fn stalled<S: AsRef<OsStr>>(t: &TestContext, args: &[S]) -> (Child, Lines<BufReader<ChildStderr>>) {
    let mut child = t
        .cmd()
        .env("SWE_ARK_FAILPOINT", "pack.mid-store:stall")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let reached = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.contains("failpoint `pack.mid-store` reached"));
    assert!(reached, "the pack reached the middle of its pieces");
    (child, lines)
}

/// After a crash: no instance is listed and the archive verifies; returns what verify noted
/// (its stderr).
fn nothing_listed(t: &TestContext) -> String {
    assert_eq!(t.listed_instances(), 0);
    stderr(&t.run_expect(&["verify"], 0))
}

fn recovers(t: &TestContext) {
    let id = last_line(&t.run_expect(&pack_args(t), 0).stdout);
    assert_eq!(t.listed_instances(), 1);
    t.run_expect(&["verify"], 0);
    t.run_expect(&["unpack", &id, "-o", "recovered"], 0);
    // gc sweeps what the crash left; nothing the bundle needs.
    t.run_expect(&["gc"], 0);
    assert!(temp_files(t).is_empty(), "{:?}", pack_dir_files(t));
    assert_eq!(t.pack_files().len(), 1);
    let out = t.run_expect(&["verify"], 0);
    assert!(!stderr(&out).contains("note:"), "{}", stderr(&out));
}

#[test]
fn abort_before_rename_leaves_no_visible_pack() {
    let t = TestContext::new();
    crash_at(&t, "pack.before-rename");
    assert!(t.pack_files().is_empty(), "{:?}", pack_dir_files(&t));
    assert_eq!(
        temp_files(&t).len(),
        1,
        "the aborted write leaves only its temporary file"
    );
    let noted = nothing_listed(&t);
    assert!(noted.contains("temporary file"), "{noted}");
    recovers(&t);
}

#[test]
fn kill_while_writing_the_pack_leaves_no_visible_pack() {
    let t = TestContext::new();
    // Wait until the pack is half-way through its pieces, then kill it.
    let (mut child, _stderr) = stalled(&t, &pack_args(&t));
    assert_eq!(temp_files(&t).len(), 1, "half a pack is being written");
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(9));
    assert!(t.pack_files().is_empty(), "{:?}", pack_dir_files(&t));
    nothing_listed(&t);
    recovers(&t);
}

#[test]
fn abort_while_hashing_the_tar_leaves_nothing_listed() {
    let t = TestContext::new();
    // The tar is hashed while the pieces are written, on two threads: the abort may come
    // before the pack is complete (a temporary file is left) or after it was renamed into
    // place (a whole pack that the index does not name). Either way nothing is listed, the
    // archive verifies, and gc removes what was left.
    crash_at(&t, "pack.mid-tar");
    assert!(
        temp_files(&t).len() + t.pack_files().len() <= 1,
        "{:?}",
        pack_dir_files(&t)
    );
    nothing_listed(&t);
    recovers(&t);
}

#[test]
fn abort_between_rename_and_index_leaves_a_whole_unindexed_pack() {
    let t = TestContext::new();
    crash_at(&t, "pack.before-index");
    assert_eq!(t.pack_files().len(), 1);
    let noted = nothing_listed(&t);
    assert!(noted.contains("the index does not name"), "{noted}");
    // Packing again writes the same pack (same name) and indexes it.
    let stray = t.pack_files();
    recovers(&t);
    assert_eq!(t.pack_files(), stray);
}

#[test]
fn abort_inside_the_index_transaction_rolls_it_back() {
    let t = TestContext::new();
    crash_at(&t, "index.mid-transaction");
    // The instance row written before the abort is not there: the transaction never committed.
    nothing_listed(&t);
    recovers(&t);
}

/// An archive where gc has work: two bundles, the first removed, its pack holding pieces the
/// second needs and pieces only it had. Returns the second's id and its exported bytes.
fn gc_work(t: &TestContext) -> (String, Vec<u8>) {
    let cb = t.path("cb");
    make_fixture_codebase(&cb);
    fs::write(cb.join("widgets/only-in-42.py"), "x = 42\n".repeat(50)).unwrap();
    let a = t.pack(&cb);
    fs::remove_file(cb.join("widgets/only-in-42.py")).unwrap();
    fs::write(cb.join("widgets/core.py"), "def f(): return 2\n").unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&fixture_instance_json()).unwrap();
    v["instance_id"] = "acme__widgets-43".into();
    fs::write(t.path("inst43.json"), v.to_string()).unwrap();
    let b = last_line(
        &t.run_expect(
            &["pack", "--instance", "inst43.json", "--codebase", "cb"],
            0,
        )
        .stdout,
    );
    t.run_expect(&["rm", &a], 0);
    let bytes = fs::read(t.bundle_path(&b)).unwrap();
    (b, bytes)
}

fn gc_finishes(t: &TestContext, b: &str, bytes: &[u8]) {
    t.run_expect(&["verify"], 0);
    assert_eq!(fs::read(t.bundle_path(b)).unwrap(), bytes);
    let gc: serde_json::Value =
        serde_json::from_slice(&t.run_expect(&["gc", "--json"], 0).stdout).unwrap();
    let again: serde_json::Value =
        serde_json::from_slice(&t.run_expect(&["gc", "--json"], 0).stdout).unwrap();
    assert_eq!(again["dead_pieces"], 0, "{gc} then {again}");
    assert_eq!(again["packs_rewritten"], 0, "{again}");
    assert!(temp_files(t).is_empty(), "{:?}", pack_dir_files(t));
    let out = t.run_expect(&["verify"], 0);
    assert!(!stderr(&out).contains("note:"), "{}", stderr(&out));
    assert_eq!(fs::read(t.bundle_path(b)).unwrap(), bytes);
}

#[test]
fn gc_killed_at_any_point_leaves_the_archive_whole() {
    for point in [
        "pack.before-rename",
        "gc.before-index",
        "index.mid-transaction",
        "gc.before-delete",
    ] {
        let t = TestContext::new();
        let (b, bytes) = gc_work(&t);
        let packs_before = t.pack_files();
        crash_running(&t, point, &["gc".to_string()]);
        match point {
            // The index did not change: the old packs are all there.
            "pack.before-rename" | "gc.before-index" | "index.mid-transaction" => {
                for p in &packs_before {
                    assert!(p.exists(), "{point}: {} went", p.display());
                }
            }
            // The index changed; the replaced pack is still on disk, named by nothing.
            _ => {
                let out = t.run_expect(&["verify"], 0);
                assert!(
                    stderr(&out).contains("the index does not name"),
                    "{point}: {}",
                    stderr(&out)
                );
            }
        }
        gc_finishes(&t, &b, &bytes);
    }
}

#[test]
fn gc_refuses_to_run_while_another_process_uses_the_store() {
    let t = TestContext::new();
    let (b, bytes) = gc_work(&t);
    // A pack in progress (stopped half-way through writing its pieces) holds the store.
    let cb = t.path("cb-other");
    fs::create_dir_all(&cb).unwrap();
    for i in 0..8 {
        fs::write(cb.join(format!("m{i}.py")), format!("x = {i}\n").repeat(30)).unwrap();
    }
    let inst = t.instance_file();
    let args = [
        "pack",
        "--instance",
        inst.to_str().unwrap(),
        "--codebase",
        cb.to_str().unwrap(),
    ];
    let (mut child, _stderr) = stalled(&t, &args);
    let err = stderr(&t.run_expect(&["gc"], 2));
    assert!(err.contains("another swe-ark process"), "{err}");
    child.kill().unwrap();
    child.wait().unwrap();
    // The pack is gone; gc now runs, and sweeps its temporary file.
    gc_finishes(&t, &b, &bytes);
}
