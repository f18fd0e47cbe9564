use std::collections::BTreeMap;
use std::process::ExitCode;

use crate::store::{Ark, BundleRow};

use super::Context;
use super::output::{human_bytes, human_time};

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
}

fn stats(ctx: &Context, ark: &Ark, json: bool) -> anyhow::Result<ExitCode> {
    let repos = ark.index().storage_by_repo()?;
    let stored = |r: &crate::store::RepoStorage| r.pack_bytes + r.whole_file_bytes;
    let ratio = |logical: u64, stored: u64| {
        if stored == 0 {
            0.0
        } else {
            logical as f64 / stored as f64
        }
    };
    let total_logical: u64 = repos.iter().map(|r| r.logical).sum();
    let total_stored: u64 = repos.iter().map(stored).sum();
    let pieces = ark.index().all_pieces()?.len();
    if json {
        let list: Vec<_> = repos
            .iter()
            .map(|r| {
                serde_json::json!({
                    "repo": r.repo,
                    "bundles": r.bundles,
                    "logical_bytes": r.logical,
                    "stored_bytes": stored(r),
                    "packs": r.packs,
                    "pack_bytes": r.pack_bytes,
                    "whole_files": r.whole_files,
                    "whole_file_bytes": r.whole_file_bytes,
                    "dedup_ratio": ratio(r.logical, stored(r)),
                })
            })
            .collect();
        let v = serde_json::json!({
            "repos": list,
            "total": {
                "bundles": repos.iter().map(|r| r.bundles).sum::<u64>(),
                "logical_bytes": total_logical,
                "stored_bytes": total_stored,
                "pieces": pieces,
                "dedup_ratio": ratio(total_logical, total_stored),
            },
        });
        out!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let width = repos.iter().map(|r| r.repo.len()).max().unwrap_or(4).max(5);
    out!(
        "{:<width$}  {:>7}  {:>10}  {:>10}  {:>7}  WHOLE FILES",
        "REPO",
        "BUNDLES",
        "LOGICAL",
        "STORED",
        "RATIO"
    );
    for r in &repos {
        out!(
            "{:<width$}  {:>7}  {:>10}  {:>10}  {:>6.1}x  {}",
            if r.repo.is_empty() { "-" } else { &r.repo },
            r.bundles,
            human_bytes(r.logical),
            human_bytes(stored(r)),
            ratio(r.logical, stored(r)),
            r.whole_files
        );
    }
    out!(
        "{:<width$}  {:>7}  {:>10}  {:>10}  {:>6.1}x",
        "total",
        repos.iter().map(|r| r.bundles).sum::<u64>(),
        human_bytes(total_logical),
        human_bytes(total_stored),
        ratio(total_logical, total_stored)
    );
    ctx.note(format!(
        "logical: the bundles' uncompressed tars; stored: {pieces} pieces in packs, plus whole \
         files from before (gc moves them into the store)"
    ));
    Ok(ExitCode::SUCCESS)
}

fn validated(ctx: &Context, ark: &Ark, json: bool) -> anyhow::Result<ExitCode> {
    let rows = ark.index().validations()?;
    if json {
        out!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        ctx.note("no instance has been validated yet (run `swe-ark validate`)");
        return Ok(ExitCode::SUCCESS);
    }
    let width = rows
        .iter()
        .map(|r| r.instance_id.len())
        .max()
        .unwrap_or(8)
        .max(8);
    out!(
        "{:<width$}  {:<16}  {:>5}  {:>5}  {:>5}  {:>7}  reason",
        "instance",
        "verdict",
        "F2P",
        "P2P",
        "flaky",
        "seconds"
    );
    for r in &rows {
        let reason = if r.reason.is_empty() {
            String::new()
        } else {
            format!(
                "{}: {}",
                r.reason_kind,
                r.reason.lines().next().unwrap_or("")
            )
        };
        out!(
            "{:<width$}  {:<16}  {:>5}  {:>5}  {:>5}  {:>7.0}  {}",
            r.instance_id,
            r.verdict,
            r.fail_to_pass,
            r.pass_to_pass,
            r.flaky,
            r.seconds,
            reason
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(ctx: &Context, args: LsArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    if args.validated {
        return validated(ctx, &ark, args.json);
    }
    if args.stats {
        return stats(ctx, &ark, args.json);
    }
    let instances = ark.index().instances()?;
    let mut bundles: BTreeMap<String, Vec<BundleRow>> = BTreeMap::new();
    for b in ark.index().bundles()? {
        bundles.entry(b.instance_id.clone()).or_default().push(b);
    }
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
    let width = instances
        .iter()
        .map(|i| i.instance_id.len())
        .max()
        .unwrap_or(8)
        .max(8);
    let repo_width = instances
        .iter()
        .map(|i| i.repo.len())
        .max()
        .unwrap_or(4)
        .max(4);
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
