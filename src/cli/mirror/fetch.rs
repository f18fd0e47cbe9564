//! `mirror add`, `mirror update`, `mirror import`: mirrors fetched or read, and their state
//! recorded in the index.

use std::collections::BTreeSet;
use std::process::ExitCode;

use anyhow::bail;

use crate::mirror::{self, Mirror, RepoName};
use crate::store::{self, Ark};

use super::super::Context;
use super::report::{print_report, submodules};
use super::{AddArgs, ImportArgs, UpdateArgs, repo_name};

pub(super) fn add(ctx: &Context, args: AddArgs) -> anyhow::Result<ExitCode> {
    if args.name.is_some() && args.sources.len() > 1 {
        bail!("--name names one mirror; give one source with it");
    }
    let base = store::git_base(&store::Layout::new(&ctx.ark), args.git_base)?;
    let sources = args
        .sources
        .iter()
        .map(|s| mirror::parse_source(s, &base, args.name.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut ark = Ark::create(&ctx.ark)?;
    let mut reports = Vec::new();
    let mut fetched = BTreeSet::new();
    let mut unmirrored = 0;
    for source in sources {
        let progress = ctx.progress();
        let (m, report) = if args.allow_missing_objects {
            let (m, report, missing) = Mirror::add_incomplete(
                &ark.mirrors_dir(),
                &source.name,
                &source.url,
                progress.as_ref(),
            )?;
            super::show::note_missing(ctx, &m, &missing);
            (m, report)
        } else {
            Mirror::add(
                &ark.mirrors_dir(),
                &source.name,
                &source.url,
                progress.as_ref(),
            )?
        };
        ark.record_mirror(&m)?;
        if !args.json {
            print_report(&report)?;
        }
        reports.push(report);
        fetched.insert(source.name.clone());
        let done = submodules(ctx, &mut ark, &source.name, &base, &mut fetched, args.json)?;
        unmirrored += done.problems.len();
        reports.extend(done.fetches);
    }
    if args.json {
        out!("{}", serde_json::to_string_pretty(&reports)?);
    }
    if unmirrored > 0 {
        bail!(
            "{unmirrored} submodule gitlink(s) could not be mirrored (above); everything else \
             was mirrored"
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn update(ctx: &Context, args: UpdateArgs) -> anyhow::Result<ExitCode> {
    let base = store::git_base(&store::Layout::new(&ctx.ark), args.git_base)?;
    let mut ark = Ark::open(&ctx.ark)?;
    let names: Vec<RepoName> = if args.names.is_empty() {
        ark.index()
            .mirrors()?
            .iter()
            .map(|m| repo_name(&m.name))
            .collect::<Result<_, _>>()?
    } else {
        args.names
            .iter()
            .map(|n| repo_name(n))
            .collect::<Result<_, _>>()?
    };
    let mut reports = Vec::new();
    let mut failed = 0;
    let mut fetched = BTreeSet::new();
    for name in &names {
        let mut m = Mirror::open(&ark.mirrors_dir(), name)?;
        if m.url().is_empty() {
            ctx.note(format!(
                "{name}: no upstream URL (imported from a bundle); skipped — set one with \
                 `swe-ark mirror add URL --name {name}`"
            ));
            continue;
        }
        let progress = ctx.progress();
        match m.fetch(None, progress.as_ref()) {
            Ok(report) => {
                ark.record_mirror(&m)?;
                if !args.json {
                    print_report(&report)?;
                }
                reports.push(report);
                fetched.insert(name.clone());
            }
            // One unreachable upstream does not stop the others; the summary says it failed.
            Err(e) => {
                eprintln!("swe-ark: error: {e}");
                failed += 1;
            }
        }
    }
    // Then the submodules the archive's commits name, each fetched once (those updated above
    // are not fetched again).
    let mut unmirrored = 0;
    // Those skipped or failed are left as they were, submodules included.
    for name in names
        .iter()
        .filter(|n| fetched.contains(*n))
        .cloned()
        .collect::<Vec<_>>()
    {
        let done = submodules(ctx, &mut ark, &name, &base, &mut fetched, args.json)?;
        unmirrored += done.problems.len();
        reports.extend(done.fetches);
    }
    if args.json {
        out!("{}", serde_json::to_string_pretty(&reports)?);
    }
    if failed > 0 {
        bail!("{failed} mirror(s) could not be updated; their previous state is unchanged");
    }
    if unmirrored > 0 {
        bail!(
            "{unmirrored} submodule gitlink(s) could not be mirrored (above); everything else \
             was updated"
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn import(ctx: &Context, args: ImportArgs) -> anyhow::Result<ExitCode> {
    let name = match &args.name {
        Some(n) => repo_name(n)?,
        None => repo_name(&mirror::import_name(&args.file))?,
    };
    let mut ark = Ark::create(&ctx.ark)?;
    let progress = ctx.progress();
    let (m, stats) = mirror::import_bundle(
        &ark.mirrors_dir(),
        &args.file,
        &name,
        args.url.as_deref(),
        progress.as_ref(),
    )?;
    ark.record_mirror(&m)?;
    out!(
        "{} {name} from {}: {} refs",
        if stats.created { "imported" } else { "updated" },
        args.file.display(),
        stats.refs
    );
    Ok(ExitCode::SUCCESS)
}
