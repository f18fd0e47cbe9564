//! One file to carry a release across an air gap (docs/RELEASES.md): `export` writes it,
//! `import-archive` checks every byte of it and only then adds it to an archive.
//!
//! The file is a POSIX tar in the one layout swe-ark writes (`bundle::TarWriter`: ustar
//! headers with mtime 0, uid/gid 0, mode 0644, no directory entries), not compressed:
//! everything in it is compressed already (packs and bundles are zstd, wheels are zip, packed
//! interpreters are zstd, git bundles are packs). Members, in this order:
//!
//! ```text
//! swe-ark-archive.json             the manifest: every other member's path, size and sha256
//! release.json                     the release snapshot (without its creation time)
//! index.json                       the slice of the index the release needs
//! pieces.bin                       version 2: the packs' frames and what each holds (table.rs)
//! packs/<sha256>.pack              version 2: the store's packs, whole or cut, by name
//! bundles/<id>.tar.zst             version 1 (--self-contained): each bundle's file, by id
//! objects/sha256/<ab>/<62 hex>     by id
//! mirrors/<OWNER>/<NAME>.bundle    by name, with --with-history: git bundles of the mirrors
//! ```

mod export;
mod import;
mod shard;
mod slice;
pub(crate) mod table;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::bundle::BundleError;
use crate::digest::Sha256Digest;
use crate::mirror::{MirrorError, RepoName};
use crate::release::ReleaseError;
use crate::store::{ArkError, IncomingError, IndexError, ObjectError};

pub use export::{ExportOptions, ExportReport, export};
pub use import::{ImportOptions, ImportReport, import, read_file_manifest};
pub use shard::{Outcome, ShardOutcome, ShardStamp, release_name as shard_release_name};
pub use slice::IndexSlice;
/// The piece table of a version 2 file (`pieces.bin`), for tools that read the format.
pub use table::{
    TableError as PieceTableError, decode as decode_piece_table, encode as encode_piece_table,
};

/// The `format` of the manifest.
pub const FORMAT: &str = "swe-ark-archive";
/// The store form: packs and their table (written by default).
pub const VERSION: u32 = 2;
/// The self-contained form: every bundle as its exchange file (`export --self-contained`).
pub const SELF_CONTAINED_VERSION: u32 = 1;
/// The first member.
pub const MANIFEST: &str = "swe-ark-archive.json";
pub const RELEASE: &str = "release.json";
pub const INDEX: &str = "index.json";
pub const PIECES: &str = "pieces.bin";

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
    #[error(transparent)]
    Incoming(#[from] IncomingError),
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
    /// An incremental file's base: the release a receiver must hold already.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<BaseRelease>,
    /// A shard file's stamp: the plan and shard it is of, what became of each instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardStamp>,
    /// Every member after this one, in the order they follow.
    pub members: Vec<ArchiveMember>,
}

/// The release an incremental file builds on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseRelease {
    pub release: String,
    pub root: Sha256Digest,
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

/// Each bundle's share of the packs (what its `file_size` says in a version 2 file): a pack's
/// bytes go to the first bundle, by id, that needs a piece of it. `packs`: each pack's size
/// and pieces; `needs`: each bundle's pieces.
pub(crate) fn pack_shares(
    packs: &[(u64, Vec<Sha256Digest>)],
    needs: &std::collections::BTreeMap<Sha256Digest, std::collections::BTreeSet<Sha256Digest>>,
) -> std::collections::BTreeMap<Sha256Digest, u64> {
    let mut out: std::collections::BTreeMap<Sha256Digest, u64> =
        needs.keys().map(|b| (*b, 0)).collect();
    for (size, pieces) in packs {
        if let Some((b, _)) = needs
            .iter()
            .find(|(_, need)| pieces.iter().any(|p| need.contains(p)))
        {
            *out.entry(*b).or_default() += size;
        }
    }
    out
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
    Pieces,
    Pack(Sha256Digest),
    Bundle(Sha256Digest),
    Object(Sha256Digest),
    Mirror(RepoName),
}

impl Part {
    pub(crate) fn path(&self) -> String {
        match self {
            Part::Release => RELEASE.to_string(),
            Part::Index => INDEX.to_string(),
            Part::Pieces => PIECES.to_string(),
            Part::Pack(name) => format!("packs/{}.pack", name.hex()),
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
            PIECES => Part::Pieces,
            _ => {
                if let Some(rest) = path.strip_prefix("packs/") {
                    Part::Pack(rest.strip_suffix(".pack")?.parse().ok()?)
                } else if let Some(rest) = path.strip_prefix("bundles/") {
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
            Part::Pieces,
            Part::Pack(id),
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
            "packs/x.pack",
            &format!("packs/{}", id.hex()),
            &format!("objects/sha256/{}", id.hex()),
        ] {
            assert_eq!(Part::parse(bad), None, "{bad}");
        }
    }
}
