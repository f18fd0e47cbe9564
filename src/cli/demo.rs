//! `swe-ark demo`: the whole pipeline on data it makes itself (`src/demo/`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::Context;
use crate::demo::{self, DemoOptions, DemoSummary};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The folder to make (emptied first); the demo's archives stay there.
    #[arg(long, default_value = "target/demo")]
    pub dir: PathBuf,
    /// A package index (PEP 503/691) for the environment lock instead of PyPI.
    #[arg(long, env = "SWE_ARK_INDEX_URL", value_name = "URL")]
    pub index_url: Option<String>,
    /// The Python version (major.minor) of the demo project's context.
    #[arg(long, default_value = "3.11")]
    pub python: String,
    /// Validation runs after the fix (flaky tests show up with 2 or more).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=10))]
    pub runs: u32,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Context, args: DemoArgs) -> anyhow::Result<ExitCode> {
    let program = std::env::current_exe()?;
    let opts = DemoOptions {
        dir: args.dir,
        program,
        index_url: args.index_url,
        python: args.python,
        runs: args.runs,
    };
    let say = |line: &str| ctx.note(line);
    let summary = demo::run(&opts, &say)?;
    let ok = summary.gold_total > 0
        && summary.gold_resolved == summary.gold_total
        && summary.release_verified
        && summary.verified
        && summary.tamper_caught
        && summary.rebuilt_identical;
    if args.json {
        out!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        for line in screen(&summary) {
            out!("{line}");
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn screen(s: &DemoSummary) -> Vec<String> {
    let mut l = vec![String::new(), "\x1b[1m== Summary\x1b[0m".to_string()];
    let list = |m: &std::collections::BTreeMap<String, String>| {
        m.iter()
            .map(|(k, v)| format!("    {k}: {v}"))
            .collect::<Vec<_>>()
    };
    l.push(format!(
        "collect: {} instances from {} API requests ({} on the second run, {} answered 304)",
        s.collected.len(),
        s.api_requests,
        s.api_requests_rerun,
        s.api_not_modified_rerun
    ));
    l.push("  dropped by collect:".into());
    l.extend(list(&s.dropped_by_collect));
    l.push(format!(
        "validate: kept {} ({})",
        s.kept.len(),
        s.kept.join(", ")
    ));
    l.push("  dropped by validate:".into());
    l.extend(list(&s.dropped_by_validate));
    for (id, tests) in &s.flaky {
        l.push(format!("  flaky in {id}: {}", tests.join(", ")));
    }
    l.push(format!("environment lock: {}", s.lock));
    l.push("bundles:".into());
    l.extend(list(&s.bundles));
    l.push(format!("release root hash: {}", s.release_root));
    l.push(format!(
        "sizes: archive {} bytes, exported release {} bytes; bundles {} bytes of tar, {} bytes \
         stored",
        s.archive_bytes, s.export_bytes, s.bundles_logical_bytes, s.bundles_stored_bytes
    ));
    l.push(format!(
        "replay --gold, offline{}: resolved {} of {}",
        if s.network_cut { ", network cut" } else { "" },
        s.gold_resolved,
        s.gold_total
    ));
    l.push("replay of demo-model's predictions:".into());
    l.extend(list(&s.predictions));
    l.push(format!(
        "release verify: {}; verify: {}; verify --rebuild: {}; a bundle with one byte changed: {}",
        if s.release_verified { "ok" } else { "FAILED" },
        if s.verified { "ok" } else { "FAILED" },
        if s.rebuilt_identical {
            "same ids"
        } else {
            "DIFFERENT"
        },
        if s.tamper_caught {
            "caught"
        } else {
            "NOT CAUGHT"
        }
    ));
    l.push(format!(
        "times: {}",
        s.seconds
            .iter()
            .map(|(k, v)| format!("{k} {v:.1} s"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    l.push(format!(
        "the demo's archives are in {} (ark/, offline-ark/)",
        s.dir.display()
    ));
    l
}
