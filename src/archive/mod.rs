//! One file to carry a release across an air gap (docs/RELEASES.md): `export` writes it,
//! `import-archive` checks every byte of it and only then adds it to an archive.
//!
//! The file is a POSIX tar in the one layout swe-ark writes (`bundle::TarWriter`: ustar
//! headers with mtime 0, uid/gid 0, mode 0644, no directory entries), not compressed:
//! everything in it is compressed already (bundles are zstd, wheels are zip, packed
//! interpreters are zstd, git bundles are packs). Members, in this order:
//!
//! ```text
//! swe-ark-archive.json             the manifest: every other member's path, size and sha256
//! release.json                     the release snapshot (without its creation time)
//! index.json                       the slice of the index the release needs
//! bundles/<id>.tar.zst             by id
//! objects/sha256/<ab>/<62 hex>     by id
//! mirrors/<OWNER>/<NAME>.bundle    by name, with --with-history: git bundles of the mirrors
//! ```

mod export;
mod import;
mod slice;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::bundle::BundleError;
use crate::digest::Sha256Digest;
use crate::mirror::{MirrorError, RepoName};
use crate::release::ReleaseError;
use crate::store::{ArkError, IndexError, ObjectError};

pub use export::{ExportOptions, ExportReport, export};
pub use import::{ImportOptions, ImportReport, import};
pub use slice::IndexSlice;

/// The `format` of the manifest.
pub const FORMAT: &str = "swe-ark-archive";
/// The archive file format version this swe-ark writes and reads.
pub const VERSION: u32 = 1;
/// The first member.
pub const MANIFEST: &str = "swe-ark-archive.json";
pub const RELEASE: &str = "release.json";
pub const INDEX: &str = "index.json";

/// Metadata members (the manifest, the snapshot, the index slice) read into memory at most
/// this large.
const MAX_METADATA: u64 = 1 << 30;

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The file is not what it claims: truncated, altered, incomplete or inconsistent.
    #[error("refusing `{file}`: {detail}; nothing was imported")]
    Refused { file: PathBuf, detail: String },
    /// The archive cannot give what the release needs.
    #[error("cannot export release {release}: {detail}")]
    Export { release: String, detail: String },
    #[error("archive file I/O on `{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Release(#[from] ReleaseError),
    #[error(transparent)]
    Ark(#[from] ArkError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Bundle(#[from] BundleError),
    #[error(transparent)]
    Object(#[from] ObjectError),
    #[error(transparent)]
    Mirror(#[from] MirrorError),
}

pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> ArchiveError + '_ {
    move |source| ArchiveError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The first member: what follows, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveManifest {
    pub format: String,
    pub version: u32,
    /// The release's name and root hash.
    pub release: String,
    pub root: Sha256Digest,
    /// Every member after this one, in the order they follow.
    pub members: Vec<ArchiveMember>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveMember {
    pub path: String,
    pub size: u64,
    pub sha256: Sha256Digest,
}

impl ArchiveManifest {
    pub fn to_bytes(&self) -> Vec<u8> {
        json_member(self)
    }
}

/// A JSON member as the file holds it: pretty, with a final newline.
fn json_member(value: &impl Serialize) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(value).unwrap_or_default();
    out.push(b'\n');
    out
}

/// What a member is, from its path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Part {
    Release,
    Index,
    Bundle(Sha256Digest),
    Object(Sha256Digest),
    Mirror(RepoName),
}

impl Part {
    pub(crate) fn path(&self) -> String {
        match self {
            Part::Release => RELEASE.to_string(),
            Part::Index => INDEX.to_string(),
            Part::Bundle(id) => format!("bundles/{}{}", id.hex(), crate::bundle::FILE_SUFFIX),
            Part::Object(id) => {
                let hex = id.hex();
                format!("objects/sha256/{}/{}", &hex[..2], &hex[2..])
            }
            Part::Mirror(name) => format!("mirrors/{name}.bundle"),
        }
    }

    /// The part a member path names; `None` for anything else.
    pub(crate) fn parse(path: &str) -> Option<Part> {
        let part = match path {
            RELEASE => Part::Release,
            INDEX => Part::Index,
            _ => {
                if let Some(rest) = path.strip_prefix("bundles/") {
                    Part::Bundle(
                        rest.strip_suffix(crate::bundle::FILE_SUFFIX)?
                            .parse()
                            .ok()?,
                    )
                } else if let Some(rest) = path.strip_prefix("objects/sha256/") {
                    let (ab, tail) = rest.split_once('/')?;
                    if ab.len() != 2 {
                        return None;
                    }
                    Part::Object(format!("{ab}{tail}").parse().ok()?)
                } else if let Some(rest) = path.strip_prefix("mirrors/") {
                    Part::Mirror(RepoName::parse(rest.strip_suffix(".bundle")?)?)
                } else {
                    return None;
                }
            }
        };
        // One spelling per part.
        (part.path() == path).then_some(part)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_paths_name_one_part_each() {
        let id = Sha256Digest::of(b"x");
        for part in [
            Part::Release,
            Part::Index,
            Part::Bundle(id),
            Part::Object(id),
            Part::Mirror(RepoName::parse("acme/widget").unwrap()),
        ] {
            assert_eq!(Part::parse(&part.path()), Some(part));
        }
        for bad in [
            "release.json/",
            "bundles/x.tar.zst",
            "objects/sha256/abc/def",
            "../index.json",
            "mirrors/acme/widget",
            "mirrors/a/b/c.bundle",
            &format!("objects/sha256/{}", id.hex()),
        ] {
            assert_eq!(Part::parse(bad), None, "{bad}");
        }
    }
}
