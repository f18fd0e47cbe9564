use std::collections::{BTreeMap, VecDeque};
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::bail;

use crate::dataset::Instance;
use crate::manifest::Manifests;
use crate::store::Ark;
use crate::validate::{self, ValidateOptions, Verdict};

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
    /// Seconds a test command may run before it is killed (with everything it started).
    #[arg(long, default_value_t = 1800)]
    pub timeout: u64,
    /// Validate again instances that already have a verdict.
    #[arg(long)]
    pub force: bool,
    /// Let the tests reach the network (recorded in each instance's results).
    #[arg(long)]
    pub allow_network: bool,
    /// Keep each instance's work directory (under <ark>/tmp) for inspection.
    #[arg(long)]
    pub keep_workdir: bool,
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Context, args: ValidateArgs) -> anyhow::Result<ExitCode> {
    if args.jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    let ark = Ark::open(&ctx.ark)?;
    let manifests = Manifests::load_default()?;
    let all = ark.index().all_instances()?;
    for id in &args.instance_ids {
        if !all.iter().any(|i| &i.instance_id == id) {
            bail!("instance {id} is not in the archive (import or collect it first)");
        }
    }
    if let Some(repo) = &args.repo
        && !all.iter().any(|i| &i.repo == repo)
    {
        bail!("the archive has no instances of {repo}");
    }
    let done: BTreeMap<String, String> = ark
        .index()
        .validations()?
        .into_iter()
        .map(|v| (v.instance_id, v.verdict))
        .collect();
    let mut skipped = 0;
    let queue: VecDeque<Instance> = all
        .into_iter()
        .filter(|i| args.instance_ids.is_empty() || args.instance_ids.contains(&i.instance_id))
        .filter(|i| args.repo.as_ref().is_none_or(|r| &i.repo == r))
        .filter(|i| {
            let again = args.force || !done.contains_key(&i.instance_id);
            if !again {
                skipped += 1;
            }
            again
        })
        .collect();
    drop(ark);
    if skipped > 0 {
        ctx.note(format!(
            "{skipped} instance(s) already validated (pass --force to run them again)"
        ));
    }
    let total = queue.len();
    if total == 0 {
        ctx.note("nothing to validate");
        return Ok(ExitCode::SUCCESS);
    }
    let opts = ValidateOptions {
        runs: args.runs,
        timeout: Duration::from_secs(args.timeout),
        allow_network: args.allow_network,
        memory_limit: None,
        keep_workdir: args.keep_workdir,
        lock: None,
    };
    let bar = if ctx.progress {
        let b = indicatif::ProgressBar::new(total as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "validating [{wide_bar}] {pos}/{len} eta {eta} {msg}",
        ) {
            b.set_style(style.progress_chars("=> "));
        }
        Some(b)
    } else {
        None
    };
    let queue = Mutex::new(queue);
    let outcomes = Mutex::new(Vec::new());
    let counter = std::sync::atomic::AtomicUsize::new(0);
    let errors = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..args.jobs.min(total) {
            s.spawn(|| {
                let mut ark = match Ark::open(&ctx.ark) {
                    Ok(a) => a,
                    Err(e) => {
                        errors.lock().unwrap_or_else(|p| p.into_inner()).push(e.to_string());
                        return;
                    }
                };
                loop {
                    let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
                    let Some(instance) = next else { break };
                    if let Some(b) = &bar {
                        b.set_message(instance.instance_id.clone());
                    }
                    // A problem of the archive (no lock, …) is reported, not recorded.
                    let result = validate::validate(&ark, &manifests, &instance, &opts).and_then(
                        |v| {
                            if v.results.is_setup_problem() {
                                Ok(v)
                            } else {
                                validate::record(&mut ark, &instance, &v).map(|_| v)
                            }
                        },
                    );
                    let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    match result {
                        Ok(v) => {
                            let r = &v.results;
                            let line = match r.verdict {
                                Verdict::Kept => format!(
                                    "[{n}/{total}] {}: kept (FAIL_TO_PASS {}, PASS_TO_PASS {}, flaky {}) in {:.0} s{}",
                                    r.instance_id,
                                    r.fail_to_pass.len(),
                                    r.pass_to_pass.len(),
                                    r.flaky.len(),
                                    r.timings.get("total").copied().unwrap_or(0.0),
                                    if r.reason.is_empty() {
                                        String::new()
                                    } else {
                                        format!("; {}: {}", r.reason_kind, r.reason)
                                    }
                                ),
                                _ if r.is_setup_problem() => format!(
                                    "[{n}/{total}] {}: not run ({}): {}",
                                    r.instance_id,
                                    r.reason_kind,
                                    r.reason.lines().next().unwrap_or("")
                                ),
                                other => format!(
                                    "[{n}/{total}] {}: {} ({}): {}",
                                    r.instance_id,
                                    other.as_str(),
                                    r.reason_kind,
                                    r.reason.lines().next().unwrap_or("")
                                ),
                            };
                            match &bar {
                                Some(b) => b.println(line),
                                None => ctx.note(line),
                            }
                            outcomes
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .push(v.results);
                        }
                        Err(e) => errors
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(format!("{}: {e}", instance.instance_id)),
                    }
                    if let Some(b) = &bar {
                        b.inc(1);
                    }
                }
            });
        }
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let mut outcomes = outcomes.into_inner().unwrap_or_else(|p| p.into_inner());
    outcomes.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    let errors = errors.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut counts: BTreeMap<(String, String), usize> = BTreeMap::new();
    for r in &outcomes {
        let verdict = if r.is_setup_problem() {
            "not run"
        } else {
            r.verdict.as_str()
        };
        *counts
            .entry((verdict.to_string(), r.reason_kind.clone()))
            .or_default() += 1;
    }
    if args.json {
        let v = serde_json::json!({
            "validated": outcomes.iter().map(|r| serde_json::json!({
                "instance_id": r.instance_id,
                "verdict": r.verdict,
                "reason_kind": r.reason_kind,
                "reason": r.reason,
                "FAIL_TO_PASS": r.fail_to_pass.len(),
                "PASS_TO_PASS": r.pass_to_pass.len(),
                "flaky": r.flaky,
                "published_differences": r.published_differences,
                "lock": r.lock,
                "seconds": r.timings.get("total"),
            })).collect::<Vec<_>>(),
            "errors": errors,
        });
        out!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        out!("{:<18}  {:<28}  {:>5}", "verdict", "reason", "count");
        for ((verdict, kind), n) in &counts {
            out!(
                "{verdict:<18}  {:<28}  {n:>5}",
                if kind.is_empty() { "-" } else { kind }
            );
        }
    }
    let not_run = outcomes.iter().filter(|r| r.is_setup_problem()).count();
    if not_run > 0 {
        ctx.note(format!(
            "{not_run} instance(s) not run for a reason of the archive's (above); they are not \
             recorded and the next `validate` tries them again"
        ));
    }
    if !errors.is_empty() {
        for e in &errors {
            eprintln!("swe-ark: error: {e}");
        }
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}
