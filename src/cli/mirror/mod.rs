//! `mirror`: bare mirrors of repositories. `fetch.rs` adds, updates and imports them;
//! `show.rs` lists, verifies, exports them and reads a version.

mod fetch;
mod report;
mod show;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::mirror::RepoName;

use super::Context;
use super::output::ListArgs;

#[derive(Debug, clap::Args)]
pub struct MirrorArgs {
    #[command(subcommand)]
    pub command: MirrorCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum MirrorCommand {
    /// Clone bare mirrors with every ref (or update them if present), and the submodules the
    /// archive's instances' commits name, each a mirror of its own.
    Add(AddArgs),
    /// Fetch what is new, and the submodules the archive's instances' commits name; prints the
    /// refs that changed.
    Update(UpdateArgs),
    /// The mirrors: URL, refs, last fetch, size.
    Ls(ListArgs),
    /// Read every object, check every ref and every pinned commit; exit 1 naming what is bad.
    Verify(VerifyArgs),
    /// Write a mirror as a git bundle (`git clone FILE.bundle` reads it).
    Export(ExportArgs),
    /// Read a git bundle into a mirror, for the air gap.
    Import(ImportArgs),
    /// The version (major.minor) collect gives an instance at COMMIT, and where it is read.
    Version(VersionArgs),
}

#[derive(Debug, clap::Args)]
pub struct VersionArgs {
    pub name: String,
    pub commit: String,
    /// The instance's creation time: release tags after it are not considered.
    #[arg(long, default_value = "")]
    pub before: String,
}

#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// OWNER/NAME, a git URL (https, ssh, git://, file://) or a local path.
    #[arg(required = true)]
    pub sources: Vec<String>,
    /// What OWNER/NAME is resolved against (GitHub Enterprise, a company mirror); also the
    /// `git_base` key of `<ark>/config.toml`.
    #[arg(long, env = "SWE_ARK_GIT_BASE", value_name = "URL")]
    pub git_base: Option<String>,
    /// The mirror's name, OWNER/NAME, when a URL or path does not give the right one.
    #[arg(long)]
    pub name: Option<String>,
    /// Mirror a local repository whose history lacks objects (a snapshot, a damaged or
    /// partial clone) with every object it has: the missing ones are listed in the mirror's
    /// `swe-ark-missing-objects`, and an instance whose commit needs one is refused by name.
    #[arg(long)]
    pub allow_missing_objects: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct UpdateArgs {
    /// Mirrors to update (OWNER/NAME); none: all of them.
    pub names: Vec<String>,
    /// What a submodule's GitHub URL is resolved against (as for `mirror add`).
    #[arg(long, env = "SWE_ARK_GIT_BASE", value_name = "URL")]
    pub git_base: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Mirrors to verify; none: all of them.
    pub names: Vec<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    pub name: String,
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    pub file: PathBuf,
    /// The mirror's name (default: from the file name, as local/STEM).
    #[arg(long)]
    pub name: Option<String>,
    /// The upstream URL for later `mirror update`s (default: none, or the mirror's own).
    #[arg(long)]
    pub url: Option<String>,
}

fn repo_name(s: &str) -> anyhow::Result<RepoName> {
    RepoName::parse(s).with_context(|| format!("`{s}` is not a mirror name (OWNER/NAME)"))
}

pub fn run(ctx: &Context, args: MirrorArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        MirrorCommand::Add(a) => fetch::add(ctx, a),
        MirrorCommand::Update(a) => fetch::update(ctx, a),
        MirrorCommand::Ls(a) => show::ls(ctx, a),
        MirrorCommand::Verify(a) => show::verify(ctx, a),
        MirrorCommand::Export(a) => show::export(ctx, a),
        MirrorCommand::Import(a) => fetch::import(ctx, a),
        MirrorCommand::Version(a) => show::version(ctx, a),
    }
}
