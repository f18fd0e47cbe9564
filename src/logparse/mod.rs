//! Test logs to test statuses: one parser per test framework, chosen by the name a manifest's
//! `log_parser` key gives (`docs/LOG-PARSERS.md`).
//!
//! The SWE-bench parsers (`pytest`, `pytest_options`, `pytest_v2`, `django`, `sympy`,
//! `matplotlib`, `seaborn`) re-implement, line for line in behaviour, the functions of
//! `swebench/harness/log_parsers/python.py` in the `swebench` package, version 4.1.0, named by
//! its `MAP_REPO_TO_PARSER`; the published FAIL_TO_PASS and PASS_TO_PASS lists were made with
//! them, so their quirks are kept. [`parse`] also does what the harness does around them
//! (`get_logs_eval` in `swebench/harness/grading.py`): the log is read as Python's text mode
//! reads a file (universal newlines), and a log holding the harness's `>>>>> Start Test Output`
//! and `>>>>> End Test Output` markers is parsed between them first. `junit_xml` is ours.
//!
//! The Multi-SWE-bench parsers ([`msb`]) re-implement the `parse_log` methods of
//! Multi-SWE-bench's repository handlers; they read the log whole, as its harness does. They
//! are named `msb_*` by repository, and `jest`, `mocha`, `mocha_json`, `vitest`, `tap`,
//! `cargo`, `ctest`, `googletest` and `automake` by runner, for a repository Multi-SWE-bench
//! does not have.

mod django;
pub mod handler;
mod junit;
pub mod msb;
mod pytest;
mod seaborn;
mod sympy;

use std::borrow::Cow;
use std::collections::BTreeMap;

/// A test's outcome: SWE-bench's `TestStatus` values (`swebench/harness/constants/__init__.py`),
/// serialized as they are there (`PASSED`, `FAILED`, `SKIPPED`, `ERROR`, `XFAIL`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "UPPERCASE")]
pub enum TestStatus {
    Passed,
    Failed,
    Skipped,
    Error,
    Xfail,
}

/// Test id → status.
pub type StatusMap = BTreeMap<String, TestStatus>;

#[derive(Debug, thiserror::Error)]
pub enum LogParseError {
    #[error("unknown log parser `{name}`; known: {}", .known.join(", "))]
    Unknown { name: String, known: Vec<String> },
    /// The `junit_xml` parser's input is not a JUnit XML report.
    #[error("not a readable JUnit XML report: {problem}")]
    BadJunitXml { problem: String },
    /// A Multi-SWE-bench handler's own `parse_log` ([`handler`]) did not give its sets.
    #[error("the handler parser {class}.parse_log failed: {detail}")]
    Handler { class: String, detail: String },
}

/// Which SWE-bench release's rules a log is read and graded by: the parsers differ in a few
/// readings, the grading in several rules (docs/GRADING.md).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub enum Grading {
    /// swebench 5.0.2 (`swebench/harness/grading.py`, `log_parsers/python.py` of August 2026).
    #[default]
    #[serde(rename = "swebench-5")]
    Swebench5,
    /// swebench 4.1.0: the rules under which most published leaderboard results were made.
    #[serde(rename = "swebench-4")]
    Swebench4,
}

impl Grading {
    /// Every value, in the order `--grading` lists them.
    pub const ALL: [Grading; 2] = [Grading::Swebench5, Grading::Swebench4];

    /// The name `--grading` takes and reports carry.
    pub fn name(self) -> &'static str {
        match self {
            Grading::Swebench5 => "swebench-5",
            Grading::Swebench4 => "swebench-4",
        }
    }

    /// The release of the `swebench` package whose rules these are.
    pub fn release(self) -> &'static str {
        match self {
            Grading::Swebench5 => "swebench 5.0.2",
            Grading::Swebench4 => "swebench 4.1.0",
        }
    }
}

impl std::fmt::Display for Grading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is none of [`Grading::ALL`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown grading `{name}`; known: {}", Grading::ALL.map(Grading::name).join(", "))]
pub struct UnknownGrading {
    pub name: String,
}

impl std::str::FromStr for Grading {
    type Err = UnknownGrading;
    fn from_str(s: &str) -> Result<Self, UnknownGrading> {
        Grading::ALL
            .into_iter()
            .find(|g| g.name() == s)
            .ok_or_else(|| UnknownGrading {
                name: s.to_string(),
            })
    }
}

/// swebench 5's `PARSER_REGISTRY` names of the Python repositories' parsers (what a version-5
/// dataset row's `log_parser` holds), each with the parser it is.
const REGISTRY: [(&str, &str); 20] = [
    ("parse_log_pytest", "pytest"),
    ("parse_log_pytest_options", "pytest_options"),
    ("parse_log_django", "django"),
    ("parse_log_pytest_v2", "pytest_v2"),
    ("parse_log_seaborn", "seaborn"),
    ("parse_log_sympy", "sympy"),
    ("parse_log_matplotlib", "matplotlib"),
    ("parse_log_astroid", "pytest"),
    ("parse_log_flask", "pytest"),
    ("parse_log_marshmallow", "pytest"),
    ("parse_log_pvlib", "pytest"),
    ("parse_log_pyvista", "pytest"),
    ("parse_log_sqlfluff", "pytest"),
    ("parse_log_xarray", "pytest"),
    ("parse_log_pydicom", "pytest_options"),
    ("parse_log_requests", "pytest_options"),
    ("parse_log_pylint", "pytest_options"),
    ("parse_log_astropy", "pytest_v2"),
    ("parse_log_scikit", "pytest_v2"),
    ("parse_log_sphinx", "pytest_v2"),
];

/// The parser a name stands for: one of [`known_parsers`] (a runner name standing for an
/// `msb_*` parser is that parser: `cargo` is `msb_cargo`), or a swebench 5 registry name
/// (`parse_log_requests` is `pytest_options`). None for any other name.
pub fn canonical_parser(name: &str) -> Option<&'static str> {
    if let Some(parser) = msb::runner_parser(name) {
        return Some(parser);
    }
    if let Some(known) = known_parsers().iter().find(|k| **k == name) {
        return Some(known);
    }
    REGISTRY.iter().find(|(n, _)| *n == name).map(|(_, p)| *p)
}

/// The swebench 5 registry names [`parse`] also accepts.
pub fn registry_names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|(n, _)| *n)
}

/// Every name [`parse`] accepts: [`known_parsers`], then [`registry_names`].
pub fn parser_names() -> impl Iterator<Item = &'static str> {
    known_parsers().iter().copied().chain(registry_names())
}

/// The names [`parse`] accepts besides [`registry_names`]: the parsers, and the test runners'
/// names a manifest of a repository Multi-SWE-bench does not have can give (`jest`, `ctest`,
/// `mocha` for mocha's spec output of any version, `mocha_json` for `mocha --reporter json`,
/// …; [`msb`]).
pub fn known_parsers() -> &'static [&'static str] {
    &[
        "automake",
        "cargo",
        "ctest",
        "django",
        "googletest",
        "jest",
        "junit_xml",
        "matplotlib",
        "mocha",
        "mocha_json",
        "msb_axios",
        "msb_cargo",
        "msb_catch2",
        "msb_darkreader",
        "msb_dayjs",
        "msb_fmt",
        "msb_jq",
        "pytest",
        "pytest_options",
        "pytest_v2",
        "seaborn",
        "sympy",
        "tap",
        "vitest",
    ]
}

/// The statuses the parser named `parser` ([`canonical_parser`]) reads in `log` as the
/// release `grading` names reads them (for `junit_xml`, the report's text). The Multi-SWE-bench
/// parsers have one reading, whatever `grading` says.
pub fn parse(parser: &str, log: &str, grading: Grading) -> Result<StatusMap, LogParseError> {
    parse_for(parser, log, grading, "")
}

/// Whether `name` names a parser [`parse`] runs: one [`canonical_parser`] knows, or a
/// handler's own method ([`handler`]).
pub fn is_known(name: &str) -> bool {
    canonical_parser(name).is_some() || handler::split(name).is_some()
}

/// [`parse`] of the log of `instance_id`: a handler's own method ([`handler`]) sees its pull
/// request's number, as Multi-SWE-bench's does (some read a log by it); the other parsers
/// read every instance's log alike.
pub fn parse_for(
    parser: &str,
    log: &str,
    grading: Grading,
    instance_id: &str,
) -> Result<StatusMap, LogParseError> {
    if let Some((class, code)) = handler::split(parser) {
        return handler::parse(class, code, log, instance_id);
    }
    let v5 = grading == Grading::Swebench5;
    let canonical = canonical_parser(parser);
    if let Some(map) = canonical.and_then(|name| msb::parse(name, log)) {
        return Ok(map);
    }
    let text_parser: fn(&str, bool) -> Collector = match canonical {
        Some("pytest") => pytest::parse_pytest,
        Some("pytest_options") => pytest::parse_pytest_options,
        Some("pytest_v2") => pytest::parse_pytest_v2,
        Some("matplotlib") => pytest::parse_matplotlib,
        Some("seaborn") => |log, _| seaborn::parse(log),
        Some("django") => |log, _| django::parse(log),
        Some("sympy") => |log, _| sympy::parse(log),
        Some("junit_xml") => return junit::parse(log),
        _ => {
            return Err(LogParseError::Unknown {
                name: parser.to_string(),
                known: parser_names().map(str::to_string).collect(),
            });
        }
    };
    Ok(harness_parse(|log| text_parser(log, v5), log))
}

/// `log` without its terminal escape sequences (colours, bold, cursor moves): a runner that
/// colours its output (pytest under tox, `--color=yes`) starts a failure's header or an `E`
/// line with one. For reading a log for names and reasons; the parsers read results as the
/// harness whose readings they keep does (SWE-bench's `pytest_v2` removes colours itself,
/// its `pytest` does not).
pub fn uncoloured(log: &str) -> Cow<'_, str> {
    console::strip_ansi_codes(log)
}

/// The harness's `START_TEST_OUTPUT` (`swebench/harness/constants/__init__.py`).
const START_TEST_OUTPUT: &str = ">>>>> Start Test Output";
/// The harness's `END_TEST_OUTPUT`.
const END_TEST_OUTPUT: &str = ">>>>> End Test Output";

/// `get_logs_eval` (`swebench/harness/grading.py`) once its log was found good: the text
/// between the markers when the log has both, and the whole log if that part gives nothing.
/// Its refusals (a log naming a failed patch, a reset failure, an error or a timeout) are the
/// caller's business, not parsing.
fn harness_parse(text_parser: impl Fn(&str) -> Collector, log: &str) -> StatusMap {
    let log = universal_newlines(log);
    if log.contains(START_TEST_OUTPUT) && log.contains(END_TEST_OUTPUT) {
        // `content.split(START)[1].split(END)[0]`: after the first start marker, up to the
        // next start marker, then up to the first end marker in that.
        let after = log.split(START_TEST_OUTPUT).nth(1).unwrap_or_default();
        let section = after.split(END_TEST_OUTPUT).next().unwrap_or_default();
        let found = text_parser(section);
        if found.wrote {
            return found.map;
        }
    }
    text_parser(&log).map
}

/// A status map as SWE-bench's parsers fill theirs.
#[derive(Debug, Default)]
struct Collector {
    map: StatusMap,
    /// Whether SWE-bench's dict would have any entry (an id whose word was not a status
    /// too): the harness reads the whole log only when the part between markers gave none.
    wrote: bool,
}

impl Collector {
    fn set(&mut self, id: String, status: TestStatus) {
        self.wrote = true;
        self.map.insert(id, status);
    }

    /// `map[id] = word`. SWE-bench stores whatever word stood where the status was expected
    /// (`ERROR:` from `ERROR: file not found`, `b]` from `test[a b] PASSED`), and its grading
    /// counts such a test as neither passed nor failed. A [`StatusMap`] cannot hold the word:
    /// the id is removed instead, so that no earlier status of it survives.
    fn set_word(&mut self, id: String, word: &str) {
        self.wrote = true;
        match status_word(word) {
            Some(status) => {
                self.map.insert(id, status);
            }
            None => {
                self.map.remove(&id);
            }
        }
    }
}

/// Python's text mode with universal newlines (how the harness's `open(log_fp)` reads a log):
/// `\r\n` and a lone `\r` become `\n`.
fn universal_newlines(log: &str) -> Cow<'_, str> {
    if !log.contains('\r') {
        return Cow::Borrowed(log);
    }
    Cow::Owned(log.replace("\r\n", "\n").replace('\r', "\n"))
}

/// Python's `str.isspace()` (also what `str.split()`, `str.strip()` and `\s` in `re` use):
/// Unicode's White_Space characters and the separators U+001C to U+001F, which Rust's
/// [`char::is_whitespace`] leaves out.
fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `s.split()`: the runs of non-whitespace.
fn py_split(s: &str) -> impl Iterator<Item = &str> {
    s.split(is_py_space).filter(|t| !t.is_empty())
}

/// Python's `s.strip()`.
fn py_strip(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

/// The status a word names, if it is exactly one of SWE-bench's values.
fn status_word(word: &str) -> Option<TestStatus> {
    Some(match word {
        "PASSED" => TestStatus::Passed,
        "FAILED" => TestStatus::Failed,
        "SKIPPED" => TestStatus::Skipped,
        "ERROR" => TestStatus::Error,
        "XFAIL" => TestStatus::Xfail,
        _ => return None,
    })
}

/// SWE-bench's `TestStatus` values in its declaration order, for `startswith`/`endswith`.
const STATUS_WORDS: [&str; 5] = ["FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_parser_names_the_known_ones() {
        let err = parse("nose", "", Grading::Swebench5).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with(
                "unknown log parser `nose`; known: automake, cargo, ctest, django, googletest, \
                 jest, junit_xml, matplotlib, mocha, mocha_json, msb_axios"
            ),
            "{msg}"
        );
        assert!(matches!(err, LogParseError::Unknown { ref name, .. } if name == "nose"));
    }

    #[test]
    fn gradings_by_name_and_an_unknown_one_named_with_the_known_ones() {
        for g in Grading::ALL {
            assert_eq!(g.name().parse::<Grading>(), Ok(g));
        }
        let err = "swebench-3".parse::<Grading>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown grading `swebench-3`; known: swebench-5, swebench-4"
        );
    }

    #[test]
    fn every_known_parser_parses() {
        for name in known_parsers() {
            let log = if *name == "junit_xml" {
                "<testsuites/>"
            } else {
                ""
            };
            assert_eq!(
                parse(name, log, Grading::Swebench5).unwrap(),
                StatusMap::new(),
                "{name}"
            );
        }
    }

    #[test]
    fn statuses_serialize_as_swebench_writes_them() {
        let all = [
            TestStatus::Passed,
            TestStatus::Failed,
            TestStatus::Skipped,
            TestStatus::Error,
            TestStatus::Xfail,
        ];
        let json = serde_json::to_string(&all).unwrap();
        assert_eq!(json, r#"["PASSED","FAILED","SKIPPED","ERROR","XFAIL"]"#);
        for (word, status) in STATUS_WORDS.iter().zip([
            TestStatus::Failed,
            TestStatus::Passed,
            TestStatus::Skipped,
            TestStatus::Error,
            TestStatus::Xfail,
        ]) {
            assert_eq!(status_word(word), Some(status));
        }
        assert_eq!(status_word("XPASS"), None);
        assert_eq!(status_word("ERROR:"), None);
    }

    #[test]
    fn markers_select_the_test_output_and_fall_back_to_the_whole_log() {
        let log = "PASSED before\n+ : '>>>>> Start Test Output'\nPASSED inside\n\
                   + : '>>>>> End Test Output'\nPASSED after\n";
        let map = parse("pytest", log, Grading::Swebench5).unwrap();
        assert_eq!(map.keys().collect::<Vec<_>>(), ["inside"]);
        // Nothing between the markers: the whole log is read.
        let log = "PASSED before\n>>>>> Start Test Output\n>>>>> End Test Output\nPASSED after\n";
        let map = parse("pytest", log, Grading::Swebench5).unwrap();
        assert_eq!(map.keys().collect::<Vec<_>>(), ["after", "before"]);
        // Only one marker: the whole log.
        let map = parse(
            "pytest",
            "PASSED a\n>>>>> Start Test Output\nPASSED b\n",
            Grading::Swebench5,
        )
        .unwrap();
        assert_eq!(map.len(), 2);
    }

    #[test]
    fn carriage_returns_end_lines_as_python_reads_them() {
        // A progress line rewritten with `\r` is two lines to the harness.
        let map = parse(
            "pytest",
            "collecting ...\rPASSED a.py::t\r\nFAILED b.py::u - x\r\n",
            Grading::Swebench5,
        )
        .unwrap();
        assert_eq!(map.get("a.py::t"), Some(&TestStatus::Passed));
        assert_eq!(map.get("b.py::u"), Some(&TestStatus::Failed));
    }

    #[test]
    fn python_whitespace() {
        assert_eq!(
            py_split(" a\u{1f}b\u{a0}c\t ").collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert_eq!(py_strip("\u{1c} x \u{3000}"), "x");
    }
}
