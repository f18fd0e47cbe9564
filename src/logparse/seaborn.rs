//! seaborn's pytest logs: SWE-bench's `parse_log_seaborn`
//! (`swebench/harness/log_parsers/python.py`, swebench 4.1.0), plus our normalization of
//! absolute test paths ([`AbsoluteIds`]).

use super::pytest::AbsoluteIds;
use super::{Collector, TestStatus, py_split};

/// `parse_log_seaborn` reads only passes and failures, first match wins per line:
///
/// 1. a line that starts with `FAILED`: its second word is a failed test;
/// 2. else a line holding ` PASSED ` whose second word is `PASSED`: its first word passed
///    (pytest's verbose `id PASSED [ 10%]`);
/// 3. else a line that starts with `PASSED`: its second word passed.
///
/// `SKIPPED`, `ERROR` and `XFAIL` lines are not read, so tests that errored are absent.
/// Where SWE-bench's function raises `IndexError` (a line `FAILED` or `PASSED` alone, or
/// ` PASSED ` as the only word), the line is skipped.
pub(super) fn parse(log: &str) -> Collector {
    let ids = AbsoluteIds::from_log(log);
    let mut out = Collector::default();
    for line in log.split('\n') {
        let mut words = py_split(line);
        if line.starts_with("FAILED") {
            if let Some(id) = words.nth(1) {
                out.set(ids.normalize(id), TestStatus::Failed);
            }
        } else if line.contains(" PASSED ") {
            if let (Some(id), Some("PASSED")) = (words.next(), words.next()) {
                out.set(ids.normalize(id), TestStatus::Passed);
            }
        } else if line.starts_with("PASSED")
            && let Some(id) = words.nth(1)
        {
            out.set(ids.normalize(id), TestStatus::Passed);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_passes_and_failures_only() {
        let log = "tests/a.py::t1 PASSED [ 50%]\n\
                   tests/a.py::t2 FAILED [100%]\n\
                   PASSED tests/a.py::t3\n\
                   FAILED tests/a.py::t2 - AssertionError\n\
                   ERROR tests/a.py::t4 - RuntimeError\n\
                   SKIPPED [1] tests/a.py:9: no\n\
                   XFAIL tests/a.py::t5\n\
                   FAILED\n\
                   PASSED\n  PASSED \n";
        let map = parse(log).map;
        let got: Vec<(&str, TestStatus)> = map.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(
            got,
            [
                ("tests/a.py::t1", TestStatus::Passed),
                ("tests/a.py::t2", TestStatus::Failed),
                ("tests/a.py::t3", TestStatus::Passed),
            ]
        );
    }

    #[test]
    fn a_failed_line_wins_over_the_passed_rule() {
        // `FAILED x PASSED y`: rule 1 applies first.
        let map = parse("FAILED x PASSED y\n").map;
        assert_eq!(map.get("x"), Some(&TestStatus::Failed));
    }
}
