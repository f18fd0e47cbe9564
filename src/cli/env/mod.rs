//! `env`: locked, offline-installable environments. `lock.rs` locks one, `build.rs` builds
//! one, `locks.rs` lists and shows the locks.

mod build;
mod lock;
mod locks;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::env::build::Installer;
use crate::env::lock::DEFAULT_INDEX;

use super::Context;
use super::output::ListArgs;

#[derive(Debug, clap::Args)]
pub struct EnvArgs {
    #[command(subcommand)]
    pub command: EnvCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum EnvCommand {
    /// Install a context for real (online, as of its environment setup commit), write its
    /// PEP 751 lock and keep every artifact as an object; prints the lock id last.
    Lock(LockArgs),
    /// Build a lock's environment from the objects alone, into `envs/<lock id>/`; prints the
    /// environment's directory last.
    Build(BuildArgs),
    /// The locks: repository, version, Python (or toolchain), packages, artifacts, bytes, built or not.
    Ls(ListArgs),
    /// Print a lock as stored (its pylock.toml, rust-lock.toml, …).
    Show(ShowArgs),
}

#[derive(Debug, clap::Args)]
pub struct LockArgs {
    /// OWNER/NAME, as in manifests/. A repository no manifest names gets a context inferred
    /// from its build files (Cargo.toml, package.json, CMakeLists.txt, configure.ac,
    /// configure) at the commit locked, recorded in the lock as inferred.
    pub repo: String,
    /// The version, as the instances' rows name it (e.g. 3.0). A row that named none was
    /// given one at import: the version whose `pulls` hold its pull-request number, the
    /// manifest's only version, or `inferred` when no manifest names its repository.
    pub version: String,
    /// The environment setup commit (default: the one the archive's instances of this
    /// version name).
    #[arg(long)]
    pub commit: Option<String>,
    /// The interpreter to use (it must be the context's major.minor); for a Rust context,
    /// the toolchain (its root, or its rustc; default: the `rustc` on PATH).
    #[arg(long, visible_alias = "toolchain", value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// The index to resolve from: a simple index (Python), a sparse cargo registry (Rust;
    /// crates.io's when this is left at its default).
    #[arg(long, env = "SWE_ARK_INDEX_URL", default_value = DEFAULT_INDEX, value_name = "URL")]
    pub index_url: String,
    /// Resolve as of this instant (RFC 3339, or YYYY-MM-DD) instead of the commit's date.
    #[arg(long, value_name = "WHEN")]
    pub exclude_newer: Option<String>,
    /// Do not carry the interpreter or toolchain: by default it is kept as an object (once per
    /// build of it), so that any user of any machine builds this lock from the archive alone;
    /// without it, a machine needs this exact Python (or Rust toolchain) installed.
    #[arg(long, visible_alias = "no-pack-runtime")]
    pub no_pack_python: bool,
    /// The default (kept so that scripts which pass it still run).
    #[arg(long, hide = true, conflicts_with = "no_pack_python")]
    pub pack_python: bool,
    /// Offer and lock releases the index marks as yanked, instead of refusing them (the index
    /// says what is yanked today, not what was yanked as of the commit).
    #[arg(long)]
    pub allow_yanked: bool,
    /// The installer of the offline proof build.
    #[arg(long, value_enum, default_value_t = Installer::Auto)]
    pub installer: Installer,
    /// Run the installs (the context's and its dependencies' own code) with your rights on
    /// the whole filesystem, not confined by the sandbox (docs/SANDBOX.md); the report says so.
    #[arg(long)]
    pub unconfined: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// A lock id, or a unique prefix of one.
    pub lock: String,
    /// Accepted for clarity: building never uses the network.
    #[arg(long)]
    pub offline: bool,
    #[arg(long, value_enum, default_value_t = Installer::Auto)]
    pub installer: Installer,
    /// Use this interpreter instead of the exact version the lock names.
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// Only the interpreter the lock carries (the default when it carries one): never this
    /// machine's, even with --python.
    #[arg(long)]
    pub packed_python: bool,
    /// Rebuild even if the cache has it.
    #[arg(long)]
    pub force: bool,
    /// Also make a per-instance copy of the environment at DIR (a new directory).
    #[arg(long, value_name = "DIR")]
    pub copy_to: Option<PathBuf>,
    /// Run the installer and the environment's interpreter with your rights on the whole
    /// filesystem, not confined by the sandbox (docs/SANDBOX.md).
    #[arg(long)]
    pub unconfined: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    pub lock: String,
}

pub fn run(ctx: &Context, args: EnvArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        EnvCommand::Lock(a) => lock::lock_cmd(ctx, a),
        EnvCommand::Build(a) => build::build_cmd(ctx, a),
        EnvCommand::Ls(a) => locks::ls(ctx, a),
        EnvCommand::Show(a) => locks::show(ctx, a),
    }
}
