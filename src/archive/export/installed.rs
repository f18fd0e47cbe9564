//! `export --installed-states`: the installed states (docs/REPLAY.md, "The installed state")
//! of the instances the file carries, each with its object. A state is what one machine's
//! install made, not reproducible elsewhere: the release's root does not cover it, and a file
//! without states is the same bytes from any archive.

use std::collections::BTreeSet;

use crate::store::{Ark, INSTALLED_KIND};

use super::super::slice::SliceInstalledState;
use super::{ArchiveError, Gathered};

/// Adds to `g` every installed state of the archive made at the lock and base commit of an
/// instance the file carries, with its object; the rows sorted by key. A state whose object
/// the archive lacks is left out, with a note (the other side makes it at its first run).
pub(super) fn gather(ark: &Ark, g: &mut Gathered) -> Result<(), ArchiveError> {
    let wanted: BTreeSet<(String, &str)> = g
        .slice
        .instances
        .iter()
        .filter_map(|v| {
            let id = v.get("instance_id")?.as_str()?;
            let base = v.get("base_commit")?.as_str()?;
            Some((g.locks_of.get(id)?.hex(), base))
        })
        .collect();
    let store = ark.objects();
    for row in ark.index().installed_states()? {
        if !wanted.contains(&(row.lock_id.clone(), row.base_commit.as_str())) {
            continue;
        }
        if !store.has(&row.object) {
            g.notes.insert(format!(
                "installed state {} names object {}, which the archive lacks: it is not \
                 carried (the other side makes it at its first run)",
                row.key.short(),
                row.object
            ));
            continue;
        }
        g.objects.entry(row.object).or_insert(INSTALLED_KIND);
        g.slice
            .installed_states
            .push(SliceInstalledState::from(&row));
    }
    g.slice.installed_states.sort_by_key(|s| s.key);
    Ok(())
}
