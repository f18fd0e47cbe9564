//! `env lock`: a context installed for real, locked, its artifacts kept.

use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::Context as _;

use crate::context::{self, ContextError, LockOptions};
use crate::env::EnvError;
use crate::store::Ark;

use super::super::Context;
use super::LockArgs;

fn parse_when(s: &str) -> anyhow::Result<SystemTime> {
    let full = if s.len() == 10 {
        format!("{s}T00:00:00Z")
    } else {
        s.to_string()
    };
    humantime::parse_rfc3339_weak(full.trim_end_matches('Z')).with_context(|| {
        format!("--exclude-newer `{s}` is not a date (YYYY-MM-DD) or an RFC 3339 time")
    })
}

pub(super) fn lock_cmd(ctx: &Context, a: LockArgs) -> anyhow::Result<ExitCode> {
    let manifests = ctx.manifests()?;
    let exclude_newer = a.exclude_newer.as_deref().map(parse_when).transpose()?;
    let mut ark = Ark::create(&ctx.ark)?;
    let context =
        context::resolve::to_lock(&ark, &manifests, &a.repo, &a.version, a.commit.as_deref())?;
    match &context.inferred {
        Some(inferred) => {
            ctx.note(format!("note: {}", inferred.note));
            ctx.note(format!("note: {}", context.notes));
        }
        None if !context.notes.is_empty() => ctx.note(format!(
            "note: this context differs from SWE-bench's: {}",
            context.notes
        )),
        None => {}
    }
    let opts = LockOptions {
        commit: a.commit,
        runtime: a.python,
        index_url: a.index_url,
        exclude_newer,
        pack_runtime: !a.no_pack_python,
        allow_yanked: a.allow_yanked,
        installer: a.installer,
        unconfined: a.unconfined,
    };
    let kind = context::kind_of(&context)?;
    let report = kind
        .lock(&mut ark, &context, &opts, &|m| ctx.note(m))
        .map_err(|e| {
            // A conda-only context that fails to install: say why it may.
            if !context.notes.is_empty()
                && matches!(
                    e,
                    ContextError::Env(EnvError::Command { .. } | EnvError::Fetch { .. })
                )
            {
                anyhow::Error::new(e).context(format!(
                    "locking {} {} failed; its manifest notes: {}",
                    context.repo, context.version, context.notes
                ))
            } else {
                e.into()
            }
        })?;
    for n in &report.notes {
        ctx.note(format!("note: {n}"));
    }
    if a.json {
        let mut details = report.details;
        if let Some(inferred) = &context.inferred {
            details["inferred"] = serde_json::to_value(inferred)?;
        }
        out!("{}", serde_json::to_string_pretty(&details)?);
    } else {
        ctx.note(report.sentence);
        out!("{}", report.id);
    }
    Ok(ExitCode::SUCCESS)
}
