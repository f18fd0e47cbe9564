//! Reading a task repository: every task checked as swebench 5.0.2's `check_task_repo`
//! checks it, then each published task as the row `compile_datasets` makes of it, with its
//! files kept as objects.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::yaml;
use super::{
    AS_FILE, CONFIG_FILE, DEPRECATED_SPLIT, EVAL_DIR, EVAL_MARKERS, HINTS, KeptFile,
    REQUIRED_FILES, REQUIRED_KEYS, SourceFile, TASK_FILE, TASK_KEY, TASKS_DIR, TEST_KEYS,
    TESTS_FILE, TaskRecord, expected_image,
};
use crate::dataset::instance::Instance;
use crate::dataset::instance::json_type_name;
use crate::digest::Sha256Digest;

/// One thing wrong in a task repository: where (`sweb.yaml`, `tasks/<id>/tests.json`), and
/// what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub at: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}

/// How many problems a refusal lists (swebench lists 20).
const LISTED: usize = 20;

fn listed(problems: &[Problem]) -> String {
    let mut lines: Vec<String> = problems
        .iter()
        .take(LISTED)
        .map(|p| format!("  {p}"))
        .collect();
    if problems.len() > LISTED {
        lines.push(format!("  … and {} more", problems.len() - LISTED));
    }
    lines.join("\n")
}

/// Why a task repository was not imported. Nothing of it is.
#[derive(Debug, thiserror::Error)]
pub enum TaskRepoError {
    #[error("cannot read `{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "`{}` is not a task repository swebench 5.0.2 would publish: {} problem(s):\n{}",
        .root.display(), .problems.len(), listed(.problems)
    )]
    Problems {
        root: PathBuf,
        problems: Vec<Problem>,
    },
    #[error(
        "`{}` has no task in split `{split}` (its tasks' splits: {})",
        .root.display(), if .have.is_empty() { "none".to_string() } else { .have.join(", ") }
    )]
    NoSuchSplit {
        root: PathBuf,
        split: String,
        have: Vec<String>,
    },
}

/// A task repository read: its published tasks (or those of the split asked for) as
/// instances, and the files to keep as objects.
#[derive(Debug, Default)]
pub struct TaskRepo {
    /// What `sweb.yaml` publishes.
    pub datasets: Vec<String>,
    pub splits: Vec<String>,
    /// Each instance with where it is (`tasks/<id>`).
    pub instances: Vec<(String, Instance)>,
    /// Every file the instances keep, once each.
    pub files: Vec<SourceFile>,
    /// Tasks not imported, by split: a split `sweb.yaml` does not publish (or not the one
    /// asked for), or no dataset it publishes.
    pub left_out: BTreeMap<String, usize>,
    /// What swebench reports without refusing (an eval card no dataset has).
    pub warnings: Vec<String>,
}

/// Whether `dir` is a task repository: it has a `sweb.yaml`.
pub fn is_task_repo(dir: &Path) -> bool {
    dir.join(CONFIG_FILE).is_file()
}

/// Whether `dir` has task folders (`tasks/<id>/task.yaml`), whatever else it has.
pub fn has_tasks(dir: &Path) -> bool {
    std::fs::read_dir(dir.join(TASKS_DIR))
        .map(|rd| rd.flatten().any(|e| e.path().join(TASK_FILE).is_file()))
        .unwrap_or(false)
}

/// The repository's `sweb.yaml`.
struct Config {
    datasets: Vec<String>,
    splits: Vec<String>,
}

/// Why a field is not a list of strings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListError {
    #[error("`{key}` is {found}, not a list of strings")]
    NotAList { key: String, found: &'static str },
    #[error("`{key}` item {index} is {found}, not a string")]
    NotAString {
        key: String,
        index: usize,
        found: &'static str,
    },
}

/// The list of strings at `key` of `map` (`None`: no such key, or null).
fn strings(map: &Map<String, Value>, key: &str) -> Result<Option<Vec<String>>, ListError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(index, v)| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(ListError::NotAString {
                    key: key.into(),
                    index,
                    found: json_type_name(other),
                }),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(other) => Err(ListError::NotAList {
            key: key.into(),
            found: json_type_name(other),
        }),
    }
}

fn read_config(root: &Path) -> Result<Config, Problem> {
    let problem = |message: String| Problem {
        at: CONFIG_FILE.into(),
        message,
    };
    let text =
        std::fs::read_to_string(root.join(CONFIG_FILE)).map_err(|e| problem(e.to_string()))?;
    let value = yaml::parse(&text).map_err(|e| problem(e.to_string()))?;
    let Value::Object(map) = value else {
        return Err(problem(format!(
            "is {}, not a mapping",
            json_type_name(&value)
        )));
    };
    let list = |key| strings(&map, key).map_err(|e| problem(e.to_string()));
    let datasets = list("datasets")?.unwrap_or_default();
    if datasets.is_empty() {
        return Err(problem("names no datasets (`datasets:`)".into()));
    }
    let splits = list("splits")?.unwrap_or_else(|| vec!["test".into()]);
    Ok(Config { datasets, splits })
}

/// A task read, whatever its problems.
struct Task {
    name: String,
    split: Option<String>,
    datasets: Vec<String>,
    value: Map<String, Value>,
    files: BTreeMap<String, KeptFile>,
    sources: Vec<SourceFile>,
}

/// Every file under `dir`, by its `/`-separated path there, sorted; and what is wrong there
/// (a link, or anything but a file or folder), by path.
#[allow(clippy::type_complexity)]
fn files_under(dir: &Path) -> (Vec<(String, PathBuf)>, Vec<(String, String)>) {
    let mut out = Vec::new();
    let mut wrong = Vec::new();
    let mut stack = vec![(String::new(), dir.to_path_buf())];
    while let Some((rel, d)) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) => {
                wrong.push((rel, e.to_string()));
                continue;
            }
        };
        for entry in entries.flatten() {
            let lossy = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            let rel_path = if rel.is_empty() {
                lossy
            } else {
                format!("{rel}/{lossy}")
            };
            // Kept by its name as text: a name that is not UTF-8 would come back as another.
            if entry.file_name().to_str().is_none() {
                wrong.push((rel_path, "has a name that is not UTF-8".into()));
                continue;
            }
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push((rel_path, path)),
                Ok(t) if t.is_file() => out.push((rel_path, path)),
                _ => wrong.push((
                    rel_path,
                    "is a symbolic link or a special file: a task's files must be regular files"
                        .into(),
                )),
            }
        }
    }
    out.sort();
    wrong.sort();
    (out, wrong)
}

/// A file kept: its bytes hashed, and whether it is executable.
fn keep(path: &Path, bytes: &[u8]) -> KeptFile {
    use std::os::unix::fs::PermissionsExt;
    let executable = std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o100 != 0)
        .unwrap_or(false);
    KeptFile {
        sha256: Sha256Digest::of(bytes),
        size: bytes.len() as u64,
        executable,
    }
}

/// What the checks of one task found.
struct Found<'a> {
    /// `tasks/<name>`.
    at: String,
    problems: &'a mut Vec<Problem>,
    warnings: &'a mut Vec<String>,
}

impl Found<'_> {
    /// A problem in `file` of the task (the task itself when empty).
    fn problem(&mut self, file: &str, message: String) {
        let at = match file {
            "" => self.at.clone(),
            f => format!("{}/{f}", self.at),
        };
        self.problems.push(Problem { at, message });
    }

    /// What swebench's `check --fix` would rewrite: kept as it is, and said.
    fn warning(&mut self, file: &str, message: String) {
        self.warnings.push(format!("{}/{file}: {message}", self.at));
    }
}

/// A task's files: each kept, the text ones read.
#[derive(Default)]
struct TaskFiles {
    files: BTreeMap<String, KeptFile>,
    sources: Vec<SourceFile>,
    texts: BTreeMap<String, String>,
}

fn read_files(dir: &Path, found: &mut Found<'_>) -> TaskFiles {
    let missing: Vec<&str> = REQUIRED_FILES
        .iter()
        .copied()
        .filter(|f| !dir.join(f).is_file())
        .collect();
    if !missing.is_empty() {
        found.problem("", format!("missing {}", missing.join(", ")));
    }
    let mut out = TaskFiles::default();
    let (paths, wrong) = files_under(dir);
    for (rel, message) in wrong {
        found.problem(&rel, message);
    }
    for (rel, path) in paths {
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                found.problem(&rel, e.to_string());
                continue;
            }
        };
        let kept = keep(&path, &bytes);
        out.sources.push(SourceFile {
            path: path.clone(),
            sha256: kept.sha256,
        });
        out.files.insert(rel.clone(), kept);
        let is_text = rel == TASK_FILE
            || rel == TESTS_FILE
            || rel == HINTS.1
            || AS_FILE.iter().any(|(_, f)| *f == rel);
        if is_text {
            match String::from_utf8(bytes) {
                Ok(t) => {
                    out.texts.insert(rel, t);
                }
                Err(_) => found.problem(&rel, "is not UTF-8 text".into()),
            }
        }
    }
    out
}

/// `task.yaml`'s keys, its id, split and datasets checked; its split and datasets.
fn check_meta(
    meta: &Map<String, Value>,
    name: &str,
    config: &Config,
    found: &mut Found<'_>,
) -> (Option<String>, Vec<String>) {
    for key in REQUIRED_KEYS {
        if !meta.contains_key(key) {
            found.problem(TASK_FILE, format!("has no `{key}`"));
        }
    }
    match meta.get("instance_id") {
        None => {}
        Some(Value::String(id)) if id == name => {}
        Some(other) => found.problem(
            TASK_FILE,
            format!("`instance_id` is {other}, not the folder's name `{name}`"),
        ),
    }
    let split = match meta.get("split") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            let kind = json_type_name(other);
            found.problem(TASK_FILE, format!("`split` is {kind}, not a string"));
            None
        }
    };
    let deprecated = split.as_deref() == Some(DEPRECATED_SPLIT);
    if let Some(s) = &split
        && !deprecated
        && !config.splits.contains(s)
    {
        found.warning(
            TASK_FILE,
            format!(
                "`split` is `{s}`, which {CONFIG_FILE} does not name: the task is not published"
            ),
        );
    }
    let datasets = match strings(meta, "datasets") {
        Ok(Some(d)) if !d.is_empty() => {
            let unknown: Vec<String> = d
                .iter()
                .filter(|x| !config.datasets.contains(x))
                .map(|u| format!("`{u}`"))
                .collect();
            if !unknown.is_empty() {
                found.problem(
                    TASK_FILE,
                    format!(
                        "`datasets` names {}, which {CONFIG_FILE} does not publish",
                        unknown.join(", ")
                    ),
                );
            }
            d
        }
        Ok(_) if !deprecated => {
            let message = "does not say which datasets it belongs to (`datasets`)";
            found.problem(TASK_FILE, message.into());
            Vec::new()
        }
        Ok(_) => Vec::new(),
        Err(e) => {
            found.problem(TASK_FILE, e.to_string());
            Vec::new()
        }
    };
    if let Some(Value::String(image)) = meta.get("image")
        && *image != expected_image(name)
    {
        let derived = expected_image(name);
        found.warning(
            TASK_FILE,
            format!("`image` is `{image}`, not the name swebench derives (`{derived}`)"),
        );
    }
    (split, datasets)
}

/// `tests.json`'s lists checked; its keys, to go into the row.
fn check_tests(text: &str, deprecated: bool, found: &mut Found<'_>) -> Map<String, Value> {
    let tests = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(tests)) => tests,
        Ok(other) => {
            let kind = json_type_name(&other);
            found.problem(TESTS_FILE, format!("is {kind}, not an object"));
            return Map::new();
        }
        Err(e) => {
            found.problem(TESTS_FILE, format!("is not valid JSON: {e}"));
            return Map::new();
        }
    };
    for key in TEST_KEYS {
        match strings(&tests, key) {
            Ok(Some(_)) => {}
            Ok(None) => found.problem(TESTS_FILE, format!("has no `{key}`")),
            Err(e) => found.problem(TESTS_FILE, e.to_string()),
        }
    }
    let no_f2p = tests
        .get(TEST_KEYS[0])
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty);
    if no_f2p && !deprecated {
        let message = "`FAIL_TO_PASS` is empty, so nothing grades this task";
        found.problem(TESTS_FILE, message.into());
    }
    tests
}

/// `eval.sh` brackets its test output; the patches are diffs.
fn check_scripts(texts: &BTreeMap<String, String>, found: &mut Found<'_>) {
    if let Some(script) = texts.get("eval.sh") {
        for marker in EVAL_MARKERS {
            if !script.contains(marker) {
                found.problem("eval.sh", format!("has no `{marker}` marker"));
            }
        }
    }
    for file in ["gold.patch", "test.patch"] {
        if let Some(text) = texts.get(file)
            && !text.is_empty()
            && !text.contains("diff --git")
        {
            found.problem(file, "does not look like a diff (no `diff --git`)".into());
        }
    }
}

/// Reads the task at `dir` (`tasks/<name>`), adding what is wrong to `found`.
fn read_task(dir: &Path, name: &str, config: &Config, found: &mut Found<'_>) -> Option<Task> {
    let TaskFiles {
        files,
        sources,
        texts,
    } = read_files(dir, found);
    let meta = match yaml::parse(texts.get(TASK_FILE)?) {
        Ok(Value::Object(m)) => m,
        Ok(other) => {
            let kind = json_type_name(&other);
            found.problem(TASK_FILE, format!("is {kind}, not a mapping"));
            return None;
        }
        Err(e) => {
            found.problem(TASK_FILE, e.to_string());
            return None;
        }
    };
    let (split, datasets) = check_meta(&meta, name, config, found);
    // The row, as swebench's `load_task` makes it: task.yaml, then the files, then tests.json.
    let mut value = meta;
    for (column, file) in AS_FILE {
        let text = texts.get(file).cloned().unwrap_or_default();
        value.insert(column.into(), Value::String(text));
    }
    let hints = texts.get(HINTS.1).cloned().unwrap_or_default();
    value.insert(HINTS.0.into(), Value::String(hints));
    if let Some(text) = texts.get(TESTS_FILE) {
        let deprecated = split.as_deref() == Some(DEPRECATED_SPLIT);
        value.extend(check_tests(text, deprecated, found));
    }
    check_scripts(&texts, found);
    Some(Task {
        name: name.to_string(),
        split,
        datasets,
        value,
        files,
        sources,
    })
}

/// The repository's own files: `sweb.yaml` and the eval cards.
fn repo_files(
    root: &Path,
    config: &Config,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<String>,
) -> (BTreeMap<String, KeptFile>, Vec<SourceFile>) {
    let mut files = BTreeMap::new();
    let mut sources = Vec::new();
    let mut paths = vec![(CONFIG_FILE.to_string(), root.join(CONFIG_FILE))];
    let eval = root.join(EVAL_DIR);
    if eval.is_dir() {
        let (found, wrong) = files_under(&eval);
        for (rel, message) in wrong {
            problems.push(Problem {
                at: format!("{EVAL_DIR}/{rel}"),
                message,
            });
        }
        for (rel, path) in found {
            let Some(stem) = rel.strip_suffix(".yaml").filter(|s| !s.contains('/')) else {
                continue;
            };
            let published = config
                .datasets
                .iter()
                .any(|d| d.rsplit('/').next() == Some(stem));
            if !published {
                warnings.push(format!(
                    "{EVAL_DIR}/{rel}: no dataset named {stem} in {CONFIG_FILE}, so it is not \
                     published (kept)"
                ));
            }
            paths.push((format!("{EVAL_DIR}/{rel}"), path));
        }
    }
    for (rel, path) in paths {
        match std::fs::read(&path) {
            Ok(bytes) => {
                let kept = keep(&path, &bytes);
                sources.push(SourceFile {
                    path,
                    sha256: kept.sha256,
                });
                files.insert(rel, kept);
            }
            Err(e) => problems.push(Problem {
                at: rel,
                message: e.to_string(),
            }),
        }
    }
    (files, sources)
}

/// Every task folder of `root`'s `tasks/`, read and checked.
fn read_tasks(
    root: &Path,
    config: &Config,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<String>,
) -> Result<Vec<Task>, TaskRepoError> {
    let tasks_dir = root.join(TASKS_DIR);
    if !tasks_dir.is_dir() {
        problems.push(Problem {
            at: format!("{TASKS_DIR}/"),
            message: format!("`{}` has no {TASKS_DIR}/ folder", root.display()),
        });
        return Ok(Vec::new());
    }
    let mut names: Vec<String> = std::fs::read_dir(&tasks_dir)
        .map_err(|source| TaskRepoError::Io {
            path: tasks_dir.clone(),
            source,
        })?
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut tasks = Vec::new();
    for name in &names {
        let dir = tasks_dir.join(name);
        if !dir.join(TASK_FILE).is_file() {
            problems.push(Problem {
                at: format!("{TASKS_DIR}/{name}"),
                message: format!("no {TASK_FILE}, so it is not a task"),
            });
            continue;
        }
        let mut found = Found {
            at: format!("{TASKS_DIR}/{name}"),
            problems,
            warnings,
        };
        if let Some(t) = read_task(&dir, name, config, &mut found) {
            tasks.push(t);
        }
    }
    if tasks.is_empty() && problems.is_empty() {
        problems.push(Problem {
            at: format!("{TASKS_DIR}/"),
            message: "no task folders".into(),
        });
    }
    Ok(tasks)
}

/// The instances of `tasks` that `wanted` takes, into `out`, with the files they keep; the
/// others counted by split. The problems of those that are not valid instances.
fn take_instances(
    tasks: Vec<Task>,
    wanted: &dyn Fn(&Task) -> bool,
    repo_files: &BTreeMap<String, KeptFile>,
    out: &mut TaskRepo,
) -> Vec<Problem> {
    let mut seen: BTreeSet<Sha256Digest> = out.files.iter().map(|f| f.sha256).collect();
    let mut problems = Vec::new();
    for t in tasks {
        if !wanted(&t) {
            let split = t.split.clone().unwrap_or_default();
            *out.left_out.entry(split).or_default() += 1;
            continue;
        }
        let record = TaskRecord {
            split: t.split.clone().unwrap_or_default(),
            datasets: t.datasets.clone(),
            files: t.files.clone(),
            repo_files: repo_files.clone(),
        };
        let mut value = t.value;
        value.remove("split");
        value.remove("datasets");
        let record = serde_json::to_value(&record).unwrap_or(Value::Null);
        value.insert(TASK_KEY.into(), record);
        let at = format!("{TASKS_DIR}/{}", t.name);
        match Instance::from_value(Value::Object(value)) {
            Ok(inst) => {
                for s in t.sources {
                    if seen.insert(s.sha256) {
                        out.files.push(s);
                    }
                }
                out.instances.push((at, inst));
            }
            Err(e) => problems.push(Problem {
                at,
                message: e.to_string(),
            }),
        }
    }
    problems
}

/// Reads the task repository at `root`: refused, with every problem, when swebench 5.0.2's
/// checks find any, or `sweb.yaml` names a split no published task is in. Without `split`, its
/// published tasks (a split `sweb.yaml` names, a dataset it publishes); with one, the tasks
/// of that split, published or not (`deprecated`).
pub fn read_task_repo(root: &Path, split: Option<&str>) -> Result<TaskRepo, TaskRepoError> {
    let refuse = |problems: Vec<Problem>| TaskRepoError::Problems {
        root: root.to_path_buf(),
        problems,
    };
    let config = read_config(root).map_err(|p| refuse(vec![p]))?;
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    let tasks = read_tasks(root, &config, &mut problems, &mut warnings)?;
    let published = |t: &Task| {
        t.split.as_ref().is_some_and(|s| config.splits.contains(s))
            && t.datasets.iter().any(|d| config.datasets.contains(d))
    };
    for s in &config.splits {
        if !tasks
            .iter()
            .any(|t| t.split.as_ref() == Some(s) && published(t))
        {
            problems.push(Problem {
                at: CONFIG_FILE.into(),
                message: format!(
                    "names split `{s}`, which no task of a dataset it publishes is in"
                ),
            });
        }
    }
    let (repo_files, repo_sources) = repo_files(root, &config, &mut problems, &mut warnings);
    if !problems.is_empty() {
        return Err(refuse(problems));
    }
    let wanted = |t: &Task| match split {
        Some(s) => t.split.as_deref() == Some(s),
        None => published(t),
    };
    if let Some(s) = split
        && !tasks.iter().any(wanted)
    {
        let have: BTreeSet<String> = tasks.iter().filter_map(|t| t.split.clone()).collect();
        return Err(TaskRepoError::NoSuchSplit {
            root: root.to_path_buf(),
            split: s.to_string(),
            have: have.into_iter().collect(),
        });
    }
    let mut out = TaskRepo {
        datasets: config.datasets.clone(),
        splits: config.splits.clone(),
        files: repo_sources,
        warnings,
        ..TaskRepo::default()
    };
    let problems = take_instances(tasks, &wanted, &repo_files, &mut out);
    if !problems.is_empty() {
        return Err(refuse(problems));
    }
    Ok(out)
}
