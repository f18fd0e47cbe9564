//! The Django test runner at `--verbosity 2`: SWE-bench's `parse_log_django`
//! (`swebench/harness/log_parsers/python.py`, swebench 4.1.0).

use std::sync::OnceLock;

use regex::Regex;

use super::{Collector, TestStatus, py_split, py_strip};

/// `parse_log_django`. Each line, stripped of surrounding whitespace, is checked against every
/// rule below in this order (a line can match several; a later write for the same id wins):
///
/// - holding `--version is equivalent to version`: that text passed (an `admin_scripts`
///   test whose output spans lines);
/// - holding ` ... `: the text before the first ` ... ` becomes the *previous test*;
/// - ending with ` ... ok`, ` ... OK` or ` ...  OK` (first that matches): the text before
///   it passed (one line of `django__django-7188`, `Applying
///   sites.0002_alter_domain_unique...test_no_migrations ... ok`, first loses everything up to
///   its first `...`);
/// - holding ` ... skipped`: the text before it was skipped;
/// - ending with ` ... FAIL`: the text before the first ` ... FAIL` failed;
/// - starting with `FAIL:`: the *second word* of the line failed (just the method name:
///   `FAIL: test_x (app.tests.T)` gives `test_x`);
/// - ending with ` ... ERROR`, starting with `ERROR:`: the same, as errors;
/// - starting with `ok` while a previous test is known: the previous test passed (its output
///   came between ` ... ` and `ok`). The previous test is never reset.
///
/// A test whose docstring's first line unittest prints is known by that line: `test_x
/// (app.tests.T)\nDoes this. ... ok` gives `Does this.`. Expected failures and unexpected
/// successes are not read. Then, over the whole text, three multi-line patterns mark a test
/// passed whose `ok` came after output the test runner printed (`Testing against Django
/// installed in ... silenced).`, `Internal Server Error: /.../`, `System check identified no
/// issues (0 silenced)`).
///
/// Where SWE-bench's function raises `IndexError` (a line `FAIL:` or `ERROR:` alone), the
/// line is skipped.
pub(super) fn parse(log: &str) -> Collector {
    let mut out = Collector::default();
    let mut prev_test: Option<String> = None;
    for raw in log.split('\n') {
        let mut line = py_strip(raw);
        if line.contains("--version is equivalent to version") {
            out.set(
                "--version is equivalent to version".to_string(),
                TestStatus::Passed,
            );
        }
        if let Some((before, _)) = line.split_once(" ... ") {
            prev_test = Some(before.to_string());
        }
        for suffix in [" ... ok", " ... OK", " ...  OK"] {
            if line.ends_with(suffix) {
                if line.starts_with("Applying sites.0002_alter_domain_unique...test_no_migrations")
                {
                    line = match line.split_once("...") {
                        Some((_, after)) => py_strip(after),
                        None => line,
                    };
                }
                let test = match line.rfind(suffix) {
                    Some(i) => &line[..i],
                    None => line,
                };
                out.set(test.to_string(), TestStatus::Passed);
                break;
            }
        }
        if let Some((test, _)) = line.split_once(" ... skipped") {
            out.set(test.to_string(), TestStatus::Skipped);
        }
        for (suffix, prefix, status) in [
            (" ... FAIL", "FAIL:", TestStatus::Failed),
            (" ... ERROR", "ERROR:", TestStatus::Error),
        ] {
            if line.ends_with(suffix)
                && let Some((test, _)) = line.split_once(suffix)
            {
                out.set(test.to_string(), status);
            }
            if line.starts_with(prefix)
                && let Some(test) = py_split(line).nth(1)
            {
                out.set(test.to_string(), status);
            }
        }
        if line
            .trim_start_matches(super::is_py_space)
            .starts_with("ok")
            && let Some(prev) = &prev_test
        {
            out.set(prev.clone(), TestStatus::Passed);
        }
    }
    for pattern in patterns() {
        for caps in pattern.captures_iter(log) {
            if let Some(test) = caps.get(1) {
                out.set(test.as_str().to_string(), TestStatus::Passed);
            }
        }
    }
    out
}

/// SWE-bench's three patterns, searched with `re.MULTILINE`. Python's `\s` also matches
/// U+001C to U+001F, which Rust's does not: they are added.
fn patterns() -> &'static [Regex; 3] {
    static PATTERNS: OnceLock<[Regex; 3]> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let re = |p: &str| Regex::new(p).expect("the Django patterns are valid regexes");
        [
            re(concat!(
                r"(?m)^(.*?)[\s\x1C-\x1F]\.\.\.[\s\x1C-\x1F]Testing against Django installed in ",
                r"((?s:.*?)) silenced\)\.\nok$"
            )),
            re(r"(?m)^(.*?)[\s\x1C-\x1F]\.\.\.[\s\x1C-\x1F]Internal Server Error: /(.*)/\nok$"),
            re(concat!(
                r"(?m)^(.*?)[\s\x1C-\x1F]\.\.\.[\s\x1C-\x1F]System check identified no issues ",
                r"\(0 silenced\)\nok$"
            )),
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logparse::StatusMap;
    use TestStatus::*;

    fn parse(log: &str) -> StatusMap {
        super::parse(log).map
    }

    fn get(map: &StatusMap, k: &str) -> Option<TestStatus> {
        map.get(k).copied()
    }

    #[test]
    fn verbosity_two_lines() {
        let log = "test_a (app.tests.T) ... ok\n\
                   test_b (app.tests.T) ... skipped 'no db'\n\
                   test_c (app.tests.T) ... FAIL\n\
                   test_d (app.tests.T) ... ERROR\n\
                   test_e (app.tests.T) ... expected failure\n\
                   test_f (app.tests.T)\nDoes f things. ... ok\n\
                   ======\nFAIL: test_c (app.tests.T)\n\
                   ERROR: test_d (app.tests.T)\n";
        let map = parse(log);
        assert_eq!(get(&map, "test_a (app.tests.T)"), Some(Passed));
        assert_eq!(get(&map, "test_b (app.tests.T)"), Some(Skipped));
        assert_eq!(get(&map, "test_c (app.tests.T)"), Some(Failed));
        assert_eq!(get(&map, "test_d (app.tests.T)"), Some(Error));
        assert_eq!(get(&map, "test_e (app.tests.T)"), None);
        assert_eq!(get(&map, "Does f things."), Some(Passed));
        assert_eq!(get(&map, "test_f (app.tests.T)"), None);
        // The summary's `FAIL:`/`ERROR:` lines add the bare method names.
        assert_eq!(get(&map, "test_c"), Some(Failed));
        assert_eq!(get(&map, "test_d"), Some(Error));
    }

    #[test]
    fn output_between_the_dots_and_ok() {
        let log = "test_x (app.tests.T) ... printed by the test\nmore output\nok\n";
        assert_eq!(get(&parse(log), "test_x (app.tests.T)"), Some(Passed));
        // The previous test is never reset: any later line starting with `ok` passes it.
        let log = "test_y (app.tests.T) ... FAIL\nokay, said the traceback\n";
        assert_eq!(get(&parse(log), "test_y (app.tests.T)"), Some(Passed));
    }

    #[test]
    fn multiline_patterns() {
        let log = "test_m (app.tests.T) ... System check identified no issues (0 silenced)\nok\n\
                   test_n (app.tests.T) ... Internal Server Error: /a/b/\nok\n\
                   test_o (app.tests.T) ... Testing against Django installed in '/testbed/django'\n\
                   Importing application app\nSystem check identified no issues (0 silenced).\nok\n";
        let map = parse(log);
        for t in ["test_m", "test_n", "test_o"] {
            assert_eq!(
                get(&map, &format!("{t} (app.tests.T)")),
                Some(Passed),
                "{t}"
            );
        }
    }

    #[test]
    fn django_7188_and_version_quirks() {
        let log = "  Applying sites.0002_alter_domain_unique...test_no_migrations (m.T) ... ok\n\
                   --version is equivalent to version\n";
        let map = parse(log);
        assert_eq!(get(&map, "test_no_migrations (m.T)"), Some(Passed));
        assert_eq!(
            get(&map, "--version is equivalent to version"),
            Some(Passed)
        );
    }

    #[test]
    fn lone_fail_and_error_lines_are_skipped() {
        assert!(parse("FAIL:\nERROR:\n").is_empty());
    }
}
