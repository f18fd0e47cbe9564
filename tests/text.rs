//! `swe-ark text`: SWE-bench's text datasets from bundles, offline. The tokenizer, the analyzer
//! and BM25 are checked against reference answers made once by Python tiktoken and by Apache
//! Lucene (tests/fixtures/text/, with the scripts that made them); the command against a
//! small archive made by code.

mod common;

use common::*;

use std::fs;

use serde_json::Value;
use swe_ark::text::{self, Analyzer, Document, Index};

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/text/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_slice(&fs::read(&path).unwrap()).unwrap()
}

#[test]
fn token_ids_are_tiktokens() {
    let doc = fixture("cl100k_vectors.json");
    let vectors = doc["vectors"].as_array().unwrap();
    assert!(vectors.len() > 40);
    for v in vectors {
        let text = v["text"].as_str().unwrap();
        let want: Vec<u32> = v["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(text::tokenizer::encode(text), want, "{text:?}");
        assert_eq!(text::tokenizer::count(text), want.len());
    }
}

#[test]
fn terms_are_lucenes() {
    let doc = fixture("lucene_reference.json");
    let mut analyzer = Analyzer::new();
    for case in doc["analyze"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let want: Vec<&str> = case["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert_eq!(analyzer.terms(text), want, "{text:?}");
    }
}

#[test]
fn stems_are_lucenes_porter() {
    let doc = fixture("lucene_reference.json");
    let pairs = doc["stem"].as_array().unwrap();
    assert!(pairs.len() > 3000);
    let wrong: Vec<String> = pairs
        .iter()
        .filter_map(|p| {
            let (word, want) = (p[0].as_str().unwrap(), p[1].as_str().unwrap());
            let got = text::stem(word);
            (got != want).then(|| format!("{word}: {got} (Lucene: {want})"))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn bm25_ranks_and_scores_as_lucene() {
    let doc = fixture("lucene_reference.json");
    let docs: Vec<Document> = doc["corpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let id = d["path"].as_str().unwrap().to_string();
            let text = format!("{id}\n{}", d["content"].as_str().unwrap());
            Document { id, text }
        })
        .collect();
    let index = Index::build(&docs);
    for q in doc["queries"].as_array().unwrap() {
        let query = q["text"].as_str().unwrap();
        let result = index.search(query, 20);
        assert_eq!(
            result.query_chars,
            q["cutoff"].as_u64().unwrap() as usize,
            "{query:.60}"
        );
        let want: Vec<(String, String)> = q["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                (
                    h["path"].as_str().unwrap().to_string(),
                    h["score_bits"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let got: Vec<(String, String)> = result
            .hits
            .iter()
            .map(|h| (h.id.clone(), format!("{:x}", h.score.to_bits())))
            .collect();
        assert_eq!(got, want, "{query:.60}");
    }
}

const ISSUE: &str = "The serializer ignores its timeout\n\nSerializer(timeout=30).dump(obj) waits forever; \
                     the timeout option of the serializer is never read.\n";

const GOLD: &str = "diff --git a/widgets/serializer.py b/widgets/serializer.py\n\
                    --- a/widgets/serializer.py\n+++ b/widgets/serializer.py\n\
                    @@ -1,3 +1,3 @@\n class Serializer:\n-    def __init__(self, timeout=None):\n\
                    +    def __init__(self, timeout=30):\n         self.timeout = timeout\n\
                    diff --git a/widgets/deadline.py b/widgets/deadline.py\nnew file mode 100644\n\
                    --- /dev/null\n+++ b/widgets/deadline.py\n@@ -0,0 +1 @@\n+DEADLINE = 30\n";

const SERIALIZER: &str = "class Serializer:\n    def __init__(self, timeout=None):\n        \
                          self.timeout = timeout\n\n    def dump(self, obj):\n        \
                          return repr(obj)\n";

/// A code base where BM25 has something to rank: the serializer (the file to fix), files that
/// share some of the issue's words, test files that share all of them (left out of the index),
/// a file that is not UTF-8 (left out), a README (always shown), CRLF line ends (read as
/// Python reads them) and a symlink to a module.
fn make_codebase(t: &TestContext) -> std::path::PathBuf {
    let root = t.path("cb");
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("README.md", b"# widgets\n\nWidgets that serialize.\n".to_vec()),
        ("widgets/__init__.py", b"".to_vec()),
        ("widgets/serializer.py", SERIALIZER.as_bytes().to_vec()),
        (
            "widgets/timeouts.py",
            b"# Timeout helpers.\r\nDEFAULT_TIMEOUT = 10\r\n\r\ndef wait(timeout):\r\n    return timeout\r\n"
                .to_vec(),
        ),
        (
            "widgets/dumper.py",
            b"def dump(obj):\n    \"\"\"Dump an object.\"\"\"\n    return str(obj)\n".to_vec(),
        ),
        (
            "widgets/big.py",
            (0..400)
                .map(|i| format!("def helper_{i}(obj):\n    return obj + {i}  # widget option\n"))
                .collect::<String>()
                .into_bytes(),
        ),
        (
            "widgets/legacy.py",
            b"# caf\xe9: Latin-1, not UTF-8. serializer timeout\n".to_vec(),
        ),
        (
            "tests/test_serializer.py",
            b"# serializer timeout serializer timeout serializer timeout\n".to_vec(),
        ),
        (
            "widgets/testing.py",
            b"# serializer timeout serializer timeout\n".to_vec(),
        ),
        ("docs/serializer.txt", b"serializer timeout serializer timeout\n".to_vec()),
    ];
    for (path, content) in files {
        let p = root.join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }
    std::os::unix::fs::symlink("dumper.py", root.join("widgets/dump_alias.py")).unwrap();
    // Links to files that are neither README files nor modules: followed all the same.
    fs::write(root.join("docs/readme-body.txt"), "Body.\n").unwrap();
    std::os::unix::fs::symlink("docs/readme-body.txt", root.join("readme.txt")).unwrap();
    fs::write(
        root.join("docs/shim_src.txt"),
        "SERIALIZER_SHIM = 'serializer'\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("../docs/shim_src.txt", root.join("widgets/shim.py")).unwrap();
    root
}

fn pack_instance(t: &TestContext) -> String {
    let cb = make_codebase(t);
    let inst = serde_json::json!({
        "instance_id": "acme__widgets-7",
        "repo": "acme/widgets",
        "base_commit": BASE_COMMIT,
        "patch": GOLD,
        "test_patch": "diff --git a/tests/test_serializer.py b/tests/test_serializer.py\n",
        "problem_statement": ISSUE,
        "hints_text": "",
        "created_at": "2024-03-01T12:00:00Z",
        "version": "1.0",
        "environment_setup_commit": BASE_COMMIT,
        "FAIL_TO_PASS": ["tests/test_serializer.py::test_timeout"],
        "PASS_TO_PASS": [],
    });
    fs::write(t.path("inst.json"), inst.to_string()).unwrap();
    let out = t.run_expect(
        &[
            "pack",
            "--instance",
            t.path("inst.json").to_str().unwrap(),
            "--codebase",
            cb.to_str().unwrap(),
        ],
        0,
    );
    last_line(&out.stdout)
}

fn rows(path: &std::path::Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

const PREMISE: &str = "You will be provided with a partial code base and an issue statement explaining a problem to resolve.\n";

const TAIL: &str = "\n</code>\n\nHere is an example of a patch file. It consists of changes to the code base. \
It specifies the file names, the line numbers of each change, and the removed and added lines. \
A single patch file can contain changes to multiple files.\n<patch>\n--- a/file.py\n+++ b/file.py\n";

const END: &str = "     return points\n</patch>\n\nI need you to solve the provided issue by generating a \
single patch file that I can apply directly to this repository using git apply. Please respond \
with a single patch file in the format shown above.\nRespond below:\n\n";

#[test]
fn oracle_text_is_swe_benchs_prompt_with_the_edited_files() {
    let t = TestContext::new();
    pack_instance(&t);
    let out = t.path("oracle.jsonl");
    t.run_expect(
        &["text", "--retrieval", "oracle", "-o", out.to_str().unwrap()],
        0,
    );
    let rows = rows(&out);
    assert_eq!(rows.len(), 1);
    let row = rows[0].as_object().unwrap();
    let keys: Vec<&str> = row.keys().map(String::as_str).collect();
    let mut published = vec![
        "instance_id",
        "text",
        "repo",
        "base_commit",
        "problem_statement",
        "hints_text",
        "created_at",
        "patch",
        "test_patch",
        "version",
        "FAIL_TO_PASS",
        "PASS_TO_PASS",
        "environment_setup_commit",
    ];
    assert_eq!(keys.len(), published.len());
    // The file keeps the published column order.
    let line = fs::read_to_string(&out).unwrap();
    let mut at = 0;
    for k in published.drain(..) {
        let pos = line.find(&format!("\"{k}\": ")).unwrap();
        assert!(pos >= at, "{k} is out of order");
        at = pos;
    }
    assert_eq!(row["patch"], format!("<patch>\n{GOLD}\n</patch>"));
    assert_eq!(
        row["FAIL_TO_PASS"],
        "[\"tests/test_serializer.py::test_timeout\"]"
    );
    // The whole prompt, written out by hand: upstream's template, the README and the files the
    // gold patch edits in path order (a new file's source, /dev/null, reads as empty upstream).
    let text = row["text"].as_str().unwrap();
    let expected_head = format!(
        "{PREMISE}<issue>\n{ISSUE}\n</issue>\n\n<code>\n\
         [start of README.md]\n1 # widgets\n2 \n3 Widgets that serialize.\n4 \n[end of README.md]\n\
         [start of readme.txt]\n1 Body.\n2 \n[end of readme.txt]\n\
         [start of /dev/null]\n1 \n[end of /dev/null]\n\
         [start of widgets/serializer.py]\n1 class Serializer:\n2     def __init__(self, timeout=None):\n\
         3         self.timeout = timeout\n4 \n5     def dump(self, obj):\n6         return repr(obj)\n7 \n\
         [end of widgets/serializer.py]{TAIL}"
    );
    assert!(
        text.starts_with(&expected_head),
        "--- got\n{text}\n--- expected to start with\n{expected_head}"
    );
    assert!(text.ends_with(END), "{text}");
    assert_eq!(
        text.matches("\n def bresenham(x0, y0, x1, y1):\n").count(),
        1
    );
}

#[test]
fn bm25_text_ranks_the_code_base_and_stays_in_its_budget() {
    let t = TestContext::new();
    pack_instance(&t);
    let out = t.path("bm25.jsonl");
    let hits = t.path("hits.jsonl");
    t.run_expect(
        &[
            "text",
            "--retrieval",
            "bm25",
            "--max-tokens",
            "27000",
            "--instance-ids",
            "acme__widgets-7",
            "-o",
            out.to_str().unwrap(),
            "--hits",
            hits.to_str().unwrap(),
        ],
        0,
    );
    let h = &rows(&hits)[0];
    assert_eq!(h["instance_id"], "acme__widgets-7");
    let ranked = column(&h["hits"], "docid");
    // Test files, files that are not Python, and files that are not UTF-8 are not documents;
    // a symlink to a module is one.
    assert_eq!(ranked[0], "widgets/serializer.py", "{ranked:?}");
    for left_out in [
        "tests/test_serializer.py",
        "widgets/testing.py",
        "docs/serializer.txt",
        "widgets/legacy.py",
        "README.md",
    ] {
        assert!(!ranked.contains(&left_out), "{left_out} in {ranked:?}");
    }
    assert!(ranked.contains(&"widgets/dump_alias.py"), "{ranked:?}");
    assert!(ranked.contains(&"widgets/shim.py"), "{ranked:?}");
    let row = &rows(&out)[0];
    let text = row["text"].as_str().unwrap();
    assert!(text.starts_with(PREMISE), "{text}");
    assert!(
        text.contains("[start of README.md]\n1 # widgets\n"),
        "{text}"
    );
    // CRLF reads as LF, as Python's text mode reads it.
    assert!(
        text.contains(
            "[start of widgets/timeouts.py]\n1 # Timeout helpers.\n2 DEFAULT_TIMEOUT = 10\n3 \n"
        ),
        "{text}"
    );
    assert!(text.ends_with(END));
    assert!(text::tokenizer::count(text) <= 27000);

    // Every budget is kept: the text is never over it, and a larger budget never shows fewer
    // files. Below what the prompt needs without code, the instance is left out, named.
    let base = {
        let mut no_code = text.to_string();
        for name in ranked.iter().chain(["README.md", "readme.txt"].iter()) {
            if let Some(start) = no_code.find(&format!("[start of {name}]")) {
                let end_tag = format!("[end of {name}]\n");
                let end = no_code[start..].find(&end_tag).unwrap() + start + end_tag.len();
                no_code.replace_range(start..end, "");
            }
        }
        text::tokenizer::count(&no_code)
    };
    let mut last_files = 0;
    for budget in [
        base + 40,
        base + 120,
        base + 400,
        base + 1500,
        base + 4000,
        27000,
    ] {
        let out = t.path(&format!("b{budget}.jsonl"));
        t.run_expect(
            &[
                "text",
                "--max-tokens",
                &budget.to_string(),
                "-o",
                out.to_str().unwrap(),
            ],
            0,
        );
        let text = rows(&out)[0]["text"].as_str().unwrap().to_string();
        let tokens = text::tokenizer::count(&text);
        assert!(tokens <= budget, "{tokens} tokens for a budget of {budget}");
        let files = text.matches("[start of ").count();
        assert!(
            files >= last_files,
            "budget {budget}: {files} files, fewer than before"
        );
        last_files = files;
    }
    assert!(last_files >= 4, "{last_files}");
    // --count-tokens counts a file as the budget counts.
    fs::write(t.path("text.txt"), text).unwrap();
    let out = t.run_expect(
        &[
            "text",
            "--count-tokens",
            t.path("text.txt").to_str().unwrap(),
        ],
        0,
    );
    let counted: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(counted["tokens"], text::tokenizer::count(text));
    let out2 = t.path("tiny.jsonl");
    let run = t.run_expect(
        &["text", "--max-tokens", "50", "-o", out2.to_str().unwrap()],
        2,
    );
    let err = stderr(&run);
    assert!(
        err.contains("acme__widgets-7") && err.contains("over the budget of 50"),
        "{err}"
    );
    assert_eq!(fs::read_to_string(&out2).unwrap(), "");
}

#[test]
fn the_same_bundle_gives_the_same_bytes() {
    let t = TestContext::new();
    pack_instance(&t);
    let a = t.path("a.jsonl");
    let b = t.path("b.json");
    t.run_expect(&["text", "-o", a.to_str().unwrap()], 0);
    t.run_expect(&["-q", "text", "-o", b.to_str().unwrap()], 0);
    let a = fs::read(&a).unwrap();
    let b = fs::read(&b).unwrap();
    // b.json is a JSON list of the same records.
    assert_eq!(
        format!("[{}]\n", String::from_utf8_lossy(&a).trim_end()),
        String::from_utf8_lossy(&b)
    );
}

#[test]
fn bad_requests_and_bad_bundles_are_refused() {
    let t = TestContext::new();
    let id = pack_instance(&t);
    let out = t.path("x.jsonl");
    let o = out.to_str().unwrap();
    let err = stderr(&t.run_expect(
        &[
            "text",
            "--retrieval",
            "oracle",
            "--max-tokens",
            "1000",
            "-o",
            o,
        ],
        2,
    ));
    assert!(
        err.contains("--max-tokens applies to --retrieval bm25"),
        "{err}"
    );
    let err = stderr(&t.run_expect(&["text", "--instance-ids", "nope__nope-1", "-o", o], 2));
    assert!(
        err.contains("--instance-ids names 1 instance(s) not in the archive: nope__nope-1"),
        "{err}"
    );
    // A bundle whose bytes changed is named and left out; nothing of it is used.
    t.damage_piece_of(b"# widgets\n\nWidgets that serialize.\n");
    let err = stderr(&t.run_expect(&["text", "-o", o], 2));
    assert!(
        err.contains(&format!("acme__widgets-7 (bundle {})", &id[..12]))
            && err.contains("does not match bundle.json"),
        "{err}"
    );
}
