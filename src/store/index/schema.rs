//! The index's schema: each migration in turn, one transaction each, the version in
//! `PRAGMA user_version`.

use std::time::Duration;

use super::{Index, IndexError};

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
    // 8: installed states (docs/REPLAY.md, "The installed state"): an instance's environment
    // and work tree as the context's install left them at a base commit, kept as an object
    // (kind `installed`) under the key of everything that install depends on.
    "CREATE TABLE installed_states (
        key TEXT PRIMARY KEY,          -- sha256 of what the install depends on
        object TEXT NOT NULL,          -- the state's object (a tar.zst of what it changed)
        lock_id TEXT NOT NULL,
        repo TEXT NOT NULL,
        base_commit TEXT NOT NULL,
        instance_id TEXT NOT NULL,     -- the instance whose run made it
        editable INTEGER NOT NULL,     -- whether the install left the work tree editable
        env_entries INTEGER NOT NULL,  -- files, links, directories and removals
        tree_entries INTEGER NOT NULL,
        size INTEGER NOT NULL,         -- bytes of the object
        install_seconds REAL NOT NULL, -- what the install took when it was made
        made_at INTEGER NOT NULL
    );
    CREATE INDEX installed_states_lock ON installed_states(lock_id);",
];

/// The schema version this swe-ark writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

impl Index {
    /// The connection's settings (WAL, foreign keys, full sync), and the schema brought up to
    /// date: every migration it lacks, in one transaction.
    pub(super) fn setup(&mut self) -> Result<(), IndexError> {
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
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::*;
    use crate::digest::Sha256Digest;

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
