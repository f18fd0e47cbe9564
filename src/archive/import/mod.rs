//! `import-archive`: every member of an exported file staged under `<ark>/tmp/` and checked
//! (its sha256 and size against the manifest, each object against its id, each bundle
//! against its id by hashing its whole uncompressed tar, the snapshot against its root, the
//! index slice against the bundles, each lock's needs against the objects, each git bundle
//! by git's pack reader); only then moved into place (objects and bundles are
//! content-addressed: one already present is kept), and the index rows written in one
//! transaction. A refused file leaves the target as it was; a killed import leaves at most
//! files that no index row names.

mod checks;
mod index_slice;
mod install;
mod manifest;
mod mirrors;
mod packs;
mod staging;

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::bundle::Manifest;
use crate::digest::Sha256Digest;
use crate::fsutil;
use crate::mirror::RepoName;
use crate::progress::Progress;
use crate::release::Snapshot;
use crate::store::{Ark, Incoming};

use super::slice::IndexSlice;
use super::{ArchiveError, ArchiveManifest, INDEX, MAX_METADATA, VERSION, io_err};
use checks::{
    check_base, check_carried, check_locks, check_shard_wanted, read_snapshot, release_bundles,
};
use index_slice::check_slice;
use install::install;
use manifest::read_manifest;
use mirrors::stage_mirrors;
use staging::{StagedFiles, Stager, stage_and_check, stage_and_check_store};

#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Refuse the file unless its release has this root hash (the one published).
    pub expect_root: Option<Sha256Digest>,
    /// Take a shard file of this plan (by the plan file's sha256), and nothing else; `None`
    /// refuses shard files (`swe-ark merge` takes them).
    pub shard_of: Option<Sha256Digest>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ImportReport {
    pub release: String,
    pub root: Sha256Digest,
    /// The file's format version: 2, the store form; 1, self-contained.
    pub version: u32,
    /// An incremental file's base release.
    pub base: Option<String>,
    pub instances: usize,
    /// Version 2: the file's packs moved in as they are, cut down to what the archive lacked,
    /// and left out (the archive held all of their pieces).
    pub packs_moved: usize,
    pub packs_cut: usize,
    pub packs_present: usize,
    pub bundles_added: usize,
    pub bundles_present: usize,
    pub objects_added: usize,
    pub objects_present: usize,
    pub mirrors: Vec<String>,
    /// The installed states the file carries that the archive lacked, and those it had (its
    /// own kept).
    pub installed_states_added: usize,
    pub installed_states_present: usize,
    /// The file's size.
    pub bytes: u64,
}

/// What reading a bundle member found.
struct BundleCheck {
    manifest: Manifest,
    tar_size: u64,
    file_size: u64,
    /// Its lock (its kind's lock member, `env/pylock.toml` for Python), if it has one.
    lock: Option<(&'static dyn crate::context::Kind, Vec<u8>)>,
}

/// Everything in the file, staged and checked.
struct Staged {
    snapshot: Snapshot,
    slice: IndexSlice,
    /// The bundles the file carries, checked.
    bundles: BTreeMap<Sha256Digest, BundleCheck>,
    /// Version 1: each bundle's staged file.
    bundle_files: BTreeMap<Sha256Digest, PathBuf>,
    /// Version 2: the packs, every piece decoded and named.
    incoming: Option<Incoming>,
    /// The file's format version, and an incremental file's base release.
    version: u32,
    base: Option<String>,
    /// A shard file: its release is not registered (merge registers the plan's).
    shard: bool,
    objects: BTreeMap<Sha256Digest, (PathBuf, u64)>,
    /// The git bundle file and the mirror made from it in staging.
    mirrors: BTreeMap<RepoName, (PathBuf, PathBuf)>,
    bytes: u64,
}

/// Imports the archive file `file` into the archive at `root` (created if needed).
pub fn import(
    root: &Path,
    file: &Path,
    opts: &ImportOptions,
    progress: &dyn Progress,
) -> Result<ImportReport, ArchiveError> {
    let tmp = crate::store::Layout::new(root).tmp();
    // An archive that exists is held (shared) from the first check to the transaction: gc
    // waits, so the pieces an incremental file builds on stay where the checks found them.
    let _held = if crate::store::Layout::new(root).index().is_file() {
        crate::store::StoreLock::shared(root).map_err(io_err(root))?
    } else {
        None
    };
    // The directories this import creates, deepest first, so a refusal leaves none behind.
    let created: Vec<PathBuf> = tmp
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
        .map(Path::to_path_buf)
        .collect();
    fs::create_dir_all(&tmp).map_err(io_err(&tmp))?;
    let staging = crate::fsutil::work_dir(&tmp, &format!("{}import-", fsutil::TEMP_PREFIX))
        .map_err(io_err(&tmp))?;
    let staged = stage(root, file, staging.path(), opts, progress);
    let result = match staged {
        Ok(staged) => install(root, staged, progress),
        Err(e) => {
            drop(staging);
            for dir in &created {
                let _ = fs::remove_dir(dir);
            }
            return Err(e);
        }
    };
    drop(staging);
    result
}

/// The manifest of an archive file (its first member), read alone: what `merge` checks before
/// importing anything.
pub fn read_file_manifest(file: &Path) -> Result<ArchiveManifest, ArchiveError> {
    let f = File::open(file).map_err(io_err(file))?;
    let mut archive = tar::Archive::new(BufReader::new(f));
    let mut entries = archive
        .entries()
        .map_err(|e| refused(file, format!("it is not a tar archive: {e}")))?;
    Ok(read_manifest(file, &mut entries)?.0)
}

/// The first line of an error from the tar reader, at most 100 characters: it may quote
/// whatever bytes it found.
fn first_line(e: &io::Error) -> String {
    let text = e.to_string();
    let line = text.lines().next().unwrap_or_default();
    line.chars().take(100).collect()
}

/// Reads a member into memory.
fn read_small(entry: &mut impl Read, size: u64) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(size.min(MAX_METADATA) as usize);
    entry.take(MAX_METADATA).read_to_end(&mut out)?;
    Ok(out)
}

/// The refusal of `file`, saying why.
fn refused(file: &Path, detail: String) -> ArchiveError {
    ArchiveError::Refused {
        file: file.to_path_buf(),
        detail,
    }
}

/// Every member staged and checked against the manifest, the release and each other; the
/// staging directory synced. Nothing of the file is trusted before this returns.
fn stage(
    root: &Path,
    file: &Path,
    staging: &Path,
    opts: &ImportOptions,
    progress: &dyn Progress,
) -> Result<Staged, ArchiveError> {
    let refuse = |detail: String| refused(file, detail);
    let f = File::open(file).map_err(io_err(file))?;
    let bytes = f.metadata().map_err(io_err(file))?.len();
    let mut archive = tar::Archive::new(BufReader::with_capacity(1 << 20, f));
    let mut entries = archive
        .entries()
        .map_err(|e| refuse(format!("it is not a tar archive: {e}")))?;

    // The manifest, first; an incremental file's base must be here before anything else.
    let (manifest, parts) = read_manifest(file, &mut entries)?;
    check_shard_wanted(file, manifest.shard.as_ref(), opts.shard_of)?;
    if let Some(base) = &manifest.base {
        check_base(file, open_receiver(root).as_ref(), base)?;
    }
    for dir in ["bundles", "packs", "objects", "mirrors", "repos"] {
        let d = staging.join(dir);
        fs::create_dir_all(&d).map_err(io_err(&d))?;
    }
    let total: u64 = manifest.members.iter().map(|m| m.size).sum();
    progress.start("importing", Some(total));

    // Each member in turn, streamed to staging and hashed; bundles are hashed whole by
    // workers while the next members arrive.
    let st = Stager {
        file,
        staging,
        progress,
    };
    let (staged, bundle_checks, store_checked) = if manifest.version == VERSION {
        let (staged, checked) = stage_and_check_store(&st, &mut entries, &manifest, &parts, root)?;
        (staged, BTreeMap::new(), Some(checked))
    } else {
        let (staged, checks) = stage_and_check(&st, &mut entries, &manifest, &parts)?;
        (staged, checks, None)
    };

    // The snapshot, and what it says must be here.
    let snapshot = read_snapshot(file, &staged.release, &manifest, opts)?;
    let slice: IndexSlice = serde_json::from_slice(&staged.index)
        .map_err(|e| refuse(format!("{INDEX} is not valid: {e}")))?;
    let receiver = open_receiver(root);
    let StagedFiles {
        bundles: bundle_files,
        objects,
        mirrors: mirror_files,
        ..
    } = staged;
    let (bundles, bundle_files, incoming) = if let Some((bundles, incoming)) = store_checked {
        check_carried(file, &snapshot, &bundles, receiver.as_ref(), &manifest)?;
        (bundles, BTreeMap::new(), Some(incoming))
    } else {
        let (files, checks) = release_bundles(file, &snapshot, bundle_files, bundle_checks)?;
        (checks, files, None)
    };
    let held = |o: &Sha256Digest| receiver.as_ref().is_some_and(|r| r.objects().has(o));
    let others = manifest
        .shard
        .as_ref()
        .map(|s| s.others())
        .unwrap_or_default();
    check_slice(&snapshot, &slice, &bundles, &objects, &held, &others)
        .map_err(|e| refuse(e.to_string()))?;
    if let Some(stamp) = &manifest.shard {
        super::shard::check(stamp, &snapshot, &slice).map_err(|e| refuse(e.to_string()))?;
    }
    check_locks(file, &snapshot, &bundles, &objects, &held)?;
    let mirrors = stage_mirrors(&st, &slice, mirror_files)?;
    // Everything staged is on disk before any of it moves into place.
    fsutil::sync_filesystem(staging).map_err(io_err(staging))?;
    Ok(Staged {
        snapshot,
        slice,
        bundles,
        bundle_files,
        incoming,
        version: manifest.version,
        base: manifest.base.as_ref().map(|b| b.release.clone()),
        shard: manifest.shard.is_some(),
        objects,
        mirrors,
        bytes,
    })
}

/// The archive the file is imported into, when it exists already.
fn open_receiver(root: &Path) -> Option<Ark> {
    if crate::store::Layout::new(root).index().is_file() {
        Ark::open(root).ok()
    } else {
        None
    }
}
