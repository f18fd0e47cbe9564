//! Packing: members sorted by path, `bundle.json` first, a deterministic tar hashed as it is
//! written and compressed by zstd workers, then renamed to `<id>.tar.zst`.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::dataset::Instance;
use crate::digest::{GitOid, HashingWriter, Sha256Digest};
use crate::failpoint;
use crate::fsutil;
use crate::progress::Progress;

use super::codebase::{Codebase, EntrySource};
use super::error::BundleError;
use super::manifest::{Gitlink, Manifest, ManifestMember, MemberKind};
use super::tarfmt::TarWriter;
use super::{CODEBASE_DIR, FILE_SUFFIX, FORMAT, MANIFEST};

/// What goes into a bundle besides the codebase. Optional members are left out when `None`.
pub struct PackInputs<'a> {
    pub instance: &'a Instance,
    pub codebase: &'a Codebase,
    pub spec: Option<Vec<u8>>,
    /// The context's lock, under its kind's member name (`env/pylock.toml`, …).
    pub lock: Option<(&'static str, Vec<u8>)>,
    pub pre_log: Option<Vec<u8>>,
    pub post_log: Option<Vec<u8>>,
    pub record: Option<ValidationRecord>,
    /// What git says about the base commit (`vcs.json`); a bundle with it is format version 2
    /// (or 3).
    pub vcs: Option<&'a crate::vcs::VcsRecord>,
}

/// How a bundle keeps its validation: the run's own results as given (`results.json`,
/// format versions 1 and 2), or what it proved, reproducibly (`expected.json`, version 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValidationRecord {
    Results(Vec<u8>),
    Expected(Vec<u8>),
}

impl ValidationRecord {
    fn member(&self) -> (&'static str, &[u8]) {
        match self {
            ValidationRecord::Results(b) => (super::RESULTS_MEMBER, b),
            ValidationRecord::Expected(b) => (super::EXPECTED_MEMBER, b),
        }
    }
}

#[derive(Debug, Clone)]
pub struct PackOptions {
    /// zstd level; the id does not depend on it.
    pub level: i32,
    /// zstd worker threads (0: all cores).
    pub threads: u32,
}

impl Default for PackOptions {
    fn default() -> Self {
        PackOptions {
            level: 3,
            threads: 0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct PackedBundle {
    pub id: Sha256Digest,
    /// The bundle file, when the bundle was written as one (not into an archive's store).
    pub path: Option<PathBuf>,
    pub tar_size: u64,
    /// The bundle file's size, or what storing the bundle added to an archive.
    pub file_size: u64,
    pub codebase_tree: GitOid,
    pub member_count: usize,
    pub codebase_files: usize,
}

/// Where a member's bytes come from.
enum Content<'a> {
    Bytes(&'a [u8]),
    Owned(Vec<u8>),
    File(&'a Path),
}

struct Member<'a> {
    path: Vec<u8>,
    kind: MemberKind,
    size: u64,
    sha256: Sha256Digest,
    link: &'a [u8],
    content: Content<'a>,
}

fn fixed<'a>(name: &str, bytes: &'a [u8]) -> Member<'a> {
    Member {
        path: name.as_bytes().to_vec(),
        kind: MemberKind::File,
        size: bytes.len() as u64,
        sha256: Sha256Digest::of(bytes),
        link: b"",
        content: Content::Bytes(bytes),
    }
}

/// Counts bytes written, for progress.
struct Counting<'a, W> {
    inner: W,
    progress: &'a dyn Progress,
}

impl<W: Write> Write for Counting<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.progress.advance(n as u64);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// One member of a planned bundle, as `bundle.json` lists it.
pub struct PlannedMember<'p> {
    pub path: &'p [u8],
    pub kind: MemberKind,
    /// The content's size (for a symlink, its target's).
    pub size: u64,
    pub sha256: Sha256Digest,
}

/// A bundle decided but not yet written: its manifest and its members in tar order. The tar
/// it stands for can be hashed (for the id), written out whole (the exchange file), or taken
/// apart member by member (the archive's deduplicated store).
pub struct PackPlan<'a> {
    manifest_bytes: Vec<u8>,
    members: Vec<Member<'a>>,
    codebase_tree: GitOid,
    codebase_files: usize,
    version: u32,
}

/// Lays out the bundle `inputs` make: members sorted by path, `bundle.json` first.
pub fn plan<'a>(inputs: &'a PackInputs<'_>) -> PackPlan<'a> {
    let instance_json = inputs.instance.to_canonical_json();
    let mut members: Vec<Member<'a>> = vec![
        Member {
            sha256: Sha256Digest::of(&instance_json),
            size: instance_json.len() as u64,
            ..fixed("instance.json", b"")
        },
        fixed("patches/gold.diff", inputs.instance.patch.as_bytes()),
        fixed("patches/test.diff", inputs.instance.test_patch.as_bytes()),
    ];
    members[0].content = Content::Owned(instance_json);
    if let Some(record) = inputs.vcs {
        let bytes = record.to_bytes();
        members.push(Member {
            sha256: Sha256Digest::of(&bytes),
            size: bytes.len() as u64,
            content: Content::Owned(bytes),
            ..fixed(crate::vcs::MEMBER, b"")
        });
    }
    for (name, bytes) in [
        ("env/spec.toml", inputs.spec.as_deref()),
        inputs
            .lock
            .as_ref()
            .map_or(("env/pylock.toml", None), |(m, b)| (*m, Some(b.as_slice()))),
        ("logs/pre.log", inputs.pre_log.as_deref()),
        ("logs/post.log", inputs.post_log.as_deref()),
        inputs.record.as_ref().map_or(("results.json", None), |r| {
            let (name, bytes) = r.member();
            (name, Some(bytes))
        }),
    ] {
        if let Some(bytes) = bytes {
            members.push(fixed(name, bytes));
        }
    }
    for e in &inputs.codebase.entries {
        let mut path = CODEBASE_DIR.as_bytes().to_vec();
        path.extend_from_slice(&e.path);
        let (link, content): (&[u8], Content) = match (&e.source, e.kind) {
            (EntrySource::Bytes(b), MemberKind::Symlink) => (b, Content::Bytes(b"")),
            (EntrySource::Bytes(b), _) => (b"", Content::Bytes(b)),
            (EntrySource::File(p), _) => (b"", Content::File(p)),
        };
        members.push(Member {
            path,
            kind: e.kind,
            size: e.size,
            sha256: e.sha256,
            link,
            content,
        });
    }
    members.sort_by(|a, b| a.path.cmp(&b.path));
    let manifest = Manifest {
        format: FORMAT.to_string(),
        version: super::version_for(
            inputs.vcs.is_some(),
            matches!(inputs.record, Some(ValidationRecord::Expected(_))),
        ),
        instance_id: inputs.instance.instance_id.clone(),
        codebase_tree: inputs.codebase.tree,
        members: members
            .iter()
            .map(|m| ManifestMember {
                path: m.path.clone(),
                kind: m.kind,
                size: m.size,
                sha256: m.sha256,
            })
            .collect(),
        gitlinks: inputs
            .codebase
            .gitlinks
            .iter()
            .map(|g| Gitlink {
                path: [CODEBASE_DIR.as_bytes(), &g.path].concat(),
                commit: g.commit,
                tree: g.tree,
            })
            .collect(),
    };
    let manifest_bytes = manifest.to_bytes();
    let version = manifest.version;
    // `bundle.json` sorts before every other member name, so the tar stays sorted.
    debug_assert!(
        members
            .iter()
            .all(|m| m.path.as_slice() > MANIFEST.as_bytes())
    );
    PackPlan {
        manifest_bytes,
        members,
        codebase_tree: inputs.codebase.tree,
        codebase_files: inputs.codebase.entries.len(),
        version,
    }
}

impl PackPlan<'_> {
    /// The bytes of `bundle.json`.
    pub fn manifest_bytes(&self) -> &[u8] {
        &self.manifest_bytes
    }

    pub fn codebase_tree(&self) -> GitOid {
        self.codebase_tree
    }

    pub fn codebase_files(&self) -> usize {
        self.codebase_files
    }

    /// The format version of the bundle (2 when it holds `vcs.json`).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Members besides `bundle.json`, in tar order.
    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    pub fn member(&self, i: usize) -> PlannedMember<'_> {
        let m = &self.members[i];
        PlannedMember {
            path: &m.path,
            kind: m.kind,
            size: m.size,
            sha256: m.sha256,
        }
    }

    /// The content of member `i` as `bundle.json` vouches for it (a symlink's target). A file
    /// read from disk is checked against its size and sha256: one that changed since it was
    /// hashed is an error.
    pub fn content(&self, i: usize) -> Result<std::borrow::Cow<'_, [u8]>, BundleError> {
        use std::borrow::Cow;
        let m = &self.members[i];
        if m.kind == MemberKind::Symlink {
            return Ok(Cow::Borrowed(m.link));
        }
        match &m.content {
            Content::Bytes(b) => Ok(Cow::Borrowed(b)),
            Content::Owned(b) => Ok(Cow::Borrowed(b)),
            Content::File(p) => {
                let bytes = std::fs::read(p).map_err(|e| BundleError::io(*p, e))?;
                if bytes.len() as u64 != m.size || Sha256Digest::of(&bytes) != m.sha256 {
                    return Err(BundleError::BadInput {
                        path: p.to_path_buf(),
                        reason: format!(
                            "the content changed while it was packed ({} bytes expected, {} read, \
                             or a different sha256)",
                            m.size,
                            bytes.len()
                        ),
                    });
                }
                Ok(Cow::Owned(bytes))
            }
        }
    }

    /// The tar's exact size: headers, padded contents, pax headers, the end marker.
    pub fn tar_size(&self) -> u64 {
        let padded = |n: u64| n.div_ceil(512) * 512;
        let entry = |path: &[u8], link: &[u8], data: u64| {
            let pax = super::tarfmt::member_header(path, MemberKind::File, 0, link)
                .map_or(512, |h| h.len() as u64);
            pax + padded(data)
        };
        self.members
            .iter()
            .map(|m| {
                let data = if m.kind == MemberKind::Symlink {
                    0
                } else {
                    m.size
                };
                entry(&m.path, m.link, data)
            })
            .sum::<u64>()
            + entry(MANIFEST.as_bytes(), b"", self.manifest_bytes.len() as u64)
            + 1024
    }

    /// Writes the tar to `out`, hashing it; returns `out`, the bundle id and the tar's size.
    pub fn write_tar<W: Write>(
        &self,
        out: W,
        progress: &dyn Progress,
    ) -> Result<(W, Sha256Digest, u64), BundleError> {
        let io_err = |e: io::Error| BundleError::io("(tar stream)", e);
        let hashing = HashingWriter::new(Counting {
            inner: out,
            progress,
        });
        let mut tar = TarWriter::new(hashing);
        tar.append(
            MANIFEST.as_bytes(),
            MemberKind::File,
            self.manifest_bytes.len() as u64,
            b"",
            &mut &self.manifest_bytes[..],
        )
        .map_err(io_err)?;
        let half = self.members.len() / 2;
        for (i, m) in self.members.iter().enumerate() {
            if i == half {
                failpoint::hit("pack.mid-tar");
            }
            let size = if m.kind == MemberKind::Symlink {
                0
            } else {
                m.size
            };
            match &m.content {
                Content::Bytes(b) => tar.append(&m.path, m.kind, size, m.link, &mut &b[..]),
                Content::Owned(b) => tar.append(&m.path, m.kind, size, m.link, &mut &b[..]),
                Content::File(p) => {
                    let f = File::open(p).map_err(|e| BundleError::io(*p, e))?;
                    let mut f = io::BufReader::with_capacity(256 * 1024, f);
                    tar.append(&m.path, m.kind, size, m.link, &mut f as &mut dyn Read)
                        .map_err(|e| {
                            if matches!(
                                e.kind(),
                                io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput
                            ) {
                                BundleError::BadInput {
                                    path: p.to_path_buf(),
                                    reason: e.to_string(),
                                }
                            } else {
                                BundleError::io(*p, e)
                            }
                        })?;
                    Ok(())
                }
            }
            .map_err(io_err)?;
        }
        let hashing = tar.finish().map_err(io_err)?;
        let (counting, id, tar_size) = hashing.finish();
        Ok((counting.inner, id, tar_size))
    }
}

/// A zstd encoder as every bundle file is written: `options.level`, zstd's own worker
/// threads, the content checksum on. zstd's multithreaded output does not depend on the
/// number of workers, so the same tar gives the same file on any machine.
pub fn bundle_encoder<W: Write>(
    out: W,
    options: &PackOptions,
) -> io::Result<zstd::stream::write::Encoder<'static, W>> {
    let mut encoder = zstd::stream::write::Encoder::new(out, options.level)?;
    let threads = if options.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
    } else {
        options.threads
    };
    encoder.multithread(threads)?;
    encoder.include_checksum(true)?;
    Ok(encoder)
}

/// Packs `inputs` into `dir/<id>.tar.zst`, a self-contained bundle file (the exchange
/// form). The file appears only when complete; a crash leaves at most a `.tmp-` file that no
/// reader looks at.
pub fn pack_to_dir(
    inputs: &PackInputs,
    dir: &Path,
    options: &PackOptions,
    progress: &dyn Progress,
) -> Result<PackedBundle, BundleError> {
    let plan = plan(inputs);
    let (tmp, stream) = start_file(dir, options)?;
    progress.start("packing", Some(plan.tar_size()));
    let (stream, id, tar_size) = plan.write_tar(stream, progress)?;
    end_stream(stream, tmp.path())?;
    progress.finish();
    failpoint::hit("pack.before-rename");

    let dest = persist(tmp, dir, &id)?;
    let file_size = std::fs::metadata(&dest)
        .map_err(|e| BundleError::io(&dest, e))?
        .len();
    Ok(PackedBundle {
        id,
        path: Some(dest),
        tar_size,
        file_size,
        codebase_tree: plan.codebase_tree,
        member_count: plan.members.len() + 1,
        codebase_files: plan.codebase_files,
    })
}

/// Compresses the tar that `tar` yields into `dir/<id>.tar.zst`, written as [`pack_to_dir`]
/// writes it (the same bytes for the same tar). `tar` must fail at its end when the stream
/// is not the bundle `id`: nothing is left in `dir` then.
pub fn write_bundle_file(
    tar: &mut dyn Read,
    id: &Sha256Digest,
    dir: &Path,
    options: &PackOptions,
) -> Result<PathBuf, BundleError> {
    let (tmp, mut stream) = start_file(dir, options)?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = fsutil::read_some(tar, &mut buf).map_err(|e| BundleError::Stored {
            path: PathBuf::from(format!("bundle {id}")),
            detail: e.to_string(),
        })?;
        if n == 0 {
            break;
        }
        stream
            .write_all(&buf[..n])
            .map_err(|e| BundleError::io(tmp.path(), e))?;
    }
    end_stream(stream, tmp.path())?;
    persist(tmp, dir, id)
}

/// What writes a bundle file: zstd as [`bundle_encoder`] sets it, fed through a buffer.
type FileStream = BufWriter<zstd::stream::write::Encoder<'static, BufWriter<File>>>;

/// A temporary file in `dir` (which is made if need be) and the stream that writes a bundle
/// file into it.
fn start_file(
    dir: &Path,
    options: &PackOptions,
) -> Result<(tempfile::NamedTempFile, FileStream), BundleError> {
    std::fs::create_dir_all(dir).map_err(|e| BundleError::io(dir, e))?;
    let tmp = fsutil::temp_file_in(dir).map_err(|e| BundleError::io(dir, e))?;
    let io_err = |e: io::Error| BundleError::io(tmp.path(), e);
    let file = tmp.as_file().try_clone().map_err(io_err)?;
    let encoder =
        bundle_encoder(BufWriter::with_capacity(1 << 20, file), options).map_err(io_err)?;
    // zstd's multithreaded stream takes locks on every call: feed it megabytes, not the
    // tar's many small header and file writes.
    Ok((tmp, BufWriter::with_capacity(1 << 20, encoder)))
}

/// Ends the zstd stream and writes out what the buffers of `tmp` hold.
fn end_stream(stream: FileStream, tmp: &Path) -> Result<(), BundleError> {
    let io_err = |e: io::Error| BundleError::io(tmp, e);
    let encoder = stream.into_inner().map_err(|e| io_err(e.into_error()))?;
    let mut file = encoder.finish().map_err(io_err)?;
    file.flush().map_err(io_err)
}

/// Moves the complete file to `dir/<id>.tar.zst`, where readers look.
fn persist(
    tmp: tempfile::NamedTempFile,
    dir: &Path,
    id: &Sha256Digest,
) -> Result<PathBuf, BundleError> {
    let dest = dir.join(format!("{}{FILE_SUFFIX}", id.hex()));
    fsutil::persist(tmp, &dest).map_err(|e| BundleError::io(&dest, e))?;
    Ok(dest)
}
