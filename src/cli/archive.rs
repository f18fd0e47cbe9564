use std::path::PathBuf;
use std::process::ExitCode;

use crate::archive::{self, ExportOptions, ImportOptions};
use crate::digest::Sha256Digest;
use crate::release::Snapshot;
use crate::store::Ark;

use super::Context;
use super::output::human_bytes;

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The release snapshot to export (`release create` wrote it).
    #[arg(long, value_name = "FILE")]
    pub release: PathBuf,
    /// The file to write (conventionally NAME.ark).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Add a git bundle of each repository's mirror (full history), so that the other side
    /// can rebuild the bundles (`verify --rebuild`).
    #[arg(long)]
    pub with_history: bool,
    /// Write every bundle as its exchange file (`<id>.tar.zst`, format version 1), for readers
    /// without swe-ark, instead of the store's packs (version 2, about 10x smaller).
    #[arg(long, conflicts_with = "incremental")]
    pub self_contained: bool,
    /// Write only what a receiver that imported the release `--since` names lacks.
    #[arg(long, requires = "since")]
    pub incremental: bool,
    /// The release snapshot the receiver imported before (with --incremental).
    #[arg(long, value_name = "OLD.json", requires = "incremental")]
    pub since: Option<PathBuf>,
    /// Also carry the installed states made at the instances' locks and base commits, so that
    /// the other side's first runs start from them (docs/REPLAY.md). They are this machine's:
    /// the file is then not the same bytes as another archive's export of the release.
    #[arg(long)]
    pub installed_states: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ImportArchiveArgs {
    /// A file `export` wrote.
    pub file: PathBuf,
    /// Refuse the file unless its release has this root hash (the published one).
    #[arg(long, value_name = "SHA256")]
    pub expect_root: Option<Sha256Digest>,
    #[arg(long)]
    pub json: bool,
}

pub fn export(ctx: &Context, args: ExportArgs) -> anyhow::Result<ExitCode> {
    let snap = Snapshot::read(&args.release)?;
    let since = args.since.as_deref().map(Snapshot::read).transpose()?;
    let ark = Ark::open(&ctx.ark)?;
    let progress = ctx.progress();
    let report = archive::export(
        &ark,
        &snap,
        &args.output,
        &ExportOptions {
            with_history: args.with_history,
            self_contained: args.self_contained,
            since,
            shard: None,
            installed_states: args.installed_states,
        },
        progress.as_ref(),
    )?;
    for n in &report.notes {
        ctx.note(format!("note: {n}"));
    }
    if args.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let form = match (&report.base, report.version) {
            (Some(base), _) => format!(
                "only what an archive holding release {base} lacks: {} new bundle(s) in {} \
                 pack(s)",
                report.bundles, report.packs
            ),
            (None, 1) => format!("{} bundle(s), each self-contained", report.bundles),
            (None, _) => format!(
                "{} bundle(s) in {} pack(s) ({} cut down), {} pieces",
                report.bundles, report.packs, report.packs_cut, report.pieces
            ),
        };
        let states = match report.installed_states {
            0 => String::new(),
            n => format!(
                ", {n} installed state(s) ({})",
                human_bytes(report.installed_state_bytes)
            ),
        };
        ctx.note(format!(
            "exported release {} (root {}): {} instance(s), {form}, {} object(s), {} \
             mirror(s){states}; {} ({} in its parts)",
            report.release,
            report.root,
            report.instances,
            report.objects,
            report.mirrors,
            human_bytes(report.bytes),
            human_bytes(report.parts_bytes)
        ));
        out!("{}", report.path.display());
    }
    Ok(ExitCode::SUCCESS)
}

pub fn import(ctx: &Context, args: ImportArchiveArgs) -> anyhow::Result<ExitCode> {
    let progress = ctx.progress();
    let report = archive::import(
        &ctx.ark,
        &args.file,
        &ImportOptions {
            expect_root: args.expect_root,
            shard_of: None,
        },
        progress.as_ref(),
    )?;
    if args.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let packs = if report.version >= 2 {
            format!(
                "packs {} moved in, {} cut down to what was missing, {} already here; ",
                report.packs_moved, report.packs_cut, report.packs_present
            )
        } else {
            String::new()
        };
        let on = report
            .base
            .as_ref()
            .map(|b| format!(" on top of release {b}"))
            .unwrap_or_default();
        let states = match (
            report.installed_states_added,
            report.installed_states_present,
        ) {
            (0, 0) => String::new(),
            (added, present) => {
                format!("; installed states {added} new, {present} already here (kept)")
            }
        };
        ctx.note(format!(
            "imported release {}{on} (root {}): {} instance(s); {packs}bundles {} new, {} \
             already here; objects {} new, {} already here{}{states}",
            report.release,
            report.root,
            report.instances,
            report.bundles_added,
            report.bundles_present,
            report.objects_added,
            report.objects_present,
            if report.mirrors.is_empty() {
                String::new()
            } else {
                format!("; mirrors {}", report.mirrors.join(", "))
            }
        ));
        out!("{}", report.root);
    }
    Ok(ExitCode::SUCCESS)
}
