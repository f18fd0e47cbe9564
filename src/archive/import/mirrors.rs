//! The file's git bundles: read into mirrors in staging (git checks each pack), their pins
//! checked, then moved into the archive or fetched into the mirror it has.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use crate::archive::slice::IndexSlice;
use crate::archive::{ArchiveError, io_err};
use crate::mirror::{self, Mirror, MirrorError, RepoName};
use crate::progress::Progress;
use crate::store::{Ark, ImportedMirror};

use super::staging::Stager;
use super::{Staged, refused};

/// Git bundles: read into mirrors in staging (git checks each pack), pins checked. Returns
/// each mirror's bundle file and staged mirror.
pub(super) fn stage_mirrors(
    st: &Stager,
    slice: &IndexSlice,
    mirror_files: BTreeMap<RepoName, PathBuf>,
) -> Result<BTreeMap<RepoName, (PathBuf, PathBuf)>, ArchiveError> {
    let refuse = |detail: String| refused(st.file, detail);
    let mut mirrors = BTreeMap::new();
    let url_of: BTreeMap<&str, &str> = slice
        .mirrors
        .iter()
        .map(|m| (m.name.as_str(), m.url.as_str()))
        .collect();
    for (name, bundle_file) in mirror_files {
        let url = url_of.get(name.as_str()).copied().filter(|u| !u.is_empty());
        let (m, _) = mirror::import_bundle(
            &st.staging.join("repos"),
            &bundle_file,
            &name,
            url,
            st.progress,
        )
        .map_err(|e| refuse(format!("mirror {name}: {e}")))?;
        for pin in slice.pins.iter().filter(|p| p.mirror == name.as_str()) {
            let at = m
                .repo
                .refname_to_id(&pin.reference)
                .ok()
                .map(|o| o.to_string());
            if at.as_deref() != Some(pin.commit.as_str()) {
                return Err(refuse(format!(
                    "mirror {name} lacks pin {} at {}",
                    pin.reference, pin.commit
                )));
            }
        }
        mirrors.insert(name, (bundle_file, m.path.clone()));
    }
    Ok(mirrors)
}

/// The staged mirrors moved into place (or, where the archive has the mirror, the git bundle
/// fetched into it). Returns their index rows.
pub(super) fn install_mirrors(
    ark: &Ark,
    staged: &Staged,
    progress: &dyn Progress,
) -> Result<Vec<ImportedMirror>, ArchiveError> {
    let mut mirror_rows = Vec::new();
    let mirrors_dir = ark.mirrors_dir();
    for (name, (bundle_file, staged_repo)) in &staged.mirrors {
        let dest = Mirror::dir(&mirrors_dir, name);
        if dest.exists() {
            mirror::import_bundle(&mirrors_dir, bundle_file, name, None, progress)?;
        } else {
            fs::create_dir_all(&mirrors_dir).map_err(io_err(&mirrors_dir))?;
            fs::rename(staged_repo, &dest).map_err(io_err(&dest))?;
        }
        let m = Mirror::open(&mirrors_dir, name)?;
        let refs = mirror::upstream_refs(&m.repo).map_err(|source| MirrorError::Git {
            name: name.to_string(),
            source,
        })?;
        mirror_rows.push(ImportedMirror {
            name: name.to_string(),
            url: m.url(),
            refs_sha256: mirror::refs_hash(&refs),
            refs,
            size: mirror::disk_size(&m.path),
        });
    }
    Ok(mirror_rows)
}
