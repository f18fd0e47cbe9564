//! Checking an archive against a release snapshot: every bundle re-read and re-hashed, every
//! lock's needs recomputed, every object re-hashed, and the root hash recomputed from what
//! the archive holds.

use std::collections::{BTreeMap, BTreeSet};

use crate::bundle::{self, Limits};
use crate::digest::Sha256Digest;
use crate::progress::Progress;
use crate::store::{Ark, Checked, ObjectError};

use super::create::{LockReader, lock_needs, newest_bundles};
use super::{ReleaseError, ReleaseInstance, Snapshot, root_of};

/// What the bundles' checks gather for the objects' and the root's.
#[derive(Default)]
struct Tally {
    /// Object id → (the size a lock states, the instances that need it).
    wanted: BTreeMap<Sha256Digest, (Option<u64>, Vec<String>)>,
    /// The release's instances as the archive gives them.
    recomputed: Vec<ReleaseInstance>,
    /// Bundles that could not be read whole (the root is not recomputed then).
    unreadable: usize,
}

/// Checks `ark` against `snap`; each problem names the bundle or object and what is wrong.
pub fn verify(
    ark: &Ark,
    snap: &Snapshot,
    progress: &dyn Progress,
) -> Result<Vec<Checked>, ReleaseError> {
    let mut checks = vec![check_snapshot_file(snap)];
    let newest = newest_bundles(ark)?;
    let mut locks = LockReader::new(ark);
    let mut tally = Tally::default();
    for inst in &snap.instances {
        let (mut problems, readable) = check_bundle(ark, inst, &newest, progress)?;
        let listed: BTreeSet<Sha256Digest> = inst.objects.iter().copied().collect();
        for o in &listed {
            tally
                .wanted
                .entry(*o)
                .or_default()
                .1
                .push(inst.instance_id.clone());
        }
        if readable {
            check_lock_needs(&mut locks, inst, &listed, &mut tally, &mut problems);
        } else {
            tally.unreadable += 1;
        }
        checks.push(Checked::new(
            "bundle",
            format!("{} {}", inst.instance_id, inst.bundle),
            problems,
        ));
    }
    checks.extend(check_objects(ark, &tally));
    checks.push(check_root(snap, &tally));
    Ok(checks)
}

/// The snapshot file: its stated root is its instances'.
fn check_snapshot_file(snap: &Snapshot) -> Checked {
    let computed = snap.computed_root();
    Checked::new(
        "snapshot",
        snap.name.clone(),
        if computed == snap.root {
            Vec::new()
        } else {
            vec![format!(
                "it states root {} but its instances hash to {computed}: the file was changed \
                 after it was made",
                snap.root
            )]
        },
    )
}

/// One instance's bundle: listed by the index as the release's instance's, and read whole
/// against its id. Returns the problems and whether it read whole.
fn check_bundle(
    ark: &Ark,
    inst: &ReleaseInstance,
    newest: &BTreeMap<String, crate::store::BundleRow>,
    progress: &dyn Progress,
) -> Result<(Vec<String>, bool), ReleaseError> {
    let id = &inst.instance_id;
    let mut problems = Vec::new();
    let row = ark
        .index()
        .bundles_with_prefix(&inst.bundle.hex())?
        .into_iter()
        .find(|b| b.id == inst.bundle);
    match &row {
        None => problems.push(match newest.get(id) {
            Some(other) => format!(
                "the index does not list this bundle (its newest bundle of {id} is {})",
                other.id
            ),
            None => format!("the index has no bundle of {id}"),
        }),
        Some(r) if &r.instance_id != id => problems.push(format!(
            "the index says this bundle is of instance {}, not {id}",
            r.instance_id
        )),
        Some(_) => {}
    }
    let mut readable = false;
    match row.as_ref().map(|r| ark.bundle(r)) {
        // The index does not list it: said above.
        None => {}
        Some(Err(e)) => problems.push(format!("the bundle cannot be read: {e}")),
        Some(Ok(source)) => {
            match bundle::verify(&source, Some(inst.bundle), &Limits::default(), progress) {
                Ok(report) => {
                    problems.extend(report.problems.iter().map(|p| p.to_string()));
                    if &report.manifest.instance_id != id {
                        problems.push(format!(
                            "bundle.json names instance {}, the release {id}",
                            report.manifest.instance_id
                        ));
                    }
                    readable = report.problems.is_empty();
                }
                Err(e) => problems.push(e.to_string()),
            }
        }
    }
    Ok((problems, readable))
}

/// The objects the bundle's lock needs against those the release lists for it.
fn check_lock_needs(
    locks: &mut LockReader,
    inst: &ReleaseInstance,
    listed: &BTreeSet<Sha256Digest>,
    tally: &mut Tally,
    problems: &mut Vec<String>,
) {
    let id = &inst.instance_id;
    let needs = match locks.lock_of_bundle(&inst.bundle) {
        Ok(Some(lock)) => lock_needs(id, &inst.bundle, &lock),
        Ok(None) => Ok(Vec::new()),
        Err(e) => Err(e),
    };
    let needs = match needs {
        Ok(needs) => needs,
        Err(e) => {
            tally.unreadable += 1;
            problems.push(e.to_string());
            return;
        }
    };
    let needed: BTreeSet<Sha256Digest> = needs.iter().map(|n| n.id).collect();
    for o in needed.difference(listed) {
        problems.push(format!(
            "its lock needs object {o}, which the release does not list"
        ));
    }
    for o in listed.difference(&needed) {
        problems.push(format!(
            "the release lists object {o}, which its lock does not need"
        ));
    }
    for n in &needs {
        let (o, size) = (&n.id, &n.size);
        let entry = tally.wanted.entry(*o).or_default();
        entry.0 = Some(*size);
        if !entry.1.contains(id) {
            entry.1.push(id.clone());
        }
    }
    tally.recomputed.push(ReleaseInstance {
        instance_id: id.clone(),
        bundle: inst.bundle,
        objects: needed.into_iter().collect(),
    });
}

/// Every object the release or a lock names: present, re-hashed, of the size the lock says.
fn check_objects(ark: &Ark, tally: &Tally) -> Vec<Checked> {
    let store = ark.objects();
    let mut checks = Vec::new();
    for (o, (size, users)) in &tally.wanted {
        let mut problems = Vec::new();
        match store.check(o) {
            Ok(actual) => {
                if let Some(size) = size
                    && *size != actual
                {
                    problems.push(format!("{actual} bytes, the lock says {size}"));
                }
            }
            Err(ObjectError::Missing(_)) => problems.push(format!(
                "missing from the archive (needed by {})",
                users.join(", ")
            )),
            Err(e) => problems.push(e.to_string()),
        }
        checks.push(Checked::new("object", o.hex(), problems));
    }
    checks
}

/// The root recomputed from what the archive holds.
fn check_root(snap: &Snapshot, tally: &Tally) -> Checked {
    let problems = if tally.unreadable > 0 {
        vec![format!(
            "not recomputed: {} bundle(s) could not be read whole (above)",
            tally.unreadable
        )]
    } else {
        let root = root_of(&tally.recomputed);
        if root == snap.root {
            Vec::new()
        } else {
            vec![format!(
                "the archive gives root {root}, the snapshot states {}",
                snap.root
            )]
        }
    };
    Checked::new("root", snap.root.hex(), problems)
}
