//! Why an instance did not resolve, as swebench 5.0.2 reads it (`harness/infra_failure.py`):
//! "the environment broke" apart from "the patch was wrong", told by signatures in the logs.
//! Advisory, as there: a flagged instance stays unresolved (or an error), so no score moves.
//! swe-ark's own typed errors, which name what broke, map onto the same two tiers when no
//! signature is in the log.

use std::sync::LazyLock;

use regex::Regex;

use super::InstanceReport;
use crate::verdict::Reason;

/// Cannot plausibly come from patching the repository's source.
pub const TIER_ENVIRONMENT: &str = "environment";
/// May come from a broken environment or from a bad patch.
pub const TIER_AMBIGUOUS: &str = "ambiguous";

/// swebench 5.0.2's `INFRA_FAILURE_SIGNATURES`: (reason, tier, pattern), in its order; the
/// first that matches wins.
const SIGNATURES: [(&str, &str, &str); 8] = [
    (
        "browser_launch_failed",
        TIER_ENVIRONMENT,
        r"Failed to launch|Failed to connect to the bus",
    ),
    (
        "display_unavailable",
        TIER_ENVIRONMENT,
        r"cannot open display|Missing X server|unable to open X display",
    ),
    (
        "out_of_memory",
        TIER_ENVIRONMENT,
        r"Cannot allocate memory|OutOfMemoryError|^Killed$",
    ),
    (
        "container_unavailable",
        TIER_ENVIRONMENT,
        r"Error response from daemon|Cannot connect to the Docker daemon",
    ),
    (
        "network_unreachable",
        TIER_ENVIRONMENT,
        r"Could not resolve host|Temporary failure in name resolution",
    ),
    (
        "missing_module",
        TIER_AMBIGUOUS,
        r"Cannot find module|MODULE_NOT_FOUND|ModuleNotFoundError",
    ),
    (
        "no_tests_collected",
        TIER_AMBIGUOUS,
        r"no tests ran|collected 0 items",
    ),
    (
        "tests_timed_out",
        TIER_AMBIGUOUS,
        r"Timeout error: \d+ seconds exceeded",
    ),
];

static COMPILED: LazyLock<Vec<(&'static str, &'static str, Regex)>> = LazyLock::new(|| {
    SIGNATURES
        .iter()
        .filter_map(|(reason, tier, pattern)| {
            // Python's re.MULTILINE: `^` and `$` at each line.
            Regex::new(&format!("(?m){pattern}"))
                .ok()
                .map(|re| (*reason, *tier, re))
        })
        .collect()
});

/// The (reason, tier) of the first signature `text` holds (swebench's `classify_text`).
pub fn classify_text(text: &str) -> Option<(&'static str, &'static str)> {
    COMPILED
        .iter()
        .find(|(_, _, re)| re.is_match(text))
        .map(|(reason, tier, _)| (*reason, *tier))
}

/// The tier of one of swe-ark's own reasons for not evaluating an instance: what the archive
/// or the machine lacked is the environment's; a run that timed out or ran no test may be
/// either's; what the prediction did (empty, unsafe, not applying) is neither.
fn tier_of(reason: Reason) -> Option<&'static str> {
    use Reason::*;
    match reason {
        r if r.is_setup_problem() => Some(TIER_ENVIRONMENT),
        BundleCorrupt | BundleIncomplete | BundleMismatch | MissingObject | BaseCommitMissing
        | Checkout => Some(TIER_ENVIRONMENT),
        Timeout | TestsDidNotRun | LogParseFailed => Some(TIER_AMBIGUOUS),
        _ => None,
    }
}

/// swebench's name for one of swe-ark's reasons where it has one, else the reason's own word
/// in swebench's spelling (`env_build_failed`).
fn reason_name(reason: Reason) -> String {
    match reason {
        Reason::Timeout => "tests_timed_out".into(),
        Reason::TestsDidNotRun => "no_tests_collected".into(),
        r => r.as_str().replace('-', "_"),
    }
}

/// Classifies an instance that did not resolve from its test output and what stopped it, and
/// records it in the report: `failure_reason`/`failure_tier` (the run report's
/// `infra_failure_ids`, `ambiguous_failure_ids`, `failure_reasons`), and, when the tests left
/// no log to grade, swebench 5's own `infra_failure` and `infra_failure_reason`. A resolved
/// instance is left unmarked.
pub fn classify(r: &mut InstanceReport, output: &[u8]) {
    r.failure_reason.clear();
    r.failure_tier.clear();
    r.infra_failure = false;
    r.infra_failure_reason.clear();
    if r.resolved || r.error == Some(Reason::EmptyPatch) {
        return;
    }
    let text = format!("{}\n{}", String::from_utf8_lossy(output), r.error_detail);
    let found = classify_text(&text)
        .map(|(reason, tier)| (reason.to_string(), tier))
        .or_else(|| {
            let reason = r.error?;
            tier_of(reason).map(|tier| (reason_name(reason), tier))
        });
    let Some((reason, tier)) = found else {
        return;
    };
    if r.tests_status.is_none() {
        r.infra_failure = tier == TIER_ENVIRONMENT;
        r.infra_failure_reason = reason.clone();
    }
    r.failure_reason = reason;
    r.failure_tier = tier.to_string();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_signature_wins_and_lines_anchor_as_in_python() {
        assert_eq!(
            classify_text("x\nKilled\ny"),
            Some(("out_of_memory", TIER_ENVIRONMENT))
        );
        assert_eq!(classify_text("Process Killed by user"), None);
        assert_eq!(
            classify_text("ModuleNotFoundError: x\nCould not resolve host: pypi.org"),
            Some(("network_unreachable", TIER_ENVIRONMENT)),
            "in the signatures' order, not the text's"
        );
        assert_eq!(
            classify_text("Timeout error: 1800 seconds exceeded."),
            Some(("tests_timed_out", TIER_AMBIGUOUS))
        );
        assert_eq!(classify_text(""), None);
    }

    #[test]
    fn swe_arks_own_reasons_fall_into_the_same_tiers() {
        assert_eq!(tier_of(Reason::EnvBuildFailed), Some(TIER_ENVIRONMENT));
        assert_eq!(tier_of(Reason::BundleCorrupt), Some(TIER_ENVIRONMENT));
        assert_eq!(tier_of(Reason::Timeout), Some(TIER_AMBIGUOUS));
        assert_eq!(tier_of(Reason::PatchApplyFailed), None);
        assert_eq!(tier_of(Reason::EmptyPatch), None);
        assert_eq!(reason_name(Reason::EnvBuildFailed), "env_build_failed");
        assert_eq!(reason_name(Reason::Timeout), "tests_timed_out");
    }
}
