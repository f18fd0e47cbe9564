//! Multi-SWE-bench's parsers: the `parse_log` methods of the default handlers of its
//! repositories (`multi_swe_bench/harness/repos/<language>/<org>/<repo>.py` in
//! multi-swe-bench/multi-swe-bench at commit 24f493f8), one parser per distinct method.
//! They come under two kinds of names: `msb_*`, by the repository whose method it is (what
//! the dataset's rows are graded by), and the runner names of [`RUNNERS`] (`jest`, `ctest`, …),
//! for a repository Multi-SWE-bench does not have: the method of a handler that runs that
//! runner, the runner's name standing for an `msb_*` parser where one already is that method.
//!
//! Each method reads `test_log.splitlines()`, strips each line, and adds the first group of
//! a `re.match` of its patterns to one of three sets (passed, failed, skipped), which
//! `TestResult` (`multi_swe_bench/harness/test_result.py`) turns into PASS, FAIL and SKIP.
//! The patterns below are Multi-SWE-bench's, character for character; [`py_regex`] gives
//! them Python's meaning. Multi-SWE-bench has no other reading of a log: the harness's
//! markers and [`super::Grading`] play no part here.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

mod mocha;

use mocha::{mocha, mocha_json};

use super::{StatusMap, TestStatus, py_strip};

/// The parsers, by name, each with the Multi-SWE-bench repositories (`org/repo`, as its
/// dataset rows spell them) whose default handler's `parse_log` it is.
const PARSERS: [(&str, &[&str]); 7] = [
    ("msb_axios", &["axios/axios"]),
    (
        "msb_cargo",
        &[
            "BurntSushi/ripgrep",
            "sharkdp/bat",
            "tokio-rs/tokio",
            "tokio-rs/bytes",
        ],
    ),
    ("msb_catch2", &["catchorg/Catch2"]),
    ("msb_darkreader", &["darkreader/darkreader"]),
    ("msb_dayjs", &["iamkun/dayjs"]),
    ("msb_fmt", &["fmtlib/fmt"]),
    ("msb_jq", &["jqlang/jq"]),
];

/// The runner parsers, by the test runner a manifest names, each with the parser it is (an
/// `msb_*` parser, or its own below) and the handler (`multi_swe_bench/harness/repos/…` at
/// 24f493f8) whose `parse_log` it is; the other handlers with the same method are named where
/// the parser's patterns are, and `scripts/msb_expected.py` checks that their code is the same.
pub(super) const RUNNERS: [(&str, &str, &str); 9] = [
    ("automake", "msb_jq", "c/jqlang/jq.py"),
    ("cargo", "msb_cargo", "rust/BurntSushi/ripgrep.py"),
    ("ctest", "ctest", "c/libgit2/libgit2.py"),
    ("googletest", "googletest", "cpp/yhirose/cpp_httplib.py"),
    ("jest", "msb_dayjs", "javascript/iamkun/dayjs.py"),
    ("mocha", "mocha", "typescript/microsoft/vscode.py"),
    // `parse_log` reads the JSON with the method `parse_json_log` ([`mocha_json`]).
    (
        "mocha_json",
        "mocha_json",
        "javascript/expressjs/express.py",
    ),
    ("tap", "tap", "javascript/google/zx.py"),
    ("vitest", "vitest", "typescript/vuejs/core.py"),
];

/// The runner names ([`RUNNERS`]), in order.
pub fn runner_names() -> impl Iterator<Item = &'static str> {
    RUNNERS.iter().map(|(runner, _, _)| *runner)
}

/// The parser a runner name stands for: an `msb_*` parser, or the runner's own.
pub(super) fn runner_parser(name: &str) -> Option<&'static str> {
    RUNNERS
        .iter()
        .find(|(runner, _, _)| *runner == name)
        .map(|(_, parser, _)| *parser)
}

/// The parser of a Multi-SWE-bench repository (`org/repo`), if it is one of those here.
pub fn parser_for_repo(repo: &str) -> Option<&'static str> {
    PARSERS
        .iter()
        .find(|(_, repos)| repos.contains(&repo))
        .map(|(name, _)| *name)
}

/// The statuses the parser `name` (an `msb_*` name, or a runner's) reads in `log`; None when
/// `name` is not one of them.
pub(super) fn parse(name: &str, log: &str) -> Option<StatusMap> {
    let sets = match runner_parser(name).unwrap_or(name) {
        "msb_cargo" => by_rules(log, &CARGO, false),
        "msb_dayjs" => jest(log, &DAYJS),
        "msb_darkreader" => jest(log, &DARKREADER),
        "msb_axios" => by_rules(log, &AXIOS, false),
        "msb_jq" => by_rules(log, &JQ, false),
        "msb_fmt" => by_rules(log, &FMT, false),
        "msb_catch2" => by_rules(log, &CATCH2, true),
        "ctest" => by_rules(log, &CTEST, false),
        "googletest" => by_rules(log, &GOOGLETEST, false),
        "mocha" => mocha(log),
        "mocha_json" => mocha_json(log),
        "tap" => tap(log),
        "vitest" => by_rules(log, &VITEST, false),
        _ => return None,
    };
    Some(sets.into_map())
}

/// Which of `parse_log`'s sets a match goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Set {
    Passed,
    Failed,
    Skipped,
}

/// `passed_tests`, `failed_tests`, `skipped_tests`.
#[derive(Debug, Default)]
struct Sets {
    passed: BTreeSet<String>,
    failed: BTreeSet<String>,
    skipped: BTreeSet<String>,
}

impl Sets {
    fn add(&mut self, set: Set, test: &str) {
        let set = match set {
            Set::Passed => &mut self.passed,
            Set::Failed => &mut self.failed,
            Set::Skipped => &mut self.skipped,
        };
        set.insert(test.to_string());
    }

    /// `TestResult`'s statuses. A test in two sets makes Multi-SWE-bench's `TestResult` raise
    /// `ValueError`, and the instance's report is not made (an error, not resolved); here
    /// failed wins over skipped over passed, so that no such test counts as passing.
    fn into_map(self) -> StatusMap {
        let mut map = StatusMap::new();
        for (set, status) in [
            (self.passed, TestStatus::Passed),
            (self.skipped, TestStatus::Skipped),
            (self.failed, TestStatus::Failed),
        ] {
            map.extend(set.into_iter().map(|test| (test, status)));
        }
        map
    }
}

/// A pattern of `parse_log` and the set its first group goes to.
struct Rule {
    re: Regex,
    set: Set,
}

/// `rules` compiled as [`py_regex`] does.
fn rules(table: &[(&str, Set)], ignore_case: bool) -> Vec<Rule> {
    table
        .iter()
        .map(|(pattern, set)| Rule {
            re: py_regex(pattern, ignore_case),
            set: *set,
        })
        .collect()
}

/// `re.compile(pattern, re.IGNORECASE if ignore_case)` as `re.match` uses it: anchored at the
/// start, with Python's classes for `str` patterns. Python's `\s` is `str.isspace()`, which
/// adds U+001C–U+001F to Unicode's White_Space; `\w` is `str.isalnum()` or `_` (letters and
/// numbers: no marks or connector punctuation besides `_`, unlike Rust's `\w`). Under
/// IGNORECASE Python also matches `i` with `ı` and `İ`, which simple case folding (Rust's
/// `(?i)`) does not. `\d`, `.` and `$` mean the same in both on a line. Inside a class of a
/// pattern (`[\s]` of [`mocha`]'s) the translation is a class nested in it, which Rust's
/// regex reads as their union, as Python reads the class.
fn py_regex(pattern: &str, ignore_case: bool) -> Regex {
    let mut out = String::from(if ignore_case { r"(?i)\A(?:" } else { r"\A(?:" });
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('s') => out.push_str(r"[\s\x1C-\x1F]"),
                Some('S') => out.push_str(r"[^\s\x1C-\x1F]"),
                Some('w') => out.push_str(r"[\p{L}\p{N}_]"),
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
            'i' | 'I' if ignore_case => out.push_str("[iIıİ]"),
            c => out.push(c),
        }
    }
    out.push(')');
    Regex::new(&out).expect("Multi-SWE-bench's patterns, translated, are valid")
}

/// Python's `str.splitlines()`: lines end at `\n`, `\r\n`, `\r`, `\v`, `\f`, U+001C–U+001E,
/// U+0085, U+2028 and U+2029; a final line end opens no empty line.
fn py_splitlines(text: &str) -> impl Iterator<Item = &str> {
    let is_break = |c: char| {
        matches!(
            c,
            '\n' | '\r'
                | '\u{b}'
                | '\u{c}'
                | '\u{1c}'
                | '\u{1d}'
                | '\u{1e}'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        )
    };
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let Some(at) = rest.find(is_break) else {
            return Some(std::mem::take(&mut rest));
        };
        let line = &rest[..at];
        let after = &rest[at..];
        let width = if after.starts_with("\r\n") {
            2
        } else {
            after.chars().next().map_or(1, char::len_utf8)
        };
        rest = &after[width..];
        Some(line)
    })
}

/// The loop most of the methods share: every stripped line (lowercased first when `lower`),
/// against every rule in order; each match adds its first group to the rule's set.
fn by_rules(log: &str, rules: &[Rule], lower: bool) -> Sets {
    let mut sets = Sets::default();
    for line in py_splitlines(log) {
        let lowered;
        let mut line = py_strip(line);
        if lower {
            lowered = line.to_lowercase();
            line = &lowered;
        }
        for rule in rules {
            if let Some(test) = rule.re.captures(line).and_then(|c| c.get(1)) {
                sets.add(rule.set, test.as_str());
            }
        }
    }
    sets
}

/// The patterns of jest's default reporter, as one repository's `parse_log` has them.
struct JestRules {
    pass_suite: Regex,
    pass_test: Regex,
    fail_suite: Regex,
    fail_test: Regex,
}

impl JestRules {
    fn new(suite: &str, test: &str) -> Self {
        let re = |status: &str, rest: &str| py_regex(&format!("{status}{rest}"), false);
        JestRules {
            pass_suite: re("^PASS ", suite),
            pass_test: re("^✓ ", test),
            fail_suite: re("^FAIL ", suite),
            fail_test: re("^✕ ", test),
        }
    }
}

/// dayjs's and darkreader's `parse_log`: `PASS <file>` and `FAIL <file>` record the file and
/// make it the current suite; `✓ <title>` and `✕ <title>` record `<suite>:<title>`. Where
/// Multi-SWE-bench raises `ValueError` (a test line before any suite line), the line is
/// skipped.
fn jest(log: &str, rules: &JestRules) -> Sets {
    let mut sets = Sets::default();
    let mut suite: Option<String> = None;
    let group = |re: &Regex, line: &str| -> Option<String> {
        Some(re.captures(line)?.get(1)?.as_str().to_string())
    };
    for line in py_splitlines(log) {
        let line = py_strip(line);
        if line.is_empty() {
            continue;
        }
        for (re, set) in [
            (&rules.pass_suite, Set::Passed),
            (&rules.fail_suite, Set::Failed),
        ] {
            if let Some(name) = group(re, line) {
                sets.add(set, &name);
                suite = Some(name);
            }
        }
        for (re, set) in [
            (&rules.pass_test, Set::Passed),
            (&rules.fail_test, Set::Failed),
        ] {
            if let (Some(title), Some(suite)) = (group(re, line), &suite) {
                sets.add(set, &format!("{suite}:{title}"));
            }
        }
    }
    sets
}

/// ripgrep, bat, tokio, bytes (and twelve other Rust repositories of Multi-SWE-bench): libtest's
/// `test NAME ... ok`. The dots are regex dots and nothing anchors the end.
static CARGO: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    rules(
        &[
            (r"test (\S+) ... ok", Set::Passed),
            (r"test (\S+) ... FAILED", Set::Failed),
            (r"test (\S+) ... ignored", Set::Skipped),
        ],
        false,
    )
});

/// dayjs (and github-readme-stats): a trailing `(<number> <unit>)` is cut from suites and
/// titles.
static DAYJS: LazyLock<JestRules> = LazyLock::new(|| {
    JestRules::new(
        r"(.+?)(?:\s\(\d*\.?\d+\s*\w+\))?$",
        r"(.+?)(?:\s\(\d*\.?\d+\s*\w+\))?$",
    )
});

/// darkreader: a suite is one word; a title loses everything from the first ` (` after
/// which the line ends with `)`.
static DARKREADER: LazyLock<JestRules> =
    LazyLock::new(|| JestRules::new(r"(\S+)(\s*\(.+\))?$", r"(.+?)(\s+\(.+\))?$"));

/// axios: mocha's spec reporter, `✔ <title>` and `<n>) <title>`.
static AXIOS: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    rules(
        &[
            (r"^✔ (.+?)(?:\s\(\d*\.?\d*\s*\w+\))?$", Set::Passed),
            (r"^\d+\) (.+?)(?:\s\(\d*\.?\d*\s*\w+\))?$", Set::Failed),
        ],
        false,
    )
});

/// jq: automake's test harness, `PASS: <test>`.
static JQ: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    rules(
        &[
            (r"^PASS: (\S+)$", Set::Passed),
            (r"^FAIL: (\S+)$", Set::Failed),
            (r"^SKIP: (\S+)$", Set::Skipped),
        ],
        false,
    )
});

/// fmt (and nlohmann/json, rdkit, simdjson): ctest's result lines. The failure pattern wants
/// the line to end at `Failed`, and ctest always writes the time after it.
static FMT: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    rules(
        &[
            (
                r"^\d+/\d+\s*Test\s*#\d+:\s*(.*?)\s*\.+\s*Passed",
                Set::Passed,
            ),
            (
                r"^\d+/\d+\s*Test\s*#\d+:\s*(.*?)\s*\.+\s*\*+Failed$",
                Set::Failed,
            ),
        ],
        false,
    )
});

/// Catch2: ctest's result lines and CMake's `-- Performing Test <check> - Success` lines, on
/// lowercased lines, with IGNORECASE.
static CATCH2: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    rules(
        &[
            (r"^-- Performing Test (.+) - Success$", Set::Passed),
            (
                r"^\d+/\d+ Test\s+#\d+: (.+) \.+\s+ Passed\s+.+$",
                Set::Passed,
            ),
            (r"^-- Performing Test (.+) - Failed$", Set::Failed),
            (
                r"^\d+/\d+ Test\s+#\d+: (.+) \.+\*\*\*Failed\s+.+$",
                Set::Failed,
            ),
            (r"^-- Performing Test (.+) - skipped$", Set::Skipped),
        ],
        true,
    )
});

/// `ctest`: ctest's result lines, as libgit2 (`ctest -V --timeout 300`), OpenBLAS, fluent-bit,
/// SDL, CGAL and ROOT (`ctest -j N`) read them: `c/libgit2/libgit2.py`, `Libgit2.parse_log`,
/// the same code in `c/OpenMathLib/OpenBLAS.py`, `c/fluent/fluentbit.py`, `c/libsdlorg/SDL.py`,
/// `cpp/cgal/cgal.py` and `cpp/rootproject/root.py`. Unlike fmt's ([`FMT`]), the failure
/// pattern leaves the end free, so `***Failed    0.01 sec` is read; `***Exception`,
/// `***Timeout`, `***Skipped` and `***Not Run` are not.
static CTEST: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    rules(
        &[
            (
                r"^\d+/\d+\s*Test\s*#\d+:\s*(.*?)\s*\.+\s*Passed",
                Set::Passed,
            ),
            (
                r"^\d+/\d+\s*Test\s*#\d+:\s*(.*?)\s*\.+\s*\*+Failed",
                Set::Failed,
            ),
        ],
        false,
    )
});

/// `googletest`: googletest's `[       OK ] Suite.Test (N ms)` and `[  FAILED  ] …` lines, as
/// cpp-httplib reads its test binary's output (`cd test; make`): `cpp/yhirose/cpp_httplib.py`,
/// `CppHttplib.parse_log`, the same code in `c/ponylang/ponyc.py` (whose pony tests print the
/// `---- Passed:` and `**** FAILED:` lines). The coloured forms want `\x1b[0m` after the
/// bracket; googletest writes `\x1b[m`, so `--gtest_color=yes` output is not read.
static GOOGLETEST: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    rules(
        &[
            (r"^\[       OK \] (\S+?)( \(.+\))?$", Set::Passed),
            (
                r"^\x1b\[0;32m\[       OK \] \x1b\[0m(\S+?)( \(.+\))?$",
                Set::Passed,
            ),
            (r"^\x1b\[92m---- Passed: (\S+?)\x1b\[0m$", Set::Passed),
            (r"^\[  FAILED  \] (\S+?)( \(.+\))?$", Set::Failed),
            (
                r"^\x1b\[0;31m\[  FAILED  \] \x1b\[0m(\S+?)( \(.+\))?$",
                Set::Failed,
            ),
            (r"^\x1b\[91m\*\*\*\* FAILED: (\S+?)\x1b\[0m$", Set::Failed),
        ],
        false,
    )
});

/// `vitest`: vitest's `✓ <file> > <suite> > <title> 2ms` and `× …` lines (`--reporter=verbose`),
/// as vuejs/core reads them (`pnpm run test-unit --no-watch --reporter=verbose`):
/// `typescript/vuejs/core.py`, `Core.parse_log`, the same code in
/// `javascript/sveltejs/svelte.py`. A trailing number with `ms`, `s` or `m` is cut, as a time.
static VITEST: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    rules(
        &[
            (r"^✓ (.+?)(?:\s*\d*\.?\d+\s*(?:ms|s|m))?$", Set::Passed),
            (r"^× (.+?)(?:\s*\d*\.?\d+\s*(?:ms|s|m))?$", Set::Failed),
        ],
        false,
    )
});

/// The patterns of [`tap`].
struct TapRules {
    subtest: Regex,
    result: Regex,
}

static TAP: LazyLock<TapRules> = LazyLock::new(|| TapRules {
    subtest: py_regex(r"^(\s*)# Subtest:\s*(.+)", false),
    result: py_regex(r"^\s*(ok|not ok)\s+\d+\s+-\s+(.+)", false),
});

/// `tap`: TAP with `# Subtest:` lines, as node:test writes it when its output is not a
/// terminal (and node-tap with `--reporter=tap`), read as google/zx reads its test run
/// (`npm test -- --reporter=verbose`): `javascript/google/zx.py`, `Zx.parse_log`.
///
/// Lines are not stripped. `# Subtest: NAME` at an indentation of `4 × level` characters cuts
/// the stack of names to `level` and pushes NAME; `ok N - TITLE` / `not ok N - TITLE` is
/// passed / failed as the stack without its last name, then TITLE, joined by `:` (TITLE alone
/// when the stack is empty). Only a `# Subtest:` line cuts the stack, so a suite's own result
/// line, which comes after its subtests', is named with the parents of the last subtest pushed
/// (`math:math`, or `math:add:math` when that subtest was nested in `add`), and `# SKIP` and
/// `# TODO` directives stay in the title of a passed test.
fn tap(log: &str) -> Sets {
    let mut sets = Sets::default();
    let mut stack: Vec<String> = Vec::new();
    for line in py_splitlines(log) {
        if py_strip(line).is_empty() {
            continue;
        }
        if let Some(c) = TAP.subtest.captures(line) {
            let indent = c.get(1).map_or(0, |m| m.as_str().chars().count());
            let name = c.get(2).map_or("", |m| py_strip(m.as_str()));
            stack.truncate(indent / 4);
            stack.push(name.to_string());
            continue;
        }
        if let Some(c) = TAP.result.captures(line) {
            let title = c.get(2).map_or("", |m| py_strip(m.as_str()));
            let test = match stack.split_last() {
                Some((_, outer)) => {
                    let mut names: Vec<&str> = outer.iter().map(String::as_str).collect();
                    names.push(title);
                    names.join(":")
                }
                None => title.to_string(),
            };
            let set = match c.get(1).map(|m| m.as_str()) {
                Some("ok") => Set::Passed,
                _ => Set::Failed,
            };
            sets.add(set, &test);
        }
    }
    sets
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(name: &str, log: &str) -> Vec<(String, TestStatus)> {
        parse(name, log).unwrap().into_iter().collect()
    }

    fn entry(id: &str, status: TestStatus) -> (String, TestStatus) {
        (id.to_string(), status)
    }

    #[test]
    fn every_parser_by_name_and_repository() {
        for (name, _) in PARSERS {
            assert_eq!(parse(name, ""), Some(StatusMap::new()), "{name}");
            assert!(super::super::known_parsers().contains(&name), "{name}");
        }
        for name in super::super::known_parsers() {
            assert_eq!(
                name.starts_with("msb_"),
                PARSERS.iter().any(|(n, _)| n == name),
                "{name}"
            );
        }
        for (runner, parser, _) in RUNNERS {
            assert!(super::super::known_parsers().contains(&runner), "{runner}");
            assert_eq!(parse(runner, ""), Some(StatusMap::new()), "{runner}");
            assert_eq!(super::super::canonical_parser(runner), Some(parser));
            assert!(
                parser == runner || PARSERS.iter().any(|(n, _)| *n == parser),
                "{runner} stands for {parser}, which is no parser"
            );
        }
        assert_eq!(parse("pytest", "PASSED a"), None);
        assert_eq!(parser_for_repo("tokio-rs/bytes"), Some("msb_cargo"));
        assert_eq!(parser_for_repo("catchorg/Catch2"), Some("msb_catch2"));
        assert_eq!(parser_for_repo("catchorg/catch2"), None);
    }

    #[test]
    fn splitlines_as_python() {
        let lines: Vec<_> =
            py_splitlines("a\r\nb\rc\u{b}d\u{1e}e\u{85}f\u{2029}g\n\nh\n").collect();
        assert_eq!(lines, ["a", "b", "c", "d", "e", "f", "g", "", "h"]);
        assert_eq!(py_splitlines("").count(), 0);
        assert_eq!(py_splitlines("\n").collect::<Vec<_>>(), [""]);
        // U+001F is no line end, but Python's whitespace: stripped, and `\s`.
        assert_eq!(py_splitlines("a\u{1f}b").count(), 1);
    }

    #[test]
    fn python_classes_in_patterns() {
        let re = py_regex(r"x\s(\S+) (\w+)", false);
        let c = re.captures("x\u{1f}ab d_1²").unwrap();
        assert_eq!((&c[1], &c[2]), ("ab", "d_1²"));
        assert_eq!(
            &py_regex(r"(\S+)", false).captures("a\u{1f}b").unwrap()[1],
            "a"
        );
        // A combining mark is \w to Rust, not to Python.
        assert!(py_regex(r"(\w+)$", false).captures("e\u{301}").is_none());
        // Anchored at the start only, as `re.match`.
        assert!(py_regex("b", false).captures("ab").is_none());
        assert!(py_regex("a", false).captures("ab").is_some());
        let re = py_regex("performing test", true);
        assert!(re.is_match("PERFORMıNG teſt"));
    }

    #[test]
    fn cargo_lines() {
        let log = "test a::b ... ok\n  test c ... FAILED\ntest d ... ignored, needs network\n\
                   test e - should panic ... ok\ntest src/lib.rs - f (line 3) ... ok\n\
                   test result: ok. 3 passed; 0 failed\ntest g xyz okay\ntest h ... okay\n";
        assert_eq!(
            map("msb_cargo", log),
            [
                entry("a::b", TestStatus::Passed),
                entry("c", TestStatus::Failed),
                entry("d", TestStatus::Skipped),
                // `...` is any three characters, and the end is free.
                entry("g", TestStatus::Passed),
                entry("h", TestStatus::Passed),
            ]
        );
    }

    #[test]
    fn a_runner_name_is_the_msb_parser_it_stands_for() {
        let logs = [
            (
                "cargo",
                "test a ... ok\ntest b ... FAILED\ntest c ... ignored\n",
            ),
            (
                "jest",
                "PASS test/a.test.js\n  ✓ adds (2 ms)\nFAIL test/b.test.js\n✕ w\n",
            ),
            ("automake", "PASS: tests/a\nFAIL: tests/b\nSKIP: tests/c\n"),
        ];
        for (runner, log) in logs {
            let parser = runner_parser(runner).unwrap();
            assert!(!map(runner, log).is_empty(), "{runner}");
            assert_eq!(map(runner, log), map(parser, log), "{runner}");
        }
        assert_eq!(runner_parser("vitest"), Some("vitest"));
        // mocha's is its own: axios's reads only `✔`, and no pending test.
        assert_eq!(runner_parser("mocha"), Some("mocha"));
        assert_eq!(runner_parser("msb_cargo"), None);
    }

    #[test]
    fn ctest_reads_failures_fmt_does_not() {
        let log = " 1/4 Test  #1: a.b ....   Passed    0.01 sec\n\
                   2/4 Test  #2: fails ....***Failed    0.01 sec\n\
                   3/4 Test  #3: crash ....***Exception: SegFault  0.00 sec\n\
                   4/4 Test  #4: with spaces (x) ....***Failed  Required regular expression\n";
        assert_eq!(
            map("ctest", log),
            [
                entry("a.b", TestStatus::Passed),
                entry("fails", TestStatus::Failed),
                entry("with spaces (x)", TestStatus::Failed),
            ]
        );
        assert_eq!(map("msb_fmt", log), [entry("a.b", TestStatus::Passed)]);
    }

    #[test]
    fn googletest_lines() {
        let log = "[       OK ] Calc.Adds (0 ms)\n[  FAILED  ] Calc.Fails (1 ms)\n\
                   [  FAILED  ] Values/P.Pos/2, where GetParam() = -5 (0 ms)\n\
                   [  SKIPPED ] Calc.Skips (0 ms)\n[  FAILED  ] 2 tests, listed below:\n\
                   \u{1b}[0;32m[       OK ] \u{1b}[0mColour.Old (0 ms)\n\
                   \u{1b}[0;32m[       OK ] \u{1b}[mColour.New (0 ms)\n\
                   \u{1b}[92m---- Passed: pony/test\u{1b}[0m\n";
        assert_eq!(
            map("googletest", log),
            [
                entry("Calc.Adds", TestStatus::Passed),
                entry("Calc.Fails", TestStatus::Failed),
                entry("Colour.Old", TestStatus::Passed),
                entry("pony/test", TestStatus::Passed),
            ]
        );
    }

    #[test]
    fn vitest_verbose_lines() {
        let log = " ✓ test/a.test.js > math > adds 2ms\n × test/a.test.js > math > fails 15ms\n\
                   ↓ test/a.test.js > skipped\n ✓ test/a.test.js > handles 10s 0ms\n\
                   ✓ test/b.test.js > handles 10s\n \u{1b}[32m✓\u{1b}[39m coloured 1ms\n\
                   ❯ test/c.test.js (2 tests | 1 failed) 5ms\n";
        assert_eq!(
            map("vitest", log),
            [
                entry("test/a.test.js > handles 10s", TestStatus::Passed),
                entry("test/a.test.js > math > adds", TestStatus::Passed),
                entry("test/a.test.js > math > fails", TestStatus::Failed),
                // No time after it: the title's own `10s` is cut as one.
                entry("test/b.test.js > handles", TestStatus::Passed),
            ]
        );
    }

    #[test]
    fn tap_subtests_by_indentation() {
        let log = "TAP version 13\n# Subtest: math\n    # Subtest: add\n\
                   \x20       # Subtest: adds\n        ok 1 - adds\n          ---\n\
                   \x20         duration_ms: 0.8\n          ...\n\
                   \x20       not ok 2 - fails\n        1..2\n    not ok 1 - add\n\
                   \x20   ok 2 - skipped # SKIP not today\nnot ok 1 - math\n\
                   # Subtest: top\nok 2 - top\n  ok 3 - stray\n";
        assert_eq!(
            map("tap", log),
            [
                // Only a `# Subtest:` line cuts the stack: the results after the deepest
                // subtest are named with its parents.
                entry("math:add:add", TestStatus::Failed),
                entry("math:add:adds", TestStatus::Passed),
                entry("math:add:fails", TestStatus::Failed),
                entry("math:add:math", TestStatus::Failed),
                entry("math:add:skipped # SKIP not today", TestStatus::Passed),
                entry("stray", TestStatus::Passed),
                entry("top", TestStatus::Passed),
            ]
        );
    }

    #[test]
    fn a_test_in_two_sets_is_failed_over_skipped_over_passed() {
        let log = "test a ... ok\ntest a ... FAILED\ntest b ... ignored\ntest b ... ok\n\
                   test c ... FAILED\ntest c ... ignored\ntest c ... ok\n";
        assert_eq!(
            map("msb_cargo", log),
            [
                entry("a", TestStatus::Failed),
                entry("b", TestStatus::Skipped),
                entry("c", TestStatus::Failed),
            ]
        );
    }

    #[test]
    fn dayjs_suites_and_titles() {
        let log = "✓ before any suite\nPASS test/a.test.js (5.123s)\n  ✓ adds (2 days)\n\
                   ✓ x (5ms)\n✓ y (really)\n  ✕ z (12 ms)\nFAIL test/b.test.js\n✕ w\n\
                   ○ skipped 1 test\nPASS  test/c.test.js\n";
        assert_eq!(
            map("msb_dayjs", log),
            [
                entry(" test/c.test.js", TestStatus::Passed),
                entry("test/a.test.js", TestStatus::Passed),
                entry("test/a.test.js:adds", TestStatus::Passed),
                entry("test/a.test.js:x", TestStatus::Passed),
                entry("test/a.test.js:y (really)", TestStatus::Passed),
                entry("test/a.test.js:z", TestStatus::Failed),
                entry("test/b.test.js", TestStatus::Failed),
                entry("test/b.test.js:w", TestStatus::Failed),
            ]
        );
    }

    #[test]
    fn darkreader_suites_and_titles() {
        let log = "PASS tests/a.tests.ts (5.262 s)\n✓ converts (hsl) values (2 ms)\n\
                   ✓ keeps rgb(0, 0, 0)\nPASS tests/b.tests.ts extra\n✕ still in a\n\
                   FAIL tests/c.tests.ts\n✓ plain\n";
        assert_eq!(
            map("msb_darkreader", log),
            [
                entry("tests/a.tests.ts", TestStatus::Passed),
                entry("tests/a.tests.ts:converts", TestStatus::Passed),
                entry("tests/a.tests.ts:keeps rgb(0, 0, 0)", TestStatus::Passed),
                entry("tests/a.tests.ts:still in a", TestStatus::Failed),
                entry("tests/c.tests.ts", TestStatus::Failed),
                entry("tests/c.tests.ts:plain", TestStatus::Passed),
            ]
        );
    }

    #[test]
    fn axios_mocha_spec_lines() {
        let log = "  ✔ passes (120ms)\n  ✔ strips (deprecated)\n  ✔ keeps (a b)\n\
                   1) fails\n  1) suite title\n       fails:\n- pending\n12) x (ms)\n";
        assert_eq!(
            map("msb_axios", log),
            [
                entry("fails", TestStatus::Failed),
                entry("keeps (a b)", TestStatus::Passed),
                entry("passes", TestStatus::Passed),
                entry("strips", TestStatus::Passed),
                entry("suite title", TestStatus::Failed),
                entry("x", TestStatus::Failed),
            ]
        );
    }

    #[test]
    fn mocha_spec_lines_of_every_version() {
        // The sets vscode's `parse_log` gives (typescript/microsoft/vscode.py at 24f493f8, run
        // on this log in a venv of Multi-SWE-bench's harness).
        let log = "  ✓ old glyph (120ms)\n  ✔ new glyph\n  ✔ keeps (deprecated)\n  ✓ cut (1.5 s)\n\
                   \u{1b}[32m  ✓\u{1b}[0m\u{1b}[90m coloured\u{1b}[0m\n  1) fails\n\
                   \x20 2) \"before each\" hook for \"hooked\"\n\
                   \x20 3) \"after all\" hook in \"{root}\"\n  - pending\n  ✓ pending\n\
                   \x20 ✓ fails\n  - fails\n  ✖ crossed (3ms)\n  ✓ later failed\n\
                   \x20 4) later failed\n  ✓ later skipped\n  - later skipped\n";
        assert_eq!(
            map("mocha", log),
            [
                entry("\"after all\" hook in \"{root}\"", TestStatus::Failed),
                entry("coloured", TestStatus::Passed),
                entry("crossed", TestStatus::Failed),
                entry("cut", TestStatus::Passed),
                entry("fails", TestStatus::Failed),
                // A failing hook fails the test it names.
                entry("hooked", TestStatus::Failed),
                // Only a number before the unit is a time.
                entry("keeps (deprecated)", TestStatus::Passed),
                entry("later failed", TestStatus::Failed),
                entry("later skipped", TestStatus::Skipped),
                entry("new glyph", TestStatus::Passed),
                entry("old glyph", TestStatus::Passed),
                entry("pending", TestStatus::Skipped),
            ]
        );
        // axios's reading, unchanged, knows only `✔`.
        assert!(!map("msb_axios", log).contains(&entry("old glyph", TestStatus::Passed)));
    }

    #[test]
    fn mocha_json_reads_the_reports_among_the_text() {
        // The sets express's `parse_json_log` gives (javascript/expressjs/express.py at
        // 24f493f8, with dataclasses-json 0.6.7): passed `7`, `s ok {a: 1}`; failed `s f`;
        // skipped `s p`.
        let log = concat!(
            "\n> pkg@1.0.0 test\n> mocha --reporter json\n\nprinted {not json}\n========\n{\n",
            "  \"stats\": {\"suites\": 2, \"tests\": 4, \"passes\": 2, \"pending\": 1, ",
            "\"failures\": 1, \"start\": \"2026-01-01T00:00:00.000Z\", ",
            "\"end\": \"2026-01-01T00:00:00.010Z\", \"duration\": 10},\n",
            "  \"tests\": [],\n",
            "Writing coverage/lcov.info\n",
            "  \"pending\": [{\"title\": \"p\", \"fullTitle\": \"s p\", \"currentRetry\": 0, ",
            "\"err\": {}}],\n",
            "  \"failures\": [{\"title\": \"f\", \"fullTitle\": \"s f\", \"file\": \"/x/t.js\", ",
            "\"duration\": 2, \"currentRetry\": 0, \"speed\": \"fast\", \"err\": ",
            "{\"message\": \"boom {\", \"stack\": \"Error: boom\\n    at x\"}}],\n",
            "  \"passes\": [{\"title\": \"ok\", \"fullTitle\": \"s ok {a: 1}\", ",
            "\"currentRetry\": 0, \"err\": {}}, {\"title\": \"f\", \"fullTitle\": \"s f\", ",
            "\"currentRetry\": 0, \"err\": {}}, {\"title\": \"p\", \"fullTitle\": \"s p\", ",
            "\"currentRetry\": 0, \"err\": {}}, {\"title\": \"ok\", ",
            "\"fullTitle\": \"s ok {a: 1}\", \"currentRetry\": 0, \"err\": {}}]\n",
            "}\r\n",
            "{\"stats\": null, \"tests\": null, \"pending\": {}, \"failures\": \"\", ",
            "\"passes\": [{\"title\": 1, \"fullTitle\": 7, \"currentRetry\": \"2\", \"err\": null}]}\n",
        );
        assert_eq!(
            map("mocha_json", log),
            [
                // Python's `str()` of the number.
                entry("7", TestStatus::Passed),
                // Failed over pending over passed, twice listed or not.
                entry("s f", TestStatus::Failed),
                entry("s ok {a: 1}", TestStatus::Passed),
                entry("s p", TestStatus::Skipped),
            ]
        );
        // No JSON, or spec output: nothing.
        assert_eq!(map("mocha_json", "  ✔ passes\n  1) fails\n"), []);
    }

    #[test]
    fn mocha_json_skips_what_multi_swe_bench_raises_on() {
        let report = |title: &str| {
            format!(
                "{{\"stats\": null, \"tests\": [], \"pending\": [], \"failures\": [], \
                 \"passes\": [{{\"title\": \"t\", \"fullTitle\": \"{title}\", \
                 \"currentRetry\": 0, \"err\": {{}}}}]}}"
            )
        };
        let log = [
            // A test's printed JSON: Multi-SWE-bench raises KeyError 'stats'.
            "{\"a\": 1}".to_string(),
            report("first"),
            // ValueError: `int("x")`.
            report("x").replace("\"currentRetry\": 0", "\"currentRetry\": \"x\""),
            // AttributeError: an `err` that is a string.
            report("y").replace("\"err\": {}", "\"err\": \"s\""),
            report("last"),
        ]
        .join("\n");
        assert_eq!(
            map("mocha_json", &log),
            [
                entry("first", TestStatus::Passed),
                entry("last", TestStatus::Passed)
            ]
        );
        // A report cut short: its inner objects are no reports.
        let cut = report("cut");
        assert_eq!(map("mocha_json", &cut[..cut.len() - 1]), []);
        // A title that is a float is left out (Multi-SWE-bench writes `1.5`).
        assert_eq!(map("mocha_json", &report("x").replace("\"x\"", "1.5")), []);
    }

    #[test]
    fn jq_automake_lines() {
        let log = "PASS: tests/a\nFAIL: tests/b\nSKIP: tests/c\nXFAIL: tests/d\nERROR: tests/e\n\
                   # PASS:  2\nPASS: two words\n\u{1b}[0;32mPASS\u{1b}[m: tests/f\n";
        assert_eq!(
            map("msb_jq", log),
            [
                entry("tests/a", TestStatus::Passed),
                entry("tests/b", TestStatus::Failed),
                entry("tests/c", TestStatus::Skipped),
            ]
        );
    }

    #[test]
    fn fmt_ctest_lines() {
        let log = " 1/12 Test  #1: args-test ....   Passed    0.01 sec\n\
                   3/12 Test  #3: chrono-test ....***Failed    0.01 sec\n\
                   4/12 Test  #4: os-test ....***Failed\n\
                   5/12 Test  #5: a.b.c ....   Passed\n";
        assert_eq!(
            map("msb_fmt", log),
            [
                entry("a.b.c", TestStatus::Passed),
                entry("args-test", TestStatus::Passed),
                entry("os-test", TestStatus::Failed),
            ]
        );
    }

    #[test]
    fn catch2_lowercases_and_reads_cmake_checks() {
        let log = "-- Performing Test HAVE_FLAG__Wall\n-- Performing Test HAVE_FLAG__Wall - Success\n\
                   -- Performing Test HAVE_X - Failed\n-- Performing Test HAVE_Y - Skipped\n\
                   1/3 Test  #1: RunTests ....   Passed    0.01 sec\n\
                   2/3 Test  #2: Tag filtering: x ....***Failed  Required regular expression\n\
                   3/3 Test  #3: Not ....***Not Run   0.00 sec\n";
        assert_eq!(
            map("msb_catch2", log),
            [
                entry("have_flag__wall", TestStatus::Passed),
                entry("have_x", TestStatus::Failed),
                entry("have_y", TestStatus::Skipped),
                entry("runtests", TestStatus::Passed),
                entry("tag filtering: x", TestStatus::Failed),
            ]
        );
    }
}
