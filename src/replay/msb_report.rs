//! Multi-SWE-bench's run report (`final_report.json`, its harness's `FinalReport`), written
//! beside SWE-bench's for a run of its instances: the same counts, by the harness's own ids
//! (`org/repo:pr-NUMBER`) and its own buckets.
//!
//! Its harness grades a candidate from the fix run alone; a patch that is empty, does not
//! apply or breaks the run leaves a run with no passing tests, which it counts completed and
//! unresolved. Only what kept the run from happening at all (no bundle, an environment that
//! does not build, a corrupt bundle) is incomplete, an error. Its `empty_patch_ids` (which it
//! never fills) names the empty patches here, which also count unresolved.

use serde::Serialize;

use super::InstanceReport;
use crate::verdict::Reason;

/// The fields of Multi-SWE-bench's `FinalReport`, in its order.
#[derive(Serialize)]
struct FinalReport {
    total_instances: usize,
    submitted_instances: usize,
    completed_instances: usize,
    incomplete_instances: usize,
    resolved_instances: usize,
    unresolved_instances: usize,
    empty_patch_instances: usize,
    error_instances: usize,
    submitted_ids: Vec<String>,
    completed_ids: Vec<String>,
    incomplete_ids: Vec<String>,
    resolved_ids: Vec<String>,
    unresolved_ids: Vec<String>,
    empty_patch_ids: Vec<String>,
    error_ids: Vec<String>,
}

/// Whether the candidate's own patch is why nothing passed (the harness's fix run would have
/// run and failed), rather than the archive or the machine.
fn candidates_doing(reason: Reason) -> bool {
    matches!(
        reason,
        Reason::EmptyPatch
            | Reason::PatchUnsafe
            | Reason::PatchApplyFailed
            | Reason::Timeout
            | Reason::TestsDidNotRun
            | Reason::LogParseFailed
            | Reason::LogContradictsExitCode
    )
}

/// The harness's id of an instance named `org__repo-NUMBER` (how Multi-SWE-bench names its
/// instances), for a report that never learnt it from its bundle; the instance id otherwise.
fn derived_id(instance_id: &str) -> String {
    let parsed = instance_id.rsplit_once('-').and_then(|(name, number)| {
        let (org, repo) = name.split_once("__")?;
        (!number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()))
            .then(|| format!("{org}/{repo}:pr-{number}"))
    });
    parsed.unwrap_or_else(|| instance_id.to_string())
}

/// The report of one model's run, as the harness writes it (`to_json(indent=4,
/// ensure_ascii=False)`, no final newline); None when none of its instances came from
/// Multi-SWE-bench's rows.
pub fn final_report(rs: &[&InstanceReport]) -> Option<Vec<u8>> {
    if rs.iter().all(|r| r.harness_id.is_none()) {
        return None;
    }
    let id = |r: &InstanceReport| {
        r.harness_id
            .clone()
            .unwrap_or_else(|| derived_id(&r.instance_id))
    };
    let ids = |f: &dyn Fn(&InstanceReport) -> bool| -> Vec<String> {
        rs.iter().filter(|r| f(r)).map(|r| id(r)).collect()
    };
    let completed = |r: &InstanceReport| r.error.is_none_or(candidates_doing);
    let report = FinalReport {
        total_instances: rs.len(),
        submitted_instances: rs.len(),
        completed_instances: ids(&completed).len(),
        incomplete_instances: ids(&|r| !completed(r)).len(),
        resolved_instances: ids(&|r| r.resolved).len(),
        unresolved_instances: ids(&|r| completed(r) && !r.resolved).len(),
        empty_patch_instances: ids(&|r| r.error == Some(Reason::EmptyPatch)).len(),
        error_instances: ids(&|r| !completed(r)).len(),
        submitted_ids: ids(&|_| true),
        completed_ids: ids(&completed),
        incomplete_ids: ids(&|r| !completed(r)),
        resolved_ids: ids(&|r| r.resolved),
        unresolved_ids: ids(&|r| completed(r) && !r.resolved),
        empty_patch_ids: ids(&|r| r.error == Some(Reason::EmptyPatch)),
        error_ids: ids(&|r| !completed(r)),
    };
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    report.serialize(&mut ser).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(
        id: &str,
        harness: Option<&str>,
        resolved: bool,
        error: Option<Reason>,
    ) -> InstanceReport {
        let p = crate::replay::Prediction {
            instance_id: id.into(),
            model: "m".into(),
            patch: Some("x".into()),
        };
        let mut r = crate::replay::blank_report(&p, "");
        r.harness_id = harness.map(str::to_string);
        r.resolved = resolved;
        r.error = error;
        r
    }

    #[test]
    fn ids_and_buckets_are_the_harness_s() {
        let rs = [
            report("jqlang__jq-1793", Some("jqlang/jq:pr-1793"), true, None),
            report(
                "iamkun__dayjs-318",
                Some("iamkun/dayjs:pr-318"),
                false,
                None,
            ),
            report("tokio-rs__tokio-1", None, false, Some(Reason::EmptyPatch)),
            report(
                "tokio-rs__bytes-2",
                None,
                false,
                Some(Reason::EnvBuildFailed),
            ),
        ];
        let refs: Vec<&InstanceReport> = rs.iter().collect();
        let bytes = final_report(&refs).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["resolved_ids"], serde_json::json!(["jqlang/jq:pr-1793"]));
        assert_eq!(
            v["unresolved_ids"],
            serde_json::json!(["iamkun/dayjs:pr-318", "tokio-rs/tokio:pr-1"])
        );
        assert_eq!(
            v["empty_patch_ids"],
            serde_json::json!(["tokio-rs/tokio:pr-1"])
        );
        assert_eq!(v["error_ids"], serde_json::json!(["tokio-rs/bytes:pr-2"]));
        assert_eq!(v["completed_instances"], 3);
        assert_eq!(v["incomplete_instances"], 1);
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            text.starts_with("{\n    \"total_instances\": 4,\n"),
            "{text}"
        );
        assert!(!text.ends_with('\n'));
    }

    #[test]
    fn a_run_of_other_rows_has_no_such_report() {
        let rs = [report("astropy__astropy-1", None, true, None)];
        let refs: Vec<&InstanceReport> = rs.iter().collect();
        assert!(final_report(&refs).is_none());
        assert_eq!(
            derived_id("astropy__astropy-12907"),
            "astropy/astropy:pr-12907"
        );
        assert_eq!(derived_id("odd-name"), "odd-name");
    }
}
