//! The JavaScript/TypeScript kind (`kind = "node"`): a context locked as `env/node-lock.toml`
//! (node and npm by version and by the hash of their files, carried as the npm registry's own
//! tarballs when asked; every package tarball kept as an object by its sha256, with the
//! integrity npm checks it by; a `package-lock.json` generated as of the cutoff for base
//! commits that have none), built offline into npm's own cache (content filed by integrity),
//! and run with node at [`layout::ENVIRONMENT`](super::layout::ENVIRONMENT), npm offline.
//! docs/LANGUAGES.md tells it for users.

mod building;
mod document;
mod locking;
mod registry;
mod runtime;

use std::path::Path;

use super::lockdoc::{self, LockDocument};
use super::{Built, ContextError, Kind, Lock, LockOptions, LockSummary};
use crate::digest::Sha256Digest;
use crate::manifest::Context;
use crate::store::{Ark, ObjectStore};
use document::NodeLock;

pub use locking::GROUPING;

/// Why a node context cannot be locked, read or built.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("the node lock cannot be read: {0}")]
    Document(String),
    #[error("{what} cannot be read: {detail}")]
    PackageLock { what: String, detail: String },
    #[error("{what} takes {package}, which cannot be carried: {detail}")]
    NotDownloadable {
        what: String,
        package: String,
        detail: String,
    },
    #[error(
        "{package} from {url} hashes to {got}, not to the integrity its lockfile gives ({want}): \
         refused"
    )]
    Integrity {
        package: String,
        url: String,
        want: String,
        got: String,
    },
    #[error("the node runtime: {0}")]
    Runtime(String),
    #[error(
        "node {node} with npm {npm} is not on this machine (found {found}); lock the context \
         again with the runtime carried (without --no-pack-runtime), or install that node"
    )]
    RuntimeNotHere {
        node: String,
        npm: String,
        found: String,
    },
    #[error("the npm registry: {0}")]
    Registry(String),
    #[error("npm: {0}")]
    Npm(String),
    #[error("no instance of {repo} {version} is in the archive: import its instances first")]
    NoInstances { repo: String, version: String },
    #[error("base commit {commit} has no package.json at its root")]
    NoPackageJson { commit: String },
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

impl From<NodeError> for ContextError {
    fn from(e: NodeError) -> ContextError {
        ContextError::Node(Box::new(e))
    }
}

/// The node kind.
pub struct Node;

impl Kind for Node {
    fn name(&self) -> &'static str {
        "node"
    }

    fn lock_member(&self) -> &'static str {
        "env/node-lock.toml"
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
        lockdoc::read_lock(id, bytes, NodeLock::parse)
    }

    /// Multi-SWE-bench's reading of jest's verbose output (`PASS suite`, `✓ test`), which its
    /// dayjs and darkreader parsers share.
    fn default_parser(&self) -> &'static str {
        "msb_dayjs"
    }

    /// `node_modules`, as the image had it installed (`npm ci` makes it again anyway).
    fn kept_between_runs(&self) -> Option<&'static [&'static str]> {
        Some(&["node_modules"])
    }
}

impl LockDocument for NodeLock {
    fn runtime(&self) -> String {
        format!("node {}", self.runtime.node)
    }

    fn commits(&self) -> &[String] {
        &self.commits
    }

    fn objects(&self) -> Vec<(Sha256Digest, u64, &'static str)> {
        NodeLock::objects(self)
    }

    fn packages(&self) -> u64 {
        self.tarballs.len() as u64
    }

    fn needs_from_machine(&self) -> String {
        let r = &self.runtime;
        let base = "glibc, `sh`, `sha256sum` and `cp` (to put a generated lockfile in place), \
                    and the system's `tar` and `gzip` (to lay the runtime out)";
        match r.packed {
            Some(_) => base.to_string(),
            None => format!(
                "node {} (binary {}) with npm {} (files {}) installed (lock it again without \
                 --no-pack-runtime to carry them), and {base}",
                r.node, r.node_sha256, r.npm, r.npm_files_sha256
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
