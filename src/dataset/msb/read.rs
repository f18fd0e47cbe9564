//! A Multi-SWE-bench row read into an [`Instance`].

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::check::check_row;
use super::layout::Layout;
use super::{LAYOUT_KEY, MsbError, OWN_STRINGS, TO_PASS};
use crate::dataset::instance::{Instance, InstanceError, is_repo, json_type_name};
use crate::dataset::ordered::OrderedJson;

/// Whether `row` is a Multi-SWE-bench row rather than a SWE-bench one: it has a field only
/// Multi-SWE-bench has (`fix_patch`, `org`) and neither of SWE-bench's `base_commit` and
/// `patch`. A row of neither form is read as SWE-bench's, whose reader names what it lacks.
pub(crate) fn is_row(row: &OrderedJson) -> bool {
    let keys = row.keys();
    let has = |k: &str| keys.contains(&k);
    !has("base_commit") && !has("patch") && (has("fix_patch") || has("org"))
}

/// The text given for the task: each resolved issue's title and body (`title\nbody`, a blank
/// line between issues). Multi-SWE-bench's harness has no function of its own for it; this is
/// what the agents run on it build (OpenHands' conversion to SWE-bench's form takes the first
/// issue's `title + "\n" + body`). A row with no resolved issue gives its pull request's.
fn problem_statement(row: &Map<String, Value>) -> String {
    fn text(v: Option<&Value>) -> &str {
        v.and_then(Value::as_str).unwrap_or_default()
    }
    let issues: Vec<String> = row["resolved_issues"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|i| format!("{}\n{}", text(i.get("title")), text(i.get("body"))))
                .collect()
        })
        .unwrap_or_default();
    if issues.is_empty() {
        return format!("{}\n{}", text(row.get("title")), text(row.get("body")));
    }
    issues.join("\n\n")
}

/// The names of the tests in the maps `fields`, sorted and each once (the maps' own order is
/// a Python set's, not the same from one run of Multi-SWE-bench to the next).
fn test_names(row: &Map<String, Value>, fields: &[&str]) -> Vec<String> {
    let names: BTreeSet<&String> = fields
        .iter()
        .filter_map(|f| row.get(*f).and_then(Value::as_object))
        .flat_map(|m| m.keys())
        .collect();
    names.into_iter().cloned().collect()
}

/// Removes field `key` when it is a string, and gives its text; any other value stays (a
/// `hints` of null is written back as null).
fn take(row: &mut Map<String, Value>, key: &str) -> Option<String> {
    if !row.get(key).is_some_and(Value::is_string) {
        return None;
    }
    match row.remove(key) {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// `row` as an instance (docs/MULTI-SWE-BENCH.md, "Row form"); `ascii` says that its text had
/// no byte beyond ASCII, so that it is written back with `\uXXXX` escapes.
pub(crate) fn read_row(row: OrderedJson, ascii: bool) -> Result<Instance, InstanceError> {
    let layout = Layout::capture(&row, ascii);
    let mut row = match row.into_value() {
        Value::Object(m) => m,
        other => return Err(InstanceError::NotAnObject(json_type_name(&other))),
    };
    check_row(&row)?;
    let str_of = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let org = str_of(&row["org"]);
    let name = take(&mut row, "repo").unwrap_or_default();
    let repo = format!("{org}/{name}");
    if !is_repo(&repo) {
        return Err(MsbError::BadRepo { org, repo: name }.into());
    }
    let number = row["number"].as_u64().unwrap_or_default();
    let instance_id =
        take(&mut row, "instance_id").unwrap_or_else(|| format!("{org}__{name}-{number}"));
    let base_commit = str_of(&row["base"]["sha"]);
    let patch = take(&mut row, "fix_patch").unwrap_or_default();
    let test_patch = take(&mut row, "test_patch").unwrap_or_default();
    let [problem, hints_text, created_at, version, setup] = OWN_STRINGS.map(|f| take(&mut row, f));
    // Newer rows carry `hints`; SWE-bench's own `hints_text` comes first when a row has both.
    let hints_text = hints_text
        .or_else(|| take(&mut row, "hints"))
        .unwrap_or_default();
    let problem_statement = problem.unwrap_or_else(|| problem_statement(&row));
    let fail_to_pass = test_names(&row, &TO_PASS);
    let pass_to_pass = test_names(&row, &["p2p_tests"]);
    row.insert(LAYOUT_KEY.to_string(), layout.to_value());
    let inst = Instance {
        instance_id,
        repo,
        base_commit,
        patch,
        test_patch,
        problem_statement,
        hints_text,
        created_at: created_at.unwrap_or_default(),
        version: version.unwrap_or_default(),
        environment_setup_commit: setup.unwrap_or_default(),
        fail_to_pass,
        pass_to_pass,
        extra: row.into_iter().collect(),
    };
    inst.check()?;
    Ok(inst)
}
