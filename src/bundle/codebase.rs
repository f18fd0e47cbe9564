//! The files of an instance's codebase, hashed once: sha256 for `bundle.json`, the git blob id
//! for the tree id. Read from a directory today; the mirror stage adds git trees as a source.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::digest::{GitBlobHasher, GitOid, Sha256Digest, Sha256Hasher};
use crate::fsutil;
use crate::progress::Progress;

use super::error::BundleError;
use super::manifest::{Gitlink, MemberKind};
use super::{CODEBASE_DIR, gittree, path, tarfmt};

/// Where a codebase file's bytes come from when the tar is written.
#[derive(Debug, Clone)]
pub enum EntrySource {
    File(PathBuf),
    Bytes(Vec<u8>),
}

#[derive(Debug, Clone)]
pub struct CodebaseEntry {
    /// Relative to the codebase root.
    pub path: Vec<u8>,
    pub kind: MemberKind,
    pub size: u64,
    pub sha256: Sha256Digest,
    pub blob: GitOid,
    pub source: EntrySource,
}

/// A codebase ready to pack: entries and submodules sorted by path bytes, and its git tree id.
#[derive(Debug, Clone)]
pub struct Codebase {
    pub entries: Vec<CodebaseEntry>,
    /// Submodules (paths relative to the codebase root); the files of those with a `tree`
    /// are among `entries`.
    pub gitlinks: Vec<Gitlink>,
    pub tree: GitOid,
}

struct Found {
    rel: Vec<u8>,
    abs: PathBuf,
    kind: MemberKind,
    size: u64,
    link: Option<Vec<u8>>,
}

/// Everything under `dir` (whose path in the codebase is `rel`), subdirectories walked in
/// parallel: a large tree is tens of thousands of `lstat`s.
fn walk(dir: &Path, rel: &[u8], out: &mut Vec<Found>) -> Result<(), BundleError> {
    let mut subdirs: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    let rd = fs::read_dir(dir).map_err(|e| BundleError::io(dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| BundleError::io(dir, e))?;
        let name = entry.file_name();
        // Git never stores `.git`; a checkout's own repository is not part of its tree.
        if name.as_bytes() == b".git" {
            continue;
        }
        let mut child_rel = rel.to_vec();
        if !child_rel.is_empty() {
            child_rel.push(b'/');
        }
        child_rel.extend_from_slice(name.as_bytes());
        let abs = entry.path();
        let meta = fs::symlink_metadata(&abs).map_err(|e| BundleError::io(&abs, e))?;
        let ft = meta.file_type();
        let bad = |reason: String| BundleError::BadInput {
            path: abs.clone(),
            reason,
        };
        if ft.is_dir() {
            subdirs.push((abs, child_rel));
        } else if ft.is_symlink() {
            let target = fs::read_link(&abs).map_err(|e| BundleError::io(&abs, e))?;
            let target = target.as_os_str().as_bytes().to_vec();
            let mut member = CODEBASE_DIR.as_bytes().to_vec();
            member.extend_from_slice(&child_rel);
            if !path::link_stays_inside(CODEBASE_DIR.as_bytes(), &member, &target) {
                return Err(bad(format!(
                    "the symlink points outside the codebase (to `{}`); bundles refuse such links \
                     (only leading `..` components are allowed in a link target)",
                    path::display(&target)
                )));
            }
            out.push(Found {
                rel: child_rel,
                abs,
                kind: MemberKind::Symlink,
                size: target.len() as u64,
                link: Some(target),
            });
        } else if ft.is_file() {
            if meta.len() > tarfmt::MAX_MEMBER_SIZE {
                return Err(bad(format!(
                    "{} bytes is over the largest file a bundle holds",
                    meta.len()
                )));
            }
            let kind = if meta.permissions().mode() & 0o100 != 0 {
                MemberKind::Executable
            } else {
                MemberKind::File
            };
            out.push(Found {
                rel: child_rel,
                abs,
                kind,
                size: meta.len(),
                link: None,
            });
        } else {
            let what = if ft.is_fifo() {
                "a FIFO"
            } else if ft.is_socket() {
                "a socket"
            } else if ft.is_block_device() || ft.is_char_device() {
                "a device file"
            } else {
                "not a regular file, directory or symlink"
            };
            return Err(bad(format!(
                "it is {what}; a codebase holds only files and symlinks"
            )));
        }
    }
    let nested = subdirs
        .into_par_iter()
        .map(|(abs, child_rel)| {
            let mut found = Vec::new();
            walk(&abs, &child_rel, &mut found).map(|()| found)
        })
        .collect::<Result<Vec<_>, BundleError>>()?;
    out.extend(nested.into_iter().flatten());
    Ok(())
}

/// Files are kept in memory after hashing while the kept total stays under this, so the tar
/// is written from exactly the bytes that were hashed (a file edited during a pack cannot make
/// a bundle that contradicts its bundle.json) and is read from disk once.
const KEEP_IN_MEMORY: u64 = 1 << 30;

fn hash_file(
    found: &Found,
    keep: bool,
    progress: &dyn Progress,
) -> Result<(Sha256Digest, GitOid, EntrySource), BundleError> {
    let mut f = File::open(&found.abs).map_err(|e| BundleError::io(&found.abs, e))?;
    let mut sha = Sha256Hasher::new();
    let mut blob = GitBlobHasher::new(found.size);
    let changed = |read: u64| BundleError::BadInput {
        path: found.abs.clone(),
        reason: format!(
            "the file changed while it was read ({} bytes expected, {read} read)",
            found.size
        ),
    };
    if keep {
        let mut content = Vec::with_capacity(found.size as usize);
        (&mut f)
            .take(found.size + 1)
            .read_to_end(&mut content)
            .map_err(|e| BundleError::io(&found.abs, e))?;
        if content.len() as u64 != found.size {
            return Err(changed(content.len() as u64));
        }
        sha.update(&content);
        blob.update(&content);
        progress.advance(found.size);
        return Ok((sha.finish(), blob.finish(), EntrySource::Bytes(content)));
    }
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = fsutil::read_some(&mut f, &mut buf).map_err(|e| BundleError::io(&found.abs, e))?;
        if n == 0 {
            break;
        }
        sha.update(&buf[..n]);
        blob.update(&buf[..n]);
        total += n as u64;
        progress.advance(n as u64);
    }
    if total != found.size {
        return Err(changed(total));
    }
    Ok((
        sha.finish(),
        blob.finish(),
        EntrySource::File(found.abs.clone()),
    ))
}

impl Codebase {
    /// Reads the tree under `dir` (without any `.git`), hashing its files in parallel.
    pub fn from_dir(dir: &Path, progress: &dyn Progress) -> Result<Codebase, BundleError> {
        let meta = fs::metadata(dir).map_err(|e| BundleError::io(dir, e))?;
        if !meta.is_dir() {
            return Err(BundleError::BadInput {
                path: dir.to_path_buf(),
                reason: "the codebase must be a directory".into(),
            });
        }
        let mut found = Vec::new();
        let started = std::time::Instant::now();
        walk(dir, b"", &mut found)?;
        tracing::debug!(
            "walked {} entries in {:.2?}",
            found.len(),
            started.elapsed()
        );
        found.sort_by(|a, b| a.rel.cmp(&b.rel));
        let total: u64 = found
            .iter()
            .filter(|f| f.link.is_none())
            .map(|f| f.size)
            .sum();
        let keep = total <= KEEP_IN_MEMORY;
        progress.start("hashing codebase", Some(total));
        let entries = found
            .into_par_iter()
            .map(|f| {
                let (sha256, blob, source) = match &f.link {
                    Some(target) => {
                        let mut b = GitBlobHasher::new(target.len() as u64);
                        b.update(target);
                        (
                            Sha256Digest::of(target),
                            b.finish(),
                            EntrySource::Bytes(target.clone()),
                        )
                    }
                    None => hash_file(&f, keep, progress)?,
                };
                Ok(CodebaseEntry {
                    path: f.rel,
                    kind: f.kind,
                    size: f.size,
                    sha256,
                    blob,
                    source,
                })
            })
            .collect::<Result<Vec<_>, BundleError>>()?;
        progress.finish();
        Codebase::from_entries(entries, Vec::new()).map_err(|e| BundleError::BadInput {
            path: dir.to_path_buf(),
            reason: e.to_string(),
        })
    }

    /// A codebase from entries already hashed and submodules (any order). A submodule with a
    /// `tree` is carried: the entries under its path are its files and must make that tree.
    pub fn from_entries(
        mut entries: Vec<CodebaseEntry>,
        mut gitlinks: Vec<Gitlink>,
    ) -> Result<Codebase, gittree::TreeError> {
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        gitlinks.sort_by(|a, b| a.path.cmp(&b.path));
        let submodules: Vec<gittree::Submodule> = gitlinks
            .iter()
            .map(|g| gittree::Submodule {
                path: &g.path,
                commit: g.commit,
                carried: g.tree.is_some(),
            })
            .collect();
        let (tree, trees) = gittree::tree_ids(
            entries
                .iter()
                .map(|e| (&e.path[..], e.kind.git_mode(), e.blob)),
            &submodules,
        )?;
        for (g, computed) in gitlinks.iter().zip(trees) {
            if let (Some(claimed), Some(computed)) = (g.tree, computed)
                && claimed != computed
            {
                return Err(gittree::TreeError::SubmoduleTree {
                    path: String::from_utf8_lossy(&g.path).into_owned(),
                    computed,
                    claimed,
                });
            }
        }
        Ok(Codebase {
            entries,
            gitlinks,
            tree,
        })
    }

    pub fn total_size(&self) -> u64 {
        self.entries.iter().map(|e| e.size).sum()
    }

    /// Writes the codebase into `dir` (missing or empty) as unpacking its bundle would:
    /// files with mode 0644 or 0755, symlinks, a carried submodule's files under its path, and
    /// an empty directory at each other submodule, as `git checkout` leaves one.
    pub fn write_to(&self, dir: &Path) -> Result<(), BundleError> {
        use std::ffi::OsStr;
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        fs::create_dir_all(dir).map_err(|e| BundleError::io(dir, e))?;
        // Sorted byte strings put every directory after its parent.
        let mut dirs = std::collections::BTreeSet::new();
        for p in self.entries.iter().map(|e| &e.path[..]) {
            dirs.extend(path::ancestors(p));
        }
        for g in &self.gitlinks {
            dirs.extend(path::ancestors(&g.path));
            dirs.insert(&g.path[..]);
        }
        for d in dirs {
            let p = dir.join(OsStr::from_bytes(d));
            match fs::create_dir(&p) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                    return Err(BundleError::io(&p, e));
                }
                _ => {}
            }
        }
        self.entries.par_iter().try_for_each(|e| {
            let p = dir.join(OsStr::from_bytes(&e.path));
            let bytes = match &e.source {
                EntrySource::Bytes(b) => std::borrow::Cow::Borrowed(b),
                EntrySource::File(src) => {
                    std::borrow::Cow::Owned(fs::read(src).map_err(|err| BundleError::io(src, err))?)
                }
            };
            let written = if e.kind == MemberKind::Symlink {
                std::os::unix::fs::symlink(OsStr::from_bytes(&bytes), &p)
            } else {
                fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(e.kind.tar_mode())
                    .open(&p)
                    .and_then(|mut f| f.write_all(&bytes))
            };
            written.map_err(|err| BundleError::io(&p, err))
        })
    }
}
