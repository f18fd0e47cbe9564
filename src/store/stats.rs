//! What `ls` reports of the archive: storage per repository with its totals, and each
//! instance's bundles.

use std::collections::BTreeMap;

use super::{Ark, BundleRow, IndexError, RepoStorage};

/// `ls --stats`: storage per repository, and the pieces in the packs.
#[derive(Debug, Clone)]
pub struct StorageStats {
    pub repos: Vec<RepoStorage>,
    pub pieces: usize,
}

impl RepoStorage {
    /// Bytes kept on disk: packs, and whole files from before.
    pub fn stored(&self) -> u64 {
        self.pack_bytes + self.whole_file_bytes
    }
}

/// Logical bytes per stored byte (0 when nothing is stored).
pub fn dedup_ratio(logical: u64, stored: u64) -> f64 {
    if stored == 0 {
        0.0
    } else {
        logical as f64 / stored as f64
    }
}

impl StorageStats {
    pub fn total_bundles(&self) -> u64 {
        self.repos.iter().map(|r| r.bundles).sum()
    }

    pub fn total_logical(&self) -> u64 {
        self.repos.iter().map(|r| r.logical).sum()
    }

    pub fn total_stored(&self) -> u64 {
        self.repos.iter().map(RepoStorage::stored).sum()
    }
}

impl Ark {
    /// Storage per repository ([`StorageStats`]).
    pub fn storage_stats(&self) -> Result<StorageStats, IndexError> {
        Ok(StorageStats {
            repos: self.index().storage_by_repo()?,
            pieces: self.index().all_pieces()?.len(),
        })
    }

    /// Every bundle of the archive, by instance id.
    pub fn bundles_by_instance(&self) -> Result<BTreeMap<String, Vec<BundleRow>>, IndexError> {
        let mut bundles: BTreeMap<String, Vec<BundleRow>> = BTreeMap::new();
        for b in self.index().bundles()? {
            bundles.entry(b.instance_id.clone()).or_default().push(b);
        }
        Ok(bundles)
    }
}
