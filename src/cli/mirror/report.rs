//! What `mirror add` and `mirror update` print: each fetch, and the submodules mirrored.

use std::collections::BTreeSet;

use crate::mirror::{self, RepoName};
use crate::store::{self, Ark};

use super::super::Context;
use super::super::output::human_bytes;

pub(super) fn print_report(r: &mirror::FetchReport) -> anyhow::Result<()> {
    let (mut added, mut moved, mut deleted) = (0, 0, 0);
    for c in &r.changes {
        match c {
            mirror::RefChange::Added { .. } => added += 1,
            mirror::RefChange::Moved { .. } => moved += 1,
            mirror::RefChange::Deleted { .. } => deleted += 1,
        }
        out!("  {c}");
    }
    out!(
        "{} {}: {} refs (+{added} ~{moved} -{deleted}), {} objects, {} received in {:.1} s",
        if r.created { "mirrored" } else { "updated" },
        r.name,
        r.refs,
        r.received_objects,
        human_bytes(r.received_bytes as u64),
        r.seconds
    );
    Ok(())
}

/// Says what mirroring submodules did (the fetches and submodules in text; the notes; each
/// gitlink that could not be mirrored, on stderr); returns how many could not.
pub(super) fn print_submodules(
    ctx: &Context,
    done: &store::SubmodulesMirrored,
    json: bool,
) -> anyhow::Result<usize> {
    for note in &done.notes {
        ctx.note(format!("note: {note}"));
    }
    if !json {
        for r in &done.fetches {
            print_report(r)?;
        }
        for s in &done.submodules {
            out!(
                "  submodule {} of {}: {} ({}), {} commit{} pinned",
                s.path,
                s.superproject,
                s.mirror,
                s.url,
                s.commits,
                if s.commits == 1 { "" } else { "s" }
            );
        }
    }
    for e in &done.problems {
        eprintln!("swe-ark: error: {e}");
    }
    Ok(done.problems.len())
}

/// Mirrors the submodules the instances of `name` need (none for those whose context leaves
/// them empty, `empty_submodules`) and says what was done ([`print_submodules`]).
pub(super) fn submodules(
    ctx: &Context,
    ark: &mut Ark,
    name: &RepoName,
    base: &str,
    fetched: &mut BTreeSet<RepoName>,
    json: bool,
) -> anyhow::Result<store::SubmodulesMirrored> {
    let manifests = ctx.manifests()?;
    let progress = ctx.progress();
    let empty = |i: &crate::dataset::Instance| manifests.leaves_submodules_empty(i);
    let done = ark.mirror_submodules(name, base, fetched, &empty, progress.as_ref())?;
    print_submodules(ctx, &done, json)?;
    Ok(done)
}
