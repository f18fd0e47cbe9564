//! mocha's readers: its spec reporter's lines of every version ([`mocha`], vscode's
//! `parse_log`) and its JSON reporter ([`mocha_json`], express's `parse_json_log`), apart from
//! the line-rule parsers of [`super`] because they read by state and by JSON.

use std::sync::LazyLock;

use regex::Regex;

use super::{Set, Sets, py_regex, py_splitlines};
use crate::logparse::py_strip;

/// The patterns of [`mocha`], in the order it tries them.
struct MochaRules {
    colour: Regex,
    failed: [Regex; 3],
    skipped: Regex,
    passed: Regex,
}

static MOCHA: LazyLock<MochaRules> = LazyLock::new(|| MochaRules {
    colour: Regex::new(r"\x1b\[[0-9;]*m").expect("the colour pattern is valid"),
    failed: [
        r"^[\s]*✖\s+(.*?)(?:\s+\([\d\.]+\s*\w+\))?$",
        r#"^\s*\d+\)\s*\".*? hook for \"(.*?)\"$"#,
        r"^\s*\d+\)\s*(.+)$",
    ]
    .map(|p| py_regex(p, false)),
    skipped: py_regex(r"^\s*-\s+(.*)$", false),
    passed: py_regex(r"^[\s]*[✔✓]\s+(.*?)(?:\s+\([\d\.]+\s*\w+\))?$", false),
});

/// `mocha`: mocha's spec reporter of every version, `✓ title` (mocha 8 and older) and
/// `✔ title` (mocha 9 and later) passed, `N) title` failed, `- title` (pending) skipped, as
/// vscode reads its mocha run (`yarn test-node`): `typescript/microsoft/vscode.py`,
/// `vscode.parse_log`. nasa/openmct's and highcharts' methods are the same less the hook
/// pattern; axios's ([`AXIOS`]) reads only `✔` and no pending test.
///
/// Colours (`\x1b[…m`) are removed before the line is stripped. The failure patterns are tried
/// first, then the pending one, then the passing one, the first that matches deciding the
/// line; the name (stripped) of a failure leaves the passed and skipped sets, that of a
/// pending test the passed set unless it failed, and a passing name is added only if it is in
/// neither: the sets come out failed over skipped over passed, whatever the order of the
/// lines. A failing hook, `N) "before each" hook for "title"`, fails the test `title`;
/// `N) "after all" hook in "{root}"` is read whole. A trailing ` (120ms)` is cut from `✓`,
/// `✔` and `✖` lines, not from `N)` ones. Titles are bare (describe blocks are not part of them), so the failure
/// summary's `1) outer block` fails a test named `outer block`, and `- ` starts a skipped
/// test wherever it starts a line.
pub(super) fn mocha(log: &str) -> Sets {
    let mut sets = Sets::default();
    let name = |re: &Regex, line: &str| -> Option<String> {
        Some(py_strip(re.captures(line)?.get(1)?.as_str()).to_string())
    };
    for line in py_splitlines(log) {
        let uncoloured = MOCHA.colour.replace_all(line, "");
        let line = py_strip(&uncoloured);
        if line.is_empty() {
            continue;
        }
        if let Some(test) = MOCHA.failed.iter().find_map(|re| name(re, line)) {
            sets.passed.remove(&test);
            sets.skipped.remove(&test);
            sets.failed.insert(test);
        } else if let Some(test) = name(&MOCHA.skipped, line) {
            if !sets.failed.contains(&test) {
                sets.passed.remove(&test);
                sets.skipped.insert(test);
            }
        } else if let Some(test) = name(&MOCHA.passed, line)
            && !sets.failed.contains(&test)
            && !sets.skipped.contains(&test)
        {
            sets.passed.insert(test);
        }
    }
    sets
}

/// `mocha_json`: mocha's JSON reporter (`mocha --reporter json`), as express reads its
/// `npm run test-ci -- --reporter json`: `javascript/expressjs/express.py`,
/// `Express.parse_json_log`, which `Express.parse_log` calls for every pull request but 4212,
/// 4852, 5555 and 5841; those four it reads as spec output with axios's patterns
/// ([`AXIOS`], `msb_axios`), and the handler for pull requests 1909 to 3708
/// (`express_3708_to_1909.py`, `npm test -- --verbose`) reads spec output its own way.
///
/// The log is read as the harness reads its file (universal newlines); lines that are only
/// `=` or start with `Writing ` are removed (`re.sub(r"^(=+|Writing .*)$", "", …,
/// re.MULTILINE)`) and the rest joined without line ends, so that text before and after the
/// report (npm's `> pkg@1.0.0 test` lines, what the tests printed) is only text around it.
/// Then, from each `{` in turn, a JSON value is decoded (`JSONDecoder.raw_decode`): when one
/// is, the search goes on after it, else at the next character. Every object decoded that has
/// the shape of mocha's report, as the handler's `dataclasses_json` classes take it
/// ([`mocha_report`]), adds the `fullTitle` of each of its `passes`, `failures` and `pending`
/// to the passed, failed and skipped sets: a title is one test however many times it is
/// listed, in one report or several, and a test both failed and passed (or pending) is
/// failed, one pending and passed skipped, as the handler's last loops make it. A log with no
/// such object gives nothing.
///
/// Where Multi-SWE-bench raises, and no report of the run is made (an object that is not a
/// report: a test's printed JSON, the inner objects of a report cut short), the object is
/// skipped here, as [`jest`] skips a test line before any suite. JSON that Python's decoder
/// takes and serde_json does not (a lone surrogate `\ud800`, `NaN`, numbers beyond `f64`,
/// nesting deeper than 128) is not read; `JSON.stringify` writes the first only for a title
/// holding one, and none of the others.
pub(super) fn mocha_json(log: &str) -> Sets {
    let log = crate::logparse::universal_newlines(log);
    let text: String = log
        .split('\n')
        .filter(|line| {
            let rule = !line.is_empty() && line.chars().all(|c| c == '=');
            !rule && !line.starts_with("Writing ")
        })
        .collect();
    let mut sets = Sets::default();
    let mut pos = 0;
    while let Some(at) = text[pos..].find('{').map(|i| pos + i) {
        let mut values =
            serde_json::Deserializer::from_str(&text[at..]).into_iter::<serde_json::Value>();
        match values.next() {
            Some(Ok(value)) => {
                pos = at + values.byte_offset();
                if let Some(report) = mocha_report(&value) {
                    for (set, titles) in [Set::Passed, Set::Failed, Set::Skipped]
                        .into_iter()
                        .zip(report)
                    {
                        for title in titles {
                            sets.add(set, &title);
                        }
                    }
                }
            }
            // `{` is one byte: the next character starts after it.
            _ => pos = at + 1,
        }
    }
    sets
}

/// The titles of the `passes`, `failures` and `pending` of `value`, if it is mocha's JSON
/// report as express's `ExpressInfo.from_dict` (dataclasses_json 0.6) takes it without
/// raising: the keys `stats`, `tests`, `pending`, `failures` and `passes` (others are
/// ignored); `stats` null or an object with mocha's eight fields, its counts and `duration`
/// taken by Python's `int()`; `tests` null or a list of tests or nulls, the other three lists
/// of tests; a test an object with `title`, `fullTitle`, `currentRetry` (an `int()`) and `err`
/// (null or an object), `duration` null or an `int()` where it is there. `{}` and `""` are
/// empty lists to it (it iterates them). A `fullTitle` is named as Python's `str()` writes it;
/// one that is a float, a list or an object (never mocha's) is left out rather than written so.
fn mocha_report(value: &serde_json::Value) -> Option<[Vec<String>; 3]> {
    use serde_json::Value;
    let report = value.as_object()?;
    match report.get("stats")? {
        Value::Null => {}
        Value::Object(stats) => {
            for count in [
                "suites", "tests", "passes", "pending", "failures", "duration",
            ] {
                if !py_int(stats.get(count)?) {
                    return None;
                }
            }
            stats.get("start")?;
            stats.get("end")?;
        }
        _ => return None,
    }
    match report.get("tests")? {
        Value::Null => {}
        tests => {
            test_list(tests)?;
        }
    }
    let titles = |key: &str| -> Option<Vec<String>> {
        let tests = test_list(report.get(key)?)?;
        // `test.fullTitle` of a null item raises.
        if tests.iter().any(|t| t.is_null()) {
            return None;
        }
        Some(
            tests
                .iter()
                .filter_map(|t| py_str(t.get("fullTitle")?))
                .collect(),
        )
    };
    Some([titles("passes")?, titles("failures")?, titles("pending")?])
}

/// `list[ExpressTest]` decoded: its items (a null item stays null), or None where that
/// raises.
fn test_list(value: &serde_json::Value) -> Option<Vec<&serde_json::Value>> {
    use serde_json::Value;
    let express_test = |t: &Value| -> bool {
        let Some(t) = t.as_object() else {
            return t.is_null();
        };
        t.contains_key("title")
            && t.contains_key("fullTitle")
            && t.get("currentRetry").is_some_and(py_int)
            && t.get("err").is_some_and(|e| e.is_null() || e.is_object())
            && t.get("duration").is_none_or(py_int)
    };
    match value {
        Value::Array(items) => items
            .iter()
            .all(express_test)
            .then(|| items.iter().collect()),
        Value::Object(m) if m.is_empty() => Some(Vec::new()),
        Value::String(s) if s.is_empty() => Some(Vec::new()),
        _ => None,
    }
}

/// Whether an `int` field of the handler's dataclasses takes `value`: null (kept, with a
/// warning), a boolean or a number (`int(1.5)` is 1), or a string Python's `int()` reads
/// (`" 12 "`, `"+3"`, `"1_000"`, any decimal digits).
fn py_int(value: &serde_json::Value) -> bool {
    static INT: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"\A[+-]?\d+(?:_\d+)*\z").expect("the integer pattern is valid")
    });
    match value {
        serde_json::Value::String(s) => INT.is_match(py_strip(s)),
        serde_json::Value::Array(_) | serde_json::Value::Object(_) => false,
        _ => true,
    }
}

/// `f"{value}"` of a JSON string, null, boolean or integer; None for the others.
fn py_str(value: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Null => Some("None".into()),
        Value::Bool(b) => Some(if *b { "True" } else { "False" }.into()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}
