//! Every path inside an archive directory, in one place (docs/ARCHITECTURE.md draws the tree).
//! A value type: replay from bundle files has an archive directory (its caches, work
//! directories, reports) with no index, so paths do not need an open [`super::Ark`].

use std::path::{Path, PathBuf};

use crate::digest::Sha256Digest;

/// The archive directory `root` and the names inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    pub fn new(root: impl Into<PathBuf>) -> Layout {
        Layout { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The SQLite index.
    pub fn index(&self) -> PathBuf {
        self.root.join("index.sqlite")
    }

    /// Content-addressed objects, `objects/sha256/ab/<62 hex>`.
    pub fn objects(&self) -> PathBuf {
        self.root.join("objects")
    }

    /// Bare mirrors, `mirrors/OWNER__NAME.git`.
    pub fn mirrors(&self) -> PathBuf {
        self.root.join("mirrors")
    }

    /// Pack files of the deduplicated store, `packs/<sha256>.pack`.
    pub fn packs(&self) -> PathBuf {
        self.root.join("packs")
    }

    /// Whole bundle files from before the deduplicated store, `bundles/<id>.tar.zst`.
    pub fn bundles(&self) -> PathBuf {
        self.root.join("bundles")
    }

    /// Release snapshots registered in the archive, `releases/<name>.json`.
    pub fn releases(&self) -> PathBuf {
        self.root.join("releases")
    }

    /// Scratch space (work directories, staged imports): on the archive's filesystem, so what
    /// is staged there moves into place by a rename.
    pub fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// Replay reports, `runs/<run-id>/`.
    pub fn runs(&self) -> PathBuf {
        self.root.join("runs")
    }

    /// Built environments, `envs/<lock id>/` (a cache).
    pub fn envs(&self) -> PathBuf {
        self.root.join("envs")
    }

    /// The built environment of lock `id`.
    pub fn env(&self, id: &Sha256Digest) -> PathBuf {
        self.envs().join(id.hex())
    }

    /// Packed interpreters, unpacked once, `pythons/<sha256>/` (a cache).
    pub fn pythons(&self) -> PathBuf {
        self.root.join("pythons")
    }

    /// uv's cache of unpacked wheels.
    pub fn uv_cache(&self) -> PathBuf {
        self.root.join("cache").join("uv")
    }

    /// Optional settings (`git_base`).
    pub fn config(&self) -> PathBuf {
        self.root.join("config.toml")
    }
}
