//! Every path inside an archive directory, in one place (docs/ARCHITECTURE.md draws the tree).
//! A value type: replay from bundle files has an archive directory (its caches, work
//! directories, reports) with no index, so paths do not need an open [`super::Ark`].

use std::path::{Path, PathBuf};

use crate::digest::Sha256Digest;

/// `name = "relative/path";` → `pub fn name(&self) -> PathBuf`, the path inside the archive.
macro_rules! paths {
    ($($(#[$doc:meta])* $name:ident = $rel:literal;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self) -> PathBuf {
                self.root.join($rel)
            }
        )*
    };
}

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

    paths! {
        /// The SQLite index.
        index = "index.sqlite";
        /// Content-addressed objects, `objects/sha256/ab/<62 hex>`.
        objects = "objects";
        /// Bare mirrors, `mirrors/OWNER__NAME.git`.
        mirrors = "mirrors";
        /// Pack files of the deduplicated store, `packs/<sha256>.pack`.
        packs = "packs";
        /// Whole bundle files from before the deduplicated store, `bundles/<id>.tar.zst`.
        bundles = "bundles";
        /// Release snapshots registered in the archive, `releases/<name>.json`.
        releases = "releases";
        /// Scratch space (work directories, staged imports): on the archive's filesystem, so what
        /// is staged there moves into place by a rename.
        tmp = "tmp";
        /// Replay reports, `runs/<run-id>/`.
        runs = "runs";
        /// Built environments, `envs/<lock id>/` (a cache).
        envs = "envs";
        /// Bundles' git work trees, made once and shown to each run under a private layer,
        /// `trees/<owner>-<bundle id>/tree/` (a cache).
        trees = "trees";
        /// Packed interpreters, unpacked once, `pythons/<sha256>/` (a cache).
        pythons = "pythons";
        /// Packed Rust toolchains, unpacked once, `toolchains/<files sha256>/` (a cache).
        toolchains = "toolchains";
        /// Which object packs which toolchain, `cache/packed-toolchains/<files sha256>.json`
        /// (a cache: packing it again gives the same object, only slower).
        packed_toolchains = "cache/packed-toolchains";
        /// Which object packs which interpreter, `cache/packed-pythons/<key>.json` (a cache:
        /// packing a prefix again gives the same object, only slower).
        packed_pythons = "cache/packed-pythons";
        /// Packs of another archive's bucket fetched for a read of that archive (a read-only
        /// seed's), `cache/fetched-packs/<sha256>.pack`.
        fetched_packs = "cache/fetched-packs";
        /// uv's cache of unpacked wheels.
        uv_cache = "cache/uv";
        /// What ensurepip installed, once per interpreter and layout, copied into later
        /// environments (`env::pipseed`), `cache/pip-seeds/<key>/` (a cache).
        pip_seeds = "cache/pip-seeds";
        /// Optional settings (`git_base`, `store_url`).
        config = "config.toml";
    }

    /// The built environment of lock `id`.
    pub fn env(&self, id: &Sha256Digest) -> PathBuf {
        self.envs().join(id.hex())
    }
}
