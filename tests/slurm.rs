//! The Slurm job scripts of `contrib/slurm/` on a real one-node Slurm cluster on this machine
//! (slurmctld, slurmd and munge, started by scripts/slurm-local.sh and stopped after): a job
//! array of three shards over the acme/widget fixture, then the merge job that depends on
//! it. Skips where Slurm is not installed (`make tools` installs it as root with apt-get).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::widget::{ADD_TEST, GOLD, Widget, instance, test_patch};
use common::{TestContext, stderr, stdout};

fn script(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A cluster of this machine, stopped when dropped.
struct Cluster {
    dir: PathBuf,
    conf: String,
}

impl Cluster {
    fn start(dir: PathBuf) -> Cluster {
        let out = Command::new("bash")
            .arg(script("scripts/slurm-local.sh"))
            .arg("start")
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "slurm-local.sh start\n{}",
            stderr(&out)
        );
        let conf = stdout(&out)
            .lines()
            .last()
            .and_then(|l| l.strip_prefix("export SLURM_CONF="))
            .expect("SLURM_CONF on the last line")
            .to_string();
        Cluster { dir, conf }
    }

    /// The state of job `id` (COMPLETED, FAILED, PENDING, …) and its exit code.
    fn job(&self, id: &str) -> (String, String) {
        let out = Command::new("scontrol")
            .args(["show", "job", id])
            .env("SLURM_CONF", &self.conf)
            .output()
            .unwrap();
        let text = stdout(&out);
        let field = |name: &str| {
            text.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{name}=")))
                .unwrap_or_default()
                .to_string()
        };
        (field("JobState"), field("ExitCode"))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script("scripts/slurm-local.sh"))
            .arg("stop")
            .arg(&self.dir)
            .output();
    }
}

#[test]
fn a_slurm_job_array_runs_the_shards_and_a_dependent_job_merges_them() {
    let available = Command::new("bash")
        .arg(script("scripts/slurm-local.sh"))
        .arg("available")
        .output()
        .unwrap();
    if !available.status.success() {
        eprintln!("skipped: {}", stderr(&available).trim());
        return;
    }
    let t = TestContext::new();
    let Some(w) = Widget::new(&t) else { return };
    w.set_versions("[versions.\"1.1\"]\n\n[versions.\"1.2\"]\n");
    let more = "\n\ndef test_more():\n    assert True\n";
    let mut instances = [
        instance(1, &test_patch(ADD_TEST), GOLD, &[], &[], &w.base),
        instance(
            2,
            &test_patch(&format!("{ADD_TEST}{more}")),
            GOLD,
            &[],
            &[],
            &w.base,
        ),
        instance(3, &test_patch(ADD_TEST), GOLD, &[], &[], &w.base),
    ];
    instances[1]["version"] = "1.1".into();
    instances[2]["version"] = "1.2".into();
    w.add_mirror(&t);
    let data: String = instances.iter().map(|i| format!("{i}\n")).collect();
    let file = t.path("instances.jsonl");
    std::fs::write(&file, data).unwrap();
    w.ok(&t, &["import", file.to_str().unwrap()]);
    // One context locked in the seed already: its shard takes that lock and its wheels from
    // the seed rather than locking it again.
    w.ok(&t, &["env", "lock", "acme/widget", "1.1"]);
    let plan = t.path("plan.json");
    w.ok(
        &t,
        &[
            "plan",
            "--shards",
            "3",
            "--all",
            "-o",
            plan.to_str().unwrap(),
        ],
    );

    let cluster = Cluster::start(t.path("slurm"));
    let merged = t.path("merged");
    let logs = t.path("logs");
    // The fixture's variables (its manifests, its package index) reach the jobs: submit.sh
    // exports the caller's environment to them.
    let fixture = w.cmd(&t);
    let fixture_env: Vec<(&std::ffi::OsStr, &std::ffi::OsStr)> = fixture
        .get_envs()
        .filter_map(|(k, v)| Some((k, v?)))
        .collect();
    let submit = |cpus: &str| {
        Command::new("bash")
            .arg(script("contrib/slurm/submit.sh"))
            .args([&plan, &t.ark(), &t.path("shards"), &merged])
            .arg("all")
            .envs(fixture_env.iter().copied())
            .env("SLURM_CONF", &cluster.conf)
            .env("SWE_ARK", env!("CARGO_BIN_EXE_swe-ark"))
            .env("CPUS_PER_TASK", cpus)
            .env("SHARD_ARGS", "--runs 1 --timeout 300")
            .env("LOGS", &logs)
            .output()
            .unwrap()
    };
    // More CPUs per shard than the node has: the array would never be scheduled, so nothing
    // is submitted and the message says what to ask for instead.
    let out = submit("100000");
    assert_eq!(out.status.code(), Some(2), "submit.sh\n{}", stderr(&out));
    assert!(
        stderr(&out).contains("the nodes of partition local have at most")
            && stderr(&out).contains("Ask for fewer: CPUS_PER_TASK="),
        "{}",
        stderr(&out)
    );
    assert!(
        stdout(&out).is_empty() && !logs.exists(),
        "{}",
        stdout(&out)
    );
    let out = submit("1");
    assert!(out.status.success(), "submit.sh\n{}", stderr(&out));
    let ids = stdout(&out);
    let id_of = |what: &str| {
        ids.lines()
            .find_map(|l| l.strip_prefix(&format!("{what} ")))
            .unwrap()
            .trim()
            .to_string()
    };
    let (shards, merge) = (id_of("shards"), id_of("merge"));

    // The merge job ends once the array has: poll its state (a guard against a hang, not a
    // time limit on swe-ark).
    let start = Instant::now();
    let (state, code) = loop {
        let (state, code) = cluster.job(&merge);
        if [
            "COMPLETED",
            "FAILED",
            "CANCELLED",
            "TIMEOUT",
            "NODE_FAIL",
            "OUT_OF_MEMORY",
        ]
        .contains(&state.as_str())
            || state.is_empty()
        {
            break (state, code);
        }
        if state == "PENDING" && cluster.job(&shards).0 == "FAILED" {
            break (state, code);
        }
        assert!(
            start.elapsed() < Duration::from_secs(1800),
            "the merge job is still {state}"
        );
        std::thread::sleep(Duration::from_secs(2));
    };
    let log_text: String = std::fs::read_dir(&logs)
        .unwrap()
        .flatten()
        .map(|e| {
            format!(
                "== {}\n{}",
                e.path().display(),
                std::fs::read_to_string(e.path()).unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        (state.as_str(), code.as_str()),
        ("COMPLETED", "0:0"),
        "{log_text}"
    );
    // Three array tasks, each a shard of its own, and the merge: four logs.
    let task_logs = std::fs::read_dir(&logs)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("swe-ark-shard"))
        .count();
    assert_eq!(task_logs, 3, "{log_text}");
    for k in 0..3 {
        assert!(
            log_text.contains(&format!("shard {k} of 3 of plan")),
            "{log_text}"
        );
    }
    // Merged: every instance kept, the release registered.
    let listed = w.run_at(&t, &merged, &["ls", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let bundled = v
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| !r["bundles"].as_array().unwrap().is_empty())
        .count();
    assert_eq!(bundled, 3, "{log_text}");
    assert!(merged.join("releases/all.json").is_file());
}
