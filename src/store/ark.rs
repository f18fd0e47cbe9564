//! An archive directory and the operations that touch both its files and its index.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::bundle::{self, BundleError, PackInputs, PackOptions, PackedBundle};
use crate::digest::Sha256Digest;
use crate::progress::Progress;

use super::index::{BundleRow, Index, IndexError};
use super::objects::{ObjectError, ObjectStore};

#[derive(Debug, thiserror::Error)]
pub enum ArkError {
    #[error(
        "`{0}` is not a swe-ark archive (it has no index.sqlite); pack something into it first, \
         or point --ark / SWE_ARK_HOME at an archive"
    )]
    NotAnArchive(PathBuf),
    #[error(
        "no bundle in the archive matches `{0}` (give a bundle id, a unique prefix of one, or an instance id)"
    )]
    NoSuchBundle(String),
    #[error("`{query}` matches {} bundles ({}); give more digits", .candidates.len(), .candidates.join(", "))]
    Ambiguous {
        query: String,
        candidates: Vec<String>,
    },
    #[error("archive I/O on `{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Bundle(#[from] BundleError),
    #[error(transparent)]
    Object(#[from] ObjectError),
}

pub struct Ark {
    root: PathBuf,
    index: Index,
}

impl Ark {
    /// Opens the archive at `root`, creating it if it does not exist.
    pub fn create(root: &Path) -> Result<Ark, ArkError> {
        for dir in [
            root.to_path_buf(),
            root.join("bundles"),
            root.join("objects"),
        ] {
            fs::create_dir_all(&dir).map_err(|source| ArkError::Io { path: dir, source })?;
        }
        Self::open(root)
    }

    /// Opens an existing archive.
    pub fn open(root: &Path) -> Result<Ark, ArkError> {
        let index_path = root.join("index.sqlite");
        if !index_path.is_file() && !root.join("bundles").is_dir() {
            return Err(ArkError::NotAnArchive(root.to_path_buf()));
        }
        let index = Index::open(&index_path)?;
        Ok(Ark {
            root: root.to_path_buf(),
            index,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    pub fn index_mut(&mut self) -> &mut Index {
        &mut self.index
    }

    pub fn objects(&self) -> ObjectStore {
        ObjectStore::new(self.root.join("objects"))
    }

    /// Bare mirrors, `mirrors/OWNER__NAME.git`.
    pub fn mirrors_dir(&self) -> PathBuf {
        self.root.join("mirrors")
    }

    pub fn bundles_dir(&self) -> PathBuf {
        self.root.join("bundles")
    }

    /// Where bundle `id`'s bytes are (a `.tar.zst` file). Readers of bundle bytes go through
    /// this, so the way bundles are stored can change in one place.
    pub fn bundle_path(&self, id: &Sha256Digest) -> PathBuf {
        self.bundles_dir()
            .join(format!("{}{}", id.hex(), bundle::FILE_SUFFIX))
    }

    /// Moves `staged`, a complete bundle file already checked to be bundle `id` and synced to
    /// disk, into the archive (on the same filesystem). A bundle the archive already holds is
    /// kept as it is: the same id is the same content. Returns whether the file was moved.
    /// The caller records it in the index afterwards (file before row).
    pub fn install_bundle(&self, staged: &Path, id: &Sha256Digest) -> Result<bool, ArkError> {
        let dest = self.bundle_path(id);
        if dest.is_file() {
            return Ok(false);
        }
        let dir = self.bundles_dir();
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ArkError::Io { path, source }
        };
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        fs::rename(staged, &dest).map_err(io_err(&dest))?;
        Ok(true)
    }

    /// Scratch space inside the archive (work directories, staged imports): on the archive's
    /// filesystem, so what is staged there moves into place by a rename.
    pub fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// Packs a bundle into the archive and records it. The bundle file is in place before the
    /// index names it, so a crash in between leaves a complete but unindexed file, never an
    /// index row without its file.
    pub fn pack(
        &mut self,
        inputs: &PackInputs,
        options: &PackOptions,
        progress: &dyn Progress,
    ) -> Result<PackedBundle, ArkError> {
        let packed = bundle::pack_to_dir(inputs, &self.bundles_dir(), options, progress)?;
        crate::failpoint::hit("pack.before-index");
        let row = BundleRow {
            id: packed.id,
            instance_id: inputs.instance.instance_id.clone(),
            format_version: bundle::VERSION,
            codebase_tree: packed.codebase_tree,
            tar_size: packed.tar_size,
            file_size: packed.file_size,
            member_count: packed.member_count as u64,
            codebase_files: packed.codebase_files as u64,
            packed_at: 0,
        };
        self.index.record_bundle(inputs.instance, &row)?;
        Ok(packed)
    }

    /// Finds one bundle by full id, unique id prefix (4 hex digits at least) or instance id
    /// (its newest bundle).
    pub fn resolve(&self, query: &str) -> Result<BundleRow, ArkError> {
        let by_instance = self.index.bundles_of_instance(query)?;
        if let Some(newest) = by_instance.into_iter().max_by_key(|b| b.packed_at) {
            return Ok(newest);
        }
        if query.len() >= 4 {
            let mut matches = self.index.bundles_with_prefix(query)?;
            match matches.len() {
                0 => {}
                1 => return Ok(matches.remove(0)),
                _ => {
                    return Err(ArkError::Ambiguous {
                        query: query.to_string(),
                        candidates: matches.iter().map(|b| b.id.short()).collect(),
                    });
                }
            }
        }
        Err(ArkError::NoSuchBundle(query.to_string()))
    }

    /// Bundle files in `bundles/` that the index does not name (a crash between the rename and
    /// the index commit leaves one), and temporary files of interrupted writes.
    pub fn strays(&self) -> Result<(Vec<PathBuf>, Vec<PathBuf>), ArkError> {
        let dir = self.bundles_dir();
        let io_err = |source| ArkError::Io {
            path: dir.clone(),
            source,
        };
        let known: std::collections::HashSet<Sha256Digest> =
            self.index.bundles()?.into_iter().map(|b| b.id).collect();
        let mut unindexed = Vec::new();
        match fs::read_dir(&dir) {
            Ok(rd) => {
                for entry in rd {
                    let path = entry.map_err(io_err)?.path();
                    if let Some(id) = bundle::id_from_file_name(&path)
                        && !known.contains(&id)
                    {
                        unindexed.push(path);
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(e)),
        }
        unindexed.sort();
        let mut temps = crate::fsutil::stale_temp_files(&dir).map_err(io_err)?;
        temps.extend(
            crate::fsutil::stale_temp_files(&self.root.join("objects/sha256")).map_err(io_err)?,
        );
        Ok((unindexed, temps))
    }
}
