//! Carrying stored pieces to another archive (the store form of an archive file,
//! docs/RELEASES.md): which pieces some bundles need, minus those the receiver holds already,
//! and the packs that hold exactly those. A pack the set needs whole (every piece in it, no
//! byte else) is carried as it is; another is cut down to them. The receiving side is in
//! `incoming.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::digest::Sha256Digest;

use super::ark::{Ark, ArkError};
use super::index::{BundleRow, PieceLoc};
use super::pieces::{Frames, PACK_MAGIC, PieceError, PieceReader, cut_pack, pack_path};
use super::stored::parse_manifest;

/// The base a delta frame needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameBase {
    /// A piece carried along with it: its number, counting every carried piece in order
    /// (packs in order, frames in order, a block's pieces in order) from 0.
    Carried(usize),
    /// A piece the receiving archive holds already.
    Held(Sha256Digest),
}

/// What one frame of a carried pack holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameHolds {
    /// Whole pieces one after the other, their sizes in order (a block, or one piece).
    Whole(Vec<u64>),
    /// One piece of `size` bytes, a delta against `base`.
    Delta { size: u64, base: FrameBase },
}

/// One zstd frame of a carried pack; frames follow one another from the pack's magic to its
/// end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub length: u64,
    pub holds: FrameHolds,
}

impl Frame {
    pub fn piece_count(&self) -> usize {
        match &self.holds {
            FrameHolds::Whole(sizes) => sizes.len(),
            FrameHolds::Delta { .. } => 1,
        }
    }
}

/// A pack as carried: its file, named by its sha256, and its frames.
#[derive(Debug, Clone)]
pub struct CarriedPack {
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
    pub frames: Vec<Frame>,
    /// Whether it is one of the archive's packs as it is (not cut).
    pub whole: bool,
}

/// The packs that carry a set of pieces, sorted by name; `pieces` gives each carried piece's
/// id by its number.
#[derive(Debug, Default)]
pub struct Carried {
    pub packs: Vec<CarriedPack>,
    pub pieces: Vec<Sha256Digest>,
    /// Each bundle's pieces: its `bundle.json`, its members and the bases below them.
    pub needs: BTreeMap<Sha256Digest, BTreeSet<Sha256Digest>>,
}

fn stored_err(row: &BundleRow, detail: impl std::fmt::Display) -> ArkError {
    ArkError::NotStored {
        bundle: row.id,
        detail: detail.to_string(),
    }
}

impl Ark {
    /// Every piece each bundle of `rows` needs: its `bundle.json` (re-hashed), its members,
    /// and the bases of their deltas, down to whole pieces.
    pub fn bundle_pieces(
        &self,
        rows: &[BundleRow],
    ) -> Result<BTreeMap<Sha256Digest, BTreeSet<Sha256Digest>>, ArkError> {
        self.pieces_needed(&mut self.piece_reader(), rows)
    }

    /// [`Ark::bundle_pieces`], loading their locations into `reader`.
    fn pieces_needed(
        &self,
        reader: &mut PieceReader,
        rows: &[BundleRow],
    ) -> Result<BTreeMap<Sha256Digest, BTreeSet<Sha256Digest>>, ArkError> {
        let mut out = BTreeMap::new();
        for row in rows {
            let Some(m) = row.manifest_piece else {
                return Err(stored_err(
                    row,
                    "it is kept as a whole file from before the deduplicated store; `swe-ark gc` \
                     moves it into the store (or export with --self-contained)",
                ));
            };
            reader.load(self.index(), &[m])?;
            let bytes = reader.get_checked(&m)?;
            let manifest = parse_manifest(Path::new(&format!("bundle {}", row.id)), &bytes)?;
            let ids: Vec<Sha256Digest> = manifest.members.iter().map(|x| x.sha256).collect();
            reader.load(self.index(), &ids)?;
            let mut need: BTreeSet<Sha256Digest> = ids.into_iter().collect();
            need.insert(m);
            let mut stack: Vec<Sha256Digest> = need.iter().copied().collect();
            while let Some(id) = stack.pop() {
                let loc = reader
                    .loc(&id)
                    .ok_or_else(|| stored_err(row, format!("piece {id} is not in the store")))?;
                if let Some(b) = loc.base
                    && need.insert(b)
                {
                    stack.push(b);
                }
            }
            out.insert(row.id, need);
        }
        Ok(out)
    }

    /// The packs that carry what `rows` need and `held` (what the receiver holds) does not:
    /// packs the set needs whole as they are, others cut down into `scratch`.
    pub fn carry(
        &self,
        rows: &[BundleRow],
        held: &HashSet<Sha256Digest>,
        scratch: &Path,
        level: i32,
    ) -> Result<Carried, ArkError> {
        let mut reader = self.piece_reader();
        let needs = self.pieces_needed(&mut reader, rows)?;
        let carried: HashSet<Sha256Digest> = needs
            .values()
            .flatten()
            .filter(|id| !held.contains(id))
            .copied()
            .collect();
        let mut by_pack: BTreeSet<i64> = BTreeSet::new();
        for id in &carried {
            if let Some(loc) = reader.loc(id) {
                by_pack.insert(loc.pack);
            }
        }
        let nos: Vec<i64> = by_pack.into_iter().collect();
        let in_packs = self.index().pieces_of_packs(&nos)?;
        let sizes: HashMap<i64, (String, u64)> = self
            .index()
            .packs()?
            .into_iter()
            .map(|p| (p.no, (p.name, p.size)))
            .collect();
        let mut packs = Vec::new();
        for no in nos {
            let (name, size) = sizes.get(&no).cloned().unwrap_or_default();
            let mut frames: Frames = BTreeMap::new();
            for (id, loc) in in_packs.get(&no).into_iter().flatten() {
                frames
                    .entry(loc.offset)
                    .or_default()
                    .push((*id, loc.clone()));
            }
            for f in frames.values_mut() {
                // An empty piece sits where the next starts: it comes first.
                f.sort_by_key(|(id, l)| (l.skip, l.size, *id));
            }
            let whole = frames
                .values()
                .flatten()
                .all(|(id, _)| carried.contains(id))
                && tiles(&reader, &frames, size)?;
            if whole {
                packs.push((name.clone(), reader.local_pack(no)?, size, frames, true));
            } else {
                let (cut, cut_size, cut_frames) =
                    cut_down(&reader, &frames, &carried, scratch, level)?;
                packs.push((
                    cut.clone(),
                    pack_path(scratch, &cut),
                    cut_size,
                    cut_frames,
                    false,
                ));
            }
        }
        packs.sort_by(|a, b| a.0.cmp(&b.0));
        packs.dedup_by(|a, b| a.0 == b.0);
        // Number the pieces in the order they are carried, then describe each frame.
        let mut pieces = Vec::new();
        for (_, _, _, frames, _) in &packs {
            for f in frames.values() {
                pieces.extend(f.iter().map(|(id, _)| *id));
            }
        }
        let number: HashMap<Sha256Digest, usize> =
            pieces.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        let mut out = Vec::new();
        for (name, path, size, frames, whole) in packs {
            let frames = frames
                .values()
                .map(|f| describe(f, &number))
                .collect::<Vec<_>>();
            out.push(CarriedPack {
                name,
                path,
                size,
                frames,
                whole,
            });
        }
        Ok(Carried {
            packs: out,
            pieces,
            needs,
        })
    }
}

/// A pack cut down into `scratch` to the `carried` pieces of its `frames`: the new pack's
/// name, size, and frames.
fn cut_down(
    reader: &PieceReader,
    frames: &Frames,
    carried: &HashSet<Sha256Digest>,
    scratch: &Path,
    level: i32,
) -> Result<(String, u64, Frames), ArkError> {
    let keep = |id: &Sha256Digest| carried.contains(id);
    let (cut, cut_size, moved) = cut_pack(reader, frames, &keep, scratch, level)?;
    let mut cut_frames: Frames = BTreeMap::new();
    for (id, offset, length, skip) in moved {
        let loc = reader.loc(&id).cloned().ok_or(PieceError::Missing(id))?;
        cut_frames.entry(offset).or_default().push((
            id,
            PieceLoc {
                offset,
                length,
                skip,
                ..loc
            },
        ));
    }
    Ok((cut, cut_size, cut_frames))
}

/// Whether the frames cover the pack exactly: from its magic to its end, each block's pieces
/// one after the other and nothing else in it (a race of two packs can leave a frame, or
/// part of a block, that no piece of the index names).
fn tiles(reader: &PieceReader, frames: &Frames, size: u64) -> Result<bool, PieceError> {
    let mut at = PACK_MAGIC.len() as u64;
    for (offset, f) in frames {
        if *offset != at {
            return Ok(false);
        }
        let first = &f[0].1;
        at += first.length;
        if first.base.is_some() {
            if f.len() != 1 || first.skip != 0 {
                return Ok(false);
            }
            continue;
        }
        let mut skip = 0;
        for (_, l) in f {
            if l.skip != skip || l.base.is_some() {
                return Ok(false);
            }
            skip += l.size;
        }
        if reader.frame_content_size(first)? != Some(skip) {
            return Ok(false);
        }
    }
    Ok(at == size)
}

/// A frame as carried: what it holds, its delta's base by number when carried.
fn describe(f: &[(Sha256Digest, PieceLoc)], number: &HashMap<Sha256Digest, usize>) -> Frame {
    let first = &f[0].1;
    let holds = match first.base {
        Some(b) => FrameHolds::Delta {
            size: first.size,
            base: number
                .get(&b)
                .map_or(FrameBase::Held(b), |n| FrameBase::Carried(*n)),
        },
        None => FrameHolds::Whole(f.iter().map(|(_, l)| l.size).collect()),
    };
    Frame {
        length: first.length,
        holds,
    }
}
