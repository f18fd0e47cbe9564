//! One SWE-bench task instance, as the published datasets spell it.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::msb::MsbError;

/// A task instance. The published fields are typed; any other field a dataset carries
/// (`difficulty`, `image_assets`, …) is kept as it was in `extra`.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    pub instance_id: String,
    pub repo: String,
    pub base_commit: String,
    pub patch: String,
    pub test_patch: String,
    pub problem_statement: String,
    pub hints_text: String,
    pub created_at: String,
    pub version: String,
    pub environment_setup_commit: String,
    pub fail_to_pass: Vec<String>,
    pub pass_to_pass: Vec<String>,
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    #[error("the instance is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("the instance must be a JSON object, found {0}")]
    NotAnObject(&'static str),
    #[error("the instance has no `{0}` field")]
    Missing(&'static str),
    #[error("field `{field}` must be {expected}, found {found}")]
    WrongType {
        field: &'static str,
        expected: &'static str,
        found: &'static str,
    },
    #[error(
        "field `{field}` must be a list of test names (a JSON list, or a string holding one): {reason}"
    )]
    BadTestList { field: &'static str, reason: String },
    #[error("field `{field}` is `{value}`, not a full commit id (40 or 64 lowercase hex digits)")]
    BadCommit { field: &'static str, value: String },
    #[error("field `repo` is `{0}`, not of the form OWNER/NAME")]
    BadRepo(String),
    #[error("field `instance_id` must not be empty")]
    EmptyId,
    #[error("field `eval_type` is `{0}`; swebench 5 knows `pass_and_fail` and `fail_only`")]
    BadEvalType(String),
    #[error(transparent)]
    MultiSweBench(#[from] MsbError),
}

/// The fields a version-5 dataset row carries for the harness (swebench 5 moved them from its
/// code into the rows); each absent in older rows. They stay in [`Instance::extra`], written
/// back as they came.
pub const HARNESS_FIELDS: [&str; 4] = ["eval_script", "log_parser", "eval_type", "image"];

/// A version-5 row's harness fields, read from [`Instance::extra`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowHarness<'a> {
    /// The evaluation script the official harness runs in the instance's image.
    pub eval_script: Option<&'a str>,
    /// The log parser, by its swebench 5 registry name (`parse_log_pytest`, …).
    pub log_parser: Option<&'a str>,
    /// `pass_and_fail` or `fail_only`.
    pub eval_type: Option<&'a str>,
    /// The image the official harness runs it in: provenance only, swe-ark needs no Docker.
    pub image: Option<&'a str>,
}

pub(crate) const STRING_FIELDS: [&str; 10] = [
    "instance_id",
    "repo",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
    "hints_text",
    "created_at",
    "version",
    "environment_setup_commit",
];
pub(crate) const REQUIRED: [&str; 5] =
    ["instance_id", "repo", "base_commit", "patch", "test_patch"];

/// What a JSON value is, for messages: `a string`, `a list`, `null`, …
pub fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

pub(crate) fn is_commit(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Whether `s` is a repository name of the form OWNER/NAME.
pub fn is_repo(s: &str) -> bool {
    let ok = |part: &str| {
        !part.is_empty()
            && part != "."
            && part != ".."
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    matches!(s.split_once('/'), Some((owner, name)) if ok(owner) && ok(name))
}

/// FAIL_TO_PASS / PASS_TO_PASS: a JSON list of strings, or (as the published datasets have
/// them) a JSON string that holds such a list. A missing or null field is an empty list.
fn test_list(field: &'static str, value: Option<Value>) -> Result<Vec<String>, InstanceError> {
    let bad = |reason: String| InstanceError::BadTestList { field, reason };
    let value = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(s)) if s.trim().is_empty() => return Ok(Vec::new()),
        Some(Value::String(s)) => serde_json::from_str::<Value>(&s)
            .map_err(|e| bad(format!("the string is not JSON ({e})")))?,
        Some(v) => v,
    };
    let Value::Array(items) = value else {
        return Err(bad(format!("found {}", json_type_name(&value))));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(s) => Ok(s),
            other => Err(bad(format!("item {i} is {}", json_type_name(&other)))),
        })
        .collect()
}

impl Instance {
    pub fn from_json(bytes: &[u8]) -> Result<Instance, InstanceError> {
        let value: Value = serde_json::from_slice(bytes)?;
        Instance::from_value(value)
    }

    pub fn from_value(value: Value) -> Result<Instance, InstanceError> {
        let mut map = match value {
            Value::Object(m) => m,
            other => return Err(InstanceError::NotAnObject(json_type_name(&other))),
        };
        let mut strings: BTreeMap<&'static str, String> = BTreeMap::new();
        for field in STRING_FIELDS {
            match map.remove(field) {
                None | Some(Value::Null) => {
                    if REQUIRED.contains(&field) {
                        return Err(InstanceError::Missing(field));
                    }
                    strings.insert(field, String::new());
                }
                Some(Value::String(s)) => {
                    strings.insert(field, s);
                }
                // Some dataset copies store `version` as a number (0.6); keep its text.
                Some(Value::Number(n)) if field == "version" => {
                    strings.insert(field, n.to_string());
                }
                Some(other) => {
                    return Err(InstanceError::WrongType {
                        field,
                        expected: "a string",
                        found: json_type_name(&other),
                    });
                }
            }
        }
        let fail_to_pass = test_list("FAIL_TO_PASS", map.remove("FAIL_TO_PASS"))?;
        let pass_to_pass = test_list("PASS_TO_PASS", map.remove("PASS_TO_PASS"))?;
        let mut take = |f: &str| strings.remove(f).unwrap_or_default();
        let inst = Instance {
            instance_id: take("instance_id"),
            repo: take("repo"),
            base_commit: take("base_commit"),
            patch: take("patch"),
            test_patch: take("test_patch"),
            problem_statement: take("problem_statement"),
            hints_text: take("hints_text"),
            created_at: take("created_at"),
            version: take("version"),
            environment_setup_commit: take("environment_setup_commit"),
            fail_to_pass,
            pass_to_pass,
            extra: map.into_iter().collect(),
        };
        inst.check()?;
        Ok(inst)
    }

    pub(crate) fn check(&self) -> Result<(), InstanceError> {
        if self.instance_id.trim().is_empty() {
            return Err(InstanceError::EmptyId);
        }
        if !is_repo(&self.repo) {
            return Err(InstanceError::BadRepo(self.repo.clone()));
        }
        if !is_commit(&self.base_commit) {
            return Err(InstanceError::BadCommit {
                field: "base_commit",
                value: self.base_commit.clone(),
            });
        }
        if !self.environment_setup_commit.is_empty() && !is_commit(&self.environment_setup_commit) {
            return Err(InstanceError::BadCommit {
                field: "environment_setup_commit",
                value: self.environment_setup_commit.clone(),
            });
        }
        for field in HARNESS_FIELDS {
            match self.extra.get(field) {
                None | Some(Value::Null) | Some(Value::String(_)) => {}
                Some(other) => {
                    return Err(InstanceError::WrongType {
                        field,
                        expected: "a string",
                        found: json_type_name(other),
                    });
                }
            }
        }
        if let Some(t) = self.harness().eval_type
            && !matches!(t, "" | "pass_and_fail" | "fail_only")
        {
            return Err(InstanceError::BadEvalType(t.to_string()));
        }
        Ok(())
    }

    /// The row's harness fields (a version-5 dataset row); empty strings read as absent.
    pub fn harness(&self) -> RowHarness<'_> {
        let get = |f: &str| match self.extra.get(f) {
            Some(Value::String(s)) if !s.is_empty() => Some(s.as_str()),
            _ => None,
        };
        RowHarness {
            eval_script: get("eval_script"),
            log_parser: get("log_parser"),
            eval_type: get("eval_type"),
            image: get("image"),
        }
    }

    /// All fields as one JSON object; FAIL_TO_PASS and PASS_TO_PASS are real lists.
    pub fn to_value(&self) -> Value {
        let mut m: Map<String, Value> = Map::new();
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        let s = |v: &String| Value::String(v.clone());
        let list = |v: &Vec<String>| Value::Array(v.iter().cloned().map(Value::String).collect());
        m.insert("instance_id".into(), s(&self.instance_id));
        m.insert("repo".into(), s(&self.repo));
        m.insert("base_commit".into(), s(&self.base_commit));
        m.insert("patch".into(), s(&self.patch));
        m.insert("test_patch".into(), s(&self.test_patch));
        m.insert("problem_statement".into(), s(&self.problem_statement));
        m.insert("hints_text".into(), s(&self.hints_text));
        m.insert("created_at".into(), s(&self.created_at));
        m.insert("version".into(), s(&self.version));
        m.insert(
            "environment_setup_commit".into(),
            s(&self.environment_setup_commit),
        );
        m.insert("FAIL_TO_PASS".into(), list(&self.fail_to_pass));
        m.insert("PASS_TO_PASS".into(), list(&self.pass_to_pass));
        Value::Object(m)
    }

    /// The canonical `instance.json`: keys sorted, two-space indent, a final newline. The same
    /// instance always gives the same bytes.
    pub fn to_canonical_json(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(&self.to_value())
            .expect("a serde_json::Value always serializes");
        out.push(b'\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "0123456789abcdef0123456789abcdef01234567";

    fn minimal() -> Value {
        serde_json::json!({
            "instance_id": "o__r-1", "repo": "o/r", "base_commit": BASE,
            "patch": "p", "test_patch": "t",
        })
    }

    #[test]
    fn test_lists_as_strings_or_lists() {
        let mut v = minimal();
        v["FAIL_TO_PASS"] = Value::String("[\"a::b\", \"c\"]".into());
        v["PASS_TO_PASS"] = serde_json::json!(["d"]);
        let i = Instance::from_value(v).unwrap();
        assert_eq!(i.fail_to_pass, vec!["a::b", "c"]);
        assert_eq!(i.pass_to_pass, vec!["d"]);
    }

    #[test]
    fn canonical_json_is_stable_and_keeps_extras() {
        let mut v = minimal();
        v["difficulty"] = Value::String("<15 min".into());
        let a = Instance::from_value(v.clone()).unwrap();
        let b = Instance::from_json(&a.to_canonical_json()).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.to_canonical_json(), b.to_canonical_json());
        assert_eq!(b.extra["difficulty"], "<15 min");
    }

    #[test]
    fn version5_rows_keep_their_harness_fields() {
        let mut v = minimal();
        v["eval_script"] = "#!/bin/bash\nset -uxo pipefail\npytest -rA\n".into();
        v["log_parser"] = "parse_log_pytest".into();
        v["eval_type"] = "fail_only".into();
        v["image"] = "docker.io/swebench/sweb.eval.x86_64.o_1776_r-1:latest".into();
        let i = Instance::from_value(v.clone()).unwrap();
        let h = i.harness();
        assert_eq!(h.log_parser, Some("parse_log_pytest"));
        assert_eq!(h.eval_type, Some("fail_only"));
        assert!(h.eval_script.unwrap().contains("pytest -rA"));
        assert!(h.image.unwrap().starts_with("docker.io/"));
        // Written back unchanged.
        let back = i.to_value();
        for f in HARNESS_FIELDS {
            assert_eq!(back[f], v[f], "{f}");
        }
        assert_eq!(
            Instance::from_value(minimal()).unwrap().harness(),
            RowHarness::default()
        );
        let mut bad = v.clone();
        bad["eval_type"] = "strict".into();
        let e = Instance::from_value(bad).unwrap_err().to_string();
        assert!(e.contains("eval_type") && e.contains("strict"), "{e}");
        let mut bad = v;
        bad["eval_script"] = serde_json::json!(["pytest"]);
        let e = Instance::from_value(bad).unwrap_err().to_string();
        assert!(e.contains("eval_script") && e.contains("a list"), "{e}");
    }

    #[test]
    fn bad_inputs_name_the_field() {
        let mut v = minimal();
        v.as_object_mut().unwrap().remove("base_commit");
        assert!(matches!(
            Instance::from_value(v),
            Err(InstanceError::Missing("base_commit"))
        ));
        let mut v = minimal();
        v["base_commit"] = Value::String("HEAD".into());
        let e = Instance::from_value(v).unwrap_err().to_string();
        assert!(e.contains("base_commit") && e.contains("HEAD"), "{e}");
        let mut v = minimal();
        v["FAIL_TO_PASS"] = Value::String("not json".into());
        let e = Instance::from_value(v).unwrap_err().to_string();
        assert!(e.contains("FAIL_TO_PASS"), "{e}");
        let mut v = minimal();
        v["repo"] = Value::String("../etc".into());
        assert!(matches!(
            Instance::from_value(v),
            Err(InstanceError::BadRepo(_))
        ));
    }
}
