//! What an imported archive file adds, in one transaction.

use std::collections::BTreeMap;

use crate::dataset::Instance;
use crate::digest::Sha256Digest;
use crate::failpoint;

use super::bundles::{BundleRow, insert_stored_bundle};
use super::installed::{InstalledStateRow, insert_installed_state};
use super::instances::upsert_instance;
use super::mirrors::{PinRow, upsert_mirror, upsert_pin};
use super::objects::{LockRow, insert_lock, insert_object};
use super::validations::{ValidationRow, upsert_validation};
use super::{AddedPack, Index, IndexError, pieces};

/// A mirror as an imported archive brings it: name, URL, refs (pins left out) and size.
#[derive(Debug, Clone)]
pub struct ImportedMirror {
    pub name: String,
    pub url: String,
    pub refs: BTreeMap<String, String>,
    pub refs_sha256: Sha256Digest,
    pub size: u64,
}

/// The rows an imported archive adds (`import-archive`), written in one transaction. Times
/// are the import's.
#[derive(Debug, Clone, Default)]
pub struct ImportRows {
    pub instances: Vec<Instance>,
    /// The bundles new to the archive, each with its sketch: their pieces are recorded
    /// already ([`Index::record_pieces`]) or come in `packs`; `manifest_piece` names the
    /// `bundle.json` piece.
    /// A bundle the archive holds already is left as it is.
    pub bundles: Vec<(BundleRow, Vec<u8>)>,
    /// Packs a file in the store form brings, with their pieces (docs/RELEASES.md).
    pub packs: Vec<AddedPack>,
    /// id, size, kind.
    pub objects: Vec<(Sha256Digest, u64, String)>,
    pub locks: Vec<LockRow>,
    pub validations: Vec<ValidationRow>,
    pub mirrors: Vec<ImportedMirror>,
    pub pins: Vec<PinRow>,
    /// Installed states (`export --installed-states`), their objects among `objects`.
    pub installed_states: Vec<InstalledStateRow>,
}

impl Index {
    /// Records what an imported archive brings, all in one transaction: either every row is
    /// in, or none. Objects, locks and installed states already present are kept; instances,
    /// bundles, validations, mirrors and pins are added or replaced.
    pub fn import_rows(&mut self, rows: &ImportRows) -> Result<(), IndexError> {
        self.write(|tx, t| {
            for p in &rows.packs {
                pieces::insert_pack(tx, &p.name, p.size, &p.repo, &p.pieces, t)?;
            }
            for (id, size, kind) in &rows.objects {
                insert_object(tx, id, *size, kind, t)?;
            }
            for inst in &rows.instances {
                upsert_instance(tx, inst, t)?;
            }
            for (b, sketch) in &rows.bundles {
                // One already there is kept.
                insert_stored_bundle(tx, b, sketch, t, "DO NOTHING")?;
            }
            failpoint::hit("index.mid-transaction");
            for lock in &rows.locks {
                insert_lock(tx, lock, t)?;
            }
            for v in &rows.validations {
                upsert_validation(tx, v, t)?;
            }
            for m in &rows.mirrors {
                upsert_mirror(tx, &m.name, &m.url, &m.refs, &m.refs_sha256, m.size, t)?;
            }
            for pin in &rows.pins {
                upsert_pin(tx, pin, t)?;
            }
            for state in &rows.installed_states {
                insert_installed_state(tx, state, t)?;
            }
            Ok(())
        })
    }
}
