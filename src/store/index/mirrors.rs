//! Mirrors, the refs of their last fetch, and the pins that keep commits alive in them.

use std::collections::BTreeMap;

use rusqlite::{Connection, params};

use crate::digest::Sha256Digest;

use super::{Index, IndexError, now};

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MirrorRow {
    pub name: String,
    pub url: String,
    pub added_at: i64,
    pub last_fetch: Option<i64>,
    pub refs_count: u64,
    pub refs_sha256: String,
    pub size: u64,
}

/// A commit kept alive in a mirror by a ref under `refs/swe-ark/`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PinRow {
    pub mirror: String,
    pub reference: String,
    pub commit: String,
    pub instance_id: String,
    pub role: String,
}

/// A mirror's row and its refs, replacing what was recorded.
pub(super) fn upsert_mirror(
    conn: &Connection,
    name: &str,
    url: &str,
    refs: &BTreeMap<String, String>,
    refs_sha256: &Sha256Digest,
    size: u64,
    t: i64,
) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO mirrors (name, url, added_at, last_fetch, refs_count, refs_sha256, size)
         VALUES (?1, ?2, ?3, ?3, ?4, ?5, ?6)
         ON CONFLICT(name) DO UPDATE SET url = ?2, last_fetch = ?3, refs_count = ?4,
             refs_sha256 = ?5, size = ?6",
        params![
            name,
            url,
            t,
            refs.len() as i64,
            refs_sha256.hex(),
            size as i64
        ],
    )?;
    conn.execute("DELETE FROM mirror_refs WHERE mirror = ?1", [name])?;
    let mut insert =
        conn.prepare("INSERT INTO mirror_refs (mirror, name, target) VALUES (?1, ?2, ?3)")?;
    for (r, target) in refs {
        insert.execute(params![name, r, target])?;
    }
    Ok(())
}

pub(super) fn upsert_pin(conn: &Connection, pin: &PinRow, t: i64) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO pins (mirror, ref, commit_id, instance_id, role, pinned_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT(mirror, ref) DO UPDATE SET commit_id = ?3, instance_id = ?4,
             role = ?5, pinned_at = ?6",
        params![
            pin.mirror,
            pin.reference,
            pin.commit,
            pin.instance_id,
            pin.role,
            t
        ],
    )
    .map(|_| ())
}

impl Index {
    /// Records a mirror after a fetch or import: its URL and its refs, in one transaction.
    pub fn record_mirror(
        &mut self,
        name: &str,
        url: &str,
        refs: &BTreeMap<String, String>,
        refs_sha256: &Sha256Digest,
        size: u64,
    ) -> Result<(), IndexError> {
        self.write(|tx, t| Ok(upsert_mirror(tx, name, url, refs, refs_sha256, size, t)?))
    }

    pub fn mirrors(&self) -> Result<Vec<MirrorRow>, IndexError> {
        self.rows(
            "SELECT name, url, added_at, last_fetch, refs_count, refs_sha256, size
             FROM mirrors ORDER BY name",
            [],
            |c| {
                Ok(MirrorRow {
                    name: c.get(0)?,
                    url: c.get(1)?,
                    added_at: c.get(2)?,
                    last_fetch: c.get(3)?,
                    refs_count: c.count(4)?,
                    refs_sha256: c.get(5)?,
                    size: c.count(6)?,
                })
            },
        )
    }

    pub fn mirror(&self, name: &str) -> Result<Option<MirrorRow>, IndexError> {
        Ok(self.mirrors()?.into_iter().find(|m| m.name == name))
    }

    /// The refs recorded at the mirror's last fetch.
    pub fn mirror_refs(&self, name: &str) -> Result<BTreeMap<String, String>, IndexError> {
        let refs = self.rows(
            "SELECT name, target FROM mirror_refs WHERE mirror = ?1 ORDER BY name",
            [name],
            |c| Ok((c.get(0)?, c.get(1)?)),
        )?;
        Ok(refs.into_iter().collect())
    }

    pub fn record_pin(&mut self, pin: &PinRow) -> Result<(), IndexError> {
        upsert_pin(&self.conn, pin, now()).map_err(self.err())
    }

    /// Records `pins` in one transaction.
    pub fn record_pins(&mut self, pins: &[PinRow]) -> Result<(), IndexError> {
        self.write(|tx, t| {
            for pin in pins {
                upsert_pin(tx, pin, t)?;
            }
            Ok(())
        })
    }

    pub fn pins(&self, mirror: &str) -> Result<Vec<PinRow>, IndexError> {
        self.rows(
            "SELECT mirror, ref, commit_id, instance_id, role FROM pins WHERE mirror = ?1
             ORDER BY ref",
            [mirror],
            |c| {
                Ok(PinRow {
                    mirror: c.get(0)?,
                    reference: c.get(1)?,
                    commit: c.get(2)?,
                    instance_id: c.get(3)?,
                    role: c.get(4)?,
                })
            },
        )
    }
}
