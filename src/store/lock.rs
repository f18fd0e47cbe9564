//! `store.lock`: writers and readers of the store hold it shared; garbage collection holds it
//! alone, so it never removes a pack that a pack in progress builds on or a reader reads.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

pub const LOCK_FILE: &str = "store.lock";

/// A held lock; released when dropped.
#[derive(Debug)]
pub struct StoreLock {
    _file: File,
}

fn open(root: &Path) -> io::Result<Option<File>> {
    let path = root.join(LOCK_FILE);
    match OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
    {
        Ok(f) => Ok(Some(f)),
        // A read-only archive: nothing can change it, so there is nothing to lock against.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            File::open(&path).map(Some).or(Ok(None))
        }
        Err(e) if e.kind() == io::ErrorKind::ReadOnlyFilesystem => Ok(None),
        Err(e) => Err(e),
    }
}

impl StoreLock {
    /// Waits for a shared hold (while a gc runs).
    pub fn shared(root: &Path) -> io::Result<Option<StoreLock>> {
        let Some(file) = open(root)? else {
            return Ok(None);
        };
        file.lock_shared()?;
        Ok(Some(StoreLock { _file: file }))
    }

    /// The lock alone, now, or `None` when another process holds it.
    pub fn exclusive_now(root: &Path) -> io::Result<Option<StoreLock>> {
        let Some(file) = open(root)? else {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the archive is read-only",
            ));
        };
        match file.try_lock() {
            Ok(()) => Ok(Some(StoreLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }
}
