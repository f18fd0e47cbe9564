//! Copies of directory trees that keep what a reader of them relies on: modes, modification
//! times (a `.pyc` is valid only for its source's mtime), links as links.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Copies the tree `src` to `dest` (created): directories, files (their modes and times)
/// and symbolic links (as they are), in a stable order.
pub fn copy_tree(src: &Path, dest: &Path) -> io::Result<()> {
    walk_into(src, dest, &|from, to, meta| copy_file(from, to, Some(meta)))
}

/// [`copy_tree`], but each file hard-linked rather than copied (copied where a link cannot
/// be made: another filesystem). Whoever changes a file of `dest` must replace it, never write
/// through it: it is `src`'s.
pub fn link_tree(src: &Path, dest: &Path) -> io::Result<()> {
    walk_into(src, dest, &|from, to, meta| match fs::hard_link(from, to) {
        Ok(()) => Ok(()),
        Err(_) => copy_file(from, to, Some(meta)),
    })
}

/// `src`'s directories and links made again under `dest`, and `file` called for each of
/// its regular files (with the source's metadata).
fn walk_into(
    src: &Path,
    dest: &Path,
    file: &dyn Fn(&Path, &Path, fs::Metadata) -> io::Result<()>,
) -> io::Result<()> {
    let at = |p: &Path, e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", p.display()));
    fs::create_dir_all(dest).map_err(|e| at(dest, e))?;
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = src.join(&rel);
        let mut entries: Vec<_> = fs::read_dir(&dir)
            .and_then(|rd| rd.collect::<io::Result<Vec<_>>>())
            .map_err(|e| at(&dir, e))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let r = rel.join(e.file_name());
            let (from, to) = (src.join(&r), dest.join(&r));
            let ft = e.file_type().map_err(|e| at(&from, e))?;
            if ft.is_symlink() {
                let target = fs::read_link(&from).map_err(|e| at(&from, e))?;
                std::os::unix::fs::symlink(&target, &to).map_err(|e| at(&to, e))?;
            } else if ft.is_dir() {
                fs::create_dir_all(&to).map_err(|e| at(&to, e))?;
                let mode = e.metadata().map_err(|e| at(&from, e))?.permissions();
                fs::set_permissions(&to, mode).map_err(|e| at(&to, e))?;
                stack.push(r);
            } else if ft.is_file() {
                file(&from, &to, e.metadata().map_err(|e| at(&from, e))?)?;
            }
        }
    }
    Ok(())
}

/// Whether the file `from` can be cloned into the directory `dir` (`FICLONE`): the two share
/// one filesystem that shares extents (Btrfs, XFS), where [`copy_tree`]'s copies are reflinks
/// (copy_file_range clones there) and cost no data. A probe: nothing is left in `dir`.
pub fn clones_into(from: &Path, dir: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(source) = fs::File::open(from) else {
        return false;
    };
    let Ok(probe) = tempfile::tempfile_in(dir) else {
        return false;
    };
    // SAFETY: FICLONE with two descriptors that outlive the call.
    unsafe { libc::ioctl(probe.as_raw_fd(), libc::FICLONE, source.as_raw_fd()) == 0 }
}

/// Copies one file (copy_file_range underneath: a reflink where the file system has them),
/// keeping its permissions and modification time when `meta` (the source's) is given.
pub fn copy_file(from: &Path, to: &Path, meta: Option<fs::Metadata>) -> io::Result<()> {
    let at = |p: &Path, e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", p.display()));
    let mut src = fs::File::open(from).map_err(|e| at(from, e))?;
    let mut dst = fs::File::create(to).map_err(|e| at(to, e))?;
    io::copy(&mut src, &mut dst).map_err(|e| at(to, e))?;
    if let Some(m) = meta {
        dst.set_permissions(m.permissions())
            .map_err(|e| at(to, e))?;
        // Best effort: only costs a compile.
        if let Ok(t) = m.modified() {
            let _ = dst.set_modified(t);
        }
    }
    Ok(())
}
