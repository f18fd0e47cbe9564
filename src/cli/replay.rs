use std::collections::{BTreeMap, VecDeque};
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context as _, bail};

use crate::bundle::{BundleFile, BundleSource};
use crate::digest::Sha256Digest;
use crate::fsutil;
use crate::replay::{self, InstanceReport, Prediction, ReplayInputs, predictions};
use crate::store::Ark;
use crate::validate::ValidateOptions;

use super::Context;

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["predictions", "gold", "rewrite_reports"])))]
pub struct ReplayArgs {
    /// Bundle files to replay with no index (with --objects); without them, the archive's
    /// bundles.
    #[arg(value_name = "BUNDLE", requires = "objects", conflicts_with = "gold")]
    pub bundles: Vec<std::path::PathBuf>,
    /// The object store holding what the bundles' locks need (a directory laid out as an
    /// archive's `objects/`).
    #[arg(long, value_name = "DIR", requires = "bundles")]
    pub objects: Option<std::path::PathBuf>,
    /// Predictions in SWE-bench's format (.json list or map, or .jsonl).
    #[arg(long, value_name = "FILE")]
    pub predictions: Option<std::path::PathBuf>,
    /// Replay the gold patches (every instance with a bundle): they must all resolve.
    #[arg(long)]
    pub gold: bool,
    /// The run's name: reports go to <ark>/runs/<run-id>/; a run with the same id resumes.
    #[arg(long)]
    pub run_id: Option<String>,
    /// Only these instances.
    #[arg(long, value_delimiter = ',', value_name = "ID")]
    pub instance_ids: Vec<String>,
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Seconds the test command may run.
    #[arg(long, default_value_t = 1800)]
    pub timeout: u64,
    /// Replay again instances that already have a report in this run.
    #[arg(long)]
    pub force: bool,
    /// Grade the saved test output of run --run-id again (after a parser fix, say): nothing
    /// runs, the reports are rewritten.
    #[arg(long, requires = "run_id", conflicts_with_all = ["predictions", "gold", "bundles"])]
    pub rewrite_reports: bool,
    /// Let the tests reach the network (each report records it).
    #[arg(long)]
    pub allow_network: bool,
    /// Keep each instance's work directory (under <ark>/tmp).
    #[arg(long)]
    pub keep_workdir: bool,
    #[arg(long)]
    pub json: bool,
}

/// Where a prediction's bundle is.
#[derive(Clone)]
enum Where {
    File(std::path::PathBuf, Option<Sha256Digest>),
    Archive(crate::store::BundleRow),
}

/// The bundle to replay; a worker opens the archive through its own connection.
fn open_bundle(
    root: &std::path::Path,
    place: &Where,
) -> Result<(Box<dyn BundleSource>, Option<Sha256Digest>), crate::store::ArkError> {
    Ok(match place {
        Where::File(path, id) => (Box::new(BundleFile::new(path)), *id),
        Where::Archive(row) => (Box::new(Ark::open(root)?.bundle(row)?), Some(row.id)),
    })
}

fn valid_run_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

pub fn run(ctx: &Context, args: ReplayArgs) -> anyhow::Result<ExitCode> {
    if args.jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    if args.rewrite_reports {
        return rewrite_reports(ctx, &args);
    }
    // With bundle files, the archive directory is only a home for the environment cache, the
    // work directories and the reports: no index is read.
    let ark = if args.bundles.is_empty() {
        Some(Ark::open(&ctx.ark)?)
    } else {
        None
    };
    let run_id = match &args.run_id {
        Some(r) if valid_run_id(r) => r.clone(),
        Some(r) => bail!("--run-id `{r}` must be letters, digits, `-`, `_` or `.`"),
        None => {
            let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
            format!("run-{}", now.replace([':', '-'], "").trim_end_matches('Z'))
        }
    };
    let mut preds: Vec<Prediction> = match (&args.predictions, args.gold, &ark) {
        (Some(path), _, _) => predictions::read(path)?,
        (None, true, Some(ark)) => {
            let mut out = Vec::new();
            for b in ark.index().bundles()? {
                if out
                    .iter()
                    .any(|p: &Prediction| p.instance_id == b.instance_id)
                {
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
            out
        }
        _ => bail!("give --predictions FILE, or --gold with an archive"),
    };
    if !args.instance_ids.is_empty() {
        // An id that selects nothing is a mistake to say, not a run that silently skips it.
        let missing: Vec<&str> = args
            .instance_ids
            .iter()
            .filter(|id| !preds.iter().any(|p| &p.instance_id == *id))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            bail!(
                "--instance-ids names {} instance(s) {}: {}",
                missing.len(),
                if args.gold {
                    "with no bundle in the archive"
                } else {
                    "the predictions do not cover"
                },
                missing.join(", ")
            );
        }
        preds.retain(|p| args.instance_ids.contains(&p.instance_id));
    }
    // Each prediction's bundle: the newest of its instance, or the bundle file given for it.
    let root = ctx.ark.clone();
    let mut given: BTreeMap<String, Where> = BTreeMap::new();
    for path in &args.bundles {
        let manifest = crate::bundle::read_manifest(path)
            .with_context(|| format!("bundle `{}`", path.display()))?;
        given.insert(
            manifest.instance_id,
            Where::File(path.clone(), crate::bundle::id_from_file_name(path)),
        );
    }
    let mut jobs = VecDeque::new();
    let mut unknown = Vec::new();
    for p in preds {
        let found = match &ark {
            Some(ark) => ark
                .index()
                .bundles_of_instance(&p.instance_id)?
                .first()
                .map(|b| Where::Archive(b.clone())),
            None => given.get(&p.instance_id).cloned(),
        };
        if found.is_none() {
            unknown.push(p.instance_id.clone());
        }
        jobs.push_back((p, found));
    }
    if !unknown.is_empty() {
        ctx.note(format!(
            "no bundle in the archive for {} instance(s): {}",
            unknown.len(),
            unknown.join(", ")
        ));
    }
    let runs = root.join("runs");
    let tmp = root.join("tmp");
    std::fs::create_dir_all(&tmp).with_context(|| tmp.display().to_string())?;
    let opts = ValidateOptions {
        runs: 1,
        timeout: Duration::from_secs(args.timeout),
        allow_network: args.allow_network,
        memory_limit: None,
        keep_workdir: args.keep_workdir,
        lock: None,
    };
    let total = jobs.len();
    ctx.note(format!("run {run_id}: {total} prediction(s)"));
    let bar = ctx.progress.then(|| {
        let b = indicatif::ProgressBar::new(total as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "replaying [{wide_bar}] {pos}/{len} eta {eta} {msg}",
        ) {
            b.set_style(style.progress_chars("=> "));
        }
        b
    });
    let queue = Mutex::new(jobs);
    let reports = Mutex::new(Vec::new());
    let objects = match (&args.objects, &ark) {
        (Some(dir), _) => crate::store::ObjectStore::new(dir),
        (None, Some(ark)) => ark.objects(),
        (None, None) => bail!("give --objects DIR with bundle files"),
    };
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..args.jobs.min(total.max(1)) {
            s.spawn(|| {
                loop {
                    let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
                    let Some((p, bundle)) = next else { break };
                    if let Some(b) = &bar {
                        b.set_message(p.instance_id.clone());
                    }
                    let dir = replay::instance_dir(&runs, &run_id, &p.model, &p.instance_id);
                    let report_path = dir.join("report.json");
                    let resumed = (!args.force)
                        .then(|| std::fs::read(&report_path).ok())
                        .flatten()
                        .and_then(|b| {
                            serde_json::from_slice::<BTreeMap<String, InstanceReport>>(&b).ok()
                        })
                        .and_then(|m| m.into_values().next());
                    let report = match (resumed, bundle) {
                        (Some(r), _) => r,
                        (None, None) => {
                            let mut r = replay::blank_report(&p, "");
                            r.error = "unknown_instance".into();
                            r.error_detail = "no bundle of this instance in the archive".into();
                            r
                        }
                        (None, Some(place)) => match open_bundle(&root, &place) {
                            Err(e) => {
                                let mut r = replay::blank_report(&p, "");
                                r.error = "bundle_corrupt".into();
                                r.error_detail = e.to_string();
                                r
                            }
                            Ok((source, id)) => {
                                let inputs = ReplayInputs {
                                    bundle: source.as_ref(),
                                    bundle_id: id,
                                    objects: &objects,
                                    cache_root: &root,
                                    work_root: &tmp,
                                    opts: &opts,
                                };
                                let (r, output) = replay::replay_one(&inputs, &p);
                                if let Err(e) = write_instance(&dir, &r, &p, &output) {
                                    failures
                                        .lock()
                                        .unwrap_or_else(|p| p.into_inner())
                                        .push(format!("{}: {e}", p.instance_id));
                                }
                                crate::failpoint::hit("replay.after-report");
                                r
                            }
                        },
                    };
                    let line = if report.resolved {
                        format!("{}: resolved", report.instance_id)
                    } else if report.error.is_empty() {
                        format!("{}: not resolved", report.instance_id)
                    } else {
                        format!(
                            "{}: {} ({})",
                            report.instance_id,
                            report.error,
                            report.error_detail.lines().next().unwrap_or("")
                        )
                    };
                    match &bar {
                        Some(b) => {
                            b.println(line);
                            b.inc(1);
                        }
                        None => ctx.note(line),
                    }
                    reports
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(report);
                }
            });
        }
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let mut reports = reports.into_inner().unwrap_or_else(|p| p.into_inner());
    reports.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    let summaries = write_summaries(ctx, &runs, &run_id, &reports)?;
    if args.json {
        out!("{}", serde_json::to_string_pretty(&summaries)?);
    } else {
        out!("{}", runs.join(&run_id).display());
    }
    let failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    if !failures.is_empty() {
        for f in failures {
            eprintln!("swe-ark: error: {f}");
        }
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}

/// The run report of each model, written beside its instances; returns them.
fn write_summaries(
    ctx: &Context,
    runs: &std::path::Path,
    run_id: &str,
    reports: &[InstanceReport],
) -> anyhow::Result<Vec<serde_json::Value>> {
    let mut by_model: BTreeMap<String, Vec<&InstanceReport>> = BTreeMap::new();
    for r in reports {
        by_model
            .entry(r.model_name_or_path.clone())
            .or_default()
            .push(r);
    }
    let mut summaries = Vec::new();
    for (model, rs) in &by_model {
        let summary = summarize(rs);
        let path = runs
            .join(run_id)
            .join(format!("{}.{run_id}.json", model.replace('/', "__")));
        std::fs::create_dir_all(runs.join(run_id))?;
        fsutil::write_atomic(&path, &serde_json::to_vec_pretty(&summary)?)
            .with_context(|| path.display().to_string())?;
        ctx.note(screen_summary(model, rs, &path));
        summaries.push(summary);
    }
    Ok(summaries)
}

/// The few lines printed at the end of a run for one model: counts, what was not evaluated and
/// why, which instances did not resolve, the times, and whether the network was cut.
fn screen_summary(model: &str, rs: &[&InstanceReport], report: &std::path::Path) -> String {
    const SHOWN: usize = 8;
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
        .filter(|r| r.error.is_empty() && !r.resolved)
        .map(|r| r.instance_id.as_str())
        .collect();
    let mut by_reason: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for r in rs.iter().filter(|r| !r.error.is_empty()) {
        by_reason
            .entry(r.error.as_str())
            .or_default()
            .push(r.instance_id.as_str());
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
    lines.push(format!("  report: {}", report.display()));
    lines.join("\n")
}

/// `--rewrite-reports`: every finished instance of the run graded again from its saved test
/// output and grading inputs; nothing runs.
fn rewrite_reports(ctx: &Context, args: &ReplayArgs) -> anyhow::Result<ExitCode> {
    let run_id = args.run_id.clone().unwrap_or_default();
    if !valid_run_id(&run_id) {
        bail!("--run-id `{run_id}` must be letters, digits, `-`, `_` or `.`");
    }
    let runs = ctx.ark.join("runs");
    let dir = runs.join(&run_id);
    if !dir.is_dir() {
        bail!("there is no run {run_id} in `{}`", runs.display());
    }
    let mut reports = Vec::new();
    let mut regraded = 0;
    let mut models: Vec<_> = std::fs::read_dir(&dir)?
        .flatten()
        .filter(|e| e.path().is_dir())
        .collect();
    models.sort_by_key(|e| e.file_name());
    for model in models {
        let mut instances: Vec<_> = std::fs::read_dir(model.path())?.flatten().collect();
        instances.sort_by_key(|e| e.file_name());
        for inst in instances {
            let path = inst.path().join("report.json");
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let map: BTreeMap<String, InstanceReport> = serde_json::from_slice(&bytes)
                .with_context(|| format!("`{}` is not a replay report", path.display()))?;
            for (_, mut r) in map {
                if r.grading.is_some() {
                    let output = std::fs::read(inst.path().join("test_output.txt"))
                        .with_context(|| format!("the test output of {}", r.instance_id))?;
                    if let Err(e) = replay::grade_output(&mut r, &output) {
                        r.error = "log_parse_failed".into();
                        r.error_detail = e;
                    }
                    let mut out = BTreeMap::new();
                    out.insert(r.instance_id.clone(), &r);
                    fsutil::write_atomic(&path, &serde_json::to_vec_pretty(&out)?)?;
                    regraded += 1;
                }
                reports.push(r);
            }
        }
    }
    ctx.note(format!(
        "graded {regraded} saved test output(s) of run {run_id} again"
    ));
    let summaries = write_summaries(ctx, &runs, &run_id, &reports)?;
    if args.json {
        out!("{}", serde_json::to_string_pretty(&summaries)?);
    } else {
        out!("{}", dir.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// report.json (SWE-bench's shape: a map from the instance id), test_output.txt, patch.diff;
/// report.json last, so a report on disk means the instance is complete.
fn write_instance(
    dir: &std::path::Path,
    r: &InstanceReport,
    p: &Prediction,
    output: &[u8],
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
    fsutil::write_atomic(&dir.join("test_output.txt"), output)?;
    fsutil::write_atomic(
        &dir.join("patch.diff"),
        p.patch.as_deref().unwrap_or("").as_bytes(),
    )?;
    let mut map = BTreeMap::new();
    map.insert(r.instance_id.clone(), r);
    fsutil::write_atomic(&dir.join("report.json"), &serde_json::to_vec_pretty(&map)?)?;
    Ok(())
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
    let completed = |r: &InstanceReport| r.error.is_empty();
    let empty = |r: &InstanceReport| r.error == "empty_patch";
    let error = |r: &InstanceReport| !r.error.is_empty() && r.error != "empty_patch";
    let resolved = ids(&|r| r.resolved);
    let unresolved = ids(&|r| completed(r) && !r.resolved);
    serde_json::json!({
        "total_instances": rs.len(),
        "submitted_instances": rs.len(),
        "completed_instances": ids(&completed).len(),
        "resolved_instances": resolved.len(),
        "unresolved_instances": unresolved.len(),
        "empty_patch_instances": ids(&empty).len(),
        "error_instances": ids(&error).len(),
        "completed_ids": ids(&completed),
        "incomplete_ids": ids(&|r| !completed(r)),
        "empty_patch_ids": ids(&empty),
        "submitted_ids": ids(&|_| true),
        "resolved_ids": resolved,
        "unresolved_ids": unresolved,
        "error_ids": ids(&error),
        "errors": rs.iter().filter(|r| !r.error.is_empty())
            .map(|r| (r.instance_id.clone(), serde_json::json!({"reason": r.error, "detail": r.error_detail})))
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
