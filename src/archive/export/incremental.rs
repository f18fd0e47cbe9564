//! An incremental file (`export --incremental --since OLD`): what a receiver that imported
//! the base release holds, left out.

use std::collections::{BTreeSet, HashSet};

use crate::digest::Sha256Digest;
use crate::release::Snapshot;
use crate::store::{Ark, BundleRow};

use super::{ArchiveError, Gathered, gather};

/// What a receiver that imported the base release of an incremental file holds: its
/// bundles, their pieces, and the objects their locks need.
pub(super) struct Held {
    pub(super) release: String,
    pub(super) root: Sha256Digest,
    pub(super) bundles: HashSet<Sha256Digest>,
    pub(super) pieces: HashSet<Sha256Digest>,
    pub(super) objects: HashSet<Sha256Digest>,
}

pub(super) fn held_by_base(ark: &Ark, old: &Snapshot) -> Result<Held, ArchiveError> {
    let fail = |detail: String| ArchiveError::Export {
        release: old.name.clone(),
        detail: format!("as the base of an incremental file: {detail}"),
    };
    let computed = old.computed_root();
    if computed != old.root {
        return Err(fail(format!(
            "the snapshot states root {} but its instances hash to {computed}",
            old.root
        )));
    }
    let g = gather(ark, old)?;
    let rows: Vec<BundleRow> = g.rows.values().cloned().collect();
    let pieces = ark.bundle_pieces(&rows)?.into_values().flatten().collect();
    Ok(Held {
        release: old.name.clone(),
        root: old.root,
        bundles: g.rows.keys().copied().collect(),
        pieces,
        // Validations' results and logs may have changed since: those of the instances the
        // file carries are carried.
        objects: g
            .objects
            .iter()
            .filter(|(_, kind)| !matches!(**kind, "results" | "log"))
            .map(|(id, _)| *id)
            .collect(),
    })
}

/// Keeps in `g` only what the receiver of an incremental file lacks: the rows of the
/// instances whose bundle the base does not hold, and the objects they bring that the base's
/// locks do not.
pub(super) fn narrow_to_new(g: &mut Gathered, held: &Held) {
    let new: BTreeSet<String> = g
        .rows
        .values()
        .filter(|r| !held.bundles.contains(&r.id))
        .map(|r| r.instance_id.clone())
        .collect();
    g.rows.retain(|id, _| !held.bundles.contains(id));
    g.slice.bundles.retain(|b| !held.bundles.contains(&b.id));
    g.slice.instances.retain(|v| {
        v.get("instance_id")
            .and_then(|i| i.as_str())
            .is_some_and(|i| new.contains(i))
    });
    g.slice.validations.retain(|v| new.contains(&v.instance_id));
    let carried: BTreeSet<Sha256Digest> = new
        .iter()
        .filter_map(|i| g.brings.get(i))
        .flatten()
        .filter(|o| !held.objects.contains(o))
        .copied()
        .collect();
    g.objects.retain(|id, _| carried.contains(id));
    g.slice.locks.retain(|l| carried.contains(&l.id));
}
