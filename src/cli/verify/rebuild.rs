//! `verify --rebuild`: bundles packed again from their mirrors and compared.

use std::process::ExitCode;

use crate::dataset::Selection;
use crate::release::rebuild::Revalidate;
use crate::store::Ark;

use super::super::Context;
use super::VerifyArgs;

/// `verify --rebuild`: every bundle (of the given instances) packed again and compared.
pub(super) fn rebuild(ctx: &Context, args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let rows = Selection::ids(args.instance_ids.clone())
        .pick(ark.index().bundles()?, "with no bundle in the archive")?;
    let manifests = if args.revalidate {
        Some(ctx.manifests()?)
    } else {
        None
    };
    let revalidate = manifests.as_ref().map(|m| Revalidate {
        manifests: m,
        options: crate::validate::ValidateOptions {
            runs: args.runs.max(1),
            run: crate::harness::RunOptions {
                timeout: std::time::Duration::from_secs(args.timeout),
                ..Default::default()
            },
            lock: None,
        },
    });
    let mut results = Vec::new();
    for row in &rows {
        let progress = ctx.progress();
        if revalidate.is_some() {
            ctx.note(format!(
                "running the tests of {} again ({})",
                row.instance_id,
                row.id.short()
            ));
        }
        let r =
            crate::release::rebuild::rebuild(&ark, row, revalidate.as_ref(), progress.as_ref())?;
        if !args.json {
            out!(
                "{} rebuild {} {}",
                if r.ok { "ok " } else { "BAD" },
                r.instance_id,
                r.bundle
            );
            for p in &r.problems {
                out!("    {p}");
            }
        }
        results.push(r);
    }
    let bad = results.iter().filter(|r| !r.ok).count();
    if args.json {
        out!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        ctx.note(format!(
            "{} rebuilt, {bad} different or not rebuilt",
            results.len()
        ));
    }
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
