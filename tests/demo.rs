//! `swe-ark demo` end to end, offline: the pipeline on the demo's own upstream repository and
//! GitHub API, with the package index served locally from the wheels `make test` fetched.

mod common;

use common::TestContext;
use common::pyfix;
use common::pyindex::PyIndex;

#[test]
fn the_demo_runs_the_whole_pipeline_and_every_check_holds() {
    let Some((version, _python)) = pyfix::python() else {
        eprintln!("skipped: no Python 3.9-3.13 on this machine");
        return;
    };
    let Some(wheels) = pyfix::test_wheels() else {
        eprintln!("skipped: no pytest wheels in .tools/test-wheels (`make test` fetches them)");
        return;
    };
    let t = TestContext::new();
    let index = PyIndex::start(&wheels);
    let dir = t.path("demo");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_swe-ark"))
        .args(["--no-progress", "demo", "--json", "--python", &version])
        .arg("--dir")
        .arg(&dir)
        .arg("--index-url")
        .arg(index.url())
        .current_dir(t.path(""))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let ids = |v: &serde_json::Value| -> Vec<String> {
        let mut ids: Vec<String> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(
        ids(&s["collected"]),
        [
            "demo__calc-11",
            "demo__calc-13",
            "demo__calc-2",
            "demo__calc-4",
            "demo__calc-9"
        ]
    );
    assert_eq!(s["dropped_by_collect"]["#5"], "it resolves no issue");
    assert_eq!(s["dropped_by_collect"]["#7"], "it changes no test file");
    // The list, then for each merged pull request its commits; the diff of the six that
    // link an issue; the issue and its comments for the five that change a test.
    assert_eq!(s["api_requests"], 1 + 7 + 6 + 5 * 2);
    assert_eq!(s["api_requests_rerun"], 1);
    assert_eq!(s["api_not_modified_rerun"], 1);
    assert_eq!(
        ids(&s["kept"]),
        [
            "demo__calc-13",
            "demo__calc-2",
            "demo__calc-4",
            "demo__calc-9"
        ]
    );
    assert!(
        s["dropped_by_validate"]["demo__calc-11"]
            .as_str()
            .unwrap()
            .starts_with("no-fail-to-pass"),
        "{}",
        s["dropped_by_validate"]
    );
    assert_eq!(
        s["flaky"]["demo__calc-4"],
        serde_json::json!(["tests/test_timing.py::test_clamp_is_quick"])
    );
    assert_eq!(s["bundles"].as_object().unwrap().len(), 4);
    assert_eq!(s["release_root"].as_str().unwrap().len(), 64);
    assert_eq!(s["gold_total"], 4);
    assert_eq!(s["gold_resolved"], 4);
    assert_eq!(
        s["predictions"],
        serde_json::json!({
            "demo__calc-13": "patch-apply-failed",
            "demo__calc-2": "resolved",
            "demo__calc-4": "unresolved",
            "demo__calc-9": "empty-patch",
        })
    );
    assert_eq!(s["release_verified"], true);
    assert_eq!(s["verified"], true);
    assert_eq!(s["tamper_caught"], true);
    assert_eq!(s["rebuilt_identical"], true);
    // Four instances of one repository: the store keeps their shared files once.
    let (logical, stored) = (
        s["bundles_logical_bytes"].as_u64().unwrap(),
        s["bundles_stored_bytes"].as_u64().unwrap(),
    );
    assert!(stored * 4 < logical, "stored {stored} of {logical} bytes");
    // The narration shows each command as a user would type it.
    assert!(stderr.contains("$ swe-ark --ark ark collect demo/calc --api-url http://127.0.0.1:"));
}
