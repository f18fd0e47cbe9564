//! Directories whose subdirectories come and go by the thousand (the archive's `tmp/`, a
//! lock's `envs/<id>/`) marked as the top of a hierarchy for ext4's inode allocator
//! (`chattr +T`, `FS_TOPDIR_FL`).
//!
//! Why: on ext4 without a journal (common on virtual machines and CI runners: this one's),
//! the allocator skips every inode deleted in the last minute (five while its inode table
//! block is dirty) in the group it allocates from (`recently_deleted` in `fs/ext4/ialloc.c`),
//! one buffer lookup each. Every work directory is made in its parent's group, where the last
//! instance's thousands of files were just removed: unpacking a 2,000-file bundle took
//! 0.6–1.8 s of kernel time there against 0.06 s elsewhere. Under a marked parent each new
//! directory goes where Orlov's allocator spreads top-level ones (across groups), as the
//! unpack then took 0.07–0.09 s in replays. Elsewhere (a journal, another filesystem) the
//! flag changes nothing that matters, or cannot be set: best effort, never an error.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

/// `FS_TOPDIR_FL` of `linux/fs.h`.
const FS_TOPDIR_FL: libc::c_int = 0x0002_0000;

/// Marks `dir` (made by the caller) as the top of a directory hierarchy, when its filesystem
/// has the flag and it is not marked yet; says why not at debug level otherwise.
pub fn mark_top_dir(dir: &Path) {
    if let Err(e) = try_mark(dir) {
        tracing::debug!("{}: not marked as a top directory: {e}", dir.display());
    }
}

/// The inode flags of the open file (`FS_IOC_GETFLAGS`).
fn flags(file: &File) -> std::io::Result<libc::c_int> {
    let mut flags: libc::c_int = 0;
    // SAFETY: FS_IOC_GETFLAGS writes one int (ioctl_iflags(2)) into `flags`, which lives
    // across the call; the descriptor is open.
    if unsafe { libc::ioctl(file.as_raw_fd(), libc::FS_IOC_GETFLAGS, &mut flags) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(flags)
}

fn try_mark(dir: &Path) -> std::io::Result<()> {
    let file = File::open(dir)?;
    let mut flags = flags(&file)?;
    if flags & FS_TOPDIR_FL != 0 {
        return Ok(());
    }
    flags |= FS_TOPDIR_FL;
    // SAFETY: FS_IOC_SETFLAGS reads one int from `flags`; the descriptor is open.
    if unsafe { libc::ioctl(file.as_raw_fd(), libc::FS_IOC_SETFLAGS, &flags) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the filesystem has the flag (ext4 here), it is set and read back; elsewhere
    /// (tmpfs) nothing happens and nothing fails.
    #[test]
    fn a_directory_is_marked_where_the_filesystem_can() {
        let tmp = tempfile::tempdir().expect("tmp");
        mark_top_dir(tmp.path());
        mark_top_dir(tmp.path());
        let read = flags(&File::open(tmp.path()).expect("open"));
        if let Ok(flags) = read
            && try_mark(tmp.path()).is_ok()
        {
            assert_ne!(flags & FS_TOPDIR_FL, 0, "flags {flags:#x}");
        }
        mark_top_dir(&tmp.path().join("missing"));
    }
}
