//! What the lock documents of the Rust, node and native kinds share: each is read back as a
//! [`Lock`] the same way, and recorded in the archive's index the same way. A kind's document
//! says only what differs (its runtime, its packages, what a machine must still have, how its
//! environment is built).

use std::path::Path;

use super::{Built, ContextError, Lock, NeededObject};
use crate::digest::Sha256Digest;
use crate::manifest::Context;
use crate::store::{Ark, ObjectStore};

/// A kind's lock document, as its `*-lock.toml` holds it.
pub trait LockDocument: Send + Sync {
    /// The toolchain it runs with, as results and the index record it (`rustc 1.95.0`).
    fn runtime(&self) -> String;
    /// The base commits it covers, newest first.
    fn commits(&self) -> &[String];
    /// Every object it names, each once, in the order of their ids.
    fn objects(&self) -> Vec<(Sha256Digest, u64, &'static str)>;
    /// How many packages it pins (crates, tarballs, Debian packages).
    fn packages(&self) -> u64;
    /// What a machine that replays it must have beyond its objects, in a sentence.
    fn needs_from_machine(&self) -> String;
    /// Its environment built offline from `objects` alone (or found built) under `cache_root`.
    fn build(
        &self,
        id: &Sha256Digest,
        objects: &ObjectStore,
        cache_root: &Path,
    ) -> Result<Box<dyn Built>, ContextError>;
}

/// A lock document read back, with the id (the sha256 of its bytes) it was read by.
pub struct ReadLock<D> {
    pub id: Sha256Digest,
    pub lock: D,
}

impl<D: LockDocument> Lock for ReadLock<D> {
    fn id(&self) -> Sha256Digest {
        self.id
    }

    fn runtime(&self) -> String {
        self.lock.runtime()
    }

    fn base_commits(&self) -> Vec<String> {
        self.lock.commits().to_vec()
    }

    fn objects(&self) -> Vec<NeededObject> {
        self.lock
            .objects()
            .into_iter()
            .map(|(id, size, kind)| NeededObject { id, size, kind })
            .collect()
    }

    fn needs_from_machine(&self) -> Option<String> {
        Some(self.lock.needs_from_machine())
    }

    // `unconfined` concerns the Python kind, whose builds run a project's own code (sdists);
    // these kinds' builds only lay their objects out.
    fn build(
        &self,
        objects: &ObjectStore,
        cache_root: &Path,
        _unconfined: bool,
    ) -> Result<Box<dyn Built>, ContextError> {
        self.lock.build(&self.id, objects, cache_root)
    }
}

/// Records the lock `id` (its document `size` bytes) of `ctx` in the index, with every object
/// it names, in one transaction; `commit` is the newest base commit it covers.
pub fn record_lock(
    ark: &mut Ark,
    ctx: &Context,
    doc: &dyn LockDocument,
    id: Sha256Digest,
    size: u64,
    commit: &str,
) -> Result<(), ContextError> {
    let mut objects: Vec<(Sha256Digest, u64, &'static str)> = vec![(id, size, "lock")];
    objects.extend(doc.objects());
    let bytes: u64 = objects.iter().skip(1).map(|o| o.1).sum();
    ark.index_mut()
        .record_lock(
            &crate::store::LockRow {
                id,
                repo: ctx.repo.clone(),
                version: ctx.version.clone(),
                commit_id: commit.to_string(),
                python: doc.runtime(),
                packages: doc.packages(),
                artifacts: (objects.len() - 1) as u64,
                bytes,
                created_at: 0,
            },
            &objects,
        )
        .map_err(crate::env::EnvError::from)?;
    Ok(())
}
