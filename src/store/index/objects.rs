//! Objects (logs, results, wheels, interpreters) and the environment locks that name them.

use rusqlite::{Connection, params};

use crate::digest::Sha256Digest;
use crate::failpoint;

use super::{Index, IndexError, now};

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ObjectRow {
    pub id: Sha256Digest,
    pub size: u64,
    pub kind: String,
    pub added_at: i64,
}

/// An environment lock.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LockRow {
    pub id: Sha256Digest,
    pub repo: String,
    pub version: String,
    pub commit_id: String,
    pub python: String,
    pub packages: u64,
    pub artifacts: u64,
    pub bytes: u64,
    pub created_at: i64,
}

/// An object's row; one already there is kept as it is.
pub(super) fn insert_object(
    conn: &Connection,
    id: &Sha256Digest,
    size: u64,
    kind: &str,
    t: i64,
) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO objects (id, size, kind, added_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(id) DO NOTHING",
        params![id.hex(), size as i64, kind, t],
    )
    .map(|_| ())
}

/// A lock's row; a lock is its content, so one already there is kept.
pub(super) fn insert_lock(conn: &Connection, lock: &LockRow, t: i64) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO locks (id, repo, version, commit_id, python, packages, artifacts, bytes,
                            created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT(id) DO NOTHING",
        params![
            lock.id.hex(),
            lock.repo,
            lock.version,
            lock.commit_id,
            lock.python,
            lock.packages as i64,
            lock.artifacts as i64,
            lock.bytes as i64,
            t
        ],
    )
    .map(|_| ())
}

impl Index {
    pub fn record_object(
        &mut self,
        id: &Sha256Digest,
        size: u64,
        kind: &str,
    ) -> Result<(), IndexError> {
        insert_object(&self.conn, id, size, kind, now()).map_err(self.err())
    }

    /// Records a lock and every object it names, in one transaction.
    pub fn record_lock(
        &mut self,
        lock: &LockRow,
        objects: &[(Sha256Digest, u64, &str)],
    ) -> Result<(), IndexError> {
        let sql = self.sql_err();
        let tx = self.conn.transaction().map_err(&sql)?;
        let t = now();
        for (id, size, kind) in objects {
            insert_object(&tx, id, *size, kind, t).map_err(&sql)?;
        }
        failpoint::hit("index.mid-transaction");
        insert_lock(&tx, lock, t).map_err(&sql)?;
        tx.commit().map_err(&sql)
    }

    pub fn objects(&self) -> Result<Vec<ObjectRow>, IndexError> {
        self.rows(
            "SELECT id, size, kind, added_at FROM objects ORDER BY id",
            [],
            |c| {
                Ok(ObjectRow {
                    id: c.hex(0)?,
                    size: c.count(1)?,
                    kind: c.get(2)?,
                    added_at: c.get(3)?,
                })
            },
        )
    }

    /// Every lock, by repository, version, then newest first.
    pub fn locks(&self) -> Result<Vec<LockRow>, IndexError> {
        self.rows(
            "SELECT id, repo, version, commit_id, python, packages, artifacts, bytes, created_at
             FROM locks ORDER BY repo, version, created_at DESC, id",
            [],
            |c| {
                Ok(LockRow {
                    id: c.hex(0)?,
                    repo: c.get(1)?,
                    version: c.get(2)?,
                    commit_id: c.get(3)?,
                    python: c.get(4)?,
                    packages: c.count(5)?,
                    artifacts: c.count(6)?,
                    bytes: c.count(7)?,
                    created_at: c.get(8)?,
                })
            },
        )
    }
}
