//! What the file says checked against itself and the archive it goes into: the snapshot, the
//! release's bundles, the locks' objects, a shard file's plan, an incremental file's base.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::archive::{ArchiveError, ArchiveManifest, BaseRelease, MANIFEST, RELEASE, ShardStamp};
use crate::digest::Sha256Digest;
use crate::release::Snapshot;
use crate::store::Ark;

use super::{BundleCheck, ImportOptions, refused};

/// The snapshot, which must hash to its root, be the release the manifest names, and have
/// the expected root if one is given.
pub(super) fn read_snapshot(
    file: &Path,
    bytes: &[u8],
    manifest: &ArchiveManifest,
    opts: &ImportOptions,
) -> Result<Snapshot, ArchiveError> {
    let refuse = |detail: String| refused(file, detail);
    let parsed = if manifest.shard.is_some() {
        Snapshot::parse_of_shard(bytes)
    } else {
        Snapshot::parse(bytes)
    };
    let snapshot = parsed.map_err(|e| refuse(format!("{RELEASE}: {e}")))?;
    let computed = snapshot.computed_root();
    if computed != snapshot.root {
        return Err(refuse(format!(
            "{RELEASE} states root {} but its instances hash to {computed}",
            snapshot.root
        )));
    }
    if manifest.root != snapshot.root || manifest.release != snapshot.name {
        return Err(refuse(format!(
            "{MANIFEST} names release {} with root {}, {RELEASE} release {} with root {}",
            manifest.release, manifest.root, snapshot.name, snapshot.root
        )));
    }
    if let Some(expected) = opts.expect_root
        && expected != snapshot.root
    {
        return Err(refuse(format!(
            "it holds release {} with root {}, not the expected {expected}",
            snapshot.name, snapshot.root
        )));
    }
    Ok(snapshot)
}

/// The release's bundles, each staged and of its instance, and no other.
#[allow(clippy::type_complexity)]
pub(super) fn release_bundles(
    file: &Path,
    snapshot: &Snapshot,
    mut bundle_files: BTreeMap<Sha256Digest, PathBuf>,
    mut bundle_checks: BTreeMap<Sha256Digest, BundleCheck>,
) -> Result<
    (
        BTreeMap<Sha256Digest, PathBuf>,
        BTreeMap<Sha256Digest, BundleCheck>,
    ),
    ArchiveError,
> {
    let refuse = |detail: String| refused(file, detail);
    let mut files = BTreeMap::new();
    let mut checks = BTreeMap::new();
    for inst in &snapshot.instances {
        let (Some(path), Some(check)) = (
            bundle_files.remove(&inst.bundle),
            bundle_checks.remove(&inst.bundle),
        ) else {
            return Err(refuse(format!(
                "bundle {} of instance {} is not in the file",
                inst.bundle, inst.instance_id
            )));
        };
        if check.manifest.instance_id != inst.instance_id {
            return Err(refuse(format!(
                "bundle {} is of instance {}, the release says {}",
                inst.bundle, check.manifest.instance_id, inst.instance_id
            )));
        }
        files.insert(inst.bundle, path);
        checks.insert(inst.bundle, check);
    }
    if let Some(extra) = bundle_files.keys().next() {
        return Err(refuse(format!(
            "bundle {extra} is in the file but not in the release"
        )));
    }
    Ok((files, checks))
}

/// Each lock's needs must be here, and be what the release lists.
pub(super) fn check_locks(
    file: &Path,
    snapshot: &Snapshot,
    bundles: &BTreeMap<Sha256Digest, BundleCheck>,
    objects: &BTreeMap<Sha256Digest, (PathBuf, u64)>,
    held: &dyn Fn(&Sha256Digest) -> bool,
) -> Result<(), ArchiveError> {
    let refuse = |detail: String| refused(file, detail);
    for inst in &snapshot.instances {
        let Some(check) = bundles.get(&inst.bundle) else {
            continue;
        };
        let Some((kind, lock)) = &check.lock else {
            if !inst.objects.is_empty() {
                return Err(refuse(format!(
                    "the release lists objects for {}, whose bundle holds no lock",
                    inst.instance_id
                )));
            }
            continue;
        };
        let needs = kind
            .read_lock(Sha256Digest::of(lock), lock)
            .map_err(|e| {
                refuse(format!(
                    "the lock of {} is not valid: {e}",
                    inst.instance_id
                ))
            })?
            .objects();
        let needed: BTreeSet<Sha256Digest> = needs.iter().map(|n| n.id).collect();
        let listed: BTreeSet<Sha256Digest> = inst.objects.iter().copied().collect();
        if needed != listed {
            return Err(refuse(format!(
                "the lock of {} needs {} object(s), the release lists {}",
                inst.instance_id,
                needed.len(),
                listed.len()
            )));
        }
        if let Some(o) = needed.iter().find(|o| !objects.contains_key(o) && !held(o)) {
            return Err(refuse(format!(
                "object {o}, which the lock of {} needs, is neither in the file nor in this \
                 archive",
                inst.instance_id
            )));
        }
    }
    Ok(())
}

/// A shard file only where one of that plan is wanted (merge), and only a shard file there.
pub(super) fn check_shard_wanted(
    file: &Path,
    stamp: Option<&ShardStamp>,
    wanted: Option<Sha256Digest>,
) -> Result<(), ArchiveError> {
    match (stamp, wanted) {
        (None, None) => Ok(()),
        (Some(s), None) => Err(refused(
            file,
            format!(
                "it is a shard file (shard {} of {} of plan {}): `swe-ark merge` takes it",
                s.index, s.shards, s.plan
            ),
        )),
        (None, Some(_)) => Err(refused(
            file,
            "it is a release file, not a shard file (`swe-ark import-archive` takes it)".into(),
        )),
        (Some(s), Some(plan)) if s.plan != plan => Err(refused(
            file,
            format!(
                "it is shard {} of plan {}, not of plan {plan}",
                s.index, s.plan
            ),
        )),
        (Some(_), Some(_)) => Ok(()),
    }
}

/// An incremental file's base release must be registered here (its import put it there).
pub(super) fn check_base(
    file: &Path,
    receiver: Option<&Ark>,
    base: &BaseRelease,
) -> Result<(), ArchiveError> {
    let registered = match receiver {
        Some(ark) => crate::store::release_names(ark.root())?
            .into_keys()
            .filter_map(|name| {
                let snap = Snapshot::read(&ark.releases_dir().join(format!("{name}.json"))).ok()?;
                (snap.root == base.root).then_some(name)
            })
            .next(),
        None => None,
    };
    if registered.is_none() {
        return Err(refused(
            file,
            format!(
                "it is incremental: it holds only what an archive that imported release {} \
                 (root {}) lacks, and this archive has no release with that root; import {}'s \
                 file first",
                base.release, base.root, base.release
            ),
        ));
    }
    Ok(())
}

/// Every release instance's bundle is in the file and of that instance, or (in an incremental
/// file) held here already; the file carries no other bundle.
pub(super) fn check_carried(
    file: &Path,
    snapshot: &Snapshot,
    bundles: &BTreeMap<Sha256Digest, BundleCheck>,
    receiver: Option<&Ark>,
    manifest: &ArchiveManifest,
) -> Result<(), ArchiveError> {
    let refuse = |detail: String| refused(file, detail);
    let mut release_bundles = BTreeSet::new();
    for inst in &snapshot.instances {
        release_bundles.insert(inst.bundle);
        if let Some(check) = bundles.get(&inst.bundle) {
            if check.manifest.instance_id != inst.instance_id {
                return Err(refuse(format!(
                    "bundle {} is of instance {}, the release says {}",
                    inst.bundle, check.manifest.instance_id, inst.instance_id
                )));
            }
            continue;
        }
        let here = match (receiver, &manifest.base) {
            (Some(ark), Some(_)) => ark
                .index()
                .bundles_with_prefix(&inst.bundle.hex())?
                .iter()
                .any(|b| b.id == inst.bundle),
            _ => false,
        };
        if !here {
            return Err(refuse(format!(
                "bundle {} of instance {} is neither in the file nor in this archive",
                inst.bundle, inst.instance_id
            )));
        }
    }
    if let Some(extra) = bundles.keys().find(|b| !release_bundles.contains(b)) {
        return Err(refuse(format!(
            "bundle {extra} is in the file but not in the release"
        )));
    }
    Ok(())
}
