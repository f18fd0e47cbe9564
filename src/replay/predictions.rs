//! Predictions in SWE-bench's format: `.json` (a list, or a map by instance id) or `.jsonl`,
//! each with `instance_id`, `model_name_or_path` and `model_patch` (a string, or null).

use std::collections::BTreeMap;
use std::path::Path;

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
    #[error("predictions `{path}` are malformed: {}", .problems.join("; "))]
    Malformed { path: String, problems: Vec<String> },
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
    #[error("{at} ({instance_id}): `model_patch` is {kind}, not a string")]
    BadPatch {
        at: String,
        instance_id: String,
        kind: &'static str,
    },
}

fn one(
    v: &serde_json::Value,
    at: &str,
    key_id: Option<&str>,
) -> Result<Prediction, PredictionProblem> {
    let at = at.to_string();
    let obj = v
        .as_object()
        .ok_or_else(|| PredictionProblem::NotAnObject { at: at.clone() })?;
    let instance_id = match (obj.get("instance_id").and_then(|x| x.as_str()), key_id) {
        (Some(id), _) => id.to_string(),
        (None, Some(k)) => k.to_string(),
        (None, None) => return Err(PredictionProblem::NoInstanceId { at }),
    };
    let Some(model) = obj.get("model_name_or_path").and_then(|x| x.as_str()) else {
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
    let patch = match obj.get("model_patch") {
        Some(serde_json::Value::String(p)) => Some(p.clone()),
        Some(serde_json::Value::Null) | None => None,
        Some(other) => {
            return Err(PredictionProblem::BadPatch {
                at,
                instance_id,
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

/// Reads every prediction; every malformed one is reported (JSON Lines by line number), and
/// an instance predicted twice is an error.
pub fn read(path: &Path) -> Result<Vec<Prediction>, PredictionError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| PredictionError::Io {
        path: shown.clone(),
        source,
    })?;
    let mut problems = Vec::new();
    let mut out = Vec::new();
    let jsonl = path.extension().is_some_and(|e| e == "jsonl");
    if jsonl {
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let at = format!("line {}", n + 1);
            match serde_json::from_str::<serde_json::Value>(line) {
                Ok(v) => match one(&v, &at, None) {
                    Ok(p) => out.push(p),
                    Err(e) => problems.push(e.to_string()),
                },
                Err(e) => problems.push(format!("{at}: {e}")),
            }
        }
    } else {
        match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(serde_json::Value::Array(items)) => {
                for (i, v) in items.iter().enumerate() {
                    match one(v, &format!("item {}", i + 1), None) {
                        Ok(p) => out.push(p),
                        Err(e) => problems.push(e.to_string()),
                    }
                }
            }
            Ok(serde_json::Value::Object(map)) => {
                for (k, v) in &map {
                    match one(v, &format!("key `{k}`"), Some(k)) {
                        Ok(p) => out.push(p),
                        Err(e) => problems.push(e.to_string()),
                    }
                }
            }
            Ok(other) => problems.push(format!(
                "the file holds {}, not a list or a map of predictions",
                crate::dataset::json_type_name(&other)
            )),
            Err(e) => problems.push(e.to_string()),
        }
    }
    let mut seen = BTreeMap::new();
    for p in &out {
        *seen.entry(p.instance_id.clone()).or_insert(0) += 1;
    }
    for (id, n) in seen {
        if n > 1 {
            problems.push(format!("instance {id} is predicted {n} times"));
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
}
