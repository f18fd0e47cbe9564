use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::collect::github::{DEFAULT_API_URL, GithubClient};
use crate::collect::{self, CollectOptions, Outcome};
use crate::dataset::{self, TestListForm};
use crate::fsutil;
use crate::mirror::RepoName;
use crate::store::{Ark, Index};

use super::Context;

#[derive(Debug, clap::Args)]
pub struct CollectArgs {
    /// The repository, OWNER/NAME.
    pub repo: String,
    /// Only pull requests created at or after this date or time (2024-01-01, RFC 3339).
    #[arg(long)]
    pub since: Option<String>,
    /// Only pull requests created before this date or time.
    #[arg(long)]
    pub until: Option<String>,
    /// Stop after this many merged pull requests.
    #[arg(long)]
    pub max_pulls: Option<usize>,
    /// The GitHub REST API (GitHub Enterprise: https://HOST/api/v3).
    #[arg(long, env = "SWE_ARK_API_URL", default_value = DEFAULT_API_URL)]
    pub api_url: String,
    /// Decide again the pull requests an earlier run decided (unchanged answers come back as
    /// 304s, which cost no quota).
    #[arg(long)]
    pub refresh: bool,
    /// Also write the repository's collected instances here (.jsonl or .json).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Context, args: CollectArgs) -> anyhow::Result<ExitCode> {
    let repo = RepoName::parse(&args.repo)
        .with_context(|| format!("`{}` is not a repository name (OWNER/NAME)", args.repo))?;
    let (owner, name) = repo
        .as_str()
        .split_once('/')
        .expect("a RepoName has a slash");
    let mut ark = Ark::create(&ctx.ark)?;
    // The client keeps ETags through a connection of its own; outcomes go through the ark's.
    let mut cache = Index::open(&ark.layout().index())?;
    let token = std::env::var("GITHUB_TOKEN").ok().filter(|t| !t.is_empty());
    if token.is_none() {
        ctx.note("note: GITHUB_TOKEN is not set; unauthenticated requests have a low rate limit");
    }
    let mut client = GithubClient::new(&args.api_url, token, &mut cache)?;
    let quiet = ctx.quiet;
    client.on_wait = Box::new(move |msg| {
        if !quiet {
            eprintln!("swe-ark: {msg}");
        }
    });
    let done = if args.refresh {
        Default::default()
    } else {
        ark.index().collected_pulls(repo.as_str())?
    };
    let options = CollectOptions {
        since: args.since.clone(),
        until: args.until.clone(),
        max_pulls: args.max_pulls,
    };
    let repo_name = repo.to_string();
    let index = ark.index_mut();
    let mut record = |number: u64, outcome: &Outcome, inst: Option<&dataset::Instance>| {
        let reason = match outcome {
            Outcome::Skipped { reason } => Some(reason.as_str()),
            Outcome::Instance { .. } => None,
        };
        index.record_pull(&repo_name, number, reason, inst)
    };
    let report = collect::collect(
        &mut client,
        owner,
        name,
        &options,
        &|n| done.contains(&n),
        &mut record,
    )?;
    let stats = client.stats.clone();
    drop(client);

    let reasons = report.skipped_by_reason();
    let manifests = ctx.manifests().unwrap_or_default();
    let versioned = collect::assign_and_record(&mut ark, &repo, &manifests)?;
    for note in &versioned.notes {
        ctx.note(format!("note: {note}"));
    }
    let all = versioned.instances;
    if let Some(out) = &args.output {
        let bytes = dataset::dataset_bytes(out, &all, TestListForm::Strings);
        fsutil::write_atomic(out, &bytes)
            .with_context(|| format!("cannot write `{}`", out.display()))?;
        ctx.note(format!(
            "wrote {} instances to {}",
            all.len(),
            out.display()
        ));
    }
    if args.json {
        out!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "repo": repo.as_str(),
                "pulls_listed": report.pulls_listed,
                "merged": report.merged,
                "already_done": report.already_done,
                "instances": report.instances.iter().map(|i| &i.instance_id).collect::<Vec<_>>(),
                "outcomes": report.outcomes,
                "requests": stats,
            }))?
        );
    } else {
        for (number, o) in &report.outcomes {
            match o {
                Outcome::Instance { instance_id } => out!("  + #{number} -> {instance_id}"),
                Outcome::Skipped { reason } => out!("  - #{number}: {reason}"),
            }
        }
        out!(
            "collected {}: {} pull requests listed, {} merged ({} decided earlier), {} new instances, {} skipped",
            repo,
            report.pulls_listed,
            report.merged,
            report.already_done,
            report.instances.len(),
            reasons.values().sum::<usize>()
        );
        for (reason, n) in &reasons {
            out!("  skipped {n}: {reason}");
        }
        out!(
            "{} requests ({} answered 304 Not Modified, {} retries, {} rate-limit waits)",
            stats.requests,
            stats.not_modified,
            stats.retries,
            stats.rate_limit_waits
        );
    }
    Ok(ExitCode::SUCCESS)
}
