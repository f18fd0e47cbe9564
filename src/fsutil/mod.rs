//! Crash-safe file writes: every file is written to a temporary name in its final directory,
//! fsynced, then renamed, so a reader sees either nothing or the whole file.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

mod copy;
mod topdir;
pub mod workdir;

pub use copy::{clones_into, copy_file, copy_tree, link_tree};
pub use topdir::mark_top_dir;
pub use workdir::WorkDir;

/// The prefix of every temporary file swe-ark writes; readers of a directory skip these names.
pub const TEMP_PREFIX: &str = ".tmp-";

/// A new temporary file in `dir`, to be completed with [`persist`]. Archive files are
/// world-readable like any file tar or git would write (0644, less the umask).
pub fn temp_file_in(dir: &Path) -> io::Result<NamedTempFile> {
    tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .permissions(std::fs::Permissions::from_mode(0o644))
        .tempfile_in(dir)
}

/// Flushes `tmp` to disk and renames it to `dest` (replacing it), then syncs the directory
/// so the rename itself survives a crash.
pub fn persist(tmp: NamedTempFile, dest: &Path) -> io::Result<()> {
    tmp.as_file().sync_all()?;
    tmp.persist(dest).map_err(|e| e.error)?;
    sync_dir(parent_dir(dest))
}

/// `r.read(buf)`, asked again while the read is interrupted; 0 at the end of `r`.
pub fn read_some(r: &mut (impl io::Read + ?Sized), buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match r.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            read => return read,
        }
    }
}

/// The directory a path is in (`.` for a bare file name).
/// The entries of `dir`, sorted; none when it does not exist.
pub fn list_dir(dir: &Path) -> io::Result<Vec<PathBuf>> {
    match std::fs::read_dir(dir) {
        Ok(rd) => {
            let mut out = rd
                .map(|e| e.map(|e| e.path()))
                .collect::<io::Result<Vec<_>>>()?;
            out.sort();
            Ok(out)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// A fresh directory under `root` (made if missing) whose name starts with `prefix`, removed
/// when dropped unless kept: an instance's work directory under the archive's `tmp/`. Those
/// that stopped runs left there are removed first ([`workdir`]).
pub fn work_dir(root: &Path, prefix: &str) -> io::Result<WorkDir> {
    WorkDir::new(root, prefix)
}

/// Removes a directory and everything in it, making unreadable directories in it readable
/// first (a test may leave one, `chmod 000`, which only root could otherwise remove).
pub fn remove_tree(dir: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(first) if first.kind() == io::ErrorKind::PermissionDenied => {
            use std::os::unix::fs::PermissionsExt;
            let mut stack = vec![dir.to_path_buf()];
            while let Some(d) = stack.pop() {
                let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
                if let Ok(rd) = std::fs::read_dir(&d) {
                    for e in rd.flatten() {
                        if e.file_type().is_ok_and(|t| t.is_dir()) {
                            stack.push(e.path());
                        }
                    }
                }
            }
            std::fs::remove_dir_all(dir)
        }
        Err(e) => Err(e),
    }
}

/// Writes `bytes` to `dest` atomically.
pub fn write_atomic(dest: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = parent_dir(dest);
    let mut tmp = temp_file_in(dir)?;
    tmp.write_all(bytes)?;
    persist(tmp, dest)
}

/// Asks the kernel to start writing `f`'s dirty pages to disk now, without waiting (Linux's
/// `sync_file_range`), so that the `fsync` that must come before a rename finds less left to
/// do. Best effort: an error here changes nothing, the `fsync` still decides.
pub fn start_writeback(f: &File) {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain syscall on a descriptor `f` keeps open; no memory is passed.
    unsafe {
        libc::sync_file_range(f.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
    }
}

/// Writes everything the filesystem holding `path` has not written yet (data and metadata, of
/// every file): one flush where a file-by-file sync would make one per file. For an import's
/// many staged files, all on the archive's filesystem.
pub fn sync_filesystem(path: &Path) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let f = File::open(path)?;
    // SAFETY: a plain syscall on a descriptor `f` keeps open; no memory is passed.
    let r = unsafe { libc::syncfs(f.as_raw_fd()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Temporary files left behind in `dir` by a process that was killed (not followed into
/// subdirectories).
pub fn stale_temp_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    match fs::read_dir(dir) {
        Ok(rd) => {
            for entry in rd {
                let entry = entry?;
                if entry
                    .file_name()
                    .as_encoded_bytes()
                    .starts_with(TEMP_PREFIX.as_bytes())
                {
                    out.push(entry.path());
                }
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    out.sort();
    Ok(out)
}
