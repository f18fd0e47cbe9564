//! swebench 5 task repositories: a repository written with swebench 5.0.2's own code imports,
//! comes back byte for byte, and reads in swebench's own reader as the same rows; version-5
//! rows become a repository swebench reads back as them; bad repositories are refused whole.
//! swebench runs from `.tools/swebench-venv` (`make tools` installs it).

mod common;

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use common::widget::{ADD_TEST, GOLD, Widget, instance, test_patch};
use common::*;
use serde_json::{Value, json};

/// swebench's python, or `None`, saying so.
fn swebench() -> Option<PathBuf> {
    tool_python("swebench", "swebench 5.0.2")
}

fn python(t: &TestContext, py: &Path, script: &str, args: &[&str]) -> String {
    run_python(t, py, script, args)
}

/// Writes the task repository `argv[2]` from the tasks in `argv[1]` (JSON: rows with `split`
/// and `datasets`, and `assets`: {path in the task: base64}) as swebench 5 lays one out, with
/// its own `dump_yaml` and `dump_tests`; `sweb.yaml` from `argv[3]` (JSON).
const WRITE_TASK_REPO: &str = r#"
import base64, json, os, sys
from swebench.task.repo import AS_FILE, OPTIONAL_FILE, TEST_KEYS, dump_tests, dump_yaml
tasks, root, config = json.load(open(sys.argv[1])), sys.argv[2], json.loads(sys.argv[3])
os.makedirs(f"{root}/tasks")
open(f"{root}/sweb.yaml", "w").write(dump_yaml(config))
os.makedirs(f"{root}/eval")
open(f"{root}/eval/SWE-bench_Lite.yaml", "w").write("metric: resolved\n")
for row in tasks:
    d = f"{root}/tasks/{row['instance_id']}"
    os.makedirs(d)
    for column, name in AS_FILE.items():
        with open(f"{d}/{name}", "w", newline="") as fh:
            fh.write(row.pop(column))
    for column, name in OPTIONAL_FILE.items():
        text = row.pop(column, "")
        if text:
            with open(f"{d}/{name}", "w", newline="") as fh:
                fh.write(text)
    open(f"{d}/tests.json", "w").write(dump_tests({k: row.pop(k) for k in TEST_KEYS}))
    for path, data in row.pop("assets", {}).items():
        os.makedirs(os.path.dirname(f"{d}/{path}"), exist_ok=True)
        open(f"{d}/{path}", "wb").write(base64.b64decode(data))
    open(f"{d}/Dockerfile", "w").write(f"FROM {row['image']}\nRUN true\n")
    open(f"{d}/task.yaml", "w").write(dump_yaml(row))
    os.chmod(f"{d}/eval.sh", 0o755)
"#;

/// swebench's view of the task repository `argv[1]`: its check's errors, every task as
/// `load_task_repo` reads it, and the rows `compile_datasets` publishes; as JSON.
const READ_TASK_REPO: &str = r#"
import json, sys
from swebench.task.checks import check_task_repo, errors
from swebench.task.repo import load_task_repo
root = sys.argv[1]
problems = [str(p) for p in errors(check_task_repo(root))]
out = {"errors": problems, "tasks": load_task_repo(root)}
if not problems:
    from swebench.task.publish import compile_datasets
    out["published"] = compile_datasets(root)
print(json.dumps(out, sort_keys=True, default=str))
"#;

const EVAL_SH: &str = "#!/bin/bash\nset -uxo pipefail\ncd /testbed\ngit apply -v - <<'EOF_114329324912'\n[test patch]\nEOF_114329324912\n: '>>>>> Start Test Output'\npytest -rA tests/test_core.py\n: '>>>>> End Test Output'\n";

/// A task as swebench 5 keeps it: the fixture's row with its harness fields, split and
/// datasets, and what a repository can hold that a row cannot keep as it is.
fn task(n: u32, split: &str, datasets: &[&str]) -> Value {
    let mut r: Value = serde_json::from_str(&fixture_instance_json()).unwrap();
    let id = format!("acme__widgets-{n}");
    r["instance_id"] = id.clone().into();
    r["FAIL_TO_PASS"] = json!(["tests/test_core.py::test_f"]);
    r["PASS_TO_PASS"] = json!([
        "tests/test_core.py::test_g[a-b]",
        "tests/test_core.py::test_é"
    ]);
    r["version"] = "0.12".into();
    // Before Lite's environments were built.
    r["created_at"] = "2023-11-01T12:00:00Z".into();
    r["eval_script"] = EVAL_SH.into();
    r["log_parser"] = "parse_log_pytest".into();
    r["eval_type"] = "pass_and_fail".into();
    r["image"] = format!("swebench/sweb.eval.x86_64.acme_1776_widgets-{n}:latest").into();
    r["difficulty"] = "<15 min fix".into();
    r["split"] = split.into();
    r["datasets"] = json!(datasets);
    if n == 1 {
        // CRLF inside a patch, text beyond the BMP, hints, binary assets.
        r["patch"] = "diff --git a/w.bat b/w.bat\n--- a/w.bat\n+++ b/w.bat\n@@ -1 +1 @@\n-echo 1\r\n+echo 2\r\n".into();
        r["problem_statement"] = "f() returns 1 🦀\nno: yes\n".into();
        r["hints_text"] = "see #12\n".into();
        r["assets"] = json!({
            "test_assets/tests/baseline/expected.png": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==",
            "problem_assets/screenshot.bin": "AAECAwQFBgcICQ==",
        });
    }
    r
}

/// The repository `root` of `tasks`, publishing Lite and Verified, their dev and test splits.
fn write_repo(t: &TestContext, py: &Path, root: &str, tasks: &[Value]) {
    let config = json!({
        "datasets": ["SWE-bench/SWE-bench_Lite", "SWE-bench/SWE-bench_Verified"],
        "splits": ["dev", "test"],
    });
    write_repo_as(t, py, root, tasks, &config);
}

fn write_repo_as(t: &TestContext, py: &Path, root: &str, tasks: &[Value], config: &Value) {
    fs::write(t.path("tasks.json"), serde_json::to_vec(tasks).unwrap()).unwrap();
    python(
        t,
        py,
        WRITE_TASK_REPO,
        &["tasks.json", root, &config.to_string()],
    );
}

/// Two in test of both datasets, one in dev of Lite, one deprecated, one in Verified alone.
fn four_tasks() -> Vec<Value> {
    let both = ["SWE-bench/SWE-bench_Lite", "SWE-bench/SWE-bench_Verified"];
    let mut verified_only = task(5, "test", &["SWE-bench/SWE-bench_Verified"]);
    // After Lite's environments were built, before Verified's.
    verified_only["created_at"] = "2024-05-01T00:00:00Z".into();
    vec![
        task(1, "test", &both),
        task(2, "test", &both),
        task(3, "dev", &["SWE-bench/SWE-bench_Lite"]),
        task(4, "deprecated", &[]),
        verified_only,
    ]
}

fn swebench_view(t: &TestContext, py: &Path, root: &str) -> Value {
    serde_json::from_str(&python(t, py, READ_TASK_REPO, &[root])).unwrap()
}

#[test]
fn a_task_repository_imports_comes_back_byte_for_byte_and_reads_the_same_in_swebench() {
    let Some(py) = swebench() else { return };
    let t = TestContext::new();
    write_repo(&t, &py, "repo", &four_tasks());
    let original = swebench_view(&t, &py, "repo");
    assert_eq!(
        original["errors"],
        json!([]),
        "the fixture is a good repository"
    );

    let out = t.run_expect(&["import", "repo"], 0);
    assert!(
        stdout(&out).contains("imported 4 instances"),
        "{}",
        stdout(&out)
    );
    let err = stderr(&out);
    assert!(
        err.contains("left out 1 task(s) of split `deprecated`")
            && err.contains("--split deprecated"),
        "{err}"
    );
    // Each recorded as the first of its datasets in sweb.yaml's order, by swe-ark's name for
    // it: the task of Verified alone, created after Lite's environments, as Verified.
    assert!(
        err.contains("dataset swe-bench-lite (3 instances)"),
        "{err}"
    );
    assert!(
        err.contains("dataset swe-bench-verified (1 instances)"),
        "{err}"
    );
    let out = t.run_expect(&["import", "repo", "--split", "deprecated"], 0);
    assert!(
        stdout(&out).contains("imported 1 instances"),
        "{}",
        stdout(&out)
    );

    // Back as the same tree, byte for byte, with eval.sh still executable.
    t.run_expect(
        &["export-dataset", "--format", "task-repo", "-o", "back"],
        0,
    );
    assert_eq!(tree_listing(&t.path("back")), tree_listing(&t.path("repo")));
    // Into an existing folder that is not empty: refused, nothing changed.
    let out = t.run_expect(
        &["export-dataset", "--format", "task-repo", "-o", "back"],
        2,
    );
    assert!(stderr(&out).contains("`back` exists"), "{}", stderr(&out));

    // As rows, what swebench publishes from it.
    t.run_expect(
        &[
            "export-dataset",
            "-o",
            "rows.json",
            "--format",
            "swe-bench",
            "--tests-as",
            "lists",
            "--instance-ids",
            "acme__widgets-1",
            "acme__widgets-2",
            "acme__widgets-3",
        ],
        0,
    );
    let rows: Vec<Value> = serde_json::from_slice(&fs::read(t.path("rows.json")).unwrap()).unwrap();
    let published = &original["published"];
    let lite = &published["SWE-bench/SWE-bench_Lite"];
    let mut theirs: Vec<&Value> = lite["test"].as_array().unwrap().iter().collect();
    theirs.extend(lite["dev"].as_array().unwrap());
    theirs.sort_by_key(|r| r["instance_id"].as_str().unwrap().to_string());
    assert_eq!(rows.len(), theirs.len());
    for (ours, theirs) in rows.iter().zip(theirs) {
        assert_eq!(ours, theirs, "a row as swebench publishes it");
    }

    // A subset: its sweb.yaml would publish a split none of it is in, so one is written anew,
    // and swebench reads the tasks it holds as the original's.
    let out = t.run_expect(
        &[
            "export-dataset",
            "--format",
            "task-repo",
            "-o",
            "sub",
            "--instance-ids",
            "acme__widgets-1",
            "acme__widgets-2",
        ],
        0,
    );
    assert!(
        stderr(&out).contains("sweb.yaml is written anew"),
        "{}",
        stderr(&out)
    );
    let sub = swebench_view(&t, &py, "sub");
    assert_eq!(sub["errors"], json!([]));
    assert_eq!(
        sub["tasks"],
        json!(original["tasks"].as_array().unwrap()[..2])
    );
}

#[test]
fn version5_rows_become_a_task_repository_swebench_reads_back_as_them() {
    let Some(py) = swebench() else { return };
    let t = TestContext::new();
    let rows: Vec<Value> = (1..=3)
        .map(|n| {
            let mut r = task(n, "test", &[]);
            let o = r.as_object_mut().unwrap();
            for k in ["split", "datasets", "assets"] {
                o.remove(k);
            }
            // A key YAML 1.1 reads as a boolean, a date, text that looks like a number.
            o.insert("created_at".into(), "2024-03-01 12:00:00".into());
            o.insert("no".into(), "0o17".into());
            r
        })
        .collect();
    let lines: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
    fs::write(t.path("v5.jsonl"), lines.join("\n") + "\n").unwrap();
    t.run_expect(&["import", "v5.jsonl", "--dataset", "verified"], 0);
    t.run_expect(
        &["export-dataset", "--format", "task-repo", "-o", "repo"],
        0,
    );
    let view = swebench_view(&t, &py, "repo");
    assert_eq!(view["errors"], json!([]), "swebench's check finds nothing");
    let tasks = view["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 3);
    for (got, want) in tasks.iter().zip(&rows) {
        let mut got = got.clone();
        let o = got.as_object_mut().unwrap();
        assert_eq!(o.remove("split"), Some(json!("test")));
        assert_eq!(
            o.remove("datasets"),
            Some(json!(["SWE-bench/SWE-bench_Verified"]))
        );
        assert_eq!(&got, want, "swebench's load_task gives the row back");
    }
    // And the repository imports back as the same instances.
    let t2 = TestContext::new();
    let out = t2.run_expect(&["import", t.path("repo").to_str().unwrap()], 0);
    assert!(
        stdout(&out).contains("imported 3 instances"),
        "{}",
        stdout(&out)
    );
    t2.run_expect(
        &["export-dataset", "-o", "again.jsonl", "--tests-as", "lists"],
        0,
    );
    let again: Vec<Value> = fs::read_to_string(t2.path("again.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(&again, &rows);

    // Rows of swebench 4's form lack what a task needs: refused, naming them; nothing written.
    let t3 = TestContext::new();
    fs::write(t3.path("v4.json"), format!("[{}]", fixture_instance_json())).unwrap();
    t3.run_expect(&["import", "v4.json", "--dataset", "verified"], 0);
    let out = t3.run_expect(
        &["export-dataset", "--format", "task-repo", "-o", "repo"],
        2,
    );
    let err = stderr(&out);
    assert!(
        err.contains("acme__widgets-42") && err.contains("eval_script"),
        "{err}"
    );
    assert!(!t3.path("repo").exists());

    // An id that would climb out of the repository's folder: refused, nothing written.
    let t4 = TestContext::new();
    let mut evil = rows[0].clone();
    evil["instance_id"] = "../../escaped".into();
    fs::write(t4.path("evil.jsonl"), format!("{evil}\n")).unwrap();
    t4.run_expect(&["import", "evil.jsonl", "--dataset", "verified"], 0);
    let out = t4.run_expect(
        &["export-dataset", "--format", "task-repo", "-o", "sub/repo"],
        2,
    );
    assert!(stderr(&out).contains("`../../escaped`"), "{}", stderr(&out));
    assert!(!t4.path("sub/repo").exists() && !t4.path("escaped").exists());
}

/// Imports `repo`, expecting a refusal that says all of `says`; nothing is imported.
fn refused(t: &TestContext, says: &[&str]) {
    let out = t.run_expect(&["import", "repo"], 2);
    let err = stderr(&out);
    for s in says {
        assert!(err.contains(s), "`{s}` not in: {err}");
    }
    assert!(!t.ark().join("index.sqlite").exists() || t.listed_instances() == 0);
}

#[test]
fn a_bad_task_repository_is_refused_naming_the_file_task_and_field() {
    let Some(py) = swebench() else { return };
    let t = TestContext::new();
    write_repo(&t, &py, "repo", &four_tasks());
    let tests = t.path("repo/tasks/acme__widgets-2/tests.json");
    let good = fs::read(&tests).unwrap();
    fs::write(
        &tests,
        r#"{"FAIL_TO_PASS": "tests/test_core.py::test_f", "PASS_TO_PASS": [1]}"#,
    )
    .unwrap();
    refused(
        &t,
        &[
            "tasks/acme__widgets-2/tests.json: `FAIL_TO_PASS` is a string, not a list of strings",
            "tasks/acme__widgets-2/tests.json: `PASS_TO_PASS` item 0 is a number, not a string",
        ],
    );
    fs::write(&tests, good).unwrap();

    // A split sweb.yaml names with no task in it.
    let config = t.path("repo/sweb.yaml");
    let good = fs::read(&config).unwrap();
    fs::write(
        &config,
        "datasets:\n- SWE-bench/SWE-bench_Lite\n- SWE-bench/SWE-bench_Verified\nsplits:\n- dev\n- test\n- train\n",
    )
    .unwrap();
    refused(&t, &["sweb.yaml: names split `train`, which no task"]);
    // No sweb.yaml at all: not taken for a folder of data files.
    fs::remove_file(&config).unwrap();
    refused(&t, &["has a `tasks/` folder but no `sweb.yaml`"]);
    fs::write(&config, good).unwrap();

    // A task folder's name and its instance_id disagree; a required file is missing; a link.
    fs::rename(
        t.path("repo/tasks/acme__widgets-3"),
        t.path("repo/tasks/acme__widgets-9"),
    )
    .unwrap();
    fs::remove_file(t.path("repo/tasks/acme__widgets-2/eval.sh")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", t.path("repo/tasks/acme__widgets-1/passwd")).unwrap();
    // A file whose name is not UTF-8: kept by name, it would come back as another.
    let latin1 = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    fs::write(t.path("repo/tasks/acme__widgets-5").join(latin1), "x").unwrap();
    refused(
        &t,
        &[
            "tasks/acme__widgets-9/task.yaml: `instance_id` is \"acme__widgets-3\"",
            "tasks/acme__widgets-2: missing eval.sh",
            "tasks/acme__widgets-1/passwd: is a symbolic link",
            "tasks/acme__widgets-5/caf\u{FFFD}.txt: has a name that is not UTF-8",
        ],
    );
}

/// A task's files are objects of the archive: its `image_assets` are in the work tree when its
/// tests run (a PASS_TO_PASS test reads one), and they go into a release file with its
/// instance, whose importer writes the task back byte for byte.
#[test]
fn a_tasks_files_travel_with_its_instance_through_a_release_file() {
    let Some(py) = swebench() else { return };
    let t = TestContext::new();
    let Some(w) = Widget::new(&t) else { return };
    let base = w.base.clone();
    // A test that reads a binary file only the task's assets hold.
    let asset_test = "\n\ndef test_asset():\n    with open('tests/data.bin', 'rb') as f:\n        assert f.read() == bytes(range(10))\n";
    let mut row = instance(
        1,
        &test_patch(&format!("{ADD_TEST}{asset_test}")),
        GOLD,
        &[],
        &[],
        &base,
    );
    let test_patch = row["test_patch"].as_str().unwrap().to_string();
    row["FAIL_TO_PASS"] = json!(["tests/test_core.py::test_add"]);
    row["PASS_TO_PASS"] = json!([
        "tests/test_core.py::test_asset",
        "tests/test_core.py::test_sub"
    ]);
    row["image_assets"] =
        json!({"test_patch": [{"path": "tests/data.bin", "url": ""}], "patch": []});
    row["eval_script"] = format!(
        "#!/bin/bash\nset -uxo pipefail\nsource /opt/miniconda3/bin/activate\nconda activate testbed\n\
         cd /testbed\npython -m pip install -e .\ngit checkout {base} tests/test_core.py\n\
         git apply -v - <<'EOF_114329324912'\n{test_patch}\nEOF_114329324912\n\
         : '>>>>> Start Test Output'\npytest -rA tests/test_core.py\n: '>>>>> End Test Output'\n\
         git checkout {base} tests/test_core.py\n"
    )
    .into();
    row["log_parser"] = "parse_log_pytest".into();
    row["eval_type"] = "pass_and_fail".into();
    row["image"] = "swebench/sweb.eval.x86_64.acme_1776_widget-1:latest".into();
    row["split"] = "test".into();
    row["datasets"] = json!(["SWE-bench/SWE-bench_Lite"]);
    row["assets"] = json!({"test_assets/tests/data.bin": "AAECAwQFBgcICQ=="});
    let config = json!({"datasets": ["SWE-bench/SWE-bench_Lite"]});
    write_repo_as(&t, &py, "tasks-repo", &[row], &config);

    let ok = |args: &[&str]| w.ok(&t, args);
    w.add_mirror(&t);
    ok(&["env", "lock", "acme/widget", "1.0", "--commit", &base]);
    ok(&["import", t.path("tasks-repo").to_str().unwrap()]);
    ok(&[
        "validate",
        "--instance-ids",
        "acme__widget-1",
        "--runs",
        "1",
    ]);
    // Kept exactly: test_asset passed before and after the gold patch, its file staged.
    let rows: Vec<Value> = serde_json::from_str(&ok(&["ls", "--validated", "--json"])).unwrap();
    assert_eq!(rows[0]["verdict"], "kept", "{rows:?}");
    assert_eq!(rows[0]["reason_kind"], "", "{rows:?}");
    ok(&["pack", "--all-validated"]);
    let snapshot = t.path("release.json");
    ok(&["release", "create", "r1", "-o", snapshot.to_str().unwrap()]);
    let file = t.path("r1.ark");
    ok(&[
        "export",
        "--release",
        snapshot.to_str().unwrap(),
        "-o",
        file.to_str().unwrap(),
    ]);

    // A run on it says what it graded against: the task's dataset and split.
    ok(&["replay", "--gold", "--run-id", "g"]);
    let meta: Value =
        serde_json::from_slice(&fs::read(t.ark().join("runs/g/run.json")).unwrap()).unwrap();
    assert_eq!(meta["dataset"], "SWE-bench/SWE-bench_Lite", "{meta}");
    assert_eq!(meta["split"], "test", "{meta}");
    // Graded again from its saved outputs: the same.
    ok(&["replay", "--rewrite-reports", "--run-id", "g"]);
    let again: Value =
        serde_json::from_slice(&fs::read(t.ark().join("runs/g/run.json")).unwrap()).unwrap();
    assert_eq!(again["split"], "test", "{again}");
    assert_eq!(again["dataset"], meta["dataset"], "{again}");

    let other = t.path("other-ark");
    let run = |args: &[&str]| {
        let out = w.run_at(&t, &other, args);
        assert!(out.status.success(), "swe-ark {args:?}\n{}", stderr(&out));
    };
    run(&["import-archive", file.to_str().unwrap()]);
    run(&[
        "export-dataset",
        "--format",
        "task-repo",
        "-o",
        t.path("back").to_str().unwrap(),
    ]);
    assert_eq!(
        tree_listing(&t.path("back")),
        tree_listing(&t.path("tasks-repo"))
    );
}
