//! The kept states' environments on disk, `envs/<lock id>/installed-<owner>-<object>/`: a farm
//! of hard links to the lock's shared copy with the state's changes, made once and shared by
//! every run of the state's key.
//!
//! A run holds a shared `flock` on its farm's directory for as long as it may use it, so that
//! `gc` removes only farms that no run holds and no state names any more (a state made again
//! after its object went bad, or replaced by `validate --force`). Farms are staged in marked
//! work directories ([`crate::fsutil::work_dir`]): a run killed while staging one leaves a
//! directory that the next staging in the same place, or `gc`, removes.

use std::collections::HashSet;
use std::fs::{File, TryLockError};
use std::io;
use std::path::{Path, PathBuf};

use crate::digest::Sha256Digest;

/// The prefix of a farm's directory name; then `<owner>-<object hex>`.
const FARM_PREFIX: &str = "installed-";

/// The directory of the farm of `object` for the runs' owner `owner` in a lock's `envs` dir.
pub(super) fn dir(envs: &Path, owner: u32, object: &Sha256Digest) -> PathBuf {
    envs.join(format!("{FARM_PREFIX}{owner}-{}", object.hex()))
}

/// The object a farm's directory name says it holds (None: not a farm's name).
fn object_of(name: &str) -> Option<Sha256Digest> {
    let rest = name.strip_prefix(FARM_PREFIX)?;
    let (owner, hex) = rest.split_once('-')?;
    owner.parse::<u32>().ok()?;
    hex.parse().ok()
}

/// A shared hold on the farm at `dir`, taken once it is whole: None when it is not there
/// (never made, or removed by a `gc` before the hold was taken).
pub(super) fn hold(dir: &Path) -> io::Result<Option<File>> {
    let file = match File::open(dir) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    file.lock_shared()?;
    // A gc that removed it held it exclusively until then: what is left is not a farm.
    if !dir.join("env").is_dir() {
        return Ok(None);
    }
    Ok(Some(file))
}

/// What [`sweep_farms`] removed (or, with `dry_run`, would remove), and what it left.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FarmSweep {
    /// Farms of states no longer named, removed, and the bytes of their files (links
    /// counted once per name: what they hold is mostly the shared copy's).
    pub farms_removed: Vec<PathBuf>,
    /// Stagings of farms and of the environment's copies that killed runs left.
    pub stagings_removed: usize,
    pub bytes: u64,
    /// Farms left because a run holds them.
    pub farms_in_use: Vec<PathBuf>,
    /// Whole builds that their next use would make again (an older swe-ark's, or made where
    /// the archive was before it was moved or copied), removed with their farms, and why.
    pub builds_removed: Vec<crate::context::StaleBuild>,
}

/// Removes from every lock's directory under `envs_root` the farms of objects outside
/// `live` that no run holds, and the stagings that killed runs left; and whole builds that
/// would be made again at their next use ([`crate::context::remove_stale_build`]).
pub fn sweep_farms(
    envs_root: &Path,
    live: &HashSet<Sha256Digest>,
    dry_run: bool,
) -> io::Result<FarmSweep> {
    let mut report = FarmSweep::default();
    for lock_dir in crate::fsutil::list_dir(envs_root)? {
        if !std::fs::symlink_metadata(&lock_dir).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        if let Some(removed) = crate::context::remove_stale_build(&lock_dir, dry_run)? {
            report.bytes += removed.bytes;
            report.builds_removed.push(removed);
            continue;
        }
        let staged = crate::fsutil::workdir::remove_stale(&lock_dir, dry_run)?;
        report.stagings_removed += staged.removed;
        report.bytes += staged.bytes;
        for entry in crate::fsutil::list_dir(&lock_dir)? {
            let Some(object) = entry
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(object_of)
            else {
                continue;
            };
            if live.contains(&object) {
                continue;
            }
            let file = File::open(&entry)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    report.farms_in_use.push(entry);
                    continue;
                }
                Err(TryLockError::Error(e)) => return Err(e),
            }
            report.bytes += crate::fsutil::workdir::tree_bytes(&entry);
            if !dry_run {
                crate::fsutil::remove_tree(&entry)?;
            }
            report.farms_removed.push(entry);
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(byte: u8) -> Sha256Digest {
        format!("{byte:02x}").repeat(32).parse().expect("a digest")
    }

    fn farm(envs: &Path, lock: &str, object: &Sha256Digest) -> PathBuf {
        let d = dir(&envs.join(lock), 0, object);
        std::fs::create_dir_all(d.join("env/lib")).expect("farm");
        std::fs::write(d.join("env/lib/a.py"), b"x = 1\n").expect("file");
        d
    }

    #[test]
    fn names_of_farms_are_read_back() {
        let o = digest(7);
        let d = dir(Path::new("/e"), 65534, &o);
        let name = d.file_name().and_then(|n| n.to_str()).expect("name");
        assert_eq!(object_of(name), Some(o));
        assert_eq!(object_of("installed-x-00"), None);
        assert_eq!(object_of("layout-0"), None);
        assert_eq!(object_of("venv"), None);
    }

    #[test]
    fn only_farms_no_state_names_and_no_run_holds_are_swept() {
        let tmp = tempfile::tempdir().expect("tmp");
        let envs = tmp.path();
        let (live, stale, held) = (digest(1), digest(2), digest(3));
        let live_dir = farm(envs, "lock-a", &live);
        let stale_dir = farm(envs, "lock-a", &stale);
        let held_dir = farm(envs, "lock-b", &held);
        std::fs::create_dir_all(envs.join("lock-a/venv")).expect("venv");
        // A staging a killed run left: marked, its lock free once its WorkDir is gone.
        let staging_path = envs.join("lock-b/.tmp-farm1");
        std::fs::create_dir_all(staging_path.join("env")).expect("staging");
        std::fs::write(staging_path.join(".swe-ark-in-use"), b"").expect("marker");
        let _hold = hold(&held_dir).expect("hold").expect("held");
        let live_set: HashSet<_> = [live].into_iter().collect();

        let dry = sweep_farms(envs, &live_set, true).expect("dry run");
        assert_eq!(dry.farms_removed, vec![stale_dir.clone()]);
        assert!(stale_dir.is_dir(), "a dry run removes nothing");
        assert_eq!(dry.farms_in_use, vec![held_dir.clone()]);

        let r = sweep_farms(envs, &live_set, false).expect("sweep");
        assert_eq!(r.farms_removed, vec![stale_dir.clone()]);
        assert!(!stale_dir.exists());
        assert!(live_dir.join("env/lib/a.py").is_file(), "a live farm stays");
        assert!(held_dir.join("env/lib/a.py").is_file(), "a held farm stays");
        assert!(envs.join("lock-a/venv").is_dir());
        assert_eq!(r.farms_in_use, vec![held_dir]);
        assert_eq!(r.stagings_removed, 1);
        assert!(!staging_path.exists());
    }

    #[test]
    fn a_hold_on_a_removed_farm_is_none() {
        let tmp = tempfile::tempdir().expect("tmp");
        let d = dir(tmp.path(), 0, &digest(4));
        assert!(hold(&d).expect("hold").is_none());
        std::fs::create_dir_all(&d).expect("dir without env");
        assert!(hold(&d).expect("hold").is_none());
    }
}
