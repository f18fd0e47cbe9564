//! Replaying evaluation from bundles, offline: predictions in, SWE-bench's reports out.
//!
//! Per instance: the bundle checked and unpacked into a fresh work directory, its instance,
//! context, lock and record of git given to the harness's procedure
//! ([`crate::harness::Instance`]), which runs one evaluation with the prediction's patch (its
//! paths checked, applied the harness's ways); the log parsed and graded as SWE-bench grades
//! ([`grade`]). docs/REPLAY.md tells it for users.

pub mod grade;
pub mod infra;
pub mod logs;
mod msb_report;
pub mod predictions;
mod run;

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::bundle::{self, Limits};
use crate::context::{self as kinds, Lock};
use crate::dataset::Instance;
use crate::digest::Sha256Digest;
use crate::harness::worktree::WorkTreeFrom;
use crate::harness::{self, Evaluated, Evaluation, PatchIn, Prepared, Reason, RunOptions, Stop};
use crate::logparse;
use crate::manifest::Context;
use crate::progress::NoProgress;
use crate::store::ObjectStore;
use crate::verdict::reason_or_empty;

pub use predictions::Prediction;
pub use run::{
    Predictions, ReplayError, ReplayOptions, RunReport, rewrite_reports, run, screen_summary,
    summarize_run, valid_run_id,
};

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
    /// Why the instance could not be evaluated (`empty-patch`, `patch-apply-failed`,
    /// `patch-unsafe`, `bundle-corrupt`, `env-build-failed`, `service-failed`, `timeout`, …),
    /// empty otherwise.
    #[serde(with = "reason_or_empty")]
    pub error: Option<Reason>,
    pub error_detail: String,
    /// How the patch went in.
    pub applied_with: String,
    pub bundle: String,
    pub lock: String,
    /// `isolated` or `allowed`.
    pub network: String,
    /// `confined`, or `unconfined` (`--unconfined`); empty in reports from before
    /// confinement, and when the instance never ran.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub confinement: String,
    /// How the environment was given to the commands: `overlay` (a private writable layer
    /// over the lock's shared copy) or `copy` (docs/SANDBOX.md, "Layers"); empty for kinds
    /// with nothing to layer, and in reports from before layers.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub environment_mount: String,
    /// How the work tree was given to the commands: `overlay` (a private writable layer
    /// over the bundle's kept tree), `reflink` or `copy` of it, or `built` for the run
    /// (docs/REPLAY.md, "The work tree"); empty in reports from before kept trees.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub worktree_mount: String,
    /// The installed state the run started from (`kept`) or made (`made`), and why the
    /// install ran again after the patch (docs/REPLAY.md, "The installed state"); absent when
    /// none was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed_state: Option<crate::harness::InstalledUse>,
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
    /// What ran the tests: `eval_script` (the dataset row's own), or `context` (the manifest
    /// context's install and test command); empty when the tests did not run.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub evaluated_with: String,
    /// Why this instance does not count among those that reproduce here (no bundle; a bundle
    /// of an instance validation did not keep, graded against the published lists all the
    /// same); empty when it does. The run report scores both ways.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub excluded: String,
    /// What was put back before the tests because the prediction may not change it: files that
    /// decide how tests are collected or reported (docs/GRADING.md), each with what was done.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reset_paths: Vec<String>,
    /// The rules the grade follows (`swebench-5`, `swebench-4`); empty in reports from before
    /// there was a choice, and when nothing was graded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub grading_rules: String,
    /// Published tests that cannot run here, each with why (the bundle's `expected.json`:
    /// they need the network, or what only conda provides), when they are all that kept
    /// validation from reproducing the published lists. The instance then counts among those
    /// that reproduce, graded without them ([`InstanceReport::resolved_here`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cannot_run: BTreeMap<String, String>,
    /// The grade without the tests of [`InstanceReport::cannot_run`] (absent when there are
    /// none): what the score of the instances that reproduce here counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_here: Option<bool>,
    /// The id its dataset's own harness names it by, where that is not the instance id
    /// (Multi-SWE-bench's `org/repo:pr-NUMBER`): the run then also writes that harness's
    /// report form ([`msb_report`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_id: Option<String>,
    /// swebench 5's: the tests left no log to grade and the log shows the environment broke
    /// (`infra_failure_reason` says how). Advisory: the instance stays unresolved.
    #[serde(default)]
    pub infra_failure: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub infra_failure_reason: String,
    /// Why an instance that did not resolve failed, as swebench 5 classifies a run's logs
    /// ([`infra`]): a signature's name (`network_unreachable`) or swe-ark's own reason
    /// (`env_build_failed`), and its tier, `environment` or `ambiguous`; empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub failure_reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub failure_tier: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GradingInputs {
    pub log_parser: String,
    #[serde(rename = "FAIL_TO_PASS")]
    pub fail_to_pass: Vec<String>,
    #[serde(rename = "PASS_TO_PASS")]
    pub pass_to_pass: Vec<String>,
    /// How the lists are judged (a version-5 dataset row's `eval_type`).
    #[serde(default)]
    pub eval_type: grade::EvalType,
    /// The test command's own exit code (absent in reports from before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_exit_code: Option<i64>,
    /// Published tests that cannot run here: graded without them too (`resolved_here`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cannot_run: Vec<String>,
}

/// Why a saved test output could not be graded.
#[derive(Debug, thiserror::Error)]
pub enum GradeError {
    #[error("the report keeps no grading inputs (the tests did not run)")]
    NoGradingInputs,
    #[error(transparent)]
    Parse(#[from] logparse::LogParseError),
}

/// Parses `output` and grades it into `report` by the rules of `grading` (the tests ran:
/// `report.grading` is set). A log those rules refuse to grade ([`grade::Ungraded`]) makes
/// the instance an error of the run, with the reason, not an unresolved one.
pub fn grade_output(
    report: &mut InstanceReport,
    output: &[u8],
    grading: grade::Grading,
) -> Result<(), GradeError> {
    let Some(g) = &report.grading else {
        return Err(GradeError::NoGradingInputs);
    };
    let text = String::from_utf8_lossy(output);
    let map = logparse::parse_for(&g.log_parser, &text, grading, &report.instance_id)?;
    // A grade replaces whatever an earlier grading of this output said.
    if matches!(
        report.error,
        Some(Reason::LogParseFailed | Reason::TestsDidNotRun | Reason::LogContradictsExitCode)
    ) {
        report.error = None;
        report.error_detail.clear();
    }
    report.grading_rules = grading.name().to_string();
    if let Err(why) = grade::check_log(grading, &map, &text, g.test_exit_code) {
        report.error = Some(match why {
            grade::Ungraded::SuiteDidNotRun => Reason::TestsDidNotRun,
            grade::Ungraded::ExitCodeContradictsLog { .. } => Reason::LogContradictsExitCode,
        });
        report.error_detail = why.to_string();
        report.resolved = false;
        report.resolved_here = None;
        report.resolution = None;
        report.tests_status = None;
        return Ok(());
    }
    let status = grade::tests_status(grading, g.eval_type, &map, &g.fail_to_pass, &g.pass_to_pass);
    let resolution = grade::resolution(&status);
    report.resolved_here = (!g.cannot_run.is_empty()).then(|| {
        let runs = |list: &[String]| -> Vec<String> {
            list.iter()
                .filter(|t| !g.cannot_run.contains(t))
                .cloned()
                .collect()
        };
        let here = grade::tests_status(
            grading,
            g.eval_type,
            &map,
            &runs(&g.fail_to_pass),
            &runs(&g.pass_to_pass),
        );
        grade::resolution(&here) == grade::Resolution::Full
    });
    report.resolved = resolution == grade::Resolution::Full;
    report.resolution = Some(resolution);
    report.tests_status = Some(status);
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
    pub opts: &'a RunOptions,
    /// Whose rules: patch application, log parsing and grading.
    pub grading: grade::Grading,
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
        error: None,
        error_detail: String::new(),
        applied_with: String::new(),
        bundle: bundle.to_string(),
        lock: String::new(),
        network: String::new(),
        confinement: String::new(),
        environment_mount: String::new(),
        worktree_mount: String::new(),
        installed_state: None,
        services: Vec::new(),
        test_seconds: 0.0,
        overhead_seconds: 0.0,
        grading: None,
        evaluated_with: String::new(),
        excluded: String::new(),
        reset_paths: Vec::new(),
        grading_rules: String::new(),
        timings: BTreeMap::new(),
        cannot_run: BTreeMap::new(),
        resolved_here: None,
        harness_id: None,
        infra_failure: false,
        infra_failure_reason: String::new(),
        failure_reason: String::new(),
        failure_tier: String::new(),
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
        report.error = Some(Reason::EmptyPatch);
        report.error_detail = "the prediction has no patch".into();
        return (report, Vec::new());
    }
    let work = match crate::fsutil::work_dir(inputs.work_root, ".tmp-replay-") {
        Ok(w) => w,
        Err(e) => {
            report.error = Some(Reason::Io);
            report.error_detail = format!("{}: {e}", inputs.work_root.display());
            return (report, Vec::new());
        }
    };
    let mut output = Vec::new();
    if let Err(Stop(kind, detail)) = run_steps(inputs, p, work.path(), &mut report, &mut output) {
        report.error = Some(kind);
        report.error_detail = detail;
    }
    let total = started.elapsed().as_secs_f64();
    report.overhead_seconds = (total - report.test_seconds).max(0.0);
    if inputs.opts.keep_workdir {
        let _ = work.keep();
    }
    (report, output)
}

/// What replay takes from a bundle, checked.
struct Unpacked {
    instance: Instance,
    ctx: Context,
    lock: Box<dyn Lock>,
    vcs: Option<crate::vcs::VcsRecord>,
    /// Why validation did not keep the instance, when its record says so.
    not_kept: Option<String>,
    /// The published tests that cannot run here, when they alone kept it from reproducing.
    cannot_run: BTreeMap<String, String>,
}

/// Step 1: the bundle unpacked into `work/bundle`, every member checked against its manifest,
/// the whole against its id; its instance, context, lock and record of git read and checked
/// against each other and the prediction.
/// With `codebase` false (its work tree is kept), the codebase is checked, not written.
fn unpack(
    inputs: &ReplayInputs,
    p: &Prediction,
    work: &Path,
    codebase: bool,
) -> Result<Unpacked, Stop> {
    let unpacked = work.join("bundle");
    if codebase {
        bundle::unpack_from(
            inputs.bundle,
            &unpacked,
            inputs.bundle_id,
            &Limits::default(),
            &NoProgress,
        )
        .map(drop)
    } else {
        unpack_but_codebase(inputs, &unpacked)
    }
    .map_err(|e| Stop(Reason::BundleCorrupt, e.to_string()))?;
    let incomplete = |why: String| Stop(Reason::BundleIncomplete, why);
    let read = |rel: &str| {
        std::fs::read(unpacked.join(rel))
            .map_err(|e| incomplete(format!("the bundle has no {rel}: {e}")))
    };
    let instance =
        Instance::from_json(&read("instance.json")?).map_err(|e| incomplete(e.to_string()))?;
    if instance.instance_id != p.instance_id {
        return Err(Stop(
            Reason::BundleMismatch,
            format!(
                "the bundle holds instance {}, not {}",
                instance.instance_id, p.instance_id
            ),
        ));
    }
    let spec = read("env/spec.toml")?;
    let ctx: Context = toml::from_str(&String::from_utf8_lossy(&spec))
        .map_err(|e| incomplete(format!("env/spec.toml: {e}")))?;
    let kind = kinds::kind_of(&ctx).map_err(|e| incomplete(e.to_string()))?;
    let lock_bytes = read(kind.lock_member())?;
    let lock = kind
        .read_lock(Sha256Digest::of(&lock_bytes), &lock_bytes)
        .map_err(|e| incomplete(e.to_string()))?;
    // What git said about the base commit (format version 2); unpack checked it already.
    let vcs = match std::fs::read(unpacked.join(crate::vcs::MEMBER)) {
        Ok(bytes) => Some(
            crate::vcs::VcsRecord::from_bytes(&bytes)
                .map_err(|e| Stop(Reason::BundleCorrupt, e.to_string()))?,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Stop(Reason::Io, format!("{}: {e}", crate::vcs::MEMBER))),
    };
    if let Some(v) = &vcs
        && v.base_commit.hex() != instance.base_commit
    {
        return Err(Stop(
            Reason::BundleMismatch,
            format!(
                "the bundle's vcs.json is about commit {}, its instance's base commit is {}",
                v.base_commit, instance.base_commit
            ),
        ));
    }
    // What validation proved (format version 3): a bundle of an instance it did not keep is
    // replayed all the same, and said to be one.
    let (not_kept, cannot_run) = match std::fs::read(unpacked.join(bundle::EXPECTED_MEMBER)) {
        Ok(bytes) => {
            let e = bundle::Expected::from_bytes(&bytes)
                .map_err(|e| Stop(Reason::BundleCorrupt, format!("expected.json: {e}")))?;
            let reproduces =
                e.verdict == crate::verdict::Verdict::Kept.as_str() || !e.cannot_run.is_empty();
            let not_kept = (!reproduces).then(|| {
                format!(
                    "validation did not keep it ({}{}): its published lists do not reproduce here",
                    e.verdict,
                    if e.reason_kind.is_empty() {
                        String::new()
                    } else {
                        format!(", {}", e.reason_kind)
                    }
                )
            });
            (not_kept, e.cannot_run)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, BTreeMap::new()),
        Err(e) => return Err(Stop(Reason::Io, format!("expected.json: {e}"))),
    };
    let src = work.join("src");
    if codebase {
        std::fs::rename(unpacked.join("codebase"), &src)
    } else {
        std::fs::create_dir(&src)
    }
    .map_err(|e| Stop(Reason::Io, format!("{}: {e}", src.display())))?;
    Ok(Unpacked {
        instance,
        ctx,
        lock,
        vcs,
        not_kept,
        cannot_run,
    })
}

/// The bundle read and checked whole, its members but the codebase written into `dir`.
fn unpack_but_codebase(inputs: &ReplayInputs, dir: &Path) -> Result<(), bundle::BundleError> {
    let keep = |path: &[u8]| !path.starts_with(bundle::CODEBASE_DIR.as_bytes());
    let (_, members) = bundle::read_members_into_memory(
        inputs.bundle,
        inputs.bundle_id,
        &Limits::default(),
        &keep,
        &NoProgress,
    )?;
    for (path, member) in members {
        let file = dir.join(std::ffi::OsStr::from_bytes(&path));
        let io = |e| bundle::BundleError::io(&file, e);
        std::fs::create_dir_all(crate::fsutil::parent_dir(&file)).map_err(io)?;
        match member {
            bundle::MemoryMember::File {
                content,
                executable,
            } => std::fs::write(&file, content).and_then(|()| {
                use std::os::unix::fs::PermissionsExt;
                let mode = if executable { 0o755 } else { 0o644 };
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode))
            }),
            bundle::MemoryMember::Symlink { target } => {
                std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&target), &file)
            }
        }
        .map_err(io)?;
    }
    Ok(())
}

fn run_steps(
    inputs: &ReplayInputs,
    p: &Prediction,
    work: &Path,
    report: &mut InstanceReport,
    output: &mut Vec<u8>,
) -> Result<(), Stop> {
    // The bundle.
    let t = Instant::now();
    // The bundle's work tree, when the archive keeps it: its codebase is not written again.
    let kept = match inputs.bundle_id {
        Some(id) => Some(harness::worktree::KeptTree::of_bundle(
            inputs.cache_root,
            &id,
        )?),
        None => None,
    };
    let b = unpack(inputs, p, work, !kept.as_ref().is_some_and(|k| k.is_kept()))?;
    report.harness_id = crate::dataset::harness_id(&b.instance);
    report.lock = b.lock.id().hex();
    report.excluded = b.not_kept.clone().unwrap_or_default();
    report.cannot_run = b.cannot_run.clone();
    let unpack_seconds = t.elapsed().as_secs_f64();
    let grading_of_row = b.instance.harness();
    let eval_type =
        grade::EvalType::parse(grading_of_row.eval_type.unwrap_or_default()).unwrap_or_default();
    let instance = b.instance.clone();
    let prepared = Prepared {
        instance: b.instance,
        ctx: b.ctx,
        lock: b.lock,
        record: b.vcs,
        objects: inputs.objects.clone(),
        cache_root: inputs.cache_root.to_path_buf(),
        tree: kept.map_or(WorkTreeFrom::Files, WorkTreeFrom::Kept),
    };
    // The procedure, with the prediction's patch.
    let mut run = harness::Instance::start(work, prepared, inputs.opts)?;
    run.time("unpack", unpack_seconds);
    report.services = run.services().to_vec();
    report.evaluated_with = run.evaluated_with().to_string();
    let parser = run.parser().to_string();
    let patch_text = p.patch.clone().unwrap_or_default();
    let mut evaluated = Evaluated::default();
    let result = run.evaluate(
        &Evaluation {
            name: "test",
            numbered: false,
            patch: Some(PatchIn::Prediction {
                text: &patch_text,
                grading: inputs.grading,
            }),
            runs: 1,
            install_must_succeed: false,
        },
        &mut evaluated,
    );
    let record = run.finish();
    report.timings.extend(record.timings);
    report.test_seconds = report.timings.get("test").copied().unwrap_or(0.0);
    report.network = record.network;
    report.confinement = record.confinement;
    report.environment_mount = record.environment_mount;
    report.worktree_mount = record.worktree_mount;
    report.installed_state = record.installed_state;
    report.patch_successfully_applied = evaluated.applied_with.is_some();
    report.applied_with = evaluated.applied_with.unwrap_or_default().to_string();
    report.reset_paths = evaluated.reset_paths;
    result?;
    let Some(test_run) = evaluated.runs.pop() else {
        return Err(Stop(Reason::TestsDidNotRun, "the tests did not run".into()));
    };
    *output = test_run.log;
    report.grading = Some(GradingInputs {
        log_parser: parser,
        fail_to_pass: instance.fail_to_pass.clone(),
        pass_to_pass: instance.pass_to_pass.clone(),
        eval_type,
        test_exit_code: test_run.exit_code,
        cannot_run: report.cannot_run.keys().cloned().collect(),
    });
    let t = Instant::now();
    let graded = grade_output(report, output, inputs.grading)
        .map_err(|e| Stop(Reason::LogParseFailed, e.to_string()));
    report
        .timings
        .insert("parse".into(), t.elapsed().as_secs_f64());
    graded
}
