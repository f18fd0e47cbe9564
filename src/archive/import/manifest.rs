//! The file's manifest, its first member: read alone, and checked against what an archive
//! file of its version may hold.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use crate::archive::{
    ArchiveError, ArchiveManifest, FORMAT, INDEX, MANIFEST, PIECES, Part, RELEASE,
    SELF_CONTAINED_VERSION, VERSION,
};

use super::{first_line, read_small, refused};

/// The file's manifest, its first member, and the parts it lists (the release and the index
/// slice first, no member twice).
pub(super) fn read_manifest(
    file: &Path,
    entries: &mut tar::Entries<BufReader<File>>,
) -> Result<(ArchiveManifest, Vec<Part>), ArchiveError> {
    let refuse = |detail: String| refused(file, detail);
    let mut first = match entries.next() {
        None => return Err(refuse("it is empty".into())),
        Some(Err(e)) => {
            return Err(refuse(format!(
                "it is not a swe-ark archive file (not a tar archive: {})",
                first_line(&e)
            )));
        }
        Some(Ok(e)) => e,
    };
    let name = String::from_utf8_lossy(&first.path_bytes()).into_owned();
    if name != MANIFEST {
        return Err(refuse(format!(
            "its first member is `{name}`, not {MANIFEST}: it is not a swe-ark archive file"
        )));
    }
    let size = first.header().size().unwrap_or(u64::MAX);
    let manifest_bytes = read_small(&mut first, size)
        .map_err(|e| refuse(format!("{MANIFEST} cannot be read: {e}")))?;
    if manifest_bytes.len() as u64 != size {
        return Err(refuse(format!(
            "{MANIFEST} is cut short ({} of {size} bytes): the file is truncated",
            manifest_bytes.len()
        )));
    }
    drop(first);
    let manifest: ArchiveManifest = serde_json::from_slice(&manifest_bytes)
        .map_err(|e| refuse(format!("{MANIFEST} is not valid: {e}")))?;
    if manifest.format != FORMAT {
        return Err(refuse(format!(
            "{MANIFEST} has format `{}`, not `{FORMAT}`",
            manifest.format
        )));
    }
    if manifest.version != VERSION && manifest.version != SELF_CONTAINED_VERSION {
        return Err(refuse(format!(
            "it is archive format version {}; this swe-ark reads versions \
             {SELF_CONTAINED_VERSION} and {VERSION}",
            manifest.version
        )));
    }
    if manifest.version == SELF_CONTAINED_VERSION && manifest.base.is_some() {
        return Err(refuse(format!(
            "{MANIFEST} names a base release, which only version {VERSION} files have"
        )));
    }
    let mut parts = Vec::new();
    let mut seen = BTreeSet::new();
    for m in &manifest.members {
        let part = Part::parse(&m.path).ok_or_else(|| {
            refuse(format!(
                "{MANIFEST} lists `{}`, which is no member an archive holds",
                m.path
            ))
        })?;
        if !seen.insert(m.path.clone()) {
            return Err(refuse(format!("{MANIFEST} lists `{}` twice", m.path)));
        }
        parts.push(part);
    }
    if parts.first() != Some(&Part::Release) || parts.get(1) != Some(&Part::Index) {
        return Err(refuse(format!(
            "{MANIFEST} must list {RELEASE} and then {INDEX} first"
        )));
    }
    let store_form = manifest.version == VERSION;
    if store_form && parts.get(2) != Some(&Part::Pieces) {
        return Err(refuse(format!(
            "{MANIFEST} of a version {VERSION} file must list {PIECES} third"
        )));
    }
    for p in &parts[2..] {
        let fits = match p {
            Part::Release | Part::Index => false,
            Part::Pieces | Part::Pack(_) => store_form,
            Part::Bundle(_) => !store_form,
            Part::Object(_) | Part::Mirror(_) => true,
        };
        if !fits {
            return Err(refuse(format!(
                "{MANIFEST} of a version {} file lists `{}`, which that version does not hold",
                manifest.version,
                p.path()
            )));
        }
    }
    Ok((manifest, parts))
}
