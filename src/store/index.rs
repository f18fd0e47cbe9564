//! The SQLite index: what the archive holds. WAL mode; the schema version lives in
//! `PRAGMA user_version` and every migration, like every change, is one transaction.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use crate::dataset::{DatasetDate, Instance};
use crate::digest::{GitOid, Sha256Digest};
use crate::failpoint;

mod pieces;

pub use pieces::{
    AddedPack, BundleSketch, NewPiece, PackRow, PieceLoc, RepoStorage, RewrittenPack, StoredParts,
};

/// Each entry moves the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: instances, bundles, objects.
    "CREATE TABLE instances (
        instance_id TEXT PRIMARY KEY,
        repo TEXT NOT NULL,
        base_commit TEXT NOT NULL,
        version TEXT NOT NULL,
        created_at TEXT NOT NULL,
        environment_setup_commit TEXT NOT NULL,
        data TEXT NOT NULL,            -- the canonical instance.json
        added_at INTEGER NOT NULL,     -- unix seconds
        updated_at INTEGER NOT NULL
    );
    CREATE INDEX instances_repo ON instances(repo);
    CREATE TABLE bundles (
        id TEXT PRIMARY KEY,           -- sha256 of the uncompressed tar
        instance_id TEXT NOT NULL REFERENCES instances(instance_id),
        format_version INTEGER NOT NULL,
        codebase_tree TEXT NOT NULL,   -- git tree id of codebase/
        tar_size INTEGER NOT NULL,
        file_size INTEGER NOT NULL,
        member_count INTEGER NOT NULL,
        codebase_files INTEGER NOT NULL,
        packed_at INTEGER NOT NULL
    );
    CREATE INDEX bundles_instance ON bundles(instance_id);
    CREATE TABLE objects (
        id TEXT PRIMARY KEY,           -- sha256 of the content
        size INTEGER NOT NULL,
        kind TEXT NOT NULL,            -- wheel, sdist, interpreter, log, …
        added_at INTEGER NOT NULL
    );",
    // 2: mirrors, their refs as last fetched, and the commits pinned for instances.
    "CREATE TABLE mirrors (
        name TEXT PRIMARY KEY,         -- OWNER/NAME
        url TEXT NOT NULL,             -- where updates fetch from ('' for none)
        added_at INTEGER NOT NULL,
        last_fetch INTEGER,            -- unix seconds of the last successful fetch or import
        refs_count INTEGER NOT NULL,
        refs_sha256 TEXT NOT NULL,     -- sha256 of the sorted `<target> <ref>` lines
        size INTEGER NOT NULL          -- bytes on disk
    );
    CREATE TABLE mirror_refs (
        mirror TEXT NOT NULL REFERENCES mirrors(name) ON DELETE CASCADE,
        name TEXT NOT NULL,
        target TEXT NOT NULL,
        PRIMARY KEY (mirror, name)
    );
    CREATE TABLE pins (
        mirror TEXT NOT NULL REFERENCES mirrors(name) ON DELETE CASCADE,
        ref TEXT NOT NULL,             -- refs/swe-ark/…
        commit_id TEXT NOT NULL,
        instance_id TEXT NOT NULL,
        role TEXT NOT NULL,            -- base_commit, environment_setup_commit
        pinned_at INTEGER NOT NULL,
        PRIMARY KEY (mirror, ref)
    );",
    // 3: collection from the GitHub API: answers kept by ETag, and each pull request's outcome.
    "CREATE TABLE http_cache (
        url TEXT PRIMARY KEY,
        etag TEXT NOT NULL,
        body BLOB NOT NULL,
        fetched_at INTEGER NOT NULL
    );
    CREATE TABLE collected_pulls (
        repo TEXT NOT NULL,            -- OWNER/NAME
        number INTEGER NOT NULL,
        outcome TEXT NOT NULL,         -- instance, skipped
        reason TEXT NOT NULL,          -- why it was skipped ('' for an instance)
        instance_id TEXT NOT NULL,     -- '' when skipped
        collected_at INTEGER NOT NULL,
        PRIMARY KEY (repo, number)
    );",
    // 4: environment locks (the pylock.toml itself is an object with the same id).
    "CREATE TABLE locks (
        id TEXT PRIMARY KEY,           -- sha256 of the pylock.toml
        repo TEXT NOT NULL,
        version TEXT NOT NULL,
        commit_id TEXT NOT NULL,       -- the environment setup commit
        python TEXT NOT NULL,          -- exact interpreter version
        packages INTEGER NOT NULL,
        artifacts INTEGER NOT NULL,    -- objects the lock names (wheels, sdists, interpreter)
        bytes INTEGER NOT NULL,        -- their total size
        created_at INTEGER NOT NULL
    );
    CREATE INDEX locks_repo ON locks(repo, version);",
    // 5: validation outcomes; results.json and the logs are objects.
    "CREATE TABLE validations (
        instance_id TEXT PRIMARY KEY REFERENCES instances(instance_id),
        verdict TEXT NOT NULL,         -- kept, discarded, not-reproducible
        reason_kind TEXT NOT NULL,     -- '' when kept
        reason TEXT NOT NULL,
        fail_to_pass INTEGER NOT NULL,
        pass_to_pass INTEGER NOT NULL,
        flaky INTEGER NOT NULL,
        lock_id TEXT NOT NULL,         -- '' when no lock was found
        results TEXT NOT NULL,         -- object id of results.json
        log_pre TEXT NOT NULL,         -- object ids ('' when the run did not happen)
        log_post TEXT NOT NULL,
        seconds REAL NOT NULL,
        validated_at INTEGER NOT NULL
    );",
    // 6: bundles stored deduplicated (docs/STORAGE.md): each distinct member content is a
    // piece, kept once in a pack file, whole or as a delta against another piece; a bundle is
    // its bundle.json piece. Bundles from before (manifest_piece NULL) stay whole files.
    "CREATE TABLE packs (
        no INTEGER PRIMARY KEY,        -- what pieces refer to
        name TEXT NOT NULL UNIQUE,     -- sha256 of the file: packs/<name>.pack
        size INTEGER NOT NULL,         -- bytes of the file
        repo TEXT NOT NULL,            -- the repository of the bundle that wrote it
        created_at INTEGER NOT NULL
    );
    CREATE TABLE pieces (
        id BLOB PRIMARY KEY,           -- sha256 of the content (32 bytes)
        pack INTEGER NOT NULL REFERENCES packs(no) DEFERRABLE INITIALLY DEFERRED,
        offset INTEGER NOT NULL,       -- where its zstd frame starts in the pack
        length INTEGER NOT NULL,       -- the frame's bytes
        skip INTEGER NOT NULL,         -- where it starts in the frame's content (a frame may
                                       -- hold several whole pieces, one after the other)
        size INTEGER NOT NULL,         -- the content's bytes
        base BLOB REFERENCES pieces(id) DEFERRABLE INITIALLY DEFERRED, -- delta against this
        depth INTEGER NOT NULL         -- deltas between it and a whole piece (0: whole)
    ) WITHOUT ROWID;
    CREATE INDEX pieces_pack ON pieces(pack);
    CREATE INDEX pieces_base ON pieces(base);
    ALTER TABLE bundles ADD COLUMN manifest_piece BLOB
        REFERENCES pieces(id) DEFERRABLE INITIALLY DEFERRED;
    ALTER TABLE bundles ADD COLUMN sketch BLOB;   -- the smallest member hashes, for similarity",
    // 7: the datasets instances were imported from, and when each built its environments:
    // `env lock` resolves as of that date (docs/ENVIRONMENTS.md). Collected instances, and
    // those imported before, have no dataset: they resolve as of their commit.
    "CREATE TABLE datasets (
        name TEXT PRIMARY KEY,
        environments_as_of TEXT,       -- RFC 3339 UTC; NULL: each environment setup commit's date
        rule TEXT NOT NULL,            -- where the date comes from
        added_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    ALTER TABLE instances ADD COLUMN dataset TEXT REFERENCES datasets(name);",
];

/// The schema version this swe-ark writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

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

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InstanceRow {
    pub instance_id: String,
    pub repo: String,
    pub base_commit: String,
    pub version: String,
    pub created_at: String,
    pub added_at: i64,
    pub updated_at: i64,
}

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

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ObjectRow {
    pub id: Sha256Digest,
    pub size: u64,
    pub kind: String,
    pub added_at: i64,
}

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

/// The outcome of validating an instance.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ValidationRow {
    pub instance_id: String,
    pub verdict: crate::verdict::Verdict,
    /// None (`''` in the index) when kept plainly.
    #[serde(serialize_with = "crate::verdict::reason_or_empty::serialize")]
    pub reason_kind: Option<crate::verdict::Reason>,
    pub reason: String,
    pub fail_to_pass: u64,
    pub pass_to_pass: u64,
    pub flaky: u64,
    pub lock_id: String,
    pub results: Sha256Digest,
    pub log_pre: Option<Sha256Digest>,
    pub log_post: Option<Sha256Digest>,
    pub seconds: f64,
    pub validated_at: i64,
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

/// Adds `instance`, or replaces the stored one of the same id.
/// An object's row; one already there is kept as it is.
fn insert_object(
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

/// The row of a bundle whose pieces are stored, packed at `t`; `on_conflict` says what
/// becomes of one already there.
fn insert_stored_bundle(
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

/// A lock's row; a lock is its content, so one already there is kept.
fn insert_lock(conn: &Connection, lock: &LockRow, t: i64) -> rusqlite::Result<()> {
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

/// An instance's validation; a new one replaces the last.
fn upsert_validation(conn: &Connection, v: &ValidationRow, t: i64) -> rusqlite::Result<()> {
    let hex = |d: &Option<Sha256Digest>| d.map(|d| d.hex()).unwrap_or_default();
    conn.execute(
        "INSERT INTO validations (instance_id, verdict, reason_kind, reason, fail_to_pass,
             pass_to_pass, flaky, lock_id, results, log_pre, log_post, seconds, validated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
         ON CONFLICT(instance_id) DO UPDATE SET verdict = ?2, reason_kind = ?3, reason = ?4,
             fail_to_pass = ?5, pass_to_pass = ?6, flaky = ?7, lock_id = ?8, results = ?9,
             log_pre = ?10, log_post = ?11, seconds = ?12, validated_at = ?13",
        params![
            v.instance_id,
            v.verdict,
            crate::verdict::ReasonColumn(v.reason_kind),
            v.reason,
            v.fail_to_pass as i64,
            v.pass_to_pass as i64,
            v.flaky as i64,
            v.lock_id,
            v.results.hex(),
            hex(&v.log_pre),
            hex(&v.log_post),
            v.seconds,
            t
        ],
    )
    .map(|_| ())
}

fn upsert_instance(conn: &Connection, instance: &Instance, t: i64) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO instances (instance_id, repo, base_commit, version, created_at,
             environment_setup_commit, data, added_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)
         ON CONFLICT(instance_id) DO UPDATE SET repo = ?2, base_commit = ?3, version = ?4,
             created_at = ?5, environment_setup_commit = ?6, data = ?7, updated_at = ?8",
        params![
            instance.instance_id,
            instance.repo,
            instance.base_commit,
            instance.version,
            instance.created_at,
            instance.environment_setup_commit,
            String::from_utf8_lossy(&instance.to_canonical_json()),
            t,
        ],
    )
    .map(|_| ())
}

/// A mirror's row and its refs, replacing what was recorded.
fn upsert_mirror(
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

fn upsert_pin(conn: &Connection, pin: &PinRow, t: i64) -> rusqlite::Result<()> {
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

const BUNDLE_COLUMNS: &str = "id, instance_id, format_version, codebase_tree, tar_size, \
                              file_size, member_count, codebase_files, packed_at, manifest_piece";

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

    fn parse_instance(&self, instance_id: &str, data: &str) -> Result<Instance, IndexError> {
        Instance::from_json(data.as_bytes()).map_err(|e| IndexError::Corrupt {
            path: self.path.clone(),
            detail: format!("instance `{instance_id}`: {e}"),
        })
    }

    fn setup(&mut self) -> Result<(), IndexError> {
        self.conn
            .busy_timeout(Duration::from_secs(30))
            .map_err(self.err())?;
        self.conn
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(self.err())?;
        self.conn
            .pragma_update(None, "foreign_keys", "ON")
            .map_err(self.err())?;
        self.conn
            .pragma_update(None, "synchronous", "FULL")
            .map_err(self.err())?;
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|source| IndexError::Sqlite {
                path: path.clone(),
                source,
            })?;
        let sql = |source| IndexError::Sqlite {
            path: path.clone(),
            source,
        };
        let found: u32 = tx
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(&sql)?;
        if found > SCHEMA_VERSION {
            return Err(IndexError::NewerSchema {
                path: path.clone(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        for (i, migration) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            tx.execute_batch(migration).map_err(&sql)?;
            tx.pragma_update(None, "user_version", (i + 1) as u32)
                .map_err(&sql)?;
        }
        tx.commit().map_err(&sql)
    }

    pub fn schema_version(&self) -> Result<u32, IndexError> {
        self.conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(self.err())
    }

    /// Adds or replaces `instances`, all in one transaction: either every one is in, or none.
    /// With a dataset, it is recorded (or updated) and the instances belong to it. Returns how
    /// many were new.
    pub fn import_instances(
        &mut self,
        instances: &[Instance],
        dataset: Option<&DatasetDate>,
    ) -> Result<usize, IndexError> {
        self.write(|tx, t| {
            if let Some(d) = dataset {
                tx.execute(
                    "INSERT INTO datasets (name, environments_as_of, rule, added_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?4)
                     ON CONFLICT(name) DO UPDATE SET environments_as_of = ?2, rule = ?3,
                         updated_at = ?4",
                    params![d.name, d.environments_as_of, d.rule, t],
                )?;
            }
            let mut new = 0;
            for inst in instances {
                let exists: bool = tx.query_row(
                    "SELECT EXISTS(SELECT 1 FROM instances WHERE instance_id = ?1)",
                    [&inst.instance_id],
                    |r| r.get(0),
                )?;
                if !exists {
                    new += 1;
                }
                upsert_instance(tx, inst, t)?;
                if let Some(d) = dataset {
                    tx.execute(
                        "UPDATE instances SET dataset = ?2 WHERE instance_id = ?1",
                        params![inst.instance_id, d.name],
                    )?;
                }
            }
            Ok(new)
        })
    }

    /// The datasets the instances of `repo` `version` were imported from (none for collected
    /// instances), each once.
    pub fn datasets_of(&self, repo: &str, version: &str) -> Result<Vec<DatasetDate>, IndexError> {
        self.rows(
            "SELECT DISTINCT d.name, d.environments_as_of, d.rule
             FROM instances i JOIN datasets d ON d.name = i.dataset
             WHERE i.repo = ?1 AND i.version = ?2 ORDER BY d.name",
            [repo, version],
            |c| {
                Ok(DatasetDate {
                    name: c.get(0)?,
                    environments_as_of: c.get(1)?,
                    rule: c.get(2)?,
                })
            },
        )
    }

    /// The dataset instance `instance_id` was imported from, with its environments date (none
    /// for a collected instance).
    pub fn dataset_of(&self, instance_id: &str) -> Result<Option<DatasetDate>, IndexError> {
        Ok(self
            .rows(
                "SELECT d.name, d.environments_as_of, d.rule
                 FROM instances i JOIN datasets d ON d.name = i.dataset
                 WHERE i.instance_id = ?1",
                [instance_id],
                |c| {
                    Ok(DatasetDate {
                        name: c.get(0)?,
                        environments_as_of: c.get(1)?,
                        rule: c.get(2)?,
                    })
                },
            )?
            .into_iter()
            .next())
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

    /// Records a validation, the objects it made and (for a collected instance that was
    /// kept) the instance with its lists, in one transaction.
    pub fn record_validation(
        &mut self,
        v: &ValidationRow,
        objects: &[(Sha256Digest, u64, &str)],
        instance: Option<&Instance>,
    ) -> Result<(), IndexError> {
        self.write(|tx, t| {
            for (id, size, kind) in objects {
                insert_object(tx, id, *size, kind, t)?;
            }
            if let Some(inst) = instance {
                upsert_instance(tx, inst, t)?;
            }
            Ok(upsert_validation(tx, v, t)?)
        })
    }

    /// Records what an imported archive brings, all in one transaction: either every row is
    /// in, or none. Objects and locks already present are kept; instances, bundles,
    /// validations, mirrors and pins are added or replaced.
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
            Ok(())
        })
    }

    /// Every validation, by instance id.
    pub fn validations(&self) -> Result<Vec<ValidationRow>, IndexError> {
        self.rows(
            "SELECT instance_id, verdict, reason_kind, reason, fail_to_pass, pass_to_pass,
                    flaky, lock_id, results, log_pre, log_post, seconds, validated_at
             FROM validations ORDER BY instance_id",
            [],
            |c| {
                Ok(ValidationRow {
                    instance_id: c.get(0)?,
                    verdict: c.get(1)?,
                    reason_kind: c.get::<crate::verdict::ReasonColumn>(2)?.0,
                    reason: c.get(3)?,
                    fail_to_pass: c.count(4)?,
                    pass_to_pass: c.count(5)?,
                    flaky: c.count(6)?,
                    lock_id: c.get(7)?,
                    results: c.hex(8)?,
                    log_pre: c.hex_or_empty(9)?,
                    log_post: c.hex_or_empty(10)?,
                    seconds: c.get(11)?,
                    validated_at: c.get(12)?,
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

    pub fn record_object(
        &mut self,
        id: &Sha256Digest,
        size: u64,
        kind: &str,
    ) -> Result<(), IndexError> {
        insert_object(&self.conn, id, size, kind, now()).map_err(self.err())
    }

    fn digest<T: std::str::FromStr>(&self, s: String) -> Result<T, IndexError> {
        s.parse().map_err(|_| IndexError::Corrupt {
            path: self.path.clone(),
            detail: format!("`{s}` is not a valid hash"),
        })
    }

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

    pub fn instances(&self) -> Result<Vec<InstanceRow>, IndexError> {
        self.rows(
            "SELECT instance_id, repo, base_commit, version, created_at, added_at, updated_at
             FROM instances ORDER BY instance_id",
            [],
            |c| {
                Ok(InstanceRow {
                    instance_id: c.get(0)?,
                    repo: c.get(1)?,
                    base_commit: c.get(2)?,
                    version: c.get(3)?,
                    created_at: c.get(4)?,
                    added_at: c.get(5)?,
                    updated_at: c.get(6)?,
                })
            },
        )
    }

    /// Every stored instance, parsed, in the order they first entered the index (so a dataset
    /// imported into an empty archive exports in its own order).
    pub fn all_instances(&self) -> Result<Vec<Instance>, IndexError> {
        self.rows(
            "SELECT instance_id, data FROM instances ORDER BY rowid",
            [],
            |c| self.parse_instance(&c.get::<String>(0)?, &c.get::<String>(1)?),
        )
    }

    /// The stored instance, parsed.
    pub fn instance(&self, instance_id: &str) -> Result<Option<Instance>, IndexError> {
        let data: Option<String> = self
            .conn
            .query_row(
                "SELECT data FROM instances WHERE instance_id = ?1",
                [instance_id],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.err())?;
        data.map(|d| self.parse_instance(instance_id, &d))
            .transpose()
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

    /// Instances of repository `repo` (OWNER/NAME), with the commits they need.
    pub fn instances_of_repo(&self, repo: &str) -> Result<Vec<InstanceRow>, IndexError> {
        Ok(self
            .instances()?
            .into_iter()
            .filter(|i| i.repo.eq_ignore_ascii_case(repo))
            .collect())
    }

    /// Records what became of pull request `number` of `repo`, with its instance if it gave
    /// one, in one transaction.
    pub fn record_pull(
        &mut self,
        repo: &str,
        number: u64,
        skipped_because: Option<&str>,
        instance: Option<&Instance>,
    ) -> Result<(), IndexError> {
        self.write(|tx, t| {
            if let Some(inst) = instance {
                upsert_instance(tx, inst, t)?;
            }
            tx.execute(
                "INSERT INTO collected_pulls (repo, number, outcome, reason, instance_id,
                                              collected_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT(repo, number) DO UPDATE SET outcome = ?3, reason = ?4,
                     instance_id = ?5, collected_at = ?6",
                params![
                    repo,
                    number as i64,
                    if instance.is_some() {
                        "instance"
                    } else {
                        "skipped"
                    },
                    skipped_because.unwrap_or_default(),
                    instance.map(|i| i.instance_id.as_str()).unwrap_or_default(),
                    t
                ],
            )?;
            Ok(())
        })
    }

    /// The pull requests of `repo` whose outcome is recorded.
    pub fn collected_pulls(
        &self,
        repo: &str,
    ) -> Result<std::collections::HashSet<u64>, IndexError> {
        let numbers = self.rows(
            "SELECT number FROM collected_pulls WHERE repo = ?1",
            [repo],
            |c| c.count(0),
        )?;
        Ok(numbers.into_iter().collect())
    }

    /// SQLite's own consistency check (`PRAGMA integrity_check`): `ok`, or what is wrong.
    pub fn integrity_check(&self) -> Result<Vec<String>, IndexError> {
        self.rows("PRAGMA integrity_check", [], |c| c.get(0))
    }
}

/// The index keeps the ETag and body of every GitHub answer, so a repeated collection sends
/// `If-None-Match` and gets 304s (collect's `EtagCache`). The cache is best effort: a failure
/// to store is logged.
impl Index {
    pub fn http_cache_lookup(&self, url: &str) -> Option<(String, Vec<u8>)> {
        self.conn
            .query_row(
                "SELECT etag, body FROM http_cache WHERE url = ?1",
                [url],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .ok()
            .flatten()
    }

    pub fn http_cache_store(&mut self, url: &str, etag: &str, body: &[u8]) {
        let result = self.conn.execute(
            "INSERT INTO http_cache (url, etag, body, fetched_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(url) DO UPDATE SET etag = ?2, body = ?3, fetched_at = ?4",
            params![url, etag, body, now()],
        );
        if let Err(e) = result {
            tracing::warn!("cannot keep the answer of {url} in the index: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_of_an_older_schema_is_migrated_and_keeps_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.sqlite");
        {
            // An index as the first schema left it, with a row in it.
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
            conn.execute(
                "INSERT INTO objects (id, size, kind, added_at) VALUES (?1, 3, 'log', 0)",
                [Sha256Digest::of(b"abc").hex()],
            )
            .unwrap();
        }
        let index = Index::open(&path).unwrap();
        assert_eq!(index.schema_version().unwrap(), SCHEMA_VERSION);
        assert_eq!(index.objects().unwrap().len(), 1);
        assert!(index.mirrors().unwrap().is_empty());
        drop(index);
        // Opening again changes nothing.
        let index = Index::open(&path).unwrap();
        assert_eq!(index.schema_version().unwrap(), SCHEMA_VERSION);
    }
}
