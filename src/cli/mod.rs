//! The command line: clap definitions, one file per verb, and the exit-code contract:
//! 0 success, 1 a check failed, 2 an error (bad input, I/O, refused bundle).

/// `println!` that returns the write error (a closed pipe ends the command quietly) instead of
/// panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?
    }};
}

mod archive;
mod collect;
mod context;
mod dataset;
mod demo;
mod env;
mod gc;
mod ls;
mod mirror;
mod output;
mod pack;
mod plan;
mod release;
mod remote;
mod replay;
mod shard;
mod show;
mod text;
mod unpack;
mod validate;
mod verify;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use context::Context;
pub use output::TerminalProgress;

#[derive(Debug, Parser)]
#[command(
    name = "swe-ark",
    version,
    about = "Reproducible, offline archives of SWE-bench task instances",
    long_about = "Mirrors repositories with their full history, collects task instances from \
                  GitHub pull requests or imports SWE-bench datasets, packs them into \
                  deterministic, content-hashed bundles indexed in SQLite, and verifies and \
                  unpacks them by hash.\n\n\
                  Exit codes: 0 success, 1 a check failed, 2 an error."
)]
pub struct Cli {
    /// The archive directory.
    #[arg(long, global = true, env = "SWE_ARK_HOME", default_value = "./ark")]
    pub ark: PathBuf,
    /// More log output on stderr (-v debug, -vv trace); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Print only data and errors: no progress, no summaries on stderr.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// No progress bars, even on a terminal.
    #[arg(long, global = true)]
    pub no_progress: bool,
    /// Read the repositories' manifests from this folder (`*.toml`) instead of the ones built
    /// into the binary.
    #[arg(long, global = true, env = "SWE_ARK_MANIFESTS", value_name = "DIR")]
    pub manifests: Option<PathBuf>,
    /// Keep the archive's objects and packs in this bucket (s3://BUCKET/PREFIX), the index
    /// staying local: reads fetch what is not here, and commands that write upload what they
    /// wrote. Overrides `store_url` in `<ark>/config.toml` for this command.
    #[arg(long, global = true, env = "SWE_ARK_STORE", value_name = "S3_URL")]
    pub store: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Pack one task instance into a bundle; prints the bundle id on stdout's last line.
    Pack(pack::PackArgs),
    /// List the instances and bundles in the archive.
    Ls(ls::LsArgs),
    /// Show a bundle's manifest and its instance's fields.
    Show(show::ShowArgs),
    /// Re-hash bundles and objects; exit 1 naming each bad bundle or member.
    Verify(verify::VerifyArgs),
    /// Check a bundle and unpack it into a directory.
    Unpack(unpack::UnpackArgs),
    /// Write bundles of the archive as self-contained files, DIR/<id>.tar.zst.
    ExportBundle(gc::ExportBundleArgs),
    /// Remove bundles from the archive (by id, prefix or instance id); gc frees their space.
    Rm(gc::RmArgs),
    /// Move whole bundle files into the deduplicated store and free what no bundle needs.
    Gc(gc::GcArgs),
    /// Pack each instance's newest version 1 or 2 bundle again as version 3 (expected.json,
    /// normalized logs), from the bundle and the mirror; the old bundle stays until released.
    Migrate(verify::MigrateArgs),
    /// Bare mirrors of repositories with their full history.
    Mirror(mirror::MirrorArgs),
    /// Task instances from a repository's merged pull requests, through the GitHub REST API.
    Collect(collect::CollectArgs),
    /// Import SWE-bench or Multi-SWE-bench datasets (JSON, JSON Lines, Parquet, or a swebench
    /// 5 task repository) into the index.
    Import(dataset::ImportArgs),
    /// Write the archive's instances as a dataset file (SWE-bench or Multi-SWE-bench rows), or
    /// as a swebench 5 task repository.
    ExportDataset(dataset::ExportArgs),
    /// Locked, offline-installable environments: lock, build, ls, show.
    Env(env::EnvArgs),
    /// Prove instances by running their tests before and after the gold patch, offline.
    Validate(validate::ValidateArgs),
    /// Evaluate predictions (or the gold patches) from bundles, offline; SWE-bench's reports.
    Replay(replay::ReplayArgs),
    /// Dataset releases: a snapshot with one root hash (create), checked against the archive
    /// (verify).
    Release(release::ReleaseArgs),
    /// Write a release and everything its evaluation needs as one file, for the air gap.
    Export(archive::ExportArgs),
    /// Check a file `export` wrote, all of it, and add it to the archive.
    ImportArchive(archive::ImportArchiveArgs),
    /// SWE-bench's text datasets (BM25 or oracle prompts) from the bundles, offline.
    Text(text::TextArgs),
    /// The whole pipeline on data it makes itself, with its own GitHub API on 127.0.0.1.
    Demo(demo::DemoArgs),
    /// Cut instances into N shards for many machines: a context's instances together, shards
    /// balanced by recorded test time.
    Plan(plan::PlanArgs),
    /// One shard of a plan, run on this machine and written out as a shard file.
    Shard(shard::ShardArgs),
    /// Shard files brought into this archive, each all or nothing.
    Merge(shard::MergeArgs),
    /// Files copied to or from S3-compatible storage, checked by sha256.
    Remote(remote::RemoteArgs),
}

/// Whether `command` may add objects or packs to the archive (then they are uploaded to its
/// bucket, if it has one, when it ends).
fn writes_objects(command: &Command) -> bool {
    matches!(
        command,
        Command::Pack(_)
            | Command::Gc(gc::GcArgs { dry_run: false, .. })
            | Command::Migrate(_)
            | Command::Env(env::EnvArgs {
                command: env::EnvCommand::Lock(_)
            })
            | Command::Validate(_)
            | Command::ImportArchive(_)
            | Command::Merge(_)
            | Command::Collect(_)
            | Command::Import(_)
    )
}

/// Parses the command line, runs the command and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    context::init_tracing(cli.verbose, cli.quiet);
    let ctx = Context::new(&cli);
    let writes = writes_objects(&cli.command);
    if let Err(e) = ctx.apply_store() {
        eprintln!(
            "swe-ark: error: {}",
            output::error_chain(&anyhow::Error::new(e))
        );
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Pack(args) => pack::run(&ctx, args),
        Command::Ls(args) => ls::run(&ctx, args),
        Command::Show(args) => show::run(&ctx, args),
        Command::Verify(args) => verify::run(&ctx, args),
        Command::Unpack(args) => unpack::run(&ctx, args),
        Command::ExportBundle(args) => gc::export_bundle(&ctx, args),
        Command::Rm(args) => gc::rm(&ctx, args),
        Command::Gc(args) => gc::gc(&ctx, args),
        Command::Migrate(args) => verify::migrate(&ctx, args),
        Command::Mirror(args) => mirror::run(&ctx, args),
        Command::Collect(args) => collect::run(&ctx, args),
        Command::Import(args) => dataset::import(&ctx, args),
        Command::ExportDataset(args) => dataset::export(&ctx, args),
        Command::Env(args) => env::run(&ctx, args),
        Command::Validate(args) => validate::run(&ctx, args),
        Command::Replay(args) => replay::run(&ctx, args),
        Command::Release(args) => release::run(&ctx, args),
        Command::Export(args) => archive::export(&ctx, args),
        Command::ImportArchive(args) => archive::import(&ctx, args),
        Command::Text(args) => text::run(&ctx, args),
        Command::Demo(args) => demo::run(&ctx, args),
        Command::Plan(args) => plan::run(&ctx, args),
        Command::Shard(args) => shard::run(&ctx, args),
        Command::Merge(args) => shard::merge(&ctx, args),
        Command::Remote(args) => remote::run(&ctx, args),
    };
    // What a command wrote goes to the archive's bucket before it is said to be done.
    let result = match result {
        Ok(code) if writes => remote::push_after(&ctx).map(|()| code),
        other => other,
    };
    match result {
        Ok(code) => code,
        // A reader that stops early (`| head`) is a normal end.
        Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("swe-ark: error: {}", output::error_chain(&e));
            ExitCode::from(2)
        }
    }
}
