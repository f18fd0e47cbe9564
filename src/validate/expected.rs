//! What a bundle keeps of a validation (format version 3): what the run proved, as a pure
//! function of the bundle's inputs — the lists, the per-test statuses, the exit codes of the
//! test runs, and the logs with durations, addresses and seeds masked. What only this run saw
//! (the raw logs, timings, the tool's version) stays in the archive as evidence objects that
//! the validation row names by hash, outside the bundle id (docs/BUNDLE-FORMAT.md,
//! "expected.json" and "Normalized logs").
//!
//! A validation at the fixed layout ([`FIXED_LAYOUT`]) ran with nothing of the host's paths
//! in sight, so its logs need no more. The masks of the host's paths ([`HOST_PATH_MASKS`] and
//! the recorded [`RunPaths`]) stay only for validations recorded before it, whose bundles must
//! rebuild to the same ids.

use std::sync::LazyLock;

use regex::bytes::Regex;
use serde::{Deserialize, Serialize};

pub use crate::bundle::Expected;

use super::Results;

/// The version of the fixed layout validations run at now (`layout` in `results.json`).
pub const FIXED_LAYOUT: u32 = 1;

/// Where a validation from before the fixed layout ran: the paths its logs may name, each
/// replaced by a fixed name when the logs are normalized. Recorded in `results.json` (an
/// observation, not in bundles).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunPaths {
    /// The instance's work tree: `/testbed`, as SWE-bench's images have it.
    pub work_tree: String,
    /// The instance's copy of the environment: `/env`.
    pub environment: String,
    /// The instance's own /tmp (when it was given through TMPDIR): `/tmp`.
    pub tmp: String,
    /// The instance's work directory, which holds the three above: `/work`.
    pub work: String,
    /// The archive: `/ark`.
    pub ark: String,
}

impl RunPaths {
    /// Each path and the name it becomes, longest first, so that a path inside another is
    /// replaced before it.
    fn replacements(&self) -> Vec<(&str, &'static str)> {
        let mut r = vec![
            (self.work_tree.as_str(), "/testbed"),
            (self.environment.as_str(), "/env"),
            (self.tmp.as_str(), "/tmp"),
            (self.work.as_str(), "/work"),
            (self.ark.as_str(), "/ark"),
        ];
        r.retain(|(p, _)| p.len() > 1);
        r.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(b.0)));
        r
    }
}

/// What `results` proved, without what only its run saw.
pub fn expected_of(results: &Results) -> Expected {
    let flaky: Vec<String> = results.flaky.keys().cloned().collect();
    let mut post = results.post.first().cloned().unwrap_or_default();
    post.retain(|t, _| !results.flaky.contains_key(t));
    let exit_codes = [("pre", "pre"), ("post-1", "post")]
        .iter()
        .filter_map(|(step, name)| {
            results
                .exit_codes
                .get(*step)
                .map(|c| (name.to_string(), *c))
        })
        .collect();
    Expected {
        instance_id: results.instance_id.clone(),
        verdict: results.verdict.as_str().to_string(),
        reason_kind: crate::verdict::reason_word(results.reason_kind).to_string(),
        fail_to_pass: results.fail_to_pass.clone(),
        pass_to_pass: results.pass_to_pass.clone(),
        xfail: results.xfail.clone(),
        flaky,
        test_directives: results.test_directives.clone(),
        log_parser: results.log_parser.clone(),
        pre: results.pre.clone(),
        post,
        exit_codes,
        network: results.network.clone(),
        services: results.services.clone(),
        describe: results.describe.clone(),
        cannot_run: cannot_run(results),
    }
}

/// The published tests that cannot run here (they need the network, or what only conda
/// provides), when they explain every difference from the published lists and some
/// published FAIL_TO_PASS test still runs: an instance replay can grade on the rest.
fn cannot_run(results: &Results) -> std::collections::BTreeMap<String, String> {
    match &results.published_differences {
        Some(d) if !results.fail_to_pass.is_empty() => d.cannot_run(),
        _ => Default::default(),
    }
}

/// What a version 3 bundle holds of a validation: `expected.json` and the normalized logs.
pub struct BundleRecord {
    pub expected: Vec<u8>,
    pub pre_log: Option<Vec<u8>>,
    pub post_log: Option<Vec<u8>>,
}

impl BundleRecord {
    /// From a validation's results and raw logs (the evidence the archive keeps).
    pub fn of(results: &Results, pre_log: Option<&[u8]>, post_log: Option<&[u8]>) -> Self {
        Self::with_rules(results, pre_log, post_log, results.layout.is_none())
    }

    /// As [`BundleRecord::of`], the logs normalized by the rules of a validation at the
    /// host's paths when `host_rules` (what a bundle made before the fixed layout holds: a
    /// run at the fixed layout checked against it is normalized the same way).
    pub fn with_rules(
        results: &Results,
        pre_log: Option<&[u8]>,
        post_log: Option<&[u8]>,
        host_rules: bool,
    ) -> Self {
        let normalize = |l: &[u8]| {
            if host_rules {
                normalize_host_log(l, results.paths.as_ref())
            } else {
                normalize_log(l)
            }
        };
        BundleRecord {
            expected: expected_of(results).to_bytes(),
            pre_log: pre_log.map(normalize),
            post_log: post_log.map(normalize),
        }
    }
}

/// A regex of this module's own, compiled once.
fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("the normalization patterns are valid")
}

/// A path component character: what swe-ark's own temporary names and the directories above
/// them are made of in practice (no whitespace, quotes or brackets).
const PATH: &str = r#"(?:/[^/\s'"(){}\[\]<>,;:]+)*"#;

/// The masks of the host's paths and user, for validations from before the fixed layout, in
/// order (docs/BUNDLE-FORMAT.md, "Normalized logs", 2 and 3).
static HOST_PATH_MASKS: LazyLock<Vec<(Regex, &'static [u8])>> = LazyLock::new(|| {
    vec![
        // The work directory of a validation made before its paths were recorded, and of
        // replay: swe-ark's own temporary names.
        (
            re(&format!(
                r"{PATH}/\.tmp-(?:validate|replay)-[A-Za-z0-9]+/src\b"
            )),
            b"/testbed",
        ),
        (
            re(&format!(
                r"{PATH}/\.tmp-(?:validate|replay)-[A-Za-z0-9]+/venv\b"
            )),
            b"/env",
        ),
        (
            re(&format!(
                r"{PATH}/\.tmp-(?:validate|replay)-[A-Za-z0-9]+/tmp\b"
            )),
            b"/tmp",
        ),
        (
            re(&format!(r"{PATH}/\.tmp-(?:validate|replay)-[A-Za-z0-9]+\b")),
            b"/work",
        ),
        // The sandbox's temporary HOME.
        (
            re(&format!(r"{PATH}/swe-ark-sandbox-[A-Za-z0-9]+/home\b")),
            b"/root",
        ),
        // A relative path from the work tree up to pytest's temporary root: how many `../` it
        // takes is the depth of the work tree, which is the builder's (sphinx prints
        // `The text files are in ../../../../tmp/pytest-of-root/…`). It is `/tmp`.
        (re(r"(?:\.\./)+tmp/pytest-of-"), b"/tmp/pytest-of-"),
        // pytest's per-user temporary root.
        (re(r"\bpytest-of-[A-Za-z0-9_.-]+"), b"pytest-of-<user>"),
    ]
});

/// The masks of what differs between two runs of the same tests, in order
/// (docs/BUNDLE-FORMAT.md, "Normalized logs", 4 to 6).
static RUN_MASKS: LazyLock<Vec<(Regex, &'static [u8])>> = LazyLock::new(|| {
    vec![
        // tox 4's summary: `py39: OK (4.89=setup[0.02]+cmd[4.87] seconds)`.
        (
            re(r"\(\d+\.\d+=setup\[\d+\.\d+\]\+cmd\[[\d.,]*\] seconds\)"),
            b"(<duration>)",
        ),
        // Durations: `in 0.20s`, `0.12s call`, `in 1.5 seconds`, `(0:01:02)`.
        (re(r"\b\d+\.\d+ ?(?:s|sec|secs|seconds)\b"), b"<duration>"),
        (re(r"\(\d+:\d\d:\d\d(?:\.\d+)?\)"), b"(<duration>)"),
        // pytest's `--durations` report: which tests were slowest, in which order, is the
        // run's; its lines go (the section's title stays).
        (
            re(r"(?m)^<duration> +(?:setup|call|teardown) +[^\n]*\n"),
            b"",
        ),
        (
            re(r"(?m)^\(\d+ durations < <duration> hidden\.[^\n]*\n"),
            b"",
        ),
        // Object addresses in reprs: `<Foo object at 0x7f3a2c1d5e80>`.
        (re(r"\b0x[0-9a-fA-F]{6,16}\b"), b"0x<address>"),
        // sympy's test runner prints the random seed it drew.
        (re(r"random seed: *\d+"), b"random seed: <seed>"),
    ]
});

/// A log of a validation at the fixed layout as a version 3 bundle keeps it: what differs
/// between runs masked. A pure function of the raw log.
pub fn normalize_log(raw: &[u8]) -> Vec<u8> {
    apply(raw.to_vec(), &RUN_MASKS)
}

/// A log of a validation from before the fixed layout as a version 3 bundle keeps it: the
/// run's paths replaced by fixed names (when known), the host's paths and user masked, then
/// what differs between runs. A pure function of the raw log and the paths.
pub fn normalize_host_log(raw: &[u8], paths: Option<&RunPaths>) -> Vec<u8> {
    let mut out = raw.to_vec();
    if let Some(paths) = paths {
        for (from, to) in paths.replacements() {
            out = replace_all(&out, from.as_bytes(), to.as_bytes());
        }
    }
    apply(apply(out, &HOST_PATH_MASKS), &RUN_MASKS)
}

fn apply(mut out: Vec<u8>, masks: &[(Regex, &'static [u8])]) -> Vec<u8> {
    for (mask, with) in masks {
        if let std::borrow::Cow::Owned(o) = mask.replace_all(&out, *with) {
            out = o;
        }
    }
    out
}

fn replace_all(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    if needle.is_empty() {
        return haystack.to_vec();
    }
    let mut out = Vec::with_capacity(haystack.len());
    let mut rest = haystack;
    while let Some(i) = rest.windows(needle.len()).position(|w| w == needle) {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(with);
        rest = &rest[i + needle.len()..];
    }
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(root: &str) -> RunPaths {
        let work = format!("{root}/ark/tmp/.tmp-validate-Ab12Cd");
        RunPaths {
            work_tree: format!("{work}/src"),
            environment: format!("{work}/venv"),
            tmp: format!("{work}/tmp"),
            work,
            ark: format!("{root}/ark"),
        }
    }

    #[test]
    fn two_runs_in_two_places_normalize_to_the_same_log() {
        let a = "rootdir: /home/alice/ark/tmp/.tmp-validate-Ab12Cd/src\n\
                 /home/alice/ark/tmp/.tmp-validate-Ab12Cd/venv/lib/python3.9/site.py:1: Warning\n\
                 E   <Foo object at 0x7f3a2c1d5e80>\n\
                 /tmp/pytest-of-alice/pytest-0/test_x0/a.txt\n\
                 The text files are in ../../../../../tmp/pytest-of-alice/pytest-1/_build.\n\
                 random seed: 12345678\n\
                 \x20 py39: OK (4.89=setup[0.02]+cmd[4.87,0.10] seconds)\n\
                 ============ slowest 3 durations ============\n\
                 0.50s call     tests/test_a.py::test_slow\n\
                 0.20s setup    tests/test_b.py::test_other\n\
                 (5 durations < 0.005s hidden.  Use -vv to show these durations.)\n\
                 ============ 3 passed in 0.20s (0:00:00) ============\n";
        let b = a
            .replace("/home/alice", "/srv/bob/deeper")
            .replace("0x7f3a2c1d5e80", "0x55d0c0ffee00")
            .replace("pytest-of-alice", "pytest-of-bob")
            .replace("../../../../../tmp", "../../../tmp")
            .replace("12345678", "99")
            .replace(
                "0.50s call     tests/test_a.py::test_slow\n0.20s setup    tests/test_b.py::test_other\n",
                "0.31s setup    tests/test_b.py::test_other\n0.29s call     tests/test_a.py::test_slow\n",
            )
            .replace("(5 durations", "(7 durations")
            .replace("4.89=setup[0.02]+cmd[4.87,0.10]", "16.1=setup[1.05]+cmd[15.0,0.05]")
            .replace("0.20s", "13.75s");
        let na = normalize_host_log(a.as_bytes(), Some(&paths("/home/alice")));
        let nb = normalize_host_log(b.as_bytes(), Some(&paths("/srv/bob/deeper")));
        assert_eq!(String::from_utf8_lossy(&na), String::from_utf8_lossy(&nb));
        let text = String::from_utf8(na).unwrap();
        assert!(
            text.starts_with("rootdir: /testbed\n/env/lib/python3.9/site.py"),
            "{text}"
        );
        assert!(text.contains("<Foo object at 0x<address>>"), "{text}");
        assert!(text.contains("/tmp/pytest-of-<user>/pytest-0/"), "{text}");
        assert!(
            text.contains("are in /tmp/pytest-of-<user>/pytest-1/_build."),
            "{text}"
        );
        assert!(
            text.contains("durations ============\n============ 3 passed")
                && !text.contains("test_slow")
                && text.contains("  py39: OK (<duration>)\n"),
            "{text}"
        );
        assert!(
            text.contains("3 passed in <duration> (<duration>)"),
            "{text}"
        );
    }

    #[test]
    fn without_recorded_paths_swe_arks_own_temporary_names_are_recognized() {
        let raw = b"rootdir: /x/y/ark/tmp/.tmp-validate-Zz9Yy8/src, configfile: setup.cfg\n\
                    HOME=/tmp/swe-ark-sandbox-q1W2e3/home\n";
        let n = normalize_host_log(raw, None);
        assert_eq!(
            String::from_utf8(n).unwrap(),
            "rootdir: /testbed, configfile: setup.cfg\nHOME=/root\n"
        );
    }

    #[test]
    fn what_is_not_an_observation_is_left_alone() {
        let raw = b"test_version passed: 1.2.3\nsize 4096 bytes, 0x1f flag, 3 s timeout\n";
        assert_eq!(normalize_host_log(raw, None), raw.to_vec());
        assert_eq!(normalize_log(raw), raw.to_vec());
    }

    #[test]
    fn at_the_fixed_layout_only_what_differs_between_runs_is_masked() {
        let raw = b"rootdir: /testbed\n/env/lib/python3.9/site.py:1: Warning\n\
                    /tmp/pytest-of-root/pytest-0/a.txt ../tmp/pytest-of-root/x\n\
                    E   <Foo object at 0x7f3a2c1d5e80>\n3 passed in 0.20s\n";
        assert_eq!(
            String::from_utf8(normalize_log(raw)).unwrap(),
            "rootdir: /testbed\n/env/lib/python3.9/site.py:1: Warning\n\
             /tmp/pytest-of-root/pytest-0/a.txt ../tmp/pytest-of-root/x\n\
             E   <Foo object at 0x<address>>\n3 passed in <duration>\n"
        );
    }
}
