//! The index's side of the deduplicated store: packs, pieces, and the bundles made of them
//! (docs/STORAGE.md).

use std::collections::{HashMap, HashSet};

use rusqlite::params;
use rusqlite::types::Value;

use super::{BundleRow, Index, IndexError, now, upsert_instance};
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

fn placeholders(n: usize) -> String {
    let mut s = "?,".repeat(n);
    s.pop();
    s
}

/// The pack a bundle's storing wrote and the pieces in it.
fn insert_parts(tx: &rusqlite::Connection, parts: &StoredParts, t: i64) -> rusqlite::Result<()> {
    if let Some((name, size)) = &parts.pack {
        tx.execute(
            "INSERT INTO packs (name, size, repo, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![name, *size as i64, parts.repo, t],
        )?;
        let no = tx.last_insert_rowid();
        let mut insert = tx.prepare(
            "INSERT INTO pieces (id, pack, offset, length, skip, size, base, depth)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(id) DO NOTHING",
        )?;
        for p in &parts.pieces {
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

    /// Which of `ids` the store holds.
    pub fn existing_pieces(
        &self,
        ids: &[Sha256Digest],
    ) -> Result<HashSet<Sha256Digest>, IndexError> {
        let mut out = HashSet::new();
        for chunk in ids.chunks(BATCH) {
            let sql = format!(
                "SELECT id FROM pieces WHERE id IN ({})",
                placeholders(chunk.len())
            );
            let mut stmt = self.conn.prepare_cached(&sql).map_err(self.err())?;
            let args: Vec<Value> = chunk.iter().map(|d| Value::Blob(d.0.to_vec())).collect();
            let rows = stmt
                .query_map(rusqlite::params_from_iter(args), |r| r.get::<_, Vec<u8>>(0))
                .map_err(self.err())?;
            for row in rows {
                out.insert(self.blob_digest(&row.map_err(self.err())?)?);
            }
        }
        Ok(out)
    }

    /// Where the pieces `ids` are; ids the store does not hold are left out.
    pub fn piece_locs(
        &self,
        ids: &[Sha256Digest],
    ) -> Result<Vec<(Sha256Digest, PieceLoc)>, IndexError> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(BATCH) {
            let sql = format!(
                "SELECT id, pack, offset, length, skip, size, base, depth FROM pieces \
                 WHERE id IN ({})",
                placeholders(chunk.len())
            );
            let args: Vec<Value> = chunk.iter().map(|d| Value::Blob(d.0.to_vec())).collect();
            self.collect_locs(&sql, args, &mut out)?;
        }
        Ok(out)
    }

    /// Every piece, by id.
    pub fn all_pieces(&self) -> Result<Vec<(Sha256Digest, PieceLoc)>, IndexError> {
        let mut out = Vec::new();
        self.collect_locs(
            "SELECT id, pack, offset, length, skip, size, base, depth FROM pieces ORDER BY id",
            Vec::new(),
            &mut out,
        )?;
        Ok(out)
    }

    fn collect_locs(
        &self,
        sql: &str,
        args: Vec<Value>,
        out: &mut Vec<(Sha256Digest, PieceLoc)>,
    ) -> Result<(), IndexError> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(self.err())?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args), |r| {
                Ok((
                    r.get::<_, Vec<u8>>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, i64>(5)?,
                    r.get::<_, Option<Vec<u8>>>(6)?,
                    r.get::<_, i64>(7)?,
                ))
            })
            .map_err(self.err())?;
        for row in rows {
            let (id, pack, offset, length, skip, size, base, depth) = row.map_err(self.err())?;
            out.push((
                self.blob_digest(&id)?,
                PieceLoc {
                    pack,
                    offset: offset as u64,
                    length: length as u64,
                    skip: skip as u64,
                    size: size as u64,
                    base: base.map(|b| self.blob_digest(&b)).transpose()?,
                    depth: depth as u32,
                },
            ));
        }
        Ok(())
    }

    /// Every pack file, by number.
    pub fn packs(&self) -> Result<Vec<PackRow>, IndexError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT no, name, size, repo, created_at FROM packs ORDER BY no")
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |r| {
                Ok(PackRow {
                    no: r.get(0)?,
                    name: r.get(1)?,
                    size: r.get::<_, i64>(2)? as u64,
                    repo: r.get(3)?,
                    created_at: r.get(4)?,
                })
            })
            .map_err(self.err())?;
        rows.collect::<Result<_, _>>().map_err(self.err())
    }

    /// The sketches of the stored bundles of `repo`, by bundle id.
    pub fn sketches(&self, repo: &str) -> Result<Vec<BundleSketch>, IndexError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT b.id, b.manifest_piece, b.sketch FROM bundles b
                 JOIN instances i ON i.instance_id = b.instance_id
                 WHERE i.repo = ?1 AND b.manifest_piece IS NOT NULL AND b.sketch IS NOT NULL
                 ORDER BY b.id",
            )
            .map_err(self.err())?;
        let rows = stmt
            .query_map([repo], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Vec<u8>>(1)?,
                    r.get::<_, Vec<u8>>(2)?,
                ))
            })
            .map_err(self.err())?;
        let mut out = Vec::new();
        for row in rows {
            let (id, manifest, sketch) = row.map_err(self.err())?;
            out.push(BundleSketch {
                bundle: self.digest(id)?,
                manifest_piece: self.blob_digest(&manifest)?,
                sketch,
            });
        }
        Ok(out)
    }

    /// Records the pieces a bundle's storing wrote, and no bundle: an import stores each of its
    /// bundles this way (so that the next one finds them as delta bases) and names them all in
    /// its one transaction at the end. Until then no bundle uses them, so gc may free them.
    pub fn record_pieces(&mut self, parts: &StoredParts) -> Result<(), IndexError> {
        let sql = self.sql_err();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(&sql)?;
        insert_parts(&tx, parts, now()).map_err(&sql)?;
        tx.commit().map_err(&sql)
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
        let sql = self.sql_err();
        let t = now();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(&sql)?;
        insert_parts(&tx, parts, t).map_err(&sql)?;
        if let Some(inst) = instance {
            upsert_instance(&tx, inst, t).map_err(&sql)?;
        }
        failpoint::hit("index.mid-transaction");
        let pack_size = parts.pack.as_ref().map_or(0, |(_, s)| *s as i64);
        if instance.is_some() {
            tx.execute(
                "INSERT INTO bundles (id, instance_id, format_version, codebase_tree, tar_size,
                     file_size, member_count, codebase_files, packed_at, manifest_piece, sketch)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                 ON CONFLICT(id) DO UPDATE SET packed_at = ?9,
                     file_size = CASE WHEN manifest_piece IS NULL THEN ?6 ELSE file_size END,
                     manifest_piece = ?10, sketch = ?11",
                params![
                    bundle.id.hex(),
                    bundle.instance_id,
                    bundle.format_version,
                    bundle.codebase_tree.hex(),
                    bundle.tar_size as i64,
                    pack_size,
                    bundle.member_count as i64,
                    bundle.codebase_files as i64,
                    t,
                    &parts.manifest_piece.0[..],
                    parts.sketch,
                ],
            )
            .map_err(&sql)?;
        } else {
            let n = tx
                .execute(
                    "UPDATE bundles SET file_size = ?2, manifest_piece = ?3, sketch = ?4
                     WHERE id = ?1",
                    params![
                        bundle.id.hex(),
                        pack_size,
                        &parts.manifest_piece.0[..],
                        parts.sketch
                    ],
                )
                .map_err(&sql)?;
            if n != 1 {
                return Err(IndexError::Corrupt {
                    path: self.path.clone(),
                    detail: format!("bundle {} is not in the index", bundle.id),
                });
            }
        }
        tx.commit().map_err(&sql)
    }

    /// Removes bundles from the index, in one transaction. What they alone used stays on disk
    /// until `gc`.
    pub fn remove_bundles(&mut self, ids: &[Sha256Digest]) -> Result<usize, IndexError> {
        let sql = self.sql_err();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(&sql)?;
        let mut n = 0;
        for id in ids {
            n += tx
                .execute("DELETE FROM bundles WHERE id = ?1", [id.hex()])
                .map_err(&sql)?;
        }
        tx.commit().map_err(&sql)?;
        Ok(n)
    }

    /// Garbage collection's one change to the index: the rewritten packs in, their live pieces
    /// moved into them, the dead pieces and the emptied or replaced packs out.
    pub fn apply_gc(
        &mut self,
        rewritten: &[RewrittenPack],
        dead_pieces: &[Sha256Digest],
        dead_packs: &[i64],
    ) -> Result<(), IndexError> {
        let sql = self.sql_err();
        let t = now();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(&sql)?;
        for p in rewritten {
            tx.execute(
                "INSERT INTO packs (name, size, repo, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![p.name, p.size as i64, p.repo, t],
            )
            .map_err(&sql)?;
            let no = tx.last_insert_rowid();
            let mut update = tx
                .prepare(
                    "UPDATE pieces SET pack = ?2, offset = ?3, length = ?4, skip = ?5
                     WHERE id = ?1",
                )
                .map_err(&sql)?;
            for (id, offset, length, skip) in &p.moved {
                update
                    .execute(params![
                        &id.0[..],
                        no,
                        *offset as i64,
                        *length as i64,
                        *skip as i64
                    ])
                    .map_err(&sql)?;
            }
        }
        {
            let mut delete = tx
                .prepare("DELETE FROM pieces WHERE id = ?1")
                .map_err(&sql)?;
            for id in dead_pieces {
                delete.execute([&id.0[..]]).map_err(&sql)?;
            }
        }
        failpoint::hit("index.mid-transaction");
        for no in dead_packs {
            tx.execute("DELETE FROM packs WHERE no = ?1", [no])
                .map_err(&sql)?;
        }
        tx.commit().map_err(&sql)
    }

    /// Logical and stored bytes per repository, by repository.
    pub fn storage_by_repo(&self) -> Result<Vec<RepoStorage>, IndexError> {
        let mut by: HashMap<String, RepoStorage> = HashMap::new();
        let mut stmt = self
            .conn
            .prepare(
                "SELECT i.repo, COUNT(*), SUM(b.tar_size),
                        SUM(b.manifest_piece IS NULL),
                        SUM(CASE WHEN b.manifest_piece IS NULL THEN b.file_size ELSE 0 END)
                 FROM bundles b JOIN instances i ON i.instance_id = b.instance_id
                 GROUP BY i.repo",
            )
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, i64>(4)?,
                ))
            })
            .map_err(self.err())?;
        for row in rows {
            let (repo, n, logical, whole, whole_bytes) = row.map_err(self.err())?;
            let e = by.entry(repo.clone()).or_default();
            e.repo = repo;
            e.bundles = n as u64;
            e.logical = logical as u64;
            e.whole_files = whole as u64;
            e.whole_file_bytes = whole_bytes as u64;
        }
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
