//! The native kind (C and C++): a context locked as `env/native-lock.toml` (the Debian
//! packages its manifest names, `debian = [...]`, with their dependency closure less what the
//! machine provides, each `.deb` kept as an object by the sha256 Debian's index gives it; the
//! machine's compiler named), built offline by unpacking every `.deb` into one prefix, and
//! run with that prefix read-only at [`layout::ENVIRONMENT`](super::layout::ENVIRONMENT),
//! first on `PATH`. docs/LANGUAGES.md tells it for users.

mod building;
mod debian;
mod document;
mod locking;

use std::path::Path;

use super::lockdoc::{self, LockDocument};
use super::{Built, ContextError, Kind, Lock, LockOptions, LockSummary};
use crate::digest::Sha256Digest;
use crate::manifest::Context;
use crate::store::{Ark, ObjectStore};
use document::NativeLock;

/// Why a native context cannot be locked, read or built.
#[derive(Debug, thiserror::Error)]
pub enum NativeError {
    #[error("the native lock cannot be read: {0}")]
    Document(String),
    #[error("no instance of {repo} {version} is in the archive: import its instances first")]
    NoInstances { repo: String, version: String },
    #[error("Debian package `{package}` is not in {index}")]
    NoSuchPackage { package: String, index: String },
    #[error("apt: {0}")]
    Apt(String),
    #[error("{url} cannot be fetched: {detail}")]
    Fetch { url: String, detail: String },
    #[error(
        "{url} is not what the index says (got sha256 {got}, {size} bytes; expected {expected}, \
         {expected_size} bytes)"
    )]
    Mismatch {
        url: String,
        got: String,
        size: u64,
        expected: String,
        expected_size: u64,
    },
    #[error("the machine's compiler: {0}")]
    Compiler(String),
    #[error("{package} cannot be unpacked: {detail}")]
    Unpack { package: String, detail: String },
    #[error("the environment does not run offline: {0}")]
    Proof(String),
    #[error("{0}")]
    Io(String),
}

/// The native kind.
pub struct Native;

impl Kind for Native {
    fn name(&self) -> &'static str {
        "native"
    }

    fn lock_member(&self) -> &'static str {
        "env/native-lock.toml"
    }

    fn lock(
        &self,
        ark: &mut Ark,
        ctx: &Context,
        opts: &LockOptions,
        say: &dyn Fn(&str),
    ) -> Result<LockSummary, ContextError> {
        locking::lock(ark, ctx, opts, say)
    }

    fn read_lock(&self, id: Sha256Digest, bytes: &[u8]) -> Result<Box<dyn Lock>, ContextError> {
        lockdoc::read_lock(id, bytes, NativeLock::parse)
    }

    /// Automake's `PASS: x` / `FAIL: y` (Multi-SWE-bench's reading of jq's `make check`).
    fn default_parser(&self) -> &'static str {
        "msb_jq"
    }

    /// Nothing: each run configures and builds from the tree as checked out, patched and
    /// installed (cmake's configure checks are lines the parsers read).
    fn kept_between_runs(&self) -> Option<&'static [&'static str]> {
        Some(&[])
    }
}

impl LockDocument for NativeLock {
    fn runtime(&self) -> String {
        format!("gcc {}", self.compiler.gcc)
    }

    fn commits(&self) -> &[String] {
        &self.commits
    }

    fn objects(&self) -> Vec<(Sha256Digest, u64, &'static str)> {
        NativeLock::objects(self)
    }

    fn packages(&self) -> u64 {
        self.packages.len() as u64
    }

    fn needs_from_machine(&self) -> String {
        let c = &self.compiler;
        format!(
            "gcc and g++ (locked with {} / {}, {}), make, dpkg-deb, and the Debian 12 packages \
             the lock's dependencies met and left to the machine: {}",
            c.gcc,
            c.gxx,
            c.target,
            if self.from_machine.is_empty() {
                "none".to_string()
            } else {
                self.from_machine.join(", ")
            }
        )
    }

    fn build(
        &self,
        id: &Sha256Digest,
        objects: &ObjectStore,
        cache_root: &Path,
    ) -> Result<Box<dyn Built>, ContextError> {
        Ok(Box::new(building::build(self, id, objects, cache_root)?))
    }
}

impl From<NativeError> for ContextError {
    fn from(e: NativeError) -> ContextError {
        ContextError::Native(Box::new(e))
    }
}
