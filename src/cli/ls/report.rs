//! `ls --stats` (storage per repository), `ls --validated` (the verdicts) and `ls --installed`
//! (the installed states kept).

use std::process::ExitCode;

use crate::store::{Ark, RepoStorage, dedup_ratio};

use super::super::Context;
use super::super::output::{column_width, human_bytes};

pub(super) fn stats(ctx: &Context, ark: &Ark, json: bool) -> anyhow::Result<ExitCode> {
    let st = ark.storage_stats()?;
    let (repos, pieces) = (&st.repos, st.pieces);
    let stored = RepoStorage::stored;
    let ratio = dedup_ratio;
    let (total_logical, total_stored) = (st.total_logical(), st.total_stored());
    if json {
        let list: Vec<_> = repos
            .iter()
            .map(|r| {
                serde_json::json!({
                    "repo": r.repo,
                    "bundles": r.bundles,
                    "logical_bytes": r.logical,
                    "stored_bytes": stored(r),
                    "packs": r.packs,
                    "pack_bytes": r.pack_bytes,
                    "whole_files": r.whole_files,
                    "whole_file_bytes": r.whole_file_bytes,
                    "dedup_ratio": ratio(r.logical, stored(r)),
                })
            })
            .collect();
        let v = serde_json::json!({
            "repos": list,
            "total": {
                "bundles": st.total_bundles(),
                "logical_bytes": total_logical,
                "stored_bytes": total_stored,
                "pieces": pieces,
                "dedup_ratio": ratio(total_logical, total_stored),
            },
        });
        out!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let width = column_width(repos.iter().map(|r| r.repo.len()), 5);
    out!(
        "{:<width$}  {:>7}  {:>10}  {:>10}  {:>7}  WHOLE FILES",
        "REPO",
        "BUNDLES",
        "LOGICAL",
        "STORED",
        "RATIO"
    );
    for r in repos {
        out!(
            "{:<width$}  {:>7}  {:>10}  {:>10}  {:>6.1}x  {}",
            if r.repo.is_empty() { "-" } else { &r.repo },
            r.bundles,
            human_bytes(r.logical),
            human_bytes(stored(r)),
            ratio(r.logical, stored(r)),
            r.whole_files
        );
    }
    out!(
        "{:<width$}  {:>7}  {:>10}  {:>10}  {:>6.1}x",
        "total",
        st.total_bundles(),
        human_bytes(total_logical),
        human_bytes(total_stored),
        ratio(total_logical, total_stored)
    );
    ctx.note(format!(
        "logical: the bundles' uncompressed tars; stored: {pieces} pieces in packs, plus whole \
         files from before (gc moves them into the store)"
    ));
    Ok(ExitCode::SUCCESS)
}

pub(super) fn validated(ctx: &Context, ark: &Ark, json: bool) -> anyhow::Result<ExitCode> {
    let rows = ark.index().validations()?;
    if json {
        out!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        ctx.note("no instance has been validated yet (run `swe-ark validate`)");
        return Ok(ExitCode::SUCCESS);
    }
    let width = column_width(rows.iter().map(|r| r.instance_id.len()), 8);
    out!(
        "{:<width$}  {:<16}  {:>5}  {:>5}  {:>5}  {:>7}  reason",
        "instance",
        "verdict",
        "F2P",
        "P2P",
        "flaky",
        "seconds"
    );
    for r in &rows {
        let reason = if r.reason.is_empty() {
            String::new()
        } else {
            format!(
                "{}: {}",
                crate::verdict::reason_word(r.reason_kind),
                r.reason.lines().next().unwrap_or("")
            )
        };
        let line = format!(
            "{:<width$}  {:<16}  {:>5}  {:>5}  {:>5}  {:>7.0}  {}",
            r.instance_id, r.verdict, r.fail_to_pass, r.pass_to_pass, r.flaky, r.seconds, reason
        );
        out!("{}", line.trim_end());
    }
    Ok(ExitCode::SUCCESS)
}

/// `ls --installed`: what the installed states cost, per repository, then each.
pub(super) fn installed(ark: &Ark, json: bool) -> anyhow::Result<ExitCode> {
    let states = ark.index().installed_states()?;
    let mut per_repo: std::collections::BTreeMap<&str, (u64, u64, f64)> = Default::default();
    for s in &states {
        let r = per_repo.entry(&s.repo).or_default();
        *r = (r.0 + 1, r.1 + s.size, r.2 + s.install_seconds);
    }
    if json {
        let repos: Vec<_> = per_repo
            .iter()
            .map(|(repo, (n, bytes, seconds))| {
                serde_json::json!({"repo": repo, "states": n, "bytes": bytes,
                                   "install_seconds": seconds})
            })
            .collect();
        let v = serde_json::json!({"repos": repos, "states": states});
        out!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let width = column_width(per_repo.keys().map(|r| r.len()), 5);
    out!(
        "{:<width$}  {:>6}  {:>10}  INSTALLS TOOK",
        "REPO",
        "STATES",
        "BYTES"
    );
    for (repo, (n, bytes, seconds)) in &per_repo {
        out!(
            "{repo:<width$}  {n:>6}  {:>10}  {seconds:.1} s",
            human_bytes(*bytes)
        );
    }
    out!("");
    out!("KEY           BASE COMMIT   BYTES       ENV  TREE  EDITABLE  INSTALL  MADE BY");
    for s in &states {
        out!(
            "{:<12}  {:<12}  {:>10}  {:>4}  {:>4}  {:<8}  {:>5.1} s  {}",
            s.key.short(),
            &s.base_commit[..s.base_commit.len().min(12)],
            human_bytes(s.size),
            s.env_entries,
            s.tree_entries,
            if s.editable { "yes" } else { "no" },
            s.install_seconds,
            s.instance_id
        );
    }
    Ok(ExitCode::SUCCESS)
}
