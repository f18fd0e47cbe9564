//! Bundles' rows: each bundle's instance, sizes and (in the deduplicated store) the piece
//! holding its bundle.json.

use rusqlite::{Connection, params};

use crate::digest::{GitOid, Sha256Digest};

use super::{Index, IndexError};

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BundleRow {
    pub id: Sha256Digest,
    pub instance_id: String,
    pub format_version: u32,
    pub codebase_tree: GitOid,
    pub tar_size: u64,
    pub file_size: u64,
    pub member_count: u64,
    pub codebase_files: u64,
    pub packed_at: i64,
    /// The piece holding its `bundle.json`, when the bundle is in the deduplicated store;
    /// `None` for a whole `.tar.zst` file kept from before (`bundles/<id>.tar.zst`).
    pub manifest_piece: Option<Sha256Digest>,
}

/// The row of a bundle whose pieces are stored, packed at `t`; `on_conflict` says what
/// becomes of one already there.
pub(super) fn insert_stored_bundle(
    conn: &Connection,
    b: &BundleRow,
    sketch: &[u8],
    t: i64,
    on_conflict: &str,
) -> rusqlite::Result<()> {
    conn.execute(
        &format!(
            "INSERT INTO bundles (id, instance_id, format_version, codebase_tree, tar_size,
                 file_size, member_count, codebase_files, packed_at, manifest_piece, sketch)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
             ON CONFLICT(id) {on_conflict}"
        ),
        params![
            b.id.hex(),
            b.instance_id,
            b.format_version,
            b.codebase_tree.hex(),
            b.tar_size as i64,
            b.file_size as i64,
            b.member_count as i64,
            b.codebase_files as i64,
            t,
            b.manifest_piece.map(|m| m.0.to_vec()),
            sketch,
        ],
    )
    .map(|_| ())
}

const BUNDLE_COLUMNS: &str = "id, instance_id, format_version, codebase_tree, tar_size, \
                              file_size, member_count, codebase_files, packed_at, manifest_piece";

impl Index {
    fn bundles_where(&self, clause: &str, arg: &str) -> Result<Vec<BundleRow>, IndexError> {
        let sql = format!(
            "SELECT {BUNDLE_COLUMNS} FROM bundles {clause} ORDER BY instance_id, packed_at DESC, id"
        );
        let args: Vec<&str> = if clause.contains("?1") {
            vec![arg]
        } else {
            Vec::new()
        };
        self.rows(&sql, rusqlite::params_from_iter(args), |c| {
            Ok(BundleRow {
                id: c.hex(0)?,
                instance_id: c.get(1)?,
                format_version: c.get(2)?,
                codebase_tree: c.hex(3)?,
                tar_size: c.count(4)?,
                file_size: c.count(5)?,
                member_count: c.count(6)?,
                codebase_files: c.count(7)?,
                packed_at: c.get(8)?,
                manifest_piece: c.blob_or_null(9)?,
            })
        })
    }

    /// Every bundle, by instance id, newest first within an instance.
    pub fn bundles(&self) -> Result<Vec<BundleRow>, IndexError> {
        self.bundles_where("", "")
    }

    pub fn bundles_of_instance(&self, instance_id: &str) -> Result<Vec<BundleRow>, IndexError> {
        self.bundles_where("WHERE instance_id = ?1", instance_id)
    }

    /// Bundles whose id starts with `prefix` (lowercase hex).
    pub fn bundles_with_prefix(&self, prefix: &str) -> Result<Vec<BundleRow>, IndexError> {
        if !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(Vec::new());
        }
        self.bundles_where("WHERE id LIKE ?1 || '%'", &prefix.to_ascii_lowercase())
    }
}
