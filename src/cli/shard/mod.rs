//! `swe-ark shard run` and `swe-ark merge`: a plan's shards run on many machines and brought
//! back into one archive (docs/DISTRIBUTED.md).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::archive::Outcome;
use crate::env::build::Installer;
use crate::env::lock::DEFAULT_INDEX;
use crate::plan::Plan;
use crate::shard::{self, LockSettings, MergeOptions, RunOptions};
use crate::validate::ValidateOptions;

use super::Context;
use super::output::human_bytes;
use super::validate::RunArgs;

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

/// The plan at `path`, a file or an s3:// URL (checked against its sha256).
fn read_plan(path: &str) -> anyhow::Result<Plan> {
    let bytes = if crate::remote::is_remote(path) {
        let (base, name) = path.rsplit_once('/').unwrap_or((path, ""));
        let remote = crate::remote::Remote::open(&format!("{base}/"))?;
        let tmp = tempfile::NamedTempFile::new()?;
        remote.download(name, tmp.path())?;
        std::fs::read(tmp.path())?
    } else {
        std::fs::read(path).with_context(|| format!("cannot read `{path}`"))?
    };
    Ok(Plan::parse(path, &bytes)?)
}

/// The shard index: given, or the engine's.
fn shard_index(given: Option<usize>) -> anyhow::Result<usize> {
    if let Some(k) = given {
        return Ok(k);
    }
    for var in ["SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"] {
        if let Ok(v) = std::env::var(var) {
            return v
                .trim()
                .parse()
                .with_context(|| format!("${var} is `{v}`, not a shard index"));
        }
    }
    anyhow::bail!(
        "which shard? give --index K, or run it as a Slurm array task ($SLURM_ARRAY_TASK_ID) \
         or a Kubernetes Indexed Job ($JOB_COMPLETION_INDEX)"
    )
}

pub fn run(ctx: &Context, args: ShardArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ShardCommand::Run(a) => run_shard(ctx, a),
    }
}

fn run_shard(ctx: &Context, a: ShardRunArgs) -> anyhow::Result<ExitCode> {
    let plan = read_plan(&a.plan)?;
    let replaying = a.predictions.is_some();
    let index = shard_index(a.index)?;
    if a.jobs == 0 {
        anyhow::bail!("--jobs must be at least 1");
    }
    let git_base = crate::store::git_base(&crate::store::Layout::new(&ctx.ark), a.git_base)?;
    let opts = RunOptions {
        plan,
        index,
        from: a.from,
        store: ctx.store.clone(),
        to: a.to,
        git_base,
        lock: LockSettings {
            index_url: a.index_url,
            allow_yanked: a.allow_yanked,
            installer: a.installer,
            unconfined: a.run.unconfined,
        },
        validate: ValidateOptions {
            run: a.run.options(),
            runs: a.runs,
            lock: None,
        },
        jobs: a.jobs,
        replay: match (a.predictions.clone(), a.run_id) {
            (Some(predictions), Some(run_id)) => Some(shard::ReplayShard {
                predictions,
                run_id,
                grading: a.grading,
            }),
            _ => None,
        },
    };
    let manifests = ctx.manifests()?;
    let progress = ctx.progress();
    let report = shard::run(
        &ctx.ark,
        &manifests,
        &opts,
        &|m| ctx.note(m),
        progress.as_ref(),
    )?;
    let not_run = report.not_run();
    if a.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else if replaying {
        for r in &report.replays {
            ctx.note(format!(
                "{} ({}): {}",
                r.instance_id,
                r.model,
                if r.replayed {
                    "replayed".to_string()
                } else {
                    format!("not replayed: {}", r.reason)
                }
            ));
        }
        ctx.note(format!(
            "shard {} of {} of plan {}: {} prediction(s) replayed, {not_run} not; {}",
            report.index,
            report.shards,
            report.plan,
            report.replays.len() - not_run,
            human_bytes(report.bytes)
        ));
        out!("{}", report.file);
    } else {
        for o in &report.outcomes {
            let what = match (&o.bundle, o.reason.is_empty()) {
                (Some(b), _) => format!("bundle {b}"),
                (None, false) => o.reason.clone(),
                (None, true) => String::new(),
            };
            ctx.note(format!(
                "{}: {}{}{what}",
                o.instance_id,
                o.outcome.as_str(),
                if what.is_empty() { "" } else { ": " }
            ));
        }
        ctx.note(format!(
            "shard {} of {} of plan {}: {} kept, {} not kept, {} not run; {}",
            report.index,
            report.shards,
            report.plan,
            report.count(Outcome::Kept),
            report.count(Outcome::NotKept),
            not_run,
            human_bytes(report.bytes)
        ));
        out!("{}", report.file);
    }
    if let Some((files, bytes)) = report.fetched {
        ctx.note(format!(
            "fetched {files} file(s) ({}) from the seed's bucket",
            human_bytes(bytes)
        ));
    }
    if not_run > 0 {
        ctx.note(format!(
            "{not_run} instance(s) not run (above); run this shard again when their cause is \
             mended: `swe-ark shard run {} --index {index}` (what is done is kept)",
            a.plan
        ));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn merge(ctx: &Context, a: MergeArgs) -> anyhow::Result<ExitCode> {
    let plan = a
        .plan
        .as_deref()
        .map(|p| read_plan(&p.to_string_lossy()))
        .transpose()?;
    if let Some(name) = &a.release
        && !crate::release::valid_name(name)
    {
        anyhow::bail!("`{name}` is not a release name (letters, digits, `-`, `_`, `.`)");
    }
    let progress = ctx.progress();
    let report = shard::merge(
        &ctx.ark,
        &a.files,
        &MergeOptions {
            plan,
            release: a.release,
        },
        progress.as_ref(),
    )?;
    if a.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for m in &report.merged {
            if let Some(run) = &m.run_id {
                ctx.note(format!(
                    "merged replay shard {} ({}) into run {run}: {} instance report(s) added, \
                     {} not replayed; the run's reports are in {}",
                    m.index,
                    m.file,
                    m.replayed,
                    m.not_run,
                    crate::store::Layout::new(&ctx.ark)
                        .runs()
                        .join(run)
                        .display()
                ));
                continue;
            }
            ctx.note(format!(
                "merged shard {} ({}): {} kept, {} not kept, {} not run; bundles {} new, {} \
                 already here",
                m.index, m.file, m.kept, m.not_kept, m.not_run, m.bundles_added, m.bundles_present
            ));
        }
        for r in &report.refused {
            eprintln!("swe-ark: error: refused `{}`: {}", r.file, r.reason);
        }
        for n in &report.not_run {
            ctx.note(format!(
                "not run: {} (shard {}): {}",
                n.instance_id, n.shard, n.reason
            ));
        }
        if !report.missing.is_empty() {
            ctx.note(format!(
                "no file merged of shard(s) {} of {}",
                report
                    .missing
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                report.shards
            ));
        }
        if let Some((name, root)) = &report.release {
            ctx.note(format!("release {name} registered: root {root}"));
            out!("{root}");
        }
    }
    if !report.refused.is_empty() {
        return Ok(ExitCode::from(2));
    }
    if !report.missing.is_empty() || !report.not_run.is_empty() {
        let shards: std::collections::BTreeSet<usize> = report
            .missing
            .iter()
            .copied()
            .chain(report.not_run.iter().map(|n| n.shard))
            .collect();
        ctx.note(format!(
            "incomplete: run shard(s) {} again (`swe-ark shard run PLAN --index K`) and merge \
             their files",
            shards
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
