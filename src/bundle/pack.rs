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
use super::{CODEBASE_DIR, FILE_SUFFIX, FORMAT, MANIFEST, VERSION};

/// What goes into a bundle besides the codebase. Optional members are left out when `None`.
pub struct PackInputs<'a> {
    pub instance: &'a Instance,
    pub codebase: &'a Codebase,
    pub spec: Option<Vec<u8>>,
    pub lock: Option<Vec<u8>>,
    pub pre_log: Option<Vec<u8>>,
    pub post_log: Option<Vec<u8>>,
    pub results: Option<Vec<u8>>,
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
    pub path: PathBuf,
    pub tar_size: u64,
    pub file_size: u64,
    pub codebase_tree: GitOid,
    pub member_count: usize,
    pub codebase_files: usize,
}

enum Content<'a> {
    Bytes(&'a [u8]),
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

/// Packs `inputs` into `dir/<id>.tar.zst`. The file appears only when complete; a crash leaves
/// at most a `.tmp-` file that no reader looks at.
pub fn pack_to_dir(
    inputs: &PackInputs,
    dir: &Path,
    options: &PackOptions,
    progress: &dyn Progress,
) -> Result<PackedBundle, BundleError> {
    let instance_json = inputs.instance.to_canonical_json();
    let mut members: Vec<Member> = vec![
        fixed("instance.json", &instance_json),
        fixed("patches/gold.diff", inputs.instance.patch.as_bytes()),
        fixed("patches/test.diff", inputs.instance.test_patch.as_bytes()),
    ];
    let optional = [
        ("env/spec.toml", &inputs.spec),
        ("env/pylock.toml", &inputs.lock),
        ("logs/pre.log", &inputs.pre_log),
        ("logs/post.log", &inputs.post_log),
        ("results.json", &inputs.results),
    ];
    for (name, bytes) in optional {
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
        version: VERSION,
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
            })
            .collect(),
    };
    let manifest_bytes = manifest.to_bytes();
    // `bundle.json` sorts before every other member name, so the tar stays sorted.
    debug_assert!(
        members
            .iter()
            .all(|m| m.path.as_slice() > MANIFEST.as_bytes())
    );

    std::fs::create_dir_all(dir).map_err(|e| BundleError::io(dir, e))?;
    let tmp = fsutil::temp_file_in(dir).map_err(|e| BundleError::io(dir, e))?;
    let tmp_path = tmp.path().to_path_buf();
    let io_err = |e: io::Error| BundleError::io(&tmp_path, e);
    let file = tmp.as_file().try_clone().map_err(io_err)?;
    let mut encoder =
        zstd::stream::write::Encoder::new(BufWriter::with_capacity(1 << 20, file), options.level)
            .map_err(io_err)?;
    let threads = if options.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
    } else {
        options.threads
    };
    encoder.multithread(threads).map_err(io_err)?;
    encoder.include_checksum(true).map_err(io_err)?;

    // The tar's size, for progress: headers, padded contents, pax headers (counted as one
    // block of records), the end marker.
    let padded = |n: u64| n.div_ceil(512) * 512;
    let total: u64 = members
        .iter()
        .map(|m| {
            let data = if m.kind == MemberKind::Symlink {
                0
            } else {
                m.size
            };
            let pax = if m.path.len() > 100 || m.link.len() > 100 {
                1024
            } else {
                0
            };
            512 + padded(data) + pax
        })
        .sum::<u64>()
        + 512
        + padded(manifest_bytes.len() as u64)
        + 1024;
    progress.start("packing", Some(total));
    // zstd's multithreaded stream takes locks on every call: feed it megabytes, not the
    // tar's many small header and file writes.
    let hashing = HashingWriter::new(Counting {
        inner: io::BufWriter::with_capacity(1 << 20, encoder),
        progress,
    });
    let mut tar = TarWriter::new(hashing);
    tar.append(
        MANIFEST.as_bytes(),
        MemberKind::File,
        manifest_bytes.len() as u64,
        b"",
        &mut &manifest_bytes[..],
    )
    .map_err(io_err)?;
    let half = members.len() / 2;
    for (i, m) in members.iter().enumerate() {
        if i == half {
            failpoint::hit("pack.mid-tar");
        }
        let size = if m.kind == MemberKind::Symlink {
            0
        } else {
            m.size
        };
        let result = match &m.content {
            Content::Bytes(b) => tar.append(&m.path, m.kind, size, m.link, &mut &b[..]),
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
        };
        result.map_err(io_err)?;
    }
    let hashing = tar.finish().map_err(io_err)?;
    let (counting, id, tar_size) = hashing.finish();
    let encoder = counting
        .inner
        .into_inner()
        .map_err(|e| io_err(e.into_error()))?;
    let mut buffered = encoder.finish().map_err(io_err)?;
    buffered.flush().map_err(io_err)?;
    drop(buffered);
    progress.finish();
    failpoint::hit("pack.before-rename");

    let dest = dir.join(format!("{}{FILE_SUFFIX}", id.hex()));
    fsutil::persist(tmp, &dest).map_err(|e| BundleError::io(&dest, e))?;
    let file_size = std::fs::metadata(&dest)
        .map_err(|e| BundleError::io(&dest, e))?
        .len();
    Ok(PackedBundle {
        id,
        path: dest,
        tar_size,
        file_size,
        codebase_tree: inputs.codebase.tree,
        member_count: members.len() + 1,
        codebase_files: inputs.codebase.entries.len(),
    })
}
