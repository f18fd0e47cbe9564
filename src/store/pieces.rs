//! Pieces and packs: the deduplicated store under the bundles (docs/STORAGE.md).
//!
//! A piece is one distinct member content (a file, a symlink target, a `bundle.json`), named
//! by its sha256 and kept once in a pack file: as a delta against another piece (a zstd frame
//! made with that piece's content as a raw dictionary, as `zstd --patch-from` does), or whole,
//! in a block (one zstd frame holding several whole pieces one after the other, so that small
//! files compress with their neighbours' context). A pack holds the new pieces of one bundle.
//! The index says where each piece is.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use zstd::zstd_safe::{CCtx, DCtx};

use crate::digest::{HashingWriter, Sha256Digest};
use crate::failpoint;
use crate::fsutil;

use super::bucket::{Bucket, Fetch};
use super::index::{Index, IndexError, PieceLoc};

/// The first bytes of every pack file.
pub const PACK_MAGIC: &[u8; 16] = b"swe-ark-pack-v1\n";
/// Pack files are `packs/<sha256 of the file>.pack`.
pub const PACK_SUFFIX: &str = ".pack";
/// The longest chain of deltas from a whole piece a reader accepts (git's `pack.depth`).
pub const MAX_DEPTH: u32 = 50;
/// The longest chain storing makes. A longer chain costs readers more decoding, a shorter
/// one more bytes. Unlike git, which keeps decoded bases for the objects that follow, a
/// bundle's reader decodes each member's chain for that member alone (a chain is one path's
/// versions), so chains are kept shorter than git's 50 (docs/STORAGE.md has the figures).
pub const WRITE_DEPTH: u32 = 20;
/// The most content a reader decodes to get one piece: the sizes of the piece and of every
/// base down its chain, summed. Without it, a chain of 50 deltas of a 1 MiB `bundle.json`
/// had a reader decode 50 MiB to get 1 MiB.
pub const CHAIN_BYTES: u64 = 8 << 20;
/// Pieces (and bases) larger than this are stored whole.
pub const DELTA_MAX: u64 = 16 << 20;
/// Pieces at least this large are compressed and read as streams, never whole in memory.
pub const STREAM_MIN: u64 = 32 << 20;
/// Whole pieces are gathered into blocks of about this many bytes (content): a reader
/// decodes a whole block to get one piece of it, and keeps the last few blocks. Later
/// bundles need only some of an older block's pieces, so smaller blocks waste less
/// decoding (docs/STORAGE.md has the figures: 128 KiB cost 0.1 MB on the bench's store).
pub const BLOCK: u64 = 128 << 10;
/// The most content a block's frame may claim: a block stops growing once it holds BLOCK
/// bytes (1 MiB in archives stored before), and its last piece is under STREAM_MIN.
const BLOCK_MAX: u64 = STREAM_MIN + (1 << 20);
/// How many bytes of decoded blocks a reader keeps. A bundle's members sit in blocks of every
/// pack that first stored one of them, visited in path order, so blocks come back often: a
/// reader that kept only a few decoded most blocks many times over.
const BLOCK_CACHE: usize = 128 << 20;
/// Where a block's frame is: (pack number, offset in the pack).
type BlockKey = (i64, u64);
/// A base shorter than this is not worth a delta.
const DELTA_MIN_BASE: usize = 64;
/// The first bytes of a zstd dictionary: a base that starts with them would be read as a
/// dictionary, not as content, so it is never used as one.
const ZSTD_DICT_MAGIC: [u8; 4] = [0x37, 0xa4, 0x30, 0xec];

#[derive(Debug, thiserror::Error)]
pub enum PieceError {
    #[error("piece {0} is not in the index")]
    Missing(Sha256Digest),
    #[error("pack `{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("piece {id} in pack `{path}` is corrupt: {detail}")]
    Corrupt {
        id: Sha256Digest,
        path: PathBuf,
        detail: String,
    },
    #[error("pack `{name}` is not here, and fetching it failed: {source}")]
    Fetch {
        name: String,
        #[source]
        source: Box<crate::remote::RemoteError>,
    },
    #[error(transparent)]
    Index(#[from] IndexError),
}

thread_local! {
    static DCTX: RefCell<DCtx<'static>> = RefCell::new(DCtx::create());
    static CCTX: RefCell<CCtx<'static>> = RefCell::new(CCtx::create());
}

/// Reads pieces: their locations, loaded from the index as needed, and the pack files.
pub struct PieceReader {
    packs_dir: PathBuf,
    locs: HashMap<Sha256Digest, PieceLoc>,
    pack_names: HashMap<i64, String>,
    /// Packs outside the archive's `packs/` (an import's staged packs), by number.
    foreign: HashMap<i64, PathBuf>,
    files: Mutex<HashMap<i64, Arc<File>>>,
    /// Decoded blocks by (pack, offset), most recent last.
    blocks: Mutex<VecDeque<(BlockKey, Arc<Vec<u8>>)>>,
    /// Where a pack missing from `packs_dir` is fetched from, and into.
    fetch: Option<Fetch>,
}

impl PieceReader {
    pub fn new(packs_dir: PathBuf) -> Self {
        PieceReader {
            packs_dir,
            locs: HashMap::new(),
            pack_names: HashMap::new(),
            foreign: HashMap::new(),
            files: Mutex::new(HashMap::new()),
            blocks: Mutex::new(VecDeque::new()),
            fetch: None,
        }
    }

    pub(crate) fn with_fetch(mut self, fetch: Option<Fetch>) -> Self {
        self.fetch = fetch;
        self
    }

    /// The archive's `packs/`, where its packs are read from and new ones written.
    pub fn packs_dir(&self) -> &Path {
        &self.packs_dir
    }

    /// Loads the locations of `ids` and of every piece their deltas need. Ids the index does
    /// not know are left out ([`PieceReader::loc`] says so).
    pub fn load(&mut self, index: &Index, ids: &[Sha256Digest]) -> Result<(), IndexError> {
        let mut want: Vec<Sha256Digest> = ids
            .iter()
            .filter(|id| !self.locs.contains_key(id))
            .copied()
            .collect();
        want.sort();
        want.dedup();
        let mut new_packs = false;
        while !want.is_empty() {
            let found = index.piece_locs(&want)?;
            want.clear();
            for (id, loc) in found {
                if let Some(b) = loc.base
                    && !self.locs.contains_key(&b)
                {
                    want.push(b);
                }
                new_packs |= !self.pack_names.contains_key(&loc.pack);
                self.locs.insert(id, loc);
            }
            want.sort();
            want.dedup();
        }
        if new_packs {
            self.pack_names = index.packs()?.into_iter().map(|p| (p.no, p.name)).collect();
        }
        Ok(())
    }

    /// Every piece's location at once (for checking or collecting the whole store).
    pub fn load_all(&mut self, index: &Index) -> Result<(), IndexError> {
        self.locs = index.all_pieces()?.into_iter().collect();
        self.pack_names = index.packs()?.into_iter().map(|p| (p.no, p.name)).collect();
        Ok(())
    }

    /// A reader that knows only `locs` (for tests of what storing decides from them).
    #[cfg(test)]
    pub(crate) fn with_locs(locs: HashMap<Sha256Digest, PieceLoc>) -> Self {
        let mut reader = PieceReader::new(PathBuf::from("/nonexistent"));
        reader.locs = locs;
        reader
    }

    /// Reads pack number `no` (not one of the index's) from `path`.
    pub fn add_foreign_pack(&mut self, no: i64, path: PathBuf) {
        self.foreign.insert(no, path);
    }

    /// Where piece `id` is, known from elsewhere than the index.
    pub fn insert_loc(&mut self, id: Sha256Digest, loc: PieceLoc) {
        self.locs.insert(id, loc);
    }

    pub fn loc(&self, id: &Sha256Digest) -> Option<&PieceLoc> {
        self.locs.get(id)
    }

    /// `id` and the bases below it, down to a whole piece, each with what decoding it takes
    /// (its size and the sizes of every base below it, summed). `None` when a location is
    /// not loaded or the chain is longer than allowed.
    pub fn chain_costs(&self, id: &Sha256Digest) -> Option<Vec<(Sha256Digest, u64)>> {
        let mut chain = vec![(*id, self.locs.get(id)?.size)];
        while let Some(b) = self.locs.get(&chain[chain.len() - 1].0)?.base {
            if chain.len() > MAX_DEPTH as usize {
                return None;
            }
            chain.push((b, self.locs.get(&b)?.size));
        }
        let mut below = 0;
        for (_, cost) in chain.iter_mut().rev() {
            below += *cost;
            *cost = below;
        }
        Some(chain)
    }

    pub fn locs(&self) -> &HashMap<Sha256Digest, PieceLoc> {
        &self.locs
    }

    pub fn pack_path(&self, pack: i64) -> PathBuf {
        if let Some(path) = self.foreign.get(&pack) {
            return path.clone();
        }
        let name = self
            .pack_names
            .get(&pack)
            .map_or_else(|| format!("(pack #{pack})"), |n| n.clone());
        pack_path(&self.packs_dir, &name)
    }

    fn file(&self, pack: i64) -> Result<Arc<File>, PieceError> {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = files.get(&pack) {
            return Ok(f.clone());
        }
        let path = self.pack_path(pack);
        let f = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound && !self.foreign.contains_key(&pack) => {
                self.fetched(pack).map_err(|e| match e {
                    Some(err) => err,
                    None => PieceError::Io {
                        path: path.clone(),
                        source: io::Error::from(io::ErrorKind::NotFound),
                    },
                })?
            }
            Err(source) => return Err(PieceError::Io { path, source }),
        };
        let f = Arc::new(f);
        files.insert(pack, f.clone());
        Ok(f)
    }

    /// The file of pack `pack` on this machine, fetched from the bucket first if it is not.
    pub fn local_pack(&self, pack: i64) -> Result<PathBuf, PieceError> {
        self.file(pack)?;
        let path = self.pack_path(pack);
        match (&self.fetch, self.pack_names.get(&pack)) {
            (Some(f), Some(name)) if !path.is_file() => Ok(pack_path(&f.packs, name)),
            _ => Ok(path),
        }
    }

    /// Pack `pack` from where fetches go, fetched from the bucket first if it is not there.
    /// `Err(None)` when there is no bucket to fetch from.
    fn fetched(&self, pack: i64) -> Result<File, Option<PieceError>> {
        let fetch = self.fetch.as_ref().ok_or(None)?;
        let name = self.pack_names.get(&pack).ok_or(None)?;
        let dest = pack_path(&fetch.packs, name);
        if !dest.is_file() {
            let fetch_err = |source| {
                Some(PieceError::Fetch {
                    name: name.clone(),
                    source: Box::new(source),
                })
            };
            let id: Sha256Digest = name.parse().map_err(|e| {
                fetch_err(crate::remote::RemoteError::Io {
                    path: dest.clone(),
                    source: io::Error::new(io::ErrorKind::InvalidData, e),
                })
            })?;
            fetch
                .bucket
                .fetch(
                    &Bucket::pack_name(&format!("{name}{PACK_SUFFIX}")),
                    &id,
                    &dest,
                )
                .map_err(fetch_err)?;
        }
        File::open(&dest).map_err(|source| Some(PieceError::Io { path: dest, source }))
    }

    /// The stored frame of a piece, as it is in its pack (a block's frame holds others too).
    pub fn frame(&self, id: &Sha256Digest) -> Result<Vec<u8>, PieceError> {
        let loc = self.locs.get(id).ok_or(PieceError::Missing(*id))?;
        self.frame_at(loc)
    }

    /// How many bytes of content the zstd frame at `loc` says it holds (read from its header).
    pub fn frame_content_size(&self, loc: &PieceLoc) -> Result<Option<u64>, PieceError> {
        let f = self.file(loc.pack)?;
        let mut head = vec![0u8; loc.length.min(18) as usize];
        f.read_exact_at(&mut head, loc.offset)
            .map_err(|source| PieceError::Io {
                path: self.pack_path(loc.pack),
                source,
            })?;
        Ok(zstd::zstd_safe::get_frame_content_size(&head)
            .ok()
            .flatten())
    }

    pub(crate) fn frame_at(&self, loc: &PieceLoc) -> Result<Vec<u8>, PieceError> {
        let f = self.file(loc.pack)?;
        let mut buf = vec![0u8; loc.length as usize];
        f.read_exact_at(&mut buf, loc.offset)
            .map_err(|source| PieceError::Io {
                path: self.pack_path(loc.pack),
                source,
            })?;
        Ok(buf)
    }

    fn corrupt(&self, id: &Sha256Digest, detail: impl Into<String>) -> PieceError {
        let path = self
            .locs
            .get(id)
            .map_or_else(|| PathBuf::from("?"), |l| self.pack_path(l.pack));
        PieceError::Corrupt {
            id: *id,
            path,
            detail: detail.into(),
        }
    }

    /// A piece's content, decoded through its chain of deltas. Not re-hashed: see
    /// [`PieceReader::get_checked`].
    pub fn get(&self, id: &Sha256Digest) -> Result<Vec<u8>, PieceError> {
        // The chain from the piece down to a whole one, then decoded upwards.
        let mut chain = vec![*id];
        loop {
            let last = chain[chain.len() - 1];
            let loc = self.locs.get(&last).ok_or(PieceError::Missing(last))?;
            match loc.base {
                Some(b) if chain.len() <= MAX_DEPTH as usize + 1 => chain.push(b),
                Some(_) => {
                    return Err(self.corrupt(id, "its chain of deltas is longer than allowed"));
                }
                None => break,
            }
        }
        let mut content: Option<Vec<u8>> = None;
        for piece in chain.iter().rev() {
            content = Some(self.decode_one(piece, content.as_deref())?);
        }
        Ok(content.unwrap_or_default())
    }

    /// One piece's content, given its base's content when it is a delta. Not re-hashed.
    pub fn decode_one(
        &self,
        id: &Sha256Digest,
        base: Option<&[u8]>,
    ) -> Result<Vec<u8>, PieceError> {
        let loc = self.locs.get(id).ok_or(PieceError::Missing(*id))?;
        let base = match (loc.base, base) {
            (Some(b), None) => {
                return Err(self.corrupt(id, format!("a delta decoded without its base {b}")));
            }
            (Some(_), Some(base)) => Some(base),
            (None, _) => None,
        };
        if loc.size >= STREAM_MIN && base.is_none() {
            let mut out = Vec::new();
            self.stream(id)?
                .read_to_end(&mut out)
                .map_err(|e| self.corrupt(id, e.to_string()))?;
            if out.len() as u64 != loc.size {
                return Err(self.corrupt(
                    id,
                    format!(
                        "it decodes to {} bytes, the index says {}",
                        out.len(),
                        loc.size
                    ),
                ));
            }
            return Ok(out);
        }
        if let Some(base) = base {
            let frame = self.frame_at(loc)?;
            let mut out = Vec::with_capacity(loc.size as usize);
            let result =
                DCTX.with(|d| d.borrow_mut().decompress_using_dict(&mut out, &frame, base));
            return match result {
                Ok(n) if n as u64 == loc.size && loc.skip == 0 => Ok(out),
                Ok(n) => Err(self.corrupt(
                    id,
                    format!("it decodes to {n} bytes, the index says {}", loc.size),
                )),
                Err(code) => Err(self.corrupt(
                    id,
                    format!("zstd: {}", zstd::zstd_safe::get_error_name(code)),
                )),
            };
        }
        let block = self.block(id, loc)?;
        let end = loc
            .skip
            .checked_add(loc.size)
            .filter(|e| *e <= block.len() as u64);
        match end {
            Some(end) => Ok(block[loc.skip as usize..end as usize].to_vec()),
            None => Err(self.corrupt(
                id,
                format!(
                    "its block holds {} bytes, not the {} from {} the index says",
                    block.len(),
                    loc.size,
                    loc.skip
                ),
            )),
        }
    }

    /// The decoded content of the frame (a block of whole pieces) that holds `id`.
    fn block(&self, id: &Sha256Digest, loc: &PieceLoc) -> Result<Arc<Vec<u8>>, PieceError> {
        let key = (loc.pack, loc.offset);
        {
            let mut cache = self.blocks.lock().unwrap_or_else(|p| p.into_inner());
            let at = cache.iter().position(|(k, _)| *k == key);
            if let Some(hit) = at.and_then(|at| cache.remove(at)) {
                let b = hit.1.clone();
                cache.push_back(hit);
                return Ok(b);
            }
        }
        let frame = self.frame_at(loc)?;
        let len = match zstd::zstd_safe::get_frame_content_size(&frame) {
            Ok(Some(n)) if n < BLOCK_MAX => n as usize,
            Ok(n) => {
                return Err(self.corrupt(id, format!("its frame claims {n:?} bytes of content")));
            }
            Err(_) => return Err(self.corrupt(id, "its frame has no valid zstd header")),
        };
        let mut out = Vec::with_capacity(len);
        match DCTX.with(|d| d.borrow_mut().decompress(&mut out, &frame)) {
            Ok(n) if n == len => {}
            Ok(n) => {
                return Err(self.corrupt(id, format!("its block decodes to {n} bytes, not {len}")));
            }
            Err(code) => {
                return Err(self.corrupt(
                    id,
                    format!("zstd: {}", zstd::zstd_safe::get_error_name(code)),
                ));
            }
        }
        let block = Arc::new(out);
        // Only blocks of several pieces are worth keeping.
        if block.len() as u64 != loc.size {
            let mut cache = self.blocks.lock().unwrap_or_else(|p| p.into_inner());
            let mut held: usize = cache.iter().map(|(_, b)| b.len()).sum();
            while held + block.len() > BLOCK_CACHE {
                match cache.pop_front() {
                    Some((_, b)) => held -= b.len(),
                    None => break,
                }
            }
            cache.push_back((key, block.clone()));
        }
        Ok(block)
    }

    /// A piece's content, checked against its id.
    pub fn get_checked(&self, id: &Sha256Digest) -> Result<Vec<u8>, PieceError> {
        let content = self.get(id)?;
        let actual = Sha256Digest::of(&content);
        if actual != *id {
            return Err(self.corrupt(id, format!("its content hashes to {actual}")));
        }
        Ok(content)
    }

    /// A whole (not delta) piece as a stream, for pieces too large to hold in memory.
    pub fn stream(&self, id: &Sha256Digest) -> Result<Box<dyn Read + Send>, PieceError> {
        let loc = self.locs.get(id).ok_or(PieceError::Missing(*id))?;
        if loc.base.is_some() || loc.skip != 0 {
            return Err(self.corrupt(
                id,
                "a delta or a block where a frame of its own was expected",
            ));
        }
        let f = self.file(loc.pack)?;
        let region = Region {
            file: f,
            pos: loc.offset,
            end: loc.offset + loc.length,
        };
        let decoder = zstd::stream::read::Decoder::new(region).map_err(|e| PieceError::Io {
            path: self.pack_path(loc.pack),
            source: e,
        })?;
        Ok(Box::new(decoder.take(loc.size)))
    }
}

/// A byte range of a pack file, read with `pread` so that handles can be shared.
pub(super) struct Region {
    file: Arc<File>,
    pos: u64,
    end: u64,
}

impl Region {
    /// Bytes `pos..end` of `file`.
    pub(super) fn new(file: Arc<File>, pos: u64, end: u64) -> Region {
        Region { file, pos, end }
    }
}

impl Read for Region {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = (self.end - self.pos) as usize;
        let n = buf.len().min(left);
        if n == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..n], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

pub fn pack_path(packs_dir: &Path, name: &str) -> PathBuf {
    packs_dir.join(format!("{name}{PACK_SUFFIX}"))
}

/// Whether `content` may serve as the base of a delta.
pub fn usable_base(content: &[u8]) -> bool {
    usable_base_size(content.len() as u64) && !content.starts_with(&ZSTD_DICT_MAGIC)
}

/// Whether a piece of `size` bytes may serve as the base of a delta, as far as its size says.
pub fn usable_base_size(size: u64) -> bool {
    (DELTA_MIN_BASE as u64..=DELTA_MAX).contains(&size)
}

/// The smallest delta of `content` against one of `bases`, if it beats compressing the
/// content alone (a delta under a sixteenth of the content is taken without that check).
/// Returns the frame and the base it needs.
pub fn best_delta(
    content: &[u8],
    bases: &[(Sha256Digest, &[u8])],
    level: i32,
) -> io::Result<Option<(Vec<u8>, Sha256Digest)>> {
    if content.len() as u64 > DELTA_MAX {
        return Ok(None);
    }
    CCTX.with(|c| {
        let mut c = c.borrow_mut();
        let bound = zstd::zstd_safe::compress_bound(content.len());
        let mut best: Option<(Vec<u8>, Sha256Digest)> = None;
        for (id, base) in bases {
            if !usable_base(base) {
                continue;
            }
            let mut out = Vec::with_capacity(bound);
            c.compress_using_dict(&mut out, content, base, level)
                .map_err(zstd_error)?;
            if best.as_ref().is_none_or(|(b, _)| out.len() < b.len()) {
                best = Some((out, *id));
            }
        }
        let Some((frame, base)) = best else {
            return Ok(None);
        };
        if frame.len() < content.len() / 16 {
            return Ok(Some((frame, base)));
        }
        let mut whole = Vec::with_capacity(bound);
        c.compress(&mut whole, content, level).map_err(zstd_error)?;
        Ok((frame.len() < whole.len()).then_some((frame, base)))
    })
}

/// One zstd frame of `content` (a block of whole pieces, or one).
pub fn compress_block(content: &[u8], level: i32) -> io::Result<Vec<u8>> {
    CCTX.with(|c| {
        let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(content.len()));
        c.borrow_mut()
            .compress(&mut out, content, level)
            .map_err(zstd_error)?;
        Ok(out)
    })
}

fn zstd_error(code: usize) -> io::Error {
    io::Error::other(format!("zstd: {}", zstd::zstd_safe::get_error_name(code)))
}

/// A pack's frames, by offset, each with the pieces it holds (a block's in the order they are
/// in).
pub type Frames = std::collections::BTreeMap<u64, Vec<(Sha256Digest, PieceLoc)>>;

/// Where a piece went in a new pack: id, offset and length of its frame, skip.
pub type Placed = (Sha256Digest, u64, u64, u64);

/// A new pack in `dir` holding the pieces of `frames` that `keep` keeps, every one re-hashed:
/// a frame whose pieces are all kept is copied as it is, a block that loses some is
/// compressed again from the rest, a frame with none is left out. Returns the pack's name and
/// size, and where each kept piece now is (id, offset, length, skip). gc writes packs this
/// way; so do `export` and `import-archive` when they carry part of a pack.
pub fn cut_pack(
    reader: &PieceReader,
    frames: &Frames,
    keep: &dyn Fn(&Sha256Digest) -> bool,
    dir: &Path,
    level: i32,
) -> Result<(String, u64, Vec<Placed>), PieceError> {
    let io_err = |source| PieceError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut w = PackWriter::create(dir).map_err(io_err)?;
    let mut moved = Vec::new();
    for f in frames.values() {
        let kept: Vec<&(Sha256Digest, PieceLoc)> = f.iter().filter(|(id, _)| keep(id)).collect();
        if kept.is_empty() {
            continue;
        }
        let mut contents = Vec::new();
        for (id, _) in &kept {
            contents.push(reader.get_checked(id)?);
        }
        if kept.len() == f.len() {
            let frame = reader.frame(&f[0].0)?;
            let offset = w.append(&frame).map_err(io_err)?;
            for (id, loc) in &kept {
                moved.push((*id, offset, frame.len() as u64, loc.skip));
            }
        } else {
            let frame = compress_block(&contents.concat(), level).map_err(io_err)?;
            let offset = w.append(&frame).map_err(io_err)?;
            let mut skip = 0;
            for ((id, _), c) in kept.iter().zip(&contents) {
                moved.push((*id, offset, frame.len() as u64, skip));
                skip += c.len() as u64;
            }
        }
    }
    let (name, size) = w.finish().map_err(io_err)?;
    Ok((name, size, moved))
}

/// A pack file being written: a temporary file in the packs directory, named by its sha256
/// once complete.
pub struct PackWriter {
    dir: PathBuf,
    tmp: tempfile::NamedTempFile,
    out: HashingWriter<BufWriter<File>>,
    offset: u64,
}

impl PackWriter {
    pub fn create(dir: &Path) -> io::Result<PackWriter> {
        std::fs::create_dir_all(dir)?;
        let tmp = fsutil::temp_file_in(dir)?;
        let file = tmp.as_file().try_clone()?;
        let mut out = HashingWriter::new(BufWriter::with_capacity(1 << 20, file));
        out.write_all(PACK_MAGIC)?;
        Ok(PackWriter {
            dir: dir.to_path_buf(),
            tmp,
            out,
            offset: PACK_MAGIC.len() as u64,
        })
    }

    /// Appends a frame; returns its offset.
    pub fn append(&mut self, frame: &[u8]) -> io::Result<u64> {
        let at = self.offset;
        self.out.write_all(frame)?;
        self.offset += frame.len() as u64;
        Ok(at)
    }

    /// Compresses `content` as one whole frame straight into the pack (for large pieces,
    /// with zstd's worker threads); returns its offset and length.
    pub fn append_stream(
        &mut self,
        content: &mut dyn Read,
        size: u64,
        level: i32,
        threads: u32,
    ) -> io::Result<(u64, u64)> {
        let at = self.offset;
        let counted = Counted {
            inner: &mut self.out,
            n: 0,
        };
        let mut enc = zstd::stream::write::Encoder::new(counted, level)?;
        enc.set_pledged_src_size(Some(size))?;
        if threads > 1 {
            enc.multithread(threads)?;
        }
        let copied = io::copy(content, &mut enc)?;
        if copied != size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{copied} bytes where {size} were expected"),
            ));
        }
        let counted = enc.finish()?;
        let len = counted.n;
        self.offset += len;
        Ok((at, len))
    }

    /// Completes the pack: flushed, synced and renamed to `<sha256>.pack`. Returns its name
    /// and size.
    pub fn finish(self) -> io::Result<(String, u64)> {
        let (mut buffered, id, size) = self.out.finish();
        buffered.flush()?;
        drop(buffered);
        failpoint::hit("pack.before-rename");
        let name = id.hex();
        fsutil::persist(self.tmp, &pack_path(&self.dir, &name))?;
        Ok((name, size))
    }
}

struct Counted<'a, W> {
    inner: &'a mut W,
    n: u64,
}

impl<W: Write> Write for Counted<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// How many member hashes a sketch keeps.
pub const SKETCH_LEN: usize = 128;

/// A bundle's sketch: the smallest `SKETCH_LEN` of its members' content hashes (their first
/// eight bytes), sorted. Two bundles that share most members share most of their sketch.
pub fn sketch<'a>(ids: impl Iterator<Item = &'a Sha256Digest>) -> Vec<u8> {
    let mut keys: Vec<u64> = ids
        .map(|d| u64::from_be_bytes(d.0[..8].try_into().expect("8 bytes")))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys.truncate(SKETCH_LEN);
    keys.iter().flat_map(|k| k.to_be_bytes()).collect()
}

fn keys(sketch: &[u8]) -> impl Iterator<Item = u64> + '_ {
    sketch
        .chunks_exact(8)
        .map(|c| u64::from_be_bytes(c.try_into().expect("8 bytes")))
}

/// How alike two bundles are, from their sketches: of the smallest keys of both together,
/// how many both have (a bottom-k estimate of their Jaccard similarity, times k).
pub fn similarity(a: &[u8], b: &[u8]) -> usize {
    let (mut a, mut b) = (keys(a).peekable(), keys(b).peekable());
    let (mut seen, mut both) = (0, 0);
    while seen < SKETCH_LEN {
        match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if x == y => {
                both += 1;
                a.next();
                b.next();
            }
            (Some(x), Some(y)) if x < y => {
                a.next();
            }
            (Some(_), Some(_)) => {
                b.next();
            }
            _ => break,
        }
        seen += 1;
    }
    both
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delta_is_smaller_and_decodes_with_its_base() {
        // Varied lines, as source code has (zstd's fastest levels miss matches in text that
        // repeats one pattern).
        let mut x = 12345u64;
        let base: Vec<u8> = (0..5_000u32)
            .flat_map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                format!("    value_{} = compute({i}, {})\n", x >> 40, x % 977).into_bytes()
            })
            .collect();
        let mut new = base[..base.len() / 2].to_vec();
        new.extend_from_slice(b"    one_more_line()\n");
        new.extend_from_slice(&base[base.len() / 2..]);
        let bid = Sha256Digest::of(&base);
        let (frame, used) = best_delta(&new, &[(bid, &base)], 3).unwrap().unwrap();
        assert_eq!(used, bid);
        assert_eq!(best_delta(&new, &[], 3).unwrap(), None);
        let whole = compress_block(&new, 3).unwrap();
        assert!(
            frame.len() * 10 < whole.len(),
            "{} vs {}",
            frame.len(),
            whole.len()
        );
        let mut out = Vec::with_capacity(new.len());
        DCtx::create()
            .decompress_using_dict(&mut out, &frame, &base)
            .unwrap();
        assert_eq!(out, new);
        // A base that starts like a zstd dictionary is never used.
        let mut dictish = ZSTD_DICT_MAGIC.to_vec();
        dictish.extend_from_slice(&base);
        assert_eq!(best_delta(&new, &[(bid, &dictish)], 3).unwrap(), None);
    }

    #[test]
    fn sketches_rank_the_bundle_that_shares_more_first() {
        let ids: Vec<Sha256Digest> = (0..1000u32)
            .map(|i| Sha256Digest::of(&i.to_le_bytes()))
            .collect();
        let a = sketch(ids[..600].iter());
        let near = sketch(ids[50..650].iter());
        let far = sketch(ids[400..1000].iter());
        assert!(similarity(&a, &near) > similarity(&a, &far));
        assert_eq!(similarity(&a, &a), SKETCH_LEN);
        assert_eq!(similarity(&a, &sketch([].iter())), 0);
    }
}
