//! Where checked members go: nowhere (verify), into a directory (unpack), or to a caller.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::scan::{Scanner, Seen};
use crate::bundle::error::BundleError;
use crate::bundle::manifest::MemberKind;

/// One member as a reader met it: `bundle.json` first, then the rest in tar order. A
/// symlink's content is its target.
pub struct ReadMember<'m> {
    pub path: &'m [u8],
    pub kind: MemberKind,
    pub content: &'m [u8],
}

/// What [`read_members`](super::read_members) hands each member to.
pub type OnMember<'a> = &'a mut dyn FnMut(ReadMember) -> Result<(), BundleError>;

/// Where checked members go.
pub(super) enum Sink<'a> {
    Discard,
    Dir(&'a Path),
    Collect(OnMember<'a>),
}

impl Scanner<'_> {
    pub(super) fn collect(
        &mut self,
        path: &[u8],
        kind: MemberKind,
        content: &[u8],
    ) -> Result<(), BundleError> {
        if let Sink::Collect(f) = &mut self.sink {
            f(ReadMember {
                path,
                kind,
                content,
            })?;
        }
        Ok(())
    }

    pub(super) fn target_path(root: &Path, name: &[u8]) -> PathBuf {
        root.join(OsStr::from_bytes(name))
    }

    fn ensure_parent(&self, root: &Path, name: &[u8], seen: &mut Seen) -> Result<(), BundleError> {
        if let Some(pos) = name.iter().rposition(|&b| b == b'/') {
            let dir = Self::target_path(root, &name[..pos]);
            if !seen.created_dirs.contains(&dir) {
                fs::create_dir_all(&dir).map_err(|e| BundleError::io(&dir, e))?;
                seen.created_dirs.insert(dir);
            }
        }
        Ok(())
    }

    pub(super) fn create_file(
        &self,
        name: &[u8],
        kind: MemberKind,
        seen: &mut Seen,
    ) -> Result<Option<(File, PathBuf)>, BundleError> {
        let Sink::Dir(root) = self.sink else {
            return Ok(None);
        };
        self.ensure_parent(root, name, seen)?;
        let p = Self::target_path(root, name);
        let f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(kind.tar_mode())
            .open(&p)
            .map_err(|e| BundleError::io(&p, e))?;
        Ok(Some((f, p)))
    }

    pub(super) fn write_symlink(
        &self,
        name: &[u8],
        target: &[u8],
        seen: &mut Seen,
    ) -> Result<(), BundleError> {
        let Sink::Dir(root) = self.sink else {
            return Ok(());
        };
        self.ensure_parent(root, name, seen)?;
        let p = Self::target_path(root, name);
        std::os::unix::fs::symlink(OsStr::from_bytes(target), &p)
            .map_err(|e| BundleError::io(&p, e))
    }
}
