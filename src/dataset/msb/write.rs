//! An [`Instance`] written as a Multi-SWE-bench row.

use serde_json::{Map, Value};

use super::check::{check_row, missing};
use super::layout::{Layout, arrange};
use super::{LAYOUT_KEY, MsbExportError, OWN_STRINGS};
use crate::dataset::file::python_json_as;
use crate::dataset::instance::Instance;

/// Whether the row `inst` came from had field `key`; without a layout, `default`.
fn had(layout: Option<&Layout>, key: &str, default: bool) -> bool {
    layout.map_or(default, |l| l.keys.iter().any(|k| k == key))
}

/// The row's fields: those kept in `extra`, and those the typed fields hold.
fn row_of(inst: &Instance, layout: Option<&Layout>) -> Result<Map<String, Value>, MsbExportError> {
    let mut row: Map<String, Value> = inst
        .extra
        .iter()
        .filter(|(k, _)| *k != LAYOUT_KEY)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let missing: Vec<String> = missing(&row)
        .into_iter()
        .filter(|f| !matches!(f.as_str(), "repo" | "fix_patch" | "test_patch"))
        .collect();
    if !missing.is_empty() {
        return Err(MsbExportError::NotFromRow {
            id: inst.instance_id.clone(),
            missing,
        });
    }
    // Multi-SWE-bench's `repo` is the name alone; the instance's is OWNER/NAME, its `org` kept.
    let org = row["org"].as_str().unwrap_or_default().to_string();
    let name = inst
        .repo
        .strip_prefix(org.as_str())
        .and_then(|r| r.strip_prefix('/'))
        .filter(|_| !org.is_empty())
        .ok_or_else(|| MsbExportError::RepoNotOfOrg {
            id: inst.instance_id.clone(),
            repo: inst.repo.clone(),
            org: org.clone(),
        })?;
    let s = |v: &str| Value::String(v.to_string());
    row.insert("repo".into(), s(name));
    row.insert("fix_patch".into(), s(&inst.patch));
    row.insert("test_patch".into(), s(&inst.test_patch));
    if let Some(Value::Object(base)) = row.get_mut("base") {
        base.insert("sha".into(), s(&inst.base_commit));
    }
    if had(layout, "instance_id", true) {
        row.insert("instance_id".into(), s(&inst.instance_id));
    }
    let typed = [
        &inst.problem_statement,
        &inst.hints_text,
        &inst.created_at,
        &inst.version,
        &inst.environment_setup_commit,
    ];
    for (field, value) in OWN_STRINGS.iter().zip(typed) {
        if had(layout, field, false) {
            row.insert(field.to_string(), s(value));
        }
    }
    // A row's `hints` string is the instance's hints_text; one of null stayed in `extra`.
    if !row.contains_key("hints") && had(layout, "hints", !inst.hints_text.is_empty()) {
        row.insert("hints".into(), s(&inst.hints_text));
    }
    Ok(row)
}

/// `inst` as a Multi-SWE-bench row: as it was imported, byte for byte, when it came from one
/// (its layout kept); otherwise in Multi-SWE-bench's field order, non-ASCII as is (as its
/// harness writes rows). Refused for an instance without the row's own fields.
pub(crate) fn to_row(inst: &Instance) -> Result<Vec<u8>, MsbExportError> {
    let layout = inst.extra.get(LAYOUT_KEY).and_then(Layout::from_value);
    let row = row_of(inst, layout.as_ref())?;
    check_row(&row).map_err(|source| MsbExportError::Unwritable {
        id: inst.instance_id.clone(),
        source,
    })?;
    let ascii = layout.as_ref().is_some_and(|l| l.ascii);
    Ok(python_json_as(&arrange(row, layout.as_ref()), ascii))
}
