//! SWE-bench dataset files: import and export in the published forms, round trips, and bad
//! records refused whole.

mod common;

use std::fs;

use common::*;

fn instance_count(t: &TestContext) -> usize {
    if !t.ark().join("index.sqlite").exists() {
        return 0;
    }
    t.listed_instances()
}

fn record(id: &str) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(&fixture_instance_json()).unwrap();
    v["instance_id"] = id.into();
    v
}

#[test]
fn the_lite_dev_split_round_trips_byte_for_byte() {
    let Some(lite) = lite_dev() else { return };
    let t = TestContext::new();
    let out = t.run_expect(&["import", lite.to_str().unwrap()], 0);
    assert!(
        stdout(&out).contains("imported 23 instances"),
        "{}",
        stdout(&out)
    );
    t.run_expect(&["export-dataset", "-o", "out.jsonl"], 0);
    assert_eq!(
        fs::read(t.path("out.jsonl")).unwrap(),
        fs::read(&lite).unwrap(),
        "export gives back the published file"
    );
    // As a JSON list, and with real lists, the same records.
    t.run_expect(
        &["export-dataset", "-o", "out.json", "--tests-as", "lists"],
        0,
    );
    let list: Vec<serde_json::Value> =
        serde_json::from_slice(&fs::read(t.path("out.json")).unwrap()).unwrap();
    let lines: Vec<serde_json::Value> = fs::read_to_string(&lite)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(list.len(), lines.len());
    for (got, want) in list.iter().zip(&lines) {
        for (k, v) in want.as_object().unwrap() {
            if k == "FAIL_TO_PASS" || k == "PASS_TO_PASS" {
                let parsed: serde_json::Value = serde_json::from_str(v.as_str().unwrap()).unwrap();
                assert_eq!(&got[k], &parsed, "{k}");
            } else {
                assert_eq!(&got[k], v, "{k}");
            }
        }
    }
    // Importing it again replaces, adds nothing.
    let out = t.run_expect(&["import", lite.to_str().unwrap()], 0);
    assert!(
        stdout(&out).contains("(0 new, 23 replaced)"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_json_list_with_extra_fields_imports_and_keeps_them() {
    let t = TestContext::new();
    let mut a = record("acme__widgets-1");
    a["difficulty"] = "15 min - 1 hour".into();
    let b = record("acme__widgets-2");
    fs::write(
        t.path("ds.json"),
        serde_json::to_string(&vec![a, b]).unwrap(),
    )
    .unwrap();
    // Instances of 2024-03, later than SWE-bench's environments: a dataset of its own, with
    // its own date.
    let e = stderr(&t.run_expect(&["import", "ds.json"], 2));
    assert!(e.contains("--environments-as-of"), "{e}");
    t.run_expect(
        &[
            "import",
            "ds.json",
            "--dataset",
            "acme-set",
            "--environments-as-of",
            "2024-06-01",
        ],
        0,
    );
    assert_eq!(instance_count(&t), 2);
    t.run_expect(
        &[
            "export-dataset",
            "-o",
            "one.jsonl",
            "--instance-ids",
            "acme__widgets-1",
        ],
        0,
    );
    let text = fs::read_to_string(t.path("one.jsonl")).unwrap();
    assert_eq!(text.lines().count(), 1);
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(v["difficulty"], "15 min - 1 hour");
    assert_eq!(v["FAIL_TO_PASS"], "[\"tests/test_core.py::test_f\"]");
    let err = stderr(&t.run_expect(
        &[
            "export-dataset",
            "-o",
            "x.jsonl",
            "--instance-ids",
            "nope__nope-1",
        ],
        2,
    ));
    assert!(err.contains("nope__nope-1"), "{err}");
    assert!(!t.path("x.jsonl").exists());
}

#[test]
fn a_bad_record_is_named_by_line_and_nothing_is_imported() {
    let t = TestContext::new();
    let good = record("acme__widgets-1").to_string();
    let mut bad = record("acme__widgets-2");
    bad.as_object_mut().unwrap().remove("base_commit");
    let lines = [
        good.clone(),
        record("acme__widgets-3").to_string(),
        bad.to_string(),
    ];
    fs::write(t.path("ds.jsonl"), lines.join("\n")).unwrap();
    let err = stderr(&t.run_expect(&["import", "ds.jsonl"], 2));
    assert!(
        err.contains("ds.jsonl") && err.contains("line 3") && err.contains("base_commit"),
        "{err}"
    );
    assert_eq!(instance_count(&t), 0);

    fs::write(t.path("ds.jsonl"), format!("{good}\n{{not json\n")).unwrap();
    let err = stderr(&t.run_expect(&["import", "ds.jsonl"], 2));
    assert!(err.contains("line 2"), "{err}");

    fs::write(t.path("ds.jsonl"), format!("{good}\n\n{good}\n")).unwrap();
    let err = stderr(&t.run_expect(&["import", "ds.jsonl"], 2));
    assert!(err.contains("appears twice (line 1 and line 3)"), "{err}");
    assert_eq!(instance_count(&t), 0);
}

#[test]
fn a_list_or_json_lines_is_told_by_the_content_whatever_the_name() {
    let (a, b) = (record("acme__widgets-1"), record("acme__widgets-2"));
    let cases = [
        ("lines.txt", format!("{a}\n\n{b}\n")),
        (
            "list.jsonl",
            serde_json::to_string_pretty(&vec![a.clone(), b.clone()]).unwrap(),
        ),
        (
            "one.txt",
            format!("\n{}\n", serde_json::to_string_pretty(&a).unwrap()),
        ),
    ];
    for (name, text) in cases {
        let t = TestContext::new();
        fs::write(t.path(name), &text).unwrap();
        t.run_expect(
            &[
                "import",
                name,
                "--dataset",
                "acme-set",
                "--environments-as-of",
                "2024-06-01",
            ],
            0,
        );
        assert_eq!(
            instance_count(&t),
            text.matches("instance_id").count(),
            "{name}"
        );
    }
    // A first line that is neither a record nor the start of a list: the file, line and column.
    let t = TestContext::new();
    fs::write(t.path("ds.txt"), format!("{{not json\n{a}\n")).unwrap();
    let err = stderr(&t.run_expect(&["import", "ds.txt"], 2));
    assert!(
        err.contains("`ds.txt` is neither a JSON list nor JSON Lines: ")
            && err.contains("at line 1 column 2"),
        "{err}"
    );
}
