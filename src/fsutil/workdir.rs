//! Work directories under an archive's `tmp/` (an instance's checkout and build, a lock's
//! installs), and those that runs stopped without a chance to clean up left behind.
//!
//! A killed validation leaves its work directory (a Rust instance's: gigabytes of `target/`)
//! and, as root, the tmpfs it mounted for the instance's `/tmp`. Each work directory holds a
//! marker, `.swe-ark-in-use`, on which the process that made it keeps an exclusive `flock`
//! for as long as the directory is in use: a later swe-ark that can take the lock knows the
//! process is gone, detaches what is mounted in the directory and removes it. A directory
//! without the marker (kept with `--keep-workdir`, or made by an older swe-ark) is left alone.

use std::fs::{self, File};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The marker a work directory's process holds locked.
const MARKER: &str = ".swe-ark-in-use";

/// A work directory: removed when dropped unless kept; its marker locked while it lives.
#[derive(Debug)]
pub struct WorkDir {
    dir: tempfile::TempDir,
    /// The open, locked marker: the lock goes with the descriptor.
    _marker: File,
}

/// Takes `flock(LOCK_EX | LOCK_NB)` on `file`: false when another open file holds it.
fn try_lock(file: &File) -> io::Result<bool> {
    // SAFETY: flock on a descriptor `file` keeps open; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        _ => Err(e),
    }
}

impl WorkDir {
    /// A fresh directory under `root` (made if missing) whose name starts with `prefix`, its
    /// marker locked. Work directories that stopped runs left in `root` are removed first.
    pub fn new(root: &Path, prefix: &str) -> io::Result<WorkDir> {
        fs::create_dir_all(root)?;
        // Work directories come and go by the thousand here: each new one in a fresh place.
        super::mark_top_dir(root);
        match remove_stale(root, false) {
            Ok(swept) if swept.removed > 0 => tracing::info!(
                "removed {} work directories that stopped runs left in {} ({} bytes)",
                swept.removed,
                root.display(),
                swept.bytes
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!("cannot look for stale work directories: {e}"),
        }
        let dir = tempfile::Builder::new().prefix(prefix).tempdir_in(root)?;
        // Locked under another name, then renamed: a sweep never sees the marker unlocked.
        // Where the filesystem has no locks, the directory goes without a marker: never taken
        // for a stale one.
        let staged = dir.path().join(".swe-ark-in-use.new");
        let marker = File::create(&staged)?;
        match try_lock(&marker) {
            Ok(true) => fs::rename(&staged, dir.path().join(MARKER))?,
            locked => {
                tracing::debug!(
                    "{}: no lock ({locked:?}): the work directory goes without a marker",
                    staged.display()
                );
                fs::remove_file(&staged)?;
            }
        }
        Ok(WorkDir {
            dir,
            _marker: marker,
        })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Keeps the directory (not removed when dropped, and never taken for a stale one: its
    /// marker goes); returns its path.
    pub fn keep(self) -> PathBuf {
        let _ = fs::remove_file(self.dir.path().join(MARKER));
        self.dir.keep()
    }
}

/// What [`remove_stale`] did, and what it left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Swept {
    /// Stale work directories removed, and the bytes of their files.
    pub removed: usize,
    pub bytes: u64,
    /// Work directories without a marker (kept, or made by an older swe-ark): left.
    pub unmarked: Vec<PathBuf>,
}

/// Removes every work directory in `root` (a name starting with `.tmp-`) whose marker no
/// process holds: what is mounted in it is detached first (as root). With `dry_run`, only
/// says what it would remove.
pub fn remove_stale(root: &Path, dry_run: bool) -> io::Result<Swept> {
    let mut swept = Swept::default();
    for dir in super::list_dir(root)? {
        let is_work_dir = dir.file_name().is_some_and(|n| {
            n.as_encoded_bytes()
                .starts_with(super::TEMP_PREFIX.as_bytes())
        });
        if !is_work_dir || !fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let marker = match File::open(dir.join(MARKER)) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                swept.unmarked.push(dir);
                continue;
            }
            Err(e) => {
                tracing::debug!("{}: {e}: left", dir.display());
                continue;
            }
        };
        // Held by a live process, or a filesystem without locks: left.
        if !try_lock(&marker).unwrap_or(false) {
            continue;
        }
        let bytes = tree_bytes(&dir);
        if dry_run {
            swept.removed += 1;
            swept.bytes += bytes;
            continue;
        }
        if let Err(e) = detach_mounts_under(&dir) {
            tracing::debug!("{}: cannot detach its mounts: {e}", dir.display());
        }
        match super::remove_tree(&dir) {
            Ok(()) => {
                swept.removed += 1;
                swept.bytes += bytes;
            }
            // Another sweep took it first.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(
                "cannot remove the stale work directory {}: {e}",
                dir.display()
            ),
        }
    }
    Ok(swept)
}

/// The bytes of the files under `dir` (links not followed; what cannot be read counts 0).
pub(crate) fn tree_bytes(dir: &Path) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total = total.saturating_add(m.len()),
                Err(_) => {}
            }
        }
    }
    total
}

/// A path of `/proc/self/mountinfo`, whose space, tab, newline and backslash are octal
/// escapes (`\040`).
fn unescape(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let code = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .map(|d| d.iter().fold(0u32, |n, c| n * 8 + u32::from(c - b'0')));
        match code.and_then(|c| u8::try_from(c).ok()) {
            Some(b) => {
                out.push(b);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(out))
}

/// Detaches every mount at or under `dir`, the deepest first; returns how many. Nothing to do
/// for a caller who cannot have mounted any (not root).
pub fn detach_mounts_under(dir: &Path) -> io::Result<usize> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(0);
    }
    let dir = fs::canonicalize(dir)?;
    let info = fs::read_to_string("/proc/self/mountinfo")?;
    let mut points: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape)
        .filter(|p| p.starts_with(&dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    points.dedup();
    let mut detached = 0;
    for p in points {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::other("a mount point with a NUL byte"))?;
        // SAFETY: umount2 with a C string that outlives the call.
        if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
            detached += 1;
        } else {
            tracing::debug!(
                "cannot detach {}: {}",
                p.display(),
                io::Error::last_os_error()
            );
        }
    }
    Ok(detached)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_paths_are_unescaped() {
        assert_eq!(unescape("/a\\040b\\011c\\\\"), PathBuf::from("/a b\tc\\\\"));
        assert_eq!(unescape("/plain/path"), PathBuf::from("/plain/path"));
        assert_eq!(unescape("/x\\0"), PathBuf::from("/x\\0"));
    }

    #[test]
    fn only_what_no_process_holds_is_removed() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("tmp");
        // Held: this process's own, alive.
        let live = WorkDir::new(&root, ".tmp-validate-").unwrap();
        fs::write(live.path().join("file"), "x").unwrap();
        // Kept with --keep-workdir: no marker.
        let kept = WorkDir::new(&root, ".tmp-replay-").unwrap().keep();
        // Left by a run that stopped: a marker nobody holds, and a big file.
        let stale = root.join(".tmp-validate-stale");
        fs::create_dir_all(stale.join("src/target")).unwrap();
        fs::write(stale.join(MARKER), "").unwrap();
        fs::write(stale.join("src/target/lib.rlib"), vec![0u8; 4096]).unwrap();
        // Not a work directory.
        fs::create_dir_all(root.join("other")).unwrap();

        let would = remove_stale(&root, true).unwrap();
        assert_eq!((would.removed, would.bytes), (1, 4096));
        assert!(stale.exists());
        let swept = remove_stale(&root, false).unwrap();
        assert_eq!(swept.removed, 1);
        assert_eq!(swept.bytes, 4096);
        assert_eq!(swept.unmarked, vec![kept.clone()]);
        assert!(!stale.exists());
        assert!(live.path().join("file").exists() && kept.exists());
        assert!(root.join("other").exists());
        // As root: a stale directory with the tmpfs its instance's /tmp had, still mounted.
        // SAFETY (both calls): geteuid has no preconditions; mount with C strings that
        // outlive the call.
        if unsafe { libc::geteuid() } == 0 {
            let mounted = root.join(".tmp-validate-mounted");
            fs::create_dir_all(mounted.join("tmp")).unwrap();
            fs::write(mounted.join(MARKER), "").unwrap();
            let at =
                std::ffi::CString::new(mounted.join("tmp").as_os_str().as_encoded_bytes()).unwrap();
            let ok = unsafe {
                libc::mount(
                    c"tmpfs".as_ptr(),
                    at.as_ptr(),
                    c"tmpfs".as_ptr(),
                    0,
                    std::ptr::null(),
                )
            } == 0;
            if ok {
                fs::write(mounted.join("tmp/left"), "x").unwrap();
                let swept = remove_stale(&root, false).unwrap();
                assert_eq!(swept.removed, 1);
                assert!(!mounted.exists());
                let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
                assert!(!info.contains(".tmp-validate-mounted"), "{info}");
            }
        }
        // A new work directory sweeps too; dropping one removes it.
        fs::create_dir_all(&stale).unwrap();
        fs::write(stale.join(MARKER), "").unwrap();
        let next = WorkDir::new(&root, ".tmp-validate-").unwrap();
        assert!(!stale.exists());
        let path = next.path().to_path_buf();
        drop(next);
        assert!(!path.exists());
        assert!(live.path().exists());
    }
}
