//! swebench 5.0's task repositories (docs/DATASETS.md, "Task repositories"): read into
//! instances, every file kept as an object, and written back byte for byte.
//!
//! A task repository is the source of truth of swebench 5.0's datasets: `sweb.yaml` (the
//! datasets it publishes, and their splits), `eval/<dataset>.yaml` (a dataset's eval card) and
//! one folder per instance, `tasks/<instance_id>/` (`task.yaml`, `tests.json`,
//! `problem_statement.md`, `hints.md`, `gold.patch`, `test.patch`, `eval.sh`, `Dockerfile`,
//! `test_assets/`, `problem_assets/`). The reference is swebench 5.0.2's `swebench/task/`
//! (`repo.py` reads, `checks.py` says what is well formed, `publish.py` makes the rows).

mod read;
mod write;
pub(crate) mod yaml;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::digest::Sha256Digest;

pub use read::{Problem, TaskRepoError, has_tasks, is_task_repo, read_task_repo};
pub use write::{
    Content, TaskFile, TaskRepoExportError, ToWrite, task_repo_files, write_task_repo,
};

/// Where an instance read from a task repository keeps, in [`super::Instance::extra`], what
/// is not a dataset column: its split, its datasets, and its files.
pub const TASK_KEY: &str = "swebench_task";

/// The repository's description of what it publishes.
pub const CONFIG_FILE: &str = "sweb.yaml";
/// The folder of the tasks, one folder each.
pub const TASKS_DIR: &str = "tasks";
/// A task's metadata.
pub const TASK_FILE: &str = "task.yaml";
/// A task's FAIL_TO_PASS and PASS_TO_PASS.
pub const TESTS_FILE: &str = "tests.json";
/// The folder of the eval cards, `eval/<dataset's name>.yaml`.
pub const EVAL_DIR: &str = "eval";
/// The split a task is kept in without being published.
pub const DEPRECATED_SPLIT: &str = "deprecated";

/// The dataset columns kept as files of their own (swebench's `AS_FILE`).
const AS_FILE: [(&str, &str); 4] = [
    ("patch", "gold.patch"),
    ("test_patch", "test.patch"),
    ("eval_script", "eval.sh"),
    ("problem_statement", "problem_statement.md"),
];
/// Written only when not empty (swebench's `OPTIONAL_FILE`).
const HINTS: (&str, &str) = ("hints_text", "hints.md");
/// Every task has these files (swebench's `REQUIRED_FILES`).
const REQUIRED_FILES: [&str; 7] = [
    TASK_FILE,
    TESTS_FILE,
    "Dockerfile",
    "gold.patch",
    "test.patch",
    "eval.sh",
    "problem_statement.md",
];
/// Every `task.yaml` has these keys (swebench's `REQUIRED_KEYS`).
const REQUIRED_KEYS: [&str; 8] = [
    "instance_id",
    "repo",
    "version",
    "base_commit",
    "split",
    "image",
    "log_parser",
    "eval_type",
];
/// `tests.json`'s lists.
const TEST_KEYS: [&str; 2] = ["FAIL_TO_PASS", "PASS_TO_PASS"];
/// What an `eval.sh` brackets its test output with.
const EVAL_MARKERS: [&str; 2] = [">>>>> Start Test Output", ">>>>> End Test Output"];

/// One file of a task repository, kept as an object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptFile {
    pub sha256: Sha256Digest,
    pub size: u64,
    /// Whether its owner may run it (the only mode git keeps, and the only one written back).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub executable: bool,
}

/// What [`TASK_KEY`] holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// The split the task is in (`test`, `dev`, `deprecated`, …).
    pub split: String,
    /// The datasets it belongs to, as `task.yaml` names them.
    pub datasets: Vec<String>,
    /// Every file of `tasks/<id>/`, by its path there (`/`-separated).
    pub files: std::collections::BTreeMap<String, KeptFile>,
    /// The repository's own files (`sweb.yaml`, `eval/*.yaml`), by path.
    pub repo_files: std::collections::BTreeMap<String, KeptFile>,
}

impl TaskRecord {
    /// The record of `inst`, when it came from a task repository.
    pub fn of(inst: &crate::dataset::instance::Instance) -> Option<TaskRecord> {
        serde_json::from_value(inst.extra.get(TASK_KEY)?.clone()).ok()
    }
}

/// A file the repository has and where it is, to be stored as an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    pub path: PathBuf,
    pub sha256: Sha256Digest,
}

/// swebench's image name for an instance (`checks.expected_image`).
pub fn expected_image(instance_id: &str) -> String {
    format!(
        "swebench/sweb.eval.x86_64.{}:latest",
        instance_id.to_lowercase()
    )
    .replace("__", "_1776_")
}
