//! The SQLite index: what the archive holds. WAL mode; the schema version lives in
//! `PRAGMA user_version` and every migration, like every change, is one transaction.

mod bundles;
mod http_cache;
mod import;
mod installed;
mod instances;
mod mirrors;
mod objects;
mod pieces;
mod schema;
mod validations;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;

use crate::digest::Sha256Digest;

pub use bundles::BundleRow;
pub use import::{ImportRows, ImportedMirror};
pub use installed::{INSTALLED_KIND, InstalledStateRow};
pub use instances::InstanceRow;
pub use mirrors::{MirrorRow, PinRow};
pub use objects::{LockRow, ObjectRow};
pub use pieces::{
    AddedPack, BundleSketch, NewPiece, PackRow, PieceLoc, RepoStorage, RewrittenPack, StoredParts,
};
pub use schema::SCHEMA_VERSION;
pub use validations::ValidationRow;

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("index `{path}`: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "index `{path}` has schema version {found}, newer than this swe-ark knows ({supported}); \
         use a newer swe-ark"
    )]
    NewerSchema {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("index `{path}` holds a value that is not valid: {detail}")]
    Corrupt { path: PathBuf, detail: String },
}

pub struct Index {
    conn: Connection,
    path: PathBuf,
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Why a write failed: SQLite, or a check of the index's own (which rolls it back too).
enum WriteError {
    Sql(rusqlite::Error),
    Index(IndexError),
}

impl From<rusqlite::Error> for WriteError {
    fn from(e: rusqlite::Error) -> Self {
        WriteError::Sql(e)
    }
}

/// One row of a query: its columns, with SQLite's errors and bad hashes as the index's.
struct Cols<'r, 's> {
    row: &'r rusqlite::Row<'s>,
    index: &'r Index,
}

impl Cols<'_, '_> {
    fn get<T: rusqlite::types::FromSql>(&self, i: usize) -> Result<T, IndexError> {
        self.row.get(i).map_err(self.index.err())
    }

    /// A count or size, which SQLite keeps as a signed integer.
    fn count(&self, i: usize) -> Result<u64, IndexError> {
        self.get::<i64>(i).map(|n| n as u64)
    }

    /// A hash kept as hex text.
    fn hex<T: std::str::FromStr>(&self, i: usize) -> Result<T, IndexError> {
        self.index.digest(self.get(i)?)
    }

    /// A hash kept as hex text, '' for none.
    fn hex_or_empty(&self, i: usize) -> Result<Option<Sha256Digest>, IndexError> {
        let s: String = self.get(i)?;
        if s.is_empty() {
            Ok(None)
        } else {
            self.index.digest(s).map(Some)
        }
    }

    /// A piece id, kept as a 32-byte blob.
    fn blob(&self, i: usize) -> Result<Sha256Digest, IndexError> {
        self.index.blob_digest(&self.get::<Vec<u8>>(i)?)
    }

    fn blob_or_null(&self, i: usize) -> Result<Option<Sha256Digest>, IndexError> {
        self.get::<Option<Vec<u8>>>(i)?
            .map(|b| self.index.blob_digest(&b))
            .transpose()
    }
}

impl Index {
    /// Opens (creating if needed) the index at `path` and brings its schema up to date.
    pub fn open(path: &Path) -> Result<Index, IndexError> {
        let conn = Connection::open(path).map_err(|source| IndexError::Sqlite {
            path: path.to_path_buf(),
            source,
        })?;
        let mut index = Index {
            conn,
            path: path.to_path_buf(),
        };
        index.setup()?;
        Ok(index)
    }

    /// Opens an index only to read it, writing nothing (no migration, no journal change): a
    /// seed archive on a read-only or shared filesystem. Read-only first; where the medium
    /// itself is read-only (no `-shm` can be made), as immutable, which trusts that nobody
    /// writes the index meanwhile.
    pub fn open_read_only(path: &Path) -> Result<Index, IndexError> {
        use rusqlite::OpenFlags;
        let sqlite = |source| IndexError::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        // A URI: `?`, `#` and `%` in the path are escaped.
        let escaped: String = path
            .to_string_lossy()
            .chars()
            .map(|c| match c {
                '?' => "%3f".to_string(),
                '#' => "%23".to_string(),
                '%' => "%25".to_string(),
                c => c.to_string(),
            })
            .collect();
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI;
        let version = |conn: &Connection| -> rusqlite::Result<u32> {
            conn.pragma_query_value(None, "user_version", |r| r.get(0))
        };
        let conn = match Connection::open_with_flags(format!("file:{escaped}?mode=ro"), flags) {
            Ok(c) if version(&c).is_ok() => c,
            _ => Connection::open_with_flags(format!("file:{escaped}?immutable=1"), flags)
                .map_err(sqlite)?,
        };
        let found = version(&conn).map_err(sqlite)?;
        if found != SCHEMA_VERSION {
            return Err(IndexError::Corrupt {
                path: path.to_path_buf(),
                detail: format!(
                    "it has schema version {found}, this swe-ark reads version \
                     {SCHEMA_VERSION} read-only (open it once for writing with this swe-ark, \
                     e.g. `swe-ark ls`, to bring it up to date)"
                ),
            });
        }
        conn.busy_timeout(Duration::from_secs(30)).map_err(sqlite)?;
        Ok(Index {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// Like [`Index::err`], but holding no borrow of the index, for use beside a transaction.
    fn sql_err(&self) -> impl Fn(rusqlite::Error) -> IndexError + use<> {
        let path = self.path.clone();
        move |source| IndexError::Sqlite {
            path: path.clone(),
            source,
        }
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> IndexError + '_ {
        move |source| IndexError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Runs `write` in one transaction that takes the write lock at once, with the time to
    /// stamp rows with; commits if it succeeds, rolls back if not.
    fn write<T>(
        &mut self,
        write: impl FnOnce(&rusqlite::Transaction, i64) -> Result<T, WriteError>,
    ) -> Result<T, IndexError> {
        let sql = self.sql_err();
        let t = now();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(&sql)?;
        let out = write(&tx, t).map_err(|e| match e {
            WriteError::Sql(e) => sql(e),
            WriteError::Index(e) => e,
        })?;
        tx.commit().map_err(&sql)?;
        Ok(out)
    }

    /// The rows of a query, each made into a `T` by `read`.
    fn rows<T>(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        mut read: impl FnMut(&Cols) -> Result<T, IndexError>,
    ) -> Result<Vec<T>, IndexError> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(self.err())?;
        let mut rows = stmt.query(params).map_err(self.err())?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(self.err())? {
            out.push(read(&Cols { row, index: self })?);
        }
        Ok(out)
    }

    fn digest<T: std::str::FromStr>(&self, s: String) -> Result<T, IndexError> {
        s.parse().map_err(|_| IndexError::Corrupt {
            path: self.path.clone(),
            detail: format!("`{s}` is not a valid hash"),
        })
    }

    /// SQLite's own consistency check (`PRAGMA integrity_check`): `ok`, or what is wrong.
    pub fn integrity_check(&self) -> Result<Vec<String>, IndexError> {
        self.rows("PRAGMA integrity_check", [], |c| c.get(0))
    }
}
