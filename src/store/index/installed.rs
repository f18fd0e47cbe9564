//! Installed states: an instance's environment and work tree as the context's install left
//! them at a base commit, kept as an object under the key of what that install depends on
//! (docs/REPLAY.md, "The installed state").

use rusqlite::{Connection, params};

use crate::digest::Sha256Digest;

use super::objects::insert_object;
use super::{Index, IndexError};

/// The object kind of an installed state.
pub const INSTALLED_KIND: &str = "installed";

/// One installed state.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct InstalledStateRow {
    /// The sha256 of everything the install depends on (lock, base commit, the context's
    /// commands and variables, the fixed layout).
    pub key: Sha256Digest,
    /// The object holding what the install changed.
    pub object: Sha256Digest,
    pub lock_id: String,
    pub repo: String,
    pub base_commit: String,
    /// The instance whose run made it.
    pub instance_id: String,
    /// Whether the install left the work tree editable (its sources read where they are).
    pub editable: bool,
    pub env_entries: u64,
    pub tree_entries: u64,
    /// Bytes of the object.
    pub size: u64,
    pub install_seconds: f64,
    pub made_at: i64,
}

const COLUMNS: &str = "key, object, lock_id, repo, base_commit, instance_id, editable, \
                       env_entries, tree_entries, size, install_seconds, made_at";

impl Index {
    /// The installed state kept under `key`, if any.
    pub fn installed_state(
        &self,
        key: &Sha256Digest,
    ) -> Result<Option<InstalledStateRow>, IndexError> {
        let sql = format!("SELECT {COLUMNS} FROM installed_states WHERE key = ?1");
        let mut rows = self.rows(&sql, [key.hex()], read_row)?;
        Ok(rows.pop())
    }

    /// Every installed state, by repository, then base commit.
    pub fn installed_states(&self) -> Result<Vec<InstalledStateRow>, IndexError> {
        let sql = format!("SELECT {COLUMNS} FROM installed_states ORDER BY repo, base_commit, key");
        self.rows(&sql, [], read_row)
    }

    /// Records an installed state and its object in one transaction; a state already kept
    /// under the key is replaced (its object was missing or did not check).
    pub fn record_installed_state(&mut self, row: &InstalledStateRow) -> Result<(), IndexError> {
        self.write(|tx, t| {
            insert_object(tx, &row.object, row.size, INSTALLED_KIND, t)?;
            tx.execute(
                "DELETE FROM installed_states WHERE key = ?1",
                [row.key.hex()],
            )?;
            insert_installed_state(tx, row, t)?;
            Ok(())
        })
    }
}

/// An installed state's row, stamped `t`; one already kept under its key is kept (an
/// imported release file's rows go in this way). Returns whether it was added.
pub(super) fn insert_installed_state(
    conn: &Connection,
    row: &InstalledStateRow,
    t: i64,
) -> rusqlite::Result<bool> {
    let added = conn.execute(
        &format!(
            "INSERT INTO installed_states ({COLUMNS})
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
             ON CONFLICT(key) DO NOTHING"
        ),
        params![
            row.key.hex(),
            row.object.hex(),
            row.lock_id,
            row.repo,
            row.base_commit,
            row.instance_id,
            row.editable,
            row.env_entries as i64,
            row.tree_entries as i64,
            row.size as i64,
            row.install_seconds,
            t
        ],
    )?;
    Ok(added > 0)
}

fn read_row(c: &super::Cols) -> Result<InstalledStateRow, IndexError> {
    Ok(InstalledStateRow {
        key: c.hex(0)?,
        object: c.hex(1)?,
        lock_id: c.get(2)?,
        repo: c.get(3)?,
        base_commit: c.get(4)?,
        instance_id: c.get(5)?,
        editable: c.get(6)?,
        env_entries: c.count(7)?,
        tree_entries: c.count(8)?,
        size: c.count(9)?,
        install_seconds: c.get(10)?,
        made_at: c.get(11)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &[u8], object: &[u8]) -> InstalledStateRow {
        InstalledStateRow {
            key: Sha256Digest::of(key),
            object: Sha256Digest::of(object),
            lock_id: "l".into(),
            repo: "o/r".into(),
            base_commit: "c".into(),
            instance_id: "o__r-1".into(),
            editable: true,
            env_entries: 3,
            tree_entries: 2,
            size: 10,
            install_seconds: 1.5,
            made_at: 0,
        }
    }

    #[test]
    fn a_state_is_found_by_its_key_and_a_new_one_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = Index::open(&dir.path().join("index.sqlite")).unwrap();
        assert_eq!(
            index.installed_state(&Sha256Digest::of(b"k")).unwrap(),
            None
        );
        index.record_installed_state(&row(b"k", b"a")).unwrap();
        let found = index
            .installed_state(&Sha256Digest::of(b"k"))
            .unwrap()
            .unwrap();
        assert_eq!(found.object, Sha256Digest::of(b"a"));
        assert!(found.editable);
        index.record_installed_state(&row(b"k", b"b")).unwrap();
        let all = index.installed_states().unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].object, Sha256Digest::of(b"b"));
        // Both objects are recorded, as `installed`.
        let kinds: Vec<String> = index
            .objects()
            .unwrap()
            .into_iter()
            .map(|o| o.kind)
            .collect();
        assert_eq!(kinds, vec![INSTALLED_KIND, INSTALLED_KIND]);
    }
}
