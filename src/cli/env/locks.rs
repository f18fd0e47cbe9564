//! `env ls`, `env show`: the locks listed, one printed.

use std::process::ExitCode;

use crate::digest::Sha256Digest;
use crate::env::listing;
use crate::store::Ark;

use super::super::Context;
use super::super::output::{ListArgs, human_bytes, human_time};
use super::ShowArgs;

pub(super) fn ls(ctx: &Context, a: ListArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let locks = ark.index().locks()?;
    let built = |id: &Sha256Digest| listing::is_built(&ark, id);
    // What a lock records of a context inferred from the repository's build files.
    let inferred = |id: &Sha256Digest| {
        ark.objects()
            .get(id)
            .ok()
            .and_then(|bytes| crate::context::resolve::inferred_in(&bytes).ok().flatten())
    };
    if a.json {
        let rows: Vec<serde_json::Value> = locks
            .iter()
            .map(|l| {
                let mut v = serde_json::to_value(l).unwrap_or_default();
                v["id"] = serde_json::json!(l.id.hex());
                v["built"] = serde_json::json!(built(&l.id));
                v["inferred_from"] = serde_json::json!(inferred(&l.id).map(|i| i.from));
                v
            })
            .collect();
        out!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    if locks.is_empty() {
        ctx.note("no locks (make one with `swe-ark env lock OWNER/NAME VERSION`)");
        return Ok(ExitCode::SUCCESS);
    }
    out!(
        "{:<12}  {:<32}  {:<11}  {:<14}  {:>8}  {:>9}  {:>10}  {:<5}  created",
        "lock",
        "repo",
        "version",
        "runtime",
        "packages",
        "artifacts",
        "bytes",
        "built"
    );
    for l in &locks {
        out!(
            "{:<12}  {:<32}  {:<11}  {:<14}  {:>8}  {:>9}  {:>10}  {:<5}  {}",
            l.id.short(),
            l.repo,
            l.version,
            l.python,
            l.packages,
            l.artifacts,
            human_bytes(l.bytes),
            if built(&l.id) { "yes" } else { "no" },
            human_time(l.created_at)
        );
    }
    for l in &locks {
        if let Some(i) = inferred(&l.id) {
            ctx.note(format!(
                "{} ({} {}): {}",
                l.id.short(),
                l.repo,
                l.version,
                i.note
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn show(ctx: &Context, a: ShowArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let id = listing::find_lock_id(&ark, &a.lock)?;
    let bytes = ark.objects().get(&id)?;
    use std::io::Write as _;
    std::io::stdout().lock().write_all(&bytes)?;
    Ok(ExitCode::SUCCESS)
}
