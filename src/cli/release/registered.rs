//! `release verify`, `release rm`, `release ls`: releases checked, forgotten, listed.

use std::process::ExitCode;

use crate::release::{self, Snapshot};
use crate::store::Ark;

use super::super::Context;
use super::super::output::{ListArgs, print_checks};
use super::{RmArgs, VerifyArgs};

pub(super) fn verify(ctx: &Context, args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let snap = Snapshot::read(&args.snapshot)?;
    let ark = Ark::open(&ctx.ark)?;
    let progress = ctx.progress();
    let checks = release::verify(&ark, &snap, progress.as_ref())?;
    let bad = print_checks(&checks, args.json)?;
    if !args.json {
        ctx.note(format!(
            "release {} (root {}): {} checked, {bad} bad",
            snap.name,
            snap.root,
            checks.len()
        ));
    }
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub(super) fn rm(ctx: &Context, args: RmArgs) -> anyhow::Result<ExitCode> {
    let mut ark = Ark::open(&ctx.ark)?;
    let removed = ark.remove_release(&args.name, !args.keep_bundles)?;
    for id in &removed {
        out!("{id}");
    }
    ctx.note(format!(
        "forgot release {}; removed {} bundle(s) only it kept from the index; `swe-ark gc` \
         frees what nothing else uses",
        args.name,
        removed.len()
    ));
    Ok(ExitCode::SUCCESS)
}

pub(super) fn ls(ctx: &Context, args: ListArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let mut rows = Vec::new();
    for (path, snap) in release::ops::registered(&ark)? {
        rows.push(serde_json::json!({
            "name": snap.name,
            "root": snap.root,
            "instances": snap.instances.len(),
            "objects": snap.objects().len(),
            "path": path,
        }));
        if !args.json {
            out!(
                "{}  {}  {} instance(s), {} object(s)",
                snap.name,
                snap.root,
                snap.instances.len(),
                snap.objects().len()
            );
        }
    }
    if args.json {
        out!("{}", serde_json::to_string_pretty(&rows)?);
    } else if rows.is_empty() {
        ctx.note("no release is registered in this archive");
    }
    Ok(ExitCode::SUCCESS)
}
