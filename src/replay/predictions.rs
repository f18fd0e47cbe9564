//! Predictions in SWE-bench's format: a JSON list, a JSON map by instance id, or JSON Lines
//! (told apart by the content, whatever the file's name), each with `instance_id`,
//! `model_name_or_path` and `model_patch` (a string, or null). Multi-SWE-bench's patch files
//! are read too: records of `org`, `repo`, `number` and `fix_patch`, for the instance
//! `org__repo-number`, by the model the record names, else the one the file's name says.

use std::collections::BTreeMap;
use std::path::Path;

use crate::dataset::{JsonText, json_or_lines};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prediction {
    pub instance_id: String,
    pub model: String,
    /// None when the prediction's patch is null.
    pub patch: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum PredictionError {
    #[error("cannot read predictions `{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("predictions `{path}` are malformed: {}", joined(.problems))]
    Malformed {
        path: String,
        problems: Vec<PredictionProblem>,
    },
}

/// What is wrong with one prediction; `at` says where (`line 3`, `item 2`, `key `x``).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PredictionProblem {
    #[error("{at}: not a JSON object")]
    NotAnObject { at: String },
    #[error("{at}: no `instance_id`")]
    NoInstanceId { at: String },
    #[error("{at} ({instance_id}): no `model_name_or_path`")]
    NoModel { at: String, instance_id: String },
    #[error("{at} ({instance_id}): `model_name_or_path` `{model}` cannot name a report directory")]
    BadModel {
        at: String,
        instance_id: String,
        model: String,
    },
    #[error("{at} ({instance_id}): `{field}` is {kind}, not a string")]
    BadPatch {
        at: String,
        instance_id: String,
        field: &'static str,
        kind: &'static str,
    },
    #[error("{at}: {detail}")]
    Json { at: String, detail: String },
    #[error("the file holds {kind}, not a list or a map of predictions")]
    NotPredictions { kind: &'static str },
    #[error("neither one JSON document nor JSON Lines of predictions ({detail})")]
    Neither { detail: String },
    #[error("instance {instance_id} is predicted {times} times")]
    Twice { instance_id: String, times: usize },
}

fn joined(problems: &[PredictionProblem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// A Multi-SWE-bench patch record's instance id (`org__repo-number`), if it is one.
fn msb_instance_id(obj: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
    if obj.contains_key("instance_id") || !obj.contains_key("fix_patch") {
        return None;
    }
    let org = obj.get("org")?.as_str()?;
    let repo = obj.get("repo")?.as_str()?;
    let number = obj.get("number")?.as_u64()?;
    Some(format!("{org}__{repo}-{number}"))
}

fn one(
    v: &serde_json::Value,
    at: &str,
    key_id: Option<&str>,
    file_model: &str,
) -> Result<Prediction, PredictionProblem> {
    let at = at.to_string();
    let obj = v
        .as_object()
        .ok_or_else(|| PredictionProblem::NotAnObject { at: at.clone() })?;
    let msb = msb_instance_id(obj);
    let instance_id = match (
        obj.get("instance_id").and_then(|x| x.as_str()),
        key_id,
        &msb,
    ) {
        (Some(id), _, _) => id.to_string(),
        (None, _, Some(id)) => id.clone(),
        (None, Some(k), None) => k.to_string(),
        (None, None, None) => return Err(PredictionProblem::NoInstanceId { at }),
    };
    let named = obj.get("model_name_or_path").and_then(|x| x.as_str());
    let Some(model) = named.or(msb.as_ref().map(|_| file_model)) else {
        return Err(PredictionProblem::NoModel { at, instance_id });
    };
    let model = model.to_string();
    if model.is_empty() || model.contains('/') && model.contains("..") {
        return Err(PredictionProblem::BadModel {
            at,
            instance_id,
            model,
        });
    }
    let patch_key = if msb.is_some() {
        "fix_patch"
    } else {
        "model_patch"
    };
    let patch = match obj.get(patch_key) {
        Some(serde_json::Value::String(p)) => Some(p.clone()),
        Some(serde_json::Value::Null) | None => None,
        Some(other) => {
            return Err(PredictionProblem::BadPatch {
                at,
                instance_id,
                field: patch_key,
                kind: crate::dataset::json_type_name(other),
            });
        }
    };
    Ok(Prediction {
        instance_id,
        model,
        patch,
    })
}

/// An object that is one prediction rather than a map of them by instance id (JSON Lines of
/// one line): one of a prediction's own fields, with a value a map's entry cannot have.
fn is_one_prediction(v: &serde_json::Value) -> bool {
    v.as_object().is_some_and(|o| {
        [
            "instance_id",
            "model_name_or_path",
            "model_patch",
            "fix_patch",
        ]
        .iter()
        .any(|k| o.get(*k).is_some_and(|x| !x.is_object()))
    })
}

/// Reads every prediction, JSON Lines or one JSON document as the content says (not the
/// file's name); every malformed one is reported (JSON Lines by line number), and
/// an instance predicted twice is an error.
pub fn read(path: &Path) -> Result<Vec<Prediction>, PredictionError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| PredictionError::Io {
        path: shown.clone(),
        source,
    })?;
    // Each record read, or what is wrong with it.
    let mut records: Vec<Result<Prediction, PredictionProblem>> = Vec::new();
    // Multi-SWE-bench's patch files name no model: the file's name does.
    let file_model = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let take =
        |v: &serde_json::Value, at: String, key_id: Option<&str>| one(v, &at, key_id, &file_model);
    match json_or_lines(&text) {
        Ok(JsonText::Lines(lines)) => {
            for (n, line) in lines {
                let at = format!("line {n}");
                match serde_json::from_str::<serde_json::Value>(line) {
                    Ok(v) => records.push(take(&v, at, None)),
                    Err(e) => records.push(Err(PredictionProblem::Json {
                        at,
                        detail: e.to_string(),
                    })),
                }
            }
        }
        Ok(JsonText::Document {
            value: serde_json::Value::Array(items),
            ..
        }) => {
            for (i, v) in items.iter().enumerate() {
                records.push(take(v, format!("item {}", i + 1), None));
            }
        }
        Ok(JsonText::Document { value, line }) if is_one_prediction(&value) => {
            records.push(take(&value, format!("line {line}"), None));
        }
        Ok(JsonText::Document {
            value: serde_json::Value::Object(map),
            ..
        }) => {
            for (k, v) in &map {
                records.push(take(v, format!("key `{k}`"), Some(k)));
            }
        }
        Ok(JsonText::Document { value, .. }) => {
            records.push(Err(PredictionProblem::NotPredictions {
                kind: crate::dataset::json_type_name(&value),
            }))
        }
        Err(e) => records.push(Err(PredictionProblem::Neither {
            detail: e.to_string(),
        })),
    }
    let (mut out, mut problems) = (Vec::new(), Vec::new());
    for r in records {
        match r {
            Ok(p) => out.push(p),
            Err(e) => problems.push(e),
        }
    }
    let mut seen = BTreeMap::new();
    for p in &out {
        *seen.entry(p.instance_id.clone()).or_insert(0) += 1;
    }
    for (instance_id, times) in seen {
        if times > 1 {
            problems.push(PredictionProblem::Twice { instance_id, times });
        }
    }
    if !problems.is_empty() {
        return Err(PredictionError::Malformed {
            path: shown,
            problems,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_forms_read_and_bad_lines_are_named() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("p.jsonl");
        std::fs::write(
            &p,
            "{\"instance_id\":\"a\",\"model_name_or_path\":\"m\",\"model_patch\":\"x\"}\n\n{\"instance_id\":\"b\",\"model_name_or_path\":\"m\",\"model_patch\":null}\n",
        )
        .unwrap();
        let r = read(&p).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].patch, None);
        let p = d.path().join("p.json");
        std::fs::write(
            &p,
            "{\"a\":{\"model_name_or_path\":\"m\",\"model_patch\":\"x\"}}",
        )
        .unwrap();
        assert_eq!(read(&p).unwrap()[0].instance_id, "a");
        let p = d.path().join("bad.jsonl");
        std::fs::write(
            &p,
            "{\"instance_id\":\"a\",\"model_name_or_path\":\"m\",\"model_patch\":\"x\"}\nnot json\n{\"instance_id\":\"a\",\"model_patch\":1,\"model_name_or_path\":\"m\"}\n",
        )
        .unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(
            e.contains("line 2:") && e.contains("line 3 (a): `model_patch` is a number"),
            "{e}"
        );
    }

    #[test]
    fn multi_swe_bench_patch_files_are_predictions_by_the_files_name() {
        let rows = r#"{"org": "tokio-rs", "repo": "bytes", "number": 732, "fix_patch": "diff"}
{"org": "tokio-rs", "repo": "bytes", "number": 721, "fix_patch": "d2", "model_name_or_path": "m2"}
"#;
        let got = read_as("agent-x.jsonl", rows).unwrap();
        assert_eq!(got[0].instance_id, "tokio-rs__bytes-732");
        assert_eq!(got[0].model, "agent-x");
        assert_eq!(got[0].patch.as_deref(), Some("diff"));
        assert_eq!(got[1].model, "m2");
        let bad = r#"{"org": "o", "repo": "r", "number": 1, "fix_patch": 3}"#;
        let e = read_as("p.jsonl", bad).unwrap_err();
        assert!(
            e.contains("o__r-1") && e.contains("`fix_patch` is a number"),
            "{e}"
        );
    }

    /// `text` written to a file named `name`, read.
    fn read_as(name: &str, text: &str) -> Result<Vec<Prediction>, String> {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(name);
        std::fs::write(&p, text).unwrap();
        read(&p).map_err(|e| e.to_string())
    }

    #[test]
    fn the_content_says_which_form_a_file_is_not_its_name() {
        let a = r#"{"instance_id": "a", "model_name_or_path": "m", "model_patch": "x"}"#;
        let b = r#"{"instance_id": "b", "model_name_or_path": "m", "model_patch": null}"#;
        let ids =
            |r: Vec<Prediction>| -> Vec<String> { r.into_iter().map(|p| p.instance_id).collect() };
        // JSON Lines under any name.
        for name in ["preds.txt", "preds.json", "preds"] {
            assert_eq!(
                ids(read_as(name, &format!("{a}\n{b}\n")).unwrap()),
                ["a", "b"]
            );
        }
        // One line of JSON Lines is one prediction, not a map keyed `instance_id`, …
        assert_eq!(
            ids(read_as("one.json", &format!("\n{a}\n")).unwrap()),
            ["a"]
        );
        // … and a one-line prediction without its id is named by its line.
        let e = read_as("one.txt", r#"{"model_name_or_path": "m"}"#).unwrap_err();
        assert!(e.contains("line 1: no `instance_id`"), "{e}");
        // A list and a map, spread over lines, under a JSON Lines name.
        let list = format!("[\n  {a},\n  {b}\n]\n");
        assert_eq!(ids(read_as("list.jsonl", &list).unwrap()), ["a", "b"]);
        let map = "{\n  \"a\": {\"model_name_or_path\": \"m\", \"model_patch\": \"x\"}\n}\n";
        assert_eq!(ids(read_as("map.jsonl", map).unwrap()), ["a"]);
        assert_eq!(read_as("empty-map.txt", "{}").unwrap(), []);
        // Malformed: JSON Lines by line; a document by its own line and column; the file named.
        let e = read_as("preds.txt", &format!("{a}\n{{oops\n{b}\n")).unwrap_err();
        assert!(
            e.contains("predictions `") && e.contains("preds.txt` are malformed: line 2: "),
            "{e}"
        );
        let e = read_as("list.txt", &format!("[\n  {a}\n  {b}\n]\n")).unwrap_err();
        assert!(
            e.contains("list.txt` are malformed: neither one JSON document nor JSON Lines")
                && e.contains("at line 3 column 3"),
            "{e}"
        );
        let e = read_as("n.txt", "42").unwrap_err();
        assert!(
            e.contains("the file holds a number, not a list or a map"),
            "{e}"
        );
    }
}
