//! A row's `image_assets`: binary files a text patch cannot carry (an `expected.png`
//! baseline), which swebench 5's harness puts into the work tree after the evaluation script
//! applied the test patch, right before the test output's start marker
//! (`_stage_image_assets`, `_inject_asset_restore`). swebench reads each from the task
//! repository (`tasks/<id>/test_assets/<path>`), else fetches its URL; here each comes from
//! the archive's object store, where `import` kept the task's files, and is written by the
//! script itself (base64 in a here-document): nothing to fetch, nothing to mount.

use base64::Engine;
use serde_json::Value;

use crate::dataset::{Instance, TaskRecord};
use crate::store::ObjectStore;

use super::eval_script::START_TEST_OUTPUT;

/// Where a task repository keeps its assets (swebench's `ASSETS_SUBDIR`).
const ASSETS_DIR: &str = "test_assets";

/// What staging a row's assets takes: the script lines that write them, and the assets it
/// could not find (by path, with why).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Staged {
    pub lines: Vec<String>,
    pub missing: Vec<(String, String)>,
}

/// The paths the row's `image_assets` names (`{"test_patch": [{"path": …, "url": …}], "patch":
/// […]}`, a JSON string in Hugging Face's files, an object in a task repository), test patch's
/// first, as swebench stages them.
fn declared(row: &Instance) -> Vec<String> {
    let parsed = match row.extra.get("image_assets") {
        Some(Value::String(s)) if !s.trim().is_empty() => serde_json::from_str(s).ok(),
        Some(v @ Value::Object(_)) => Some(v.clone()),
        _ => None,
    };
    let Some(assets) = parsed else {
        return Vec::new();
    };
    ["test_patch", "patch"]
        .iter()
        .filter_map(|k| assets.get(*k).and_then(Value::as_array))
        .flatten()
        .filter_map(|e| e.get("path").and_then(Value::as_str))
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect()
}

/// The lines that write the row's assets into the work tree, each from the object `import`
/// kept of `tasks/<id>/test_assets/<path>`.
pub fn stage(row: &Instance, objects: &ObjectStore) -> Staged {
    let mut out = Staged::default();
    let paths = declared(row);
    if paths.is_empty() {
        return out;
    }
    let record = TaskRecord::of(row);
    for path in paths {
        let kept = record
            .as_ref()
            .and_then(|r| r.files.get(&format!("{ASSETS_DIR}/{path}")));
        let Some(kept) = kept else {
            let why = "not among the task's files (swebench would fetch its URL; there is no \
                       network here)";
            out.missing.push((path, why.into()));
            continue;
        };
        match objects.get(&kept.sha256) {
            Ok(bytes) => out.lines.push(write_line(&path, &bytes)),
            Err(e) => out.missing.push((path, e.to_string())),
        }
    }
    out
}

/// A shell command that writes `bytes` to `path` (relative to the work tree), its folder made.
fn write_line(path: &str, bytes: &[u8]) -> String {
    let quoted = format!("'{}'", path.replace('\'', r"'\''"));
    let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
    let wrapped: Vec<&str> = encoded
        .as_bytes()
        .chunks(76)
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect();
    format!(
        "mkdir -p \"$(dirname {quoted})\" && base64 -d > {quoted} <<'SWE_ARK_ASSET_EOF'\n{}\nSWE_ARK_ASSET_EOF",
        wrapped.join("\n")
    )
}

/// `script` with `lines` right before the line holding the start marker (at its end when it
/// has none), as swebench's `_inject_asset_restore` puts its restore commands.
pub fn inject(script: &str, lines: &[String]) -> String {
    if lines.is_empty() {
        return script.to_string();
    }
    let mut out: Vec<&str> = script.split('\n').collect();
    match out.iter().position(|l| l.contains(START_TEST_OUTPUT)) {
        Some(at) => {
            for (i, l) in lines.iter().enumerate() {
                out.insert(at + i, l);
            }
            out.join("\n")
        }
        None => format!("{script}\n{}", lines.join("\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_go_before_the_start_marker() {
        let script = "cd /testbed\ngit apply t.diff\n: '>>>>> Start Test Output'\npytest\n";
        let line = write_line("tests/it's.png", &[0, 1, 2, 255]);
        assert!(
            line.starts_with("mkdir -p \"$(dirname 'tests/it'\\''s.png')\""),
            "{line}"
        );
        assert!(line.contains("\nAAEC/w==\n"), "{line}");
        let out = inject(script, std::slice::from_ref(&line));
        let at = out.find(&line).unwrap();
        assert!(at > out.find("git apply").unwrap() && at < out.find("Start Test").unwrap());
        assert_eq!(inject(script, &[]), script);
        assert!(inject("pytest", &["x".into()]).ends_with("pytest\nx"));
    }

    #[test]
    fn declared_assets_read_as_a_string_or_an_object() {
        let base = "0123456789abcdef0123456789abcdef01234567";
        let mut v = serde_json::json!({"instance_id": "a__b-1", "repo": "a/b",
            "base_commit": base, "patch": "", "test_patch": ""});
        v["image_assets"] =
            r#"{"test_patch": [{"path": "t/e.png", "url": "u"}], "patch": [{"path": "p.bin"}]}"#
                .into();
        let row = Instance::from_value(v.clone()).unwrap();
        assert_eq!(declared(&row), ["t/e.png", "p.bin"]);
        v["image_assets"] = serde_json::json!({"patch": [{"path": "p.bin", "url": ""}]});
        assert_eq!(declared(&Instance::from_value(v).unwrap()), ["p.bin"]);
    }
}
