//! Checking an archive against a release snapshot: every bundle re-read and re-hashed, every
//! lock's needs recomputed, every object re-hashed, and the root hash recomputed from what
//! the archive holds.

use std::collections::{BTreeMap, BTreeSet};

use crate::bundle::{self, Limits};
use crate::digest::Sha256Digest;
use crate::progress::Progress;
use crate::store::{Ark, BundleRow, ObjectError, ObjectStore};

use super::create::{LockReader, lock_needs, newest_bundles};
use super::{ReleaseError, ReleaseInstance, Snapshot, root_of};

/// One thing checked: the snapshot file itself, a bundle, an object, or the root.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Check {
    /// `snapshot`, `bundle`, `object` or `root`.
    pub what: &'static str,
    pub name: String,
    pub ok: bool,
    pub problems: Vec<String>,
}

impl Check {
    fn new(what: &'static str, name: String, problems: Vec<String>) -> Check {
        Check {
            what,
            name,
            ok: problems.is_empty(),
            problems,
        }
    }
}

/// The instance's bundle: listed in the index as of the instance, read whole and checked
/// against its id and bundle.json. Adds what is wrong to `problems`; says whether the bundle
/// read whole.
fn check_bundle(
    ark: &Ark,
    inst: &ReleaseInstance,
    newest: &BTreeMap<String, BundleRow>,
    problems: &mut Vec<String>,
    progress: &dyn Progress,
) -> Result<bool, ReleaseError> {
    let id = &inst.instance_id;
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
    Ok(readable)
}

/// Each object the release needs: in the store, whole, of the size its lock states.
fn check_objects(
    store: &ObjectStore,
    wanted: &BTreeMap<Sha256Digest, (Option<u64>, Vec<String>)>,
) -> Vec<Check> {
    let mut checks = Vec::new();
    for (o, (size, users)) in wanted {
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
        checks.push(Check::new("object", o.hex(), problems));
    }
    checks
}

/// Checks `ark` against `snap`; each problem names the bundle or object and what is wrong.
pub fn verify(
    ark: &Ark,
    snap: &Snapshot,
    progress: &dyn Progress,
) -> Result<Vec<Check>, ReleaseError> {
    let mut checks = Vec::new();
    let computed = snap.computed_root();
    checks.push(Check::new(
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
    ));
    let newest = newest_bundles(ark)?;
    let mut locks = LockReader::new(ark);
    // Object id → (the size a lock states, the instances that need it).
    let mut wanted: BTreeMap<Sha256Digest, (Option<u64>, Vec<String>)> = BTreeMap::new();
    let mut recomputed = Vec::new();
    let mut unreadable = 0usize;
    for inst in &snap.instances {
        let id = &inst.instance_id;
        let mut problems = Vec::new();
        let readable = check_bundle(ark, inst, &newest, &mut problems, progress)?;
        let listed: BTreeSet<Sha256Digest> = inst.objects.iter().copied().collect();
        for o in &listed {
            wanted.entry(*o).or_default().1.push(id.clone());
        }
        if !readable {
            unreadable += 1;
            checks.push(Check::new(
                "bundle",
                format!("{id} {}", inst.bundle),
                problems,
            ));
            continue;
        }
        let needs = match locks.lock_of_bundle(&inst.bundle) {
            Ok(Some((_, lock))) => lock_needs(id, &inst.bundle, &lock),
            Ok(None) => Ok(Vec::new()),
            Err(e) => Err(e),
        };
        match needs {
            Ok(needs) => {
                let needed: BTreeSet<Sha256Digest> = needs.iter().map(|n| n.0).collect();
                for o in needed.difference(&listed) {
                    problems.push(format!(
                        "its lock needs object {o}, which the release does not list"
                    ));
                }
                for o in listed.difference(&needed) {
                    problems.push(format!(
                        "the release lists object {o}, which its lock does not need"
                    ));
                }
                for (o, size, _) in &needs {
                    let entry = wanted.entry(*o).or_default();
                    entry.0 = Some(*size);
                    if !entry.1.contains(id) {
                        entry.1.push(id.clone());
                    }
                }
                recomputed.push(ReleaseInstance {
                    instance_id: id.clone(),
                    bundle: inst.bundle,
                    objects: needed.into_iter().collect(),
                });
            }
            Err(e) => {
                unreadable += 1;
                problems.push(e.to_string());
            }
        }
        checks.push(Check::new(
            "bundle",
            format!("{id} {}", inst.bundle),
            problems,
        ));
    }
    checks.extend(check_objects(&ark.objects(), &wanted));
    let root_problems = if unreadable > 0 {
        vec![format!(
            "not recomputed: {unreadable} bundle(s) could not be read whole (above)"
        )]
    } else {
        let root = root_of(&recomputed);
        if root == snap.root {
            Vec::new()
        } else {
            vec![format!(
                "the archive gives root {root}, the snapshot states {}",
                snap.root
            )]
        }
    };
    checks.push(Check::new("root", snap.root.hex(), root_problems));
    Ok(checks)
}
