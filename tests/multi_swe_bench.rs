//! Multi-SWE-bench's own rows: read by `import` beside SWE-bench's, written back byte for byte
//! by `export-dataset`, mapped onto SWE-bench's fields, and bad rows refused whole.
//! tests/fixtures/multi-swe-bench-5.jsonl holds five real rows, one per language (C, C++,
//! JavaScript, Rust, TypeScript), unchanged from the Multi-SWE-bench copy the README of
//! shared/data describes.

mod common;

use std::fs;
use std::path::PathBuf;

use common::*;
use serde_json::Value;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/multi-swe-bench-5.jsonl")
}

fn fixture_rows() -> Vec<Value> {
    fs::read_to_string(fixture())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn instance_count(t: &TestContext) -> usize {
    if !t.ark().join("index.sqlite").exists() {
        return 0;
    }
    t.listed_instances()
}

/// The exported file `name` as JSON values, one per line.
fn exported_lines(t: &TestContext, name: &str) -> Vec<Value> {
    fs::read_to_string(t.path(name))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The whole file of 186 rows, when SWE_ARK_MSB_DEV names it.
fn msb_dev() -> Option<PathBuf> {
    match std::env::var_os("SWE_ARK_MSB_DEV").map(PathBuf::from) {
        Some(p) if p.is_file() => Some(p),
        path => {
            eprintln!(
                "skipped: SWE_ARK_MSB_DEV is not a file ({path:?}); set it to \
                 multi-swe-bench-dev.jsonl to check the real data"
            );
            None
        }
    }
}

fn round_trips_byte_for_byte(file: &std::path::Path, rows: usize) {
    let t = TestContext::new();
    let out = t.run_expect(&["import", file.to_str().unwrap()], 0);
    assert!(
        stdout(&out).contains(&format!("imported {rows} instances")),
        "{}",
        stdout(&out)
    );
    t.run_expect(&["export-dataset", "-o", "out.jsonl"], 0);
    assert!(
        fs::read(t.path("out.jsonl")).unwrap() == fs::read(file).unwrap(),
        "export gives back the Multi-SWE-bench file byte for byte"
    );
    t.run_expect(
        &[
            "export-dataset",
            "-o",
            "msb.jsonl",
            "--format",
            "multi-swe-bench",
        ],
        0,
    );
    assert!(fs::read(t.path("msb.jsonl")).unwrap() == fs::read(file).unwrap());
}

#[test]
fn real_rows_round_trip_byte_for_byte() {
    round_trips_byte_for_byte(&fixture(), 5);
}

#[test]
fn the_whole_dev_file_round_trips_byte_for_byte() {
    let Some(file) = msb_dev() else { return };
    round_trips_byte_for_byte(&file, 186);
}

#[test]
fn rows_map_onto_swe_bench_fields_and_keep_the_rest() {
    let t = TestContext::new();
    t.run_expect(&["import", fixture().to_str().unwrap()], 0);
    t.run_expect(
        &[
            "export-dataset",
            "-o",
            "sb.jsonl",
            "--format",
            "swe-bench",
            "--tests-as",
            "lists",
        ],
        0,
    );
    let rows = fixture_rows();
    let records = exported_lines(&t, "sb.jsonl");
    assert_eq!(records.len(), rows.len());
    for (row, rec) in rows.iter().zip(&records) {
        let id = row["instance_id"].as_str().unwrap();
        assert_eq!(rec["instance_id"], id);
        assert_eq!(
            rec["repo"],
            format!(
                "{}/{}",
                row["org"].as_str().unwrap(),
                row["repo"].as_str().unwrap()
            )
        );
        assert_eq!(rec["base_commit"], row["base"]["sha"], "{id}");
        assert_eq!(rec["patch"], row["fix_patch"], "{id}");
        assert_eq!(rec["test_patch"], row["test_patch"], "{id}");
        let issue = &row["resolved_issues"][0];
        let statement = format!(
            "{}\n{}",
            issue["title"].as_str().unwrap(),
            issue["body"].as_str().unwrap_or("")
        );
        assert_eq!(rec["problem_statement"], statement, "{id}");
        for empty in ["hints_text", "created_at", "environment_setup_commit"] {
            assert_eq!(rec[empty], "", "{id} {empty}");
        }
        // The version is the one its repository's manifest gives.
        let version = match row["repo"].as_str().unwrap() {
            "bytes" => "rust-latest",
            "fmt" => "gcc-latest",
            "dayjs" => "node-18",
            // Its handler builds pull requests up to 7241 in an image of their own.
            "darkreader" => "node-18-pr-0-7241",
            "jq" => "ubuntu-22.04",
            other => panic!("no version expected for {other}"),
        };
        assert_eq!(rec["version"], version, "{id}");
        // FAIL_TO_PASS: the tests that did not pass with the test patch alone and pass with
        // the fix (failed, skipped, or absent), sorted; PASS_TO_PASS: p2p_tests, sorted.
        let names = |fields: &[&str]| {
            let mut n: Vec<String> = fields
                .iter()
                .flat_map(|f| row[*f].as_object().unwrap().keys().cloned())
                .collect();
            n.sort();
            n
        };
        let f2p = names(&["f2p_tests", "s2p_tests", "n2p_tests"]);
        assert!(!f2p.is_empty(), "{id}");
        assert_eq!(rec["FAIL_TO_PASS"], serde_json::json!(f2p), "{id}");
        assert_eq!(
            rec["FAIL_TO_PASS"],
            serde_json::json!(names(&["fixed_tests"])),
            "{id}"
        );
        assert_eq!(
            rec["PASS_TO_PASS"],
            serde_json::json!(names(&["p2p_tests"])),
            "{id}"
        );
        // Everything else of the row is kept under its own name; the layout is not a field.
        for (k, v) in row.as_object().unwrap() {
            if !["repo", "fix_patch", "instance_id", "test_patch"].contains(&k.as_str()) {
                assert_eq!(&rec[k], v, "{id} {k}");
            }
        }
        assert!(rec.get("multi_swe_bench_layout").is_none(), "{id}");
    }
    // Those records read back are SWE-bench rows; the Multi-SWE-bench rows written from them
    // hold the same values (test maps in name order, non-ASCII as is: not the same bytes).
    let t2 = TestContext::new();
    fs::copy(t.path("sb.jsonl"), t2.path("sb.jsonl")).unwrap();
    t2.run_expect(&["import", "sb.jsonl"], 0);
    t2.run_expect(&["export-dataset", "-o", "again.jsonl"], 0);
    assert_eq!(
        exported_lines(&t2, "again.jsonl")[0]["repo"],
        records[0]["repo"]
    );
    t2.run_expect(
        &[
            "export-dataset",
            "-o",
            "msb.jsonl",
            "--format",
            "multi-swe-bench",
        ],
        0,
    );
    assert_eq!(exported_lines(&t2, "msb.jsonl"), rows);
}

/// A small row as Python's json.dumps(ensure_ascii=False) writes it: two issues, a test in each
/// map, test maps out of name order, raw non-ASCII, `hints` and `tag`, and no `instance_id`.
const SMALL_ROW: &str = r#"{"org": "acme", "repo": "gadgets", "number": 7, "state": "closed", "title": "Fix the frob", "body": null, "base": {"label": "acme:main", "ref": "main", "sha": "0123456789abcdef0123456789abcdef01234567"}, "resolved_issues": [{"number": 5, "title": "Frob fails", "body": "It fails.\r\nAlways."}, {"number": 6, "title": "Frob é 😀", "body": null}], "fix_patch": "diff --git a/f b/f\n", "test_patch": "diff --git a/t b/t\n", "tag": "", "fixed_tests": {"z": {"run": "FAIL", "test": "FAIL", "fix": "PASS"}, "y": {"run": "SKIP", "test": "SKIP", "fix": "PASS"}, "x": {"run": "NONE", "test": "NONE", "fix": "PASS"}}, "p2p_tests": {"b": {"run": "PASS", "test": "PASS", "fix": "PASS"}, "a/1": {"run": "PASS", "test": "PASS", "fix": "PASS"}}, "f2p_tests": {"z": {"run": "FAIL", "test": "FAIL", "fix": "PASS"}}, "s2p_tests": {"y": {"run": "SKIP", "test": "SKIP", "fix": "PASS"}}, "n2p_tests": {"x": {"run": "NONE", "test": "NONE", "fix": "PASS"}}, "run_result": {"passed_count": 2, "failed_count": 1, "skipped_count": 1, "passed_tests": ["b", "a/1"], "failed_tests": ["z"], "skipped_tests": ["y"]}, "test_patch_result": {"passed_count": 2, "failed_count": 1, "skipped_count": 1, "passed_tests": ["b", "a/1"], "failed_tests": ["z"], "skipped_tests": ["y"]}, "fix_patch_result": {"passed_count": 5, "failed_count": 0, "skipped_count": 0, "passed_tests": ["b", "a/1", "z", "y", "x"], "failed_tests": [], "skipped_tests": []}, "hints": "Use frob2.", "language": "c"}"#;

#[test]
fn a_mixed_file_comes_back_as_it_came_in() {
    // A SWE-bench record in its published form, as export-dataset writes it.
    let t = TestContext::new();
    fs::write(t.path("one.json"), fixture_instance_json()).unwrap();
    let dated = [
        "--dataset",
        "acme-set",
        "--environments-as-of",
        "2024-06-01",
    ];
    t.run_expect(&[&["import", "one.json"][..], &dated].concat(), 0);
    t.run_expect(&["export-dataset", "-o", "one.jsonl"], 0);
    let swe = fs::read_to_string(t.path("one.jsonl")).unwrap();
    let msb = fs::read_to_string(fixture()).unwrap();
    let mut msb_lines = msb.lines();
    let first = msb_lines.next().unwrap();
    let rest: Vec<&str> = msb_lines.collect();
    let mixed = format!("{first}\n{swe}{SMALL_ROW}\n{}\n", rest.join("\n"));

    let t = TestContext::new();
    fs::write(t.path("mixed.jsonl"), &mixed).unwrap();
    let out = t.run_expect(&[&["import", "mixed.jsonl"][..], &dated].concat(), 0);
    assert!(
        stdout(&out).contains("imported 7 instances"),
        "{}",
        stdout(&out)
    );
    t.run_expect(&["export-dataset", "-o", "out.jsonl"], 0);
    assert!(
        fs::read_to_string(t.path("out.jsonl")).unwrap() == mixed,
        "each row written back in its own form, byte for byte, in the order imported"
    );
    // As a JSON list: the same rows, Python's ", " between them.
    t.run_expect(&["export-dataset", "-o", "out.json"], 0);
    let lines: Vec<&str> = mixed.lines().collect();
    assert!(fs::read_to_string(t.path("out.json")).unwrap() == format!("[{}]\n", lines.join(", ")));
    // And that list imported again comes back the same.
    let t2 = TestContext::new();
    fs::copy(t.path("out.json"), t2.path("out.json")).unwrap();
    t2.run_expect(&[&["import", "out.json"][..], &dated].concat(), 0);
    t2.run_expect(&["export-dataset", "-o", "again.json"], 0);
    assert!(fs::read(t2.path("again.json")).unwrap() == fs::read(t.path("out.json")).unwrap());

    // The small row: its id derived, its issues joined, its lists from the test maps.
    t.run_expect(
        &[
            "export-dataset",
            "-o",
            "sb.jsonl",
            "--format",
            "swe-bench",
            "--tests-as",
            "lists",
            "--instance-ids",
            "acme__gadgets-7",
        ],
        0,
    );
    let rec = &exported_lines(&t, "sb.jsonl")[0];
    assert_eq!(rec["repo"], "acme/gadgets");
    assert_eq!(
        rec["problem_statement"],
        "Frob fails\nIt fails.\r\nAlways.\n\nFrob é 😀\n"
    );
    assert_eq!(rec["FAIL_TO_PASS"], serde_json::json!(["x", "y", "z"]));
    assert_eq!(rec["PASS_TO_PASS"], serde_json::json!(["a/1", "b"]));
    assert_eq!(rec["hints_text"], "Use frob2.");
    assert_eq!(rec["tag"], "");
    assert!(rec.get("hints").is_none());

    // Multi-SWE-bench rows of a SWE-bench instance are not made up.
    let err = stderr(&t.run_expect(
        &[
            "export-dataset",
            "-o",
            "msb.jsonl",
            "--format",
            "multi-swe-bench",
        ],
        2,
    ));
    assert!(
        err.contains("instance `acme__widgets-42` did not come from a Multi-SWE-bench row")
            && err.contains("`org`")
            && err.contains("`fix_patch_result`"),
        "{err}"
    );
    assert!(!t.path("msb.jsonl").exists());
}

#[test]
fn bad_rows_are_named_by_line_and_field_and_nothing_is_imported() {
    let good = fixture_rows()[0].clone();
    let set = |path: &[&str], v: Value| {
        let mut row = good.clone();
        let (last, parents) = path.split_last().unwrap();
        let mut at = &mut row;
        for p in parents {
            at = &mut at[*p];
        }
        at[*last] = v;
        row
    };
    let without = |path: &[&str]| {
        let mut row = good.clone();
        let (last, parents) = path.split_last().unwrap();
        let mut at = &mut row;
        for p in parents {
            at = &mut at[*p];
        }
        at.as_object_mut().unwrap().remove(*last);
        row
    };
    let test = good["f2p_tests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            set(&["number"], "1793".into()),
            vec!["`number`", "a whole number", "a string"],
        ),
        (without(&["base", "sha"]), vec!["`base.sha`"]),
        (
            set(&["base", "sha"], "master".into()),
            vec!["`base.sha`", "`master`"],
        ),
        (without(&["fix_patch"]), vec!["no `fix_patch`"]),
        (
            set(
                &["f2p_tests", test.as_str()],
                serde_json::json!({"run": "FAIL", "test": "FAIL"}),
            ),
            vec!["`f2p_tests`", test.as_str(), "PASS, FAIL, SKIP or NONE"],
        ),
        (
            set(&["f2p_tests", test.as_str(), "fix"], "PASSED".into()),
            vec!["`f2p_tests`", test.as_str(), "PASSED"],
        ),
        (
            set(&["p2p_tests"], serde_json::json!(["a"])),
            vec!["`p2p_tests`", "an object"],
        ),
        (
            set(
                &["resolved_issues"],
                serde_json::json!([{"number": 1, "title": null, "body": ""}]),
            ),
            vec!["`resolved_issues[0].title`", "a string"],
        ),
        (
            set(&["run_result", "passed_tests"], serde_json::json!([1])),
            vec!["`run_result.passed_tests[0]`"],
        ),
        (set(&["FAIL_TO_PASS"], "[]".into()), vec!["`FAIL_TO_PASS`"]),
        (set(&["repo"], "a/b".into()), vec!["`org`", "`repo`", "a/b"]),
        // Neither form: SWE-bench's reader names what a SWE-bench row lacks.
        (
            serde_json::json!({"title": "x", "number": 1}),
            vec!["no `instance_id`"],
        ),
    ];
    for (bad, wanted) in cases {
        let t = TestContext::new();
        fs::write(
            t.path("ds.jsonl"),
            format!("{}\n{bad}\n", fixture_rows()[1]),
        )
        .unwrap();
        let err = stderr(&t.run_expect(&["import", "ds.jsonl"], 2));
        assert!(err.contains("`ds.jsonl` line 2: "), "{err}");
        for w in wanted {
            assert!(err.contains(w), "{w:?} not in {err}");
        }
        assert_eq!(instance_count(&t), 0, "{err}");
    }
}

#[test]
fn rows_without_a_version_take_their_manifests_and_the_dataset_date_is_multi_swe_benchs() {
    let t = TestContext::new();
    let out = t.run_expect(&["import", fixture().to_str().unwrap(), "--json"], 0);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["dataset"], "multi-swe-bench", "{report}");
    assert_eq!(report["environments_as_of"], "2025-04-01T00:00:00Z");
    let rows: Vec<Value> =
        serde_json::from_slice(&t.run_expect(&["ls", "--json"], 0).stdout).unwrap();
    let version = |id: &str| {
        rows.iter()
            .find(|r| r["instance_id"] == id)
            .map(|r| r["version"].as_str().unwrap().to_string())
            .unwrap()
    };
    // tokio-rs/bytes has a manifest of one version, which takes every pull request.
    assert_eq!(version("tokio-rs__bytes-543"), "rust-latest");
    assert_eq!(version("jqlang__jq-1793"), "ubuntu-22.04");
    assert!(
        !common::stderr(&out).contains("no manifest"),
        "{}",
        common::stderr(&out)
    );

    // A repository with no manifest: its rows get `inferred` (its context is inferred from its
    // build files when it is locked), and the import says which repositories they are.
    let t = TestContext::new();
    let manifests = t.path("manifests");
    fs::create_dir_all(&manifests).unwrap();
    for entry in fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/manifests")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with(".toml") && name != "jqlang__jq.toml" {
            fs::copy(&path, manifests.join(&name)).unwrap();
        }
    }
    let out = t
        .cmd()
        .env("SWE_ARK_MANIFESTS", &manifests)
        .args(["import", fixture().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert!(
        common::stderr(&out).contains("they get version `inferred`")
            && common::stderr(&out).contains("jqlang/jq (1)"),
        "{}",
        common::stderr(&out)
    );
    let rows: Vec<Value> =
        serde_json::from_slice(&t.run_expect(&["ls", "--json"], 0).stdout).unwrap();
    let jq = rows
        .iter()
        .find(|r| r["instance_id"] == "jqlang__jq-1793")
        .unwrap();
    assert_eq!(jq["version"], "inferred", "{jq}");
}
