//! The Rust kind: a context locked as `env/rust-lock.toml` (the toolchain by the hash of its
//! files, carried as an object when asked; every registry crate kept as an object by the
//! checksum `Cargo.lock` gives it; a `Cargo.lock` generated as of the cutoff for base commits
//! that have none), built offline into a cargo local registry, and run with the toolchain at
//! [`layout::ENVIRONMENT`](super::layout::ENVIRONMENT) and the registry at
//! [`layout::WHEELHOUSE`](super::layout::WHEELHOUSE), cargo offline.
//! docs/LANGUAGES.md tells it for users.

mod building;
mod document;
mod locking;
mod registry;
mod toolchain;

use std::path::Path;

use super::lockdoc::{self, LockDocument};
use super::{Built, ContextError, Kind, Lock, LockOptions, LockSummary};
use crate::digest::Sha256Digest;
use crate::manifest::Context;
use crate::store::{Ark, ObjectStore};
use document::RustLock;

pub use locking::GROUPING;

/// Why a Rust context cannot be locked, read or built.
#[derive(Debug, thiserror::Error)]
pub enum RustError {
    #[error("the Rust lock cannot be read: {0}")]
    Document(String),
    #[error("{what} cannot be read: {detail}")]
    CargoLock { what: String, detail: String },
    #[error(
        "{what} takes {package} from `{origin}`: only crates.io's crates can be carried \
         (git and other registries are not yet)"
    )]
    UnsupportedSource {
        what: String,
        package: String,
        origin: String,
    },
    #[error("the Rust toolchain: {0}")]
    Toolchain(String),
    #[error(
        "Rust toolchain {rustc} ({host}, files {files_sha256}) is not on this machine (looked \
         at: {looked}); lock the context again with it carried (without --no-pack-runtime), \
         or install that release (`rustup toolchain install {rustc}`)"
    )]
    ToolchainNotHere {
        rustc: String,
        host: String,
        files_sha256: String,
        looked: String,
    },
    #[error("the crate registry: {0}")]
    Registry(String),
    #[error("cargo: {0}")]
    Cargo(String),
    #[error("no instance of {repo} {version} is in the archive: import its instances first")]
    NoInstances { repo: String, version: String },
    #[error("base commit {commit} has no Cargo.toml at its root")]
    NoCargoToml { commit: String },
    #[error("{instance}'s {what} does not apply at its base commit: {detail}")]
    Patch {
        instance: String,
        what: &'static str,
        detail: String,
    },
    #[error("the lock does not cover {state}: {detail}")]
    NotCovered { state: String, detail: String },
    #[error("{0}")]
    Io(String),
}

/// The Rust kind.
pub struct Rust;

impl Kind for Rust {
    fn name(&self) -> &'static str {
        "rust"
    }

    fn lock_member(&self) -> &'static str {
        "env/rust-lock.toml"
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
        lockdoc::read_lock(id, bytes, RustLock::parse)
    }

    /// Multi-SWE-bench's reading of `cargo test` (`test NAME ... ok`), its Rust
    /// repositories' parser.
    fn default_parser(&self) -> &'static str {
        "msb_cargo"
    }

    /// cargo's `target`: the next run rebuilds only what changed, with the same results.
    fn kept_between_runs(&self) -> Option<&'static [&'static str]> {
        Some(&["target"])
    }
}

impl LockDocument for RustLock {
    fn runtime(&self) -> String {
        format!("rustc {}", self.toolchain.rustc)
    }

    fn commits(&self) -> &[String] {
        &self.commits
    }

    fn objects(&self) -> Vec<(Sha256Digest, u64, &'static str)> {
        RustLock::objects(self)
    }

    fn packages(&self) -> u64 {
        self.crates.len() as u64
    }

    fn needs_from_machine(&self) -> String {
        let t = &self.toolchain;
        let linker = "the system linker `cc` and glibc";
        match t.packed {
            Some(_) => linker.to_string(),
            None => format!(
                "Rust toolchain {} ({}) installed, files {} (lock it again without \
                 --no-pack-runtime to carry it), and {linker}",
                t.rustc, t.host, t.files_sha256
            ),
        }
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

impl From<RustError> for ContextError {
    fn from(e: RustError) -> ContextError {
        ContextError::Rust(Box::new(e))
    }
}
