//! The index slice (`index.json`) checked against the release: exactly its bundles,
//! instances and objects, as the bundles themselves say, and installed states of its
//! instances only.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::archive::INDEX;
use crate::archive::slice::IndexSlice;
use crate::dataset::{Instance, InstanceError};
use crate::digest::Sha256Digest;
use crate::release::Snapshot;

use super::BundleCheck;

/// How the index slice fails to describe the release's bundles, instances and objects.
#[derive(Debug, thiserror::Error)]
pub(super) enum SliceMismatch {
    #[error("{INDEX} lists an object twice")]
    ObjectTwice,
    #[error("{INDEX} says object {id} is {listed} bytes; it is {size}")]
    ObjectSize {
        id: Sha256Digest,
        listed: u64,
        size: u64,
    },
    #[error("{INDEX} does not list object {0}")]
    ObjectUnlisted(Sha256Digest),
    #[error("{INDEX} lists object {0}, which the file does not hold")]
    ObjectMissing(Sha256Digest),
    #[error("object {0}, which the release lists, is neither in the file nor in this archive")]
    ReleaseObjectMissing(Sha256Digest),
    #[error("{INDEX} lists {listed} bundle(s), the release has {release}")]
    BundleCount { listed: usize, release: usize },
    #[error("{INDEX} lists bundle {0}, which is not in the release")]
    BundleNotInRelease(Sha256Digest),
    #[error("{INDEX}'s row of bundle {0} does not match the bundle")]
    BundleRow(Sha256Digest),
    #[error("{INDEX} holds an instance that is not valid: {0}")]
    BadInstance(#[source] InstanceError),
    #[error("{INDEX} holds instance {0}, which is not in the release")]
    InstanceNotInRelease(String),
    #[error("{INDEX} holds instance {0} twice")]
    InstanceTwice(String),
    #[error("{INDEX}'s instance {0} is not the one its bundle holds")]
    InstanceDiffers(String),
    #[error("{INDEX} holds {held} of the {release} instances whose bundles the file carries")]
    InstanceCount { held: usize, release: usize },
    #[error("{INDEX} lists lock {0}, whose file is not in the archive file")]
    LockMissing(Sha256Digest),
    #[error("{INDEX} holds a validation of {0}, which is not in the release")]
    ValidationNotInRelease(String),
    #[error("the validation of {instance} names object {object}, which the file does not hold")]
    ValidationObjectMissing {
        instance: String,
        object: Sha256Digest,
    },
    #[error("{INDEX} holds pin {reference} of mirror {mirror}, which the file does not carry")]
    PinNotCarried { reference: String, mirror: String },
    #[error("{INDEX} holds installed state {0} twice")]
    StateTwice(Sha256Digest),
    #[error("installed state {key} names object {object}, which the file does not hold")]
    StateObjectMissing {
        key: Sha256Digest,
        object: Sha256Digest,
    },
    #[error(
        "installed state {key} is of lock {lock} at commit {base_commit}, which no instance the \
         file carries has"
    )]
    StateNotCarried {
        key: Sha256Digest,
        lock: String,
        base_commit: String,
    },
}

/// The slice's objects: exactly those in the file, each once, sizes as staged.
fn check_slice_objects(
    snapshot: &Snapshot,
    slice: &IndexSlice,
    objects: &BTreeMap<Sha256Digest, (PathBuf, u64)>,
    held: &dyn Fn(&Sha256Digest) -> bool,
) -> Result<(), SliceMismatch> {
    let listed: BTreeMap<Sha256Digest, u64> =
        slice.objects.iter().map(|o| (o.id, o.size)).collect();
    if listed.len() != slice.objects.len() {
        return Err(SliceMismatch::ObjectTwice);
    }
    for (id, (_, size)) in objects {
        match listed.get(id) {
            Some(s) if s == size => {}
            Some(s) => {
                return Err(SliceMismatch::ObjectSize {
                    id: *id,
                    listed: *s,
                    size: *size,
                });
            }
            None => return Err(SliceMismatch::ObjectUnlisted(*id)),
        }
    }
    if let Some(id) = listed.keys().find(|id| !objects.contains_key(id)) {
        return Err(SliceMismatch::ObjectMissing(*id));
    }
    for o in snapshot.objects() {
        if !objects.contains_key(&o) && !held(&o) {
            return Err(SliceMismatch::ReleaseObjectMissing(o));
        }
    }
    Ok(())
}

/// The slice's bundles: one row per release bundle, as the bundle itself says.
fn check_slice_bundles(
    slice: &IndexSlice,
    bundles: &BTreeMap<Sha256Digest, BundleCheck>,
) -> Result<(), SliceMismatch> {
    if slice.bundles.len() != bundles.len() {
        return Err(SliceMismatch::BundleCount {
            listed: slice.bundles.len(),
            release: bundles.len(),
        });
    }
    for b in &slice.bundles {
        let Some(c) = bundles.get(&b.id) else {
            return Err(SliceMismatch::BundleNotInRelease(b.id));
        };
        let codebase_files = c.manifest.codebase_members().count() as u64;
        let ok = b.instance_id == c.manifest.instance_id
            && b.format_version == c.manifest.version
            && b.codebase_tree == c.manifest.codebase_tree
            && b.tar_size == c.tar_size
            && b.file_size == c.file_size
            && b.member_count == c.manifest.members.len() as u64 + 1
            && b.codebase_files == codebase_files;
        if !ok {
            return Err(SliceMismatch::BundleRow(b.id));
        }
    }
    Ok(())
}

/// The slice's installed states: each once, its object in the file, made at the lock and base
/// commit of an instance whose bundle the file carries (as the bundle and the slice's
/// instance, checked before, say).
fn check_slice_states(
    slice: &IndexSlice,
    bundles: &BTreeMap<Sha256Digest, BundleCheck>,
    objects: &BTreeMap<Sha256Digest, (PathBuf, u64)>,
) -> Result<(), SliceMismatch> {
    let base_of: BTreeMap<&str, &str> = slice
        .instances
        .iter()
        .filter_map(|v| {
            let id = v.get("instance_id")?.as_str()?;
            Some((id, v.get("base_commit")?.as_str()?))
        })
        .collect();
    let carried: BTreeSet<(String, &str)> = bundles
        .values()
        .filter_map(|c| {
            let (_, lock) = c.lock.as_ref()?;
            let base = base_of.get(c.manifest.instance_id.as_str())?;
            Some((Sha256Digest::of(lock).hex(), *base))
        })
        .collect();
    let mut keys = BTreeSet::new();
    for s in &slice.installed_states {
        if !keys.insert(s.key) {
            return Err(SliceMismatch::StateTwice(s.key));
        }
        if !objects.contains_key(&s.object) {
            return Err(SliceMismatch::StateObjectMissing {
                key: s.key,
                object: s.object,
            });
        }
        if !carried.contains(&(s.lock_id.clone(), s.base_commit.as_str())) {
            return Err(SliceMismatch::StateNotCarried {
                key: s.key,
                lock: s.lock_id.clone(),
                base_commit: s.base_commit.clone(),
            });
        }
    }
    Ok(())
}

/// The index slice must describe exactly the release's bundles, instances and objects.
pub(super) fn check_slice(
    snapshot: &Snapshot,
    slice: &IndexSlice,
    bundles: &BTreeMap<Sha256Digest, BundleCheck>,
    objects: &BTreeMap<Sha256Digest, (PathBuf, u64)>,
    held: &dyn Fn(&Sha256Digest) -> bool,
    others: &BTreeSet<&str>,
) -> Result<(), SliceMismatch> {
    let ids: BTreeSet<&str> = snapshot
        .instances
        .iter()
        .map(|i| i.instance_id.as_str())
        .collect();
    let mut released = 0;
    // The instances whose bundle the file carries (all of them, unless it is incremental).
    let carried = snapshot
        .instances
        .iter()
        .filter(|i| bundles.contains_key(&i.bundle))
        .count();
    check_slice_objects(snapshot, slice, objects, held)?;
    check_slice_bundles(slice, bundles)?;
    // Instances: each release instance once, as its bundle's instance.json holds it (and a
    // shard file's others, which the shard's checks take).
    let mut seen = BTreeSet::new();
    for v in &slice.instances {
        let inst = Instance::from_value(v.clone()).map_err(SliceMismatch::BadInstance)?;
        if others.contains(inst.instance_id.as_str()) {
            if !seen.insert(inst.instance_id.clone()) {
                return Err(SliceMismatch::InstanceTwice(inst.instance_id));
            }
            continue;
        }
        released += 1;
        let Some(ri) = snapshot
            .instances
            .iter()
            .find(|i| i.instance_id == inst.instance_id)
        else {
            return Err(SliceMismatch::InstanceNotInRelease(inst.instance_id));
        };
        if !seen.insert(inst.instance_id.clone()) {
            return Err(SliceMismatch::InstanceTwice(inst.instance_id));
        }
        let want = bundles
            .get(&ri.bundle)
            .and_then(|c| c.manifest.member("instance.json"))
            .map(|m| m.sha256);
        if want != Some(Sha256Digest::of(&inst.to_canonical_json())) {
            return Err(SliceMismatch::InstanceDiffers(inst.instance_id));
        }
    }
    if released != carried {
        return Err(SliceMismatch::InstanceCount {
            held: released,
            release: carried,
        });
    }
    // Locks and validations name objects in the file and instances of the release.
    for l in &slice.locks {
        if !objects.contains_key(&l.id) {
            return Err(SliceMismatch::LockMissing(l.id));
        }
    }
    for v in &slice.validations {
        if !ids.contains(v.instance_id.as_str()) && !others.contains(v.instance_id.as_str()) {
            return Err(SliceMismatch::ValidationNotInRelease(v.instance_id.clone()));
        }
        for o in [Some(v.results), v.log_pre, v.log_post]
            .into_iter()
            .flatten()
        {
            if !objects.contains_key(&o) {
                return Err(SliceMismatch::ValidationObjectMissing {
                    instance: v.instance_id.clone(),
                    object: o,
                });
            }
        }
    }
    let mirrors: BTreeSet<&str> = slice.mirrors.iter().map(|m| m.name.as_str()).collect();
    for p in &slice.pins {
        if !mirrors.contains(p.mirror.as_str()) || !ids.contains(p.instance_id.as_str()) {
            return Err(SliceMismatch::PinNotCarried {
                reference: p.reference.clone(),
                mirror: p.mirror.clone(),
            });
        }
    }
    check_slice_states(slice, bundles, objects)
}
