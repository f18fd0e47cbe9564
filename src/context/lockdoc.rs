//! What the lock documents of the Rust, node and native kinds share: each is read back as a
//! [`Lock`] the same way, and recorded in the archive's index the same way. A kind's document
//! says only what differs (its runtime, its packages, what a machine must still have, how its
//! environment is built).

use std::fmt::Display;
use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;

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

/// Why a lock document cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error("not UTF-8: {0}")]
    NotUtf8(#[from] std::str::Utf8Error),
    #[error("{0}")]
    Toml(String),
    #[error("lock-version is {found}; this swe-ark reads {expected}")]
    Version { found: String, expected: String },
}

/// A lock document's TOML text, as the bytes its id hashes.
pub fn to_toml<D: Serialize>(doc: &D) -> Result<Vec<u8>, DocumentError> {
    toml::to_string(doc)
        .map(String::into_bytes)
        .map_err(|e| DocumentError::Toml(e.to_string()))
}

/// A lock document read from `bytes`: UTF-8 TOML of `D`'s form whose `lock-version`
/// (`version_of`) is `expected`.
pub fn from_toml<D: DeserializeOwned>(
    bytes: &[u8],
    expected: &str,
    version_of: impl for<'a> Fn(&'a D) -> &'a str,
) -> Result<D, DocumentError> {
    let text = std::str::from_utf8(bytes)?;
    let doc: D = toml::from_str(text).map_err(|e| DocumentError::Toml(e.to_string()))?;
    let found = version_of(&doc);
    if found != expected {
        return Err(DocumentError::Version {
            found: found.to_string(),
            expected: expected.to_string(),
        });
    }
    Ok(doc)
}

/// The lock `id` read from its `bytes` with its kind's `parse`, as a [`Lock`]; a document that
/// does not parse is a [`ContextError::BadLock`].
pub fn read_lock<D: LockDocument + 'static, E: Display>(
    id: Sha256Digest,
    bytes: &[u8],
    parse: fn(&[u8]) -> Result<D, E>,
) -> Result<Box<dyn Lock>, ContextError> {
    let lock = parse(bytes).map_err(|e| ContextError::BadLock {
        id: id.hex(),
        detail: e.to_string(),
    })?;
    Ok(Box::new(ReadLock { id, lock }))
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
