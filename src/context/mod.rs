//! Kinds of executable context: what an instance's environment is made of and how its tests
//! run. Python (a PEP 751 lock of wheels, an interpreter carried by hash) and Rust (a toolchain
//! and crates.io's crates by hash); every kind implements [`Kind`], and nothing above this module names a kind's own
//! machinery (`tests/layers.rs`), so that a new language is one implementation here and its
//! manifests.
//!
//! A kind answers five questions: how a context is locked (online, once), how a lock is read,
//! how its environment is built offline (cached), what an instance's commands see of it (at
//! fixed places: [`layout`]), and how its tests are run and read (the test command, the default
//! log parser).
//!
//! - [`python`]: the Python kind (`crate::env` underneath);
//! - [`rust`]: the Rust kind (a toolchain by hash, crates.io's crates as a local registry);
//! - [`node`]: the JavaScript/TypeScript kind (node and npm by hash, npm's tarballs as npm's
//!   own cache);
//! - [`native`]: C and C++ (the machine's compiler, Debian's packages by hash in a prefix).

mod lockdoc;
pub mod native;
pub mod node;
pub mod python;
pub mod resolve;
pub mod rust;
mod states;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::digest::Sha256Digest;
use crate::manifest::Context;
use crate::sandbox::Mount;
use crate::store::{Ark, ObjectStore};

/// Where an instance's commands see what they work on, whatever the machine and the archive
/// (docs/SANDBOX.md, "The fixed layout"): nothing of the host's own paths is visible to them.
pub mod layout {
    /// The instance's work tree, as SWE-bench's images have it.
    pub const WORK_TREE: &str = "/testbed";
    /// The instance's environment (its own copy of the context's).
    pub const ENVIRONMENT: &str = "/env";
    /// swe-ark's own directories of a run: the lock's artifacts, the services.
    pub const SWE_ARK: &str = "/swe-ark";
    /// The lock's artifacts, read-only: what an offline install finds.
    pub const WHEELHOUSE: &str = "/swe-ark/wheelhouse";
    /// The services' run directory (their logs, TLS files, working directories).
    pub const SERVICES: &str = "/swe-ark/services";
    /// Each service's own environment, `SERVICE_ENVS/<name>`.
    pub const SERVICE_ENVS: &str = "/swe-ark/service-envs";
}

/// Why a context cannot be locked, read, built or given to a run.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    #[error("context kind `{kind}` of {repo} {version} is not one swe-ark knows (known: {known})")]
    UnknownKind {
        kind: String,
        repo: String,
        version: String,
        known: String,
    },
    #[error("lock {id} cannot be read: {detail}")]
    BadLock { id: String, detail: String },
    #[error(transparent)]
    Env(#[from] crate::env::EnvError),
    #[error(transparent)]
    Rust(Box<rust::RustError>),
    #[error(transparent)]
    Node(Box<node::NodeError>),
    #[error(transparent)]
    Native(Box<native::NativeError>),
}

/// One kind of executable context.
pub trait Kind: Sync {
    /// Its name in manifests (`kind = "python"`) and in reports.
    fn name(&self) -> &'static str;

    /// The bundle member that holds a lock of this kind (`env/pylock.toml`).
    fn lock_member(&self) -> &'static str;

    /// Locks `ctx` (online: the one step that is): installs it for real, keeps every artifact
    /// as an object by its hash, records the lock in the archive, proves it builds offline.
    fn lock(
        &self,
        ark: &mut Ark,
        ctx: &Context,
        opts: &LockOptions,
        say: &dyn Fn(&str),
    ) -> Result<LockSummary, ContextError>;

    /// A lock of this kind, read from its bytes (whose sha256 is `id`).
    fn read_lock(&self, id: Sha256Digest, bytes: &[u8]) -> Result<Box<dyn Lock>, ContextError>;

    /// The test command of an instance whose test patch is `test_patch`. By default the
    /// context's as it is: the suite's own runner (cargo, npm's test script, the build's
    /// check target) runs every test. Python's adds the test files the patch touches.
    fn test_command(&self, ctx: &Context, test_patch: &str) -> TestCommand {
        let _ = test_patch;
        TestCommand {
            directives: Vec::new(),
            command: ctx.test_cmd.clone(),
        }
    }

    /// The log parser a context of this kind names when its manifest names none.
    fn default_parser(&self) -> &'static str;

    /// What of the work tree one evaluation or run leaves for the next. `None`: all of it.
    /// `Some(kept)`: before each evaluation after the first, and each run after the first,
    /// every path the tree did not hold before is removed but those under `kept` (build
    /// caches whose reuse cannot change a result), as each phase of Multi-SWE-bench starts
    /// in a fresh container from the image (`harness/fresh.rs`).
    fn kept_between_runs(&self) -> Option<&'static [&'static str]> {
        None
    }
}

/// A package a context asks for that its environment here lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// Its name as the context's definition writes it (`cdms2`).
    pub name: String,
    /// The rest of the sentence "needs NAME, …" (`which only conda provides: not on PyPI`).
    pub why: String,
}

/// The options of `env lock` (each kind takes what applies to it).
#[derive(Debug, Clone)]
pub struct LockOptions {
    /// Lock at this commit rather than the context's environment setup commit.
    pub commit: Option<String>,
    /// The interpreter or toolchain to lock with, rather than the one found by version.
    pub runtime: Option<PathBuf>,
    /// The package index to resolve from.
    pub index_url: String,
    /// Resolve as of this time rather than the dataset's environments date.
    pub exclude_newer: Option<std::time::SystemTime>,
    /// Carry the interpreter or toolchain as an object of the lock.
    pub pack_runtime: bool,
    pub allow_yanked: bool,
    /// Which installer builds environments (`uv`, `pip`, or the best that serves).
    pub installer: Installer,
    /// Run the installs with the caller's rights, not confined.
    pub unconfined: bool,
}

pub use crate::env::build::Installer;
pub use crate::env::build::StaleBuild;
pub use crate::env::lock::DEFAULT_INDEX;

/// Removes the built environment in `dir` (an archive's `envs/<lock id>/`) when its next use
/// would build it again — a Python build made by an older swe-ark, or where the archive was
/// before it was moved or copied — and nothing uses it; with `dry_run`, only says so. None
/// when it is kept (the other kinds' builds name no place of the archive: they are always
/// kept).
pub fn remove_stale_build(dir: &Path, dry_run: bool) -> std::io::Result<Option<StaleBuild>> {
    crate::env::build::remove_stale(dir, dry_run)
}

/// What `env lock` made, whatever the kind.
#[derive(Debug, Clone)]
pub struct LockSummary {
    /// The lock's id.
    pub id: String,
    /// The commit it was made at (the environment setup commit, or the newest base commit).
    pub commit: String,
    /// What users should know of it (what was left out, what differs).
    pub notes: Vec<String>,
    /// One sentence for people: what it holds and how it was proven.
    pub sentence: String,
    /// The kind's own report, as `env lock --json` prints it.
    pub details: serde_json::Value,
}

/// A context's lock, read: what a run, an export and a release need of it.
pub trait Lock: Send + Sync {
    fn id(&self) -> Sha256Digest;
    /// The interpreter or toolchain it runs with, as results record it (`3.9.18`).
    fn runtime(&self) -> String;
    /// The commits whose installs it was made from: the environment setup commit first, then
    /// the base commits of the instances the archive held when it was made. An instance at
    /// another commit may ask for what it lacks (imported after it: lock again).
    fn base_commits(&self) -> Vec<String>;
    /// The files of an instance's patches (`[test patch, gold patch]`) that change what the
    /// context's install reads, when the lock was not made from the tree after them (it
    /// predates the instance): the install after the gold patch may ask for what the lock
    /// lacks, and locking again covers it. Empty by default: a kind whose locks say nothing of
    /// patched trees.
    fn uncovered_patch_files(
        &self,
        ctx: &Context,
        instance_id: &str,
        patches: [&str; 2],
    ) -> Vec<String> {
        let _ = (ctx, instance_id, patches);
        Vec::new()
    }

    /// What the context's definition, as the lock was made from it, asks for that its
    /// environment cannot have here (a package only conda provides): a published test that
    /// needed one cannot come out as published. `file_at(commit, path)` reads a file of the
    /// repository. Empty by default: only Python's contexts ask for what cannot be had.
    fn unavailable(&self, file_at: &dyn Fn(&str, &str) -> Option<Vec<u8>>) -> Vec<Unavailable> {
        let _ = file_at;
        Vec::new()
    }

    /// Every object it names (artifacts, a packed interpreter), each once, in the order of
    /// their ids: id, size and what it is (`wheel`, `sdist`, `interpreter`, …).
    fn objects(&self) -> Vec<NeededObject>;
    /// What a machine that replays it must have beyond its objects (an interpreter it does
    /// not carry), in a sentence; None when it carries everything.
    fn needs_from_machine(&self) -> Option<String>;
    /// Its environment built offline from `objects` alone (or found built) under
    /// `cache_root`, its own steps confined unless `unconfined`.
    fn build(
        &self,
        objects: &ObjectStore,
        cache_root: &Path,
        unconfined: bool,
    ) -> Result<Box<dyn Built>, ContextError>;
}

/// A built environment: what an instance's own copy is made from.
pub trait Built: Send + Sync {
    /// The instance's own environment in `work` (which it may change: its install writes
    /// there), seen by its commands at the [`layout`]'s places.
    /// `base_commit` is the instance's: what of the environment is per commit (a lockfile the
    /// lock generated for it) is chosen by it.
    fn for_run(&self, work: &Path, base_commit: &str) -> Result<RunEnvironment, ContextError>;
}

/// What an instance's commands get of its environment.
#[derive(Debug, Clone, Default)]
pub struct RunEnvironment {
    /// Directories at their places in the run ([`layout`]).
    pub mounts: Vec<Mount>,
    /// Variables the commands get (installs offline from the lock's artifacts, …).
    pub vars: BTreeMap<String, String>,
    /// Directories before the system's on `PATH`, as the commands see them.
    pub path: Vec<String>,
    /// Each service's environment: its directory on the host and where the run sees it.
    pub service_envs: BTreeMap<String, (PathBuf, PathBuf)>,
    /// Shell lines run in the work tree before the context's install: the environment's own
    /// preparation of the tree (a `Cargo.lock` the lock generated, put in place).
    pub prepare: String,
}

/// An object a lock names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeededObject {
    pub id: Sha256Digest,
    pub size: u64,
    pub kind: &'static str,
}

/// An instance's test command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestCommand {
    /// The tests it names (SWE-bench's test directives).
    pub directives: Vec<String>,
    /// The shell command.
    pub command: String,
}

/// The kind of `ctx` (its manifest's `kind`, Python when none).
pub fn kind_of(ctx: &Context) -> Result<&'static dyn Kind, ContextError> {
    kind_named(&ctx.kind).ok_or_else(|| ContextError::UnknownKind {
        kind: ctx.kind.clone(),
        repo: ctx.repo.clone(),
        version: ctx.version.clone(),
        known: KINDS
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// Every kind swe-ark knows.
static KINDS: &[&dyn Kind] = &[&python::Python, &rust::Rust, &node::Node, &native::Native];

/// Every kind swe-ark knows, in the order they are tried.
pub fn kinds() -> impl Iterator<Item = &'static dyn Kind> {
    KINDS.iter().copied()
}

/// The kind whose lock a bundle holds, given what members it has (`has(path)`): the first
/// whose lock member is there.
pub fn kind_of_bundle(has: impl Fn(&str) -> bool) -> Option<&'static dyn Kind> {
    kinds().find(|k| has(k.lock_member()))
}

fn kind_named(name: &str) -> Option<&'static dyn Kind> {
    let name = if name.is_empty() { "python" } else { name };
    KINDS.iter().copied().find(|k| k.name() == name)
}
