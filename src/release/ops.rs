//! What `release create`, `release ls` and `release diff` do around a snapshot: register it in
//! the archive and write its file (refusing to replace another release unless forced), read
//! the registered ones, open the archives a diff reads bundles from; and which bundles `migrate`
//! packs again.

use std::path::{Path, PathBuf};

use crate::dataset::{Selection, SelectionError};
use crate::digest::Sha256Digest;
use crate::store::{Ark, ArkError, BundleRow, IndexError, Layout};

use super::{ReleaseError, Snapshot};

#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    #[error(
        "the archive holds release {name} with root {old}, not this one ({new}); give --force to \
         replace it, or choose another name"
    )]
    RegisteredDiffers {
        name: String,
        old: Sha256Digest,
        new: Sha256Digest,
    },
    #[error(
        "`{}` holds release {name} with root {old}, not this one ({new}); give --force to replace it",
        .path.display()
    )]
    FileDiffers {
        path: PathBuf,
        name: String,
        old: Sha256Digest,
        new: Sha256Digest,
    },
    #[error(
        "`{}` exists and is not a release snapshot ({source}); give --force to replace it",
        .path.display()
    )]
    NotASnapshot {
        path: PathBuf,
        #[source]
        source: Box<ReleaseError>,
    },
    #[error("cannot create `{}`: {source}", .path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write `{}`: {source}", .path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open `{}`: {source}", .path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: ArkError,
    },
    #[error(transparent)]
    Ark(#[from] ArkError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Selection(#[from] SelectionError),
}

/// The snapshot file of release `name` registered in `ark`.
pub fn registered_path(ark: &Ark, name: &str) -> PathBuf {
    ark.releases_dir().join(format!("{name}.json"))
}

/// Registers `snap` in `ark` (from then on gc and `rm` keep every bundle it names) and writes
/// it to `path`. A registered release or a file at `path` that holds another release is
/// replaced only with `force`. Returns whether `path` already held this very release (and was
/// kept as it was).
pub fn publish(ark: &Ark, snap: &Snapshot, path: &Path, force: bool) -> Result<bool, OpsError> {
    let same_registered = match Snapshot::read(&registered_path(ark, &snap.name)) {
        Ok(old) if old.root == snap.root => true,
        Ok(old) if !force => {
            return Err(OpsError::RegisteredDiffers {
                name: old.name,
                old: old.root,
                new: snap.root,
            });
        }
        _ => false,
    };
    if !same_registered {
        ark.register_release(&snap.name, &snap.to_bytes())?;
    }
    if path.exists() {
        match Snapshot::read(path) {
            Ok(old) if old.root == snap.root && old.name == snap.name => return Ok(true),
            Ok(old) if !force => {
                return Err(OpsError::FileDiffers {
                    path: path.to_path_buf(),
                    name: old.name,
                    old: old.root,
                    new: snap.root,
                });
            }
            Err(source) if !force => {
                return Err(OpsError::NotASnapshot {
                    path: path.to_path_buf(),
                    source: Box::new(source),
                });
            }
            _ => {}
        }
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| OpsError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    crate::fsutil::write_atomic(path, &snap.to_bytes()).map_err(|source| OpsError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(false)
}

/// The releases registered in `ark`, each with its snapshot file, by name.
pub fn registered(ark: &Ark) -> Result<Vec<(PathBuf, Snapshot)>, ReleaseError> {
    let mut out = Vec::new();
    for name in ark.releases()? {
        let path = registered_path(ark, &name);
        let snap = Snapshot::read(&path)?;
        out.push((path, snap));
    }
    Ok(out)
}

/// The archives a diff reads bundles from: `ark` when it is one (it has an index), then each
/// of `others`.
pub fn open_arks(ark: &Path, others: &[PathBuf]) -> Result<Vec<Ark>, OpsError> {
    let mut arks = Vec::new();
    if Layout::new(ark).index().is_file() {
        arks.push(Ark::open(ark)?);
    }
    for dir in others {
        arks.push(Ark::open(dir).map_err(|source| OpsError::Open {
            path: dir.clone(),
            source,
        })?);
    }
    Ok(arks)
}

/// The bundles `migrate` packs again: the newest bundle of each instance (of `ids`; none: of
/// every instance with a bundle) when it is version 1 or 2.
pub fn migration_candidates(ark: &Ark, ids: &[String]) -> Result<Vec<BundleRow>, OpsError> {
    let mut newest: std::collections::BTreeMap<String, BundleRow> = Default::default();
    for r in ark.index().bundles()? {
        match newest.get(&r.instance_id) {
            Some(n) if n.packed_at >= r.packed_at => {}
            _ => {
                newest.insert(r.instance_id.clone(), r);
            }
        }
    }
    Ok(Selection::ids(ids.to_vec())
        .pick(
            newest.into_values().collect(),
            "with no bundle in the archive",
        )?
        .into_iter()
        .filter(|r| r.format_version < crate::bundle::VERSION_3)
        .collect())
}
