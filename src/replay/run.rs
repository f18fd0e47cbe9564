//! A replay run: predictions (a file, or the gold patches) matched to bundles (the archive's
//! newest of each instance, or bundle files with an object store), replayed by a worker pool,
//! each instance's files written as it ends (a run with the same id resumes), and SWE-bench's
//! run report per model. Also [`rewrite_reports`]: a finished run graded again from its saved
//! test output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::bundle::{BundleError, BundleFile, BundleSource};
use crate::dataset::{Selection, SelectionError};
use crate::digest::Sha256Digest;
use crate::fsutil;
use crate::harness::{Reason, RunOptions};
use crate::progress::Progress;
use crate::store::{Ark, ArkError, BundleRow, Layout, ObjectStore};

use super::predictions::{self, PredictionError};
use super::{InstanceReport, Prediction, ReplayInputs};

/// What to replay.
#[derive(Debug, Clone)]
pub enum Predictions {
    /// A predictions file in SWE-bench's format.
    File(PathBuf),
    /// The gold patch of every instance with a bundle in the archive.
    Gold,
}

#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub predictions: Predictions,
    /// The run's name (reports in `runs/<run-id>/`); None: `run-<UTC time>`.
    pub run_id: Option<String>,
    /// Bundle files to replay with no index (then `objects` holds what their locks need).
    pub bundles: Vec<PathBuf>,
    pub objects: Option<ObjectStore>,
    pub selection: Selection,
    pub jobs: usize,
    /// Replay again instances that already have a report in this run.
    pub force: bool,
    pub run: RunOptions,
    /// Whose rules: patch application, log parsing and grading.
    pub grading: crate::logparse::Grading,
}

/// What a run did.
#[derive(Debug)]
pub struct RunReport {
    pub run_id: String,
    /// `runs/<run-id>/`.
    pub dir: PathBuf,
    /// Every instance's report, by instance id.
    pub reports: Vec<InstanceReport>,
    /// Per model: its name, SWE-bench's run report, and where it was written.
    pub summaries: Vec<(String, serde_json::Value, PathBuf)>,
    /// Instances whose files could not be written: the run did not finish as asked.
    pub failures: Vec<ReplayError>,
    /// `rewrite_reports`: how many saved outputs were graded again.
    pub regraded: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("--jobs must be at least 1")]
    NoJobs,
    #[error("--run-id `{0}` must be letters, digits, `-`, `_` or `.`")]
    BadRunId(String),
    #[error("there is no run {run_id} in `{}`", .runs.display())]
    NoSuchRun { run_id: String, runs: PathBuf },
    #[error("give --predictions FILE, or --gold with an archive")]
    NoPredictions,
    #[error("give --objects DIR with bundle files")]
    NoObjects,
    #[error(transparent)]
    Selection(#[from] SelectionError),
    /// The sandbox cannot give the commands what the options ask (checked before any work).
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    #[error(transparent)]
    Ark(#[from] ArkError),
    #[error(transparent)]
    Index(#[from] crate::store::IndexError),
    #[error(transparent)]
    Predictions(#[from] PredictionError),
    #[error("bundle `{}`: {source}", .path.display())]
    Bundle {
        path: PathBuf,
        #[source]
        source: BundleError,
    },
    #[error("`{}`: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{}` is not a replay report: {source}", .path.display())]
    NotAReport {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{instance}: {source}")]
    Of {
        instance: String,
        #[source]
        source: Box<ReplayError>,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ReplayError + '_ {
    move |source| ReplayError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Whether `s` may name a run (it becomes a directory name).
pub fn valid_run_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// Where a prediction's bundle is.
#[derive(Clone)]
enum Where {
    File(PathBuf, Option<Sha256Digest>),
    Archive(BundleRow),
}

/// The bundle to replay; a worker opens the archive through its own connection.
fn open_bundle(
    root: &Path,
    place: &Where,
) -> Result<(Box<dyn BundleSource>, Option<Sha256Digest>), ArkError> {
    Ok(match place {
        Where::File(path, id) => (Box::new(BundleFile::new(path)), *id),
        Where::Archive(row) => (Box::new(Ark::open(root)?.bundle(row)?), Some(row.id)),
    })
}

/// The gold patch of every instance with a bundle in the archive.
fn gold(ark: &Ark) -> Result<Vec<Prediction>, ArkError> {
    let mut out: Vec<Prediction> = Vec::new();
    for b in ark.index().bundles()? {
        if out.iter().any(|p| p.instance_id == b.instance_id) {
            continue;
        }
        if let Some(i) = ark.index().instance(&b.instance_id)? {
            out.push(Prediction {
                instance_id: i.instance_id,
                model: "gold".into(),
                patch: Some(i.patch),
            });
        }
    }
    Ok(out)
}

impl crate::dataset::OfInstance for Prediction {
    fn instance_id(&self) -> &str {
        &self.instance_id
    }
}

/// Replays the selected predictions from the archive at `root` (with bundle files, `root` is
/// only a home for the environment cache, the work directories and the reports: no index is
/// read). Instance lines and notes go to `progress`.
pub fn run(
    root: &Path,
    opts: &ReplayOptions,
    progress: &dyn Progress,
) -> Result<RunReport, ReplayError> {
    if opts.jobs == 0 {
        return Err(ReplayError::NoJobs);
    }
    let layout = Layout::new(root);
    let ark = if opts.bundles.is_empty() {
        Some(Ark::open(root)?)
    } else {
        None
    };
    let run_id = match &opts.run_id {
        Some(r) if valid_run_id(r) => r.clone(),
        Some(r) => return Err(ReplayError::BadRunId(r.clone())),
        None => {
            let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
            format!("run-{}", now.replace([':', '-'], "").trim_end_matches('Z'))
        }
    };
    let (preds, among) = match (&opts.predictions, &ark) {
        (Predictions::File(path), _) => (predictions::read(path)?, "the predictions do not cover"),
        (Predictions::Gold, Some(ark)) => (gold(ark)?, "with no bundle in the archive"),
        (Predictions::Gold, None) => return Err(ReplayError::NoPredictions),
    };
    let preds = opts.selection.pick(preds, among)?;
    crate::harness::sandbox_ready(&opts.run)?;
    let jobs = match_bundles(ark.as_ref(), &opts.bundles, preds, progress)?;
    let (dataset, split) = run_dataset(
        ark.as_ref(),
        jobs.iter().map(|(p, _)| p.instance_id.as_str()),
    );
    let objects = match (&opts.objects, &ark) {
        (Some(store), _) => store.clone(),
        (None, Some(ark)) => ark.objects(),
        (None, None) => return Err(ReplayError::NoObjects),
    };
    drop(ark);
    let tmp = layout.tmp();
    std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
    let total = jobs.len();
    progress.line(&format!("run {run_id}: {total} prediction(s)"));
    progress.start_items("replaying", total as u64);
    let runs = layout.runs();
    let place_of_work = Workplace {
        objects: &objects,
        root,
        tmp: &tmp,
        run: &opts.run,
        grading: opts.grading,
    };
    let (ended, _) = crate::workers::run(
        opts.jobs,
        jobs,
        || Ok::<_, std::convert::Infallible>(()),
        |_, (p, place): (Prediction, Placed)| {
            progress.item(&p.instance_id);
            let dir = super::instance_dir(&runs, &run_id, &p.model, &p.instance_id);
            let (report, failure) = replay_or_resume(&dir, &p, place, opts.force, &place_of_work);
            progress.line(&report_line(&report));
            progress.advance(1);
            (report, failure)
        },
    );
    progress.finish();
    let mut reports = Vec::new();
    let mut failures = Vec::new();
    for (report, failure) in ended {
        if let Some(f) = failure {
            failures.push(ReplayError::Of {
                instance: report.instance_id.clone(),
                source: Box::new(f),
            });
        }
        reports.push(report);
    }
    // The run report is the run's, not this invocation's: instances replayed earlier under
    // the same id (another --instance-ids, say) count too.
    let mut reports = with_earlier_reports(&runs.join(&run_id), reports);
    reports.sort_by(|a, b| {
        (&a.instance_id, &a.model_name_or_path).cmp(&(&b.instance_id, &b.model_name_or_path))
    });
    let summaries = write_summaries(&runs, &run_id, &reports)?;
    let dir = runs.join(&run_id);
    super::logs::write_run_metadata(&dir, dataset.as_deref(), split.as_deref())
        .map_err(io(&dir))?;
    Ok(RunReport {
        dir,
        run_id,
        reports,
        summaries,
        failures,
        regraded: 0,
    })
}

/// The dataset every instance of a run was imported from, when they share one (none from
/// bundle files alone, or when they mix datasets), and their split, when they came from a
/// task repository and share one.
fn run_dataset<'a>(
    ark: Option<&Ark>,
    ids: impl Iterator<Item = &'a str>,
) -> (Option<String>, Option<String>) {
    let Some(ark) = ark else {
        return (None, None);
    };
    let mut names = std::collections::BTreeSet::new();
    let mut splits = std::collections::BTreeSet::new();
    for id in ids {
        let name = ark.index().dataset_of(id).ok().flatten();
        names.insert(name.map(|d| d.name));
        let inst = ark.index().instance(id).ok().flatten();
        splits.insert(
            inst.and_then(|i| crate::dataset::TaskRecord::of(&i))
                .map(|r| r.split),
        );
    }
    let one = |mut set: std::collections::BTreeSet<Option<String>>| match set.len() {
        1 => set.pop_first().flatten(),
        _ => None,
    };
    (one(names), one(splits))
}

/// The instance directories of a run's directory `dir` (`<model>/<instance>/`), sorted.
fn instance_dirs(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let subdirs = |d: &Path| -> std::io::Result<Vec<PathBuf>> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(d)? {
            let p = e?.path();
            if p.is_dir() {
                v.push(p);
            }
        }
        v.sort();
        Ok(v)
    };
    let mut out = Vec::new();
    for model in subdirs(dir)? {
        out.extend(subdirs(&model)?);
    }
    Ok(out)
}

/// `reports` and every other readable report under the run's directory `dir`
/// (`<model>/<instance>/report.json`) of a model and instance not among them.
fn with_earlier_reports(dir: &Path, mut reports: Vec<InstanceReport>) -> Vec<InstanceReport> {
    let have: std::collections::BTreeSet<(String, String)> = reports
        .iter()
        .map(|r| (r.model_name_or_path.clone(), r.instance_id.clone()))
        .collect();
    for inst in instance_dirs(dir).unwrap_or_default() {
        let earlier = std::fs::read(inst.join("report.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<BTreeMap<String, InstanceReport>>(&b).ok());
        for r in earlier.into_iter().flat_map(BTreeMap::into_values) {
            if !have.contains(&(r.model_name_or_path.clone(), r.instance_id.clone())) {
                reports.push(r);
            }
        }
    }
    reports
}

/// Where a prediction's bundle is, or why it has none.
type Placed = Result<Where, NoBundle>;

/// Why a prediction has no bundle to replay.
#[derive(Debug, Clone, thiserror::Error)]
enum NoBundle {
    #[error("no bundle file was given for it")]
    NoFileGiven,
    /// `found` is what validation found: `discarded (no-fail-to-pass): no test goes …`.
    #[error("no bundle of this instance in the archive: validation found it {found}")]
    NotKept { found: String },
    #[error("no bundle of this instance in the archive: it was not validated")]
    NotValidated,
    #[error("no bundle of this instance in the archive, nor the instance in its index")]
    NotImported,
}

/// Each prediction with its bundle: the newest of its instance in the archive, or the bundle
/// file given for it; for those with none, why (said on `progress`, and reported as an error
/// of the run that excludes the instance from those that reproduce here).
fn match_bundles(
    ark: Option<&Ark>,
    files: &[PathBuf],
    preds: Vec<Prediction>,
    progress: &dyn Progress,
) -> Result<Vec<(Prediction, Placed)>, ReplayError> {
    let mut given: BTreeMap<String, Where> = BTreeMap::new();
    for path in files {
        let manifest =
            crate::bundle::read_manifest(path).map_err(|source| ReplayError::Bundle {
                path: path.clone(),
                source,
            })?;
        given.insert(
            manifest.instance_id,
            Where::File(path.clone(), crate::bundle::id_from_file_name(path)),
        );
    }
    let validations = match ark {
        Some(ark) => ark.index().validations()?,
        None => Vec::new(),
    };
    let mut jobs = Vec::new();
    let mut unknown = Vec::new();
    for p in preds {
        let found = match ark {
            Some(ark) => match ark.index().bundles_of_instance(&p.instance_id)?.first() {
                Some(b) => Ok(Where::Archive(b.clone())),
                None => Err(why_no_bundle(ark, &validations, &p.instance_id)?),
            },
            None => given
                .get(&p.instance_id)
                .cloned()
                .ok_or(NoBundle::NoFileGiven),
        };
        if found.is_err() {
            unknown.push(p.instance_id.clone());
        }
        jobs.push((p, found));
    }
    if !unknown.is_empty() {
        progress.line(&format!(
            "no bundle in the archive for {} instance(s): {}",
            unknown.len(),
            unknown.join(", ")
        ));
    }
    Ok(jobs)
}

/// Why the archive has no bundle of `instance`: what its validation found, or that it was not
/// validated, or not imported at all.
fn why_no_bundle(
    ark: &Ark,
    validations: &[crate::store::ValidationRow],
    instance: &str,
) -> Result<NoBundle, ReplayError> {
    if let Some(v) = validations.iter().find(|v| v.instance_id == instance) {
        let kind = crate::verdict::reason_word(v.reason_kind);
        return Ok(NoBundle::NotKept {
            found: format!(
                "{}{}{}",
                v.verdict,
                if kind.is_empty() {
                    String::new()
                } else {
                    format!(" ({kind})")
                },
                match v.reason.lines().next() {
                    Some(line) if !line.is_empty() => format!(": {line}"),
                    _ => String::new(),
                }
            ),
        });
    }
    Ok(if ark.index().instance(instance)?.is_some() {
        NoBundle::NotValidated
    } else {
        NoBundle::NotImported
    })
}

/// What every replay of a run shares.
struct Workplace<'a> {
    objects: &'a ObjectStore,
    /// The archive directory: environments are cached there.
    root: &'a Path,
    /// Where work directories go.
    tmp: &'a Path,
    run: &'a RunOptions,
    grading: crate::logparse::Grading,
}

/// One prediction: its report from an earlier run with this id (unless forced), or replayed
/// now with its files written; and the error of writing them, if any.
fn replay_or_resume(
    dir: &Path,
    p: &Prediction,
    place: Placed,
    force: bool,
    at: &Workplace,
) -> (InstanceReport, Option<ReplayError>) {
    let resumed = (!force)
        .then(|| std::fs::read(dir.join("report.json")).ok())
        .flatten()
        .and_then(|b| serde_json::from_slice::<BTreeMap<String, InstanceReport>>(&b).ok())
        .and_then(|m| m.into_values().next())
        // An instance that had no bundle is looked for again: it may have one now.
        .filter(|r| r.error != Some(Reason::UnknownInstance));
    if let Some(r) = resumed {
        return (r, None);
    }
    let failed = |reason: Reason, detail: String| {
        let mut r = super::blank_report(p, "");
        r.error = Some(reason);
        r.error_detail = detail;
        super::infra::classify(&mut r, b"");
        (r, None)
    };
    let place = match place {
        Ok(place) => place,
        Err(why) => {
            // Written like any other report: the run accounts for every prediction, and
            // `--rewrite-reports` finds it.
            let mut r = failed(Reason::UnknownInstance, why.to_string()).0;
            r.excluded = why.to_string();
            let failure = write_instance(dir, &r, p, b"").err();
            return (r, failure);
        }
    };
    let (source, id) = match open_bundle(at.root, &place) {
        Ok(opened) => opened,
        Err(e) => return failed(Reason::BundleCorrupt, e.to_string()),
    };
    let inputs = ReplayInputs {
        bundle: source.as_ref(),
        bundle_id: id,
        objects: at.objects,
        cache_root: at.root,
        work_root: at.tmp,
        opts: at.run,
        grading: at.grading,
    };
    let (mut r, output) = super::replay_one(&inputs, p);
    super::infra::classify(&mut r, &output);
    let failure = write_instance(dir, &r, p, &output).err();
    crate::failpoint::hit("replay.after-report");
    (r, failure)
}

/// `ID: resolved`, `ID: not resolved`, or `ID: reason (first line of why)`.
fn report_line(report: &InstanceReport) -> String {
    match report.error {
        _ if report.resolved => format!("{}: resolved", report.instance_id),
        None => format!("{}: not resolved", report.instance_id),
        Some(reason) => format!(
            "{}: {reason} ({})",
            report.instance_id,
            report.error_detail.lines().next().unwrap_or("")
        ),
    }
}

/// report.json (SWE-bench's shape: a map from the instance id), test_output.txt, patch.diff;
/// report.json last, so a report on disk means the instance is complete.
fn write_instance(
    dir: &Path,
    r: &InstanceReport,
    p: &Prediction,
    output: &[u8],
) -> Result<(), ReplayError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        fsutil::write_atomic(&path, bytes).map_err(io(&path))
    };
    write("test_output.txt", output)?;
    write("patch.diff", p.patch.as_deref().unwrap_or("").as_bytes())?;
    write("report.json", &report_json(r))
}

/// A report as report.json holds it: a map from the instance id.
fn report_json(r: &InstanceReport) -> Vec<u8> {
    let mut map = BTreeMap::new();
    map.insert(r.instance_id.clone(), r);
    // A map of plain data always serializes.
    serde_json::to_vec_pretty(&map).unwrap_or_default()
}

/// The run report of each model, written beside its instances; returns them.
fn write_summaries(
    runs: &Path,
    run_id: &str,
    reports: &[InstanceReport],
) -> Result<Vec<(String, serde_json::Value, PathBuf)>, ReplayError> {
    let mut by_model: BTreeMap<String, Vec<&InstanceReport>> = BTreeMap::new();
    for r in reports {
        by_model
            .entry(r.model_name_or_path.clone())
            .or_default()
            .push(r);
    }
    let dir = runs.join(run_id);
    let mut summaries = Vec::new();
    for (model, rs) in by_model {
        let summary = summarize(&rs);
        let path = dir.join(format!("{}.{run_id}.json", model.replace('/', "__")));
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let bytes = serde_json::to_vec_pretty(&summary).unwrap_or_default();
        fsutil::write_atomic(&path, &bytes).map_err(io(&path))?;
        // Multi-SWE-bench's own form too, for a run of its rows.
        if let Some(bytes) = super::msb_report::final_report(&rs) {
            let msb = dir.join(format!(
                "{}.{run_id}.final_report.json",
                model.replace('/', "__")
            ));
            fsutil::write_atomic(&msb, &bytes).map_err(io(&msb))?;
        }
        summaries.push((model, summary, path));
    }
    Ok(summaries)
}

/// The few lines printed at the end of a run for one model: counts, what was not evaluated and
/// why, which instances did not resolve, the times, and whether the network was cut.
pub fn screen_summary(model: &str, reports: &[InstanceReport], written: &Path) -> String {
    const SHOWN: usize = 8;
    let rs: Vec<&InstanceReport> = reports
        .iter()
        .filter(|r| r.model_name_or_path == model)
        .collect();
    let list = |ids: Vec<&str>| -> String {
        let more = ids.len().saturating_sub(SHOWN);
        let mut s = ids.into_iter().take(SHOWN).collect::<Vec<_>>().join(", ");
        if more > 0 {
            s.push_str(&format!(", … {more} more"));
        }
        s
    };
    let median = |mut v: Vec<f64>| -> f64 {
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => 0.0,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        }
    };
    let resolved = rs.iter().filter(|r| r.resolved).count();
    let unresolved: Vec<&str> = rs
        .iter()
        .filter(|r| r.error.is_none() && !r.resolved)
        .map(|r| r.instance_id.as_str())
        .collect();
    let mut by_reason: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for r in &rs {
        if let Some(reason) = r.error {
            by_reason
                .entry(reason.as_str())
                .or_default()
                .push(r.instance_id.as_str());
        }
    }
    let ran: Vec<&&InstanceReport> = rs.iter().filter(|r| !r.network.is_empty()).collect();
    let isolated = ran.iter().filter(|r| r.network == "isolated").count();
    let mut lines = vec![format!(
        "{model}: {} instances: resolved {resolved} ({:.1} %), unresolved {}, not evaluated {}",
        rs.len(),
        100.0 * resolved as f64 / rs.len().max(1) as f64,
        unresolved.len(),
        rs.len() - resolved - unresolved.len(),
    )];
    let score = Score::of(&rs);
    let graded_without: Vec<&str> = rs
        .iter()
        .filter(|r| !r.cannot_run.is_empty())
        .map(|r| r.instance_id.as_str())
        .collect();
    if score.reproducing != score.total || !graded_without.is_empty() {
        lines.push(format!(
            "  score over all {} instances: {} ({:.1} %); over the {} that reproduce here: {} ({:.1} %)",
            score.total,
            score.resolved,
            100.0 * score.rate(),
            score.reproducing,
            score.reproducing_resolved,
            100.0 * score.reproducing_rate()
        ));
        let excluded: Vec<&str> = rs
            .iter()
            .filter(|r| !r.excluded.is_empty())
            .map(|r| r.instance_id.as_str())
            .collect();
        if !excluded.is_empty() {
            lines.push(format!(
                "  excluded (why: \"excluded\" in the run report): {}",
                list(excluded)
            ));
        }
        if !graded_without.is_empty() {
            lines.push(format!(
                "  graded here without published tests that cannot run here (which, and why: \
                 \"cannot_run\" in the run report): {}",
                list(graded_without)
            ));
        }
    }
    if !unresolved.is_empty() {
        lines.push(format!("  unresolved: {}", list(unresolved)));
    }
    for (reason, ids) in by_reason {
        lines.push(format!("  {reason} {}: {}", ids.len(), list(ids)));
    }
    if !ran.is_empty() {
        lines.push(format!(
            "  tests {:.1} s and overhead {:.1} s per instance (medians); network cut for {isolated} of {}",
            median(ran.iter().map(|r| r.test_seconds).collect()),
            median(ran.iter().map(|r| r.overhead_seconds).collect()),
            ran.len()
        ));
    }
    let grading = grading_of(&rs);
    if !grading.is_empty() {
        lines.push(format!("  graded by the rules of {grading}"));
    }
    lines.push(format!("  report: {}", written.display()));
    lines.join("\n")
}

/// Every finished instance of run `run_id` graded again from its saved test output and
/// grading inputs by the rules of `grading` (after a parser fix, or to compare the rules of
/// two harness releases); nothing runs, the reports are rewritten.
pub fn rewrite_reports(
    root: &Path,
    run_id: &str,
    grading: crate::logparse::Grading,
) -> Result<RunReport, ReplayError> {
    if !valid_run_id(run_id) {
        return Err(ReplayError::BadRunId(run_id.to_string()));
    }
    let runs = Layout::new(root).runs();
    let dir = runs.join(run_id);
    if !dir.is_dir() {
        return Err(ReplayError::NoSuchRun {
            run_id: run_id.to_string(),
            runs,
        });
    }
    let mut reports = Vec::new();
    let mut regraded = 0;
    for inst in instance_dirs(&dir).map_err(io(&dir))? {
        let path = inst.join("report.json");
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let map: BTreeMap<String, InstanceReport> =
            serde_json::from_slice(&bytes).map_err(|source| ReplayError::NotAReport {
                path: path.clone(),
                source,
            })?;
        for (_, mut r) in map {
            if r.grading.is_some() {
                let saved = inst.join("test_output.txt");
                let output = std::fs::read(&saved).map_err(io(&saved))?;
                if let Err(e) = super::grade_output(&mut r, &output, grading) {
                    r.error = Some(Reason::LogParseFailed);
                    r.error_detail = e.to_string();
                }
                super::infra::classify(&mut r, &output);
                fsutil::write_atomic(&path, &report_json(&r)).map_err(io(&path))?;
                regraded += 1;
            }
            reports.push(r);
        }
    }
    let summaries = write_summaries(&runs, run_id, &reports)?;
    write_run_json(root, &dir, &reports)?;
    Ok(RunReport {
        run_id: run_id.to_string(),
        dir,
        reports,
        summaries,
        failures: Vec::new(),
        regraded,
    })
}

/// The run reports of run `run_id` written again from its instances' reports as they are
/// (no grading): after instances were added to the run from elsewhere (`swe-ark merge` of
/// replay shards).
pub fn summarize_run(
    root: &Path,
    run_id: &str,
) -> Result<Vec<(String, serde_json::Value, PathBuf)>, ReplayError> {
    if !valid_run_id(run_id) {
        return Err(ReplayError::BadRunId(run_id.to_string()));
    }
    let runs = Layout::new(root).runs();
    let mut reports = with_earlier_reports(&runs.join(run_id), Vec::new());
    reports.sort_by(|a, b| {
        (&a.instance_id, &a.model_name_or_path).cmp(&(&b.instance_id, &b.model_name_or_path))
    });
    let summaries = write_summaries(&runs, run_id, &reports)?;
    write_run_json(root, &runs.join(run_id), &reports)?;
    Ok(summaries)
}

/// The run's `run.json` written again for all its instances' reports: the dataset and split
/// they share, as the archive at `root` records them.
fn write_run_json(root: &Path, dir: &Path, reports: &[InstanceReport]) -> Result<(), ReplayError> {
    let ark = Ark::open(root).ok();
    let ids = reports.iter().map(|r| r.instance_id.as_str());
    let (dataset, split) = run_dataset(ark.as_ref(), ids);
    super::logs::write_run_metadata(dir, dataset.as_deref(), split.as_deref()).map_err(io(dir))?;
    Ok(())
}

/// A model's score two ways: over every instance of the run (an instance that could not run
/// counts as not resolved, as the official harness counts it), and over the instances that
/// reproduce here (those not [`InstanceReport::excluded`]).
struct Score {
    total: usize,
    resolved: usize,
    reproducing: usize,
    reproducing_resolved: usize,
}

impl Score {
    fn of(rs: &[&InstanceReport]) -> Score {
        let here: Vec<&&InstanceReport> = rs.iter().filter(|r| r.excluded.is_empty()).collect();
        Score {
            total: rs.len(),
            resolved: rs.iter().filter(|r| r.resolved).count(),
            reproducing: here.len(),
            reproducing_resolved: here
                .iter()
                .filter(|r| r.resolved_here.unwrap_or(r.resolved))
                .count(),
        }
    }

    fn rate(&self) -> f64 {
        self.resolved as f64 / self.total.max(1) as f64
    }

    fn reproducing_rate(&self) -> f64 {
        self.reproducing_resolved as f64 / self.reproducing.max(1) as f64
    }
}

/// The rules the reports were graded by: one name, or several joined by `+` when a resumed
/// run mixes them; empty when nothing was graded.
fn grading_of(rs: &[&InstanceReport]) -> String {
    let names: std::collections::BTreeSet<&str> = rs
        .iter()
        .map(|r| r.grading_rules.as_str())
        .filter(|g| !g.is_empty())
        .collect();
    names.into_iter().collect::<Vec<_>>().join("+")
}

/// SWE-bench's run report (schema_version 2), with the reasons, bundles, overhead and network
/// of each instance.
fn summarize(rs: &[&InstanceReport]) -> serde_json::Value {
    let ids = |f: &dyn Fn(&InstanceReport) -> bool| -> Vec<String> {
        rs.iter()
            .filter(|r| f(r))
            .map(|r| r.instance_id.clone())
            .collect()
    };
    let completed = |r: &InstanceReport| r.error.is_none();
    let empty = |r: &InstanceReport| r.error == Some(Reason::EmptyPatch);
    let error = |r: &InstanceReport| !completed(r) && !empty(r);
    let resolved = ids(&|r| r.resolved);
    let unresolved = ids(&|r| completed(r) && !r.resolved);
    // swebench 5 classifies the unresolved and the errors; an empty patch is neither.
    let classified =
        |tier: &'static str| move |r: &InstanceReport| r.failure_tier == tier && !empty(r);
    let infra = ids(&classified(super::infra::TIER_ENVIRONMENT));
    let ambiguous = ids(&classified(super::infra::TIER_AMBIGUOUS));
    let score = Score::of(rs);
    serde_json::json!({
        "grading": grading_of(rs),
        "score": {
            "whole": {"instances": score.total, "resolved": score.resolved, "rate": score.rate()},
            "reproducing": {
                "instances": score.reproducing,
                "resolved": score.reproducing_resolved,
                "rate": score.reproducing_rate(),
            },
        },
        "excluded": rs.iter().filter(|r| !r.excluded.is_empty()).map(|r| (r.instance_id.clone(), r.excluded.clone())).collect::<BTreeMap<_, _>>(),
        "cannot_run": rs.iter().filter(|r| !r.cannot_run.is_empty()).map(|r| (r.instance_id.clone(), r.cannot_run.clone())).collect::<BTreeMap<_, _>>(),
        // Resolved once graded without the tests that cannot run here (`cannot_run`).
        "resolved_here_ids": ids(&|r| r.resolved_here == Some(true)),
        "total_instances": rs.len(),
        "submitted_instances": rs.len(),
        "completed_instances": ids(&completed).len(),
        "resolved_instances": resolved.len(),
        "unresolved_instances": unresolved.len(),
        "infra_failure_instances": infra.len(),
        "ambiguous_failure_instances": ambiguous.len(),
        "empty_patch_instances": ids(&empty).len(),
        "error_instances": ids(&error).len(),
        "completed_ids": ids(&completed),
        "incomplete_ids": ids(&|r| !completed(r)),
        "empty_patch_ids": ids(&empty),
        "submitted_ids": ids(&|_| true),
        "resolved_ids": resolved,
        "unresolved_ids": unresolved,
        "infra_failure_ids": infra,
        "ambiguous_failure_ids": ambiguous,
        "failure_reasons": rs.iter().filter(|r| !r.failure_tier.is_empty() && !empty(r)).map(|r| (r.instance_id.clone(), r.failure_reason.clone())).collect::<BTreeMap<_, _>>(),
        "error_ids": ids(&error),
        "errors": rs.iter().filter_map(|r| r.error.map(|reason| (r.instance_id.clone(), serde_json::json!({"reason": reason, "detail": r.error_detail}))))
            .collect::<BTreeMap<_, _>>(),
        "bundles": rs.iter().map(|r| (r.instance_id.clone(), r.bundle.clone())).collect::<BTreeMap<_, _>>(),
        "locks": rs.iter().map(|r| (r.instance_id.clone(), r.lock.clone())).collect::<BTreeMap<_, _>>(),
        "overhead_seconds": rs.iter().map(|r| (r.instance_id.clone(), r.overhead_seconds)).collect::<BTreeMap<_, _>>(),
        "test_seconds": rs.iter().map(|r| (r.instance_id.clone(), r.test_seconds)).collect::<BTreeMap<_, _>>(),
        "network": rs.iter().map(|r| (r.instance_id.clone(), r.network.clone())).collect::<BTreeMap<_, _>>(),
        "schema_version": 2,
        "tool": format!("swe-ark {}", env!("CARGO_PKG_VERSION")),
    })
}
