//! sympy's `bin/test` (`--verbose`): SWE-bench's `parse_log_sympy`
//! (`swebench/harness/log_parsers/python.py`, swebench 4.1.0).

use std::sync::OnceLock;

use regex::Regex;

use super::{Collector, TestStatus, py_split, py_strip};

/// `parse_log_sympy`, in two passes:
///
/// 1. every match of `(_*) (.*)\.py:(.*) (_*)` in the whole text (the failure headers
///    `____ sympy/core/tests/test_x.py:test_y ____`) marks `PATH.py:NAME` failed, whether the
///    test failed or raised;
/// 2. each line, stripped, that starts with `test_` and ends with ` E`, ` F` or ` ok` marks
///    its first word as errored, failed or passed.
///
/// So a test that printed output has its status on a later line and is not read in pass 2,
/// and the last test of each file is not read either when `bin/test` ends its line with
/// `[OK]` or `[FAIL]`. Skipped (`s`), expected failures (`f`), unexpected passes (`X`) and
/// slow tests (`w`) are not read.
pub(super) fn parse(log: &str) -> Collector {
    static HEADER: OnceLock<Regex> = OnceLock::new();
    let header = HEADER.get_or_init(|| {
        Regex::new(r"(_*) (.*)\.py:(.*) (_*)").expect("the sympy header pattern is a valid regex")
    });
    let mut out = Collector::default();
    for caps in header.captures_iter(log) {
        let path = caps.get(2).map_or("", |m| m.as_str());
        let name = caps.get(3).map_or("", |m| m.as_str());
        out.set(format!("{path}.py:{name}"), TestStatus::Failed);
    }
    for line in log.split('\n') {
        let line = py_strip(line);
        if !line.starts_with("test_") {
            continue;
        }
        let status = if line.ends_with(" E") {
            TestStatus::Error
        } else if line.ends_with(" F") {
            TestStatus::Failed
        } else if line.ends_with(" ok") {
            TestStatus::Passed
        } else {
            continue;
        };
        if let Some(test) = py_split(line).next() {
            out.set(test.to_string(), status);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logparse::StatusMap;
    use TestStatus::*;

    fn parse(log: &str) -> StatusMap {
        super::parse(log).map
    }

    #[test]
    fn verbose_lines_and_failure_headers() {
        let log = "sympy/core/tests/test_basic.py[4] \n\
                   test_a ok\n\
                   test_b F\n\
                   test_c printed something\nE\n\
                   test_d f\n\
                   test_e ok                                [FAIL]\n\n\
                   ___________ sympy/core/tests/test_basic.py:test_b ___________\n\
                   ___________ sympy/core/tests/test_basic.py:test_c ___________\n";
        let map = parse(log);
        let got: Vec<(&str, TestStatus)> = map.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(
            got,
            [
                ("sympy/core/tests/test_basic.py:test_b", Failed),
                ("sympy/core/tests/test_basic.py:test_c", Failed),
                ("test_a", Passed),
                ("test_b", Failed),
            ]
        );
        assert_eq!(parse("  test_x E  \n").get("test_x"), Some(&Error));
    }
}
