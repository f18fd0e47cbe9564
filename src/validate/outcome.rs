//! From parsed logs to a verdict: FAIL_TO_PASS, PASS_TO_PASS, XFAIL and flaky tests, the
//! "tests could not run" rule, and the comparison with a published instance's lists. Pure
//! functions: everything here is decided from the status maps and the log text.

use std::collections::{BTreeMap, BTreeSet};

use crate::logparse::{StatusMap, TestStatus, uncoloured};

/// What the runs showed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Lists {
    /// Not passing before the gold patch (failed, error, or absent), PASSED in every run after.
    pub fail_to_pass: Vec<String>,
    /// PASSED before and in every run after.
    pub pass_to_pass: Vec<String>,
    /// XFAIL after the gold patch: left out of both lists, as the published datasets do.
    pub xfail: Vec<String>,
    /// Tests whose status was not the same in every run after the gold patch, with the
    /// statuses seen (a missing status is `null`): left out of both lists.
    pub flaky: BTreeMap<String, Vec<Option<TestStatus>>>,
}

/// FAIL_TO_PASS, PASS_TO_PASS, XFAIL and flaky tests from the run before the gold patch and
/// the runs after it.
pub fn lists(pre: &StatusMap, posts: &[StatusMap]) -> Lists {
    let mut out = Lists::default();
    let all: BTreeSet<&String> = posts.iter().flat_map(|m| m.keys()).collect();
    for test in all {
        let statuses: Vec<Option<TestStatus>> =
            posts.iter().map(|m| m.get(test).copied()).collect();
        let first = statuses[0];
        if statuses.iter().any(|s| *s != first) {
            out.flaky.insert(test.clone(), statuses);
            continue;
        }
        match first {
            Some(TestStatus::Passed) => match pre.get(test) {
                Some(TestStatus::Passed) => out.pass_to_pass.push(test.clone()),
                // Skipped before and passing after is neither list, as in SWE-bench.
                Some(TestStatus::Skipped) | Some(TestStatus::Xfail) => {}
                Some(TestStatus::Failed) | Some(TestStatus::Error) | None => {
                    out.fail_to_pass.push(test.clone())
                }
            },
            Some(TestStatus::Xfail) => out.xfail.push(test.clone()),
            _ => {}
        }
    }
    out
}

/// Why the tests before the gold patch did not run, if they did not: the SWE-bench paper
/// discards an instance whose pre-patch log shows an ImportError or AttributeError. Taken
/// literally (SWE-bench's `has_attribute_or_import_error` looks for the words anywhere), that
/// also discards every instance whose new test fails with an AttributeError, as most do; here
/// it applies when the error stopped the run: no test result at all, or a test file the
/// command was given (`directives`) reported as an error itself, which is how pytest reports a
/// file it could not collect (`ERROR tests/test_x.py - ImportError: …`). The words in the log
/// alone do not count: a test suite that tests a test runner (pytest's own) prints them in
/// the output of the runs it makes.
pub fn stopped_by_import_error(
    pre_log: &str,
    pre: &StatusMap,
    directives: &[String],
) -> Option<String> {
    let file_failed = pre
        .iter()
        .any(|(test, status)| *status == TestStatus::Error && directives.contains(test));
    if !pre.is_empty() && !file_failed {
        return None;
    }
    let log = uncoloured(pre_log);
    let error = |l: &&str| {
        l.contains("ImportError")
            || l.contains("AttributeError")
            || l.contains("ModuleNotFoundError")
    };
    // pytest's own `E` line says what could not be imported; its header only that something
    // could not.
    log.lines()
        .filter(error)
        .find(|l| l.starts_with("E "))
        .or_else(|| log.lines().find(error))
        .map(|l| l.trim().to_string())
}

/// How computed lists differ from published ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Differences {
    pub fail_to_pass_extra: Vec<String>,
    pub fail_to_pass_missing: Vec<String>,
    pub pass_to_pass_extra: Vec<String>,
    pub pass_to_pass_missing: Vec<String>,
    /// Missing tests whose failure here shows they needed the network (a name that did not
    /// resolve, a network that could not be reached), with the line that shows it: what no
    /// loopback service stood in for.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub needs_network: BTreeMap<String, String>,
    /// Missing tests that need what the environment here cannot have (a package only conda
    /// provides), each with the sentence that says so: `needs cdms2, which only conda
    /// provides: …`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub needs_unavailable: BTreeMap<String, String>,
}

impl Differences {
    pub fn is_empty(&self) -> bool {
        self.fail_to_pass_extra.is_empty()
            && self.fail_to_pass_missing.is_empty()
            && self.pass_to_pass_extra.is_empty()
            && self.pass_to_pass_missing.is_empty()
    }

    /// Every published test came out as published, and more tests pass both before and after
    /// than the published PASS_TO_PASS names: a list known to be incomplete (a result line the
    /// published run's log broke, a test its environment skipped). Evaluation judges the
    /// published lists, which this run proves; the extra tests are recorded, not added.
    pub fn covers_published(&self) -> bool {
        !self.pass_to_pass_extra.is_empty()
            && self.fail_to_pass_extra.is_empty()
            && self.fail_to_pass_missing.is_empty()
            && self.pass_to_pass_missing.is_empty()
    }

    /// The published tests that cannot run here (they need the network, or what only conda
    /// provides), each with why, when they explain every difference but extra PASS_TO_PASS
    /// tests (no FAIL_TO_PASS test extra, every missing test among them); empty otherwise.
    pub fn cannot_run(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for (test, line) in &self.needs_network {
            out.insert(test.clone(), format!("needs the network: {line}"));
        }
        for (test, why) in &self.needs_unavailable {
            out.insert(test.clone(), why.clone());
        }
        let explained = self.fail_to_pass_extra.is_empty()
            && self
                .fail_to_pass_missing
                .iter()
                .chain(&self.pass_to_pass_missing)
                .all(|t| out.contains_key(t));
        if !explained {
            out.clear();
        }
        out
    }

    /// One sentence naming the tests (at most a few of each kind).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for (what, list) in [
            ("FAIL_TO_PASS lacks", &self.fail_to_pass_missing),
            ("FAIL_TO_PASS has extra", &self.fail_to_pass_extra),
            ("PASS_TO_PASS lacks", &self.pass_to_pass_missing),
            ("PASS_TO_PASS has extra", &self.pass_to_pass_extra),
        ] {
            if list.is_empty() {
                continue;
            }
            let shown: Vec<&str> = list.iter().take(5).map(String::as_str).collect();
            let more = if list.len() > 5 {
                format!(" and {} more", list.len() - 5)
            } else {
                String::new()
            };
            parts.push(format!(
                "{what} {} ({}{more})",
                list.len(),
                shown.join(", ")
            ));
        }
        parts.join("; ")
    }
}

/// What a failure says when the network was needed and is cut: a name lookup that failed, a
/// network that cannot be reached.
const NETWORK_SIGNS: &[&str] = &[
    "Temporary failure in name resolution",
    "Name or service not known",
    "nodename nor servname provided",
    "No address associated with hostname",
    "NameResolutionError",
    "Failed to resolve",
    "Network is unreachable",
    "No route to host",
];

/// The failures of a pytest log (`-rA`) that show the network was needed, by the title of the
/// failure's section (`Class.test_name`, `test_name[param]`): the last `E` line (or any line)
/// of the section with a sign of it.
pub fn network_failures(log: &str) -> BTreeMap<String, String> {
    failure_lines(log, &|l| NETWORK_SIGNS.iter().any(|s| l.contains(s)))
}

/// The failures of a pytest log (`-rA`) by the title of their section, each with the last `E`
/// line (or any line) of the section that `sign` holds for. Read without colours: under tox,
/// pytest starts each section's header with an escape sequence.
fn failure_lines(log: &str, sign: &dyn Fn(&str) -> bool) -> BTreeMap<String, String> {
    let log = uncoloured(log);
    let mut out = BTreeMap::new();
    let mut section: Option<String> = None;
    let mut found: Option<String> = None;
    let mut close = |section: &mut Option<String>, found: &mut Option<String>| {
        if let (Some(t), Some(l)) = (section.take(), found.take()) {
            out.insert(t, l);
        }
    };
    for line in log.lines() {
        let l = line.trim_end();
        if l.starts_with("___") && l.ends_with("___") {
            close(&mut section, &mut found);
            let title = l.trim_matches('_').trim();
            let title = title
                .strip_prefix("ERROR at setup of ")
                .or_else(|| title.strip_prefix("ERROR at teardown of "))
                .unwrap_or(title);
            section = Some(title.to_string());
        } else if l.starts_with("====") {
            close(&mut section, &mut found);
        } else if section.is_some() && sign(l) {
            let is_e = l.starts_with("E ");
            if is_e || found.as_deref().is_none_or(|f| !f.starts_with("E ")) {
                found = Some(l.split_whitespace().collect::<Vec<_>>().join(" "));
            }
        }
    }
    close(&mut section, &mut found);
    out
}

/// pytest's title of a test's failure section: `file.py::Class::test` is `Class.test`.
fn section_title(test: &str) -> String {
    test.split_once("::")
        .map_or(test, |(_, t)| t)
        .replace("::", ".")
}

/// The missing published tests of `d` whose failure in `logs` shows the network was needed.
pub fn needing_network(d: &Differences, logs: &[&str]) -> BTreeMap<String, String> {
    let failures: Vec<BTreeMap<String, String>> =
        logs.iter().map(|l| network_failures(l)).collect();
    let mut out = BTreeMap::new();
    for test in d.fail_to_pass_missing.iter().chain(&d.pass_to_pass_missing) {
        let title = section_title(test);
        if let Some(line) = failures.iter().find_map(|f| f.get(&title)) {
            out.insert(test.clone(), line.clone());
        }
    }
    out
}

/// Whether `name` is in `text` as a word of its own (`cdms2` in `test_to_and_from_cdms2_x`
/// and `requires cdms2`, not in `cdms22`), ASCII case aside.
fn names(text: &str, name: &str) -> bool {
    let (text, name) = (text.to_ascii_lowercase(), name.to_ascii_lowercase());
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    text.match_indices(&name).any(|(i, _)| {
        !word(text[..i].chars().next_back()) && !word(text[i + name.len()..].chars().next())
    })
}

/// The missing published tests of `d` that need a package of `unavailable` (its name, the rest
/// of the sentence): the test's id names it (`test_to_and_from_cdms2_classic`), a line of the
/// logs names it and the test's file (pytest's `SKIPPED [1] file.py:12: requires cdms2`), or
/// the test's failure names it (`No module named 'cdms2'`).
pub fn needing_unavailable(
    d: &Differences,
    unavailable: &[(String, String)],
    logs: &[&str],
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if unavailable.is_empty() {
        return out;
    }
    let plain: Vec<_> = logs.iter().map(|l| uncoloured(l)).collect();
    for (name, why) in unavailable {
        let failures: Vec<BTreeMap<String, String>> = plain
            .iter()
            .map(|l| failure_lines(l, &|line| names(line, name)))
            .collect();
        for test in d.fail_to_pass_missing.iter().chain(&d.pass_to_pass_missing) {
            if out.contains_key(test) {
                continue;
            }
            let file = test.split("::").next().unwrap_or(test);
            let title = section_title(test);
            let shown = names(test, name)
                || failures.iter().any(|f| f.contains_key(&title))
                || plain.iter().any(|log| {
                    log.lines()
                        .any(|l| l.contains(file) && l.contains("SKIP") && names(l, name))
                });
            if shown {
                out.insert(test.clone(), format!("needs {name}, {why}"));
            }
        }
    }
    out
}

/// Why a published instance is not reproducible: the tests of each difference, and, when the
/// tests ran against services standing in for hosts of the internet, that they did — a
/// published result that came from the real hosts' behaviour at the time (their answers, their
/// failures) may not come out against a stand-in.
pub fn difference_reason(d: &Differences, services: &[String]) -> String {
    let mut reason = d.describe();
    // One clause per package: `2 of them need cdms2, which only conda provides: …`.
    let mut by_need: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (test, need) in &d.needs_unavailable {
        by_need.entry(need).or_default().push(test);
    }
    for (need, tests) in by_need {
        let verb = need.strip_prefix("needs ").unwrap_or(need);
        reason.push_str(&format!(
            "; {} of them ({}{}) {} {verb}",
            tests.len(),
            tests.iter().take(3).copied().collect::<Vec<_>>().join(", "),
            if tests.len() > 3 {
                format!(" and {} more", tests.len() - 3)
            } else {
                String::new()
            },
            if tests.len() == 1 { "needs" } else { "need" },
        ));
    }
    if !d.needs_network.is_empty() {
        let shown: Vec<String> = d
            .needs_network
            .iter()
            .take(3)
            .map(|(test, line)| format!("{test} ({line})"))
            .collect();
        let more = d.needs_network.len().saturating_sub(3);
        reason.push_str(&format!(
            "; {} of them needed the network, which is cut here and which no service stood in \
             for: {}{}",
            d.needs_network.len(),
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    if !services.is_empty() {
        reason.push_str(&format!(
            "; the tests ran against {} service{} on loopback, not the network: {}",
            services.len(),
            if services.len() == 1 { "" } else { "s" },
            services.join("; ")
        ));
    }
    reason
}

fn diff(computed: &[String], published: &[String]) -> (Vec<String>, Vec<String>) {
    let c: BTreeSet<&String> = computed.iter().collect();
    let p: BTreeSet<&String> = published.iter().collect();
    (
        c.difference(&p).map(|s| s.to_string()).collect(),
        p.difference(&c).map(|s| s.to_string()).collect(),
    )
}

pub fn compare(lists: &Lists, published_f2p: &[String], published_p2p: &[String]) -> Differences {
    let (fail_to_pass_extra, fail_to_pass_missing) = diff(&lists.fail_to_pass, published_f2p);
    let (pass_to_pass_extra, pass_to_pass_missing) = diff(&lists.pass_to_pass, published_p2p);
    Differences {
        fail_to_pass_extra,
        fail_to_pass_missing,
        pass_to_pass_extra,
        pass_to_pass_missing,
        needs_network: BTreeMap::new(),
        needs_unavailable: BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TestStatus::*;

    fn map(pairs: &[(&str, TestStatus)]) -> StatusMap {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn lists_follow_the_rules() {
        let pre = map(&[
            ("a", Failed),
            ("b", Passed),
            ("c", Passed),
            ("d", Skipped),
            ("e", Error),
        ]);
        let post1 = map(&[
            ("a", Passed),
            ("b", Passed),
            ("c", Passed),
            ("d", Passed),
            ("e", Passed),
            ("new", Passed),
            ("x", Xfail),
            ("flaky", Passed),
        ]);
        let mut post2 = post1.clone();
        post2.insert("flaky".into(), Failed);
        let l = lists(&pre, &[post1.clone(), post2]);
        assert_eq!(l.fail_to_pass, vec!["a", "e", "new"]);
        assert_eq!(l.pass_to_pass, vec!["b", "c"]);
        assert_eq!(l.xfail, vec!["x"]);
        assert_eq!(
            l.flaky.get("flaky"),
            Some(&vec![Some(Passed), Some(Failed)])
        );
        let d = compare(&l, &["a".into(), "zzz".into()], &["b".into(), "c".into()]);
        assert_eq!(d.fail_to_pass_extra, vec!["e", "new"]);
        assert_eq!(d.fail_to_pass_missing, vec!["zzz"]);
        assert!(d.pass_to_pass_extra.is_empty() && d.pass_to_pass_missing.is_empty());
        assert!(
            d.describe().contains("FAIL_TO_PASS lacks 1 (zzz)"),
            "{}",
            d.describe()
        );
        assert!(!d.covers_published(), "F2P differs: not a cover");
        let more = compare(&l, &["a".into(), "e".into(), "new".into()], &["b".into()]);
        assert!(more.covers_published(), "{more:?}");
        assert_eq!(more.pass_to_pass_extra, vec!["c"]);
        let fewer = compare(
            &l,
            &["a".into(), "e".into(), "new".into()],
            &["b".into(), "d".into()],
        );
        assert!(
            !fewer.covers_published(),
            "a published test missing is no cover"
        );
        let why = difference_reason(&d, &["httpbin, standing in for httpbin.org, …".into()]);
        assert!(
            why.starts_with(&d.describe())
                && why.contains("ran against 1 service on loopback")
                && why.contains("standing in for httpbin.org"),
            "{why}"
        );
        assert_eq!(difference_reason(&d, &[]), d.describe());
    }

    #[test]
    fn failures_that_needed_the_network_are_named() {
        let log = "\
=================================== FAILURES ===================================
_________ RequestsTestCase.test_auth_is_stripped_on_redirect_off_host __________

    def test_auth_is_stripped_on_redirect_off_host(self):
E       socket.gaierror: [Errno -3] Temporary failure in name resolution
During handling of the above exception, another exception occurred:
E           requests.exceptions.ConnectionError: ('Connection aborted.', gaierror(-3, 'Temporary failure in name resolution'))
________________ RequestsTestCase.test_conflicting_post_params _________________
E           TypeError: 'requests.post(url)' object (type: <class 'str'>) must be callable
___________________ ERROR at setup of test_remote[example] ____________________
E   urllib.error.URLError: <urlopen error [Errno -2] Name or service not known>
=========================== short test summary info ============================
FAILED test_requests.py::RequestsTestCase::test_auth_is_stripped_on_redirect_off_host
";
        let found = network_failures(log);
        assert_eq!(
            found.keys().collect::<Vec<_>>(),
            vec![
                "RequestsTestCase.test_auth_is_stripped_on_redirect_off_host",
                "test_remote[example]"
            ]
        );
        assert!(
            found["RequestsTestCase.test_auth_is_stripped_on_redirect_off_host"]
                .starts_with("E requests.exceptions.ConnectionError")
        );
        let mut d = Differences {
            pass_to_pass_missing: vec![
                "test_requests.py::RequestsTestCase::test_auth_is_stripped_on_redirect_off_host"
                    .into(),
                "test_requests.py::RequestsTestCase::test_conflicting_post_params".into(),
            ],
            ..Differences::default()
        };
        d.needs_network = needing_network(&d, &["", log]);
        assert_eq!(d.needs_network.len(), 1, "{:?}", d.needs_network);
        let why = difference_reason(&d, &[]);
        assert!(
            why.contains("1 of them needed the network, which is cut here")
                && why.contains("test_auth_is_stripped_on_redirect_off_host (E requests.")
                && !why.contains("test_conflicting_post_params ("),
            "{why}"
        );
    }

    #[test]
    fn failures_are_read_in_coloured_output_too() {
        // pytest under tox with colour: each header and `E` line starts with an escape.
        let log = "\
\x1b[31m\x1b[1m=================================== FAILURES ===================================\x1b[0m
\x1b[31m\x1b[1m________________________________ test_defaults _________________________________\x1b[0m
\x1b[1m\x1b[31mE       requests.exceptions.ConnectionError: HTTPSConnectionPool(host='www.google.com', port=443): Max retries exceeded (Caused by NameResolutionError: Failed to resolve 'www.google.com' ([Errno -3] Temporary failure in name resolution))\x1b[0m
\x1b[31m\x1b[1m___________________________ test_anchors_ignored ____________________________\x1b[0m
\x1b[1m\x1b[31mE       assert 1 == 0\x1b[0m
\x1b[31m=========================== short test summary info ============================\x1b[0m
";
        let found = network_failures(log);
        assert_eq!(found.keys().collect::<Vec<_>>(), vec!["test_defaults"]);
        assert!(
            found["test_defaults"].starts_with("E requests.exceptions.ConnectionError")
                && !found["test_defaults"].contains('\x1b'),
            "{found:?}"
        );
        let mut d = Differences {
            pass_to_pass_missing: vec!["tests/test_build_linkcheck.py::test_defaults".into()],
            ..Differences::default()
        };
        d.needs_network = needing_network(&d, &[log]);
        assert!(
            difference_reason(&d, &[]).contains("1 of them needed the network"),
            "{d:?}"
        );
        let pre = "\x1b[31mERROR\x1b[0m tests/test_x.py\n\x1b[1m\x1b[31mE   ImportError: \
                   cannot import name 'IS_PYPY'\x1b[0m\n";
        assert_eq!(
            stopped_by_import_error(pre, &StatusMap::new(), &[]).as_deref(),
            Some("E   ImportError: cannot import name 'IS_PYPY'")
        );
    }

    #[test]
    fn an_import_error_matters_only_when_it_stopped_the_run() {
        let files = ["tests/test_x.py".to_string()];
        let ran = map(&[("tests/test_x.py::t", Failed)]);
        let log = "E   AttributeError: module has no attribute 'new_thing'\nFAILED t";
        assert_eq!(stopped_by_import_error(log, &ran, &files), None);
        // The words in the output of a run the tests made (pytest testing itself).
        let log = "ERROR collecting test_inner.py\nE   ImportError: cannot import name 'y'\n\
                   !!! Interrupted: 1 error during collection !!!\nFAILED t";
        assert_eq!(stopped_by_import_error(log, &ran, &files), None);
        // The file the command was given could not be collected.
        let failed = map(&[("tests/test_x.py", Error), ("tests/test_y.py::t", Passed)]);
        let log = "ERROR collecting tests/test_x.py\nE   ImportError: cannot import name 'y'\n";
        assert_eq!(
            stopped_by_import_error(log, &failed, &files).as_deref(),
            Some("E   ImportError: cannot import name 'y'")
        );
        assert!(
            stopped_by_import_error(
                "ModuleNotFoundError: No module named 'z'",
                &StatusMap::new(),
                &files
            )
            .is_some()
        );
        assert_eq!(
            stopped_by_import_error("all good", &StatusMap::new(), &files),
            None
        );
    }

    #[test]
    fn tests_that_need_a_package_only_conda_provides_are_named_with_it() {
        let d = Differences {
            pass_to_pass_missing: vec![
                "xarray/tests/test_dataarray.py::TestDataArray::test_to_and_from_cdms2_classic"
                    .into(),
                "xarray/tests/test_backends.py::test_open_grib".into(),
                "xarray/tests/test_plot.py::test_movie".into(),
                "xarray/tests/test_units.py::test_other".into(),
            ],
            fail_to_pass_missing: vec!["xarray/tests/test_misc.py::test_import".into()],
            ..Differences::default()
        };
        let unavailable = [
            (
                "cdms2".to_string(),
                "which only conda provides: not on PyPI (conda-forge only)".to_string(),
            ),
            (
                "ffmpeg".to_string(),
                "which only conda provides: a system program".to_string(),
            ),
        ];
        let post = "SKIPPED [1] xarray/tests/test_plot.py:88: requires ffmpeg\n\
                    SKIPPED [1] xarray/tests/test_units.py:9: requires pint\n\
                    ____ test_import ____\n\
                    E   ModuleNotFoundError: No module named 'cdms2'\n\
                    ==== short test summary info ====\n\
                    PASSED xarray/tests/test_backends.py::test_ffmpeg_free\n";
        let found = needing_unavailable(&d, &unavailable, &[post, ""]);
        let cdms2 = "needs cdms2, which only conda provides: not on PyPI (conda-forge only)";
        assert_eq!(
            found.get(
                "xarray/tests/test_dataarray.py::TestDataArray::test_to_and_from_cdms2_classic"
            ),
            Some(&cdms2.to_string())
        );
        assert_eq!(
            found.get("xarray/tests/test_misc.py::test_import"),
            Some(&cdms2.to_string())
        );
        assert_eq!(
            found
                .get("xarray/tests/test_plot.py::test_movie")
                .map(String::as_str),
            Some("needs ffmpeg, which only conda provides: a system program")
        );
        // Another skip of its file, and a test whose own line names nothing needed.
        assert!(!found.contains_key("xarray/tests/test_units.py::test_other"));
        assert!(!found.contains_key("xarray/tests/test_backends.py::test_open_grib"));
        assert!(!names("test_cdms22", "cdms2") && names("requires CDMS2.", "cdms2"));
        let d = Differences {
            needs_unavailable: found,
            ..d
        };
        let why = difference_reason(&d, &[]);
        assert!(
            why.contains(
                "; 2 of them (xarray/tests/test_dataarray.py::TestDataArray::test_to_and_from_cdms2_classic, \
                 xarray/tests/test_misc.py::test_import) need cdms2, which only conda provides"
            ) && why.contains("1 of them (xarray/tests/test_plot.py::test_movie) needs ffmpeg"),
            "{why}"
        );
    }
}
