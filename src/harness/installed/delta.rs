//! What an install changed in a directory, against what it started from: read from an
//! overlay's upper layer (whiteouts and opaque directories included), from a writable copy
//! compared with its original, or from a git work tree (what is not committed).

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A file or link that is new or changed: where it is now, and how it is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Changed {
    /// Relative to the directory.
    pub rel: PathBuf,
    /// Its target, for a link.
    pub link: Option<PathBuf>,
    pub executable: bool,
    /// Modification time (seconds, nanoseconds): a `.pyc` is valid for its source's.
    pub mtime: (i64, u32),
}

/// What changed under a directory, each list in path order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Delta {
    /// Paths that are gone (a directory with everything under it), applied first.
    pub removed: Vec<PathBuf>,
    /// Directories that are new (or replace what was there), with their modes.
    pub dirs: Vec<(PathBuf, u32)>,
    /// Files and links that are new or changed.
    pub changed: Vec<Changed>,
}

impl Delta {
    /// Entries it holds, removals included.
    pub fn entries(&self) -> usize {
        self.removed.len() + self.dirs.len() + self.changed.len()
    }

    fn sort(&mut self) {
        self.removed.sort();
        self.removed.dedup();
        self.dirs.sort();
        self.changed.sort_by(|a, b| a.rel.cmp(&b.rel));
    }
}

fn at(p: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", p.display()))
}

/// The entries of `dir`, sorted by name.
fn entries(dir: &Path) -> io::Result<Vec<fs::DirEntry>> {
    let mut out: Vec<fs::DirEntry> = fs::read_dir(dir)
        .and_then(|rd| rd.collect::<io::Result<Vec<_>>>())
        .map_err(|e| at(dir, e))?;
    out.sort_by_key(|e| e.file_name());
    Ok(out)
}

fn changed(path: &Path, rel: PathBuf, meta: &fs::Metadata) -> io::Result<Changed> {
    let link = if meta.file_type().is_symlink() {
        Some(fs::read_link(path).map_err(|e| at(path, e))?)
    } else {
        None
    };
    Ok(Changed {
        rel,
        executable: link.is_none() && meta.permissions().mode() & 0o111 != 0,
        link,
        mtime: (meta.mtime(), meta.mtime_nsec() as u32),
    })
}

/// The value of extended attribute `name` of `path` (not following a link), if it has one.
fn xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let p = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let n = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0u8; 256];
    // SAFETY: both strings are NUL-terminated and `buf` is as long as the length given.
    let len = unsafe {
        libc::lgetxattr(
            p.as_ptr(),
            n.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len() as libc::size_t,
        )
    };
    (len >= 0).then(|| {
        buf.truncate(len as usize);
        buf
    })
}

/// Overlay attributes in the `user.` namespace (mounted with `userxattr`, as the sandbox
/// does) and the `trusted.` one (mounted by root outside a namespace).
fn overlay_xattr(path: &Path, what: &str) -> Option<Vec<u8>> {
    xattr(path, &format!("user.overlay.{what}"))
        .or_else(|| xattr(path, &format!("trusted.overlay.{what}")))
}

/// What an overlay's upper layer `upper` holds: a whiteout (a character device 0:0) is a
/// removal, an opaque directory replaces the lower one. A layer that needs the lower one to be
/// read (a redirected directory, a metadata-only copy) is refused: the mounts here have
/// neither feature on.
pub(super) fn from_upper(upper: &Path) -> io::Result<Delta> {
    let mut delta = Delta::default();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel_dir) = stack.pop() {
        for e in entries(&upper.join(&rel_dir))? {
            let rel = rel_dir.join(e.file_name());
            let path = upper.join(&rel);
            let meta = fs::symlink_metadata(&path).map_err(|e| at(&path, e))?;
            let ft = meta.file_type();
            for feature in ["redirect", "metacopy"] {
                if overlay_xattr(&path, feature).is_some() {
                    return Err(io::Error::other(format!(
                        "{}: an overlay {feature} entry (it needs the lower layer to be read)",
                        path.display()
                    )));
                }
            }
            if ft.is_char_device() && meta.rdev() == 0 {
                delta.removed.push(rel);
            } else if ft.is_dir() {
                if overlay_xattr(&path, "opaque").is_some_and(|v| v == b"y") {
                    delta.removed.push(rel.clone());
                }
                delta
                    .dirs
                    .push((rel.clone(), meta.permissions().mode() & 0o7777));
                stack.push(rel);
            } else if ft.is_file() || ft.is_symlink() {
                delta.changed.push(changed(&path, rel, &meta)?);
            }
        }
    }
    delta.sort();
    Ok(delta)
}

/// Whether two regular files hold the same bytes.
fn same_content(a: &Path, b: &Path) -> io::Result<bool> {
    let (mut fa, mut fb) = (
        io::BufReader::new(fs::File::open(a).map_err(|e| at(a, e))?),
        io::BufReader::new(fs::File::open(b).map_err(|e| at(b, e))?),
    );
    let (mut ba, mut bb) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        let n = crate::fsutil::read_some(&mut fa, &mut ba)?;
        let m = crate::fsutil::read_some(&mut fb, &mut bb)?;
        if n != m || ba[..n] != bb[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

/// Whether `path` (in the copy) is what `original` was: the same kind, target, mode and bytes.
fn unchanged(path: &Path, meta: &fs::Metadata, original: &Path) -> io::Result<bool> {
    let Ok(o) = fs::symlink_metadata(original) else {
        return Ok(false);
    };
    let (ft, oft) = (meta.file_type(), o.file_type());
    if ft.is_symlink() || oft.is_symlink() {
        return Ok(ft.is_symlink()
            && oft.is_symlink()
            && fs::read_link(path).ok() == fs::read_link(original).ok());
    }
    if !(ft.is_file() && oft.is_file()) || meta.len() != o.len() {
        return Ok(false);
    }
    if meta.permissions().mode() != o.permissions().mode() {
        return Ok(false);
    }
    // The copy keeps times: the same time and size is the same file.
    if (meta.mtime(), meta.mtime_nsec()) == (o.mtime(), o.mtime_nsec()) {
        return Ok(true);
    }
    same_content(path, original)
}

/// What a writable copy `copy` of `original` holds that the original does not, and what of
/// the original it lacks.
pub(super) fn from_copy(copy: &Path, original: &Path) -> io::Result<Delta> {
    let mut delta = Delta::default();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel_dir) = stack.pop() {
        for e in entries(&copy.join(&rel_dir))? {
            let rel = rel_dir.join(e.file_name());
            let (path, before) = (copy.join(&rel), original.join(&rel));
            let meta = fs::symlink_metadata(&path).map_err(|e| at(&path, e))?;
            let was = fs::symlink_metadata(&before).ok();
            if meta.is_dir() {
                match &was {
                    Some(w) if w.is_dir() => {}
                    Some(_) => {
                        delta.removed.push(rel.clone());
                        delta
                            .dirs
                            .push((rel.clone(), meta.permissions().mode() & 0o7777));
                    }
                    None => delta
                        .dirs
                        .push((rel.clone(), meta.permissions().mode() & 0o7777)),
                }
                stack.push(rel);
            } else if meta.is_file() || meta.file_type().is_symlink() {
                if unchanged(&path, &meta, &before)? {
                    continue;
                }
                if was.as_ref().is_some_and(|w| w.is_dir()) {
                    delta.removed.push(rel.clone());
                }
                delta.changed.push(changed(&path, rel, &meta)?);
            }
        }
        // What the original had here that the copy lost.
        let Ok(originals) = entries(&original.join(&rel_dir)) else {
            continue;
        };
        for e in originals {
            let rel = rel_dir.join(e.file_name());
            if fs::symlink_metadata(copy.join(&rel)).is_err() {
                delta.removed.push(rel);
            }
        }
    }
    delta.sort();
    Ok(delta)
}

/// `git ARGS` in `tree` (bytewise, as the tree was built), its output as bytes: the paths of
/// `-z` lists need not be UTF-8.
fn git(tree: &Path, args: &[&str]) -> io::Result<Vec<u8>> {
    let out = crate::gitcmd::command_bytewise()
        .args(args)
        .current_dir(tree)
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(crate::gitcmd::GitError::of(
            tree, args, &out,
        )));
    }
    Ok(out.stdout)
}

/// What the work tree `tree` holds beyond its commit: every file git does not track
/// (ignored ones included: an egg-info, built extensions, a generated version file), every
/// tracked file changed, every tracked file removed.
pub(super) fn from_work_tree(tree: &Path) -> io::Result<Delta> {
    use std::os::unix::ffi::OsStrExt;
    let mut delta = Delta::default();
    let path_of = |raw: &[u8]| PathBuf::from(std::ffi::OsStr::from_bytes(raw));
    let others = git(tree, &["ls-files", "-z", "--others"])?;
    let status = git(
        tree,
        &["diff", "-z", "--name-status", "--no-renames", "HEAD"],
    )?;
    let mut fields = status.split(|b| *b == 0).filter(|f| !f.is_empty());
    let mut present = Vec::new();
    while let (Some(code), Some(raw)) = (fields.next(), fields.next()) {
        if code.starts_with(b"D") {
            delta.removed.push(path_of(raw));
        } else {
            present.push(path_of(raw));
        }
    }
    present.extend(
        others
            .split(|b| *b == 0)
            .filter(|f| !f.is_empty() && !f.ends_with(b"/"))
            .map(path_of),
    );
    for rel in present {
        let path = tree.join(&rel);
        let meta = fs::symlink_metadata(&path).map_err(|e| at(&path, e))?;
        if meta.is_file() || meta.file_type().is_symlink() {
            delta.changed.push(changed(&path, rel, &meta)?);
        }
    }
    delta.sort();
    Ok(delta)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, s: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    }

    #[test]
    fn a_copy_is_told_apart_from_its_original_by_what_changed() {
        let dir = tempfile::tempdir().unwrap();
        let (orig, copy) = (dir.path().join("o"), dir.path().join("c"));
        write(&orig.join("lib/a.py"), "a");
        write(&orig.join("lib/gone.py"), "g");
        write(&orig.join("old/x"), "x");
        write(&orig.join("same"), "s");
        crate::fsutil::copy_tree(&orig, &copy).unwrap();
        write(&copy.join("lib/a.py"), "b");
        fs::remove_file(copy.join("lib/gone.py")).unwrap();
        fs::remove_dir_all(copy.join("old")).unwrap();
        write(&copy.join("new/pkg.pth"), "/testbed");
        std::os::unix::fs::symlink("a.py", copy.join("lib/link")).unwrap();
        let d = from_copy(&copy, &orig).unwrap();
        assert_eq!(d.removed, vec![PathBuf::from("lib/gone.py"), "old".into()]);
        assert_eq!(
            d.dirs.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>(),
            vec![PathBuf::from("new")]
        );
        let changed: Vec<_> = d.changed.iter().map(|c| c.rel.clone()).collect();
        assert_eq!(
            changed,
            vec![
                PathBuf::from("lib/a.py"),
                "lib/link".into(),
                "new/pkg.pth".into()
            ]
        );
        assert_eq!(d.changed[1].link, Some(PathBuf::from("a.py")));
    }

    #[test]
    fn a_work_tree_gives_what_its_commit_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        write(&t.join("pkg/mod.py"), "m");
        write(&t.join("pkg/drop.py"), "d");
        write(&t.join(".gitignore"), "*.egg-info/\n");
        crate::vcs::build_work_tree(t, None).unwrap();
        write(&t.join("pkg/mod.py"), "changed");
        fs::remove_file(t.join("pkg/drop.py")).unwrap();
        write(&t.join("pkg.egg-info/PKG-INFO"), "x");
        write(&t.join("pkg/_ext.so"), "bin");
        let d = from_work_tree(t).unwrap();
        assert_eq!(d.removed, vec![PathBuf::from("pkg/drop.py")]);
        let changed: Vec<_> = d.changed.iter().map(|c| c.rel.clone()).collect();
        assert_eq!(
            changed,
            // Component by component: `pkg/…` before `pkg.egg-info/…`.
            vec![
                PathBuf::from("pkg/_ext.so"),
                "pkg/mod.py".into(),
                "pkg.egg-info/PKG-INFO".into()
            ]
        );
    }
}
