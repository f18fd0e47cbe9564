//! `mirror ls`, `mirror verify`, `mirror export`, `mirror version`: mirrors read (and what a
//! mirror made from a source with holes lacks).

use std::process::ExitCode;

use anyhow::bail;

use crate::mirror::{self, Mirror};
use crate::store::Ark;

use super::super::Context;
use super::super::output::{ListArgs, column_width, human_bytes, human_time};
use super::{ExportArgs, VerifyArgs, VersionArgs, repo_name};

pub(super) fn ls(ctx: &Context, args: ListArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let mirrors = ark.index().mirrors()?;
    if args.json {
        out!("{}", serde_json::to_string_pretty(&mirrors)?);
        return Ok(ExitCode::SUCCESS);
    }
    if mirrors.is_empty() {
        ctx.note("no mirrors; add one with `swe-ark mirror add OWNER/NAME`");
        return Ok(ExitCode::SUCCESS);
    }
    let w = column_width(mirrors.iter().map(|m| m.name.len()), 4);
    out!(
        "{:<w$}  {:>6}  {:>10}  {:<20}  URL",
        "NAME",
        "REFS",
        "SIZE",
        "LAST FETCH"
    );
    for m in &mirrors {
        out!(
            "{:<w$}  {:>6}  {:>10}  {:<20}  {}",
            m.name,
            m.refs_count,
            human_bytes(m.size),
            m.last_fetch.map_or("-".to_string(), human_time),
            if m.url.is_empty() { "(none)" } else { &m.url }
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(serde::Serialize)]
struct Checked {
    name: String,
    objects: usize,
    pins: usize,
    ok: bool,
    problems: Vec<String>,
    /// Objects its history names that its source lacked (`mirror add --allow-missing-objects`).
    missing_from_history: usize,
}

/// Says what a mirror made from an incomplete source lacks, and what that means.
pub(super) fn note_missing(ctx: &Context, m: &Mirror, missing: &[mirror::MissingObject]) {
    match missing {
        [] => ctx.note(format!(
            "note: {}: its history lacks no object (--allow-missing-objects was not needed)",
            m.name
        )),
        [first, ..] => ctx.note(format!(
            "note: {}: its history lacks {} object{} (the first: {first}), listed in `{}`; \
             instances whose commits are whole are used as from any mirror, and `pack`, \
             `validate` and `mirror verify` name one whose tree needs a missing object",
            m.name,
            missing.len(),
            if missing.len() == 1 { "" } else { "s" },
            m.path.join(mirror::MISSING_OBJECTS_FILE).display()
        )),
    }
}

pub(super) fn verify(ctx: &Context, args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let names: Vec<String> = if args.names.is_empty() {
        ark.index().mirrors()?.into_iter().map(|m| m.name).collect()
    } else {
        args.names.clone()
    };
    let mut results = Vec::new();
    for n in names {
        let name = repo_name(&n)?;
        let (checked, missing) = match Mirror::open(&ark.mirrors_dir(), &name) {
            Err(e) => (
                mirror::Checked {
                    objects: 0,
                    pins: 0,
                    problems: vec![e.to_string()],
                },
                0,
            ),
            Ok(m) => (
                mirror::verify(&m, &ark.mirror_expected(&name)?, ctx.progress().as_ref())?,
                m.missing_objects()?.len(),
            ),
        };
        results.push(Checked {
            name: n,
            objects: checked.objects,
            pins: checked.pins,
            ok: checked.problems.is_empty(),
            problems: checked.problems,
            missing_from_history: missing,
        });
    }
    let bad = results.iter().filter(|r| !r.ok).count();
    if args.json {
        out!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        for r in &results {
            let lacked = match r.missing_from_history {
                0 => String::new(),
                n => format!(
                    "; made from a source that lacked {n} object{} of its history, listed in \
                     its `{}`",
                    if n == 1 { "" } else { "s" },
                    mirror::MISSING_OBJECTS_FILE
                ),
            };
            out!(
                "{} mirror {} ({} objects, {} pins{lacked})",
                if r.ok { "ok " } else { "BAD" },
                r.name,
                r.objects,
                r.pins
            );
            for p in &r.problems {
                out!("    {p}");
            }
        }
        ctx.note(format!("{} checked, {bad} bad", results.len()));
    }
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub(super) fn export(ctx: &Context, args: ExportArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let m = Mirror::open(&ark.mirrors_dir(), &repo_name(&args.name)?)?;
    let progress = ctx.progress();
    let stats = m.export_bundle(&args.output, progress.as_ref())?;
    ctx.note(format!(
        "exported {}: {} refs, {} objects, {}",
        args.name,
        stats.refs,
        stats.objects,
        human_bytes(stats.bytes)
    ));
    out!("{}", args.output.display());
    Ok(ExitCode::SUCCESS)
}

pub(super) fn version(ctx: &Context, args: VersionArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let m = Mirror::open(&ark.mirrors_dir(), &repo_name(&args.name)?)?;
    let commit = m.commit(&args.commit)?;
    let manifests = ctx.manifests().unwrap_or_default();
    let rule = manifests
        .repo(m.name.as_str())
        .ok()
        .and_then(|r| r.version_rule.clone());
    match crate::collect::version::detect(&m.repo, commit.id(), &args.before, rule.as_ref()) {
        Some(v) => {
            out!("{}\t{}\t{}", v.version, v.full, v.source);
            Ok(ExitCode::SUCCESS)
        }
        None => bail!(
            "no version found at {} (no packaging file, __version__ or version tag)",
            args.commit
        ),
    }
}
