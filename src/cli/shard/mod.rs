//! `swe-ark shard run` and `swe-ark merge`: a plan's shards run on many machines and brought
//! back into one archive (docs/DISTRIBUTED.md). `run.rs` runs one shard; `merge.rs` merges
//! their files.

mod merge;
mod run;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::context::DEFAULT_INDEX;
use crate::context::Installer;

use super::Context;
use super::validate::RunArgs;

pub use merge::merge;

#[derive(Debug, clap::Args)]
pub struct ShardArgs {
    #[command(subcommand)]
    pub command: ShardCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum ShardCommand {
    /// Run one shard of a plan in this archive (mirror, lock, validate, pack) and write its
    /// shard file; exit 1 when some of its instances could not be run (they are listed).
    Run(ShardRunArgs),
}

#[derive(Debug, clap::Args)]
pub struct ShardRunArgs {
    /// The plan file (`swe-ark plan` wrote it): a path, or s3://BUCKET/PREFIX/NAME (put there
    /// with `swe-ark remote put`).
    #[arg(value_name = "PLAN|URL")]
    pub plan: String,
    /// Which shard, from 0. Default: $SLURM_ARRAY_TASK_ID (a Slurm job array's task), else
    /// $JOB_COMPLETION_INDEX (a Kubernetes Indexed Job's pod).
    #[arg(long, value_name = "K")]
    pub index: Option<usize>,
    /// The archive the plan was made from (read only, on a shared filesystem): the shard's
    /// instances and mirrors are copied from it.
    #[arg(long, value_name = "ARK")]
    pub from: Option<PathBuf>,
    /// Where to write the shard file (shard-K-of-N-<plan>.ark): a directory, or
    /// s3://BUCKET/PREFIX/ (credentials and endpoint from the AWS_* variables).
    #[arg(long, value_name = "DIR|s3://BUCKET/PREFIX/")]
    pub to: String,
    /// Instances validated at once.
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Runs after the gold patch; a test whose status differs between them is flaky.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: u32,
    /// The simple index contexts this archive has not locked are resolved from.
    #[arg(long, env = "SWE_ARK_INDEX_URL", default_value = DEFAULT_INDEX, value_name = "URL")]
    pub index_url: String,
    /// Lock releases the index marks as yanked (see `env lock --allow-yanked`).
    #[arg(long)]
    pub allow_yanked: bool,
    /// The installer of the locks' offline proof builds.
    #[arg(long, value_enum, default_value_t = Installer::Auto)]
    pub installer: Installer,
    /// What a repository with no mirror here or in --from is fetched from.
    #[arg(long, env = "SWE_ARK_GIT_BASE", value_name = "URL")]
    pub git_base: Option<String>,
    /// Replay these predictions (SWE-bench's format) of the shard's instances instead of
    /// building them; the bundles come from --from (or this archive).
    #[arg(long, value_name = "FILE", requires = "run_id")]
    pub predictions: Option<PathBuf>,
    /// The replay run the shard's reports belong to; `merge` puts every shard's into
    /// `runs/<run-id>/` of the merged archive.
    #[arg(long, requires = "predictions")]
    pub run_id: Option<String>,
    /// Whose rules to grade a replay by (see `replay --grading`).
    #[arg(
        long,
        default_value = "swebench-5",
        value_name = "RULES",
        requires = "predictions"
    )]
    pub grading: crate::logparse::Grading,
    #[command(flatten)]
    pub run: RunArgs,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// Shard files (`shard run` wrote them): paths, s3://BUCKET/PREFIX/NAME.ark, or
    /// s3://BUCKET/PREFIX/ for every shard file there.
    #[arg(required = true, value_name = "SHARD_FILE|URL")]
    pub files: Vec<String>,
    /// The plan: each file is checked against it, and what this archive still lacks of it is
    /// reported (earlier merges count).
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// Register a release of the kept instances under this name (replaced as shards come in).
    #[arg(long, value_name = "NAME")]
    pub release: Option<String>,
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Context, args: ShardArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ShardCommand::Run(a) => run::run_shard(ctx, a),
    }
}
