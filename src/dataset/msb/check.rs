//! The types of a Multi-SWE-bench row, checked as its harness's dataclasses check them
//! (`PullRequest`, `Base`, `ResolvedIssue`, `Test`, `TestResult`), before anything is read from
//! it: the reader and the writer then take fields knowing their types.

use serde_json::{Map, Value};

use super::{DERIVED_LISTS, MsbError, OWN_STRINGS, REQUIRED, RESULTS, TEST_MAPS};
use crate::dataset::instance::{is_commit, json_type_name};

/// The statuses a test has in each run of a row.
const STATUSES: [&str; 4] = ["PASS", "FAIL", "SKIP", "NONE"];

/// The three runs a test map records, in the row's order.
const RUNS: [&str; 3] = ["run", "test", "fix"];

/// The fields of `REQUIRED` that `row` lacks.
pub(super) fn missing(row: &Map<String, Value>) -> Vec<String> {
    REQUIRED
        .iter()
        .filter(|f| !row.contains_key(**f))
        .map(|f| f.to_string())
        .collect()
}

fn wrong(field: &str, expected: &'static str, found: &Value) -> MsbError {
    MsbError::WrongType {
        field: field.to_string(),
        expected,
        found: json_type_name(found),
    }
}

fn field<'a>(obj: &'a Map<String, Value>, at: &str, key: &str) -> Result<&'a Value, MsbError> {
    obj.get(key)
        .ok_or_else(|| MsbError::Missing(vec![format!("{at}.{key}")]))
}

fn string(v: &Value, at: &str) -> Result<(), MsbError> {
    match v {
        Value::String(_) => Ok(()),
        other => Err(wrong(at, "a string", other)),
    }
}

fn string_or_null(v: &Value, at: &str) -> Result<(), MsbError> {
    match v {
        Value::String(_) | Value::Null => Ok(()),
        other => Err(wrong(at, "a string or null", other)),
    }
}

fn whole(v: &Value, at: &str) -> Result<(), MsbError> {
    match v.as_u64() {
        Some(_) => Ok(()),
        None => Err(wrong(at, "a whole number", v)),
    }
}

fn object<'a>(v: &'a Value, at: &str) -> Result<&'a Map<String, Value>, MsbError> {
    v.as_object().ok_or_else(|| wrong(at, "an object", v))
}

/// Checks every field a row has a type for; the others are kept as they are.
pub(super) fn check_row(row: &Map<String, Value>) -> Result<(), MsbError> {
    let missing = missing(row);
    if !missing.is_empty() {
        return Err(MsbError::Missing(missing));
    }
    for f in DERIVED_LISTS {
        if row.contains_key(f) {
            return Err(MsbError::Derived(f));
        }
    }
    for f in ["org", "repo", "state", "title", "fix_patch", "test_patch"] {
        string(&row[f], f)?;
    }
    for f in OWN_STRINGS.iter().chain(&["instance_id"]) {
        if let Some(v) = row.get(*f) {
            string(v, f)?;
        }
    }
    whole(&row["number"], "number")?;
    string_or_null(&row["body"], "body")?;
    if let Some(v) = row.get("hints") {
        string_or_null(v, "hints")?;
    }
    check_base(&row["base"])?;
    check_issues(&row["resolved_issues"])?;
    for f in TEST_MAPS {
        if let Some(v) = row.get(f) {
            check_tests(v, f)?;
        }
    }
    for f in RESULTS {
        check_result(&row[f], f)?;
    }
    Ok(())
}

fn check_base(v: &Value) -> Result<(), MsbError> {
    let base = object(v, "base")?;
    for key in ["label", "ref", "sha"] {
        string(field(base, "base", key)?, &format!("base.{key}"))?;
    }
    match base["sha"].as_str() {
        Some(sha) if !is_commit(sha) => Err(MsbError::BadSha(sha.to_string())),
        _ => Ok(()),
    }
}

fn check_issues(v: &Value) -> Result<(), MsbError> {
    let Value::Array(issues) = v else {
        return Err(wrong("resolved_issues", "a list", v));
    };
    for (i, issue) in issues.iter().enumerate() {
        let at = format!("resolved_issues[{i}]");
        let issue = object(issue, &at)?;
        whole(field(issue, &at, "number")?, &format!("{at}.number"))?;
        string(field(issue, &at, "title")?, &format!("{at}.title"))?;
        string_or_null(field(issue, &at, "body")?, &format!("{at}.body"))?;
    }
    Ok(())
}

fn check_tests(v: &Value, at: &str) -> Result<(), MsbError> {
    for (test, statuses) in object(v, at)? {
        let ok = statuses.as_object().is_some_and(|s| {
            s.len() == RUNS.len()
                && RUNS.iter().all(|run| {
                    s.get(*run)
                        .and_then(Value::as_str)
                        .is_some_and(|x| STATUSES.contains(&x))
                })
        });
        if !ok {
            let mut found = statuses.to_string();
            if found.len() > 80 {
                let cut = (0..=80).rev().find(|i| found.is_char_boundary(*i));
                found.truncate(cut.unwrap_or(0));
                found.push('…');
            }
            return Err(MsbError::BadTest {
                field: at.to_string(),
                test: test.clone(),
                found,
            });
        }
    }
    Ok(())
}

fn check_result(v: &Value, at: &str) -> Result<(), MsbError> {
    let result = object(v, at)?;
    for key in ["passed_count", "failed_count", "skipped_count"] {
        whole(field(result, at, key)?, &format!("{at}.{key}"))?;
    }
    for key in ["passed_tests", "failed_tests", "skipped_tests"] {
        let list = field(result, at, key)?;
        let Value::Array(items) = list else {
            return Err(wrong(&format!("{at}.{key}"), "a list", list));
        };
        for (i, item) in items.iter().enumerate() {
            string(item, &format!("{at}.{key}[{i}]"))?;
        }
    }
    Ok(())
}
