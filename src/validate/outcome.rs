//! From parsed logs to a verdict: FAIL_TO_PASS, PASS_TO_PASS, XFAIL and flaky tests, the
//! "tests could not run" rule, and the comparison with a published instance's lists. Pure
//! functions: everything here is decided from the status maps and the log text.

use std::collections::{BTreeMap, BTreeSet};

use crate::logparse::{StatusMap, TestStatus};

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
    pre_log
        .lines()
        .find(|l| {
            l.contains("ImportError")
                || l.contains("AttributeError")
                || l.contains("ModuleNotFoundError")
        })
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
        } else if section.is_some() && NETWORK_SIGNS.iter().any(|s| l.contains(s)) {
            let is_e = l.starts_with("E ");
            if is_e || found.as_deref().is_none_or(|f| !f.starts_with("E ")) {
                found = Some(l.split_whitespace().collect::<Vec<_>>().join(" "));
            }
        }
    }
    close(&mut section, &mut found);
    out
}

/// The missing published tests of `d` whose failure in `logs` shows the network was needed.
pub fn needing_network(d: &Differences, logs: &[&str]) -> BTreeMap<String, String> {
    let failures: Vec<BTreeMap<String, String>> =
        logs.iter().map(|l| network_failures(l)).collect();
    let mut out = BTreeMap::new();
    for test in d.fail_to_pass_missing.iter().chain(&d.pass_to_pass_missing) {
        // pytest titles `file.py::Class::test` as `Class.test`.
        let title = test
            .split_once("::")
            .map_or(test.as_str(), |(_, t)| t)
            .replace("::", ".");
        if let Some(line) = failures.iter().find_map(|f| f.get(&title)) {
            out.insert(test.clone(), line.clone());
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
}
