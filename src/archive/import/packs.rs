//! Version 2: the packs' pieces decoded and named, and every bundle rebuilt from them and
//! checked against its id.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use crate::archive::slice::IndexSlice;
use crate::archive::{ArchiveError, INDEX, PIECES};
use crate::bundle::Manifest;
use crate::digest::Sha256Digest;
use crate::progress::{NoProgress, Progress};
use crate::store::{Ark, Contents, Incoming, IncomingPack, PieceError, RebuiltTar};

use super::{BundleCheck, refused};

/// What the checks of a version 2 file's packs found: each bundle, and the packs' pieces.
pub(super) type StoreChecked = (BTreeMap<Sha256Digest, BundleCheck>, Incoming);

/// Version 2: every piece of the packs decoded and named by its content; every bundle the
/// index slice lists rebuilt from them (and from this archive's pieces, for an incremental
/// file) and checked against its id; no piece that no bundle needs.
pub(super) fn check_store(
    file: &Path,
    table: &[u8],
    packs: Vec<(Sha256Digest, PathBuf, u64)>,
    slice: &IndexSlice,
    receiver: Option<&Ark>,
    progress: &dyn Progress,
) -> Result<StoreChecked, ArchiveError> {
    let refuse = |detail: String| refused(file, detail);
    let mut incoming = decode_packs(file, table, packs, receiver, progress)?;
    let mut manifests = bundle_manifests(file, slice, &mut incoming, receiver)?;
    let needs = needs_of(&manifests, &incoming);
    let needed: HashSet<&Sha256Digest> = needs.values().flatten().collect();
    if let Some(extra) = incoming.pieces().iter().find(|p| !needed.contains(p)) {
        return Err(refuse(format!(
            "its packs hold piece {extra}, which no bundle of the release needs"
        )));
    }
    let rebuilt = rebuild_all(&incoming, &manifests);
    let mut pack_pieces = Vec::new();
    for (k, p) in incoming.packs().iter().enumerate() {
        pack_pieces.push((p.size, incoming.pieces_of_pack(k).to_vec()));
    }
    let shares = crate::archive::pack_shares(&pack_pieces, &needs);
    let mut checks = BTreeMap::new();
    for (id, r) in rebuilt {
        let Rebuilt { tar_size, lock } = r.map_err(|e| refuse(e.to_string()))?;
        let Some(stored) = manifests.remove(&id) else {
            continue;
        };
        checks.insert(
            id,
            BundleCheck {
                manifest: stored.manifest,
                tar_size,
                file_size: shares.get(&id).copied().unwrap_or(0),
                lock,
            },
        );
    }
    Ok((checks, incoming))
}

/// The piece table read, and every piece of the packs decoded and named by its content.
fn decode_packs(
    file: &Path,
    table: &[u8],
    packs: Vec<(Sha256Digest, PathBuf, u64)>,
    receiver: Option<&Ark>,
    progress: &dyn Progress,
) -> Result<Incoming, ArchiveError> {
    let refuse = |detail: String| refused(file, detail);
    let frames = crate::archive::table::decode(table, packs.len())
        .map_err(|e| refuse(format!("{PIECES} is not valid: {e}")))?;
    let incoming_packs = packs
        .into_iter()
        .zip(frames)
        .map(|((name, path, size), frames)| IncomingPack {
            name: name.hex(),
            path,
            size,
            frames,
        })
        .collect();
    Incoming::check(receiver, incoming_packs, progress).map_err(|e| refuse(e.to_string()))
}

/// A bundle of the slice as the pieces hold it: its bundle.json piece, that piece's bytes and
/// the manifest they parse to.
struct StoredManifest {
    piece: Sha256Digest,
    bytes: Vec<u8>,
    manifest: Manifest,
}

/// Each bundle's bundle.json and members: in the packs, or (incremental) here.
fn bundle_manifests(
    file: &Path,
    slice: &IndexSlice,
    incoming: &mut Incoming,
    receiver: Option<&Ark>,
) -> Result<BTreeMap<Sha256Digest, StoredManifest>, ArchiveError> {
    let refuse = |detail: String| refused(file, detail);
    let mut manifests = BTreeMap::new();
    for b in &slice.bundles {
        let piece = b.manifest_piece.ok_or_else(|| {
            refuse(format!(
                "{INDEX} names no bundle.json piece for bundle {}",
                b.id
            ))
        })?;
        if let Some(ark) = receiver {
            incoming.load_held(ark, &[piece])?;
        }
        let (bytes, manifest) = incoming
            .manifest(&b.id, &piece)
            .map_err(|e| refuse(e.to_string()))?;
        if let Some(ark) = receiver {
            let ids: Vec<Sha256Digest> = manifest.members.iter().map(|m| m.sha256).collect();
            incoming.load_held(ark, &ids)?;
        }
        for m in &manifest.members {
            if Contents::size(incoming, &m.sha256).is_none() {
                return Err(refuse(format!(
                    "bundle {} needs piece {} (member `{}`), which neither the file nor this \
                     archive holds",
                    b.id,
                    m.sha256,
                    String::from_utf8_lossy(&m.path)
                )));
            }
        }
        let stored = StoredManifest {
            piece,
            bytes,
            manifest,
        };
        manifests.insert(b.id, stored);
    }
    Ok(manifests)
}

/// What each bundle needs of the packs, bases included; the packs carry nothing else.
fn needs_of(
    manifests: &BTreeMap<Sha256Digest, StoredManifest>,
    incoming: &Incoming,
) -> BTreeMap<Sha256Digest, BTreeSet<Sha256Digest>> {
    let mut needs = BTreeMap::new();
    for (id, stored) in manifests {
        let mut need: BTreeSet<Sha256Digest> =
            stored.manifest.members.iter().map(|m| m.sha256).collect();
        need.insert(stored.piece);
        let mut stack: Vec<Sha256Digest> = need.iter().copied().collect();
        while let Some(p) = stack.pop() {
            if let Some(b) = incoming.base_of(&p)
                && need.insert(b)
            {
                stack.push(b);
            }
        }
        needs.insert(*id, need);
    }
    needs
}

/// A bundle rebuilt from the pieces: its tar's size, and its lock if it has one.
struct Rebuilt {
    tar_size: u64,
    /// The bundle's lock and its kind.
    lock: Option<(&'static dyn crate::context::Kind, Vec<u8>)>,
}

/// Why a bundle could not be rebuilt from the pieces, or rebuilt to another id.
#[derive(Debug, thiserror::Error)]
enum RebuildError {
    #[error("bundle {id}: {source}")]
    Tar {
        id: Sha256Digest,
        #[source]
        source: io::Error,
    },
    #[error("bundle {id}: {source}")]
    Lock {
        id: Sha256Digest,
        #[source]
        source: PieceError,
    },
}

/// Every bundle rebuilt and hashed, on every core.
fn rebuild_all(
    incoming: &Incoming,
    manifests: &BTreeMap<Sha256Digest, StoredManifest>,
) -> Vec<(Sha256Digest, Result<Rebuilt, RebuildError>)> {
    use rayon::prelude::*;
    manifests
        .par_iter()
        .map(|(id, stored)| (*id, rebuild(incoming, *id, stored)))
        .collect()
}

/// One bundle's tar rebuilt from the pieces and hashed against its id; its lock read.
fn rebuild(
    incoming: &Incoming,
    id: Sha256Digest,
    stored: &StoredManifest,
) -> Result<Rebuilt, RebuildError> {
    let StoredManifest {
        bytes, manifest, ..
    } = stored;
    let tar = RebuiltTar::new(incoming, bytes, manifest, Some(id), &NoProgress);
    let tar_size = tar
        .hash_to_end()
        .map_err(|source| RebuildError::Tar { id, source })?;
    let kind = crate::context::kind_of_bundle(|m| manifest.member(m).is_some());
    let lock = match kind.and_then(|k| manifest.member(k.lock_member()).map(|m| (k, m))) {
        Some((k, m)) => Some((
            k,
            Contents::get(incoming, &m.sha256)
                .map_err(|source| RebuildError::Lock { id, source })?,
        )),
        None => None,
    };
    Ok(Rebuilt { tar_size, lock })
}
