//! The archive directory: its layout, the content-addressed object store and the SQLite index.
//!
//! ```text
//! ark/
//!   index.sqlite             instances, bundles, objects (WAL; schema version in user_version)
//!   objects/sha256/ab/cd…    objects by sha256 (first two hex digits, then the other 62)
//!   bundles/<sha256>.tar.zst
//! ```

mod ark;
mod index;
mod objects;

pub use ark::{Ark, ArkError};
pub use index::{
    BundleRow, ImportRows, ImportedMirror, Index, IndexError, InstanceRow, LockRow, MirrorRow,
    ObjectRow, PinRow, SCHEMA_VERSION, ValidationRow,
};
pub use objects::{ObjectError, ObjectStore, VerifyingReader};
