//! Many instances of an archive validated at once: the selection, those already validated
//! left alone (unless forced), a worker pool with an archive connection per worker, each
//! outcome recorded as it ends (unless it is the archive's problem) and told to the progress.

use std::path::Path;

use crate::dataset::{Selection, SelectionError};
use crate::manifest::Manifests;
use crate::progress::Progress;
use crate::store::{Ark, ArkError};

use super::{Results, ValidateError, ValidateOptions, Verdict};

#[derive(Debug, Clone)]
pub struct ManyOptions {
    pub validate: ValidateOptions,
    /// Instances validated at once.
    pub jobs: usize,
    /// Validate again instances that already have a verdict.
    pub force: bool,
}

/// What a run of many validations did.
#[derive(Debug, Default)]
pub struct ManyReport {
    /// Every instance that ran, by instance id.
    pub outcomes: Vec<Results>,
    /// Selected instances left alone: they already have a verdict.
    pub skipped: usize,
    /// Errors of swe-ark itself (the archive unreadable), each with its instance when it has
    /// one: the run did not finish as asked.
    pub errors: Vec<ValidateError>,
}

impl ManyReport {
    /// Instances not run for a reason of the archive's: reported, not recorded.
    pub fn not_run(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|r| r.is_setup_problem())
            .count()
    }
}

/// Errors before anything runs.
#[derive(Debug, thiserror::Error)]
pub enum ManyError {
    #[error("--jobs must be at least 1")]
    NoJobs,
    #[error(transparent)]
    Selection(#[from] SelectionError),
    /// The sandbox cannot give the commands what the options ask (checked before any work).
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    #[error(transparent)]
    Ark(#[from] ArkError),
    #[error(transparent)]
    Index(#[from] crate::store::IndexError),
}

/// Validates the selected instances of the archive at `root`.
pub fn run_many(
    root: &Path,
    manifests: &Manifests,
    selection: &Selection,
    opts: &ManyOptions,
    progress: &dyn Progress,
) -> Result<ManyReport, ManyError> {
    if opts.jobs == 0 {
        return Err(ManyError::NoJobs);
    }
    let ark = Ark::open(root)?;
    let all = selection.pick(
        ark.index().all_instances()?,
        "not in the archive (import or collect them first)",
    )?;
    let done: std::collections::BTreeSet<String> = ark
        .index()
        .validations()?
        .into_iter()
        .map(|v| v.instance_id)
        .collect();
    drop(ark);
    let (queue, skipped): (Vec<_>, Vec<_>) = all
        .into_iter()
        .partition(|i| opts.force || !done.contains(&i.instance_id));
    let total = queue.len();
    if total == 0 {
        return Ok(ManyReport {
            skipped: skipped.len(),
            ..ManyReport::default()
        });
    }
    crate::harness::sandbox_ready(&opts.validate.run)?;
    progress.start_items("validating", total as u64);
    let counter = std::sync::atomic::AtomicUsize::new(0);
    let (ended, workers) = crate::workers::run(
        opts.jobs,
        queue,
        || Ark::open(root),
        |ark, instance| {
            progress.item(&instance.instance_id);
            // A problem of the archive (no lock, …) is reported, not recorded.
            let result = super::validate(ark, manifests, &instance, &opts.validate).and_then(|v| {
                if !v.results.is_setup_problem() {
                    super::record(ark, &instance, &v)?;
                }
                Ok(v.results)
            });
            let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            if let Ok(r) = &result {
                progress.line(&format!("[{n}/{total}] {}", outcome_line(r)));
            }
            progress.advance(1);
            result.map_err(|e| ValidateError::Of {
                instance: instance.instance_id.clone(),
                source: Box::new(e),
            })
        },
    );
    progress.finish();
    let mut report = ManyReport {
        skipped: skipped.len(),
        errors: workers.into_iter().map(ValidateError::from).collect(),
        ..ManyReport::default()
    };
    for r in ended {
        match r {
            Ok(results) => report.outcomes.push(results),
            Err(e) => report.errors.push(e),
        }
    }
    report
        .outcomes
        .sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    Ok(report)
}

/// One instance's outcome in a line: `ID: kept (FAIL_TO_PASS 2, …) in 12 s`.
pub fn outcome_line(r: &Results) -> String {
    let first_line = r.reason.lines().next().unwrap_or("");
    let kind = crate::verdict::reason_word(r.reason_kind);
    match r.verdict {
        Verdict::Kept => format!(
            "{}: kept (FAIL_TO_PASS {}, PASS_TO_PASS {}, flaky {}) in {:.0} s{}",
            r.instance_id,
            r.fail_to_pass.len(),
            r.pass_to_pass.len(),
            r.flaky.len(),
            r.timings.get("total").copied().unwrap_or(0.0),
            if r.reason.is_empty() {
                String::new()
            } else {
                format!("; {kind}: {}", r.reason)
            }
        ),
        _ if r.is_setup_problem() => format!("{}: not run ({kind}): {first_line}", r.instance_id),
        other => format!(
            "{}: {} ({kind}): {first_line}",
            r.instance_id,
            other.as_str()
        ),
    }
}
