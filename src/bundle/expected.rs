//! `expected.json`, the validation record of a format version 3 bundle: what a validation
//! proved, with nothing of when, where or how long (docs/BUNDLE-FORMAT.md). swe-ark's
//! `validate` makes it from a run's results (`crate::validate::expected`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::logparse::StatusMap;

/// Why `expected.json` cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ExpectedError {
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("it is not in canonical form (keys sorted, two-space indent, a final newline)")]
    NotCanonical,
}

/// The largest `expected.json` a reader accepts.
pub const MAX_MEMBER_SIZE: u64 = 256 << 20;

/// `expected.json`: fields in this order, serialized as canonical JSON (keys sorted, two-space
/// indent, a final newline).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    pub instance_id: String,
    /// `kept`, `discarded` or `not-reproducible`.
    pub verdict: String,
    /// Empty when kept plainly; `covers-published` when kept with more PASS_TO_PASS than
    /// published; the reason's kind otherwise.
    pub reason_kind: String,
    #[serde(rename = "FAIL_TO_PASS")]
    pub fail_to_pass: Vec<String>,
    #[serde(rename = "PASS_TO_PASS")]
    pub pass_to_pass: Vec<String>,
    #[serde(rename = "XFAIL")]
    pub xfail: Vec<String>,
    /// Tests whose status differed between the runs after the gold patch, sorted; their
    /// statuses are left out of `post`.
    pub flaky: Vec<String>,
    pub test_directives: Vec<String>,
    pub log_parser: String,
    /// Every test's status before the gold patch.
    pub pre: StatusMap,
    /// Every test's status in the first run after it, flaky tests left out.
    pub post: StatusMap,
    /// The test command's exit code (or -signal) before (`pre`) and after (`post`) the gold
    /// patch, for the runs that happened.
    pub exit_codes: BTreeMap<String, i64>,
    /// `isolated` or `allowed`.
    pub network: String,
    /// The services the tests ran with, one sentence each.
    pub services: Vec<String>,
    /// `git describe --tags --long` of the base commit as the work tree answered it.
    pub describe: Option<String>,
    /// Published tests that cannot run here, each with why (`needs cdms2, which only conda
    /// provides: …`, `needs the network: …`), when they are all that keeps the published
    /// lists from coming out: replay grades the instance without them too. Absent otherwise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cannot_run: BTreeMap<String, String>,
}

impl Expected {
    /// The canonical bytes: keys sorted, two-space indent, a final newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        let value = serde_json::to_value(self).expect("an Expected always serializes");
        let mut out = serde_json::to_vec_pretty(&value).expect("a Value always serializes");
        out.push(b'\n');
        out
    }

    /// Reads `expected.json`, which must be in canonical form (the same record never makes
    /// two bundle ids).
    pub fn from_bytes(bytes: &[u8]) -> Result<Expected, ExpectedError> {
        let e: Expected = serde_json::from_slice(bytes)?;
        if e.to_bytes() != bytes {
            return Err(ExpectedError::NotCanonical);
        }
        Ok(e)
    }
}
