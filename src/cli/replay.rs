use std::path::PathBuf;
use std::process::ExitCode;

use crate::dataset::Selection;
use crate::replay::{self, Predictions, ReplayOptions};

use super::Context;

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["predictions", "gold", "rewrite_reports"])))]
pub struct ReplayArgs {
    /// Bundle files to replay with no index (with --objects); without them, the archive's
    /// bundles.
    #[arg(value_name = "BUNDLE", requires = "objects", conflicts_with = "gold")]
    pub bundles: Vec<std::path::PathBuf>,
    /// The object store holding what the bundles' locks need (a directory laid out as an
    /// archive's `objects/`).
    #[arg(long, value_name = "DIR", requires = "bundles")]
    pub objects: Option<std::path::PathBuf>,
    /// Predictions in SWE-bench's format: a JSON list or map, or JSON Lines (the content says
    /// which, whatever the file's name).
    #[arg(long, value_name = "FILE")]
    pub predictions: Option<std::path::PathBuf>,
    /// Replay the gold patches (every instance with a bundle): they must all resolve.
    #[arg(long)]
    pub gold: bool,
    /// The run's name: reports go to <ark>/runs/<run-id>/; a run with the same id resumes.
    #[arg(long)]
    pub run_id: Option<String>,
    /// Only these instances.
    #[arg(long, value_delimiter = ',', value_name = "ID")]
    pub instance_ids: Vec<String>,
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Replay again instances that already have a report in this run.
    #[arg(long)]
    pub force: bool,
    /// Grade the saved test output of run --run-id again (after a parser fix, say): nothing
    /// runs, the reports are rewritten.
    #[arg(long, requires = "run_id", conflicts_with_all = ["predictions", "gold", "bundles"])]
    pub rewrite_reports: bool,
    /// Whose rules to apply the patch, read the log and grade by: `swebench-5` (swebench
    /// 5.0.2) or `swebench-4` (swebench 4.1.0, the rules of most published leaderboard
    /// results). docs/GRADING.md lists the differences.
    #[arg(long, default_value = "swebench-5", value_name = "RULES")]
    pub grading: crate::logparse::Grading,
    /// Also lay the run out as swebench 5 keeps its logs: DIR/run_evaluation/<run-id>/ with
    /// run.json, the run reports, and <model>/<instance>/ (report.json, test_output.txt,
    /// patch.diff), for tools that read SWE-bench's `logs/` folder.
    #[arg(long, value_name = "DIR")]
    pub logs_dir: Option<PathBuf>,
    #[command(flatten)]
    pub run: super::validate::RunArgs,
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Context, args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let progress = ctx.progress();
    let report = if args.rewrite_reports {
        let report =
            replay::rewrite_reports(&ctx.ark, args.run_id.as_deref().unwrap_or(""), args.grading)?;
        ctx.note(format!(
            "graded {} saved test output(s) of run {} again",
            report.regraded, report.run_id
        ));
        report
    } else {
        let opts = ReplayOptions {
            predictions: match (&args.predictions, args.gold) {
                (Some(path), _) => Predictions::File(path.clone()),
                (None, _) => Predictions::Gold,
            },
            run_id: args.run_id,
            bundles: args.bundles,
            objects: args.objects.map(crate::store::ObjectStore::new),
            selection: Selection::ids(args.instance_ids),
            jobs: args.jobs,
            force: args.force,
            run: args.run.options(),
            grading: args.grading,
        };
        replay::run(&ctx.ark, &opts, progress.as_ref())?
    };
    for (model, _, path) in &report.summaries {
        ctx.note(replay::screen_summary(model, &report.reports, path));
    }
    if let Some(logs) = &args.logs_dir {
        let to = replay::logs::export_logs(&report.dir, &report.run_id, logs).map_err(|e| {
            anyhow::anyhow!("cannot lay the run out under `{}`: {e}", logs.display())
        })?;
        ctx.note(format!(
            "the run's logs, as swebench keeps them: {}",
            to.display()
        ));
    }
    if args.json {
        let summaries: Vec<&serde_json::Value> = report.summaries.iter().map(|s| &s.1).collect();
        out!("{}", serde_json::to_string_pretty(&summaries)?);
    } else {
        out!("{}", report.dir.display());
    }
    if !report.failures.is_empty() {
        for f in &report.failures {
            eprintln!("swe-ark: error: {f}");
        }
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}
