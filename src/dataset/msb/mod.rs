//! Multi-SWE-bench's own rows (docs/MULTI-SWE-BENCH.md, "Row form"): read into an
//! [`Instance`] and written back byte for byte.
//!
//! A row is a pull request (`org`, `repo`, `number`, `base`, `resolved_issues`, `fix_patch`,
//! `test_patch`, …) with the tests of Multi-SWE-bench's three runs (`f2p_tests`, …,
//! `fix_patch_result`). What SWE-bench names too becomes the instance's typed fields; the rest
//! stays in [`Instance::extra`] under its own name, with the row's layout (key order, how
//! non-ASCII was written) under [`LAYOUT_KEY`].

mod check;
mod layout;
mod read;
mod write;

pub(crate) use read::{is_row, read_row};
pub(crate) use write::to_row;

use super::Instance;

/// Where an imported row's layout is kept in [`Instance::extra`]: what it takes to write the
/// row back byte for byte, and the mark of an instance that came in as a Multi-SWE-bench row.
pub const LAYOUT_KEY: &str = "multi_swe_bench_layout";

/// The maps of test name to its status in the three runs (`{"run", "test", "fix"}`).
const TEST_MAPS: [&str; 5] = [
    "fixed_tests",
    "p2p_tests",
    "f2p_tests",
    "s2p_tests",
    "n2p_tests",
];

/// The maps whose tests must pass for the instance to be resolved and did not pass before the
/// fix (failed, skipped, or absent from the run with the test patch alone): SWE-bench's
/// FAIL_TO_PASS. `p2p_tests` is its PASS_TO_PASS.
const TO_PASS: [&str; 3] = ["f2p_tests", "s2p_tests", "n2p_tests"];

/// The three runs' results: before any patch, with the test patch, with both patches.
const RESULTS: [&str; 3] = ["run_result", "test_patch_result", "fix_patch_result"];

/// The fields every row has: Multi-SWE-bench's `PullRequest` without defaults, and the three
/// results its `Dataset` refuses to be without.
const REQUIRED: [&str; 13] = [
    "org",
    "repo",
    "number",
    "state",
    "title",
    "body",
    "base",
    "resolved_issues",
    "fix_patch",
    "test_patch",
    "run_result",
    "test_patch_result",
    "fix_patch_result",
];

/// SWE-bench fields a row may carry itself (a copy with `version` added): taken as the
/// instance's, written back from it.
const OWN_STRINGS: [&str; 5] = [
    "problem_statement",
    "hints_text",
    "created_at",
    "version",
    "environment_setup_commit",
];

/// SWE-bench fields swe-ark derives from the row's test maps: a row that carries them too is
/// refused rather than one of the two chosen.
const DERIVED_LISTS: [&str; 2] = ["FAIL_TO_PASS", "PASS_TO_PASS"];

/// Why a row is not a Multi-SWE-bench row swe-ark can read or write.
#[derive(Debug, thiserror::Error)]
pub enum MsbError {
    #[error("the Multi-SWE-bench row has no {}", ticks(.0))]
    Missing(Vec<String>),
    #[error("field `{field}` of the Multi-SWE-bench row must be {expected}, found {found}")]
    WrongType {
        field: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error(
        "field `{field}`: test `{test}` must be {{\"run\", \"test\", \"fix\"}}, each PASS, \
         FAIL, SKIP or NONE; found {found}"
    )]
    BadTest {
        field: String,
        test: String,
        found: String,
    },
    #[error("field `base.sha` is `{0}`, not a full commit id (40 or 64 lowercase hex digits)")]
    BadSha(String),
    #[error("fields `org` `{org}` and `repo` `{repo}` do not make a repository OWNER/NAME")]
    BadRepo { org: String, repo: String },
    #[error(
        "the Multi-SWE-bench row also carries SWE-bench's `{0}`: swe-ark derives it from the \
         row's f2p_tests, s2p_tests, n2p_tests and p2p_tests and will not choose between them"
    )]
    Derived(&'static str),
}

/// Why an instance cannot be written as a Multi-SWE-bench row.
#[derive(Debug, thiserror::Error)]
pub enum MsbExportError {
    #[error(
        "instance `{id}` did not come from a Multi-SWE-bench row: it has no {}; swe-ark does \
         not make up Multi-SWE-bench's pull request fields or its run, test and fix results",
        ticks(.missing)
    )]
    NotFromRow { id: String, missing: Vec<String> },
    #[error("instance `{id}` cannot be written as a Multi-SWE-bench row: {source}")]
    Unwritable {
        id: String,
        #[source]
        source: MsbError,
    },
    #[error(
        "instance `{id}` cannot be written as a Multi-SWE-bench row: its repository `{repo}` \
         is not under its `org` `{org}`"
    )]
    RepoNotOfOrg {
        id: String,
        repo: String,
        org: String,
    },
}

/// `a`, `b` and `c` as "`a`, `b`, `c`", for messages.
fn ticks(fields: &[String]) -> String {
    let quoted: Vec<String> = fields.iter().map(|f| format!("`{f}`")).collect();
    quoted.join(", ")
}

/// The form a stored instance came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowForm {
    SweBench,
    MultiSweBench,
}

/// The form `inst` came in: a Multi-SWE-bench row keeps its layout, a SWE-bench row has none.
pub fn row_form(inst: &Instance) -> RowForm {
    if inst.extra.contains_key(LAYOUT_KEY) {
        RowForm::MultiSweBench
    } else {
        RowForm::SweBench
    }
}

/// Where Multi-SWE-bench's images have the repository of `inst` (`/home/NAME`: its Dockerfiles
/// clone it there and its scripts `cd` there), for a row of its form; None for another row.
/// What the tests print or name with the tree's path (cmake's check of
/// `-ffile-prefix-map=/home/Catch2/=`, in Catch2's lists) comes out as published only there.
pub fn harness_work_tree(inst: &Instance) -> Option<String> {
    if row_form(inst) != RowForm::MultiSweBench {
        return None;
    }
    let name = inst.repo.rsplit('/').next()?;
    (!name.is_empty() && name != "." && name != "..").then(|| format!("/home/{name}"))
}

/// The id Multi-SWE-bench's harness names `inst` by in its reports (`org/repo:pr-NUMBER`,
/// `PullRequestBase.id`), for a row of its form; None for another row.
pub fn harness_id(inst: &Instance) -> Option<String> {
    if row_form(inst) != RowForm::MultiSweBench {
        return None;
    }
    // `repo` is the instance's own OWNER/NAME, made of the row's `org` and `repo`.
    let number = inst.extra.get("number").and_then(|v| v.as_u64())?;
    Some(format!("{}:pr-{number}", inst.repo))
}
