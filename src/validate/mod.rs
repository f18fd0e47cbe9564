//! Execution-based validation (the SWE-bench paper's appendix A.3, made exact and offline):
//! per instance, the codebase at base_commit from the mirror and the context's newest lock
//! (or the one asked for) given to the harness's procedure ([`crate::harness::Instance`]),
//! which runs two evaluations: no patch (`log_pre`), then the gold patch, K runs (`log_post`);
//! both parsed, and a verdict kept with its evidence. This module is the policy: what to run
//! and how to judge it.
//!
//! - [`outcome`]: FAIL_TO_PASS / PASS_TO_PASS / XFAIL / flaky and the verdict rules;
//! - [`expected`]: what a bundle keeps of a validation;
//! - [`run_many`]: many instances of an archive, in parallel, each recorded as it ends.
//!
//! docs/VALIDATION.md tells the procedure for users.

pub mod expected;
mod many;
pub mod outcome;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use crate::context::{self as kinds, Lock};
use crate::dataset::Instance;
use crate::digest::Sha256Digest;
use crate::harness::{self, Evaluated, Evaluation, PatchIn, Prepared, Reason, RunOptions, Stop};
use crate::logparse::{self, Grading, StatusMap};
use crate::manifest::{Context, Manifests};
use crate::mirror::{Mirror, MirrorError, RepoName};
use crate::store::{Ark, ArkError, ValidationRow};
use crate::verdict::reason_or_empty;

pub use crate::verdict::Verdict;
pub use many::{ManyError, ManyOptions, ManyReport, outcome_line, run_many};
use outcome::{Differences, Lists};

#[derive(Debug, Clone)]
pub struct ValidateOptions {
    /// How each command runs.
    pub run: RunOptions,
    /// Runs after the gold patch (flakiness).
    pub runs: u32,
    /// Run with this lock (an object of the archive) rather than the newest lock of the
    /// instance's context: what `verify --rebuild --revalidate` does with a bundle's own lock.
    pub lock: Option<Sha256Digest>,
}

impl Default for ValidateOptions {
    fn default() -> Self {
        ValidateOptions {
            run: RunOptions::default(),
            runs: 3,
            lock: None,
        }
    }
}

/// Why a validation could not even start: the archive, not the instance.
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    #[error(transparent)]
    Ark(#[from] ArkError),
    #[error("cannot make a work directory: {0}")]
    WorkDir(String),
    #[error("{instance}: {source}")]
    Of {
        instance: String,
        #[source]
        source: Box<ValidateError>,
    },
    #[error("cannot record the validation of {instance}: {source}")]
    Record {
        instance: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Everything a validation saw, as `results.json` keeps it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Results {
    pub instance_id: String,
    pub verdict: Verdict,
    /// Why (`no-fail-to-pass`, `install-failed`, …), for counting; none (`""`) when kept
    /// plainly.
    #[serde(with = "reason_or_empty")]
    pub reason_kind: Option<Reason>,
    pub reason: String,
    #[serde(rename = "FAIL_TO_PASS")]
    pub fail_to_pass: Vec<String>,
    #[serde(rename = "PASS_TO_PASS")]
    pub pass_to_pass: Vec<String>,
    #[serde(rename = "XFAIL")]
    pub xfail: Vec<String>,
    pub flaky: BTreeMap<String, Vec<Option<logparse::TestStatus>>>,
    /// For a published instance: how the computed lists differ from its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_differences: Option<Differences>,
    pub test_directives: Vec<String>,
    pub log_parser: String,
    pub pre: StatusMap,
    pub post: Vec<StatusMap>,
    /// Exit code (or -signal) of each command run, by step.
    pub exit_codes: BTreeMap<String, i64>,
    /// Seconds per step.
    pub timings: BTreeMap<String, f64>,
    pub network: String,
    /// `confined`, or `unconfined` (`--unconfined`): what the commands could reach of the
    /// host (docs/SANDBOX.md). Empty in results from before confinement.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub confinement: String,
    /// How the environment was given to the commands: `overlay` (a private writable layer
    /// over the lock's shared copy) or `copy` (docs/SANDBOX.md, "Layers"); empty for kinds
    /// with nothing to layer, and in results from before layers.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub environment_mount: String,
    /// How the work tree was given to the commands: `built` for the run (from the mirror);
    /// empty in results from before kept trees (docs/REPLAY.md, "The work tree").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub worktree_mount: String,
    /// The installed state the run started from (`kept`) or made (`made`), and why the
    /// install ran again after the patch (docs/REPLAY.md, "The installed state"); absent when
    /// none was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed_state: Option<crate::harness::InstalledUse>,
    /// The services the tests ran with (stand-ins for hosts of the internet among them), one
    /// sentence each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<String>,
    pub lock: String,
    pub python: String,
    pub tool: String,
    /// `git describe --tags --long` of the base commit as the work tree answered it (absent:
    /// no tag reachable, or a validation from before swe-ark recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub describe: Option<String>,
    /// Where the run happened, which its logs may name (absent: a validation from before
    /// swe-ark recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<expected::RunPaths>,
    /// The fixed layout the commands ran at (docs/SANDBOX.md, "The fixed layout"): the work
    /// tree at `/testbed`, the environment at `/env`, nothing of the host's paths. Absent: a
    /// validation from before, at the host's paths (`paths`), whose logs a bundle keeps with
    /// those paths masked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<u32>,
    /// The manifest the context came from (absent: a validation from before swe-ark recorded
    /// it); the archive keeps the file as an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<ManifestUsed>,
}

/// Which manifest file a validation's context came from: its name (`<built in>/…` or the
/// folder `--manifests` named) and the sha256 of its bytes, an object of the archive.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ManifestUsed {
    pub file: String,
    pub sha256: Sha256Digest,
}

impl Results {
    /// Not run for a reason of the archive's: reported, not recorded.
    pub fn is_setup_problem(&self) -> bool {
        self.reason_kind.is_some_and(|r| r.is_setup_problem())
    }
}

/// The outcome of one instance, with its logs.
pub struct Validation {
    pub results: Results,
    pub log_pre: Option<Vec<u8>>,
    pub log_post: Option<Vec<u8>>,
    /// The manifest file the context came from, as read.
    pub manifest: Option<Vec<u8>>,
}

/// The lock to run with: the one the options name, or the newest of the context's.
fn chosen_lock(ark: &Ark, ctx: &Context, opts: &ValidateOptions) -> Result<Box<dyn Lock>, Stop> {
    let no_lock = |why: String| Stop(Reason::NoLock, why);
    let id = match &opts.lock {
        Some(id) => *id,
        None => {
            let locks = ark.index().locks().map_err(|e| no_lock(e.to_string()))?;
            let newest = locks
                .into_iter()
                .filter(|l| l.repo == ctx.repo && l.version == ctx.version)
                .max_by_key(|l| l.created_at);
            let Some(row) = newest else {
                return Err(no_lock(format!(
                    "no environment lock for {} {}; run `swe-ark env lock {} {}` (online) first",
                    ctx.repo, ctx.version, ctx.repo, ctx.version
                )));
            };
            row.id
        }
    };
    let bytes = ark
        .objects()
        .get(&id)
        .map_err(|e| no_lock(format!("lock {id} is not in the archive's objects: {e}")))?;
    let kind = kinds::kind_of(ctx).map_err(|e| Stop(Reason::NoContext, e.to_string()))?;
    kind.read_lock(id, &bytes)
        .map_err(|e| no_lock(e.to_string()))
}

/// Validates one instance. Errors of swe-ark itself (no work directory) are `Err`; every
/// reason the instance cannot be proven is a verdict in the results.
pub fn validate(
    ark: &Ark,
    manifests: &Manifests,
    instance: &Instance,
    opts: &ValidateOptions,
) -> Result<Validation, ValidateError> {
    let started = Instant::now();
    let mut results = Results {
        instance_id: instance.instance_id.clone(),
        verdict: Verdict::Discarded,
        reason_kind: None,
        reason: String::new(),
        fail_to_pass: vec![],
        pass_to_pass: vec![],
        xfail: vec![],
        flaky: BTreeMap::new(),
        published_differences: None,
        test_directives: vec![],
        log_parser: String::new(),
        pre: StatusMap::new(),
        post: vec![],
        exit_codes: BTreeMap::new(),
        timings: BTreeMap::new(),
        network: String::new(),
        confinement: String::new(),
        environment_mount: String::new(),
        worktree_mount: String::new(),
        installed_state: None,
        services: vec![],
        lock: String::new(),
        python: String::new(),
        tool: format!("swe-ark {}", env!("CARGO_PKG_VERSION")),
        describe: None,
        paths: None,
        layout: None,
        manifest: None,
    };
    let mut logs = Logs::default();
    let work = crate::fsutil::work_dir(&ark.tmp_dir(), ".tmp-validate-")
        .map_err(|e| ValidateError::WorkDir(format!("{}: {e}", ark.tmp_dir().display())))?;
    let outcome = run_steps(
        ark,
        manifests,
        instance,
        opts,
        work.path(),
        &mut results,
        &mut logs,
    );
    if let Err(Stop(kind, reason)) = outcome {
        results.verdict = Verdict::Discarded;
        results.reason_kind = Some(kind);
        results.reason = reason;
    }
    results
        .timings
        .insert("total".into(), started.elapsed().as_secs_f64());
    if opts.run.keep_workdir {
        let kept = work.keep();
        tracing::info!("work directory kept: {}", kept.display());
    }
    Ok(Validation {
        results,
        log_pre: logs.pre,
        log_post: logs.post,
        manifest: logs.manifest,
    })
}

/// The logs a validation keeps: before the gold patch, and the first run after it; and the
/// manifest's bytes, kept by `record` beside the results that name them.
#[derive(Default)]
struct Logs {
    pre: Option<Vec<u8>>,
    post: Option<Vec<u8>>,
    manifest: Option<Vec<u8>>,
}

#[allow(clippy::too_many_arguments)]
fn run_steps(
    ark: &Ark,
    manifests: &Manifests,
    instance: &Instance,
    opts: &ValidateOptions,
    work: &Path,
    results: &mut Results,
    logs: &mut Logs,
) -> Result<(), Stop> {
    // A repository no manifest names runs the context its lock recorded as inferred.
    let resolved = kinds::resolve::locked(
        ark,
        manifests,
        &instance.repo,
        &instance.version,
        opts.lock.as_ref(),
    )
    .map_err(|e| match e {
        kinds::resolve::ResolveError::NotLocked { .. } => Stop(Reason::NoLock, e.to_string()),
        e => Stop(Reason::NoContext, e.to_string()),
    })?;
    let m = &resolved.manifest;
    results.manifest = Some(ManifestUsed {
        file: m.path.display().to_string(),
        sha256: Sha256Digest::of(m.text.as_bytes()),
    });
    logs.manifest = Some(m.text.clone().into_bytes());
    let ctx: Context = resolved.context;
    results.log_parser = harness::Instance::parser_of(instance, &ctx)?;

    // The codebase, from the mirror; the lock.
    let t = Instant::now();
    let record = materialize(ark, instance, ctx.empty_submodules, work)?;
    results.describe = record.describe.clone();
    results
        .timings
        .insert("materialize".into(), t.elapsed().as_secs_f64());
    let lock = chosen_lock(ark, &ctx, opts)?;
    // What the context, as its lock was made from it, asks for that the environment here
    // lacks: a published test that needs it is named with it.
    let unavailable = unavailable_of(ark, instance, lock.as_ref());
    // What the patches change of the build that the lock was not made with: an install after
    // the gold patch that fails for it is the lock's to fix.
    let uncovered_patch_files = lock.uncovered_patch_files(
        &ctx,
        &instance.instance_id,
        [&instance.test_patch, &instance.patch],
    );
    results.lock = lock.id().hex();
    results.python = lock.runtime();
    results.layout = Some(expected::FIXED_LAYOUT);

    // The procedure: the work tree and environment, the setup, two evaluations.
    let prepared = Prepared {
        instance: instance.clone(),
        ctx,
        lock,
        record: Some(record),
        objects: ark.objects(),
        cache_root: ark.root().to_path_buf(),
        tree: harness::worktree::WorkTreeFrom::Files,
    };
    let covered = prepared.lock.base_commits();
    let mut run = harness::Instance::start(work, prepared, &opts.run)?;
    let outcome = run_and_judge(
        &mut run,
        instance,
        opts,
        &unavailable,
        &uncovered_patch_files,
        results,
        logs,
    )
    .map_err(|stop| not_covered(stop, instance, &covered, results));
    let record = run.finish();
    results.exit_codes = record.exit_codes;
    results.timings.extend(record.timings);
    results.network = record.network;
    results.confinement = record.confinement;
    results.environment_mount = record.environment_mount;
    results.worktree_mount = record.worktree_mount;
    results.installed_state = record.installed_state;
    outcome
}

/// An install that failed offline at a base commit the lock was not made from is the
/// archive's problem, not the instance's: the lock predates the instance, and locking the
/// context again (the union of every base commit's needs) is the fix. Reported, not recorded.
fn not_covered(stop: Stop, instance: &Instance, covered: &[String], results: &Results) -> Stop {
    let Stop(kind, why) = stop;
    let install = matches!(kind, Reason::InstallFailed | Reason::PreInstallFailed);
    if !install || covered.contains(&instance.base_commit) {
        return Stop(kind, why);
    }
    let last = last_line(&why);
    Stop(
        Reason::LockDoesNotCover,
        format!(
            "lock {} of {} {} was made before this instance came into the archive (from {} \
             commit{}, not its base commit {}), and the instance's install failed offline \
             ({last}): run `swe-ark env lock {} {}` again to lock what every base commit of the \
             version asks for. {why}",
            &results.lock[..12.min(results.lock.len())],
            instance.repo,
            instance.version,
            covered.len(),
            if covered.len() == 1 { "" } else { "s" },
            &instance.base_commit[..12.min(instance.base_commit.len())],
            instance.repo,
            instance.version,
        ),
    )
}

/// The last line of `text` that is not blank (an installer's last word), trimmed.
fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

/// What `lock` says its context asks for that the environment here lacks (name, the rest of
/// the sentence), its files read from the instance's mirror.
fn unavailable_of(ark: &Ark, instance: &Instance, lock: &dyn Lock) -> Vec<(String, String)> {
    let mirror = RepoName::parse(&instance.repo)
        .and_then(|name| Mirror::open(&ark.mirrors_dir(), &name).ok());
    let file_at = |commit: &str, path: &str| mirror.as_ref()?.file_at(commit, path);
    lock.unavailable(&file_at)
        .into_iter()
        .map(|u| (u.name, u.why))
        .collect()
}

/// An install after the gold patch that failed where the instance's patches change build
/// files the lock was not made with (it predates the instance): the archive's problem, as
/// [`not_covered`] says of base commits.
fn patch_not_covered(stop: Stop, instance: &Instance, files: &[String], lock: &str) -> Stop {
    let Stop(kind, why) = stop;
    if kind != Reason::InstallFailed || files.is_empty() {
        return Stop(kind, why);
    }
    let last = last_line(&why);
    Stop(
        Reason::LockDoesNotCover,
        format!(
            "lock {} of {} {} was not made from this instance's tree after its patches, which \
             change {} (it was made before the instance came into the archive), and the \
             install after the gold patch failed offline ({last}): run `swe-ark env lock {} {}` \
             again to lock what the patches ask for too. {why}",
            &lock[..12.min(lock.len())],
            instance.repo,
            instance.version,
            files.join(", "),
            instance.repo,
            instance.version,
        ),
    )
}

/// The codebase at the base commit, from the mirror, written to `work/src` (the procedure
/// makes it a git work tree from the record of its history: what replay will see from the
/// bundle); the record.
fn materialize(
    ark: &Ark,
    instance: &Instance,
    empty_submodules: bool,
    work: &Path,
) -> Result<crate::vcs::VcsRecord, Stop> {
    let name = RepoName::parse(&instance.repo).ok_or_else(|| {
        Stop(
            Reason::BadInstance,
            format!("repo `{}` is not OWNER/NAME", instance.repo),
        )
    })?;
    let mirror = Mirror::open(&ark.mirrors_dir(), &name)
        .map_err(|e| Stop(Reason::NoMirror, e.to_string()))?;
    mirror
        .commit(&instance.base_commit)
        .map_err(|e| Stop(Reason::BaseCommitMissing, e.to_string()))?;
    let missing_object = |e: &dyn std::fmt::Display| Stop(Reason::MissingObject, e.to_string());
    let missing = mirror
        .check_tree(&instance.base_commit)
        .map_err(|e| missing_object(&e))?;
    if !missing.is_empty() {
        return Err(Stop(Reason::MissingObject, missing.join("; ")));
    }
    // Submodules filled from their mirrors, as pack will carry them. A missing submodule
    // mirror is the archive's to fix (`mirror update`), so not recorded against the instance.
    let (codebase, _) = mirror
        .codebase_for(
            &ark.mirrors_dir(),
            &instance.base_commit,
            empty_submodules,
            &crate::progress::NoProgress,
        )
        .map_err(|e| match e {
            MirrorError::NoSubmoduleMirror { .. } | MirrorError::SubmoduleCommitMissing { .. } => {
                Stop(Reason::NoMirror, e.to_string())
            }
            MirrorError::SubmoduleUrl { .. } | MirrorError::Gitmodules { .. } => {
                Stop(Reason::Checkout, e.to_string())
            }
            e => missing_object(&e),
        })?;
    let record = crate::vcs::record(&mirror.path, &instance.base_commit)
        .map_err(|e| Stop(Reason::History, e.to_string()))?;
    codebase
        .write_to(&work.join("src"))
        .map_err(|e| Stop(Reason::Checkout, e.to_string()))?;
    Ok(record)
}

/// The two evaluations, parsed by the readings of swebench 4.1.0's parsers (those the
/// published lists were written with), and the lists judged against the published ones.
///
/// The run before the gold patch is meant to fail: a test file that cannot even be collected
/// there (its test patch imports a name only the gold patch adds) fails every test of it, as
/// in SWE-bench, where a test absent from the log before is not passing. Such an error stops
/// the instance only when the tests do not run after the gold patch either.
#[allow(clippy::too_many_arguments)]
fn run_and_judge(
    run: &mut harness::Instance,
    instance: &Instance,
    opts: &ValidateOptions,
    unavailable: &[(String, String)],
    uncovered_patch_files: &[String],
    results: &mut Results,
    logs: &mut Logs,
) -> Result<(), Stop> {
    let directives = run.test_command().directives.clone();
    results.test_directives = directives.clone();
    results.services = run.services().to_vec();

    // Before the gold patch.
    let mut pre = Evaluated::default();
    run.evaluate(
        &Evaluation {
            name: "pre",
            numbered: false,
            patch: None,
            runs: 1,
            install_must_succeed: true,
        },
        &mut pre,
    )?;
    let pre_log = pre.runs.pop().map(|r| r.log).unwrap_or_default();
    let pre_text = String::from_utf8_lossy(&pre_log).into_owned();
    let t = Instant::now();
    let pre_map = run.parse(&pre_log, Grading::Swebench4)?;
    logs.pre = Some(pre_log);
    let mut parse_seconds = t.elapsed().as_secs_f64();
    results.pre = pre_map.clone();
    let stopped_before = outcome::stopped_by_import_error(&pre_text, &pre_map, &directives);

    // After it, K runs (flakiness).
    let mut post = Evaluated::default();
    run.evaluate(
        &Evaluation {
            name: "post",
            numbered: true,
            patch: Some(PatchIn::Gold(&instance.patch)),
            runs: opts.runs.max(1),
            install_must_succeed: true,
        },
        &mut post,
    )
    .map_err(|stop| patch_not_covered(stop, instance, uncovered_patch_files, &results.lock))?;
    let mut posts = Vec::new();
    for (k, r) in post.runs.into_iter().enumerate() {
        let t = Instant::now();
        posts.push(run.parse(&r.log, Grading::Swebench4)?);
        parse_seconds += t.elapsed().as_secs_f64();
        if k == 0 {
            logs.post = Some(r.log);
        }
    }
    results.post = posts.clone();
    run.time("parse", parse_seconds);
    if let Some(before) = stopped_before {
        let post_text = logs
            .post
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        let post_map = posts.first().cloned().unwrap_or_default();
        if let Some(after) = outcome::stopped_by_import_error(&post_text, &post_map, &directives) {
            return Err(Stop(
                Reason::TestsDidNotRun,
                format!(
                    "the tests did not run, before the gold patch ({before}) nor after it \
                     ({after})"
                ),
            ));
        }
    }
    let lists: Lists = outcome::lists(&pre_map, &posts);
    results.fail_to_pass = lists.fail_to_pass.clone();
    results.pass_to_pass = lists.pass_to_pass.clone();
    results.xfail = lists.xfail.clone();
    results.flaky = lists.flaky.clone();
    judge(instance, &lists, &pre_text, unavailable, logs, results)
}

/// The verdict. A published instance is judged against its lists first: one whose
/// FAIL_TO_PASS does not come out at all is not reproducible, with the tests named, not just
/// discarded.
fn judge(
    instance: &Instance,
    lists: &Lists,
    pre_text: &str,
    unavailable: &[(String, String)],
    logs: &Logs,
    results: &mut Results,
) -> Result<(), Stop> {
    let published = !instance.fail_to_pass.is_empty() || !instance.pass_to_pass.is_empty();
    if published {
        let mut d = outcome::compare(lists, &instance.fail_to_pass, &instance.pass_to_pass);
        let post_text = logs
            .post
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        d.needs_network = outcome::needing_network(&d, &[&post_text, pre_text]);
        d.needs_unavailable =
            outcome::needing_unavailable(&d, unavailable, &[&post_text, pre_text]);
        let cannot_run = d.cannot_run();
        if d.covers_published() {
            results.reason_kind = Some(Reason::CoversPublished);
            results.reason = format!(
                "{}: the published lists come out as published and are what evaluation judges",
                d.describe()
            );
        } else if !cannot_run.is_empty() && !lists.fail_to_pass.is_empty() {
            // Reproduced but for tests that cannot run here: kept, and graded both ways.
            results.reason_kind = Some(Reason::CannotRunHere);
            results.reason = format!(
                "{}; the rest comes out as published: replay grades it against the published \
                 lists and again without the {} test{} that cannot run here",
                outcome::difference_reason(&d, &results.services),
                cannot_run.len(),
                if cannot_run.len() == 1 { "" } else { "s" },
            );
        } else if !d.is_empty() {
            results.verdict = Verdict::NotReproducible;
            results.reason_kind = Some(Reason::DiffersFromPublished);
            results.reason = outcome::difference_reason(&d, &results.services);
            results.published_differences = Some(d);
            return Ok(());
        }
        results.published_differences = Some(d);
    }
    if lists.fail_to_pass.is_empty() {
        return Err(Stop(
            Reason::NoFailToPass,
            "no test goes from fail to pass".to_string(),
        ));
    }
    results.verdict = Verdict::Kept;
    Ok(())
}

/// Records a validation: its logs and results as objects, the row, and for a collected
/// (unpublished) instance that was kept, its FAIL_TO_PASS / PASS_TO_PASS — one transaction.
pub fn record(
    ark: &mut Ark,
    instance: &Instance,
    v: &Validation,
) -> Result<ValidationRow, ValidateError> {
    let failed = |e: Box<dyn std::error::Error + Send + Sync>| ValidateError::Record {
        instance: instance.instance_id.clone(),
        source: e,
    };
    let objects = ark.objects();
    let put = |bytes: &[u8]| objects.put_bytes(bytes).map_err(|e| failed(Box::new(e)));
    let results_json = serde_json::to_vec_pretty(&v.results).map_err(|e| failed(Box::new(e)))?;
    let results_id = put(&results_json)?;
    let log_pre = v.log_pre.as_deref().map(put).transpose()?;
    let log_post = v.log_post.as_deref().map(put).transpose()?;
    let r = &v.results;
    let row = ValidationRow {
        instance_id: r.instance_id.clone(),
        verdict: r.verdict,
        reason_kind: r.reason_kind,
        reason: r.reason.clone(),
        fail_to_pass: r.fail_to_pass.len() as u64,
        pass_to_pass: r.pass_to_pass.len() as u64,
        flaky: r.flaky.len() as u64,
        lock_id: r.lock.clone(),
        results: results_id,
        log_pre,
        log_post,
        seconds: r.timings.get("total").copied().unwrap_or(0.0),
        validated_at: 0,
    };
    let mut objects_rows = vec![(results_id, results_json.len() as u64, "results")];
    if let (Some(id), Some(b)) = (log_pre, &v.log_pre) {
        objects_rows.push((id, b.len() as u64, "log"));
    }
    if let (Some(id), Some(b)) = (log_post, &v.log_post) {
        objects_rows.push((id, b.len() as u64, "log"));
    }
    if let Some(text) = &v.manifest {
        objects_rows.push((put(text)?, text.len() as u64, "manifest"));
    }
    let updated = (r.verdict == Verdict::Kept
        && instance.fail_to_pass.is_empty()
        && instance.pass_to_pass.is_empty())
    .then(|| {
        let mut i = instance.clone();
        i.fail_to_pass = r.fail_to_pass.clone();
        i.pass_to_pass = r.pass_to_pass.clone();
        i
    });
    ark.index_mut()
        .record_validation(&row, &objects_rows, updated.as_ref())
        .map_err(|e| failed(Box::new(e)))?;
    Ok(row)
}
