//! Locked, offline-installable environments: an executable context installed once for real
//! (online, "as of" its environment setup commit), every artifact kept by hash and written to a
//! PEP 751 lock, and rebuilt later from the objects alone.
//!
//! - [`python`]: finding the interpreter a context needs;
//! - [`asof`]: the cutoff a lock resolves as of, and the pins and installers that pass it;
//! - [`proxy`]: the index pip resolves through at lock time (cutoff, recording, storing);
//! - [`lock`]: the lock procedure; [`pylock`]: the lock file; [`conda`]: SWE-bench's conda
//!   environment files as pip requirements;
//! - [`build`]: the offline build into `envs/<lock id>/` and per-instance copies;
//! - [`services`]: the services' own environments, locked with the context and built apart;
//! - [`venv`]: running Python and its installers with a clean environment; [`pipseed`]:
//!   ensurepip's result kept once per interpreter and copied into later environments;
//! - [`steps`]: running the stage's commands: the dataset's confined by the sandbox (or not),
//!   swe-ark's own directly, output captured.

pub mod asof;
pub mod build;
pub mod conda;
mod install;
pub mod listing;
pub mod lock;
pub mod packed;
pub mod pipseed;
pub mod proxy;
pub mod pylock;
pub mod python;
pub mod services;
pub mod steps;
pub mod venv;

use std::path::PathBuf;

use crate::manifest::ManifestError;
use crate::mirror::MirrorError;
use crate::store::IndexError;
use crate::store::ObjectError;

#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Python(#[from] python::PythonError),
    #[error(transparent)]
    Mirror(#[from] MirrorError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Object(#[from] ObjectError),
    #[error(
        "no environment setup commit for {repo} {version}: pass --commit SHA, or import \
         instances of {repo} {version} that name their environment_setup_commit"
    )]
    NoCommit { repo: String, version: String },
    #[error(
        "the instances of {repo} {version} name {} different environment setup commits ({}); \
         pass --commit SHA to choose one",
        .commits.len(), .commits.join(", ")
    )]
    AmbiguousCommit {
        repo: String,
        version: String,
        commits: Vec<String>,
    },
    #[error(
        "Python {0} contexts cannot be locked: swe-ark builds environments with the `venv` \
         module, which Python 2 does not have"
    )]
    NoVenv(String),
    #[error("{step} failed ({status}):\n{output}")]
    Command {
        step: String,
        status: String,
        output: String,
    },
    #[error("{step} failed: {failure}")]
    Fetch { step: String, failure: String },
    #[error(
        "confinement is not possible here ({reason}); pass --unconfined to run the installs \
         with your own rights on the whole filesystem"
    )]
    NoConfinement { reason: String },
    #[error("{step} failed: {}\n{output}", .reasons.join("\n"))]
    Excluded {
        step: String,
        /// Each requirement the cutoff left unmet, with the rule and what would admit it.
        reasons: Vec<String>,
        output: String,
    },
    #[error("{detail}")]
    BadCutoff { detail: String },
    #[error(transparent)]
    Conda(#[from] conda::CondaError),
    #[error(
        "{name} {version} was yanked from the index ({filename}: {reason}); pass --allow-yanked \
         to lock it anyway"
    )]
    Yanked {
        name: String,
        version: String,
        filename: String,
        reason: String,
    },
    #[error(
        "{name} {version} was installed from outside the index ({detail}), so it cannot be \
         locked; make the context install it from the index"
    )]
    NotLockable {
        name: String,
        version: String,
        detail: String,
    },
    #[error(
        "no lock matches `{query}`{}",
        if .known.is_empty() { "; the archive has no locks (make one with `swe-ark env lock`)".to_string() }
        else { format!("; known: {}", .known.join(", ")) }
    )]
    UnknownLock { query: String, known: Vec<String> },
    #[error("`{query}` matches {} locks ({}); give more digits", .ids.len(), .ids.join(", "))]
    AmbiguousLock { query: String, ids: Vec<String> },
    #[error("lock {id} is not a valid pylock.toml: {detail}")]
    BadLock { id: String, detail: String },
    #[error(transparent)]
    Artifact(Box<ArtifactError>),
    #[error(
        "lock {lock} was made with Python {wanted}; this machine has {found}. Install Python \
         {wanted} (`pyenv install {wanted}`), pass --python PATH to use another build of it, or \
         lock again without --no-pack-python so that the lock carries its interpreter"
    )]
    InterpreterMismatch {
        lock: String,
        wanted: String,
        found: String,
    },
    #[error(
        "the packages of service {service} are not a closed set of pins: {detail}; pin every \
         distribution it needs with `==` in the manifest's `packages`, so that it resolves the \
         same whatever the lock's date"
    )]
    ServiceClosure { service: String, detail: String },
    #[error("the environment built from lock {lock} does not match it: {detail}")]
    BuildMismatch { lock: String, detail: String },
    #[error("installer {0} is not available: {1}")]
    NoInstaller(String, String),
    #[error(
        "the environment of lock {lock} in {} cannot be used as it is ({why}), and cannot be \
         built again there: {source}",
        .dir.display()
    )]
    StaleBuild {
        lock: String,
        dir: PathBuf,
        why: String,
        #[source]
        source: std::io::Error,
    },
    #[error("environment I/O on `{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A locked artifact that cannot be installed (boxed: it carries many names).
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error(
        "lock {lock} needs {name} {version} ({filename}, sha256 {sha256}), which is not in the \
         archive's objects; lock again online, or import an archive that has it"
    )]
    Missing {
        lock: String,
        name: String,
        version: String,
        filename: String,
        sha256: String,
    },
    #[error(
        "lock {lock} needs {name} {version} ({filename}), but the object {sha256} is corrupt \
         (its content hashes to {actual}); refusing to install it"
    )]
    Tampered {
        lock: String,
        name: String,
        version: String,
        filename: String,
        sha256: String,
        actual: String,
    },
}

impl From<ArtifactError> for EnvError {
    fn from(e: ArtifactError) -> Self {
        EnvError::Artifact(Box::new(e))
    }
}

/// What a directory that several archives on one machine share (named by
/// `SWE_ARK_SHARED_CACHE`) holds: what depends only on the machine's interpreters.
#[derive(Debug, Clone, Copy)]
pub enum Shared {
    /// ensurepip's seeds ([`pipseed`]).
    PipSeeds,
    /// Packed interpreters ([`packed::pack_python_once`]).
    PackedPythons,
    /// Unpacked interpreters, hard-linked into each archive's ([`packed::unpack_python`]).
    Pythons,
}

/// Where the shared cache keeps `part`; None when `SWE_ARK_SHARED_CACHE` is unset, and each
/// archive keeps its own in its `cache/` and `pythons/`.
pub fn shared_cache(part: Shared) -> Option<PathBuf> {
    let name = match part {
        Shared::PipSeeds => "pip-seeds",
        Shared::PackedPythons => "packed-pythons",
        Shared::Pythons => "pythons",
    };
    std::env::var_os("SWE_ARK_SHARED_CACHE")
        .filter(|d| !d.is_empty())
        .map(|d| PathBuf::from(d).join(name))
}

pub(crate) fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> EnvError {
    let path = path.into();
    move |source| EnvError::Io { path, source }
}
