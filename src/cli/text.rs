use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;

use crate::dataset;
use crate::fsutil;
use crate::store::Ark;
use crate::text::{self, DEFAULT_TOP_K, Options, Retrieval};

use super::Context;

/// SWE-bench_bm25_27K's budget.
const DEFAULT_MAX_TOKENS: usize = 27_000;

#[derive(Debug, clap::Args)]
pub struct TextArgs {
    /// How the files in the prompt are chosen: BM25 over the code base's Python files, or the
    /// files the gold patch edits (oracle).
    #[arg(long, value_enum, default_value_t = Retrieval::Bm25)]
    pub retrieval: Retrieval,
    /// The most cl100k_base tokens a text may have (BM25 only; default 27000, as
    /// SWE-bench_bm25_27K).
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<usize>,
    /// How many of BM25's best files are candidates (SWE-bench retrieves 20).
    #[arg(long, value_name = "K", default_value_t = DEFAULT_TOP_K)]
    pub top_k: usize,
    /// Only these instances (default: every instance with a bundle, in the order they entered
    /// the archive).
    #[arg(long, num_args = 1.., value_name = "ID")]
    pub instance_ids: Vec<String>,
    /// Where to write: `.jsonl` gives JSON Lines, anything else a JSON list.
    #[arg(
        short,
        long,
        value_name = "FILE",
        required_unless_present = "count_tokens"
    )]
    pub output: Option<PathBuf>,
    /// Also write the BM25 hits, as SWE-bench's retrieval file (JSON Lines).
    #[arg(long, value_name = "FILE")]
    pub hits: Option<PathBuf>,
    /// Only count the cl100k_base tokens of FILE (UTF-8 text) and print them as JSON, with
    /// the seconds encoding took; no archive is needed.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["output", "hits", "instance_ids"])]
    pub count_tokens: Option<PathBuf>,
}

fn count_tokens(path: &Path) -> anyhow::Result<ExitCode> {
    let c = text::files::count_file(path)?;
    out!(
        "{}",
        serde_json::json!({"file": path, "bytes": c.bytes, "tokens": c.tokens, "seconds": c.seconds})
    );
    Ok(ExitCode::SUCCESS)
}

fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    fsutil::write_atomic(path, bytes)
        .map_err(|e| anyhow::anyhow!("cannot write `{}`: {e}", path.display()))
}

pub fn run(ctx: &Context, args: TextArgs) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.count_tokens {
        return count_tokens(path);
    }
    let Some(output) = args.output else {
        bail!("--output is required");
    };
    let max_tokens = match (args.retrieval, args.max_tokens) {
        (Retrieval::Oracle, Some(_)) => bail!(
            "--max-tokens applies to --retrieval bm25 only: SWE-bench's oracle datasets show the \
             edited files whole"
        ),
        (Retrieval::Oracle, None) => None,
        (Retrieval::Bm25, n) => Some(n.unwrap_or(DEFAULT_MAX_TOKENS)),
    };
    if args.hits.is_some() && args.retrieval != Retrieval::Bm25 {
        bail!("--hits needs --retrieval bm25");
    }
    if args.top_k == 0 {
        bail!("--top-k must be at least 1");
    }
    let options = Options {
        retrieval: args.retrieval,
        max_tokens,
        top_k: args.top_k,
    };
    let ark = Ark::open(&ctx.ark)?;
    let (bundles, unpacked) = text::files::newest_bundles(&ark, &args.instance_ids)?;
    if !unpacked.is_empty() {
        if !args.instance_ids.is_empty() {
            bail!(
                "no bundle for {} (pack the instance first)",
                unpacked.join(", ")
            );
        }
        ctx.note(format!(
            "{} instance(s) have no bundle and are left out (pack them first): {}",
            unpacked.len(),
            unpacked.join(", ")
        ));
    }
    let progress = ctx.progress();
    let mut records = Vec::new();
    let mut hits = Vec::new();
    let mut failed = Vec::new();
    for (instance_id, row) in &bundles {
        let bundle_id = &row.id;
        let source = ark.bundle(row)?;
        match text::from_bundle(&source, Some(*bundle_id), &options, progress.as_ref()) {
            Ok(row) => {
                let from = match &row.search {
                    Some(_) => format!(" of {} documents", row.documents),
                    None => String::new(),
                };
                ctx.note(format!(
                    "{instance_id}: {} file(s){from}, {} token(s)",
                    row.files.len(),
                    row.tokens
                ));
                records.push(row.record());
                hits.push(row.hits_record());
            }
            Err(e) => {
                eprintln!(
                    "swe-ark: error: {instance_id} (bundle {}): {e}",
                    bundle_id.short()
                );
                failed.push(instance_id.as_str());
            }
        }
    }
    write(&output, &dataset::records_bytes(&output, &records))?;
    if let Some(path) = &args.hits {
        write(
            path,
            &dataset::records_bytes(Path::new("hits.jsonl"), &hits),
        )?;
    }
    let how = match max_tokens {
        Some(n) => format!("bm25, at most {n} tokens"),
        None => "oracle".to_string(),
    };
    ctx.note(format!(
        "wrote {} text(s) ({how}) to {}",
        records.len(),
        output.display()
    ));
    if !failed.is_empty() {
        eprintln!(
            "swe-ark: {} instance(s) left out: {}",
            failed.len(),
            failed.join(", ")
        );
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}
