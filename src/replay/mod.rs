//! Replaying evaluation from bundles, offline: predictions in, SWE-bench's reports out.
//!
//! Per instance: the bundle checked and unpacked into a fresh work directory (its codebase made
//! a git work tree whose history answers `git describe` as its `vcs.json` says), the
//! environment built from the bundle's lock with objects only, the prediction's patch checked
//! and applied (three ways, in order), the install, the test files
//! reset and the test patch applied, the test command run in the sandbox, the log parsed and
//! graded as SWE-bench grades ([`grade`]). docs/REPLAY.md tells it for users.

pub mod grade;
pub mod patch;
pub mod predictions;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::bundle::{self, Limits};
use crate::dataset::Instance;
use crate::digest::Sha256Digest;
use crate::env::build::{self, BuildOptions};
use crate::env::pylock::PyLock;
use crate::logparse;
use crate::manifest::Context;
use crate::progress::NoProgress;
use crate::store::ObjectStore;
use crate::validate::{self, Runner, Stop, ValidateOptions};

pub use predictions::Prediction;

/// SWE-bench's `report.json` of one instance, with what swe-ark adds.
#[allow(non_snake_case)]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstanceReport {
    pub instance_id: String,
    pub model_name_or_path: String,
    pub patch_is_None: bool,
    pub patch_exists: bool,
    pub patch_successfully_applied: bool,
    pub resolved: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests_status: Option<grade::TestsStatus>,
    /// FULL, PARTIAL or NO (absent when the tests did not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<grade::Resolution>,
    /// Why the instance could not be evaluated (`empty_patch`, `patch_apply_failed`,
    /// `patch_unsafe`, `bundle_corrupt`, `env_build_failed`, `service_failed`, `timeout`, …),
    /// empty otherwise.
    pub error: String,
    pub error_detail: String,
    /// How the patch went in.
    pub applied_with: String,
    pub bundle: String,
    pub lock: String,
    /// `isolated` or `allowed`.
    pub network: String,
    /// The services the tests ran with (stand-ins for hosts of the internet among them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<String>,
    /// Seconds: the test command, and everything else.
    pub test_seconds: f64,
    pub overhead_seconds: f64,
    /// Seconds per step (unpack, worktree, environment, patch, install, test-patch, test,
    /// parse): where the overhead goes.
    #[serde(default)]
    pub timings: BTreeMap<String, f64>,
    /// What the grade was computed from besides the log: `--rewrite-reports` grades again
    /// from this and `test_output.txt`, with no bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grading: Option<GradingInputs>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GradingInputs {
    pub log_parser: String,
    #[serde(rename = "FAIL_TO_PASS")]
    pub fail_to_pass: Vec<String>,
    #[serde(rename = "PASS_TO_PASS")]
    pub pass_to_pass: Vec<String>,
}

/// Parses `output` and grades it into `report` (the tests ran: `report.grading` is set).
pub fn grade_output(report: &mut InstanceReport, output: &[u8]) -> Result<(), String> {
    let Some(g) = &report.grading else {
        return Err("the report keeps no grading inputs (the tests did not run)".into());
    };
    let map = logparse::parse(&g.log_parser, &String::from_utf8_lossy(output))
        .map_err(|e| e.to_string())?;
    let status = grade::tests_status(&map, &g.fail_to_pass, &g.pass_to_pass);
    let resolution = grade::resolution(&status);
    report.resolved = resolution == grade::Resolution::Full;
    report.resolution = Some(resolution);
    report.tests_status = Some(status);
    if report.error == "log_parse_failed" {
        report.error.clear();
        report.error_detail.clear();
    }
    Ok(())
}

/// Where a replay's files go: `runs/<run-id>/<model>/<instance>/`.
pub fn instance_dir(runs: &Path, run_id: &str, model: &str, instance_id: &str) -> PathBuf {
    runs.join(run_id)
        .join(model.replace('/', "__"))
        .join(instance_id)
}

/// Everything one replay needs besides the prediction.
pub struct ReplayInputs<'a> {
    pub bundle: &'a dyn bundle::BundleSource,
    pub bundle_id: Option<Sha256Digest>,
    pub objects: &'a ObjectStore,
    /// Where environments are cached (an archive's root).
    pub cache_root: &'a Path,
    pub work_root: &'a Path,
    pub opts: &'a ValidateOptions,
}

/// A report of `p` before anything ran.
pub fn blank_report(p: &Prediction, bundle: &str) -> InstanceReport {
    InstanceReport {
        instance_id: p.instance_id.clone(),
        model_name_or_path: p.model.clone(),
        patch_is_None: p.patch.is_none(),
        patch_exists: p.patch.as_deref().is_some_and(|s| !s.trim().is_empty()),
        patch_successfully_applied: false,
        resolved: false,
        tests_status: None,
        resolution: None,
        error: String::new(),
        error_detail: String::new(),
        applied_with: String::new(),
        bundle: bundle.to_string(),
        lock: String::new(),
        network: String::new(),
        services: Vec::new(),
        test_seconds: 0.0,
        overhead_seconds: 0.0,
        grading: None,
        timings: BTreeMap::new(),
    }
}

/// Replays one prediction; returns the report and the test output (when the tests ran).
pub fn replay_one(inputs: &ReplayInputs, p: &Prediction) -> (InstanceReport, Vec<u8>) {
    let started = Instant::now();
    let bundle_shown = inputs
        .bundle_id
        .map(|b| b.hex())
        .unwrap_or_else(|| inputs.bundle.name().display().to_string());
    let mut report = blank_report(p, &bundle_shown);
    if !report.patch_exists {
        report.error = "empty_patch".into();
        report.error_detail = "the prediction has no patch".into();
        return (report, Vec::new());
    }
    let work = match tempfile::Builder::new()
        .prefix(".tmp-replay-")
        .tempdir_in(inputs.work_root)
    {
        Ok(w) => w,
        Err(e) => {
            report.error = "io".into();
            report.error_detail = format!("{}: {e}", inputs.work_root.display());
            return (report, Vec::new());
        }
    };
    let mut output = Vec::new();
    if let Err(Stop(kind, detail)) = run_steps(inputs, p, work.path(), &mut report, &mut output) {
        report.error = kind.to_string();
        report.error_detail = detail;
    }
    let total = started.elapsed().as_secs_f64();
    report.overhead_seconds = (total - report.test_seconds).max(0.0);
    if inputs.opts.keep_workdir {
        let _ = work.keep();
    }
    (report, output)
}

fn run_steps(
    inputs: &ReplayInputs,
    p: &Prediction,
    work: &Path,
    report: &mut InstanceReport,
    output: &mut Vec<u8>,
) -> Result<(), Stop> {
    // 1. The bundle, every member checked against its manifest, the whole against its id.
    let mut clock = Instant::now();
    let mut lap = |report: &mut InstanceReport, step: &str| {
        report
            .timings
            .insert(step.to_string(), clock.elapsed().as_secs_f64());
        clock = Instant::now();
    };
    let unpacked = work.join("bundle");
    bundle::unpack_from(
        inputs.bundle,
        &unpacked,
        inputs.bundle_id,
        &Limits::default(),
        &NoProgress,
    )
    .map_err(|e| Stop("bundle_corrupt", e.to_string()))?;
    let read = |rel: &str| {
        std::fs::read(unpacked.join(rel))
            .map_err(|e| Stop("bundle_incomplete", format!("the bundle has no {rel}: {e}")))
    };
    let instance = Instance::from_json(&read("instance.json")?)
        .map_err(|e| Stop("bundle_incomplete", e.to_string()))?;
    if instance.instance_id != p.instance_id {
        return Err(Stop(
            "bundle_mismatch",
            format!(
                "the bundle holds instance {}, not {}",
                instance.instance_id, p.instance_id
            ),
        ));
    }
    let spec = read("env/spec.toml")?;
    let ctx: Context = toml::from_str(&String::from_utf8_lossy(&spec))
        .map_err(|e| Stop("bundle_incomplete", format!("env/spec.toml: {e}")))?;
    let lock_bytes = read("env/pylock.toml")?;
    let lock_id = Sha256Digest::of(&lock_bytes);
    report.lock = lock_id.hex();
    let lock = PyLock::parse(&lock_bytes).map_err(|e| Stop("bundle_incomplete", e.to_string()))?;
    // What git said about the base commit (format version 2); unpack checked it already.
    let vcs = match std::fs::read(unpacked.join(crate::vcs::MEMBER)) {
        Ok(bytes) => Some(
            crate::vcs::VcsRecord::from_bytes(&bytes)
                .map_err(|e| Stop("bundle_corrupt", e.to_string()))?,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Stop("io", format!("{}: {e}", crate::vcs::MEMBER))),
    };
    if let Some(v) = &vcs
        && v.base_commit.hex() != instance.base_commit
    {
        return Err(Stop(
            "bundle_mismatch",
            format!(
                "the bundle's vcs.json is about commit {}, its instance's base commit is {}",
                v.base_commit, instance.base_commit
            ),
        ));
    }

    // 2. The codebase as a git work tree, the environment from objects only.
    let src = work.join("src");
    std::fs::rename(unpacked.join("codebase"), &src)
        .map_err(|e| Stop("io", format!("{}: {e}", src.display())))?;
    lap(report, "unpack");
    // The git work tree and the environment side by side: one is mostly git hashing the
    // codebase, the other mostly copying files.
    let ((tree, tree_seconds), env) = std::thread::scope(|s| {
        let tree = s.spawn(|| {
            let t = Instant::now();
            let built = crate::vcs::build_work_tree(&src, vcs.as_ref()).map_err(|e| e.to_string());
            (built, t.elapsed().as_secs_f64())
        });
        let t = Instant::now();
        let env = build::build(
            inputs.objects,
            inputs.cache_root,
            &lock_id,
            &lock,
            &BuildOptions::default(),
        )
        .map_err(|e| e.to_string())
        .and_then(|built| {
            let venv =
                build::instance_copy(&built, &work.join("venv")).map_err(|e| e.to_string())?;
            Ok((built, venv, t.elapsed().as_secs_f64()))
        });
        let tree = tree
            .join()
            .unwrap_or_else(|_| (Err("the git work tree thread panicked".into()), 0.0));
        (tree, env)
    });
    tree.map_err(|e| Stop("io", e))?;
    let (built, venv, env_seconds) = env.map_err(|e| Stop("env_build_failed", e))?;
    report.timings.insert("worktree".into(), tree_seconds);
    report.timings.insert("environment".into(), env_seconds);
    lap(report, "worktree+environment");

    // 3. The prediction's patch, checked before anything runs.
    let patch_text = p.patch.clone().unwrap_or_default();
    if let Some(why) = patch::unsafe_path(&patch_text, &src) {
        return Err(Stop("patch_unsafe", why));
    }

    // 4. The context's setup, as SWE-bench's image has it when the patch goes in: its
    // pre_install run and committed.
    let mut runner = Runner::new(work, src.clone(), &ctx, &built, &venv, inputs.opts)?;
    runner
        .setup(&ctx, vcs.as_ref())
        .map_err(|Stop(kind, detail)| {
            Stop(
                if kind == "pre-install-failed" {
                    "pre_install_failed"
                } else {
                    "io"
                },
                detail,
            )
        })?;
    lap(report, "setup");

    // 5. The patch, applied one way or another.
    let patch_file = work.join("model.diff");
    std::fs::write(&patch_file, &patch_text).map_err(|e| Stop("io", e.to_string()))?;
    let (way, transcript) = patch::apply(&src, &patch_file);
    lap(report, "patch");
    let Some(way) = way else {
        return Err(Stop("patch_apply_failed", transcript));
    };
    report.patch_successfully_applied = true;
    report.applied_with = way.to_string();

    // 6. As SWE-bench's evaluation script: install, reset the test files, the test patch,
    // the test command.
    let prelude = validate::eval_prelude(&ctx);
    if !ctx.install.is_empty() {
        // A failed install is not an error of the run: the tests say what it cost.
        runner.run("install", &format!("{prelude}{}\n", ctx.install))?;
    }
    lap(report, "install");
    // The files the test patch touches, back to the base commit (a model may have edited
    // them); one at a time, since new ones are not in the base commit.
    for f in patch::touched_paths(&instance.test_patch) {
        let _ = std::process::Command::new("git")
            .args(["checkout", "-q", "HEAD", "--", &f])
            .current_dir(&src)
            .output();
    }
    runner
        .apply("test-patch", &instance.test_patch)
        .map_err(|Stop(_, d)| Stop("test_patch_apply_failed", d))?;
    let directives = validate::directives::test_directives(&instance.test_patch, &ctx.test_cmd);
    let test_cmd = format!(
        "{} {}",
        ctx.test_cmd,
        directives
            .iter()
            .map(|d| validate::directives::shell_quote(d))
            .collect::<Vec<_>>()
            .join(" ")
    );
    report.services = runner.services.described.clone();
    lap(report, "test-patch");
    let result = runner
        .run_tests("test", &prelude, &test_cmd)
        .map_err(|Stop(kind, detail)| match kind {
            "service-failed" => Stop("service_failed", detail),
            _ => Stop(kind, detail),
        });
    lap(report, "test");
    report.test_seconds = report.timings.get("test").copied().unwrap_or(0.0);
    report.network = runner.network.to_string();
    let (log, _) = result?;
    *output = log;
    report.grading = Some(GradingInputs {
        log_parser: ctx.log_parser.clone(),
        fail_to_pass: instance.fail_to_pass.clone(),
        pass_to_pass: instance.pass_to_pass.clone(),
    });
    let graded = grade_output(report, output).map_err(|e| Stop("log_parse_failed", e));
    lap(report, "parse");
    graded
}
