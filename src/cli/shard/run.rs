//! `swe-ark shard run`: one shard of a plan run here, its shard file written.

use std::process::ExitCode;

use anyhow::Context as _;

use crate::archive::Outcome;
use crate::plan::Plan;
use crate::shard::{self, LockSettings, RunOptions, RunReport};
use crate::validate::ValidateOptions;

use super::super::Context;
use super::super::output::human_bytes;
use super::ShardRunArgs;

/// The shard index: given, or the engine's.
fn shard_index(given: Option<usize>) -> anyhow::Result<usize> {
    if let Some(k) = given {
        return Ok(k);
    }
    for var in ["SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"] {
        if let Ok(v) = std::env::var(var) {
            return v
                .trim()
                .parse()
                .with_context(|| format!("${var} is `{v}`, not a shard index"));
        }
    }
    anyhow::bail!(
        "which shard? give --index K, or run it as a Slurm array task ($SLURM_ARRAY_TASK_ID) \
         or a Kubernetes Indexed Job ($JOB_COMPLETION_INDEX)"
    )
}

pub(super) fn run_shard(ctx: &Context, a: ShardRunArgs) -> anyhow::Result<ExitCode> {
    let plan = shard::read_plan(&a.plan)?;
    let replaying = a.predictions.is_some();
    let index = shard_index(a.index)?;
    if a.jobs == 0 {
        anyhow::bail!("--jobs must be at least 1");
    }
    let git_base =
        crate::store::git_base(&crate::store::Layout::new(&ctx.ark), a.git_base.clone())?;
    let opts = run_options(ctx, &a, plan, index, git_base);
    let manifests = ctx.manifests()?;
    let progress = ctx.progress();
    let report = shard::run(
        &ctx.ark,
        &manifests,
        &opts,
        &|m| ctx.note(m),
        progress.as_ref(),
    )?;
    let not_run = report.not_run();
    if a.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else if replaying {
        show_replays(ctx, &report)?;
    } else {
        show_outcomes(ctx, &report)?;
    }
    if let Some((files, bytes)) = report.fetched {
        ctx.note(format!(
            "fetched {files} file(s) ({}) from the seed's bucket",
            human_bytes(bytes)
        ));
    }
    if not_run > 0 {
        ctx.note(format!(
            "{not_run} instance(s) not run (above); run this shard again when their cause is \
             mended: `swe-ark shard run {} --index {index}` (what is done is kept)",
            a.plan
        ));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// The library's options, from the arguments.
fn run_options(
    ctx: &Context,
    a: &ShardRunArgs,
    plan: Plan,
    index: usize,
    git_base: String,
) -> RunOptions {
    RunOptions {
        plan,
        index,
        from: a.from.clone(),
        store: ctx.store.clone(),
        to: a.to.clone(),
        git_base,
        lock: LockSettings {
            index_url: a.index_url.clone(),
            allow_yanked: a.allow_yanked,
            installer: a.installer,
            unconfined: a.run.unconfined,
        },
        validate: ValidateOptions {
            run: a.run.options(),
            runs: a.runs,
            lock: None,
        },
        jobs: a.jobs,
        replay: match (a.predictions.clone(), a.run_id.clone()) {
            (Some(predictions), Some(run_id)) => Some(shard::ReplayShard {
                predictions,
                run_id,
                grading: a.grading,
            }),
            _ => None,
        },
    }
}

/// A replay shard's predictions, each with what became of it, and its file.
fn show_replays(ctx: &Context, report: &RunReport) -> anyhow::Result<()> {
    let not_run = report.not_run();
    for r in &report.replays {
        ctx.note(format!(
            "{} ({}): {}",
            r.instance_id,
            r.model,
            if r.replayed {
                "replayed".to_string()
            } else {
                format!("not replayed: {}", r.reason)
            }
        ));
    }
    ctx.note(format!(
        "shard {} of {} of plan {}: {} prediction(s) replayed, {not_run} not; {}",
        report.index,
        report.shards,
        report.plan,
        report.replays.len() - not_run,
        human_bytes(report.bytes)
    ));
    out!("{}", report.file);
    Ok(())
}

/// A build shard's instances, each with what became of it, and its file.
fn show_outcomes(ctx: &Context, report: &RunReport) -> anyhow::Result<()> {
    for o in &report.outcomes {
        let what = match (&o.bundle, o.reason.is_empty()) {
            (Some(b), _) => format!("bundle {b}"),
            (None, false) => o.reason.clone(),
            (None, true) => String::new(),
        };
        ctx.note(format!(
            "{}: {}{}{what}",
            o.instance_id,
            o.outcome.as_str(),
            if what.is_empty() { "" } else { ": " }
        ));
    }
    ctx.note(format!(
        "shard {} of {} of plan {}: {} kept, {} not kept, {} not run; {}",
        report.index,
        report.shards,
        report.plan,
        report.count(Outcome::Kept),
        report.count(Outcome::NotKept),
        report.not_run(),
        human_bytes(report.bytes)
    ));
    out!("{}", report.file);
    Ok(())
}
