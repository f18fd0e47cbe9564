//! `release`: dataset releases. `create.rs` snapshots one, `registered.rs` verifies, removes
//! and lists them, `diff.rs` says why two differ.

mod create;
mod diff;
mod registered;

use std::path::PathBuf;
use std::process::ExitCode;

use super::Context;
use super::output::ListArgs;

#[derive(Debug, clap::Args)]
pub struct ReleaseArgs {
    #[command(subcommand)]
    pub command: ReleaseCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum ReleaseCommand {
    /// Snapshot a release: each instance's bundle and the objects its lock needs, and one
    /// root hash over them; prints the root on stdout's last line.
    Create(CreateArgs),
    /// Check the archive against a release snapshot; exit 1 naming each missing or
    /// different bundle or object.
    Verify(VerifyArgs),
    /// Forget a release registered in the archive, and remove from the index the bundles
    /// that only it kept (not the newest bundle of their instance, named by no other
    /// release); `swe-ark gc` then frees their pieces.
    Rm(RmArgs),
    /// The releases registered in the archive (`ark/releases/`): gc and `rm` keep their bundles.
    Ls(ListArgs),
    /// Why two releases differ: instances, bundles, members (files, lock packages, test
    /// statuses, lines) and objects; exit 0 when they are the same release, 1 when not.
    Diff(DiffArgs),
}

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The first snapshot (A).
    pub a: PathBuf,
    /// The second snapshot (B).
    pub b: PathBuf,
    /// Another archive to read bundles from (B's, when it was built elsewhere); repeatable.
    /// The archive of `--ark` is read first, when it exists.
    #[arg(long, value_name = "DIR")]
    pub other_ark: Vec<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct RmArgs {
    /// The release's name.
    pub name: String,
    /// Only forget the release; remove no bundle.
    #[arg(long)]
    pub keep_bundles: bool,
}

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// The release's name (letters, digits, `-`, `_`, `.`).
    pub name: String,
    /// Only these instances (default: every instance with a bundle).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "ID",
        conflicts_with = "all_validated"
    )]
    pub instance_ids: Vec<String>,
    /// Every instance that validation kept.
    #[arg(long)]
    pub all_validated: bool,
    /// Where to write the snapshot (default: snapshots/NAME.json).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace a snapshot file, or a release registered in the archive under this name, that
    /// holds another release.
    #[arg(long)]
    pub force: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// The snapshot file (`release create` wrote it).
    pub snapshot: PathBuf,
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Context, args: ReleaseArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ReleaseCommand::Create(a) => create::create(ctx, a),
        ReleaseCommand::Verify(a) => registered::verify(ctx, a),
        ReleaseCommand::Rm(a) => registered::rm(ctx, a),
        ReleaseCommand::Ls(a) => registered::ls(ctx, a),
        ReleaseCommand::Diff(a) => diff::diff(ctx, a),
    }
}
