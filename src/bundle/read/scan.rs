//! The scanner: the whole tar read once, member by member, each checked before it is trusted.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::mpsc::sync_channel;

use crate::digest::{GitBlobHasher, GitOid, Sha256Digest, Sha256Hasher};
use crate::fsutil;
use crate::progress::Progress;

use super::pipe::{Chunk, Pipe, pump};
use super::record_limit;
use super::sink::Sink;
use super::source::BundleSource;
use super::{Limits, ScanReport};
use crate::bundle::error::{BundleError, Problem};
use crate::bundle::manifest::{Manifest, ManifestMember, MemberKind};
use crate::bundle::{CODEBASE_DIR, MANIFEST, path};

/// What reading a member found.
pub(super) struct MemberContent {
    pub(super) sha256: Sha256Digest,
    /// Its git blob id (zero for a regular file outside the codebase).
    pub(super) blob: GitOid,
    pub(super) len: u64,
    pub(super) kind: MemberKind,
    /// Its content, when it is a record checked once its hash is known.
    pub(super) record: Option<Vec<u8>>,
}

pub(super) struct Seen {
    pub(super) kinds: HashMap<Vec<u8>, MemberKind>,
    /// Each submodule's path, and whether its content is carried.
    pub(super) gitlinks: HashMap<Vec<u8>, bool>,
    pub(super) created_dirs: HashSet<PathBuf>,
    pub(super) codebase: Vec<(Vec<u8>, MemberKind, GitOid)>,
    pub(super) total: u64,
}

pub(super) struct Scanner<'a> {
    pub(super) bundle: &'a Path,
    pub(super) source: &'a dyn BundleSource,
    pub(super) limits: &'a Limits,
    pub(super) sink: Sink<'a>,
    pub(super) problems: Vec<Problem>,
}

impl Scanner<'_> {
    pub(super) fn refuse(&self, member: &[u8], reason: impl Into<String>) -> BundleError {
        BundleError::Refused {
            path: self.bundle.to_path_buf(),
            member: path::display(member),
            reason: reason.into(),
        }
    }

    /// Refuses member `name` when its `size` is over `limit`, the most `what` may hold.
    pub(super) fn size_within(
        &self,
        name: &[u8],
        size: u64,
        limit: u64,
        what: &str,
    ) -> Result<(), BundleError> {
        if size > limit {
            return Err(self.refuse(
                name,
                format!("{size} bytes is over the limit of {limit} for {what}"),
            ));
        }
        Ok(())
    }

    pub(super) fn problem(&mut self, member: &[u8], reason: impl Into<String>) {
        self.problems.push(Problem {
            member: path::display(member),
            reason: reason.into(),
        });
    }

    pub(super) fn scan(
        &mut self,
        expected: Option<Sha256Digest>,
        progress: &dyn Progress,
    ) -> Result<ScanReport, BundleError> {
        let reader = self.source.open(progress)?;
        let (tx, rx) = sync_channel::<Chunk>(8);
        let zstd_error = Rc::new(RefCell::new(None));
        let pipe = Pipe {
            rx,
            cur: Vec::new(),
            pos: 0,
            zstd_error: zstd_error.clone(),
        };
        std::thread::scope(|scope| {
            let decoder = scope.spawn(move || pump(reader, tx));
            let result = self.scan_tar(pipe, &zstd_error);
            // The decoder thread ends once the pipe is dropped or the stream ends.
            let (id, tar_size) = decoder.join().expect("the decoding thread does not panic");
            let manifest = result?;
            if let Some(expected) = expected
                && expected != id
            {
                self.problems.push(Problem {
                    member: "(whole bundle)".into(),
                    reason: format!("the bundle hashes to {id}, but its id is {expected}"),
                });
            }
            Ok(ScanReport {
                id,
                tar_size,
                manifest,
                problems: std::mem::take(&mut self.problems),
            })
        })
    }

    pub(super) fn classify(
        &self,
        e: io::Error,
        zstd_error: &Rc<RefCell<Option<String>>>,
    ) -> BundleError {
        match zstd_error.borrow().clone() {
            Some(detail) => self.source.stream_error(detail),
            None => BundleError::Tar {
                path: self.bundle.to_path_buf(),
                detail: e.to_string(),
            },
        }
    }

    fn scan_tar(
        &mut self,
        pipe: Pipe,
        zstd_error: &Rc<RefCell<Option<String>>>,
    ) -> Result<Manifest, BundleError> {
        let mut archive = tar::Archive::new(pipe);
        let mut entries = archive
            .entries()
            .map_err(|e| self.classify(e, zstd_error))?
            .raw(true);
        let mut total = 0;
        let (mut first, first_name, _) =
            match self.next_member(&mut entries, &mut total, zstd_error)? {
                Some(m) => m,
                None => {
                    return Err(BundleError::NotABundle {
                        path: self.bundle.to_path_buf(),
                        detail: "the tar archive is empty".into(),
                    });
                }
            };
        let (manifest, manifest_bytes) = self.read_manifest(&mut first, &first_name)?;
        drop(first);
        let listed: HashMap<&[u8], &ManifestMember> =
            manifest.members.iter().map(|m| (&m.path[..], m)).collect();
        let mut seen = Seen {
            kinds: HashMap::new(),
            gitlinks: manifest
                .gitlinks
                .iter()
                .map(|g| (g.path.clone(), g.tree.is_some()))
                .collect(),
            created_dirs: HashSet::new(),
            codebase: Vec::new(),
            total,
        };
        if let Some((mut f, p)) =
            self.create_file(MANIFEST.as_bytes(), MemberKind::File, &mut seen)?
        {
            f.write_all(&manifest_bytes)
                .map_err(|e| BundleError::io(&p, e))?;
        }
        self.collect(MANIFEST.as_bytes(), MemberKind::File, &manifest_bytes)?;
        seen.kinds
            .insert(MANIFEST.as_bytes().to_vec(), MemberKind::File);
        let mut buf = vec![0u8; 256 * 1024];
        while let Some((mut entry, name, link)) =
            self.next_member(&mut entries, &mut seen.total, zstd_error)?
        {
            let etype = entry.header().entry_type();
            let kind = self.check_entry(&name, etype, link.as_deref(), &seen)?;
            let size = entry.size();
            self.check_member_size(&name, kind, size, &mut seen)?;
            let in_codebase = name.starts_with(CODEBASE_DIR.as_bytes());
            let content = if kind == MemberKind::Symlink {
                let target = link.unwrap_or_default();
                self.write_symlink(&name, &target, &mut seen)?;
                self.collect(&name, kind, &target)?;
                let mut b = GitBlobHasher::new(target.len() as u64);
                b.update(&target);
                MemberContent {
                    sha256: Sha256Digest::of(&target),
                    blob: b.finish(),
                    len: target.len() as u64,
                    kind,
                    record: None,
                }
            } else {
                self.read_file_member(
                    &mut entry,
                    &name,
                    in_codebase,
                    &mut seen,
                    &mut buf,
                    zstd_error,
                )?
            };
            seen.kinds.insert(name.clone(), content.kind);
            if in_codebase {
                seen.codebase.push((
                    name[CODEBASE_DIR.len()..].to_vec(),
                    content.kind,
                    content.blob,
                ));
            }
            self.check_listed(&listed, &name, content)?;
        }
        for m in &manifest.members {
            if !seen.kinds.contains_key(&m.path) {
                self.problem(&m.path, "listed in bundle.json but missing from the bundle");
            }
        }
        self.check_codebase_tree(&manifest, &seen)?;
        self.check_trailing(archive.into_inner(), &mut buf, zstd_error)?;
        Ok(manifest)
    }

    /// A regular file member's content, read once: hashed, written or collected as the sink
    /// wants, and kept when it is a record checked below (vcs.json, expected.json).
    fn read_file_member(
        &mut self,
        entry: &mut tar::Entry<Pipe>,
        name: &[u8],
        in_codebase: bool,
        seen: &mut Seen,
        buf: &mut [u8],
        zstd_error: &Rc<RefCell<Option<String>>>,
    ) -> Result<MemberContent, BundleError> {
        let size = entry.size();
        let kind = if entry.header().mode().unwrap_or(0o644) & 0o100 != 0 {
            MemberKind::Executable
        } else {
            MemberKind::File
        };
        let mut out = self.create_file(name, kind, seen)?;
        let mut sha = Sha256Hasher::new();
        let mut blob = in_codebase.then(|| GitBlobHasher::new(size));
        // vcs.json and expected.json are read by every reader, to be checked below.
        let is_record = record_limit(name).is_some();
        let mut collected = (matches!(self.sink, Sink::Collect(_)) || is_record)
            .then(|| Vec::with_capacity(size as usize));
        let mut n_total = 0u64;
        let mut record = None;
        loop {
            let n = fsutil::read_some(entry, buf).map_err(|e| self.classify(e, zstd_error))?;
            if n == 0 {
                break;
            }
            sha.update(&buf[..n]);
            if let Some(b) = blob.as_mut() {
                b.update(&buf[..n]);
            }
            if let Some((f, p)) = out.as_mut() {
                f.write_all(&buf[..n])
                    .map_err(|e| BundleError::io(&*p, e))?;
            }
            if let Some(c) = collected.as_mut() {
                c.extend_from_slice(&buf[..n]);
            }
            n_total += n as u64;
        }
        if let Some(c) = collected {
            if is_record {
                record = Some(c.clone());
            }
            self.collect(name, kind, &c)?;
        }
        if n_total != size {
            return Err(BundleError::Tar {
                path: self.bundle.to_path_buf(),
                detail: format!(
                    "member `{}` is truncated ({n_total} of {size} bytes)",
                    path::display(name)
                ),
            });
        }
        Ok(MemberContent {
            sha256: sha.finish(),
            blob: blob.map_or(GitOid([0; 20]), |b| b.finish()),
            len: n_total,
            kind,
            record,
        })
    }
}
