//! Reading what a bundle holds besides its codebase (the instance, patches, context, lock,
//! logs, results) into memory, and hashing a bundle without unpacking it: what releases,
//! exports and rebuilds need from a bundle, in one pass over its stream.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::path::Path;

use crate::digest::{HashingReader, Sha256Digest};
use crate::progress::NoProgress;

use super::error::BundleError;
use super::manifest::Manifest;
use super::read::BundleSource;
use super::{FIXED_MEMBERS, FORMAT, MANIFEST, SUPPORTED_VERSIONS};

/// The largest member outside `codebase/` read into memory.
const MAX_FIXED_MEMBER: u64 = 1 << 30;

/// A bundle's members outside `codebase/`, each checked against `bundle.json`, and the id
/// of the whole stream.
#[derive(Debug, Clone)]
pub struct FixedMembers {
    pub id: Sha256Digest,
    pub tar_size: u64,
    pub manifest: Manifest,
    /// By member path (`instance.json`, `env/pylock.toml`, …).
    pub files: BTreeMap<String, Vec<u8>>,
}

fn tar_err(path: &Path, e: &io::Error) -> BundleError {
    BundleError::Tar {
        path: path.to_path_buf(),
        detail: e.to_string(),
    }
}

/// The sha256 and size of a bundle's uncompressed tar: its id, checked with nothing written
/// and nothing parsed. A match vouches for every byte of the bundle.
pub fn tar_id(source: &dyn BundleSource) -> Result<(Sha256Digest, u64), BundleError> {
    let mut hashing = HashingReader::new(source.open(&NoProgress)?);
    io::copy(&mut hashing, &mut io::sink()).map_err(|e| source.stream_error(e.to_string()))?;
    let (_, id, size) = hashing.finish();
    Ok((id, size))
}

/// The first member, which must be a `bundle.json` of a format and version this swe-ark reads.
fn read_manifest_member(
    path: &Path,
    name: &str,
    size: u64,
    entry: &mut impl Read,
) -> Result<Manifest, BundleError> {
    let not_a_bundle = |detail: String| BundleError::NotABundle {
        path: path.to_path_buf(),
        detail,
    };
    if name != MANIFEST {
        return Err(not_a_bundle(format!(
            "its first member is `{name}`, not {MANIFEST}"
        )));
    }
    if size > MAX_FIXED_MEMBER {
        return Err(not_a_bundle(format!("{MANIFEST} is {size} bytes")));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    entry
        .read_to_end(&mut bytes)
        .map_err(|e| tar_err(path, &e))?;
    let parsed: Manifest =
        serde_json::from_slice(&bytes).map_err(|e| BundleError::BadManifest {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
    if parsed.format != FORMAT {
        return Err(not_a_bundle(format!("format is `{}`", parsed.format)));
    }
    if !SUPPORTED_VERSIONS.contains(&parsed.version) {
        return Err(BundleError::UnsupportedVersion {
            path: path.to_path_buf(),
            found: parsed.version.into(),
        });
    }
    if let Some(detail) = parsed.version_mismatch() {
        return Err(BundleError::BadManifest {
            path: path.to_path_buf(),
            detail,
        });
    }
    Ok(parsed)
}

/// A fixed member's content, checked against its listing in `bundle.json` (and, for a
/// record, its own rules).
fn read_fixed_member(
    path: &Path,
    m: &Manifest,
    name: &str,
    size: u64,
    entry: &mut impl Read,
) -> Result<Vec<u8>, BundleError> {
    let refuse = |reason: String| BundleError::Refused {
        path: path.to_path_buf(),
        member: name.to_string(),
        reason,
    };
    let Some(listed) = m.member(name) else {
        return Err(refuse("bundle.json does not list it".into()));
    };
    if size != listed.size || size > MAX_FIXED_MEMBER {
        return Err(refuse(format!(
            "{size} bytes, bundle.json says {}",
            listed.size
        )));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    entry
        .read_to_end(&mut bytes)
        .map_err(|e| tar_err(path, &e))?;
    let actual = Sha256Digest::of(&bytes);
    if actual != listed.sha256 {
        return Err(refuse(format!(
            "its content hashes to {actual}, bundle.json says {}",
            listed.sha256
        )));
    }
    super::read::check_record(name.as_bytes(), &bytes).map_err(|e| refuse(e.to_string()))?;
    Ok(bytes)
}

/// Reads a bundle once: `bundle.json`, every member outside `codebase/` (each
/// checked against its size and sha256 in `bundle.json`), and the id of the whole stream,
/// which must be `expected` when given.
pub fn read_fixed_members(
    source: &dyn BundleSource,
    expected: Option<Sha256Digest>,
) -> Result<FixedMembers, BundleError> {
    let path = source.name();
    let mut archive = tar::Archive::new(HashingReader::new(source.open(&NoProgress)?));
    let not_a_bundle = |detail: String| BundleError::NotABundle {
        path: path.to_path_buf(),
        detail,
    };
    let mut manifest: Option<Manifest> = None;
    let mut files = BTreeMap::new();
    {
        let entries = archive.entries().map_err(|e| tar_err(path, &e))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| tar_err(path, &e))?;
            let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            let size = entry.header().size().map_err(|e| tar_err(path, &e))?;
            let Some(m) = &manifest else {
                manifest = Some(read_manifest_member(path, &name, size, &mut entry)?);
                continue;
            };
            if !FIXED_MEMBERS.contains(&name.as_str()) {
                continue;
            }
            let bytes = read_fixed_member(path, m, &name, size, &mut entry)?;
            files.insert(name, bytes);
        }
    }
    let manifest = manifest.ok_or_else(|| not_a_bundle("the tar archive is empty".into()))?;
    for m in &manifest.members {
        let name = String::from_utf8_lossy(&m.path);
        if FIXED_MEMBERS.contains(&name.as_ref()) && !files.contains_key(name.as_ref()) {
            return Err(BundleError::Refused {
                path: path.to_path_buf(),
                member: name.into_owned(),
                reason: "bundle.json lists it but the tar does not hold it".into(),
            });
        }
    }
    // The rest of the stream (the end-of-archive blocks) counts in the id too.
    let mut hashing = archive.into_inner();
    io::copy(&mut hashing, &mut io::sink()).map_err(|e| source.stream_error(e.to_string()))?;
    let (_, id, tar_size) = hashing.finish();
    if let Some(expected) = expected
        && expected != id
    {
        return Err(BundleError::WrongId {
            path: path.to_path_buf(),
            expected,
            actual: id,
        });
    }
    Ok(FixedMembers {
        id,
        tar_size,
        manifest,
        files,
    })
}
