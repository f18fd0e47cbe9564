//! A run's files as swebench 5.0.2 lays them out, for the tools people point at SWE-bench's
//! outputs: `run.json` (what the run graded against) beside the instances, and the whole run
//! copied under `logs/run_evaluation/<run-id>/` when asked (`replay --logs-dir`).

use std::path::{Path, PathBuf};

use crate::fsutil;

/// swebench's `LOG_RUN_METADATA`.
pub const RUN_METADATA: &str = "run.json";

/// Writes `<run dir>/run.json` as swebench 5's `write_run_metadata` does: the dataset and
/// split the run graded against (null when the run's instances come from several, or the
/// archive does not say), the task repository (kept from an earlier run.json: swe-ark's runs
/// grade against the archive, not a task repository), and when it was written.
pub fn write_run_metadata(
    run_dir: &Path,
    dataset: Option<&str>,
    split: Option<&str>,
) -> std::io::Result<PathBuf> {
    let path = run_dir.join(RUN_METADATA);
    let task_repo = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .map(|v| v["task_repo"].clone())
        .unwrap_or(serde_json::Value::Null);
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    // In swebench's order (a struct's fields keep theirs; a JSON map would sort them).
    #[derive(serde::Serialize)]
    struct RunMetadata {
        dataset: Option<String>,
        split: Option<String>,
        task_repo: serde_json::Value,
        created_at: String,
    }
    let meta = RunMetadata {
        dataset: dataset.map(crate::dataset::published_name),
        split: split.map(String::from),
        task_repo,
        // Python's isoformat(timespec="seconds") of a UTC time.
        created_at: now.replace('Z', "+00:00"),
    };
    let mut bytes = serde_json::to_vec_pretty(&meta).unwrap_or_default();
    bytes.push(b'\n');
    std::fs::create_dir_all(run_dir)?;
    fsutil::write_atomic(&path, &bytes)?;
    Ok(path)
}

/// Copies the run at `run_dir` (`<ark>/runs/<run-id>/`) to `logs/run_evaluation/<run-id>/`
/// under `logs`: every `<model>/<instance>/` with its `report.json`, `test_output.txt` and
/// `patch.diff`, `run.json`, and the run reports. Files already there are replaced; others
/// are left. Returns where the run went.
pub fn export_logs(run_dir: &Path, run_id: &str, logs: &Path) -> std::io::Result<PathBuf> {
    let to = logs.join("run_evaluation").join(run_id);
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let from = run_dir.join(&rel);
        std::fs::create_dir_all(to.join(&rel))?;
        for entry in std::fs::read_dir(&from)? {
            let entry = entry?;
            let name = PathBuf::from(entry.file_name());
            let kind = entry.file_type()?;
            if kind.is_dir() {
                stack.push(rel.join(&name));
            } else if kind.is_file() {
                let bytes = std::fs::read(entry.path())?;
                fsutil::write_atomic(&to.join(&rel).join(&name), &bytes)?;
            }
        }
    }
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_json_names_the_dataset_as_swebench_does_and_keeps_the_task_repo() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("run-1");
        let path = write_run_metadata(&dir, Some("swe-bench-lite"), None).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(v["dataset"], "SWE-bench/SWE-bench_Lite");
        assert_eq!(v["split"], serde_json::Value::Null);
        assert!(v["created_at"].as_str().unwrap().ends_with("+00:00"));
        std::fs::write(&path, r#"{"task_repo": "/data/tasks"}"#).unwrap();
        write_run_metadata(&dir, Some("acme"), Some("test")).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(v["task_repo"], "/data/tasks");
        assert_eq!(v["dataset"], "acme");
        assert_eq!(v["split"], "test");
        // Its keys in the order swebench writes them.
        let text = std::fs::read_to_string(&path).unwrap();
        let at = |k: &str| text.find(&format!("\"{k}\"")).unwrap();
        assert!(
            at("dataset") < at("split") && at("split") < at("task_repo"),
            "{text}"
        );
        assert!(at("task_repo") < at("created_at"), "{text}");
    }

    #[test]
    fn a_run_is_copied_where_swebench_keeps_its_logs() {
        let t = tempfile::tempdir().unwrap();
        let run = t.path().join("runs/r1");
        std::fs::create_dir_all(run.join("m__x/a__b-1")).unwrap();
        std::fs::write(run.join("m__x/a__b-1/report.json"), "{}").unwrap();
        std::fs::write(run.join("m__x.r1.json"), "{}").unwrap();
        let to = export_logs(&run, "r1", &t.path().join("logs")).unwrap();
        assert_eq!(to, t.path().join("logs/run_evaluation/r1"));
        assert!(to.join("m__x/a__b-1/report.json").is_file());
        assert!(to.join("m__x.r1.json").is_file());
    }
}
