//! A pack killed at any point leaves no visible partial bundle and an index that `verify`
//! reports clean. The crashes are real: the process aborts (as `kill -9` would leave it) or is
//! killed with SIGKILL while it writes.

mod common;

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use common::*;

fn bundle_files(t: &TestContext) -> Vec<String> {
    let dir = t.ark().join("bundles");
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn visible_bundles(t: &TestContext) -> Vec<String> {
    bundle_files(t)
        .into_iter()
        .filter(|n| !n.starts_with('.'))
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

fn listed_instances(t: &TestContext) -> usize {
    let out = t.run_expect(&["ls", "--json"], 0);
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .len()
}

/// Runs a pack that aborts at `point`; checks it died of the abort.
fn crash_at(t: &TestContext, point: &str) {
    let args = pack_args(t);
    // The archive exists before the crash, as it would after earlier work.
    t.run_expect(&["ls"], 2);
    fs::create_dir_all(t.ark()).unwrap();
    let out = t
        .cmd()
        .env("SWE_ARK_FAILPOINT", point)
        .args(&args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.signal(),
        Some(6),
        "aborted at {point}: {}",
        stderr(&out)
    );
}

fn recovers(t: &TestContext) {
    let id = last_line(&t.run_expect(&pack_args(t), 0).stdout);
    assert!(visible_bundles(t).contains(&format!("{id}.tar.zst")));
    assert_eq!(listed_instances(t), 1);
    t.run_expect(&["verify"], 0);
}

#[test]
fn abort_before_rename_leaves_no_visible_bundle() {
    let t = TestContext::new();
    crash_at(&t, "pack.before-rename");
    assert!(visible_bundles(&t).is_empty(), "{:?}", bundle_files(&t));
    assert!(
        bundle_files(&t).iter().any(|n| n.starts_with(".tmp-")),
        "the aborted write leaves only its temporary file"
    );
    assert_eq!(listed_instances(&t), 0);
    let out = t.run_expect(&["verify"], 0);
    assert!(stderr(&out).contains("temporary file"), "{}", stderr(&out));
    recovers(&t);
}

#[test]
fn kill_while_writing_the_tar_leaves_no_visible_bundle() {
    let t = TestContext::new();
    let args = pack_args(&t);
    let mut child = t
        .cmd()
        .env("SWE_ARK_FAILPOINT", "pack.mid-tar:stall")
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the pack is half-way through its tar, then kill it.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let reached = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.contains("failpoint `pack.mid-tar` reached"));
    assert!(reached, "the pack reached the middle of its tar");
    assert!(
        bundle_files(&t).iter().any(|n| n.starts_with(".tmp-")),
        "half a bundle is being written"
    );
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(9));
    assert!(visible_bundles(&t).is_empty(), "{:?}", bundle_files(&t));
    assert_eq!(listed_instances(&t), 0);
    t.run_expect(&["verify"], 0);
    recovers(&t);
}

#[test]
fn abort_between_rename_and_index_leaves_a_whole_unindexed_bundle() {
    let t = TestContext::new();
    crash_at(&t, "pack.before-index");
    let files = visible_bundles(&t);
    assert_eq!(files.len(), 1);
    // The file is complete: it verifies on its own.
    let path = t.ark().join("bundles").join(&files[0]);
    t.run_expect(&["verify", &path.display().to_string()], 0);
    assert_eq!(listed_instances(&t), 0);
    let out = t.run_expect(&["verify"], 0);
    assert!(stderr(&out).contains("does not list"), "{}", stderr(&out));
    recovers(&t);
}

#[test]
fn abort_inside_the_index_transaction_rolls_it_back() {
    let t = TestContext::new();
    crash_at(&t, "index.mid-transaction");
    // The instance row written before the abort is not there: the transaction never committed.
    assert_eq!(listed_instances(&t), 0);
    t.run_expect(&["verify"], 0);
    recovers(&t);
}
