//! Writing a task repository: a task imported from one comes back as its own files, byte for
//! byte; a version-5 row (its harness fields in the row) becomes the files swebench 5.0.2's
//! `load_task` reads back as the same row.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::read::{TaskRepoError, read_task_repo};
use super::yaml;
use super::{
    AS_FILE, CONFIG_FILE, DEPRECATED_SPLIT, HINTS, TASK_FILE, TASK_KEY, TASKS_DIR, TEST_KEYS,
    TESTS_FILE, TaskRecord, expected_image,
};
use crate::dataset::instance::Instance;
use crate::dataset::msb::{LAYOUT_KEY, RowForm, row_form};
use crate::digest::Sha256Digest;
use crate::fsutil;

/// One file of the repository to write, by its `/`-separated path in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFile {
    pub path: String,
    pub content: Content,
    pub executable: bool,
}

/// What a file holds: an object of the store, or bytes made here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    Object(Sha256Digest),
    Bytes(Vec<u8>),
}

/// Why instances cannot be written as a task repository. Nothing is written.
#[derive(Debug, thiserror::Error)]
pub enum TaskRepoExportError {
    #[error(
        "{} instance(s) came as Multi-SWE-bench rows, which a task repository does not hold: {}",
        .0.len(), .0.join(", ")
    )]
    MultiSweBench(Vec<String>),
    #[error(
        "{} instance(s) lack what a task of swebench 5 needs (`{}`: rows of swebench 4's form \
         have none; version-5 rows carry them): {}",
        .ids.len(), .fields.join("`, `"), .ids.join(", ")
    )]
    NoHarness {
        ids: Vec<String>,
        fields: Vec<String>,
    },
    #[error(
        "{} instance(s) belong to no dataset (collected here, not imported): say which with \
         --dataset NAME: {}",
        .0.len(), .0.join(", ")
    )]
    NoDataset(Vec<String>),
    #[error("cannot read {what} (object {id}): {source}")]
    Object {
        what: String,
        id: Sha256Digest,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "instance `{id}` would write `{path}`, which is not a plain relative path (no `..`, no \
         leading `/`): nothing is written"
    )]
    UnsafePath { id: String, path: String },
    #[error("`{}` exists and is not an empty folder: a task repository is written anew", .0.display())]
    Exists(PathBuf),
    #[error("cannot write `{}`: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the task repository written does not read back (a fault of swe-ark's): {0}")]
    Unreadable(Box<TaskRepoError>),
}

/// Writes `files` as the task repository `dest`, which must not exist or be an empty folder:
/// into a temporary folder beside it, read back with [`read_task_repo`]'s checks, then
/// renamed into place; nothing is left at `dest` when any of it fails.
pub fn write_task_repo(
    dest: &Path,
    files: &[TaskFile],
    read: ReadObject<'_>,
) -> Result<(), TaskRepoExportError> {
    let empty_dir = std::fs::read_dir(dest).is_ok_and(|mut d| d.next().is_none());
    if dest.symlink_metadata().is_ok() && !empty_dir {
        return Err(TaskRepoExportError::Exists(dest.to_path_buf()));
    }
    let parent = fsutil::parent_dir(dest);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TaskRepoExportError::Io { path, source }
    };
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let staged = tempfile::Builder::new()
        .prefix(fsutil::TEMP_PREFIX)
        .tempdir_in(parent)
        .map_err(io(parent))?;
    for f in files {
        let path = staged.path().join(&f.path);
        let bytes = match &f.content {
            Content::Bytes(b) => b.clone(),
            Content::Object(id) => read(id).map_err(|source| TaskRepoExportError::Object {
                what: f.path.clone(),
                id: *id,
                source,
            })?,
        };
        let dir = fsutil::parent_dir(&path);
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        // On disk before the folder is renamed into place.
        let mut file = std::fs::File::create(&path).map_err(io(&path))?;
        file.write_all(&bytes)
            .and_then(|()| file.sync_all())
            .map_err(io(&path))?;
        let mode = if f.executable { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .map_err(io(&path))?;
    }
    read_task_repo(staged.path(), None)
        .map_err(|e| TaskRepoExportError::Unreadable(Box::new(e)))?;
    std::fs::set_permissions(staged.path(), std::fs::Permissions::from_mode(0o755))
        .map_err(io(staged.path()))?;
    let staged = staged.keep();
    std::fs::rename(&staged, dest).map_err(|source| {
        let _ = fsutil::remove_tree(&staged);
        TaskRepoExportError::Io {
            path: dest.to_path_buf(),
            source,
        }
    })?;
    fsutil::sync_dir(parent).map_err(io(parent))
}

/// Gives an object's bytes, checked against its id.
pub type ReadObject<'a> = &'a dyn Fn(&Sha256Digest) -> std::io::Result<Vec<u8>>;

/// An instance to write, with the dataset it belongs to as swebench names it
/// (`SWE-bench/SWE-bench_Lite`), for a task made from a row.
pub struct ToWrite<'a> {
    pub instance: &'a Instance,
    pub dataset: Option<String>,
}

/// The fields a task made from a row needs in it: its `eval.sh` and what `task.yaml` must have.
const ROW_NEEDS: [&str; 3] = ["eval_script", "log_parser", "eval_type"];

/// The files of a task repository of `instances`; `split` is the split of a task made from a
/// row; `read` gives an object's bytes (to read a kept `sweb.yaml`).
pub fn task_repo_files(
    instances: &[ToWrite<'_>],
    split: &str,
    read: ReadObject<'_>,
) -> Result<(Vec<TaskFile>, Vec<String>), TaskRepoExportError> {
    let msb: Vec<String> = instances
        .iter()
        .filter(|w| row_form(w.instance) == RowForm::MultiSweBench)
        .map(|w| w.instance.instance_id.clone())
        .collect();
    if !msb.is_empty() {
        return Err(TaskRepoExportError::MultiSweBench(msb));
    }
    let records: Vec<Option<TaskRecord>> = instances
        .iter()
        .map(|w| TaskRecord::of(w.instance))
        .collect();
    // Every path stays inside the repository, whatever an archive's instance says.
    for (w, r) in instances.iter().zip(&records) {
        let id = &w.instance.instance_id;
        let kept = r
            .iter()
            .flat_map(|r| r.files.keys().chain(r.repo_files.keys()));
        if let Some(bad) = std::iter::once(id).chain(kept).find(|p| !is_plain_path(p)) {
            return Err(TaskRepoExportError::UnsafePath {
                id: id.clone(),
                path: bad.clone(),
            });
        }
    }
    let mut lacking = Vec::new();
    let mut fields = BTreeSet::new();
    let mut no_dataset = Vec::new();
    for (w, r) in instances.iter().zip(&records) {
        if r.is_some() {
            continue;
        }
        let missing: Vec<&str> = ROW_NEEDS
            .iter()
            .copied()
            .filter(|f| {
                w.instance
                    .extra
                    .get(*f)
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
            })
            .collect();
        if !missing.is_empty() {
            lacking.push(w.instance.instance_id.clone());
            fields.extend(missing.iter().map(|s| s.to_string()));
        }
        if w.dataset.is_none() {
            no_dataset.push(w.instance.instance_id.clone());
        }
    }
    if !lacking.is_empty() {
        return Err(TaskRepoExportError::NoHarness {
            ids: lacking,
            fields: fields.into_iter().collect(),
        });
    }
    if !no_dataset.is_empty() {
        return Err(TaskRepoExportError::NoDataset(no_dataset));
    }
    let mut files = Vec::new();
    let mut notes = Vec::new();
    // Each task: published as (split, datasets).
    let mut published: Vec<(String, Vec<String>)> = Vec::new();
    for (w, r) in instances.iter().zip(&records) {
        let id = &w.instance.instance_id;
        match r {
            Some(r) => {
                for (rel, kept) in &r.files {
                    files.push(TaskFile {
                        path: format!("{TASKS_DIR}/{id}/{rel}"),
                        content: Content::Object(kept.sha256),
                        executable: kept.executable,
                    });
                }
                published.push((r.split.clone(), r.datasets.clone()));
            }
            None => {
                let dataset = w.dataset.clone().unwrap_or_default();
                files.extend(task_of_row(w.instance, split, &dataset));
                published.push((split.to_string(), vec![dataset]));
            }
        }
    }
    let kept = kept_repo_files(&records, &published, read)?;
    match kept {
        Some(repo_files) => files.extend(repo_files),
        None => {
            files.push(generated_config(&published));
            if records.iter().any(Option::is_some) {
                notes.push(format!(
                    "{CONFIG_FILE} is written anew: the instances' own would name a dataset or \
                     split none of them is in, or they came from different repositories"
                ));
            }
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((files, notes))
}

/// The files of a task made from a row, as swebench's `load_task` reads back the row.
fn task_of_row(inst: &Instance, split: &str, dataset: &str) -> Vec<TaskFile> {
    let id = &inst.instance_id;
    let Value::Object(mut row) = inst.to_value() else {
        return Vec::new();
    };
    let file = |name: &str, bytes: Vec<u8>| TaskFile {
        path: format!("{TASKS_DIR}/{id}/{name}"),
        content: Content::Bytes(bytes),
        executable: false,
    };
    let mut out = Vec::new();
    for (column, name) in AS_FILE {
        let text = row
            .remove(column)
            .and_then(|v| v.as_str().map(String::from));
        out.push(file(name, text.unwrap_or_default().into_bytes()));
    }
    if let Some(Value::String(hints)) = row.remove(HINTS.0)
        && !hints.is_empty()
    {
        out.push(file(HINTS.1, hints.into_bytes()));
    }
    let mut tests = Map::new();
    for key in TEST_KEYS {
        tests.insert(
            key.into(),
            row.remove(key).unwrap_or(Value::Array(Vec::new())),
        );
    }
    // swebench's `dump_tests`: json.dumps(indent=2, ensure_ascii=False) and a newline.
    let mut tests_json = serde_json::to_vec_pretty(&Value::Object(tests)).unwrap_or_default();
    tests_json.push(b'\n');
    out.push(file(TESTS_FILE, tests_json));
    row.remove(TASK_KEY);
    row.remove(LAYOUT_KEY);
    let image = match row.get("image").and_then(Value::as_str) {
        Some(i) if !i.is_empty() => i.to_string(),
        _ => {
            let derived = expected_image(id);
            row.insert("image".into(), Value::String(derived.clone()));
            derived
        }
    };
    row.insert("split".into(), Value::String(split.into()));
    row.insert(
        "datasets".into(),
        Value::Array(vec![Value::String(dataset.into())]),
    );
    out.push(file(TASK_FILE, yaml::emit(&row).into_bytes()));
    // The image the row names is the one its harness runs: built from it, unchanged.
    out.push(file("Dockerfile", format!("FROM {image}\n").into_bytes()));
    out
}

/// The repository files the instances kept, when they all kept the same and its `sweb.yaml`
/// publishes nothing the instances written leave empty.
fn kept_repo_files(
    records: &[Option<TaskRecord>],
    published: &[(String, Vec<String>)],
    read: ReadObject<'_>,
) -> Result<Option<Vec<TaskFile>>, TaskRepoExportError> {
    let Some(Some(first)) = records.first() else {
        return Ok(None);
    };
    if records
        .iter()
        .any(|r| r.as_ref().is_none_or(|r| r.repo_files != first.repo_files))
    {
        return Ok(None);
    }
    let Some(config) = first.repo_files.get(CONFIG_FILE) else {
        return Ok(None);
    };
    let bytes = read(&config.sha256).map_err(|source| TaskRepoExportError::Object {
        what: CONFIG_FILE.into(),
        id: config.sha256,
        source,
    })?;
    let Ok(Value::Object(map)) = yaml::parse(&String::from_utf8_lossy(&bytes)) else {
        return Ok(None);
    };
    let list = |key: &str| -> Vec<String> {
        map.get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let datasets = list("datasets");
    let splits = match map.get("splits") {
        None => vec!["test".to_string()],
        Some(_) => list("splits"),
    };
    let all_used = splits.iter().all(|s| {
        published
            .iter()
            .any(|(split, ds)| split == s && ds.iter().any(|d| datasets.contains(d)))
    });
    if !all_used {
        return Ok(None);
    }
    Ok(Some(
        first
            .repo_files
            .iter()
            .map(|(rel, kept)| TaskFile {
                path: rel.clone(),
                content: Content::Object(kept.sha256),
                executable: kept.executable,
            })
            .collect(),
    ))
}

/// A `sweb.yaml` publishing the instances' datasets (in the order first met) and their splits.
fn generated_config(published: &[(String, Vec<String>)]) -> TaskFile {
    let mut datasets: Vec<String> = Vec::new();
    let mut splits = BTreeSet::new();
    for (split, ds) in published {
        if split != DEPRECATED_SPLIT {
            splits.insert(split.clone());
        }
        for d in ds {
            if !datasets.contains(d) {
                datasets.push(d.clone());
            }
        }
    }
    let strings = |v: Vec<String>| Value::Array(v.into_iter().map(Value::String).collect());
    let mut map = Map::new();
    map.insert("datasets".into(), strings(datasets));
    map.insert("splits".into(), strings(splits.into_iter().collect()));
    TaskFile {
        path: CONFIG_FILE.into(),
        content: Content::Bytes(yaml::emit(&map).into_bytes()),
        executable: false,
    }
}

/// Whether `p` is a relative path of plain names (`a/b.png`): no `..`, `.`, empty part or root.
fn is_plain_path(p: &str) -> bool {
    !p.is_empty()
        && p.split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_are_written() {
        for ok in [
            "tasks",
            "test_assets/a/b.png",
            "acme__widgets-1",
            ".gitkeep",
        ] {
            assert!(is_plain_path(ok), "{ok}");
        }
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/"] {
            assert!(!is_plain_path(bad), "{bad}");
        }
    }
}
