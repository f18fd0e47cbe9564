//! `pack`: instances packed into bundles, from the index (validated instances) here, or from
//! files (`one.rs`).

mod one;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::bundle::PackOptions;
use crate::pack::{self, Validated};
use crate::store::Ark;

use super::Context;

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("source").args(["codebase", "repo"])))]
pub struct PackArgs {
    /// One SWE-bench instance as JSON.
    #[arg(long, value_name = "FILE", required_unless_present_any = ["instance_ids", "all_validated"])]
    pub instance: Option<PathBuf>,
    /// Pack these validated instances from the index: the codebase from the mirror, the
    /// context, the lock, the logs and results of their validation.
    #[arg(long, value_delimiter = ',', value_name = "ID",
          conflicts_with_all = ["instance", "codebase", "repo", "spec", "lock", "pre_log", "post_log", "results", "validation", "vcs"])]
    pub instance_ids: Vec<String>,
    /// Pack every instance that validation kept.
    #[arg(long, conflicts_with_all = ["instance", "codebase", "repo", "instance_ids"])]
    pub all_validated: bool,
    /// Also pack validated instances that validation did not keep but whose tests ran before
    /// and after the gold patch (their lists differ from the published ones, say): their
    /// bundles record the verdict, and replay grades predictions on them against the
    /// published lists, counted apart from the instances that reproduce (docs/REPLAY.md).
    #[arg(long)]
    pub unproven: bool,
    /// The codebase at the instance's base commit, from a directory (a `.git` inside is left
    /// out).
    #[arg(long, value_name = "DIR")]
    pub codebase: Option<PathBuf>,
    /// The codebase from this repository's mirror in the archive, with no checkout.
    #[arg(long, value_name = "OWNER/NAME")]
    pub repo: Option<String>,
    /// The commit to pack from the mirror (default and only choice: the instance's
    /// base_commit; given, it must equal it).
    #[arg(long, value_name = "SHA", requires = "repo")]
    pub commit: Option<String>,
    /// The executable context (TOML), stored as env/spec.toml.
    #[arg(long, value_name = "FILE")]
    pub spec: Option<PathBuf>,
    /// The environment lock (PEP 751 pylock.toml, or another kind's lock), stored as its
    /// kind's member (env/pylock.toml; env/rust-lock.toml when --spec names kind = "rust").
    #[arg(long, value_name = "FILE")]
    pub lock: Option<PathBuf>,
    /// The expected log of the run before the gold patch.
    #[arg(long, value_name = "FILE")]
    pub pre_log: Option<PathBuf>,
    /// The expected log of the run after the gold patch.
    #[arg(long, value_name = "FILE")]
    pub post_log: Option<PathBuf>,
    /// A validation's results.json (as `swe-ark validate` records it): the bundle keeps what it
    /// proved as expected.json and the logs normalized (format version 3), as packing from the
    /// index does.
    #[arg(long, value_name = "FILE", conflicts_with = "results")]
    pub validation: Option<PathBuf>,
    /// Results of your own (JSON), kept as given as results.json (format version 1 or 2).
    #[arg(long, value_name = "FILE")]
    pub results: Option<PathBuf>,
    /// What git says about the base commit (`vcs.json`, docs/BUNDLE-FORMAT.md), from a file,
    /// for a codebase from a directory. Without it, it is computed from the directory's own
    /// repository when the directory is a git work tree (not shallow) whose HEAD is the base
    /// commit, and left out otherwise.
    #[arg(
        long,
        value_name = "FILE",
        requires = "codebase",
        conflicts_with = "no_vcs"
    )]
    pub vcs: Option<PathBuf>,
    /// Leave `vcs.json` out (a format version 1 bundle, as swe-ark wrote before version 2).
    #[arg(long, conflicts_with_all = ["instance_ids", "all_validated"])]
    pub no_vcs: bool,
    /// Write the bundle as a self-contained file, DIR/<id>.tar.zst (the exchange form), instead
    /// of into the archive's store; the index is left as it is.
    #[arg(short, long, value_name = "DIR", conflicts_with_all = ["instance_ids", "all_validated"])]
    pub output: Option<PathBuf>,
    /// zstd level (1-22); the bundle id does not depend on it.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=22))]
    pub level: i32,
    /// zstd worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: u32,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Context, args: PackArgs) -> anyhow::Result<ExitCode> {
    let progress = ctx.progress();
    let options = PackOptions {
        level: args.level,
        threads: args.threads,
    };
    if !args.instance_ids.is_empty() || args.all_validated {
        let which = if args.all_validated {
            Validated::All
        } else {
            Validated::Ids(args.instance_ids.clone())
        };
        let mut ark = Ark::open(&ctx.ark)?;
        let packed = pack::from_index(
            &mut ark,
            &ctx.manifests()?,
            &which,
            args.unproven,
            &options,
            progress.as_ref(),
        )?;
        if packed.is_empty() {
            ctx.note("no validated instance to pack (run `swe-ark validate`)");
        } else if args.json {
            let list: Vec<_> = packed
                .iter()
                .map(|(i, p)| serde_json::json!({"instance_id": i, "id": p.id, "path": p.path, "file_size": p.file_size}))
                .collect();
            out!("{}", serde_json::to_string_pretty(&list)?);
        } else {
            for (i, p) in &packed {
                out!("{i} {}", p.id);
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    one::run(ctx, args, &options, progress.as_ref())
}
