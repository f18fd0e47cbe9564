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

/// pyarrow's python, or `None`, saying so.
fn pyarrow() -> Option<std::path::PathBuf> {
    tool_python("pyarrow", "pyarrow")
}

/// Runs `script` with pyarrow's python in `t`'s directory; its stdout.
fn python(t: &TestContext, py: &std::path::Path, script: &str) -> String {
    run_python(t, py, script, &[])
}

/// Writes `rows.jsonl`'s records as Hugging Face writes SWE-bench Verified: every column a
/// string, in the published order, `difficulty` last, the `huggingface` schema metadata,
/// snappy; `data/test-0000N-of-00002.parquet` in two shards of two row groups each, and one
/// record more as `data/dev-00000-of-00001.parquet`.
const WRITE_AS_HUGGING_FACE: &str = r#"
import json, os
import pyarrow as pa, pyarrow.parquet as pq
cols = ["repo", "instance_id", "base_commit", "patch", "test_patch", "problem_statement",
        "hints_text", "created_at", "version", "FAIL_TO_PASS", "PASS_TO_PASS",
        "environment_setup_commit", "difficulty"]
rows = [json.loads(l) for l in open("rows.jsonl")]
features = {c: {"dtype": "string", "_type": "Value"} for c in cols}
meta = {b"huggingface": json.dumps({"info": {"features": features}}).encode()}
schema = pa.schema([pa.field(c, pa.string()) for c in cols], metadata=meta)
def table(rs):
    return pa.Table.from_pylist(rs, schema=schema)
os.makedirs("data", exist_ok=True)
test, dev = rows[:-1], rows[-1:]
half = (len(test) + 1) // 2
for i, part in enumerate([test[:half], test[half:]]):
    pq.write_table(table(part), f"data/test-0000{i}-of-00002.parquet", row_group_size=2)
pq.write_table(table(dev), "data/dev-00000-of-00001.parquet")
"#;

/// Records of SWE-bench's form with what a column store can get wrong: non-ASCII beyond the
/// BMP, a null and an empty hint, an empty list, long multi-line text; the Lite dev split's
/// when SWE_ARK_LITE_DEV names it.
fn parquet_rows(t: &TestContext) -> usize {
    let mut rows: Vec<serde_json::Value> = (1..=5)
        .map(|n| {
            let mut r = record(&format!("acme__widgets-{n}"));
            r["difficulty"] = "<15 min fix".into();
            r
        })
        .collect();
    rows[0]["problem_statement"] = "caf\u{e9} \u{1f600}\r\n\ttab\u{0}nul".repeat(500).into();
    rows[1]["hints_text"] = serde_json::Value::Null;
    rows[2]["PASS_TO_PASS"] = "[\"tests/test_core.py::test_g[a-\u{e9}]\"]".into();
    rows[3]["created_at"] = "2023-07-01T00:00:00Z".into();
    if let Ok(path) = std::env::var("SWE_ARK_LITE_DEV") {
        for line in fs::read_to_string(path).unwrap().lines() {
            let mut r: serde_json::Value = serde_json::from_str(line).unwrap();
            r["difficulty"] = "15 min - 1 hour".into();
            rows.insert(0, r);
        }
    }
    let text: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
    fs::write(t.path("rows.jsonl"), text.join("\n") + "\n").unwrap();
    rows.len()
}

#[test]
fn parquet_as_hugging_face_publishes_it_imports_as_its_json_does_and_comes_back() {
    let Some(py) = pyarrow() else { return };
    let t = TestContext::new();
    let n = parquet_rows(&t);
    python(&t, &py, WRITE_AS_HUGGING_FACE);
    let date = [
        "--dataset",
        "acme-set",
        "--environments-as-of",
        "2024-06-01",
    ];

    // The downloaded folder, its test split: both shards, in order; the dev file left out.
    let mut args = vec!["import", "data", "--split", "test"];
    args.extend(date);
    let out = t.run_expect(&args, 0);
    assert!(
        stdout(&out).contains(&format!("imported {} instances", n - 1)),
        "{}",
        stdout(&out)
    );
    // What the same records give from JSON Lines, in another archive.
    let json_ark = t.path("json-ark");
    let mut args = vec!["import", "rows.jsonl"];
    args.extend(date);
    t.run_expect_at(&json_ark, &args, 0);
    t.run_expect(&["export-dataset", "-o", "from-parquet.jsonl"], 0);
    t.run_expect_at(&json_ark, &["export-dataset", "-o", "from-json.jsonl"], 0);
    let from_json = fs::read_to_string(t.path("from-json.jsonl")).unwrap();
    let all_but_dev: Vec<&str> = from_json.lines().take(n - 1).collect();
    // (Not assert_eq: the records are long.)
    assert!(
        fs::read_to_string(t.path("from-parquet.jsonl")).unwrap() == all_but_dev.join("\n") + "\n",
        "the same records as the JSON gives"
    );

    // Written as Parquet, read by pyarrow: the same rows, every column a string, in order;
    // read back by swe-ark: the same instances. Twice: the same bytes.
    t.run_expect(&["export-dataset", "-o", "out.parquet"], 0);
    t.run_expect(
        &["export-dataset", "--format", "parquet", "-o", "again.bin"],
        0,
    );
    assert!(fs::read(t.path("out.parquet")).unwrap() == fs::read(t.path("again.bin")).unwrap());
    let check = r#"
import json, pyarrow.parquet as pq
t = pq.read_table("out.parquet")
want = [json.loads(l) for l in open("from-parquet.jsonl")]
got = t.to_pylist()
assert got == want, "rows differ"
assert all(str(f.type) == "string" for f in t.schema), t.schema
print(",".join(t.column_names))
"#;
    assert_eq!(
        python(&t, &py, check).trim(),
        "repo,instance_id,base_commit,patch,test_patch,problem_statement,hints_text,\
         created_at,version,FAIL_TO_PASS,PASS_TO_PASS,environment_setup_commit,difficulty"
    );
    let back = t.path("back-ark");
    let mut args = vec!["import", "out.parquet"];
    args.extend(date);
    t.run_expect_at(&back, &args, 0);
    t.run_expect_at(&back, &["export-dataset", "-o", "back.jsonl"], 0);
    assert!(
        fs::read(t.path("back.jsonl")).unwrap() == fs::read(t.path("from-parquet.jsonl")).unwrap()
    );
    // With the test lists as lists: Parquet lists of strings, which pyarrow reads as lists.
    t.run_expect(
        &[
            "export-dataset",
            "-o",
            "lists.parquet",
            "--tests-as",
            "lists",
        ],
        0,
    );
    let lists = r#"
import json, pyarrow.parquet as pq
t = pq.read_table("lists.parquet")
assert str(t.schema.field("FAIL_TO_PASS").type) == "list<element: string>", t.schema
want = [json.loads(json.loads(l)["PASS_TO_PASS"]) for l in open("from-parquet.jsonl")]
assert t.column("PASS_TO_PASS").to_pylist() == want
"#;
    python(&t, &py, lists);
    let mut args = vec!["import", "lists.parquet"];
    args.extend(date);
    t.run_expect_at(&t.path("lists-ark"), &args, 0);
    t.run_expect_at(
        &t.path("lists-ark"),
        &["export-dataset", "-o", "l.jsonl"],
        0,
    );
    assert!(
        fs::read(t.path("l.jsonl")).unwrap() == fs::read(t.path("from-parquet.jsonl")).unwrap()
    );
}

#[test]
fn a_bad_parquet_file_is_named_with_its_row_or_column_and_nothing_is_imported() {
    let Some(py) = pyarrow() else { return };
    let t = TestContext::new();
    parquet_rows(&t);
    let write = |name: &str, change: &str| {
        let script = format!(
            r#"
import json, pyarrow as pa, pyarrow.parquet as pq
rows = [json.loads(l) for l in open("rows.jsonl")]
t = pa.Table.from_pylist(rows)
{change}
pq.write_table(t, "{name}")
"#
        );
        python(&t, &py, &script);
    };
    let date = [
        "--dataset",
        "acme-set",
        "--environments-as-of",
        "2024-06-01",
    ];
    let import = |name: &str| {
        let mut args = vec!["import", name];
        args.extend(date);
        stderr(&t.run_expect(&args, 2))
    };
    write("missing.parquet", "t = t.drop_columns(['instance_id'])");
    let e = import("missing.parquet");
    assert!(
        e.contains("`missing.parquet` has no column `instance_id`") && e.contains("repo,"),
        "{e}"
    );
    write(
        "mistyped.parquet",
        "t = t.set_column(t.schema.get_field_index('FAIL_TO_PASS'), 'FAIL_TO_PASS', \
         pa.array([7] * len(t), pa.int64()))",
    );
    let e = import("mistyped.parquet");
    assert!(
        e.contains("`mistyped.parquet`: column `FAIL_TO_PASS` is INT64")
            && e.contains("a string holding a JSON list, or a list of strings"),
        "{e}"
    );
    write(
        "null-id.parquet",
        "ids = t.column('instance_id').to_pylist(); ids[2] = None\n\
         t = t.set_column(t.schema.get_field_index('instance_id'), 'instance_id', \
         pa.array(ids, pa.string()))",
    );
    let e = import("null-id.parquet");
    assert!(
        e.contains("`null-id.parquet` row 3") && e.contains("instance_id"),
        "{e}"
    );
    write(
        "bad-list.parquet",
        "f = t.column('FAIL_TO_PASS').to_pylist(); f[1] = '[\"a\", 3]'\n\
         t = t.set_column(t.schema.get_field_index('FAIL_TO_PASS'), 'FAIL_TO_PASS', \
         pa.array(f, pa.string()))",
    );
    let e = import("bad-list.parquet");
    assert!(
        e.contains("`bad-list.parquet` row 2") && e.contains("FAIL_TO_PASS"),
        "{e}"
    );
    // The same instance in two shards: both places named.
    write("a.parquet", "");
    fs::create_dir_all(t.path("twice")).unwrap();
    fs::copy(
        t.path("a.parquet"),
        t.path("twice/test-00000-of-00002.parquet"),
    )
    .unwrap();
    fs::copy(
        t.path("a.parquet"),
        t.path("twice/test-00001-of-00002.parquet"),
    )
    .unwrap();
    let e = import("twice");
    assert!(
        e.contains(
            "appears twice (row 1 of `twice/test-00000-of-00002.parquet` and row 1 of \
                    `twice/test-00001-of-00002.parquet`)"
        ),
        "{e}"
    );
    // A split the folder does not have.
    let mut args = vec!["import", "twice", "--split", "dev"];
    args.extend(date);
    let e = stderr(&t.run_expect(&args, 2));
    assert!(
        e.contains("`twice` holds no dataset file of split `dev`"),
        "{e}"
    );
    assert_eq!(instance_count(&t), 0, "nothing imported");

    // A Multi-SWE-bench row has fields a Parquet file of SWE-bench records cannot hold.
    let msb = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/multi-swe-bench-5.jsonl");
    t.run_expect(&["import", msb.to_str().unwrap()], 0);
    let e = stderr(&t.run_expect(&["export-dataset", "-o", "msb.parquet"], 2));
    assert!(
        e.contains("which a Parquet column of SWE-bench records cannot hold"),
        "{e}"
    );
    assert!(!t.path("msb.parquet").exists());
}
