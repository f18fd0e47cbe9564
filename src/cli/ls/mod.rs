//! `ls`: the instances and their bundles; `ls --validated` and `ls --stats` in `report.rs`.

mod report;

use std::process::ExitCode;

use crate::store::Ark;

use super::Context;
use super::output::{column_width, human_bytes, human_time};

#[derive(Debug, clap::Args)]
pub struct LsArgs {
    /// Print JSON: a list of instances, each with its bundles.
    #[arg(long)]
    pub json: bool,
    /// The validation verdicts instead: kept / discarded / not reproducible, with the reason,
    /// FAIL_TO_PASS, PASS_TO_PASS and flaky counts.
    #[arg(long)]
    pub validated: bool,
    /// Storage per repository instead: bundles, logical size (their tars), stored size
    /// (packs, and whole files kept from before), dedup ratio.
    #[arg(long, conflicts_with = "validated")]
    pub stats: bool,
    /// The installed states kept instead (docs/REPLAY.md, "The installed state"): per
    /// repository, how many and their bytes, then each with its base commit, size, entries and
    /// what its install took.
    #[arg(long, conflicts_with_all = ["validated", "stats"])]
    pub installed: bool,
}

pub fn run(ctx: &Context, args: LsArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    if args.validated {
        return report::validated(ctx, &ark, args.json);
    }
    if args.stats {
        return report::stats(ctx, &ark, args.json);
    }
    if args.installed {
        return report::installed(&ark, args.json);
    }
    let instances = ark.index().instances()?;
    let bundles = ark.bundles_by_instance()?;
    if args.json {
        let list: Vec<_> = instances
            .iter()
            .map(|i| {
                serde_json::json!({
                    "instance_id": i.instance_id,
                    "repo": i.repo,
                    "base_commit": i.base_commit,
                    "version": i.version,
                    "created_at": i.created_at,
                    "bundles": bundles.get(&i.instance_id).cloned().unwrap_or_default(),
                })
            })
            .collect();
        out!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(ExitCode::SUCCESS);
    }
    if instances.is_empty() {
        ctx.note(format!(
            "the archive `{}` holds no instances",
            ctx.ark.display()
        ));
        return Ok(ExitCode::SUCCESS);
    }
    let width = column_width(instances.iter().map(|i| i.instance_id.len()), 8);
    let repo_width = column_width(instances.iter().map(|i| i.repo.len()), 4);
    out!(
        "{:<width$}  {:<repo_width$}  {:<7}  {:<12}  {:>6}  {:>10}  {:>10}  PACKED",
        "INSTANCE",
        "REPO",
        "VERSION",
        "BUNDLE",
        "FILES",
        "TAR",
        "STORED"
    );
    let mut total_files = 0;
    let mut total_bundles = 0;
    for i in &instances {
        let rows = bundles
            .get(&i.instance_id)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        if rows.is_empty() {
            out!(
                "{:<width$}  {:<repo_width$}  {:<7}  {:<12}",
                i.instance_id,
                i.repo,
                i.version,
                "-"
            );
        }
        for b in rows {
            total_bundles += 1;
            total_files += b.file_size;
            out!(
                "{:<width$}  {:<repo_width$}  {:<7}  {:<12}  {:>6}  {:>10}  {:>10}  {}",
                i.instance_id,
                i.repo,
                i.version,
                b.id.short(),
                b.codebase_files,
                human_bytes(b.tar_size),
                human_bytes(b.file_size),
                human_time(b.packed_at)
            );
        }
    }
    ctx.note(format!(
        "{} instances, {} bundles, {} stored (STORED: what packing each added; `ls --stats` per \
         repository)",
        instances.len(),
        total_bundles,
        human_bytes(total_files)
    ));
    Ok(ExitCode::SUCCESS)
}
