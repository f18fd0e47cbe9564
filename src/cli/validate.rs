use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use crate::dataset::Selection;
use crate::harness::RunOptions;
use crate::validate::{self, ManyOptions, ValidateOptions};
use crate::verdict::reason_word;

use super::Context;

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// Only these instances (comma-separated or repeated).
    #[arg(long, value_delimiter = ',', value_name = "ID")]
    pub instance_ids: Vec<String>,
    /// Only the instances of this repository.
    #[arg(long, value_name = "OWNER/NAME")]
    pub repo: Option<String>,
    /// Instances validated at once.
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Runs after the gold patch; a test whose status differs between them is flaky.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: u32,
    /// Validate again instances that already have a verdict.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub run: RunArgs,
    #[arg(long)]
    pub json: bool,
}

/// How each command of an instance runs: validate's and replay's flags.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Seconds a test command may run before it is killed (with everything it started);
    /// default: the context's `timeout` where its manifest gives one, else 1800.
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Let the tests reach the network (each instance's results or report record it).
    #[arg(long)]
    pub allow_network: bool,
    /// Keep each instance's work directory (under <ark>/tmp) for inspection.
    #[arg(long)]
    pub keep_workdir: bool,
    /// Run the commands without confinement: with the caller's rights on the whole
    /// filesystem (each instance's results or report record it). docs/SANDBOX.md.
    #[arg(long)]
    pub unconfined: bool,
    /// Neither start from nor keep installed states: every instance installs after its patch,
    /// as before there were any (docs/REPLAY.md, "The installed state").
    #[arg(long)]
    pub no_installed_states: bool,
}

impl RunArgs {
    pub fn options(&self) -> RunOptions {
        RunOptions {
            timeout: Duration::from_secs(self.timeout.unwrap_or(1800)),
            timeout_given: self.timeout.is_some(),
            allow_network: self.allow_network,
            memory_limit: None,
            keep_workdir: self.keep_workdir,
            unconfined: self.unconfined,
            installed_states: !self.no_installed_states,
        }
    }
}

pub fn run(ctx: &Context, args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let opts = ManyOptions {
        validate: ValidateOptions {
            run: args.run.options(),
            runs: args.runs,
            lock: None,
        },
        jobs: args.jobs,
        force: args.force,
    };
    let selection = Selection {
        ids: args.instance_ids,
        repo: args.repo,
    };
    let manifests = ctx.manifests()?;
    let progress = ctx.progress();
    let report = validate::run_many(&ctx.ark, &manifests, &selection, &opts, progress.as_ref())?;
    if report.skipped > 0 {
        ctx.note(format!(
            "{} instance(s) already validated (pass --force to run them again)",
            report.skipped
        ));
    }
    if report.outcomes.is_empty() && report.errors.is_empty() {
        ctx.note("nothing to validate");
        return Ok(ExitCode::SUCCESS);
    }
    if args.json {
        let v = serde_json::json!({
            "validated": report.outcomes.iter().map(|r| serde_json::json!({
                "instance_id": r.instance_id,
                "verdict": r.verdict,
                "reason_kind": reason_word(r.reason_kind),
                "reason": r.reason,
                "FAIL_TO_PASS": r.fail_to_pass.len(),
                "PASS_TO_PASS": r.pass_to_pass.len(),
                "flaky": r.flaky,
                "published_differences": r.published_differences,
                "lock": r.lock,
                "seconds": r.timings.get("total"),
            })).collect::<Vec<_>>(),
            "errors": report.errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        });
        out!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let mut counts: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for r in &report.outcomes {
            let verdict = if r.is_setup_problem() {
                "not run"
            } else {
                r.verdict.as_str()
            };
            *counts
                .entry((verdict, reason_word(r.reason_kind)))
                .or_default() += 1;
        }
        out!("{:<18}  {:<28}  {:>5}", "verdict", "reason", "count");
        for ((verdict, kind), n) in &counts {
            out!(
                "{verdict:<18}  {:<28}  {n:>5}",
                if kind.is_empty() { "-" } else { kind }
            );
        }
    }
    let not_run = report.not_run();
    if not_run > 0 {
        ctx.note(format!(
            "{not_run} instance(s) not run for a reason of the archive's (above); they are not \
             recorded and the next `validate` tries them again"
        ));
    }
    if !report.errors.is_empty() {
        for e in &report.errors {
            eprintln!("swe-ark: error: {e}");
        }
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}
