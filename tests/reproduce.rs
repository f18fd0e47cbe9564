//! Published instances that reproduce although their runs look unlike the usual ones, each on
//! the `acme/widget` project made by code:
//! - a test patch that imports a name only the gold patch adds: before the fix pytest cannot
//!   collect the file, and every test of it goes from fail to pass (as SWE-bench lists them);
//! - a gold patch that adds a dependency to the build: the lock installs the tree after the
//!   patches too, validation and replay find it offline, a lock made before the instance says
//!   so, and a prediction asking for something else fails only its own install;
//! - a runner that colours its output: a test that needed the network is still named, and the
//!   instance is kept and graded without it.

mod common;

use std::path::Path;

use common::widget::{GOLD, TESTS, Widget, instance};
use common::{TestContext, stderr, stdout};

/// `git diff` of the fixture repository after `edit`, the repository put back after.
fn diff_after(repo: &Path, edit: impl FnOnce()) -> String {
    edit();
    let diff = String::from_utf8(common::git_raw(repo, &["diff"])).unwrap();
    common::git(repo, &["checkout", "--", "."]);
    diff
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Imports `rows` as one JSON Lines file.
fn import(w: &Widget, t: &TestContext, rows: &[serde_json::Value]) {
    let file = t.path("rows.jsonl");
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&file, text).unwrap();
    w.ok(t, &["import", file.to_str().unwrap()]);
}

/// `validate --json --runs 1`: each instance's result, by id.
fn validate(w: &Widget, t: &TestContext) -> serde_json::Map<String, serde_json::Value> {
    let out = w.run(t, &["validate", "--json", "--runs", "1"]);
    assert!(
        matches!(out.status.code(), Some(0 | 2)),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    v["validated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["instance_id"].as_str().unwrap().to_string(), r.clone()))
        .collect()
}

/// The report of instance `id` in run `run` of `model`.
fn report(t: &TestContext, run: &str, model: &str, id: &str) -> serde_json::Value {
    read_json(&t.ark().join(format!("runs/{run}/{model}/{id}/report.json")))[id].clone()
}

/// A test patch that imports `mul` (which only the gold patch adds) at the top of the test
/// file and tests it: before the fix the file cannot be collected. The gold patch adds `mul`.
/// A second instance imports `div`, which its gold patch does not add: its tests never run.
#[test]
fn a_test_file_the_gold_patch_makes_importable_goes_from_fail_to_pass() {
    let t = TestContext::new();
    let Some(w) = Widget::new(&t) else { return };
    let imports = |name: &str| {
        diff_after(&w.repo, || {
            let tests = TESTS.replace(
                "from widget.core import sub",
                &format!("from widget.core import {name}, sub"),
            );
            std::fs::write(
                w.repo.join("tests/test_core.py"),
                format!("{tests}\n\ndef test_{name}():\n    assert {name}(6, 3) > 0\n"),
            )
            .unwrap();
        })
    };
    let gold = diff_after(&w.repo, || {
        let core = std::fs::read_to_string(w.repo.join("widget/core.py")).unwrap();
        std::fs::write(
            w.repo.join("widget/core.py"),
            format!("{core}\n\ndef mul(a, b):\n    return a * b\n"),
        )
        .unwrap();
    });
    let (mul, sub) = (
        "tests/test_core.py::test_mul",
        "tests/test_core.py::test_sub",
    );
    // Published as SWE-bench lists it: both tests of the file fail before (absent).
    let published = instance(1, &imports("mul"), &gold, &[mul, sub], &[], &w.base);
    let never = instance(2, &imports("div"), &gold, &[], &[], &w.base);
    w.add_mirror(&t);
    import(&w, &t, &[published, never]);
    w.ok(&t, &["env", "lock", "acme/widget", "1.0"]);

    let v = validate(&w, &t);
    let r = &v["acme__widget-1"];
    assert_eq!(r["verdict"], "kept", "{r}");
    assert_eq!(r["reason_kind"], "", "exactly as published: {r}");
    assert_eq!(r["FAIL_TO_PASS"], 2, "{r}");
    let r = &v["acme__widget-2"];
    assert_eq!(r["verdict"], "discarded", "{r}");
    assert_eq!(r["reason_kind"], "tests-did-not-run", "{r}");
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.contains("before the gold patch") && reason.contains("nor after it"),
        "{reason}"
    );
    assert!(
        reason.contains("div"),
        "the import that failed is named: {reason}"
    );

    w.ok(&t, &["pack", "--all-validated"]);
    w.ok(&t, &["replay", "--gold", "--run-id", "g"]);
    let r = report(&t, "g", "gold", "acme__widget-1");
    assert_eq!(r["resolved"].as_bool(), Some(true), "{r}");
}

/// A gold patch that adds a dependency (`omega`) to the build and imports it. The lock made
/// with the instance in the archive installs the tree after its patches too: omega is in the
/// wheelhouse, the instance validates and resolves offline. A lock made before the instance
/// came in says so when the install after the gold patch fails. A prediction that asks for a
/// package the lock lacks (`zeta`) fails its own install, and the tests say what it cost.
#[test]
fn what_the_gold_patch_adds_to_the_build_is_locked_and_installed_offline() {
    let t = TestContext::new();
    let Some(w) = Widget::new(&t) else { return };
    common::pyfix::mkdists(
        &w.python,
        &t.path("dists"),
        r#"[{"name": "omega", "version": "1.0", "kind": "wheel"},
            {"name": "zeta", "version": "1.0", "kind": "wheel"}]"#,
    );
    let needs = |dep: &str| {
        diff_after(&w.repo, || {
            common::pyfix::mkproject(&w.python, &w.repo, "widget", "1.0", &format!("[\"{dep}\"]"));
            std::fs::write(
                w.repo.join("widget/core.py"),
                format!(
                    "import {dep}\n\n\ndef add(a, b):\n    return a + b\n\n\n\
                     def sub(a, b):\n    return a - b\n\n\ndef uses():\n    return {dep}.VERSION\n"
                ),
            )
            .unwrap();
        })
    };
    let gold = needs("omega");
    assert!(gold.contains("+++ b/pyproject.toml"), "{gold}");
    let test = diff_after(&w.repo, || {
        std::fs::write(
            w.repo.join("tests/test_core.py"),
            format!("{TESTS}\n\ndef test_uses():\n    from widget.core import uses\n    assert uses() == '1.0'\n"),
        )
        .unwrap();
    });
    let uses = "tests/test_core.py::test_uses";
    let sub = "tests/test_core.py::test_sub";
    w.add_mirror(&t);
    // Locked before the instance came in: its patched tree is not in the lock.
    let lock = |t: &TestContext| {
        let out = w.ok(
            t,
            &["env", "lock", "acme/widget", "1.0", "--commit", &w.base],
        );
        common::last_line(out.as_bytes())
    };
    let first = lock(&t);
    import(
        &w,
        &t,
        &[instance(3, &test, &gold, &[uses], &[sub], &w.base)],
    );
    let v = validate(&w, &t);
    let r = &v["acme__widget-3"];
    assert_eq!(r["reason_kind"], "lock-does-not-cover", "{r}");
    let reason = r["reason"].as_str().unwrap();
    for said in [
        &first[..12],
        "pyproject.toml",
        "after its patches",
        "swe-ark env lock acme/widget 1.0",
    ] {
        assert!(reason.contains(said), "`{said}` not in: {reason}");
    }

    // Locked again: the install after the patches is in it, omega among its packages.
    let second = lock(&t);
    assert_ne!(first, second);
    let lock_text = w.ok(&t, &["env", "show", &second]);
    assert!(
        lock_text.contains("instance-patches = [\"acme__widget-3\"]"),
        "{lock_text}"
    );
    let omega = lock_text
        .split("[[packages]]")
        .find(|p| p.contains("name = \"omega\""))
        .unwrap_or_else(|| panic!("omega is not in the lock: {lock_text}"));
    assert!(omega.contains("role = \"instance\""), "{omega}");
    assert!(!lock_text.contains("name = \"zeta\""), "{lock_text}");

    let v = validate(&w, &t);
    let r = &v["acme__widget-3"];
    assert_eq!(r["verdict"], "kept", "{r}");
    assert_eq!(r["lock"], second.as_str(), "{r}");
    w.ok(&t, &["pack", "--all-validated"]);

    // Replay, offline: the gold patch, the same change as a prediction, and one that asks for
    // zeta, which the lock lacks.
    let pred = |model: &str, patch: &str| {
        let file = t.path(&format!("{model}.jsonl"));
        let row = serde_json::json!({"instance_id": "acme__widget-3",
                                     "model_name_or_path": model, "model_patch": patch});
        std::fs::write(&file, format!("{row}\n")).unwrap();
        file
    };
    let (same, other) = (pred("same", &gold), pred("other", &needs("zeta")));
    let home = t.path("home");
    std::fs::create_dir_all(&home).unwrap();
    let offline = |args: &[&str]| {
        let out = common::widget::offline_swe_ark(&w.python, &home)
            .arg("--ark")
            .arg(t.ark())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}\n{}", stderr(&out));
    };
    offline(&["replay", "--gold", "--run-id", "g"]);
    assert_eq!(
        report(&t, "g", "gold", "acme__widget-3")["resolved"].as_bool(),
        Some(true)
    );
    offline(&[
        "replay",
        "--predictions",
        same.to_str().unwrap(),
        "--run-id",
        "s",
    ]);
    assert_eq!(
        report(&t, "s", "same", "acme__widget-3")["resolved"].as_bool(),
        Some(true)
    );
    offline(&[
        "replay",
        "--predictions",
        other.to_str().unwrap(),
        "--run-id",
        "p",
    ]);
    let other = report(&t, "p", "other", "acme__widget-3");
    assert_eq!(other["resolved"].as_bool(), Some(false), "{other}");
    // Its install failed offline (zeta is in no wheelhouse); the tests show what it cost.
    let log = std::fs::read_to_string(t.ark().join("runs/p/other/acme__widget-3/test_output.txt"))
        .unwrap();
    assert!(log.contains("No module named 'zeta'"), "{log}");
}

/// pytest run with colours (as tox runs it): a published PASS_TO_PASS test that resolves a
/// host of the internet fails here, and its failure, read through the colour codes, names
/// the network; the rest comes out as published, so the instance is kept and replay grades it
/// with and without that test.
#[test]
fn a_test_that_needed_the_network_is_named_in_coloured_output_and_graded_without() {
    let t = TestContext::new();
    let Some(w) = Widget::new(&t) else { return };
    let manifest = w.manifests.join("acme__widget.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("log_parser = \"pytest\"", "log_parser = \"pytest_v2\"")
            .replace(
                "test_cmd = \"pytest -rA\"",
                "test_cmd = \"pytest -rA --color=yes\"",
            ),
    )
    .unwrap();
    let test = diff_after(&w.repo, || {
        std::fs::write(
            w.repo.join("tests/test_core.py"),
            format!(
                "{TESTS}\n\ndef test_add():\n    from widget.core import add\n    assert add(1, 2) == 3\n\n\n\
                 def test_remote():\n    import socket\n    socket.getaddrinfo('www.example.com', 443)\n"
            ),
        )
        .unwrap();
    });
    let (add, sub, remote) = (
        "tests/test_core.py::test_add",
        "tests/test_core.py::test_sub",
        "tests/test_core.py::test_remote",
    );
    w.add_mirror(&t);
    import(
        &w,
        &t,
        &[instance(4, &test, GOLD, &[add], &[sub, remote], &w.base)],
    );
    w.ok(&t, &["env", "lock", "acme/widget", "1.0"]);

    let v = validate(&w, &t);
    let r = &v["acme__widget-4"];
    assert_eq!(r["verdict"], "kept", "{r}");
    assert_eq!(r["reason_kind"], "cannot-run-here", "{r}");
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.contains("1 of them needed the network") && reason.contains(remote),
        "{reason}"
    );
    assert!(
        !reason.contains('\u{1b}'),
        "no colour codes in a reason: {reason:?}"
    );
    assert!(
        r["published_differences"]["needs_network"][remote].is_string(),
        "{r}"
    );

    // Packed as validated, and graded both ways.
    w.ok(&t, &["pack", "--all-validated"]);
    w.ok(&t, &["replay", "--gold", "--run-id", "g"]);
    let r = report(&t, "g", "gold", "acme__widget-4");
    assert_eq!(r["resolved"].as_bool(), Some(false), "{r}");
    assert_eq!(r["resolved_here"].as_bool(), Some(true), "{r}");
    assert!(r["cannot_run"][remote].is_string(), "{r}");
    let summary = read_json(&t.ark().join("runs/g/gold.g.json"));
    assert_eq!(
        summary["score"]["reproducing"]["resolved"].as_u64(),
        Some(1),
        "{summary}"
    );
}
