//! `validate` for real: a Python project made here, mirrored, its context locked from a local
//! index (pytest from the wheels `make test` fetched), and instances that show each verdict:
//! kept (collected and published), not reproducible, no FAIL_TO_PASS, a test patch that does
//! not apply, tests stopped by an ImportError before and after the gold patch, a flaky test, a timeout, and a test that needs
//! the network to drop packets rather than refuse them, and one that reaches a loopback service
//! of the manifest. Then `ls --validated`, `export-dataset --validated-only`,
//! `pack --all-validated`, and `replay` of the gold patches and of predictions (right, wrong,
//! empty, unsafe, unknown, malformed). Also a test patch that only creates a file, a
//! version-5 dataset row run by its own `eval_script`, and predictions graded by the rules of
//! swebench 5 and 4.1.0 (a forged `PASSED` line, a `conftest.py` that reports every test
//! passed, an instance validation did not keep, packed with `--unproven`).

mod common;

use std::path::{Path, PathBuf};

use common::widget::{ADD_TEST, GOLD, Widget, instance, offline_swe_ark, test_patch};
use common::{TestContext, stderr, stdout};

const README_ONLY: &str = "diff --git a/README.txt b/README.txt\nnew file mode 100644\n\
--- /dev/null\n+++ b/README.txt\n@@ -0,0 +1 @@\n+hello\n";

/// `export-dataset -o path extra…` through `ok`; the lines it wrote.
fn exported_lines(ok: impl Fn(&[&str]) -> String, path: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["export-dataset", "-o", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    ok(&args);
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().map(str::to_string).collect()
}

/// The run summary's list `key` holds exactly `ids`.
fn assert_ids(summary: &serde_json::Value, key: &str, ids: &[&str]) {
    assert_eq!(summary[key], serde_json::json!(ids), "{summary}");
}

#[test]
fn validation_proves_instances_and_replay_grades_predictions_from_their_bundles() {
    let t = TestContext::new();
    let Some(w) = Widget::new(&t) else { return };
    let python = w.python.clone();
    let base = w.base.clone();
    let run = |args: &[&str]| w.run(&t, args);
    let ok = |args: &[&str]| w.ok(&t, args);
    w.add_mirror(&t);
    ok(&["env", "lock", "acme/widget", "1.0", "--commit", &base]);

    let add_test = ADD_TEST;
    // Packets to a non-local address must be dropped (a timeout), not refused at once.
    let net_test = "\n\ndef test_network_drops():\n    import socket, pytest\n    with pytest.raises(socket.timeout):\n        socket.create_connection(('10.255.255.1', 80), timeout=1)\n";
    let flaky_test = "\n\ndef test_flaky():\n    import os\n    p = os.path.join(os.path.dirname(__file__), '.count')\n    n = int(open(p).read()) if os.path.exists(p) else 0\n    open(p, 'w').write(str(n + 1))\n    assert n % 2 == 0\n";
    let import_test =
        "\n\nfrom widget.newmod import VALUE\n\n\ndef test_value():\n    assert VALUE == 1\n";
    let passing_test = "\n\ndef test_more():\n    assert True\n";
    // A loopback service the manifest starts: the test reaches it through WEB_URL.
    let service_test = "\n\ndef test_service():\n    import os, urllib.request\n    from widget.core import add\n    assert urllib.request.urlopen(os.environ['WEB_URL']).status == 200\n    assert add(1, 1) == 2\n";
    let slow_test = "\n\ndef test_slow():\n    import time\n    time.sleep(120)\n";
    let sub = "tests/test_core.py::test_sub";
    let add = "tests/test_core.py::test_add";
    let net = "tests/test_core.py::test_network_drops";
    let bad_context = "diff --git a/tests/test_core.py b/tests/test_core.py\n--- a/tests/test_core.py\n+++ b/tests/test_core.py\n@@ -1,2 +1,2 @@\n-from nothing import here\n+from widget import core\n \n";
    let instances = [
        instance(
            1,
            &test_patch(&format!("{add_test}{net_test}")),
            GOLD,
            &[],
            &[],
            &base,
        ),
        instance(2, &test_patch(add_test), GOLD, &[add], &[sub], &base),
        instance(
            3,
            &test_patch(add_test),
            GOLD,
            &[add],
            &[sub, "tests/test_core.py::test_gone"],
            &base,
        ),
        instance(4, &test_patch(passing_test), README_ONLY, &[], &[], &base),
        instance(5, bad_context, GOLD, &[], &[], &base),
        instance(
            6,
            &test_patch(&format!("{add_test}{flaky_test}")),
            GOLD,
            &[],
            &[],
            &base,
        ),
        // A test file that imports what no patch makes: its tests never run.
        instance(7, &test_patch(import_test), GOLD, &[], &[], &base),
        instance(9, &test_patch(slow_test), GOLD, &[], &[], &base),
        instance(
            10,
            &test_patch(service_test),
            GOLD,
            &["tests/test_core.py::test_service"],
            &[sub],
            &base,
        ),
        // Published PASS_TO_PASS that leaves out a test passing before and after: a cover.
        instance(11, &test_patch(add_test), GOLD, &[add], &[], &base),
        // A test patch that only creates a file.
        instance(12, NEW_TEST_FILE, GOLD, &[NEW_TEST], &[], &base),
        // A version-5 row: its own eval_script, log parser, eval type and image.
        v5_row(instance(
            13,
            &test_patch(add_test),
            GOLD,
            &[add],
            &[sub],
            &base,
        )),
    ];
    let data: String = instances.iter().map(|i| format!("{i}\n")).collect();
    let file = t.path("instances.jsonl");
    std::fs::write(&file, data).unwrap();
    ok(&["import", file.to_str().unwrap()]);

    let summary = ok(&[
        "validate",
        "--jobs",
        "2",
        "--repo",
        "acme/widget",
        "--timeout",
        "20",
    ]);
    assert!(summary.contains("kept"), "{summary}");
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&ok(&["ls", "--validated", "--json"])).unwrap();
    let row = |n: u32| {
        rows.iter()
            .find(|r| r["instance_id"].as_str() == Some(&format!("acme__widget-{n}")))
            .unwrap_or_else(|| panic!("no verdict for {n}: {rows:?}"))
            .clone()
    };
    let verdict = |n: u32| {
        let r = row(n);
        (
            r["verdict"].as_str().unwrap().to_string(),
            r["reason_kind"].as_str().unwrap().to_string(),
            r["reason"].as_str().unwrap().to_string(),
        )
    };
    assert_eq!(verdict(1).0, "kept", "{:?}", verdict(1));
    assert_eq!(row(1)["fail_to_pass"].as_u64(), Some(1));
    assert_eq!(
        row(1)["pass_to_pass"].as_u64(),
        Some(2),
        "sub and the network test"
    );
    assert_eq!(verdict(2).0, "kept", "{:?}", verdict(2));
    let (v, kind, reason) = verdict(3);
    assert_eq!(
        (v.as_str(), kind.as_str()),
        ("not-reproducible", "differs-from-published")
    );
    assert!(reason.contains("test_gone"), "{reason}");
    assert_eq!(verdict(4).1, "no-fail-to-pass", "{:?}", verdict(4));
    assert_eq!(
        verdict(5).1,
        "test-patch-does-not-apply",
        "{:?}",
        verdict(5)
    );
    let (v, kind, _) = verdict(6);
    assert_eq!((v.as_str(), kind.as_str()), ("kept", ""));
    assert_eq!(row(6)["flaky"].as_u64(), Some(1));
    let (_, kind, reason) = verdict(7);
    assert_eq!(kind, "tests-did-not-run", "{reason}");
    assert!(
        (reason.contains("ImportError") || reason.contains("ModuleNotFoundError"))
            && reason.contains("nor after it"),
        "{reason}"
    );
    let (_, kind, reason) = verdict(9);
    assert_eq!(kind, "timeout", "{reason}");
    assert_eq!(verdict(10).0, "kept", "{:?}", verdict(10));
    let (v, kind, reason) = verdict(11);
    assert_eq!((v.as_str(), kind.as_str()), ("kept", "covers-published"));
    assert!(
        reason.contains(&format!("PASS_TO_PASS has extra 1 ({sub})")),
        "{reason}"
    );

    // The collected instance got its lists; the results say what was seen and how.
    let exported = exported_lines(
        ok,
        &t.path("out.jsonl"),
        &["--instance-ids", "acme__widget-1"],
    );
    let line: serde_json::Value = serde_json::from_str(&exported[0]).unwrap();
    assert!(
        line["FAIL_TO_PASS"].to_string().contains("test_add"),
        "{line}"
    );
    assert!(line["PASS_TO_PASS"].to_string().contains(net), "{line}");

    // Only proven instances, when asked.
    let ids: Vec<String> = exported_lines(ok, &t.path("proven.jsonl"), &["--validated-only"])
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["instance_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        ids,
        vec![
            "acme__widget-1",
            "acme__widget-2",
            "acme__widget-6",
            "acme__widget-10",
            "acme__widget-11",
            "acme__widget-12",
            "acme__widget-13"
        ]
    );
    assert_eq!(verdict(12).0, "kept", "{:?}", verdict(12));
    assert_eq!(verdict(13).0, "kept", "{:?}", verdict(13));
    // Written back as the row came.
    let v5_line: serde_json::Value = serde_json::from_str(
        &exported_lines(
            ok,
            &t.path("v5.jsonl"),
            &["--instance-ids", "acme__widget-13"],
        )[0],
    )
    .unwrap();
    let row13 = &instances[instances.len() - 1];
    for f in ["eval_script", "log_parser", "eval_type", "image"] {
        assert_eq!(v5_line[f], row13[f], "{f}");
    }

    // Nothing is run again unless asked.
    let again = run(&["validate", "--repo", "acme/widget"]);
    assert!(
        stderr(&again).contains("12 instance(s) already validated"),
        "{}",
        stderr(&again)
    );

    // Proven instances pack from the index alone; the others are refused by name.
    let packed = ok(&["pack", "--all-validated"]);
    assert_eq!(packed.lines().count(), 7, "{packed}");
    let id6 = packed
        .lines()
        .find(|l| l.starts_with("acme__widget-6 "))
        .map(|l| l.split(' ').nth(1).unwrap().to_string())
        .unwrap();
    let unpacked = t.path("unpacked");
    ok(&["unpack", &id6, "-o", unpacked.to_str().unwrap()]);
    // Format version 3: what the validation proved, not what its run saw.
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(unpacked.join("expected.json")).unwrap()).unwrap();
    assert!(!unpacked.join("results.json").exists());
    assert_eq!(results["verdict"].as_str(), Some("kept"));
    assert_eq!(results["network"].as_str(), Some("isolated"));
    assert_eq!(
        results["flaky"],
        serde_json::json!(["tests/test_core.py::test_flaky"]),
        "{results}"
    );
    assert!(
        results["post"]
            .get("tests/test_core.py::test_flaky")
            .is_none()
            && results["post"]["tests/test_core.py::test_add"] == "PASSED",
        "{results}"
    );
    assert!(results.get("timings").is_none(), "{results}");
    assert!(
        std::fs::read_to_string(unpacked.join("logs/post.log"))
            .unwrap()
            .contains("test_add")
    );
    assert!(unpacked.join("env/pylock.toml").is_file() && unpacked.join("env/spec.toml").is_file());
    let refused = run(&["pack", "--instance-ids", "acme__widget-4"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("was not kept by validation"),
        "{}",
        stderr(&refused)
    );

    // Replay: the gold patches resolve every proven instance, offline.
    ok(&["replay", "--gold", "--run-id", "gold"]);
    let summary = |run: &str, model: &str| -> serde_json::Value {
        let path = t
            .ark()
            .join("runs")
            .join(run)
            .join(format!("{model}.{run}.json"));
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
    };
    let gold = summary("gold", "gold");
    assert_eq!(gold["resolved_instances"].as_u64(), Some(7), "{gold}");
    assert_eq!(gold["grading"].as_str(), Some("swebench-5"), "{gold}");
    let gold13 = read_json(&t.ark().join("runs/gold/gold/acme__widget-13/report.json"));
    assert_eq!(
        gold13["acme__widget-13"]["evaluated_with"].as_str(),
        Some("eval_script"),
        "{gold13}"
    );
    assert_eq!(gold["error_instances"].as_u64(), Some(0), "{gold}");
    assert_eq!(gold["network"]["acme__widget-1"].as_str(), Some("isolated"));

    // Predictions: right, wrong, empty, unsafe, and one for an instance the archive lacks.
    let wrong = GOLD.replace("+    return a + b", "+    return a * b");
    let unsafe_patch = "diff --git a/../outside.py b/../outside.py\n--- a/../outside.py\n+++ b/../outside.py\n@@ -0,0 +1 @@\n+x = 1\n";
    let pred = |id: &str, patch: &str| serde_json::json!({"instance_id": id, "model_name_or_path": "m", "model_patch": patch});
    // Right but for a module the environment lacks: swebench 5 calls that ambiguous.
    let missing = GOLD
        .replace(
            "+    return a + b",
            "+    import widget_missing_dependency\n+    return a + b",
        )
        .replace("@@ -1,5 +1,5 @@", "@@ -1,5 +1,6 @@");
    let preds = [
        pred("acme__widget-1", GOLD),
        pred("acme__widget-2", &wrong),
        pred("acme__widget-6", ""),
        pred("acme__widget-10", unsafe_patch),
        pred("acme__widget-11", &missing),
        pred("acme__widget-99", GOLD),
    ];
    let file = t.path("preds.jsonl");
    std::fs::write(
        &file,
        preds.iter().map(|p| format!("{p}\n")).collect::<String>(),
    )
    .unwrap();
    // Replays `file` as run p1.
    let replay_p1 = |extra: &[&str]| {
        let head = [
            "replay",
            "--predictions",
            file.to_str().unwrap(),
            "--run-id",
            "p1",
        ];
        ok(&[&head[..], extra].concat())
    };
    let logs = t.path("logs");
    replay_p1(&["--jobs", "2", "--logs-dir", logs.to_str().unwrap()]);
    let m = summary("p1", "m");
    assert_ids(&m, "resolved_ids", &["acme__widget-1"]);
    assert_ids(&m, "unresolved_ids", &["acme__widget-11", "acme__widget-2"]);
    // swebench 5's classification of what did not resolve: the missing module is ambiguous,
    // a wrong answer and an unsafe patch are nobody's environment.
    assert_ids(&m, "ambiguous_failure_ids", &["acme__widget-11"]);
    assert_ids(&m, "infra_failure_ids", &[]);
    assert_eq!(m["ambiguous_failure_instances"].as_u64(), Some(1), "{m}");
    assert_eq!(
        m["failure_reasons"],
        serde_json::json!({"acme__widget-11": "missing_module"}),
        "{m}"
    );
    // What the run graded against, and the run as swebench keeps its logs.
    let meta = read_json(&t.ark().join("runs/p1/run.json"));
    assert!(
        meta["created_at"].is_string() && meta.get("task_repo").is_some(),
        "{meta}"
    );
    let laid = logs.join("run_evaluation/p1");
    for f in [
        "run.json",
        "m.p1.json",
        "m/acme__widget-2/report.json",
        "m/acme__widget-2/test_output.txt",
    ] {
        assert!(laid.join(f).is_file(), "{f}");
    }
    assert_ids(&m, "empty_patch_ids", &["acme__widget-6"]);
    assert_eq!(
        m["errors"]["acme__widget-10"]["reason"].as_str(),
        Some("patch-unsafe"),
        "{m}"
    );
    assert_eq!(
        m["errors"]["acme__widget-99"]["reason"].as_str(),
        Some("unknown-instance"),
        "{m}"
    );
    let report_path = t.ark().join("runs/p1/m/acme__widget-2/report.json");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report_path).unwrap()).unwrap();
    let r = &report["acme__widget-2"];
    assert_eq!(r["patch_successfully_applied"].as_bool(), Some(true));
    assert_eq!(r["resolved"].as_bool(), Some(false));
    assert_eq!(
        r["tests_status"]["FAIL_TO_PASS"]["failure"],
        serde_json::json!([add]),
        "{r}"
    );
    assert_eq!(
        r["tests_status"]["PASS_TO_PASS"]["success"],
        serde_json::json!([sub]),
        "{r}"
    );
    // A run killed after its first report resumes where it stopped.
    let two = t.path("two.jsonl");
    std::fs::write(&two, format!("{}\n{}\n", preds[0], preds[1])).unwrap();
    let mut c = t.cmd();
    c.env("SWE_ARK_FAILPOINT", "replay.after-report").args([
        "replay",
        "--predictions",
        two.to_str().unwrap(),
        "--run-id",
        "killed",
    ]);
    let killed = c.output().unwrap();
    assert!(!killed.status.success(), "{}", stderr(&killed));
    let done: Vec<_> = ["acme__widget-1", "acme__widget-2"]
        .iter()
        .filter(|i| {
            t.ark()
                .join(format!("runs/killed/m/{i}/report.json"))
                .is_file()
        })
        .collect();
    assert_eq!(done.len(), 1, "{done:?}");
    let first = t
        .ark()
        .join(format!("runs/killed/m/{}/report.json", done[0]));
    let first_bytes = std::fs::read(&first).unwrap();
    let resumed = run(&[
        "replay",
        "--predictions",
        two.to_str().unwrap(),
        "--run-id",
        "killed",
    ]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert_eq!(std::fs::read(&first).unwrap(), first_bytes);
    let k = summary("killed", "m");
    assert_ids(&k, "resolved_ids", &["acme__widget-1"]);
    assert_ids(&k, "unresolved_ids", &["acme__widget-2"]);
    // One instance replayed again under the same id: the run report is still the whole run's.
    ok(&[
        "replay",
        "--predictions",
        two.to_str().unwrap(),
        "--run-id",
        "killed",
        "--instance-ids",
        "acme__widget-2",
        "--force",
    ]);
    let k = summary("killed", "m");
    assert_ids(&k, "resolved_ids", &["acme__widget-1"]);
    assert_eq!(k["total_instances"].as_u64(), Some(2), "{k}");

    // A second run with the same id resumes: the finished reports stay as they are.
    let before = std::fs::read(&report_path).unwrap();
    replay_p1(&[]);
    assert_eq!(std::fs::read(&report_path).unwrap(), before);
    // Saved output graded again, nothing run: here the output is edited to stand for a
    // parser that reads it differently.
    let out_path = t.ark().join("runs/p1/m/acme__widget-2/test_output.txt");
    let text = std::fs::read_to_string(&out_path).unwrap();
    let edited: String = text
        .lines()
        .map(|l| {
            if l.starts_with("FAILED tests/test_core.py::test_add") {
                "PASSED tests/test_core.py::test_add".to_string()
            } else {
                l.to_string()
            }
        })
        .map(|l| l + "\n")
        .collect();
    assert_ne!(edited, text, "{text}");
    std::fs::write(&out_path, edited).unwrap();
    ok(&["replay", "--rewrite-reports", "--run-id", "p1"]);
    // swebench 5 sees the edit: the test command exited 1, and the log names no failure.
    let m = summary("p1", "m");
    assert_ids(&m, "resolved_ids", &["acme__widget-1"]);
    assert_eq!(
        m["errors"]["acme__widget-2"]["reason"].as_str(),
        Some("log-contradicts-exit-code"),
        "{m}"
    );
    // 4.1.0's rules read the log alone.
    ok(&[
        "replay",
        "--rewrite-reports",
        "--run-id",
        "p1",
        "--grading",
        "swebench-4",
    ]);
    let m = summary("p1", "m");
    assert_ids(&m, "resolved_ids", &["acme__widget-1", "acme__widget-2"]);
    assert_ids(&m, "empty_patch_ids", &["acme__widget-6"]);
    // Every prediction accounted for, the one with no bundle too: scored two ways.
    assert_eq!(m["score"]["whole"]["instances"].as_u64(), Some(6), "{m}");
    assert_eq!(
        m["score"]["reproducing"]["instances"].as_u64(),
        Some(5),
        "{m}"
    );
    assert!(
        m["excluded"]["acme__widget-99"]
            .as_str()
            .unwrap()
            .contains("nor the instance in its index"),
        "{m}"
    );

    // Malformed predictions are refused, naming each bad line.
    let bad = t.path("bad.jsonl");
    std::fs::write(
        &bad,
        format!("{}\nnot json\n{{\"instance_id\": \"x\"}}\n", preds[0]),
    )
    .unwrap();
    let out = run(&["replay", "--predictions", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("line 2:") && e.contains("line 3 (x): no `model_name_or_path`"),
        "{e}"
    );

    graded_as_the_harness_grades(&t, &w);

    // Anywhere: a fresh directory holding only the bundle file and the objects its lock names,
    // no index, an empty HOME, no network — the same report.
    if !common::can_unshare() {
        eprintln!("note: unshare -n is not available; the isolated replay is skipped");
        return;
    }
    let fresh = t.path("fresh");
    let objects = fresh.join("objects");
    let bundle = fresh.join(format!("{id6}.tar.zst"));
    std::fs::create_dir_all(&objects).unwrap();
    std::fs::copy(t.bundle_path(&id6), &bundle).unwrap();
    let lock: toml::Value =
        toml::from_str(&std::fs::read_to_string(unpacked.join("env/pylock.toml")).unwrap())
            .unwrap();
    let mut shas = Vec::new();
    for p in lock["packages"].as_array().unwrap() {
        for w in p
            .get("wheels")
            .and_then(|w| w.as_array())
            .into_iter()
            .flatten()
        {
            shas.push(w["hashes"]["sha256"].as_str().unwrap().to_string());
        }
        if let Some(sd) = p.get("sdist") {
            shas.push(sd["hashes"]["sha256"].as_str().unwrap().to_string());
        }
        if let Some(b) = p["tool"]["swe-ark"].get("built-wheel") {
            shas.push(b["hashes"]["sha256"].as_str().unwrap().to_string());
        }
    }
    // The interpreter the lock carries travels with it too.
    if let Some(packed) = lock["tool"]["swe-ark"]["python"].get("packed") {
        shas.push(packed["hashes"]["sha256"].as_str().unwrap().to_string());
    }
    for sha in &shas {
        let rel = format!("sha256/{}/{}", &sha[..2], &sha[2..]);
        std::fs::create_dir_all(objects.join(&rel).parent().unwrap()).unwrap();
        std::fs::copy(t.ark().join("objects").join(&rel), objects.join(&rel)).unwrap();
    }
    let gold6 = fresh.join("gold.jsonl");
    std::fs::write(&gold6, format!("{}\n", pred("acme__widget-6", GOLD))).unwrap();
    let home = fresh.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut c = offline_swe_ark(&python, &home);
    c.arg("--ark")
        .arg(fresh.join("ark"))
        .arg("replay")
        .arg(&bundle)
        .arg("--objects")
        .arg(&objects)
        .arg("--predictions")
        .arg(&gold6)
        .args(["--run-id", "iso"]);
    let out = c.output().unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let read_report = |path: PathBuf| -> serde_json::Value {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        v["acme__widget-6"].clone()
    };
    let here = read_report(t.ark().join("runs/gold/gold/acme__widget-6/report.json"));
    let there = read_report(fresh.join("ark/runs/iso/m/acme__widget-6/report.json"));
    assert_eq!(there["resolved"].as_bool(), Some(true), "{there}");
    assert_eq!(there["tests_status"], here["tests_status"]);
    assert_eq!(there["network"].as_str(), Some("isolated"));
    // Both ran confined (docs/SANDBOX.md): the predicted code saw a root of its own.
    assert_eq!(here["confinement"].as_str(), Some("confined"), "{here}");
    assert_eq!(there["confinement"].as_str(), Some("confined"), "{there}");
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// A test patch that creates tests/test_new.py, and the test in it.
const NEW_TEST_FILE: &str = "diff --git a/tests/test_new.py b/tests/test_new.py\nnew file mode 100644\n\
--- /dev/null\n+++ b/tests/test_new.py\n@@ -0,0 +1,5 @@\n+from widget.core import add\n+\n+\n\
+def test_new_add():\n+    assert add(2, 2) == 4\n";
const NEW_TEST: &str = "tests/test_new.py::test_new_add";

/// `row` as a version-5 dataset row: the evaluation script swebench's
/// `make_eval_script_list_py` writes (conda, `/testbed` and all), its parser by registry name.
fn v5_row(mut row: serde_json::Value) -> serde_json::Value {
    let base = row["base_commit"].as_str().unwrap().to_string();
    let test_patch = row["test_patch"].as_str().unwrap().to_string();
    row["eval_script"] = format!(
        "#!/bin/bash\nset -uxo pipefail\nsource /opt/miniconda3/bin/activate\nconda activate testbed\n\
         cd /testbed\ngit status\ngit -c core.fileMode=false diff {base}\npython -m pip install -e .\n\
         git checkout {base} tests/test_core.py\ngit apply -v - <<'EOF_114329324912'\n{test_patch}\n\
         EOF_114329324912\n: '>>>>> Start Test Output'\npytest -rA tests/test_core.py\n\
         : '>>>>> End Test Output'\ngit checkout {base} tests/test_core.py\n"
    )
    .into();
    row["log_parser"] = "parse_log_pytest".into();
    row["eval_type"] = "pass_and_fail".into();
    row["image"] = "docker.io/swebench/sweb.eval.x86_64.acme_1776_widget-13:latest".into();
    row
}

/// Predictions that the rules of swebench 5 exist for, graded by them and by 4.1.0's:
/// a patch printing its own `PASSED` line at exit, a `conftest.py` that reports every test
/// passed, one creating the file the test patch creates, the gold patch through a row's
/// `eval_script`, and one on an instance validation did not keep (`pack --unproven`).
fn graded_as_the_harness_grades(t: &TestContext, w: &Widget) {
    let ok = |args: &[&str]| w.ok(t, args);
    // The unproven instance: its tests ran, its lists differ from the published ones.
    let packed = ok(&["pack", "--instance-ids", "acme__widget-3", "--unproven"]);
    assert!(packed.starts_with("acme__widget-3 "), "{packed}");
    let spoof = "diff --git a/widget/core.py b/widget/core.py\n--- a/widget/core.py\n+++ b/widget/core.py\n\
@@ -1,2 +1,5 @@\n+import atexit\n+atexit.register(print, \"PASSED tests/test_core.py::test_add\")\n+\n def add(a, b):\n     return a - b\n";
    let conftest = "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n+++ b/conftest.py\n\
@@ -0,0 +1,8 @@\n+import pytest\n+\n+\n+@pytest.hookimpl(hookwrapper=True)\n\
+def pytest_runtest_makereport(item, call):\n+    outcome = yield\n\
+    report = outcome.get_result()\n+    report.outcome = \"passed\"\n";
    let creates_new = format!(
        "{GOLD}diff --git a/tests/test_new.py b/tests/test_new.py\nnew file mode 100644\n\
         --- /dev/null\n+++ b/tests/test_new.py\n@@ -0,0 +1 @@\n+x = 1\n"
    );
    let pred = |id: &str, patch: &str| serde_json::json!({"instance_id": id, "model_name_or_path": "m2", "model_patch": patch});
    let preds = [
        pred("acme__widget-1", spoof),
        pred("acme__widget-11", conftest),
        pred("acme__widget-12", &creates_new),
        pred("acme__widget-13", GOLD),
        pred("acme__widget-3", GOLD),
    ];
    let file = t.path("preds2.jsonl");
    std::fs::write(
        &file,
        preds.iter().map(|p| format!("{p}\n")).collect::<String>(),
    )
    .unwrap();
    ok(&[
        "replay",
        "--predictions",
        file.to_str().unwrap(),
        "--run-id",
        "p2",
        "--jobs",
        "2",
    ]);
    let report =
        |id: &str| read_json(&t.ark().join(format!("runs/p2/m2/{id}/report.json")))[id].clone();
    let summary = read_json(&t.ark().join("runs/p2/m2.p2.json"));
    assert_eq!(summary["grading"].as_str(), Some("swebench-5"), "{summary}");
    // swebench 5: the exit code contradicts the forged line: an error of the run.
    let r1 = report("acme__widget-1");
    assert_eq!(
        r1["error"].as_str(),
        Some("log-contradicts-exit-code"),
        "{r1}"
    );
    assert_eq!(r1["resolved"].as_bool(), Some(false), "{r1}");
    assert_eq!(r1["grading"]["test_exit_code"].as_i64(), Some(1), "{r1}");
    // The conftest.py is removed before the tests: test_add fails for real.
    let r11 = report("acme__widget-11");
    assert_eq!(r11["resolved"].as_bool(), Some(false), "{r11}");
    assert_eq!(r11["error"].as_str(), Some(""), "{r11}");
    assert!(
        r11["reset_paths"][0]
            .as_str()
            .unwrap()
            .starts_with("conftest.py: removed"),
        "{r11}"
    );
    // The file the test patch creates, created by the prediction too: removed, then created.
    let r12 = report("acme__widget-12");
    assert_eq!(r12["resolved"].as_bool(), Some(true), "{r12}");
    let r13 = report("acme__widget-13");
    assert_eq!(r13["resolved"].as_bool(), Some(true), "{r13}");
    assert_eq!(r13["evaluated_with"].as_str(), Some("eval_script"), "{r13}");
    assert_eq!(
        r13["grading"]["log_parser"].as_str(),
        Some("parse_log_pytest")
    );
    assert_eq!(r13["grading"]["test_exit_code"].as_i64(), Some(0), "{r13}");
    // Graded against the published lists all the same, and counted apart.
    let r3 = report("acme__widget-3");
    assert_eq!(r3["resolved"].as_bool(), Some(false), "{r3}");
    assert!(
        r3["excluded"]
            .as_str()
            .unwrap()
            .contains("differs-from-published"),
        "{r3}"
    );
    assert_eq!(
        summary["score"]["whole"]["instances"].as_u64(),
        Some(5),
        "{summary}"
    );
    assert_eq!(
        summary["score"]["whole"]["resolved"].as_u64(),
        Some(2),
        "{summary}"
    );
    assert_eq!(
        summary["score"]["reproducing"]["instances"].as_u64(),
        Some(4),
        "{summary}"
    );
    assert_eq!(
        summary["score"]["reproducing"]["resolved"].as_u64(),
        Some(2),
        "{summary}"
    );
    assert!(
        summary["excluded"]["acme__widget-3"].is_string(),
        "{summary}"
    );

    // The same outputs graded by 4.1.0's rules: the forged line passes there.
    ok(&[
        "replay",
        "--rewrite-reports",
        "--run-id",
        "p2",
        "--grading",
        "swebench-4",
    ]);
    let summary = read_json(&t.ark().join("runs/p2/m2.p2.json"));
    assert_eq!(summary["grading"].as_str(), Some("swebench-4"), "{summary}");
    let r1 = report("acme__widget-1");
    assert_eq!(r1["resolved"].as_bool(), Some(true), "{r1}");
    assert_eq!(r1["grading_rules"].as_str(), Some("swebench-4"), "{r1}");
    // Bad input: an unknown rule set is refused, naming the known ones.
    let bad = w.run(
        t,
        &[
            "replay",
            "--rewrite-reports",
            "--run-id",
            "p2",
            "--grading",
            "swebench-3",
        ],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("swebench-5, swebench-4"),
        "{}",
        stderr(&bad)
    );
}

/// Two archivists validate the same instance independently — other archive paths, `HOME`,
/// `TMPDIR`, working directories — and get the same bundle id and the same release file.
#[test]
fn two_archives_validate_the_same_instance_into_the_same_bundle_and_release() {
    let t = TestContext::new();
    let Some(w) = Widget::new(&t) else { return };
    let add = "tests/test_core.py::test_add";
    let instances = [
        instance(1, &test_patch(ADD_TEST), GOLD, &[], &[], &w.base),
        instance(
            2,
            &test_patch(&format!(
                "{ADD_TEST}\n\ndef test_more():\n    assert True\n"
            )),
            GOLD,
            &[],
            &[],
            &w.base,
        ),
    ];
    // Each builder imports the instances, and names them to validate, in an order of its own.
    let build = |root: &str, jobs: &str, user: &str, ids: &str| -> (Vec<String>, Vec<u8>, String) {
        let data: String = if ids.starts_with("acme__widget-1") {
            instances.iter().map(|i| format!("{i}\n")).collect()
        } else {
            instances.iter().rev().map(|i| format!("{i}\n")).collect()
        };
        let file = t.path(&format!("{user}-instances.jsonl"));
        std::fs::write(&file, data).unwrap();
        let dir = t.path(root);
        let (ark, home, tmp) = (dir.join("ark"), dir.join("home"), dir.join("tmp"));
        for d in [&home, &tmp] {
            std::fs::create_dir_all(d).unwrap();
        }
        let ok = |args: &[&str]| {
            let out = w
                .cmd_at(&t, &ark)
                .env("HOME", &home)
                .env("TMPDIR", &tmp)
                .env("USER", user)
                .env("LOGNAME", user)
                .current_dir(&dir)
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "swe-ark {args:?}\n{}", stderr(&out));
            stdout(&out)
        };
        ok(&[
            "mirror",
            "add",
            w.repo.to_str().unwrap(),
            "--name",
            "acme/widget",
        ]);
        ok(&["env", "lock", "acme/widget", "1.0", "--commit", &w.base]);
        ok(&["import", file.to_str().unwrap()]);
        ok(&["validate", "--instance-ids", ids, "--jobs", jobs]);
        let packed = ok(&["pack", "--all-validated"]);
        // `INSTANCE ID` lines, in the order packed: the ids by instance.
        let mut ids: Vec<String> = packed.lines().map(str::to_string).collect();
        ids.sort();
        let snapshot = dir.join("release.json");
        ok(&["release", "create", "r1", "-o", snapshot.to_str().unwrap()]);
        // The raw log, the evidence, names this archive's own work directory.
        let opened = swe_ark::store::Ark::open(&ark).unwrap();
        let v = opened.index().validations().unwrap().remove(0);
        let raw = opened.objects().get(&v.log_pre.unwrap()).unwrap();
        // The results name the manifest the context came from; the archive keeps its bytes.
        let results: serde_json::Value =
            serde_json::from_slice(&opened.objects().get(&v.results).unwrap()).unwrap();
        let file = results["manifest"]["file"].as_str().unwrap();
        assert!(file.ends_with("acme__widget.toml"), "{results}");
        let sha: swe_ark::digest::Sha256Digest = results["manifest"]["sha256"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let kept = opened.objects().get(&sha).unwrap();
        assert_eq!(kept, std::fs::read(file).unwrap());
        (
            ids,
            std::fs::read(snapshot).unwrap(),
            String::from_utf8(raw).unwrap(),
        )
    };
    let (ids_a, snap_a, log_a) = build("alice", "1", "alice", "acme__widget-1,acme__widget-2");
    let (ids_b, snap_b, log_b) = build(
        "elsewhere/bob/deeper",
        "2",
        "bob",
        "acme__widget-2,acme__widget-1",
    );
    assert!(log_a.contains(add) && log_a != log_b, "{log_a}\n{log_b}");
    assert_eq!(ids_a.len(), 2, "{ids_a:?}");
    assert_eq!(
        ids_a, ids_b,
        "the same instances validated twice pack to other bundles"
    );
    let id_a = ids_a[0].split_whitespace().nth(1).unwrap().to_string();
    assert_eq!(
        String::from_utf8_lossy(&snap_a),
        String::from_utf8_lossy(&snap_b)
    );

    // A third party runs the tests again and rebuilds the bundle from that run: the same id.
    let ark = t.path("alice/ark");
    let revalidate = |expect: i32| {
        let out = w.run_at(
            &t,
            &ark,
            &[
                "verify",
                "--rebuild",
                "--revalidate",
                "--runs",
                "1",
                "--instance-ids",
                "acme__widget-1",
                "--json",
            ],
        );
        assert_eq!(out.status.code(), Some(expect), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v[0].clone()
    };
    let again = revalidate(0);
    assert_eq!(again["rebuilt"].as_str(), Some(id_a.as_str()), "{again}");
    // Behind the archive's back, the cached environment makes test_sub fail (a pytest plugin
    // dropped into its site-packages, the build's and the copy every instance's layer is
    // over): the rebuild differs, and says which test, both ways.
    let sites: Vec<_> = std::fs::read_dir(ark.join("envs"))
        .unwrap()
        .flatten()
        .flat_map(|e| glob_site_packages(&e.path()))
        .collect();
    assert!(!sites.is_empty(), "no built environment under {ark:?}/envs");
    for site in sites {
        std::fs::write(
            site.join("widget_breaker.py"),
            "import os\nos.environ['PYTEST_PLUGINS'] = 'widget_breaker'\n\n\n\
             def pytest_runtest_call(item):\n    if item.name == 'test_sub':\n        \
             raise AssertionError('made to fail behind the archive')\n",
        )
        .unwrap();
        std::fs::write(site.join("widget_breaker.pth"), "import widget_breaker\n").unwrap();
    }
    let changed = revalidate(1);
    assert_ne!(
        changed["rebuilt"].as_str(),
        Some(id_a.as_str()),
        "{changed}"
    );
    let problems = changed["problems"].to_string();
    assert!(
        problems.contains("tests/test_core.py::test_sub PASSED → FAILED"),
        "{problems}"
    );

    // Another user, with no rights on root's files (pyenv's interpreters under /root among
    // them), imports the release as one file and replays it: the lock carries its
    // interpreter, and the environment is built from the archive alone.
    let file = t.path("r1.ark");
    let snapshot = t.path("bob-release.json");
    let ark_b = t.path("elsewhere/bob/deeper/ark");
    let out = w
        .cmd_at(&t, &ark_b)
        .args(["release", "create", "r2", "-o", snapshot.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let out = w
        .cmd_at(&t, &ark_b)
        .args(["export", "--release", snapshot.to_str().unwrap(), "-o"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    unprivileged_user_replays(&t, &w, &file);
}

/// As uid and gid 65534 (when the test runs as root and `setpriv` is here): `import-archive`
/// of `file` into an archive of that user's, then `replay --gold` resolves every instance,
/// from an environment whose interpreter is inside that archive.
fn unprivileged_user_replays(t: &TestContext, w: &Widget, file: &Path) {
    if let Some(why) = common::nobody_with_namespaces_unavailable() {
        eprintln!("skipped the unprivileged user: {why}");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let mine = t.path("nobody");
    std::fs::create_dir_all(mine.join("home")).unwrap();
    for dir in [mine.as_path(), &mine.join("home")] {
        std::os::unix::fs::chown(dir, Some(65534), Some(65534)).unwrap();
    }
    // The test's directory is root's (0700): the other user may pass through it only.
    std::fs::set_permissions(t.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let as_nobody = |args: &[&str]| {
        let mut c = w.cmd_at(t, &mine.join("ark"));
        c.args(args)
            .current_dir(&mine)
            .env("HOME", mine.join("home"));
        common::as_nobody(&c).output().unwrap()
    };
    let probe = as_nobody(&["--version"]);
    if !probe.status.success() {
        eprintln!(
            "skipped the unprivileged user: uid 65534 cannot run this test's swe-ark: {}",
            stderr(&probe)
        );
        return;
    }
    let out = as_nobody(&["import-archive", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = as_nobody(&["replay", "--gold", "--run-id", "nobody", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report[0]["resolved_instances"],
        2,
        "{report}\n{}",
        stderr(&out)
    );
    let built: Vec<serde_json::Value> = std::fs::read_dir(mine.join("ark/envs"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| serde_json::from_slice(&std::fs::read(e.path().join("env.json")).unwrap()))
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(!built.is_empty());
    for env in built {
        // Named within the archive: env.json names no place of it but where it was built.
        let interpreter = Path::new(env["interpreter"].as_str().unwrap());
        assert!(
            interpreter.is_relative()
                && mine
                    .join("ark")
                    .join(interpreter)
                    .starts_with(mine.join("ark/pythons")),
            "{} is outside the archive",
            interpreter.display()
        );
    }
}

/// `DIR/**/lib/python*/site-packages`, where an environment under DIR keeps its packages.
fn glob_site_packages(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if !e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                continue;
            }
            if p.file_name().is_some_and(|n| n == "site-packages")
                && p.parent()
                    .and_then(|x| x.file_name())
                    .is_some_and(|n| n.to_string_lossy().starts_with("python"))
            {
                out.push(p);
            } else {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A lock made before an instance came into the archive lacks what that instance's own install
/// asks for (its base commit declares a dependency the lock's commits did not): validation
/// says so, as the archive's problem (not recorded), and names the fix; locking the context
/// again covers every base commit, and the instance is kept.
#[test]
fn an_instance_imported_after_its_lock_is_run_once_the_context_is_locked_again() {
    let t = TestContext::new();
    let Some(w) = Widget::new(&t) else { return };
    w.add_mirror(&t);
    let lock = || {
        common::last_line(
            w.ok(
                &t,
                &["env", "lock", "acme/widget", "1.0", "--commit", &w.base],
            )
            .as_bytes(),
        )
    };
    let first = lock();
    // A later commit of the project needs omega, which the index has and the lock does not.
    common::pyfix::mkdists(
        &w.python,
        &t.path("dists"),
        r#"[{"name": "omega", "version": "1.0", "kind": "wheel"}]"#,
    );
    common::pyfix::mkproject(&w.python, &w.repo, "widget", "1.0", r#"["omega"]"#);
    std::fs::write(w.repo.join("widget/core.py"), common::widget::CORE).unwrap();
    let later = common::git_commit_all(&w.repo, "widget needs omega", "2021-06-15T00:00:00Z");
    w.ok(&t, &["mirror", "update", "acme/widget"]);
    let add = "tests/test_core.py::test_add";
    let sub = "tests/test_core.py::test_sub";
    let file = t.path("later.jsonl");
    let row = instance(7, &test_patch(ADD_TEST), GOLD, &[add], &[sub], &later);
    std::fs::write(&file, format!("{row}\n")).unwrap();
    w.ok(&t, &["import", file.to_str().unwrap()]);

    let out = w.run(&t, &["validate", "--json", "--runs", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let r = &v["validated"][0];
    assert_eq!(r["reason_kind"], "lock-does-not-cover", "{r}");
    let reason = r["reason"].as_str().unwrap();
    for said in [
        "omega",
        &first[..12],
        &later[..12],
        "swe-ark env lock acme/widget 1.0",
    ] {
        assert!(reason.contains(said), "`{said}` not in: {reason}");
    }
    assert!(
        stderr(&out).contains("not recorded"),
        "the archive's problem is not recorded: {}",
        stderr(&out)
    );

    // Locked again: the union of what every base commit asks for.
    let second = lock();
    assert_ne!(first, second);
    let out = w.ok(&t, &["validate", "--json", "--runs", "1"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let r = &v["validated"][0];
    assert_eq!(r["verdict"], "kept", "{r}");
    assert_eq!(r["lock"], second.as_str());
}

/// A published PASS_TO_PASS test that needs a package only conda provides (the context's conda
/// environment file names `cdms2`, which PyPI lacks) is skipped here: validation names the
/// package as the cause, keeps the instance (the rest comes out as published), and replay
/// grades it both as published (not resolved: the test did not pass) and without that test
/// (resolved here), counting it among those that reproduce. The file is the one the lock was
/// made from, at the environment setup commit: the instance's older base commit has none.
#[test]
fn a_test_that_needs_what_only_conda_provides_is_named_and_graded_without() {
    let t = TestContext::new();
    let Some(w) = Widget::new(&t) else { return };
    w.set_versions(
        "[versions.\"2.0\"]\nconda_environment = [\"ci/requirements/environment.yml\"]\n",
    );
    let base = w.base.clone();
    std::fs::create_dir_all(w.repo.join("ci/requirements")).unwrap();
    std::fs::write(
        w.repo.join("ci/requirements/environment.yml"),
        "name: testbed\nchannels:\n  - conda-forge\ndependencies:\n  - cdms2\n",
    )
    .unwrap();
    let env_commit = common::git_commit_all(&w.repo, "conda environment", "2021-06-10T00:00:00Z");
    w.add_mirror(&t);
    let cdms2 = "tests/test_core.py::test_to_and_from_cdms2";
    let (add, sub) = (
        "tests/test_core.py::test_add",
        "tests/test_core.py::test_sub",
    );
    let body = format!(
        "{ADD_TEST}\n\ndef test_to_and_from_cdms2():\n    import pytest\n    pytest.importorskip(\"cdms2\")\n"
    );
    let mut row = instance(8, &test_patch(&body), GOLD, &[add], &[sub, cdms2], &base);
    row["version"] = "2.0".into();
    row["environment_setup_commit"] = env_commit.as_str().into();
    let file = t.path("conda.jsonl");
    std::fs::write(&file, format!("{row}\n")).unwrap();
    w.ok(&t, &["import", file.to_str().unwrap()]);
    w.ok(&t, &["env", "lock", "acme/widget", "2.0"]);

    let v: serde_json::Value =
        serde_json::from_str(&w.ok(&t, &["validate", "--json", "--runs", "1"])).unwrap();
    let r = &v["validated"][0];
    assert_eq!(r["verdict"], "kept", "{r}");
    assert_eq!(r["reason_kind"], "cannot-run-here", "{r}");
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!(
            "1 of them ({cdms2}) needs cdms2, which only conda provides: not on PyPI (conda-forge only)"
        )),
        "{reason}"
    );
    assert_eq!(
        r["published_differences"]["needs_unavailable"][cdms2]
            .as_str()
            .map(|s| s.starts_with("needs cdms2")),
        Some(true),
        "{r}"
    );

    w.ok(&t, &["pack", "--all-validated"]);
    w.ok(&t, &["replay", "--gold", "--run-id", "g"]);
    let runs = t.ark().join("runs/g");
    // The run report, `<model>.<run-id>.json` (beside it, swebench's run.json).
    let model = runs.join("gold.g.json");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&model).unwrap()).unwrap();
    let report_file = std::fs::read_dir(&runs)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("acme__widget-8/report.json"))
        .find(|p| p.is_file())
        .unwrap();
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report_file).unwrap()).unwrap();
    let r = &report["acme__widget-8"];
    assert_eq!(r["resolved"].as_bool(), Some(false), "{r}");
    assert_eq!(r["resolved_here"].as_bool(), Some(true), "{r}");
    assert_eq!(r["excluded"].as_str(), None, "{r}");
    assert!(r["cannot_run"][cdms2].is_string(), "{r}");
    assert_eq!(summary["score"]["whole"]["resolved"].as_u64(), Some(0));
    assert_eq!(
        summary["score"]["reproducing"]["instances"].as_u64(),
        Some(1)
    );
    assert_eq!(
        summary["score"]["reproducing"]["resolved"].as_u64(),
        Some(1),
        "{summary}"
    );
    assert!(
        summary["cannot_run"]["acme__widget-8"][cdms2].is_string(),
        "{summary}"
    );
}

/// `git diff` of the fixture repository after `edit`, the repository put back after.
fn diff_after(repo: &Path, edit: impl FnOnce()) -> String {
    edit();
    let out = std::process::Command::new("git")
        .args(["diff"])
        .current_dir(repo)
        .output()
        .unwrap();
    let reset = std::process::Command::new("git")
        .args(["checkout", "--", "."])
        .current_dir(repo)
        .status()
        .unwrap();
    assert!(out.status.success() && reset.success());
    String::from_utf8(out.stdout).unwrap()
}

/// The installed state (docs/REPLAY.md): the first run at a base commit installs there and
/// keeps what the install did, once for every instance of that commit; later runs (validation,
/// replays) start from it without installing. A patch that changes what the install reads (the
/// build's own configuration here, whose version a test checks) installs again — skipped, the
/// test would see the old version — and a state that went bad is made again.
#[test]
fn an_installed_state_is_made_once_kept_and_installed_over_when_a_patch_changes_the_build() {
    let t = TestContext::new();
    let Some(w) = Widget::new(&t) else { return };
    w.add_mirror(&t);
    w.ok(
        &t,
        &["env", "lock", "acme/widget", "1.0", "--commit", &w.base],
    );
    let (add, sub) = (
        "tests/test_core.py::test_add",
        "tests/test_core.py::test_sub",
    );
    let version_test = "tests/test_core.py::test_version";
    let bump = diff_after(&w.repo, || {
        let config = w.repo.join("tinybuild.json");
        let text = std::fs::read_to_string(&config).unwrap();
        assert!(text.contains("\"1.0\""), "{text}");
        std::fs::write(&config, text.replace("\"1.0\"", "\"2.0\"")).unwrap();
    });
    let checks_version = "\n\ndef test_version():\n    import importlib.metadata as m\n    assert m.version('widget') == '2.0'\n";
    let rows = [
        instance(1, &test_patch(ADD_TEST), GOLD, &[add], &[sub], &w.base),
        instance(
            2,
            &test_patch(checks_version),
            &bump,
            &[version_test],
            &[sub],
            &w.base,
        ),
    ];
    let file = t.path("instances.jsonl");
    std::fs::write(
        &file,
        rows.iter().map(|r| format!("{r}\n")).collect::<String>(),
    )
    .unwrap();
    w.ok(&t, &["import", file.to_str().unwrap()]);

    // Validation: one state for the commit, made by the first instance; the second starts
    // from it, and its gold patch (the build's configuration) installs again.
    let out = w.ok(&t, &["validate", "--json", "--runs", "1"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for r in v["validated"].as_array().unwrap() {
        assert_eq!(r["verdict"], "kept", "{r}");
    }
    let index = swe_ark::store::Index::open(&t.ark().join("index.sqlite")).unwrap();
    let states = index.installed_states().unwrap();
    assert_eq!(states.len(), 1, "{states:?}");
    let state = states[0].clone();
    assert_eq!(state.instance_id, "acme__widget-1");
    assert!(state.editable && state.env_entries > 0, "{state:?}");
    drop(index);
    let listed: serde_json::Value =
        serde_json::from_str(&w.ok(&t, &["ls", "--installed", "--json"])).unwrap();
    assert_eq!(listed["repos"][0]["repo"], "acme/widget", "{listed}");
    assert_eq!(listed["repos"][0]["states"], 1, "{listed}");
    assert_eq!(listed["repos"][0]["bytes"], state.size, "{listed}");
    w.ok(&t, &["pack", "--all-validated"]);

    // Replays start from it: no install for a patch to the sources, one for the build's.
    let report = |run: &str, model: &str, n: u32| {
        let path = t
            .ark()
            .join(format!("runs/{run}/{model}/acme__widget-{n}/report.json"));
        read_json(&path)[format!("acme__widget-{n}")].clone()
    };
    w.ok(&t, &["replay", "--gold", "--run-id", "g1"]);
    let (one, two) = (report("g1", "gold", 1), report("g1", "gold", 2));
    for r in [&one, &two] {
        assert_eq!(r["resolved"].as_bool(), Some(true), "{r}");
        assert_eq!(r["installed_state"]["how"], "kept", "{r}");
        assert_eq!(
            r["installed_state"]["object"],
            state.object.hex().as_str(),
            "{r}"
        );
    }
    assert!(one["installed_state"].get("reinstalled").is_none(), "{one}");
    // The work tree: kept once per bundle, each run given it under a private layer (as
    // root; a copy otherwise); what the runs and patches did never reaches the kept tree.
    let kept_trees = || -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(t.ark().join("trees"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("tree/.git").is_dir())
            .collect();
        dirs.sort();
        dirs
    };
    let as_root = unsafe { libc::geteuid() } == 0;
    for r in [&one, &two] {
        let how = r["worktree_mount"].as_str().unwrap_or_default();
        if as_root {
            assert_eq!(how, "overlay", "{r}");
        } else {
            assert!(["reflink", "copy"].contains(&how), "{r}");
        }
    }
    assert_eq!(kept_trees().len(), 2, "one per bundle");
    for k in kept_trees() {
        let status = common::git(
            &k.join("tree"),
            &[
                "-c",
                "safe.directory=*",
                "status",
                "--porcelain",
                "--ignored",
            ],
        );
        assert_eq!(status, "", "{}", k.display());
    }
    let timings = one["timings"].as_object().unwrap();
    assert!(
        !timings
            .keys()
            .any(|k| k.contains("install") && !k.starts_with("installed")),
        "{one}"
    );
    let why = two["installed_state"]["reinstalled"].as_str().unwrap();
    assert!(why.contains("tinybuild.json"), "{why}");
    assert!(two["timings"]["reinstall"].is_number(), "{two}");
    // Without the states: the install after the patch, as before them.
    w.ok(
        &t,
        &[
            "replay",
            "--gold",
            "--run-id",
            "plain",
            "--no-installed-states",
        ],
    );
    for n in [1, 2] {
        let r = report("plain", "gold", n);
        assert_eq!(r["resolved"].as_bool(), Some(true), "{r}");
        assert!(r.get("installed_state").is_none(), "{r}");
        assert!(r["timings"]["install"].is_number(), "{r}");
    }

    // The state's object gone bad: the run installs at the base commit again and keeps what
    // it did in its place; the verdict is the same.
    let object = t.ark().join(format!(
        "objects/sha256/{}/{}",
        &state.object.hex()[..2],
        &state.object.hex()[2..]
    ));
    assert!(object.is_file(), "{}", object.display());
    let mut bytes = std::fs::read(&object).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&object, bytes).unwrap();
    w.ok(
        &t,
        &[
            "replay",
            "--gold",
            "--run-id",
            "g2",
            "--instance-ids",
            "acme__widget-1",
        ],
    );
    let again = report("g2", "gold", 1);
    assert_eq!(again["resolved"].as_bool(), Some(true), "{again}");
    assert_eq!(again["installed_state"]["how"], "made", "{again}");
    let index = swe_ark::store::Index::open(&t.ark().join("index.sqlite")).unwrap();
    let remade = index.installed_state(&state.key).unwrap().unwrap();
    assert_eq!(
        remade.object.hex(),
        again["installed_state"]["object"].as_str().unwrap()
    );

    // gc removes the environments of states no longer named and what killed runs left
    // staging them; the live state's environment stays, and the next run keeps it.
    let farms = |hex: &str| -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for lock in std::fs::read_dir(t.ark().join("envs")).unwrap().flatten() {
            for e in std::fs::read_dir(lock.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with("installed-") && name.ends_with(hex) {
                    out.push(e.path());
                }
            }
        }
        out
    };
    let replay = |run: &str| {
        w.ok(
            &t,
            &[
                "replay",
                "--gold",
                "--run-id",
                run,
                "--instance-ids",
                "acme__widget-1",
            ],
        );
        let r = report(run, "gold", 1);
        assert_eq!(r["installed_state"]["how"], "kept", "{r}");
    };
    replay("g3");
    let live = farms(&remade.object.hex());
    assert_eq!(live.len(), 1, "{live:?}");
    let lock_dir = live[0].parent().unwrap();
    let gone = lock_dir.join(format!("installed-0-{}", "0".repeat(64)));
    std::fs::create_dir_all(gone.join("env/lib")).unwrap();
    std::fs::write(gone.join("env/lib/old.py"), "x = 1\n").unwrap();
    let staging = lock_dir.join(".tmp-killed");
    std::fs::create_dir_all(staging.join("env")).unwrap();
    std::fs::write(staging.join(".swe-ark-in-use"), "").unwrap();
    let gc: serde_json::Value = serde_json::from_str(&w.ok(&t, &["gc", "--json"])).unwrap();
    let removed = gc["environments"]["farms_removed"].as_array().unwrap();
    let removed: Vec<&str> = removed.iter().filter_map(|p| p.as_str()).collect();
    assert!(removed.contains(&gone.to_str().unwrap()), "{gc}");
    assert!(
        gc["environments"]["stagings_removed"].as_u64() >= Some(1),
        "{gc}"
    );
    assert!(!gone.exists() && !staging.exists());
    // And the kept work trees of bundles the index no longer names.
    let old_tree = t.ark().join(format!("trees/0-{}", "0".repeat(64)));
    std::fs::create_dir_all(old_tree.join("tree/.git")).unwrap();
    let gc: serde_json::Value = serde_json::from_str(&w.ok(&t, &["gc", "--json"])).unwrap();
    let removed = gc["work_trees"]["trees_removed"].as_array().unwrap();
    assert_eq!(removed.len(), 1, "{gc}");
    assert_eq!(removed[0].as_str(), old_tree.to_str(), "{gc}");
    assert!(!old_tree.exists());
    assert_eq!(kept_trees().len(), 2, "the live bundles' trees stay");
    assert!(
        live[0].join("env").is_dir(),
        "the live state's environment stays"
    );
    replay("g4");
}
