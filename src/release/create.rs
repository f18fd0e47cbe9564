//! Making a release snapshot from an archive: which instances, their newest bundles, and the
//! objects each bundle's lock needs.

use std::collections::BTreeMap;

use crate::bundle;
use crate::context::{self, Kind, Lock, NeededObject};
use crate::digest::Sha256Digest;
use crate::store::{Ark, BundleRow};

use super::{ReleaseError, ReleaseInstance, Snapshot};

/// Which instances a release holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Every instance that has a bundle.
    Bundled,
    /// Every instance that validation kept (each must have a bundle).
    AllValidated,
    /// These instances (each must have a bundle).
    Ids(Vec<String>),
}

/// Reads the locks bundles hold, each lock once: many instances share one.
pub struct LockReader<'a> {
    ark: &'a Ark,
    seen: BTreeMap<Sha256Digest, Vec<u8>>,
}

impl<'a> LockReader<'a> {
    pub fn new(ark: &'a Ark) -> Self {
        LockReader {
            ark,
            seen: BTreeMap::new(),
        }
    }

    /// The lock bundle `id` holds (its kind's lock member, `env/pylock.toml` for Python):
    /// its id and bytes, from the object store when the archive keeps it there (as `env lock`
    /// does), else read out of the bundle, and its kind. `None` for a bundle packed without a
    /// lock.
    pub fn lock_of_bundle(
        &mut self,
        id: &Sha256Digest,
    ) -> Result<Option<BundleLock>, ReleaseError> {
        let row = self.ark.resolve(&id.hex())?;
        let manifest = self.ark.bundle_manifest(&row)?;
        let Some((kind, member)) =
            context::kinds().find_map(|k| manifest.member(k.lock_member()).map(|m| (k, m)))
        else {
            return Ok(None);
        };
        let lock_id = member.sha256;
        if let Some(bytes) = self.seen.get(&lock_id) {
            return Ok(Some(BundleLock {
                id: lock_id,
                bytes: bytes.clone(),
                kind,
            }));
        }
        let objects = self.ark.objects();
        let bytes = if objects.has(&lock_id) {
            objects.get(&lock_id)?
        } else {
            let source = self.ark.bundle(&row)?;
            let mut members = bundle::read_fixed_members(&source, Some(*id))?;
            match members.files.remove(kind.lock_member()) {
                Some(bytes) => bytes,
                None => return Ok(None),
            }
        };
        self.seen.insert(lock_id, bytes.clone());
        Ok(Some(BundleLock {
            id: lock_id,
            bytes,
            kind,
        }))
    }
}

/// A bundle's lock, as its bundle holds it.
pub struct BundleLock {
    pub id: Sha256Digest,
    pub bytes: Vec<u8>,
    pub kind: &'static dyn Kind,
}

impl BundleLock {
    /// The lock read by its kind; an error names the instance and bundle it came from.
    pub fn read(
        &self,
        instance: &str,
        bundle: &Sha256Digest,
    ) -> Result<Box<dyn Lock>, ReleaseError> {
        self.kind
            .read_lock(self.id, &self.bytes)
            .map_err(|e| ReleaseError::BadLock {
                instance: instance.to_string(),
                bundle: *bundle,
                detail: e.to_string(),
            })
    }
}

/// What an offline build of the lock reads, sorted by id.
pub(crate) fn lock_needs(
    instance: &str,
    bundle: &Sha256Digest,
    lock: &BundleLock,
) -> Result<Vec<NeededObject>, ReleaseError> {
    Ok(lock.read(instance, bundle)?.objects())
}

/// The newest bundle of each instance.
pub(crate) fn newest_bundles(ark: &Ark) -> Result<BTreeMap<String, BundleRow>, ReleaseError> {
    let mut out = BTreeMap::new();
    // Newest first within an instance.
    for b in ark.index().bundles()? {
        out.entry(b.instance_id.clone()).or_insert(b);
    }
    Ok(out)
}

/// A snapshot of the selected instances as the archive holds them now.
pub fn create(ark: &Ark, name: &str, selection: &Selection) -> Result<Snapshot, ReleaseError> {
    if !super::valid_name(name) {
        return Err(ReleaseError::BadName(name.to_string()));
    }
    let newest = newest_bundles(ark)?;
    let ids: Vec<String> = match selection {
        Selection::Bundled => newest.keys().cloned().collect(),
        Selection::AllValidated => ark
            .index()
            .validations()?
            .into_iter()
            .filter(|v| v.verdict == crate::verdict::Verdict::Kept)
            .map(|v| v.instance_id)
            .collect(),
        Selection::Ids(ids) => {
            let mut ids = ids.clone();
            ids.sort();
            ids.dedup();
            ids
        }
    };
    if ids.is_empty() {
        return Err(ReleaseError::Selection(match selection {
            Selection::AllValidated => {
                "no instance was kept by validation (run `swe-ark validate`)".into()
            }
            _ => "the archive holds no bundle to release (pack instances first)".into(),
        }));
    }
    let unbundled: Vec<&str> = ids
        .iter()
        .filter(|i| !newest.contains_key(*i))
        .map(String::as_str)
        .collect();
    if !unbundled.is_empty() {
        return Err(ReleaseError::Selection(format!(
            "{} instance(s) have no bundle: {} (pack them with `swe-ark pack --instance-ids {}`)",
            unbundled.len(),
            unbundled.join(", "),
            unbundled.join(",")
        )));
    }
    let store = ark.objects();
    let mut locks = LockReader::new(ark);
    let mut instances = Vec::new();
    let mut missing = Vec::new();
    for id in &ids {
        let row = &newest[id];
        if let Err(e) = ark.bundle(row) {
            missing.push(format!("the bundle of {id} cannot be read: {e}"));
            continue;
        }
        let objects = match locks.lock_of_bundle(&row.id)? {
            Some(lock) => lock_needs(id, &row.id, &lock)?
                .into_iter()
                .map(|o| o.id)
                .collect(),
            None => Vec::new(),
        };
        for o in &objects {
            if !store.has(o) {
                missing.push(format!("object {o}, which the lock of {id} needs"));
            }
        }
        instances.push(ReleaseInstance {
            instance_id: id.clone(),
            bundle: row.id,
            objects,
        });
    }
    if !missing.is_empty() {
        return Err(ReleaseError::Selection(format!(
            "the archive lacks what the release needs:\n  {}",
            missing.join("\n  ")
        )));
    }
    Snapshot::new(name, &instances)
}
