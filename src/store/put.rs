//! Storing a bundle: its member contents that the store does not hold yet become pieces in
//! one new pack, each compressed whole or as a delta against the same path's content in the
//! most similar bundles already stored (docs/STORAGE.md says why this way).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::Path;

use rayon::prelude::*;

use crate::bundle::{BundleError, MANIFEST, PackPlan};
use crate::digest::Sha256Digest;
use crate::progress::Progress;

use super::ark::ArkError;
use super::index::{BundleSketch, Index, NewPiece, StoredParts};
use super::pieces::{
    self, BLOCK, CHAIN_BYTES, PackWriter, PieceReader, STREAM_MIN, WRITE_DEPTH, best_delta,
    compress_block, similarity, sketch,
};
use super::stored::parse_manifest;

/// How many similar bundles lend their pieces as delta bases.
const PARENTS: usize = 4;
/// How many bases a new piece is tried against.
const CANDIDATES: usize = 2;

/// A bundle's members as storing needs them: `bundle.json`, then every member in tar order.
pub trait Members: Sync {
    fn manifest_bytes(&self) -> &[u8];
    fn count(&self) -> usize;
    fn path(&self, i: usize) -> &[u8];
    fn sha256(&self, i: usize) -> Sha256Digest;
    fn size(&self, i: usize) -> u64;
    /// The content, checked against `sha256` when it is read from somewhere that could have
    /// changed.
    fn content(&self, i: usize) -> Result<Cow<'_, [u8]>, BundleError>;
}

impl Members for PackPlan<'_> {
    fn manifest_bytes(&self) -> &[u8] {
        PackPlan::manifest_bytes(self)
    }
    fn count(&self) -> usize {
        self.member_count()
    }
    fn path(&self, i: usize) -> &[u8] {
        self.member(i).path
    }
    fn sha256(&self, i: usize) -> Sha256Digest {
        self.member(i).sha256
    }
    fn size(&self, i: usize) -> u64 {
        self.member(i).size
    }
    fn content(&self, i: usize) -> Result<Cow<'_, [u8]>, BundleError> {
        PackPlan::content(self, i)
    }
}

/// Members read out of a bundle file, each with the sha256 of what was read.
pub struct Collected {
    pub manifest_bytes: Vec<u8>,
    pub members: Vec<(Vec<u8>, Sha256Digest, Vec<u8>)>,
}

impl Members for Collected {
    fn manifest_bytes(&self) -> &[u8] {
        &self.manifest_bytes
    }
    fn count(&self) -> usize {
        self.members.len()
    }
    fn path(&self, i: usize) -> &[u8] {
        &self.members[i].0
    }
    fn sha256(&self, i: usize) -> Sha256Digest {
        self.members[i].1
    }
    fn size(&self, i: usize) -> u64 {
        self.members[i].2.len() as u64
    }
    fn content(&self, i: usize) -> Result<Cow<'_, [u8]>, BundleError> {
        Ok(Cow::Borrowed(&self.members[i].2))
    }
}

/// A delta and the base it needs.
type Frame = (Vec<u8>, Sha256Digest);

/// Which member a new piece comes from.
#[derive(Clone, Copy)]
enum Source {
    Manifest,
    Member(usize),
}

struct NewOne {
    id: Sha256Digest,
    from: Source,
    size: u64,
}

fn path_of(m: &dyn Members, from: Source) -> &[u8] {
    match from {
        Source::Manifest => MANIFEST.as_bytes(),
        Source::Member(i) => m.path(i),
    }
}

fn content_of(m: &dyn Members, from: Source) -> Result<Cow<'_, [u8]>, BundleError> {
    match from {
        Source::Manifest => Ok(Cow::Borrowed(m.manifest_bytes())),
        Source::Member(i) => m.content(i),
    }
}

/// The base to try for a new piece of `size` bytes whose most similar stored piece is
/// `similar`: `similar` itself when the chain would stay within both bounds (`WRITE_DEPTH`
/// deltas, `CHAIN_BYTES` decoded); else the nearest piece below it in its chain that leaves
/// half of each bound free, so that chains grow back from the middle rather than starting
/// over from a whole piece (as Subversion's skip-deltas do, a delta against an older
/// version is a little larger but keeps every read short). `None` when nothing fits.
fn bounded_base(reader: &PieceReader, similar: &Sha256Digest, size: u64) -> Option<Sha256Digest> {
    let chain = reader.chain_costs(similar)?;
    let depth_of = |k: usize| (chain.len() - 1 - k) as u32;
    let fits = |k: usize, depth: u32, bytes: u64| {
        depth_of(k) < depth && chain[k].1.saturating_add(size) <= bytes
    };
    // A piece larger than the bound may still be a delta against a whole piece.
    let floor = size.saturating_mul(2);
    let k = if fits(0, WRITE_DEPTH, CHAIN_BYTES.max(floor)) {
        0
    } else {
        (1..chain.len()).find(|k| fits(*k, WRITE_DEPTH / 2, (CHAIN_BYTES / 2).max(floor)))?
    };
    let base = chain[k].0;
    pieces::usable_base_size(reader.loc(&base)?.size).then_some(base)
}

/// Runs `f` on a pool of `threads` workers (0: rayon's global pool, one per core).
pub fn with_threads<R: Send>(threads: u32, f: impl FnOnce() -> R + Send) -> R {
    if threads == 0 {
        return f();
    }
    match rayon::ThreadPoolBuilder::new()
        .num_threads(threads as usize)
        .build()
    {
        Ok(pool) => pool.install(f),
        Err(_) => f(),
    }
}

/// Each new piece (by its index in the new pieces) with the bases to try for it.
type Plan = Vec<(usize, Vec<Sha256Digest>)>;

/// A block: the new pieces in it (by index), and its frame.
type Block = (Vec<usize>, Vec<u8>);

/// How one put stores: the members, where packs go, the zstd level and threads, progress.
struct Put<'a> {
    members: &'a dyn Members,
    packs_dir: &'a Path,
    level: i32,
    threads: u32,
    progress: &'a dyn Progress,
}

impl Put<'_> {
    fn io_err(&self) -> impl Fn(std::io::Error) -> ArkError + '_ {
        |source| ArkError::Io {
            path: self.packs_dir.to_path_buf(),
            source,
        }
    }
}

/// The new pieces, each once, in tar order: bundle.json's, then the members'; those the
/// index has already left out.
fn new_pieces(
    index: &Index,
    members: &dyn Members,
    manifest_piece: Sha256Digest,
) -> Result<Vec<NewOne>, ArkError> {
    let mut all: Vec<(Sha256Digest, Source, u64)> = vec![(
        manifest_piece,
        Source::Manifest,
        members.manifest_bytes().len() as u64,
    )];
    all.extend(
        (0..members.count()).map(|i| (members.sha256(i), Source::Member(i), members.size(i))),
    );
    let ids: Vec<Sha256Digest> = all.iter().map(|a| a.0).collect();
    let existing = index.existing_pieces(&ids)?;
    let mut seen = HashSet::new();
    Ok(all
        .into_iter()
        .filter(|(id, _, _)| !existing.contains(id) && seen.insert(*id))
        .map(|(id, from, size)| NewOne { id, from, size })
        .collect())
}

/// The bundle.json pieces of the most similar stored bundles of the same repository (and of
/// `pending`), most similar first.
fn parent_manifests(
    index: &Index,
    repo: &str,
    pending: &[BundleSketch],
    member_sketch: &[u8],
) -> Result<Vec<Sha256Digest>, ArkError> {
    let mut ranked: Vec<(usize, Sha256Digest, Sha256Digest)> = index
        .sketches(repo)?
        .into_iter()
        .chain(pending.iter().cloned())
        .map(|s| {
            (
                similarity(member_sketch, &s.sketch),
                s.bundle,
                s.manifest_piece,
            )
        })
        .filter(|(sim, _, _)| *sim > 0)
        .collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    ranked.truncate(PARENTS);
    Ok(ranked.iter().map(|r| r.2).collect())
}

/// What the parents hold at the paths of the new pieces (their bundle.json at bundle.json's):
/// the bases to try, by path.
fn pieces_at_paths(
    reader: &PieceReader,
    parent_manifests: &[Sha256Digest],
    members: &dyn Members,
    new: &[NewOne],
) -> HashMap<Vec<u8>, Vec<Sha256Digest>> {
    let wanted: HashSet<&[u8]> = new
        .iter()
        .filter_map(|n| match n.from {
            Source::Member(i) => Some(members.path(i)),
            Source::Manifest => None,
        })
        .collect();
    let mut at_path: HashMap<Vec<u8>, Vec<Sha256Digest>> = HashMap::new();
    for m in parent_manifests {
        let parsed = reader
            .get_checked(m)
            .map_err(|e| e.to_string())
            .and_then(|b| parse_manifest(Path::new("bundle.json"), &b).map_err(|e| e.to_string()));
        let manifest = match parsed {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!("a stored bundle.json is not usable as a delta base: {e}");
                continue;
            }
        };
        at_path
            .entry(MANIFEST.as_bytes().to_vec())
            .or_default()
            .push(*m);
        for mm in manifest.members {
            if wanted.contains(&mm.path[..]) {
                let v = at_path.entry(mm.path).or_default();
                if !v.contains(&mm.sha256) {
                    v.push(mm.sha256);
                }
            }
        }
    }
    at_path
}

/// The bases to try for each new piece: at most [`CANDIDATES`] of what the parents hold at
/// its path, none for a piece too large (or empty) for a delta.
fn plan_deltas(
    reader: &PieceReader,
    at_path: &HashMap<Vec<u8>, Vec<Sha256Digest>>,
    members: &dyn Members,
    new: &[NewOne],
) -> Plan {
    let bases_of = |n: &NewOne| -> Vec<Sha256Digest> {
        let mut bases: Vec<Sha256Digest> = Vec::new();
        for c in at_path.get(path_of(members, n.from)).into_iter().flatten() {
            if *c == n.id {
                continue;
            }
            if let Some(b) = bounded_base(reader, c, n.size)
                && !bases.contains(&b)
            {
                bases.push(b);
            }
            if bases.len() == CANDIDATES {
                break;
            }
        }
        bases
    };
    new.iter()
        .enumerate()
        .map(|(i, n)| {
            let bases = if n.size <= pieces::DELTA_MAX && n.size > 0 {
                bases_of(n)
            } else {
                Vec::new()
            };
            (i, bases)
        })
        .collect()
}

/// Blocks: runs of whole pieces (below the streaming size, no delta) of about BLOCK bytes.
fn block_runs(new: &[NewOne], deltas: &[Option<Frame>]) -> Vec<Vec<usize>> {
    let mut runs: Vec<Vec<usize>> = Vec::new();
    let mut filled = 0;
    for (i, n) in new.iter().enumerate() {
        if deltas[i].is_some() || n.size >= STREAM_MIN {
            continue;
        }
        // bundle.json gets a frame of its own: damage to a block of files then leaves
        // the bundle readable enough to name them.
        if matches!(n.from, Source::Manifest) {
            runs.push(vec![i]);
            filled = BLOCK;
            continue;
        }
        if runs.is_empty() || filled >= BLOCK {
            runs.push(Vec::new());
            filled = 0;
        }
        runs.last_mut().expect("just pushed").push(i);
        filled += n.size;
    }
    runs
}

/// Deltas where one beats compressing the piece alone; every other piece goes whole into
/// a block with its neighbours (in tar order), each block one zstd frame.
fn build_frames(
    put: &Put,
    reader: &PieceReader,
    new: &[NewOne],
    plan: &Plan,
) -> Result<(Vec<Option<Frame>>, Vec<Block>), ArkError> {
    let Put {
        members,
        level,
        progress,
        ..
    } = *put;
    let io_err = put.io_err();
    let mut needed: Vec<Sha256Digest> = plan.iter().flat_map(|(_, b)| b.iter().copied()).collect();
    needed.sort();
    needed.dedup();
    with_threads(put.threads, || -> Result<_, ArkError> {
        // Bases are re-hashed before anything is built on them.
        let base_content: HashMap<Sha256Digest, Vec<u8>> = needed
            .par_iter()
            .filter_map(|id| match reader.get_checked(id) {
                Ok(c) => Some((*id, c)),
                Err(e) => {
                    tracing::warn!("piece {id} is not usable as a delta base: {e}");
                    None
                }
            })
            .collect();
        let deltas: Vec<Option<Frame>> = plan
            .par_iter()
            .map(|(i, bases)| -> Result<Option<Frame>, ArkError> {
                let n = &new[*i];
                if bases.is_empty() {
                    return Ok(None);
                }
                let content = content_of(members, n.from)?;
                let bases: Vec<(Sha256Digest, &[u8])> = bases
                    .iter()
                    .filter_map(|b| base_content.get(b).map(|c| (*b, &c[..])))
                    .collect();
                let delta = best_delta(&content, &bases, level).map_err(&io_err)?;
                if delta.is_some() {
                    progress.advance(n.size);
                }
                Ok(delta)
            })
            .collect::<Result<_, _>>()?;
        let blocks: Vec<Block> = block_runs(new, &deltas)
            .into_par_iter()
            .map(|run| -> Result<Block, ArkError> {
                let mut content = Vec::new();
                for i in &run {
                    content.extend_from_slice(&content_of(members, new[*i].from)?);
                }
                let frame = compress_block(&content, level).map_err(&io_err)?;
                progress.advance(content.len() as u64);
                Ok((run, frame))
            })
            .collect::<Result<_, _>>()?;
        Ok((deltas, blocks))
    })
}

/// The pack, in tar order: a delta where its piece comes, a block where its first does, a
/// large piece streamed; each piece's place added to `parts`.
fn write_pack(
    put: &Put,
    reader: &PieceReader,
    new: &[NewOne],
    (deltas, blocks): (Vec<Option<Frame>>, Vec<Block>),
    parts: &mut StoredParts,
) -> Result<(), ArkError> {
    let Put {
        members,
        packs_dir,
        level,
        threads,
        progress,
    } = *put;
    let io_err = put.io_err();
    let mut block_of: HashMap<usize, usize> = HashMap::new();
    for (b, (run, _)) in blocks.iter().enumerate() {
        block_of.insert(run[0], b);
    }
    let mut pack = PackWriter::create(packs_dir).map_err(&io_err)?;
    let half = new.len() / 2;
    for (k, n) in new.iter().enumerate() {
        if k == half {
            crate::failpoint::hit("pack.mid-store");
        }
        if let Some((frame, base)) = &deltas[k] {
            let offset = pack.append(frame).map_err(&io_err)?;
            let depth = reader.loc(base).map_or(0, |l| l.depth + 1);
            parts.pieces.push(NewPiece {
                id: n.id,
                offset,
                length: frame.len() as u64,
                skip: 0,
                size: n.size,
                base: Some(*base),
                depth,
            });
        } else if let Some(b) = block_of.get(&k) {
            let (run, frame) = &blocks[*b];
            let offset = pack.append(frame).map_err(&io_err)?;
            let mut skip = 0;
            for i in run {
                parts.pieces.push(NewPiece {
                    id: new[*i].id,
                    offset,
                    length: frame.len() as u64,
                    skip,
                    size: new[*i].size,
                    base: None,
                    depth: 0,
                });
                skip += new[*i].size;
            }
        } else if n.size >= STREAM_MIN {
            let content = content_of(members, n.from)?;
            let (offset, length) = pack
                .append_stream(&mut &content[..], n.size, level, threads)
                .map_err(&io_err)?;
            progress.advance(n.size);
            parts.pieces.push(NewPiece {
                id: n.id,
                offset,
                length,
                skip: 0,
                size: n.size,
                base: None,
                depth: 0,
            });
        }
    }
    progress.finish();
    parts.pack = Some(pack.finish().map_err(&io_err)?);
    Ok(())
}

/// Stores what the store lacks of `members` in a new pack beside `reader`'s; returns what
/// the index must record. The caller holds the store lock, so no piece it picks as a base can
/// go before the index names the new ones. `pending`: bundles whose pieces are recorded but
/// that the index does not list yet (an import's), also tried as parents.
#[allow(clippy::too_many_arguments)]
pub fn put_members(
    index: &Index,
    mut reader: PieceReader,
    repo: &str,
    pending: &[BundleSketch],
    members: &dyn Members,
    level: i32,
    threads: u32,
    progress: &dyn Progress,
) -> Result<StoredParts, ArkError> {
    let manifest_piece = Sha256Digest::of(members.manifest_bytes());
    let member_sketch = sketch(
        (0..members.count())
            .map(|i| members.sha256(i))
            .collect::<Vec<_>>()
            .iter(),
    );
    let new = new_pieces(index, members, manifest_piece)?;
    let mut parts = StoredParts {
        pack: None,
        pieces: Vec::new(),
        manifest_piece,
        sketch: member_sketch.clone(),
        repo: repo.to_string(),
    };
    if new.is_empty() {
        return Ok(parts);
    }

    // The most similar stored bundles of the same repository, and what they hold at the
    // paths of the new pieces: the bases to try.
    let packs_dir = reader.packs_dir().to_path_buf();
    let packs_dir = packs_dir.as_path();
    let parents = parent_manifests(index, repo, pending, &member_sketch)?;
    reader.load(index, &parents)?;
    let at_path = pieces_at_paths(&reader, &parents, members, &new);
    let candidate_ids: Vec<Sha256Digest> = {
        let mut v: Vec<Sha256Digest> = at_path.values().flatten().copied().collect();
        v.sort();
        v.dedup();
        v
    };
    reader.load(index, &candidate_ids)?;
    let plan = plan_deltas(&reader, &at_path, members, &new);

    let total: u64 = new.iter().map(|n| n.size).sum();
    progress.start("storing", Some(total));
    let put = Put {
        members,
        packs_dir,
        level,
        threads,
        progress,
    };
    let frames = build_frames(&put, &reader, &new, &plan)?;
    write_pack(&put, &reader, &new, frames, &mut parts)?;
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::store::index::PieceLoc;

    /// A chain of `len` versions of one path, each `size` bytes: version 0 whole, version
    /// `i` a delta against version `i - 1`.
    fn chain(len: usize, size: u64) -> (PieceReader, Vec<Sha256Digest>) {
        let ids: Vec<Sha256Digest> = (0..len as u32)
            .map(|i| Sha256Digest::of(&i.to_le_bytes()))
            .collect();
        let locs: HashMap<Sha256Digest, PieceLoc> = (ids.iter().enumerate())
            .map(|(i, id)| {
                let loc = PieceLoc {
                    pack: 1,
                    offset: 16 + i as u64 * 100,
                    length: 100,
                    skip: 0,
                    size,
                    base: i.checked_sub(1).map(|b| ids[b]),
                    depth: i as u32,
                };
                (*id, loc)
            })
            .collect();
        (PieceReader::with_locs(locs), ids)
    }

    #[test]
    fn a_short_chain_grows_on_the_most_similar_piece() {
        let (reader, ids) = chain(5, 10_000);
        assert_eq!(bounded_base(&reader, &ids[4], 10_000), Some(ids[4]));
    }

    #[test]
    fn a_chain_at_the_depth_bound_grows_again_from_its_middle() {
        let (reader, ids) = chain(WRITE_DEPTH as usize + 1, 10_000);
        let newest = ids[ids.len() - 1];
        // The newest is at depth WRITE_DEPTH: a delta on it would be one too deep.
        let base = bounded_base(&reader, &newest, 10_000).unwrap();
        let depth = reader.loc(&base).unwrap().depth;
        assert_eq!(
            depth,
            WRITE_DEPTH / 2 - 1,
            "the nearest base leaving half the depth free"
        );
        // Below the bound, the newest itself.
        let (reader, ids) = chain(WRITE_DEPTH as usize, 10_000);
        let newest = ids[ids.len() - 1];
        assert_eq!(bounded_base(&reader, &newest, 10_000), Some(newest));
    }

    #[test]
    fn a_chain_of_large_pieces_is_held_to_the_bytes_a_reader_decodes() {
        // 1 MiB versions (a bundle.json of a large tree): 8 of them reach CHAIN_BYTES.
        let size = 1 << 20;
        let (reader, ids) = chain(12, size);
        let base = bounded_base(&reader, &ids[11], size).unwrap();
        let depth = reader.loc(&base).unwrap().depth as u64;
        // Reading the new piece decodes its base's chain and itself.
        assert!(
            (depth + 2) * size <= CHAIN_BYTES / 2 + size,
            "depth {depth}"
        );
        assert!(
            (depth + 2) * size > CHAIN_BYTES / 2 - size,
            "depth {depth}: too far back"
        );
        // A piece larger than the bound may still be a delta against a whole one.
        let big = CHAIN_BYTES + 1;
        let (reader, ids) = chain(3, big);
        assert_eq!(bounded_base(&reader, &ids[2], big), Some(ids[0]));
        // A piece too large to be a delta base is never one.
        let (reader, ids) = chain(1, pieces::DELTA_MAX + 1);
        assert_eq!(bounded_base(&reader, &ids[0], 100), None);
    }
}
