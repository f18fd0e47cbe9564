//! Packs from another archive (an archive file's, docs/RELEASES.md), checked before they are
//! trusted and then added. Every piece is decoded (bases before the deltas on them, on every
//! core) and named by the sha256 of its content: the file's table names no piece. Then each
//! pack moves in by rename, or is cut down to the pieces this archive lacks.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use zstd::zstd_safe::DCtx;

use crate::bundle::Manifest;
use crate::digest::{Sha256Digest, Sha256Hasher};
use crate::progress::Progress;

use super::ark::{Ark, ArkError};
use super::carry::{Frame, FrameBase, FrameHolds};
use super::index::{AddedPack, NewPiece, PieceLoc};
use super::pieces::{
    DELTA_MAX, Frames, MAX_DEPTH, PACK_MAGIC, PieceError, PieceReader, Placed, Region, STREAM_MIN,
    cut_pack, pack_path,
};
use super::stored::{Contents, parse_manifest};

/// Why packs from elsewhere are refused.
#[derive(Debug, thiserror::Error)]
pub enum IncomingError {
    #[error("pack {pack}: {detail}")]
    Pack { pack: String, detail: String },
    #[error("pack {pack}, frame at byte {offset}: {detail}")]
    Frame {
        pack: String,
        offset: u64,
        detail: String,
    },
    #[error(
        "pack {pack}, frame at byte {offset}: a delta against piece {base}, which is neither in \
         the file nor in this archive"
    )]
    MissingBase {
        pack: String,
        offset: u64,
        base: Sha256Digest,
    },
    #[error("{0}")]
    Other(String),
    #[error(transparent)]
    Ark(#[from] ArkError),
}

/// A pack from elsewhere, staged: its name (the sha256 of its bytes, checked already), file
/// and frames.
#[derive(Debug, Clone)]
pub struct IncomingPack {
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
    pub frames: Vec<Frame>,
}

/// Decoded content kept for the bundle checks, up to this much; the rest is decoded again
/// when a bundle needs it.
const KEEP_DECODED: u64 = 1 << 30;

/// Packs from elsewhere, every piece decoded and named by the sha256 of its content; with
/// the receiving archive's pieces, the contents bundles are rebuilt from.
pub struct Incoming {
    reader: PieceReader,
    packs: Vec<IncomingPack>,
    /// Each piece's id by its number.
    pieces: Vec<Sha256Digest>,
    /// Which numbers each pack's pieces have: the table lists them pack by pack.
    pack_ranges: Vec<std::ops::Range<usize>>,
    kept: HashMap<Sha256Digest, Arc<Vec<u8>>>,
}

/// Where a carried piece is, before its id is known.
struct Slot {
    pack: usize,
    offset: u64,
    length: u64,
    skip: u64,
    size: u64,
    base: Option<FrameBase>,
}

/// The number pack `k` of an import gets in its reader: never one of the index's.
fn foreign_no(k: usize) -> i64 {
    -(k as i64) - 1
}

fn zstd_name(code: usize) -> &'static str {
    zstd::zstd_safe::get_error_name(code)
}

impl Incoming {
    /// Decodes every piece of `packs` (bases before the deltas on them, each block once) and
    /// names it by its content's sha256. Bases the packs do not carry are read from
    /// `receiver`. Refuses a pack whose frames do not cover it exactly or do not decode to
    /// what its table says, a delta whose base is missing, a chain of deltas longer than
    /// readers accept, and a piece carried twice.
    pub fn check(
        receiver: Option<&Ark>,
        packs: Vec<IncomingPack>,
        progress: &dyn Progress,
    ) -> Result<Incoming, IncomingError> {
        let mut reader = receiver.map_or_else(
            || PieceReader::new(PathBuf::from("/nonexistent")),
            Ark::piece_reader,
        );
        let slots = lay_out(&packs)?;
        for (k, p) in packs.iter().enumerate() {
            reader.add_foreign_pack(foreign_no(k), p.path.clone());
        }
        let total: u64 = slots.iter().map(|s| s.size).sum();
        progress.start("checking pieces", Some(total));
        let mut ids = vec![None; slots.len()];
        let mut depths = vec![0; slots.len()];
        let mut kept = HashMap::new();
        decode_all(
            &packs,
            &slots,
            &mut reader,
            receiver,
            &mut ids,
            &mut depths,
            &mut kept,
            progress,
        )?;
        progress.finish();
        let mut pieces = Vec::with_capacity(ids.len());
        let mut seen = HashSet::new();
        for (n, (id, s)) in ids.iter().zip(&slots).enumerate() {
            let Some(id) = id else {
                return Err(IncomingError::Frame {
                    pack: packs[s.pack].name.clone(),
                    offset: s.offset,
                    detail: format!(
                        "piece number {n} is a delta in a loop of deltas, never on a whole piece"
                    ),
                });
            };
            if !seen.insert(*id) {
                return Err(IncomingError::Frame {
                    pack: packs[s.pack].name.clone(),
                    offset: s.offset,
                    detail: format!("it holds piece {id} a second time"),
                });
            }
            pieces.push(*id);
        }
        for (n, s) in slots.iter().enumerate() {
            let base = match &s.base {
                Some(FrameBase::Carried(b)) => Some(pieces[*b]),
                Some(FrameBase::Held(b)) => Some(*b),
                None => None,
            };
            reader.insert_loc(
                pieces[n],
                PieceLoc {
                    pack: foreign_no(s.pack),
                    offset: s.offset,
                    length: s.length,
                    skip: s.skip,
                    size: s.size,
                    base,
                    depth: depths[n],
                },
            );
        }
        let mut pack_ranges = vec![0..0; packs.len()];
        for (n, s) in slots.iter().enumerate() {
            let r = &mut pack_ranges[s.pack];
            if r.start == r.end {
                *r = n..n + 1;
            } else {
                r.end = n + 1;
            }
        }
        Ok(Incoming {
            reader,
            packs,
            pieces,
            pack_ranges,
            kept,
        })
    }

    /// Every carried piece's id, by number.
    pub fn pieces(&self) -> &[Sha256Digest] {
        &self.pieces
    }

    pub fn packs(&self) -> &[IncomingPack] {
        &self.packs
    }

    /// The ids of pack `k`'s pieces, in the order its table lists them.
    pub fn pieces_of_pack(&self, k: usize) -> &[Sha256Digest] {
        self.pack_ranges
            .get(k)
            .map_or(&[][..], |r| &self.pieces[r.clone()])
    }

    /// The base of a piece's delta, if it is one.
    pub fn base_of(&self, id: &Sha256Digest) -> Option<Sha256Digest> {
        self.reader.loc(id).and_then(|l| l.base)
    }

    /// Learns where the receiving archive keeps `ids` (those the packs do not carry), so
    /// that bundles made of both can be rebuilt. Ids it lacks stay unknown.
    pub fn load_held(&mut self, receiver: &Ark, ids: &[Sha256Digest]) -> Result<(), ArkError> {
        Ok(self.reader.load(receiver.index(), ids)?)
    }

    /// A `bundle.json` piece, re-hashed and parsed.
    pub fn manifest(
        &self,
        bundle: &Sha256Digest,
        piece: &Sha256Digest,
    ) -> Result<(Vec<u8>, Manifest), IncomingError> {
        let bytes = Contents::get(self, piece).map_err(|e| {
            IncomingError::Other(format!(
                "the bundle.json of bundle {bundle} (piece {piece}): {e}"
            ))
        })?;
        if Sha256Digest::of(&bytes) != *piece {
            return Err(IncomingError::Other(format!(
                "the bundle.json of bundle {bundle} does not hash to piece {piece}"
            )));
        }
        let manifest = parse_manifest(Path::new(&format!("bundle {bundle}")), &bytes)
            .map_err(|e| IncomingError::Other(e.to_string()))?;
        Ok((bytes, manifest))
    }
}

impl Contents for Incoming {
    fn size(&self, id: &Sha256Digest) -> Option<u64> {
        self.reader.loc(id).map(|l| l.size)
    }
    fn get(&self, id: &Sha256Digest) -> Result<Vec<u8>, PieceError> {
        match self.kept.get(id) {
            Some(c) => Ok(c.as_ref().clone()),
            None => self.reader.get(id),
        }
    }
    fn get_shared(&self, id: &Sha256Digest) -> Result<Arc<Vec<u8>>, PieceError> {
        match self.kept.get(id) {
            Some(c) => Ok(c.clone()),
            None => self.reader.get(id).map(Arc::new),
        }
    }
    fn stream(&self, id: &Sha256Digest) -> Result<Box<dyn Read + Send + '_>, PieceError> {
        self.reader.stream(id)
    }
}

/// Every carried piece's place, from the packs' frames; refuses frames that do not cover a
/// pack exactly, and bases by number that are not carried pieces.
fn lay_out(packs: &[IncomingPack]) -> Result<Vec<Slot>, IncomingError> {
    let mut slots = Vec::new();
    for (k, p) in packs.iter().enumerate() {
        let bad = |detail: String| IncomingError::Pack {
            pack: p.name.clone(),
            detail,
        };
        let mut magic = [0u8; 16];
        File::open(&p.path)
            .and_then(|f| f.read_exact_at(&mut magic, 0))
            .map_err(|e| bad(format!("cannot be read: {e}")))?;
        if &magic != PACK_MAGIC {
            return Err(bad("it does not start as a swe-ark pack".into()));
        }
        let mut offset = PACK_MAGIC.len() as u64;
        for f in &p.frames {
            match &f.holds {
                FrameHolds::Whole(sizes) => {
                    if sizes.is_empty() {
                        return Err(bad(format!("its frame at byte {offset} holds no piece")));
                    }
                    let mut skip = 0;
                    for size in sizes {
                        slots.push(Slot {
                            pack: k,
                            offset,
                            length: f.length,
                            skip,
                            size: *size,
                            base: None,
                        });
                        skip += size;
                    }
                }
                FrameHolds::Delta { size, base } => slots.push(Slot {
                    pack: k,
                    offset,
                    length: f.length,
                    skip: 0,
                    size: *size,
                    base: Some(base.clone()),
                }),
            }
            offset = offset
                .checked_add(f.length)
                .ok_or_else(|| bad("its frames add up to more bytes than a file holds".into()))?;
        }
        if offset != p.size {
            return Err(bad(format!(
                "its table's frames end at byte {offset}, the pack is {} bytes",
                p.size
            )));
        }
    }
    let n = slots.len();
    for s in &slots {
        if let Some(FrameBase::Carried(b)) = s.base
            && b >= n
        {
            return Err(IncomingError::Frame {
                pack: packs[s.pack].name.clone(),
                offset: s.offset,
                detail: format!("a delta against piece number {b}, but {n} pieces are carried"),
            });
        }
    }
    Ok(slots)
}

/// A piece as decoding found it: its number, id, depth, and its content when kept.
struct Decoded {
    n: usize,
    id: Sha256Digest,
    depth: u32,
    content: Option<Arc<Vec<u8>>>,
}

/// Whole frames are decoded in batches of about this much content, each batch on every core.
const BATCH: u64 = 256 << 20;

/// What decoding shares between threads: the packs, their files, every piece's place, and
/// the deltas on each piece.
struct Decoder<'a> {
    packs: &'a [IncomingPack],
    files: Vec<Arc<File>>,
    slots: &'a [Slot],
    children: HashMap<usize, Vec<usize>>,
}

impl Decoder<'_> {
    fn frame_err(&self, n: usize, detail: String) -> IncomingError {
        let s = &self.slots[n];
        IncomingError::Frame {
            pack: self.packs[s.pack].name.clone(),
            offset: s.offset,
            detail,
        }
    }

    fn read_frame(&self, n: usize) -> Result<Vec<u8>, IncomingError> {
        let s = &self.slots[n];
        let mut buf = vec![0u8; s.length as usize];
        self.files[s.pack]
            .read_exact_at(&mut buf, s.offset)
            .map_err(|e| self.frame_err(n, format!("cannot be read: {e}")))?;
        Ok(buf)
    }

    /// Piece `n` (its content given), and every delta on it down the tree, each named by the
    /// sha256 of its content. Contents are kept for the caller while `keep` says so.
    fn tree(
        &self,
        n: usize,
        depth: u32,
        content: Arc<Vec<u8>>,
        dctx: &mut DCtx<'static>,
        out: &mut Vec<Decoded>,
    ) -> Result<(), IncomingError> {
        let mut stack = vec![(n, depth, content)];
        while let Some((n, depth, content)) = stack.pop() {
            out.push(Decoded {
                n,
                id: Sha256Digest::of(&content),
                depth,
                content: Some(content.clone()),
            });
            for &c in self.children.get(&n).into_iter().flatten() {
                let decoded = self.decode_delta(c, &content, depth + 1, dctx)?;
                stack.push((c, depth + 1, Arc::new(decoded)));
            }
        }
        Ok(())
    }

    fn decode_delta(
        &self,
        n: usize,
        base: &[u8],
        depth: u32,
        dctx: &mut DCtx<'static>,
    ) -> Result<Vec<u8>, IncomingError> {
        if depth > MAX_DEPTH {
            return Err(self.frame_err(
                n,
                format!("its chain of deltas is longer than {MAX_DEPTH}, which readers refuse"),
            ));
        }
        if base.len() as u64 > DELTA_MAX {
            return Err(self.frame_err(
                n,
                format!(
                    "a delta against a piece of {} bytes (bases are at most {DELTA_MAX})",
                    base.len()
                ),
            ));
        }
        let frame = self.read_frame(n)?;
        let size = self.slots[n].size;
        let mut out = Vec::with_capacity(size.min(DELTA_MAX) as usize);
        match dctx.decompress_using_dict(&mut out, &frame, base) {
            Ok(k) if k as u64 == size => Ok(out),
            Ok(k) => Err(self.frame_err(
                n,
                format!("the table says it holds a piece of {size} bytes; it decodes to {k}"),
            )),
            Err(code) => {
                Err(self.frame_err(n, format!("it does not decode: zstd: {}", zstd_name(code))))
            }
        }
    }

    /// A frame of whole pieces (`count` of them from piece `n`) and the deltas on them.
    fn whole_frame(&self, n: usize, count: usize) -> Result<Vec<Decoded>, IncomingError> {
        let mut out = Vec::new();
        let sizes: u64 = self.slots[n..n + count].iter().map(|t| t.size).sum();
        if count == 1 && sizes >= STREAM_MIN {
            let id = self.stream_whole(n)?;
            out.push(Decoded {
                n,
                id,
                depth: 0,
                content: None,
            });
            return Ok(out);
        }
        let mut dctx = DCtx::create();
        let block = self.decode_block(n, sizes, &mut dctx)?;
        for k in n..n + count {
            let t = &self.slots[k];
            let content = Arc::new(block[t.skip as usize..(t.skip + t.size) as usize].to_vec());
            self.tree(k, 0, content, &mut dctx, &mut out)?;
        }
        Ok(out)
    }

    fn decode_block(
        &self,
        n: usize,
        sizes: u64,
        dctx: &mut DCtx<'static>,
    ) -> Result<Vec<u8>, IncomingError> {
        let frame = self.read_frame(n)?;
        let claimed = zstd::zstd_safe::get_frame_content_size(&frame)
            .ok()
            .flatten();
        if claimed != Some(sizes) {
            return Err(self.frame_err(
                n,
                format!(
                    "the table says it holds {sizes} bytes of pieces; its frame holds {}",
                    claimed.map_or_else(|| "an unknown number".to_string(), |c| c.to_string())
                ),
            ));
        }
        let mut out = Vec::with_capacity(sizes as usize);
        match dctx.decompress(&mut out, &frame) {
            Ok(k) if k as u64 == sizes => Ok(out),
            Ok(k) => Err(self.frame_err(
                n,
                format!("the table says it holds {sizes} bytes of pieces; it decodes to {k}"),
            )),
            Err(code) => {
                Err(self.frame_err(n, format!("it does not decode: zstd: {}", zstd_name(code))))
            }
        }
    }

    /// A whole piece too large to hold, hashed as it is decoded; it may not be a base.
    fn stream_whole(&self, n: usize) -> Result<Sha256Digest, IncomingError> {
        let s = &self.slots[n];
        if self.children.contains_key(&n) {
            return Err(self.frame_err(
                n,
                format!(
                    "deltas against a piece of {} bytes (bases are at most {DELTA_MAX})",
                    s.size
                ),
            ));
        }
        let region = Region::new(self.files[s.pack].clone(), s.offset, s.offset + s.length);
        let mut dec = zstd::stream::read::Decoder::new(region)
            .map_err(|e| self.frame_err(n, format!("it does not decode: {e}")))?;
        let mut h = Sha256Hasher::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut got = 0u64;
        loop {
            let k = match dec.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.frame_err(n, format!("it does not decode: {e}"))),
            };
            h.update(&buf[..k]);
            got += k as u64;
        }
        if got != s.size {
            return Err(self.frame_err(
                n,
                format!(
                    "the table says it holds a piece of {} bytes; it decodes to {got}",
                    s.size
                ),
            ));
        }
        Ok(h.finish())
    }
}

/// Each pack's file, opened once for all the threads that read it.
fn open_packs(packs: &[IncomingPack]) -> Result<Vec<Arc<File>>, IncomingError> {
    let mut files = Vec::with_capacity(packs.len());
    for p in packs {
        files.push(Arc::new(File::open(&p.path).map_err(|e| {
            IncomingError::Pack {
                pack: p.name.clone(),
                detail: format!("cannot be read: {e}"),
            }
        })?));
    }
    Ok(files)
}

/// The frames of whole pieces: (the number of the first piece, how many it holds).
fn whole_frames(slots: &[Slot]) -> Vec<(usize, usize)> {
    let mut frames = Vec::new();
    let mut n = 0;
    while n < slots.len() {
        let s = &slots[n];
        let count = if s.base.is_some() {
            0
        } else {
            slots[n..]
                .iter()
                .take_while(|t| t.pack == s.pack && t.offset == s.offset && t.base.is_none())
                .count()
        };
        if count > 0 {
            frames.push((n, count));
        }
        n += count.max(1);
    }
    frames
}

/// Decodes every piece: whole frames in batches, each frame with the deltas on its pieces on
/// one core (a chain stays on one thread), then the deltas on pieces the receiver holds.
/// Fills `ids` and `depths`; keeps contents in `kept` up to [`KEEP_DECODED`].
#[allow(clippy::too_many_arguments)]
fn decode_all(
    packs: &[IncomingPack],
    slots: &[Slot],
    reader: &mut PieceReader,
    receiver: Option<&Ark>,
    ids: &mut [Option<Sha256Digest>],
    depths: &mut [u32],
    kept: &mut HashMap<Sha256Digest, Arc<Vec<u8>>>,
    progress: &dyn Progress,
) -> Result<(), IncomingError> {
    use rayon::prelude::*;
    let files = open_packs(packs)?;
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut on_held: BTreeMap<Sha256Digest, Vec<usize>> = BTreeMap::new();
    for (n, s) in slots.iter().enumerate() {
        match &s.base {
            Some(FrameBase::Carried(b)) => children.entry(*b).or_default().push(n),
            Some(FrameBase::Held(b)) => on_held.entry(*b).or_default().push(n),
            None => {}
        }
    }
    let d = Decoder {
        packs,
        files,
        slots,
        children,
    };
    let mut kept_bytes = 0u64;
    let mut take = |found: Vec<Decoded>| {
        for f in found {
            ids[f.n] = Some(f.id);
            depths[f.n] = f.depth;
            progress.advance(slots[f.n].size);
            if let Some(c) = f.content
                && kept_bytes + c.len() as u64 <= KEEP_DECODED
            {
                kept_bytes += c.len() as u64;
                kept.insert(f.id, c);
            }
        }
    };
    // Whole frames, in batches.
    let frames = whole_frames(slots);
    let mut batch = Vec::new();
    let mut batch_bytes = 0u64;
    for (i, &(n, count)) in frames.iter().enumerate() {
        batch.push((n, count));
        batch_bytes += slots[n..n + count].iter().map(|t| t.size).sum::<u64>();
        if batch_bytes >= BATCH || i + 1 == frames.len() {
            let found: Vec<Result<Vec<Decoded>, IncomingError>> = batch
                .par_iter()
                .map(|&(n, count)| d.whole_frame(n, count))
                .collect();
            for f in found {
                take(f?);
            }
            batch.clear();
            batch_bytes = 0;
        }
    }
    // Deltas on pieces the receiver holds.
    for (base, kids) in on_held {
        let missing = || {
            let s = &slots[kids[0]];
            IncomingError::MissingBase {
                pack: packs[s.pack].name.clone(),
                offset: s.offset,
                base,
            }
        };
        let receiver = receiver.ok_or_else(missing)?;
        reader
            .load(receiver.index(), &[base])
            .map_err(ArkError::from)?;
        let depth = reader.loc(&base).map(|l| l.depth).ok_or_else(missing)?;
        let content = reader
            .get_checked(&base)
            .map_err(|e| IncomingError::Other(format!("this archive's piece {base}: {e}")))?;
        let found: Vec<Result<Vec<Decoded>, IncomingError>> = kids
            .par_iter()
            .map(|&k| {
                let mut dctx = DCtx::create();
                let out = d.decode_delta(k, &content, depth + 1, &mut dctx)?;
                let mut found = Vec::new();
                d.tree(k, depth + 1, Arc::new(out), &mut dctx, &mut found)?;
                Ok(found)
            })
            .collect();
        for f in found {
            take(f?);
        }
    }
    Ok(())
}

impl Ark {
    /// Adds checked packs from elsewhere to the store's files (not yet to the index): a pack
    /// the archive has (by name) or whose pieces it all holds is left out; one it lacks
    /// entirely is moved in by rename; one it holds part of is cut down to the rest. Returns
    /// the packs and pieces to record, in the caller's one transaction; `repos[k]` is the
    /// repository pack `k` is recorded under. The caller holds the store lock, and syncs the
    /// packs directory before the transaction (staged packs are synced before they move).
    pub fn add_incoming(
        &self,
        incoming: &Incoming,
        repos: &[String],
        level: i32,
    ) -> Result<Vec<AddedPack>, ArkError> {
        let packs_dir = self.packs_dir();
        std::fs::create_dir_all(&packs_dir).map_err(|source| ArkError::Io {
            path: packs_dir.clone(),
            source,
        })?;
        let names: HashSet<String> = self.index().packs()?.into_iter().map(|p| p.name).collect();
        let held = self.index().existing_pieces(incoming.pieces())?;
        let depth_here = self.depths_here(incoming, &held)?;
        let mut added = Vec::new();
        for (k, p) in incoming.packs().iter().enumerate() {
            let ids = incoming.pieces_of_pack(k);
            let missing: HashSet<Sha256Digest> = ids
                .iter()
                .filter(|id| !held.contains(id))
                .copied()
                .collect();
            if names.contains(&p.name) || missing.is_empty() {
                continue;
            }
            let (name, size, placed) = place_pack(incoming, k, &missing, &packs_dir, level)?;
            let mut pieces = Vec::new();
            for (id, offset, length, skip) in placed {
                let l = incoming.reader.loc(&id).ok_or(PieceError::Missing(id))?;
                pieces.push(NewPiece {
                    id,
                    offset,
                    length,
                    skip,
                    size: l.size,
                    base: l.base,
                    depth: 0,
                });
            }
            added.push(AddedPack {
                name,
                size,
                repo: repos.get(k).cloned().unwrap_or_default(),
                pieces,
            });
        }
        set_depths(&mut added, depth_here, packs_dir)?;
        Ok(added)
    }

    /// The depths, as they are here, of the incoming pieces this archive holds and of the
    /// bases the incoming deltas name: a base this archive holds keeps its own.
    fn depths_here(
        &self,
        incoming: &Incoming,
        held: &HashSet<Sha256Digest>,
    ) -> Result<HashMap<Sha256Digest, u32>, ArkError> {
        let mut held_ids: Vec<Sha256Digest> = held.iter().copied().collect();
        held_ids.extend(
            incoming
                .pieces()
                .iter()
                .filter_map(|id| incoming.base_of(id)),
        );
        held_ids.sort();
        held_ids.dedup();
        let mut depth_here = HashMap::new();
        for (id, loc) in self.index().piece_locs(&held_ids)? {
            depth_here.insert(id, loc.depth);
        }
        Ok(depth_here)
    }
}

/// Incoming pack `k` put into `packs_dir`: moved in by rename when the archive lacks all its
/// pieces, else cut down to the `missing` ones. Returns its name, size, and where each piece
/// it holds is (id, offset, length, skip).
fn place_pack(
    incoming: &Incoming,
    k: usize,
    missing: &HashSet<Sha256Digest>,
    packs_dir: &Path,
    level: i32,
) -> Result<(String, u64, Vec<Placed>), ArkError> {
    let p = &incoming.packs()[k];
    let ids = incoming.pieces_of_pack(k);
    if missing.len() == ids.len() {
        let dest = pack_path(packs_dir, &p.name);
        std::fs::rename(&p.path, &dest).map_err(|source| ArkError::Io {
            path: dest.clone(),
            source,
        })?;
        let placed = ids
            .iter()
            .filter_map(|id| {
                let l = incoming.reader.loc(id)?;
                Some((*id, l.offset, l.length, l.skip))
            })
            .collect();
        return Ok((p.name.clone(), p.size, placed));
    }
    let mut frames: Frames = BTreeMap::new();
    for id in ids {
        if let Some(l) = incoming.reader.loc(id) {
            frames.entry(l.offset).or_default().push((*id, l.clone()));
        }
    }
    let keep = |id: &Sha256Digest| missing.contains(id);
    Ok(cut_pack(
        &incoming.reader,
        &frames,
        &keep,
        packs_dir,
        level,
    )?)
}

/// The added pieces' depths, bases first: a base is here already (`depth_here`), or added in
/// this import.
fn set_depths(
    added: &mut [AddedPack],
    mut depth_here: HashMap<Sha256Digest, u32>,
    packs_dir: PathBuf,
) -> Result<(), ArkError> {
    let mut left: Vec<&mut NewPiece> = added.iter_mut().flat_map(|p| p.pieces.iter_mut()).collect();
    while !left.is_empty() {
        let before = left.len();
        let mut rest = Vec::new();
        for p in left {
            let depth = match p.base {
                None => Some(0),
                Some(b) => depth_here.get(&b).map(|d| d + 1),
            };
            match depth {
                Some(d) if d > MAX_DEPTH => {
                    return Err(PieceError::Corrupt {
                        id: p.id,
                        path: packs_dir.clone(),
                        detail: format!(
                            "here its chain of deltas would be longer than {MAX_DEPTH}"
                        ),
                    }
                    .into());
                }
                Some(d) => {
                    p.depth = d;
                    depth_here.insert(p.id, d);
                }
                None => rest.push(p),
            }
        }
        if rest.len() == before {
            return Err(ArkError::Io {
                path: packs_dir,
                source: io::Error::other("pieces on bases that are neither here nor added"),
            });
        }
        left = rest;
    }
    Ok(())
}

/// The sketch of a bundle from its manifest (what storing it records, for finding similar
/// bundles).
pub fn sketch_of(manifest: &Manifest) -> Vec<u8> {
    super::pieces::sketch(manifest.members.iter().map(|m| &m.sha256))
}
