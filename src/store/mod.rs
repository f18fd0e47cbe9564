//! The archive directory: its layout, the content-addressed object store, the deduplicated
//! bundle store and the SQLite index.
//!
//! ```text
//! ark/
//!   index.sqlite             instances, bundles, pieces, packs, objects (WAL; schema version
//!                            in user_version)
//!   packs/<sha256>.pack      bundle contents, deduplicated (docs/STORAGE.md)
//!   objects/sha256/ab/cd…    objects by sha256 (first two hex digits, then the other 62)
//!   releases/<name>.json     release snapshots whose bundles gc keeps
//!   bundles/<sha256>.tar.zst whole bundle files from before the deduplicated store
//!   config.toml              optional settings (`git_base`, `store_url`)
//! ```
//!
//! With a bucket (`store_url`, `--store`), `objects/` and `packs/` are a cache of it
//! ([`bucket`]).

mod ark;
mod bucket;
mod carry;
mod check;
mod config;
mod gc;
mod incoming;
mod index;
mod layout;
mod lock;
mod mirrors;
mod objects;
mod pieces;
mod put;
mod stats;
mod stored;
mod submodules;

pub use ark::{Ark, ArkBundle, ArkError};
pub use bucket::{Bucket, PushReport};
pub use carry::{Carried, CarriedPack, Frame, FrameBase, FrameHolds};
pub use check::{Checked, check_bundle_file};
pub use config::{ConfigError, git_base, set_store_flag, store_url};
pub use gc::{GcReport, release_names};
pub use incoming::{Incoming, IncomingError, IncomingPack, sketch_of};
pub use index::{
    AddedPack, BundleRow, BundleSketch, INSTALLED_KIND, ImportRows, ImportedMirror, Index,
    IndexError, InstalledStateRow, InstanceRow, LockRow, MirrorRow, ObjectRow, PackRow, PieceLoc,
    PinRow, RepoStorage, SCHEMA_VERSION, ValidationRow,
};
pub use layout::Layout;
pub use lock::StoreLock;
pub use mirrors::MirrorStateError;
pub use objects::{ObjectError, ObjectStore, VerifyingReader};
pub use pieces::{MAX_DEPTH, PieceError};
pub use stats::{StorageStats, dedup_ratio};
pub use stored::{Contents, RebuiltTar, StoredBundle};
pub use submodules::{SubmoduleUse, SubmodulesMirrored};

impl crate::dataset::OfInstance for BundleRow {
    fn instance_id(&self) -> &str {
        &self.instance_id
    }
}
