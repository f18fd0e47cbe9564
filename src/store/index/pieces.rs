//! The index's side of the deduplicated store: packs, pieces, and the bundles made of them
//! (docs/STORAGE.md).

use std::collections::{HashMap, HashSet};

use rusqlite::params;
use rusqlite::types::Value;

use super::bundles::{BundleRow, insert_stored_bundle};
use super::instances::upsert_instance;
use super::{Cols, Index, IndexError, WriteError};
use crate::dataset::Instance;
use crate::digest::Sha256Digest;
use crate::failpoint;

/// How many ids go into one `IN (…)` list.
const BATCH: usize = 500;

/// Where a piece is and how to read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PieceLoc {
    /// The pack's number (`packs.no`).
    pub pack: i64,
    pub offset: u64,
    /// The stored frame's bytes.
    pub length: u64,
    /// Where the piece starts in the frame's content: a frame holds one delta, or one or
    /// more whole pieces one after the other (a block).
    pub skip: u64,
    /// The content's bytes.
    pub size: u64,
    /// The piece whose content the frame is a delta against.
    pub base: Option<Sha256Digest>,
    pub depth: u32,
}

/// A pack file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PackRow {
    pub no: i64,
    /// sha256 of the file: `packs/<name>.pack`.
    pub name: String,
    pub size: u64,
    pub repo: String,
    pub created_at: i64,
}

/// A piece written to a new pack.
#[derive(Debug, Clone)]
pub struct NewPiece {
    pub id: Sha256Digest,
    pub offset: u64,
    pub length: u64,
    pub skip: u64,
    pub size: u64,
    pub base: Option<Sha256Digest>,
    pub depth: u32,
}

/// What storing one bundle wrote: a pack (none when every piece was there already), its
/// pieces, and the bundle's own piece and sketch.
#[derive(Debug, Clone)]
pub struct StoredParts {
    /// The pack file's name and size.
    pub pack: Option<(String, u64)>,
    pub pieces: Vec<NewPiece>,
    pub manifest_piece: Sha256Digest,
    pub sketch: Vec<u8>,
    pub repo: String,
}

/// A pack file brought by an import (moved in as it was, or cut down to the pieces the archive
/// lacked), and the pieces it adds.
#[derive(Debug, Clone)]
pub struct AddedPack {
    pub name: String,
    pub size: u64,
    pub repo: String,
    pub pieces: Vec<NewPiece>,
}

/// A pack written by garbage collection to replace others: the live pieces it now holds, at
/// their new places (offset, length, skip).
#[derive(Debug, Clone)]
pub struct RewrittenPack {
    pub name: String,
    pub size: u64,
    pub repo: String,
    pub moved: Vec<(Sha256Digest, u64, u64, u64)>,
}

/// A bundle's sketch, for finding similar bundles.
#[derive(Debug, Clone)]
pub struct BundleSketch {
    pub bundle: Sha256Digest,
    pub manifest_piece: Sha256Digest,
    pub sketch: Vec<u8>,
}

/// Logical and stored bytes of one repository's bundles.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RepoStorage {
    pub repo: String,
    pub bundles: u64,
    /// The bundles' uncompressed tars, summed.
    pub logical: u64,
    /// Pack files written for the repository's bundles.
    pub packs: u64,
    pub pack_bytes: u64,
    /// Bundles still kept as whole `.tar.zst` files, and their bytes.
    pub whole_files: u64,
    pub whole_file_bytes: u64,
}

/// The columns [`read_loc`] reads.
const LOC_COLUMNS: &str = "id, pack, offset, length, skip, size, base, depth";

fn read_loc(c: &Cols) -> Result<(Sha256Digest, PieceLoc), IndexError> {
    Ok((
        c.blob(0)?,
        PieceLoc {
            pack: c.get(1)?,
            offset: c.count(2)?,
            length: c.count(3)?,
            skip: c.count(4)?,
            size: c.count(5)?,
            base: c.blob_or_null(6)?,
            depth: c.get::<i64>(7)? as u32,
        },
    ))
}

fn placeholders(n: usize) -> String {
    let mut s = "?,".repeat(n);
    s.pop();
    s
}

/// The pack a bundle's storing wrote and the pieces in it.
fn insert_parts(tx: &rusqlite::Connection, parts: &StoredParts, t: i64) -> rusqlite::Result<()> {
    if let Some((name, size)) = &parts.pack {
        insert_pack(tx, name, *size, &parts.repo, &parts.pieces, t)?;
    }
    Ok(())
}

/// A pack and its pieces; a piece the index lists already keeps its place.
pub(super) fn insert_pack(
    tx: &rusqlite::Connection,
    name: &str,
    size: u64,
    repo: &str,
    pieces: &[NewPiece],
    t: i64,
) -> rusqlite::Result<()> {
    // A pack of the same name is the same bytes (another process wrote it, or an import
    // moved it in): its row is kept and shared.
    tx.execute(
        "INSERT INTO packs (name, size, repo, created_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(name) DO NOTHING",
        params![name, size as i64, repo, t],
    )?;
    let no: i64 = tx.query_row("SELECT no FROM packs WHERE name = ?1", [name], |r| r.get(0))?;
    let mut insert = tx.prepare(
        "INSERT INTO pieces (id, pack, offset, length, skip, size, base, depth)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(id) DO NOTHING",
    )?;
    for p in pieces {
        insert.execute(params![
            &p.id.0[..],
            no,
            p.offset as i64,
            p.length as i64,
            p.skip as i64,
            p.size as i64,
            p.base.as_ref().map(|b| b.0.to_vec()),
            p.depth,
        ])?;
    }
    Ok(())
}

impl Index {
    pub(super) fn blob_digest(&self, b: &[u8]) -> Result<Sha256Digest, IndexError> {
        <[u8; 32]>::try_from(b)
            .map(Sha256Digest)
            .map_err(|_| IndexError::Corrupt {
                path: self.path.clone(),
                detail: format!("a piece id of {} bytes, not 32", b.len()),
            })
    }

    /// The rows of a query on `ids`, in batches: `sql` makes the query from an `IN` list.
    fn rows_of_ids<T>(
        &self,
        ids: &[Sha256Digest],
        sql: impl Fn(&str) -> String,
        mut read: impl FnMut(&Cols) -> Result<T, IndexError>,
    ) -> Result<Vec<T>, IndexError> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(BATCH) {
            let args = chunk.iter().map(|d| Value::Blob(d.0.to_vec()));
            let sql = sql(&placeholders(chunk.len()));
            out.extend(self.rows(&sql, rusqlite::params_from_iter(args), &mut read)?);
        }
        Ok(out)
    }

    /// Which of `ids` the store holds.
    pub fn existing_pieces(
        &self,
        ids: &[Sha256Digest],
    ) -> Result<HashSet<Sha256Digest>, IndexError> {
        let held = self.rows_of_ids(
            ids,
            |list| format!("SELECT id FROM pieces WHERE id IN ({list})"),
            |c| c.blob(0),
        )?;
        Ok(held.into_iter().collect())
    }

    /// Where the pieces `ids` are; ids the store does not hold are left out.
    pub fn piece_locs(
        &self,
        ids: &[Sha256Digest],
    ) -> Result<Vec<(Sha256Digest, PieceLoc)>, IndexError> {
        self.rows_of_ids(
            ids,
            |list| format!("SELECT {LOC_COLUMNS} FROM pieces WHERE id IN ({list})"),
            read_loc,
        )
    }

    /// Every piece, by id.
    pub fn all_pieces(&self) -> Result<Vec<(Sha256Digest, PieceLoc)>, IndexError> {
        self.rows(
            &format!("SELECT {LOC_COLUMNS} FROM pieces ORDER BY id"),
            [],
            read_loc,
        )
    }

    /// Every piece of the packs `nos`, by pack.
    pub fn pieces_of_packs(
        &self,
        nos: &[i64],
    ) -> Result<HashMap<i64, Vec<(Sha256Digest, PieceLoc)>>, IndexError> {
        let mut out: HashMap<i64, Vec<(Sha256Digest, PieceLoc)>> = HashMap::new();
        for no in nos {
            let rows = self.rows(
                &format!("SELECT {LOC_COLUMNS} FROM pieces WHERE pack = ?1"),
                [no],
                read_loc,
            )?;
            out.insert(*no, rows);
        }
        Ok(out)
    }

    /// Every pack file, by number.
    pub fn packs(&self) -> Result<Vec<PackRow>, IndexError> {
        self.rows(
            "SELECT no, name, size, repo, created_at FROM packs ORDER BY no",
            [],
            |c| {
                Ok(PackRow {
                    no: c.get(0)?,
                    name: c.get(1)?,
                    size: c.count(2)?,
                    repo: c.get(3)?,
                    created_at: c.get(4)?,
                })
            },
        )
    }

    /// The sketches of the stored bundles of `repo`, by bundle id.
    pub fn sketches(&self, repo: &str) -> Result<Vec<BundleSketch>, IndexError> {
        self.rows(
            "SELECT b.id, b.manifest_piece, b.sketch FROM bundles b
             JOIN instances i ON i.instance_id = b.instance_id
             WHERE i.repo = ?1 AND b.manifest_piece IS NOT NULL AND b.sketch IS NOT NULL
             ORDER BY b.id",
            [repo],
            |c| {
                Ok(BundleSketch {
                    bundle: c.hex(0)?,
                    manifest_piece: c.blob(1)?,
                    sketch: c.get(2)?,
                })
            },
        )
    }

    /// Records the pieces a bundle's storing wrote, and no bundle: an import stores each of its
    /// bundles this way (so that the next one finds them as delta bases) and names them all in
    /// its one transaction at the end. Until then no bundle uses them, so gc may free them.
    pub fn record_pieces(&mut self, parts: &StoredParts) -> Result<(), IndexError> {
        self.write(|tx, t| Ok(insert_parts(tx, parts, t)?))
    }

    /// Records a bundle stored as pieces, in one transaction: the new pack and its pieces,
    /// then the bundle. With `instance`, the instance is added or replaced too (a pack);
    /// without, the bundle must be in the index already (a whole file being moved into the
    /// store).
    pub fn record_stored_bundle(
        &mut self,
        instance: Option<&Instance>,
        bundle: &BundleRow,
        parts: &StoredParts,
    ) -> Result<(), IndexError> {
        let path = self.path.clone();
        self.write(|tx, t| {
            insert_parts(tx, parts, t)?;
            if let Some(inst) = instance {
                upsert_instance(tx, inst, t)?;
            }
            failpoint::hit("index.mid-transaction");
            let pack_size = parts.pack.as_ref().map_or(0, |(_, s)| *s);
            if instance.is_some() {
                let stored = BundleRow {
                    file_size: pack_size,
                    manifest_piece: Some(parts.manifest_piece),
                    ..bundle.clone()
                };
                // A bundle already there gets the new pieces and time; its size changes only
                // if it was a whole file.
                insert_stored_bundle(
                    tx,
                    &stored,
                    &parts.sketch,
                    t,
                    "DO UPDATE SET packed_at = ?9,
                         file_size = CASE WHEN manifest_piece IS NULL THEN ?6 ELSE file_size END,
                         manifest_piece = ?10, sketch = ?11",
                )?;
            } else {
                let n = tx.execute(
                    "UPDATE bundles SET file_size = ?2, manifest_piece = ?3, sketch = ?4
                     WHERE id = ?1",
                    params![
                        bundle.id.hex(),
                        pack_size as i64,
                        &parts.manifest_piece.0[..],
                        parts.sketch
                    ],
                )?;
                if n != 1 {
                    return Err(WriteError::Index(IndexError::Corrupt {
                        path,
                        detail: format!("bundle {} is not in the index", bundle.id),
                    }));
                }
            }
            Ok(())
        })
    }

    /// Removes bundles from the index, in one transaction. What they alone used stays on disk
    /// until `gc`.
    pub fn remove_bundles(&mut self, ids: &[Sha256Digest]) -> Result<usize, IndexError> {
        self.write(|tx, _| {
            let mut n = 0;
            for id in ids {
                n += tx.execute("DELETE FROM bundles WHERE id = ?1", [id.hex()])?;
            }
            Ok(n)
        })
    }

    /// Garbage collection's one change to the index: the rewritten packs in, their live pieces
    /// moved into them, the dead pieces and the emptied or replaced packs out.
    pub fn apply_gc(
        &mut self,
        rewritten: &[RewrittenPack],
        dead_pieces: &[Sha256Digest],
        dead_packs: &[i64],
    ) -> Result<(), IndexError> {
        self.write(|tx, t| {
            for p in rewritten {
                tx.execute(
                    "INSERT INTO packs (name, size, repo, created_at) VALUES (?1, ?2, ?3, ?4)",
                    params![p.name, p.size as i64, p.repo, t],
                )?;
                let no = tx.last_insert_rowid();
                let mut update = tx.prepare(
                    "UPDATE pieces SET pack = ?2, offset = ?3, length = ?4, skip = ?5
                     WHERE id = ?1",
                )?;
                for (id, offset, length, skip) in &p.moved {
                    update.execute(params![
                        &id.0[..],
                        no,
                        *offset as i64,
                        *length as i64,
                        *skip as i64
                    ])?;
                }
            }
            {
                let mut delete = tx.prepare("DELETE FROM pieces WHERE id = ?1")?;
                for id in dead_pieces {
                    delete.execute([&id.0[..]])?;
                }
            }
            failpoint::hit("index.mid-transaction");
            for no in dead_packs {
                tx.execute("DELETE FROM packs WHERE no = ?1", [no])?;
            }
            Ok(())
        })
    }

    /// Logical and stored bytes per repository, by repository.
    pub fn storage_by_repo(&self) -> Result<Vec<RepoStorage>, IndexError> {
        let sums = self.rows(
            "SELECT i.repo, COUNT(*), SUM(b.tar_size),
                    SUM(b.manifest_piece IS NULL),
                    SUM(CASE WHEN b.manifest_piece IS NULL THEN b.file_size ELSE 0 END)
             FROM bundles b JOIN instances i ON i.instance_id = b.instance_id
             GROUP BY i.repo",
            [],
            |c| {
                Ok(RepoStorage {
                    repo: c.get(0)?,
                    bundles: c.count(1)?,
                    logical: c.count(2)?,
                    whole_files: c.count(3)?,
                    whole_file_bytes: c.count(4)?,
                    ..RepoStorage::default()
                })
            },
        )?;
        let mut by: HashMap<String, RepoStorage> =
            sums.into_iter().map(|s| (s.repo.clone(), s)).collect();
        for p in self.packs()? {
            let e = by.entry(p.repo.clone()).or_default();
            e.repo = p.repo;
            e.packs += 1;
            e.pack_bytes += p.size;
        }
        let mut out: Vec<RepoStorage> = by.into_values().collect();
        out.sort_by(|a, b| a.repo.cmp(&b.repo));
        Ok(out)
    }
}
