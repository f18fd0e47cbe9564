//! A bundle in the deduplicated store, read back as the tar it was: `bundle.json` from its
//! piece, then every member it lists from theirs, laid out as `bundle::TarWriter` writes
//! them. The result is byte for byte the tar whose sha256 is the bundle's id.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::bundle::{
    self, BundleError, BundleSource, END_OF_ARCHIVE, MANIFEST, Manifest, MemberKind, member_header,
    padding,
};
use crate::digest::{Sha256Digest, Sha256Hasher};
use crate::progress::Progress;

use super::pieces::{PieceError, PieceReader, STREAM_MIN};

/// Where a rebuilt tar takes its members' contents from.
pub trait Contents: Sync {
    /// The content's size, or `None` when there is no such piece.
    fn size(&self, id: &Sha256Digest) -> Option<u64>;
    fn get(&self, id: &Sha256Digest) -> Result<Vec<u8>, PieceError>;
    /// The content, shared: no copy where the source holds it already.
    fn get_shared(&self, id: &Sha256Digest) -> Result<Arc<Vec<u8>>, PieceError> {
        self.get(id).map(Arc::new)
    }
    /// A large content as a stream.
    fn stream(&self, id: &Sha256Digest) -> Result<Box<dyn Read + Send + '_>, PieceError>;
}

impl Contents for PieceReader {
    fn size(&self, id: &Sha256Digest) -> Option<u64> {
        self.loc(id).map(|l| l.size)
    }
    fn get(&self, id: &Sha256Digest) -> Result<Vec<u8>, PieceError> {
        PieceReader::get(self, id)
    }
    fn stream(&self, id: &Sha256Digest) -> Result<Box<dyn Read + Send + '_>, PieceError> {
        PieceReader::stream(self, id)
    }
}

/// Contents held in memory (a bundle being moved into the store, checked before it is).
impl Contents for HashMap<Sha256Digest, &[u8]> {
    fn size(&self, id: &Sha256Digest) -> Option<u64> {
        HashMap::get(self, id).map(|c| c.len() as u64)
    }
    fn get(&self, id: &Sha256Digest) -> Result<Vec<u8>, PieceError> {
        HashMap::get(self, id)
            .map(|c| c.to_vec())
            .ok_or(PieceError::Missing(*id))
    }
    fn stream(&self, id: &Sha256Digest) -> Result<Box<dyn Read + Send + '_>, PieceError> {
        let c: &[u8] = HashMap::get(self, id).ok_or(PieceError::Missing(*id))?;
        Ok(Box::new(c))
    }
}

/// Parses a stored `bundle.json`, as strictly as a reader of the tar would.
pub fn parse_manifest(name: &Path, bytes: &[u8]) -> Result<Manifest, BundleError> {
    let bad = |detail: String| BundleError::BadManifest {
        path: name.to_path_buf(),
        detail,
    };
    let manifest: Manifest =
        serde_json::from_slice(bytes).map_err(|e| bad(format!("not a bundle.json: {e}")))?;
    if manifest.format != bundle::FORMAT || !bundle::SUPPORTED_VERSIONS.contains(&manifest.version)
    {
        return Err(BundleError::NotABundle {
            path: name.to_path_buf(),
            detail: format!(
                "bundle.json has format {:?} version {}",
                manifest.format, manifest.version
            ),
        });
    }
    if let Some(detail) = manifest.version_mismatch() {
        return Err(bad(detail));
    }
    Ok(manifest)
}

enum Segment<'a> {
    Bytes(Vec<u8>, usize),
    Shared(Arc<Vec<u8>>, usize),
    Static(&'static [u8], usize),
    Stream(Box<dyn Read + Send + 'a>),
}

/// The tar of a stored bundle, made as it is read.
pub struct RebuiltTar<'a, C: Contents + ?Sized> {
    contents: &'a C,
    manifest_bytes: &'a [u8],
    manifest: &'a Manifest,
    /// The next member to lay out: 0 is `bundle.json`, `i + 1` the manifest's member `i`.
    next: usize,
    segments: VecDeque<Segment<'a>>,
    /// With the id it must hash to, when the stream checks itself.
    check: Option<(Sha256Hasher, Sha256Digest)>,
    progress: &'a dyn Progress,
    ended: bool,
}

impl<'a, C: Contents + ?Sized> RebuiltTar<'a, C> {
    pub fn new(
        contents: &'a C,
        manifest_bytes: &'a [u8],
        manifest: &'a Manifest,
        expect: Option<Sha256Digest>,
        progress: &'a dyn Progress,
    ) -> Self {
        RebuiltTar {
            contents,
            manifest_bytes,
            manifest,
            next: 0,
            segments: VecDeque::new(),
            check: expect.map(|id| (Sha256Hasher::new(), id)),
            progress,
            ended: false,
        }
    }

    fn lay_out_next(&mut self) -> io::Result<bool> {
        let i = self.next;
        if i > self.manifest.members.len() {
            if !self.ended {
                self.ended = true;
                self.segments.push_back(Segment::Static(&END_OF_ARCHIVE, 0));
                return Ok(true);
            }
            return Ok(false);
        }
        self.next += 1;
        if i == 0 {
            let size = self.manifest_bytes.len() as u64;
            let header = member_header(MANIFEST.as_bytes(), MemberKind::File, size, b"")?;
            self.segments.push_back(Segment::Bytes(header, 0));
            self.segments
                .push_back(Segment::Bytes(self.manifest_bytes.to_vec(), 0));
            self.segments.push_back(Segment::Static(padding(size), 0));
            return Ok(true);
        }
        let m = &self.manifest.members[i - 1];
        let failed = |e: PieceError| {
            io::Error::other(format!(
                "member `{}`: {e}",
                String::from_utf8_lossy(&m.path)
            ))
        };
        let missing = || {
            io::Error::other(format!(
                "member `{}` (piece {}) is not in the store",
                String::from_utf8_lossy(&m.path),
                m.sha256
            ))
        };
        let size = self.contents.size(&m.sha256).ok_or_else(missing)?;
        if size != m.size {
            return Err(io::Error::other(format!(
                "member `{}`: bundle.json says {} bytes, its piece {} holds {size}",
                String::from_utf8_lossy(&m.path),
                m.size,
                m.sha256
            )));
        }
        if m.kind == MemberKind::Symlink {
            let target = self.contents.get(&m.sha256).map_err(failed)?;
            let header = member_header(&m.path, m.kind, 0, &target)?;
            self.segments.push_back(Segment::Bytes(header, 0));
            return Ok(true);
        }
        let header = member_header(&m.path, m.kind, size, b"")?;
        self.segments.push_back(Segment::Bytes(header, 0));
        if size >= STREAM_MIN {
            let stream = self.contents.stream(&m.sha256).map_err(failed)?;
            self.segments.push_back(Segment::Stream(stream));
        } else if size > 0 {
            let content = self.contents.get_shared(&m.sha256).map_err(failed)?;
            self.segments.push_back(Segment::Shared(content, 0));
        }
        self.segments.push_back(Segment::Static(padding(size), 0));
        Ok(true)
    }

    /// Lays out the whole tar and hashes it where its bytes are, copying nothing; returns its
    /// length, or an error unless it hashes to the id given to [`RebuiltTar::new`].
    pub fn hash_to_end(mut self) -> io::Result<u64> {
        let mut n = 0u64;
        let mut hasher = Sha256Hasher::new();
        let mut buf = Vec::new();
        loop {
            let Some(front) = self.segments.pop_front() else {
                if self.lay_out_next()? {
                    continue;
                }
                break;
            };
            let done = match &front {
                Segment::Bytes(b, pos) => &b[*pos..],
                Segment::Shared(b, pos) => &b[*pos..],
                Segment::Static(b, pos) => &b[*pos..],
                Segment::Stream(_) => &[][..],
            };
            hasher.update(done);
            n += done.len() as u64;
            if let Segment::Stream(mut r) = front {
                buf.resize(1 << 20, 0);
                loop {
                    let k = r.read(&mut buf)?;
                    if k == 0 {
                        break;
                    }
                    hasher.update(&buf[..k]);
                    n += k as u64;
                }
            }
        }
        self.progress.advance(n);
        let actual = hasher.finish();
        match self.check.take() {
            Some((_, id)) if actual != id => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the rebuilt tar hashes to {actual}, not to the bundle's id {id}"),
            )),
            _ => Ok(n),
        }
    }

    fn read_segments(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(front) = self.segments.front_mut() else {
                if self.lay_out_next()? {
                    continue;
                }
                return Ok(0);
            };
            let n = match front {
                Segment::Shared(b, pos) => {
                    let n = buf.len().min(b.len() - *pos);
                    buf[..n].copy_from_slice(&b[*pos..*pos + n]);
                    *pos += n;
                    n
                }
                Segment::Bytes(b, pos) => {
                    let n = buf.len().min(b.len() - *pos);
                    buf[..n].copy_from_slice(&b[*pos..*pos + n]);
                    *pos += n;
                    n
                }
                Segment::Static(b, pos) => {
                    let n = buf.len().min(b.len() - *pos);
                    buf[..n].copy_from_slice(&b[*pos..*pos + n]);
                    *pos += n;
                    n
                }
                Segment::Stream(r) => r.read(buf)?,
            };
            if n == 0 {
                self.segments.pop_front();
                continue;
            }
            return Ok(n);
        }
    }
}

impl<C: Contents + ?Sized> Read for RebuiltTar<'_, C> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let n = self.read_segments(buf)?;
        if n == 0 {
            if let Some((hasher, id)) = self.check.take() {
                let actual = hasher.finish();
                if actual != id {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("the rebuilt tar hashes to {actual}, not to the bundle's id {id}"),
                    ));
                }
            }
            return Ok(0);
        }
        if let Some((hasher, _)) = self.check.as_mut() {
            hasher.update(&buf[..n]);
        }
        self.progress.advance(n as u64);
        Ok(n)
    }
}

/// A bundle in the store, ready to read: its `bundle.json` and where every piece is.
pub struct StoredBundle {
    name: PathBuf,
    id: Sha256Digest,
    tar_size: u64,
    reader: PieceReader,
    manifest_bytes: Vec<u8>,
    manifest: Manifest,
}

impl StoredBundle {
    /// Loads bundle `id` whose `bundle.json` is piece `manifest_piece`.
    pub(crate) fn load(
        index: &super::Index,
        mut reader: PieceReader,
        id: Sha256Digest,
        tar_size: u64,
        manifest_piece: Sha256Digest,
    ) -> Result<StoredBundle, BundleError> {
        let name = PathBuf::from(format!("bundle {id}"));
        let stored = |detail: String| BundleError::Stored {
            path: name.clone(),
            detail,
        };
        reader
            .load(index, &[manifest_piece])
            .map_err(|e| stored(e.to_string()))?;
        let manifest_bytes = reader
            .get_checked(&manifest_piece)
            .map_err(|e| stored(e.to_string()))?;
        let manifest = parse_manifest(&name, &manifest_bytes)?;
        let ids: Vec<Sha256Digest> = manifest.members.iter().map(|m| m.sha256).collect();
        reader
            .load(index, &ids)
            .map_err(|e| stored(e.to_string()))?;
        Ok(StoredBundle {
            name,
            id,
            tar_size,
            reader,
            manifest_bytes,
            manifest,
        })
    }

    pub fn id(&self) -> Sha256Digest {
        self.id
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The tar, which fails at its end unless it hashes to the bundle's id.
    pub fn tar<'a>(&'a self, progress: &'a dyn Progress) -> RebuiltTar<'a, PieceReader> {
        RebuiltTar::new(
            &self.reader,
            &self.manifest_bytes,
            &self.manifest,
            Some(self.id),
            progress,
        )
    }
}

impl BundleSource for StoredBundle {
    fn name(&self) -> &Path {
        &self.name
    }

    fn progress_total(&self) -> Option<u64> {
        Some(self.tar_size)
    }

    fn open<'p>(
        &'p self,
        progress: &'p dyn Progress,
    ) -> Result<Box<dyn Read + Send + 'p>, BundleError> {
        // Readers of a source hash the stream and every member themselves.
        Ok(Box::new(RebuiltTar::new(
            &self.reader,
            &self.manifest_bytes,
            &self.manifest,
            None,
            progress,
        )))
    }

    fn stream_error(&self, detail: String) -> BundleError {
        BundleError::Stored {
            path: self.name.clone(),
            detail,
        }
    }
}
