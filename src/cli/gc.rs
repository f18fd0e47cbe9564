//! `swe-ark gc`, `swe-ark rm` and `swe-ark export-bundle`: the deduplicated store's upkeep
//! and its way out (docs/STORAGE.md).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;

use crate::bundle::PackOptions;
use crate::digest::Sha256Digest;
use crate::harness::worktree::{TreeSweep, sweep_trees};
use crate::harness::{FarmSweep, sweep_farms};
use crate::store::Ark;

use super::Context;
use super::output::human_bytes;

#[derive(Debug, clap::Args)]
pub struct GcArgs {
    /// Say what would be freed; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// zstd level for bundles moved from whole files into the store.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=22))]
    pub level: i32,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn gc(ctx: &Context, args: GcArgs) -> anyhow::Result<ExitCode> {
    let mut ark = Ark::open(&ctx.ark)?;
    let progress = ctx.progress();
    let options = PackOptions {
        level: args.level,
        threads: 0,
    };
    let r = ark.gc(&options, args.dry_run, progress.as_ref())?;
    // Work directories that killed runs left in `tmp/` (an instance's build: gigabytes).
    let tmp = ark.tmp_dir();
    let swept = crate::fsutil::workdir::remove_stale(&tmp, args.dry_run)
        .map_err(|e| anyhow::anyhow!("{}: {e}", tmp.display()))?;
    if swept.removed > 0 {
        ctx.note(format!(
            "{} {} work directories that stopped runs left in {} ({})",
            if args.dry_run {
                "would remove"
            } else {
                "removed"
            },
            swept.removed,
            tmp.display(),
            human_bytes(swept.bytes)
        ));
    }
    for dir in &swept.unmarked {
        ctx.note(format!(
            "left {}: kept with --keep-workdir, or made by an older swe-ark (remove it by hand when no run uses it)",
            dir.display()
        ));
    }
    let farms = sweep_environments(ctx, &ark, args.dry_run)?;
    let trees = sweep_work_trees(ctx, &ark, args.dry_run)?;
    if args.json {
        let mut json = serde_json::to_value(&r)?;
        json["environments"] = serde_json::to_value(&farms)?;
        json["work_trees"] = serde_json::to_value(&trees)?;
        out!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        let verb = if args.dry_run { "would free" } else { "freed" };
        for id in &r.migrated {
            ctx.note(format!("moved the whole bundle file {id} into the store"));
        }
        for (id, why) in &r.not_migrated {
            ctx.note(format!("kept the whole bundle file {id} as it is: {why}"));
        }
        for (release, id) in &r.release_bundles_missing {
            ctx.note(format!(
                "note: release snapshot `{release}` names {id}, which is neither a bundle nor an object of this archive"
            ));
        }
        let freed = r.bytes_before.saturating_sub(r.bytes_after);
        out!(
            "{} pieces live, {} dead; {} packs removed, {} rewritten; {} files removed; {verb} {} ({} -> {})",
            r.live_pieces,
            r.dead_pieces,
            r.packs_removed,
            r.packs_rewritten,
            r.files_removed.len(),
            human_bytes(freed),
            human_bytes(r.bytes_before),
            human_bytes(r.bytes_after)
        );
    }
    Ok(if r.not_migrated.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The built environments' leftovers (docs/REPLAY.md, "The installed state"): farms of
/// states no longer named that no run holds, and stagings that killed runs left.
fn sweep_environments(ctx: &Context, ark: &Ark, dry_run: bool) -> anyhow::Result<FarmSweep> {
    let live = ark
        .index()
        .installed_states()?
        .into_iter()
        .map(|s| s.object);
    let envs = ark.layout().envs();
    let swept = sweep_farms(&envs, &live.collect(), dry_run)
        .map_err(|e| anyhow::anyhow!("sweeping {}: {e}", envs.display()))?;
    let verb = if dry_run { "would remove" } else { "removed" };
    if !swept.farms_removed.is_empty() || swept.stagings_removed > 0 {
        ctx.note(format!(
            "{verb} {} environments of installed states no longer kept and {} stagings that stopped runs left in {} ({})",
            swept.farms_removed.len(),
            swept.stagings_removed,
            envs.display(),
            human_bytes(swept.bytes)
        ));
    }
    for built in &swept.builds_removed {
        ctx.note(format!(
            "{verb} {} ({}): {}; its next use builds it again",
            built.dir.display(),
            human_bytes(built.bytes),
            built.why
        ));
    }
    for dir in &swept.farms_in_use {
        ctx.note(format!(
            "left {}: the environment of an installed state no longer kept, in use by a run",
            dir.display()
        ));
    }
    Ok(swept)
}

/// The kept work trees (docs/REPLAY.md, "The work tree") of bundles the index no longer
/// names that no run holds, and stagings that killed runs left.
fn sweep_work_trees(ctx: &Context, ark: &Ark, dry_run: bool) -> anyhow::Result<TreeSweep> {
    let live = ark.index().bundles()?.into_iter().map(|b| b.id).collect();
    let trees = ark.layout().trees();
    let swept = sweep_trees(&trees, &live, dry_run)
        .map_err(|e| anyhow::anyhow!("sweeping {}: {e}", trees.display()))?;
    if !swept.trees_removed.is_empty() || swept.stagings_removed > 0 {
        ctx.note(format!(
            "{} {} work trees of bundles no longer indexed and {} stagings that stopped runs left in {} ({})",
            if dry_run { "would remove" } else { "removed" },
            swept.trees_removed.len(),
            swept.stagings_removed,
            trees.display(),
            human_bytes(swept.bytes)
        ));
    }
    for dir in &swept.trees_in_use {
        ctx.note(format!(
            "left {}: the work tree of a bundle no longer indexed, in use by a run",
            dir.display()
        ));
    }
    Ok(swept)
}

#[derive(Debug, clap::Args)]
pub struct RmArgs {
    /// Bundle ids, unique prefixes, or instance ids (all of that instance's bundles).
    #[arg(required = true)]
    pub ids: Vec<String>,
}

pub fn rm(ctx: &Context, args: RmArgs) -> anyhow::Result<ExitCode> {
    let mut ark = Ark::open(&ctx.ark)?;
    let mut ids: Vec<Sha256Digest> = Vec::new();
    for q in &args.ids {
        let of_instance = ark.index().bundles_of_instance(q)?;
        if of_instance.is_empty() {
            ids.push(ark.resolve(q)?.id);
        } else {
            ids.extend(of_instance.iter().map(|b| b.id));
        }
    }
    ids.sort();
    ids.dedup();
    let n = ark.remove_bundles(&ids)?;
    for id in &ids {
        out!("{id}");
    }
    ctx.note(format!(
        "removed {n} bundle(s) from the index; `swe-ark gc` frees what only they used"
    ));
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, clap::Args)]
pub struct ExportBundleArgs {
    /// Bundle ids, unique prefixes, or instance ids (the newest bundle of each).
    #[arg(required = true)]
    pub ids: Vec<String>,
    /// The directory the files go to, as <id>.tar.zst.
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// zstd level; the bundle id does not depend on it (3 gives the bytes `pack --output` gives).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=22))]
    pub level: i32,
}

pub fn export_bundle(ctx: &Context, args: ExportBundleArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let options = PackOptions {
        level: args.level,
        threads: 0,
    };
    let mut rows = Vec::new();
    for q in &args.ids {
        rows.push(ark.resolve(q)?);
    }
    if rows.is_empty() {
        bail!("no bundle to export");
    }
    for row in rows {
        let path = ark.export_bundle(&row, &args.output, &options)?;
        out!("{}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
