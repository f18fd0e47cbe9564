//! Grading exactly as SWE-bench does (swebench/harness/grading.py), with the one rule the
//! project states on top: for FAIL_TO_PASS, a missing or skipped test is a failure.

use serde::{Deserialize, Serialize};

use crate::logparse::{StatusMap, TestStatus};

/// `{success, failure}` lists of one category.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub success: Vec<String>,
    pub failure: Vec<String>,
}

/// SWE-bench's `tests_status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestsStatus {
    #[serde(rename = "FAIL_TO_PASS")]
    pub fail_to_pass: Outcome,
    #[serde(rename = "PASS_TO_PASS")]
    pub pass_to_pass: Outcome,
    #[serde(rename = "FAIL_TO_FAIL")]
    pub fail_to_fail: Outcome,
    #[serde(rename = "PASS_TO_FAIL")]
    pub pass_to_fail: Outcome,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Resolution {
    Full,
    Partial,
    No,
}

fn passed(test: &str, map: &StatusMap) -> bool {
    matches!(
        map.get(test),
        Some(TestStatus::Passed) | Some(TestStatus::Xfail)
    )
}

fn failed(test: &str, map: &StatusMap) -> bool {
    matches!(
        map.get(test),
        None | Some(TestStatus::Failed) | Some(TestStatus::Error)
    )
}

/// The status of every listed test after the prediction's patch.
pub fn tests_status(map: &StatusMap, f2p: &[String], p2p: &[String]) -> TestsStatus {
    let mut s = TestsStatus::default();
    for t in f2p {
        // A missing or skipped FAIL_TO_PASS test did not pass: a failure.
        if passed(t, map) {
            s.fail_to_pass.success.push(t.clone());
        } else {
            s.fail_to_pass.failure.push(t.clone());
        }
    }
    for t in p2p {
        // As SWE-bench: a skipped PASS_TO_PASS test counts neither way.
        if passed(t, map) {
            s.pass_to_pass.success.push(t.clone());
        } else if failed(t, map) {
            s.pass_to_pass.failure.push(t.clone());
        }
    }
    s
}

fn rate(o: &Outcome) -> f64 {
    let total = o.success.len() + o.failure.len();
    if total == 0 {
        1.0
    } else {
        o.success.len() as f64 / total as f64
    }
}

pub fn resolution(s: &TestsStatus) -> Resolution {
    let (f2p, p2p) = (rate(&s.fail_to_pass), rate(&s.pass_to_pass));
    if f2p == 1.0 && p2p == 1.0 {
        Resolution::Full
    } else if f2p > 0.0 && f2p < 1.0 && p2p == 1.0 {
        Resolution::Partial
    } else {
        Resolution::No
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TestStatus::*;

    fn map(pairs: &[(&str, TestStatus)]) -> StatusMap {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }
    fn v(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn grading_follows_swebench() {
        let m = map(&[
            ("a", Passed),
            ("b", Xfail),
            ("c", Skipped),
            ("p", Passed),
            ("q", Skipped),
            ("r", Failed),
        ]);
        let s = tests_status(&m, &v(&["a", "b", "c", "gone"]), &v(&["p", "q", "r"]));
        assert_eq!(s.fail_to_pass.success, v(&["a", "b"]));
        assert_eq!(s.fail_to_pass.failure, v(&["c", "gone"]));
        assert_eq!(s.pass_to_pass.success, v(&["p"]));
        assert_eq!(s.pass_to_pass.failure, v(&["r"]));
        assert_eq!(resolution(&s), Resolution::No);
        let s = tests_status(&m, &v(&["a", "c"]), &v(&["p", "q"]));
        assert_eq!(resolution(&s), Resolution::Partial);
        let s = tests_status(&m, &v(&["a"]), &v(&[]));
        assert_eq!(resolution(&s), Resolution::Full);
        assert_eq!(resolution(&tests_status(&m, &[], &[])), Resolution::Full);
    }
}
