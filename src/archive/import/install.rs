//! What was staged moved into the archive (objects, packs or bundles, mirrors) and recorded in
//! one transaction.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;

use crate::archive::{ArchiveError, io_err};
use crate::bundle::PackOptions;
use crate::dataset::Instance;
use crate::digest::Sha256Digest;
use crate::failpoint;
use crate::fsutil;
use crate::progress::Progress;
use crate::release::Snapshot;
use crate::store::{
    AddedPack, Ark, BundleRow, ImportRows, ImportedMirror, Incoming, InstalledStateRow, LockRow,
    PinRow, ValidationRow, sketch_of,
};

use super::mirrors::install_mirrors;
use super::{ImportReport, Staged};

/// The repository each incoming pack is recorded under: that of the first bundle, by id,
/// made of one of its pieces.
fn pack_repos(staged: &Staged, incoming: &Incoming) -> Vec<String> {
    let repo_of: BTreeMap<&str, &str> = staged
        .slice
        .instances
        .iter()
        .filter_map(|v| Some((v.get("instance_id")?.as_str()?, v.get("repo")?.as_str()?)))
        .collect();
    let made_of: Vec<(&str, HashSet<Sha256Digest>)> = staged
        .slice
        .bundles
        .iter()
        .filter_map(|b| {
            let check = staged.bundles.get(&b.id)?;
            let mut ids: HashSet<Sha256Digest> =
                check.manifest.members.iter().map(|m| m.sha256).collect();
            ids.extend(b.manifest_piece);
            Some((*repo_of.get(b.instance_id.as_str())?, ids))
        })
        .collect();
    (0..incoming.packs().len())
        .map(|k| {
            let pieces = incoming.pieces_of_pack(k);
            made_of
                .iter()
                .find(|(_, ids)| pieces.iter().any(|p| ids.contains(p)))
                .or(made_of.first())
                .map(|(repo, _)| repo.to_string())
                .unwrap_or_default()
        })
        .collect()
}

/// Moves what was staged into the archive and records it, in one transaction.
pub(super) fn install(
    root: &Path,
    staged: Staged,
    progress: &dyn Progress,
) -> Result<ImportReport, ArchiveError> {
    let mut ark = Ark::create(root)?;
    check_release_name(&ark, &staged)?;
    // Held until the index names what this import stores: gc waits.
    let _held = ark.hold_store()?;
    let store = ark.objects();
    // The archive's own state under a key is kept (the transaction keeps it too); the
    // file's object for that key would be one that nothing names, so it is left out.
    let mut new_states = Vec::new();
    let mut replaced = std::collections::HashSet::new();
    for s in &staged.slice.installed_states {
        match ark.index().installed_state(&s.key)? {
            None => new_states.push(InstalledStateRow::from(s)),
            Some(own) if own.object != s.object => {
                replaced.insert(s.object);
            }
            Some(_) => {}
        }
    }
    let mut objects_added = 0;
    for (id, (path, _)) in &staged.objects {
        if replaced.contains(id) {
            continue;
        }
        if store.install_file(path, id)? {
            objects_added += 1;
        }
    }
    let bundles = install_bundles(&mut ark, &staged, progress)?;
    let bundles_added = bundles.rows.len();
    let mirror_rows = install_mirrors(&ark, &staged, progress)?;
    // Every rename above on disk (one flush for the archive's filesystem) before the index
    // names what they moved.
    fsutil::sync_filesystem(root).map_err(io_err(root))?;
    failpoint::hit("import.before-index");
    let mut rows = index_rows(root, &staged, bundles, mirror_rows)?;
    rows.objects.retain(|(id, _, _)| !replaced.contains(id));
    rows.installed_states = new_states;
    if !staged.shard {
        ark.register_release(&staged.snapshot.name, &staged.snapshot.to_bytes())?;
    }
    ark.index_mut().import_rows(&rows)?;
    Ok(report(&staged, &rows, objects_added, bundles_added))
}

/// The release is registered in the archive (gc and `rm` keep its bundles); another release
/// of the same name is not silently replaced.
fn check_release_name(ark: &Ark, staged: &Staged) -> Result<(), ArchiveError> {
    let name = &staged.snapshot.name;
    let registered = ark.releases_dir().join(format!("{name}.json"));
    if !staged.shard
        && let Ok(old) = Snapshot::read(&registered)
        && old.root != staged.snapshot.root
    {
        return Err(ArchiveError::Refused {
            file: registered,
            detail: format!(
                "the archive holds another release named {name} (root {}, this one {}); \
                 `swe-ark release rm {name}` first",
                old.root, staged.snapshot.root
            ),
        });
    }
    Ok(())
}

/// The bundles this import adds: their rows (with sketches), and (version 2) the packs that
/// hold their pieces.
struct InstalledBundles {
    rows: Vec<(BundleRow, Vec<u8>)>,
    packs: Vec<AddedPack>,
}

/// The bundles the archive lacks, stored: the packs moved in (version 2), or each bundle put
/// into the deduplicated store (version 1).
fn install_bundles(
    ark: &mut Ark,
    staged: &Staged,
    progress: &dyn Progress,
) -> Result<InstalledBundles, ArchiveError> {
    let present: BTreeSet<Sha256Digest> = ark.index().bundles()?.iter().map(|b| b.id).collect();
    let mut rows = Vec::new();
    let options = PackOptions::default();
    let Some(incoming) = &staged.incoming else {
        // Version 1: each bundle goes into the deduplicated store, its pieces recorded as it
        // is stored so that the next finds them as delta bases; the bundles themselves are
        // listed in the one transaction, in the order of their ids.
        let mut pending = Vec::new();
        for (id, path) in &staged.bundle_files {
            if present.contains(id) {
                continue;
            }
            let (row, sketch) = ark.store_for_import(path, *id, &pending, &options, progress)?;
            rows.push((row, sketch.sketch.clone()));
            pending.push(sketch);
        }
        let packs = Vec::new();
        return Ok(InstalledBundles { rows, packs });
    };
    // Version 2: the packs moved in (or cut down to what this archive lacks); the bundles'
    // rows name their bundle.json pieces.
    let repos = pack_repos(staged, incoming);
    let packs = ark.add_incoming(incoming, &repos, options.level)?;
    for b in &staged.slice.bundles {
        let Some(check) = staged.bundles.get(&b.id) else {
            continue;
        };
        if present.contains(&b.id) {
            continue;
        }
        rows.push((BundleRow::from(b), sketch_of(&check.manifest)));
    }
    Ok(InstalledBundles { rows, packs })
}

/// Everything the import records, from the index slice and what was installed.
fn index_rows(
    root: &Path,
    staged: &Staged,
    bundles: InstalledBundles,
    mirrors: Vec<ImportedMirror>,
) -> Result<ImportRows, ArchiveError> {
    let slice = &staged.slice;
    let instances = slice
        .instances
        .iter()
        .map(|v| Instance::from_value(v.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ArchiveError::Refused {
            file: root.to_path_buf(),
            detail: e.to_string(),
        })?;
    Ok(ImportRows {
        instances,
        bundles: bundles.rows,
        packs: bundles.packs,
        objects: slice
            .objects
            .iter()
            .map(|o| (o.id, o.size, o.kind.clone()))
            .collect(),
        locks: slice.locks.iter().map(LockRow::from).collect(),
        validations: slice.validations.iter().map(ValidationRow::from).collect(),
        mirrors,
        pins: slice.pins.iter().map(PinRow::from).collect(),
        installed_states: Vec::new(),
    })
}

/// What the import did, from what was staged and what was recorded.
fn report(
    staged: &Staged,
    rows: &ImportRows,
    objects_added: usize,
    bundles_added: usize,
) -> ImportReport {
    let carried: BTreeSet<&str> = staged
        .incoming
        .iter()
        .flat_map(|i| i.packs())
        .map(|p| p.name.as_str())
        .collect();
    let packs_moved = rows
        .packs
        .iter()
        .filter(|p| carried.contains(p.name.as_str()))
        .count();
    let packs_cut = rows.packs.len() - packs_moved;
    ImportReport {
        release: staged.snapshot.name.clone(),
        root: staged.snapshot.root,
        version: staged.version,
        base: staged.base.clone(),
        instances: staged.snapshot.instances.len(),
        packs_moved,
        packs_cut,
        packs_present: carried.len() - rows.packs.len(),
        bundles_added,
        bundles_present: staged.bundles.len() - bundles_added,
        objects_added,
        objects_present: staged.objects.len() - objects_added,
        mirrors: staged.mirrors.keys().map(|m| m.to_string()).collect(),
        installed_states_added: rows.installed_states.len(),
        installed_states_present: staged.slice.installed_states.len() - rows.installed_states.len(),
        bytes: staged.bytes,
    }
}
