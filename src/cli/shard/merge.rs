//! `swe-ark merge`: shard files brought into this archive.

use std::process::ExitCode;

use crate::shard::{self, MergeOptions, MergeReport};

use super::super::Context;
use super::MergeArgs;

pub fn merge(ctx: &Context, a: MergeArgs) -> anyhow::Result<ExitCode> {
    let plan = a
        .plan
        .as_deref()
        .map(|p| shard::read_plan(&p.to_string_lossy()))
        .transpose()?;
    if let Some(name) = &a.release
        && !crate::release::valid_name(name)
    {
        anyhow::bail!("`{name}` is not a release name (letters, digits, `-`, `_`, `.`)");
    }
    let progress = ctx.progress();
    let report = shard::merge(
        &ctx.ark,
        &a.files,
        &MergeOptions {
            plan,
            release: a.release,
        },
        progress.as_ref(),
    )?;
    if a.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        show(ctx, &report)?;
    }
    if !report.refused.is_empty() {
        return Ok(ExitCode::from(2));
    }
    if !report.missing.is_empty() || !report.not_run.is_empty() {
        let shards: std::collections::BTreeSet<usize> = report
            .missing
            .iter()
            .copied()
            .chain(report.not_run.iter().map(|n| n.shard))
            .collect();
        ctx.note(format!(
            "incomplete: run shard(s) {} again (`swe-ark shard run PLAN --index K`) and merge \
             their files",
            shards
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// What was merged, what was refused (as errors), what is still to run, and the release.
fn show(ctx: &Context, report: &MergeReport) -> anyhow::Result<()> {
    for m in &report.merged {
        if let Some(run) = &m.run_id {
            ctx.note(format!(
                "merged replay shard {} ({}) into run {run}: {} instance report(s) added, {} \
                 not replayed; the run's reports are in {}",
                m.index,
                m.file,
                m.replayed,
                m.not_run,
                crate::store::Layout::new(&ctx.ark)
                    .runs()
                    .join(run)
                    .display()
            ));
            continue;
        }
        ctx.note(format!(
            "merged shard {} ({}): {} kept, {} not kept, {} not run; bundles {} new, {} already \
             here",
            m.index, m.file, m.kept, m.not_kept, m.not_run, m.bundles_added, m.bundles_present
        ));
    }
    for r in &report.refused {
        eprintln!("swe-ark: error: refused `{}`: {}", r.file, r.reason);
    }
    for n in &report.not_run {
        ctx.note(format!(
            "not run: {} (shard {}): {}",
            n.instance_id, n.shard, n.reason
        ));
    }
    if !report.missing.is_empty() {
        ctx.note(format!(
            "no file merged of shard(s) {} of {}",
            report
                .missing
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            report.shards
        ));
    }
    if let Some((name, root)) = &report.release {
        ctx.note(format!("release {name} registered: root {root}"));
        out!("{root}");
    }
    Ok(())
}
