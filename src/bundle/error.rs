use std::io;
use std::path::PathBuf;

use crate::digest::Sha256Digest;

/// A member whose content or listing is wrong; reading goes on so that every such member of a
/// bundle is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The member's path inside the bundle (lossily shown if it is not UTF-8), or `(bundle)`.
    pub member: String,
    pub reason: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "member `{}`: {}", self.member, self.reason)
    }
}

/// Why a bundle could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("cannot read `{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the zstd stream of `{path}` is corrupt or truncated: {detail}")]
    Zstd { path: PathBuf, detail: String },
    #[error("the stored pieces of `{path}` cannot be read: {detail}")]
    Stored { path: PathBuf, detail: String },
    #[error("the tar stream of `{path}` is malformed: {detail}")]
    Tar { path: PathBuf, detail: String },
    #[error("`{path}` is not a swe-ark bundle: {detail}")]
    NotABundle { path: PathBuf, detail: String },
    #[error("`{path}` is bundle format version {found}; this swe-ark reads versions 1, 2 and 3")]
    UnsupportedVersion { path: PathBuf, found: u64 },
    #[error("bundle.json of `{path}` is invalid: {detail}")]
    BadManifest { path: PathBuf, detail: String },
    #[error("refusing member `{member}` of `{path}`: {reason}")]
    Refused {
        path: PathBuf,
        member: String,
        reason: String,
    },
    #[error("`{path}` failed verification:\n{}", list(.problems))]
    Failed {
        path: PathBuf,
        problems: Vec<Problem>,
    },
    #[error("bundle `{path}` hashes to {actual}, expected {expected}")]
    WrongId {
        path: PathBuf,
        expected: Sha256Digest,
        actual: Sha256Digest,
    },
    #[error("cannot pack `{path}`: {reason}")]
    BadInput { path: PathBuf, reason: String },
    #[error("cannot unpack into `{path}`: {reason}")]
    BadTarget { path: PathBuf, reason: String },
}

fn list(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl BundleError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        BundleError::Io {
            path: path.into(),
            source,
        }
    }
}
