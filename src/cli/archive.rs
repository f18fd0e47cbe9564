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
    let ark = Ark::open(&ctx.ark)?;
    let progress = ctx.progress();
    let report = archive::export(
        &ark,
        &snap,
        &args.output,
        &ExportOptions {
            with_history: args.with_history,
        },
        progress.as_ref(),
    )?;
    for n in &report.notes {
        ctx.note(format!("note: {n}"));
    }
    if args.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        ctx.note(format!(
            "exported release {} (root {}): {} instance(s), {} bundle(s), {} object(s), {} \
             mirror(s); {} ({} in its parts)",
            report.release,
            report.root,
            report.instances,
            report.bundles,
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
        },
        progress.as_ref(),
    )?;
    if args.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        ctx.note(format!(
            "imported release {} (root {}): {} instance(s); bundles {} new, {} already here; \
             objects {} new, {} already here{}",
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
