//! `import-archive`: every member of an exported file staged under `<ark>/tmp/` and checked
//! (its sha256 and size against the manifest, each object against its id, each bundle
//! against its id by hashing its whole uncompressed tar, the snapshot against its root, the
//! index slice against the bundles, each lock's needs against the objects, each git bundle
//! by git's pack reader); only then moved into place (objects and bundles are
//! content-addressed: one already present is kept), and the index rows written in one
//! transaction. A refused file leaves the target as it was; a killed import leaves at most
//! files that no index row names.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs::{self, File};
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};

use crate::bundle::{self, BundleError, BundleFile, Limits, Manifest, PackOptions, Problem};
use crate::dataset::{Instance, InstanceError};
use crate::digest::{Sha256Digest, Sha256Hasher};
use crate::env::pylock::PyLock;
use crate::failpoint;
use crate::fsutil;
use crate::mirror::{self, Mirror, MirrorError, RepoName};
use crate::progress::{NoProgress, Progress};
use crate::release::Snapshot;
use crate::store::{
    Ark, Contents, ImportRows, ImportedMirror, Incoming, IncomingPack, LockRow, PinRow, RebuiltTar,
    ValidationRow,
};

use super::slice::IndexSlice;
use super::{
    ArchiveError, ArchiveManifest, BaseRelease, FORMAT, INDEX, MANIFEST, MAX_METADATA, PIECES,
    Part, RELEASE, SELF_CONTAINED_VERSION, VERSION, io_err,
};

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
    /// The file's size.
    pub bytes: u64,
}

/// Why a staged bundle does not match its id.
#[derive(Debug, thiserror::Error)]
enum BundleMismatch {
    /// It could not be read as its id says; the full check's problems follow when it names
    /// any.
    #[error("bundle {id}: {source}{}", problems.iter().map(|p| format!("; {p}")).collect::<String>())]
    Unreadable {
        id: Sha256Digest,
        source: Box<BundleError>,
        problems: Vec<Problem>,
    },
    #[error("{0}")]
    Size(#[source] io::Error),
}

/// How the index slice fails to describe the release's bundles, instances and objects.
#[derive(Debug, thiserror::Error)]
enum SliceMismatch {
    #[error("{INDEX} lists an object twice")]
    ObjectTwice,
    #[error("{INDEX} says object {id} is {listed} bytes; it is {size}")]
    ObjectSize {
        id: Sha256Digest,
        listed: u64,
        size: u64,
    },
    #[error("{INDEX} does not list object {0}")]
    ObjectUnlisted(Sha256Digest),
    #[error("{INDEX} lists object {0}, which the file does not hold")]
    ObjectMissing(Sha256Digest),
    #[error("object {0}, which the release lists, is neither in the file nor in this archive")]
    ReleaseObjectMissing(Sha256Digest),
    #[error("{INDEX} lists {listed} bundle(s), the release has {release}")]
    BundleCount { listed: usize, release: usize },
    #[error("{INDEX} lists bundle {0}, which is not in the release")]
    BundleNotInRelease(Sha256Digest),
    #[error("{INDEX}'s row of bundle {0} does not match the bundle")]
    BundleRow(Sha256Digest),
    #[error("{INDEX} holds an instance that is not valid: {0}")]
    BadInstance(#[source] InstanceError),
    #[error("{INDEX} holds instance {0}, which is not in the release")]
    InstanceNotInRelease(String),
    #[error("{INDEX} holds instance {0} twice")]
    InstanceTwice(String),
    #[error("{INDEX}'s instance {0} is not the one its bundle holds")]
    InstanceDiffers(String),
    #[error("{INDEX} holds {held} of the {release} instances whose bundles the file carries")]
    InstanceCount { held: usize, release: usize },
    #[error("{INDEX} lists lock {0}, whose file is not in the archive file")]
    LockMissing(Sha256Digest),
    #[error("{INDEX} holds a validation of {0}, which is not in the release")]
    ValidationNotInRelease(String),
    #[error("the validation of {instance} names object {object}, which the file does not hold")]
    ValidationObjectMissing {
        instance: String,
        object: Sha256Digest,
    },
    #[error("{INDEX} holds pin {reference} of mirror {mirror}, which the file does not carry")]
    PinNotCarried { reference: String, mirror: String },
}

/// What reading a bundle member found.
struct BundleCheck {
    manifest: Manifest,
    tar_size: u64,
    file_size: u64,
    /// Its `env/pylock.toml`, if it has one.
    lock: Option<Vec<u8>>,
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
    let staging = tempfile::Builder::new()
        .prefix(&format!("{}import-", fsutil::TEMP_PREFIX))
        .tempdir_in(&tmp)
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

/// Copies a member to `dest`, hashing it; returns its sha256 and length. Not synced here: the
/// whole staging directory is, at once, before anything moves into place.
fn copy_hashed(
    entry: &mut impl Read,
    dest: &Path,
    progress: &dyn Progress,
) -> io::Result<(Sha256Digest, u64)> {
    let mut f = File::create(dest)?;
    let mut h = Sha256Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = fsutil::read_some(entry, &mut buf)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        f.write_all(&buf[..k])?;
        n += k as u64;
        progress.advance(k as u64);
        if n % (32 << 20) < k as u64 {
            // Writing to disk starts now, so the sync below waits less.
            fsutil::start_writeback(&f);
        }
    }
    Ok((h.finish(), n))
}

/// Reads a staged bundle once: its whole uncompressed tar hashed and compared with its id
/// (a match vouches for every byte), its manifest and lock kept. On a mismatch, the full
/// check names the bad members.
fn check_bundle(path: &Path, id: Sha256Digest) -> Result<BundleCheck, BundleMismatch> {
    let mut members = match bundle::read_fixed_members(&BundleFile::new(path), Some(id)) {
        Ok(m) => m,
        Err(source) => {
            let problems = bundle::verify_file(path, Some(id), &Limits::default(), &NoProgress)
                .map(|report| report.problems)
                .unwrap_or_default();
            return Err(BundleMismatch::Unreadable {
                id,
                source: Box::new(source),
                problems,
            });
        }
    };
    let file_size = fs::metadata(path).map_err(BundleMismatch::Size)?.len();
    Ok(BundleCheck {
        lock: members.files.remove("env/pylock.toml"),
        manifest: members.manifest,
        tar_size: members.tar_size,
        file_size,
    })
}

/// The refusal of `file`, saying why.
fn refused(file: &Path, detail: String) -> ArchiveError {
    ArchiveError::Refused {
        file: file.to_path_buf(),
        detail,
    }
}

/// The file's manifest, its first member, and the parts it lists (the release and the index
/// slice first, no member twice).
fn read_manifest(
    file: &Path,
    entries: &mut tar::Entries<BufReader<File>>,
) -> Result<(ArchiveManifest, Vec<Part>), ArchiveError> {
    let refuse = |detail: String| refused(file, detail);
    let mut first = match entries.next() {
        None => return Err(refuse("it is empty".into())),
        Some(Err(e)) => {
            return Err(refuse(format!(
                "it is not a swe-ark archive file (not a tar archive: {})",
                first_line(&e)
            )));
        }
        Some(Ok(e)) => e,
    };
    let name = String::from_utf8_lossy(&first.path_bytes()).into_owned();
    if name != MANIFEST {
        return Err(refuse(format!(
            "its first member is `{name}`, not {MANIFEST}: it is not a swe-ark archive file"
        )));
    }
    let size = first.header().size().unwrap_or(u64::MAX);
    let manifest_bytes = read_small(&mut first, size)
        .map_err(|e| refuse(format!("{MANIFEST} cannot be read: {e}")))?;
    if manifest_bytes.len() as u64 != size {
        return Err(refuse(format!(
            "{MANIFEST} is cut short ({} of {size} bytes): the file is truncated",
            manifest_bytes.len()
        )));
    }
    drop(first);
    let manifest: ArchiveManifest = serde_json::from_slice(&manifest_bytes)
        .map_err(|e| refuse(format!("{MANIFEST} is not valid: {e}")))?;
    if manifest.format != FORMAT {
        return Err(refuse(format!(
            "{MANIFEST} has format `{}`, not `{FORMAT}`",
            manifest.format
        )));
    }
    if manifest.version != VERSION && manifest.version != SELF_CONTAINED_VERSION {
        return Err(refuse(format!(
            "it is archive format version {}; this swe-ark reads versions \
             {SELF_CONTAINED_VERSION} and {VERSION}",
            manifest.version
        )));
    }
    if manifest.version == SELF_CONTAINED_VERSION && manifest.base.is_some() {
        return Err(refuse(format!(
            "{MANIFEST} names a base release, which only version {VERSION} files have"
        )));
    }
    let mut parts = Vec::new();
    let mut seen = BTreeSet::new();
    for m in &manifest.members {
        let part = Part::parse(&m.path).ok_or_else(|| {
            refuse(format!(
                "{MANIFEST} lists `{}`, which is no member an archive holds",
                m.path
            ))
        })?;
        if !seen.insert(m.path.clone()) {
            return Err(refuse(format!("{MANIFEST} lists `{}` twice", m.path)));
        }
        parts.push(part);
    }
    if parts.first() != Some(&Part::Release) || parts.get(1) != Some(&Part::Index) {
        return Err(refuse(format!(
            "{MANIFEST} must list {RELEASE} and then {INDEX} first"
        )));
    }
    let store_form = manifest.version == VERSION;
    if store_form && parts.get(2) != Some(&Part::Pieces) {
        return Err(refuse(format!(
            "{MANIFEST} of a version {VERSION} file must list {PIECES} third"
        )));
    }
    for p in &parts[2..] {
        let fits = match p {
            Part::Release | Part::Index => false,
            Part::Pieces | Part::Pack(_) => store_form,
            Part::Bundle(_) => !store_form,
            Part::Object(_) | Part::Mirror(_) => true,
        };
        if !fits {
            return Err(refuse(format!(
                "{MANIFEST} of a version {} file lists `{}`, which that version does not hold",
                manifest.version,
                p.path()
            )));
        }
    }
    Ok((manifest, parts))
}

/// The members as staged: the release and index slice in memory, the rest as files.
#[derive(Default)]
struct StagedFiles {
    release: Vec<u8>,
    index: Vec<u8>,
    /// Version 2: the piece table, and the packs in file order.
    pieces: Vec<u8>,
    packs: Vec<(Sha256Digest, PathBuf, u64)>,
    bundles: BTreeMap<Sha256Digest, PathBuf>,
    objects: BTreeMap<Sha256Digest, (PathBuf, u64)>,
    mirrors: BTreeMap<RepoName, PathBuf>,
}

/// Where members are staged from and to, and where progress goes.
struct Stager<'a> {
    file: &'a Path,
    staging: &'a Path,
    progress: &'a dyn Progress,
}

/// What the bundle workers found, bundle by bundle.
type Checked = Mutex<Vec<(Sha256Digest, Result<BundleCheck, BundleMismatch>)>>;

/// A worker: checks the staged bundles `rx` hands over until it closes, or until one is bad.
fn check_bundles(
    rx: &Mutex<mpsc::Receiver<(Sha256Digest, PathBuf)>>,
    failed: &AtomicBool,
    checked: &Checked,
) {
    loop {
        let job = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
        let Ok((id, path)) = job else { break };
        if failed.load(Ordering::SeqCst) {
            continue;
        }
        let r = check_bundle(&path, id);
        if r.is_err() {
            failed.store(true, Ordering::SeqCst);
        }
        checked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((id, r));
    }
}

/// Each member in turn, streamed to staging and checked against the manifest; each bundle
/// handed to `tx` once staged. Stops early when `failed` (a worker found a bad bundle).
#[allow(clippy::too_many_arguments)]
fn stage_members(
    st: &Stager,
    entries: &mut tar::Entries<BufReader<File>>,
    manifest: &ArchiveManifest,
    parts: &[Part],
    range: std::ops::Range<usize>,
    out: &mut StagedFiles,
    failed: &AtomicBool,
    tx: &mpsc::Sender<(Sha256Digest, PathBuf)>,
) -> Result<(), ArchiveError> {
    let refuse = |detail: String| refused(st.file, detail);
    let n = manifest.members.len();
    let last = range.end == n;
    for (i, (m, part)) in manifest.members.iter().zip(parts).enumerate() {
        if !range.contains(&i) {
            continue;
        }
        if failed.load(Ordering::SeqCst) {
            // A worker found a bad bundle: it is reported below.
            return Ok(());
        }
        let what = format!("member {} of {n} (`{}`)", i + 1, m.path);
        let mut entry = match entries.next() {
            None => {
                return Err(refuse(format!(
                    "the file ends before {what}: it is truncated"
                )));
            }
            Some(Err(e)) => {
                return Err(refuse(format!(
                    "{what} cannot be read ({}): the file is truncated or damaged",
                    first_line(&e)
                )));
            }
            Some(Ok(e)) => e,
        };
        let found = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        if found != m.path {
            return Err(refuse(format!(
                "{what}: the file holds `{found}` there instead"
            )));
        }
        if entry.header().entry_type() != tar::EntryType::Regular {
            return Err(refuse(format!("{what} is not a regular file")));
        }
        let size = entry.header().size().unwrap_or(u64::MAX);
        if size != m.size {
            return Err(refuse(format!(
                "{what} is {size} bytes, the manifest says {}",
                m.size
            )));
        }
        let (sha, got) = stage_member(st, &what, &mut entry, size, part, out)?;
        if got != m.size {
            return Err(refuse(format!(
                "{what} is cut short ({got} of {} bytes): the file is truncated",
                m.size
            )));
        }
        if sha != m.sha256 {
            return Err(refuse(format!(
                "{what} hashes to {sha}, the manifest says {}: the file was altered \
                 or damaged",
                m.sha256
            )));
        }
        if let Part::Object(id) | Part::Pack(id) = part
            && *id != sha
        {
            return Err(refuse(format!(
                "{what} holds content that hashes to {sha}, not to the id it is named by"
            )));
        }
        if let Part::Bundle(id) = part {
            let _ = tx.send((*id, out.bundles[id].clone()));
        }
    }
    if !last {
        return Ok(());
    }
    match entries.next() {
        None => Ok(()),
        Some(Ok(e)) => Err(refuse(format!(
            "it holds `{}` after the last member its manifest lists",
            String::from_utf8_lossy(&e.path_bytes())
        ))),
        Some(Err(e)) => Err(refuse(format!(
            "it is truncated or damaged after its last member: {}",
            first_line(&e)
        ))),
    }
}

/// One member, read into memory (the release, the index slice) or copied to staging; returns
/// its sha256 and length.
fn stage_member(
    st: &Stager,
    what: &str,
    entry: &mut impl Read,
    size: u64,
    part: &Part,
    out: &mut StagedFiles,
) -> Result<(Sha256Digest, u64), ArchiveError> {
    let refuse = |detail: String| refused(st.file, detail);
    let (staging, progress) = (st.staging, st.progress);
    Ok(match part {
        Part::Release | Part::Index | Part::Pieces => {
            let b = read_small(entry, size)
                .map_err(|e| refuse(format!("{what} cannot be read: {e}")))?;
            progress.advance(b.len() as u64);
            let r = (Sha256Digest::of(&b), b.len() as u64);
            match part {
                Part::Release => out.release = b,
                Part::Index => out.index = b,
                _ => out.pieces = b,
            }
            r
        }
        Part::Pack(name) => {
            let dest = staging.join("packs").join(format!("{}.pack", name.hex()));
            let r = copy_hashed(entry, &dest, progress)
                .map_err(|e| refuse(format!("{what} cannot be staged: {e}")))?;
            out.packs.push((*name, dest, r.1));
            r
        }
        Part::Bundle(id) => {
            let dest = staging
                .join("bundles")
                .join(format!("{}{}", id.hex(), bundle::FILE_SUFFIX));
            let r = copy_hashed(entry, &dest, progress)
                .map_err(|e| refuse(format!("{what} cannot be staged: {e}")))?;
            out.bundles.insert(*id, dest);
            r
        }
        Part::Object(id) => {
            let dest = staging.join("objects").join(id.hex());
            let r = copy_hashed(entry, &dest, progress)
                .map_err(|e| refuse(format!("{what} cannot be staged: {e}")))?;
            out.objects.insert(*id, (dest, r.1));
            r
        }
        Part::Mirror(name) => {
            let dest = staging
                .join("mirrors")
                .join(format!("{}.bundle", name.dir_name()));
            let r = copy_hashed(entry, &dest, progress)
                .map_err(|e| refuse(format!("{what} cannot be staged: {e}")))?;
            out.mirrors.insert(name.clone(), dest);
            r
        }
    })
}

/// Every member staged while workers check the bundles (as many as there are cores: the
/// reading thread mostly waits on I/O); then what the workers found, every bad bundle named.
fn stage_and_check(
    st: &Stager,
    entries: &mut tar::Entries<BufReader<File>>,
    manifest: &ArchiveManifest,
    parts: &[Part],
) -> Result<(StagedFiles, BTreeMap<Sha256Digest, BundleCheck>), ArchiveError> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let failed = AtomicBool::new(false);
    let checked: Checked = Mutex::new(Vec::new());
    let (tx, rx) = mpsc::channel::<(Sha256Digest, PathBuf)>();
    let rx = Mutex::new(rx);
    let mut out = StagedFiles::default();
    let streamed: Result<(), ArchiveError> = std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| check_bundles(&rx, &failed, &checked));
        }
        let all = 0..parts.len();
        let result = stage_members(st, entries, manifest, parts, all, &mut out, &failed, &tx);
        if result.is_err() {
            failed.store(true, Ordering::SeqCst);
        }
        drop(tx);
        result
    });
    st.progress.finish();
    streamed?;
    let mut bundle_checks = BTreeMap::new();
    let mut bad = Vec::new();
    for (id, r) in checked.into_inner().unwrap_or_else(|p| p.into_inner()) {
        match r {
            Ok(c) => {
                bundle_checks.insert(id, c);
            }
            Err(e) => bad.push(e.to_string()),
        }
    }
    if !bad.is_empty() {
        bad.sort();
        return Err(refused(
            st.file,
            format!(
                "{} bundle(s) do not match their ids: {}",
                bad.len(),
                bad.join("; ")
            ),
        ));
    }
    Ok((out, bundle_checks))
}

/// What the checks of a version 2 file's packs found: each bundle, and the packs' pieces.
type StoreChecked = (BTreeMap<Sha256Digest, BundleCheck>, Incoming);

/// Version 2: every member staged; the packs' pieces, and the bundles made of them, checked on
/// other threads as soon as the packs are staged, while the objects and mirrors after them
/// arrive.
fn stage_and_check_store(
    st: &Stager,
    entries: &mut tar::Entries<BufReader<File>>,
    manifest: &ArchiveManifest,
    parts: &[Part],
    root: &Path,
) -> Result<(StagedFiles, StoreChecked), ArchiveError> {
    let failed = AtomicBool::new(false);
    // No bundle members in this version: nothing is sent.
    let (tx, _rx) = mpsc::channel::<(Sha256Digest, PathBuf)>();
    let split = parts
        .iter()
        .rposition(|p| matches!(p, Part::Pack(_) | Part::Pieces))
        .map_or(parts.len(), |i| i + 1);
    let mut out = StagedFiles::default();
    let head = stage_members(
        st,
        entries,
        manifest,
        parts,
        0..split,
        &mut out,
        &failed,
        &tx,
    );
    if let Err(e) = head {
        st.progress.finish();
        return Err(e);
    }
    let (table, packs, index) = (
        std::mem::take(&mut out.pieces),
        out.packs.clone(),
        out.index.clone(),
    );
    let file = st.file;
    let (rest, checked) = std::thread::scope(|s| {
        let checking = s.spawn(move || {
            let slice: IndexSlice = serde_json::from_slice(&index)
                .map_err(|e| refused(file, format!("{INDEX} is not valid: {e}")))?;
            let receiver = open_receiver(root);
            check_store(file, &table, packs, &slice, receiver.as_ref(), &NoProgress)
        });
        let all = split..parts.len();
        let rest = stage_members(st, entries, manifest, parts, all, &mut out, &failed, &tx);
        if !checking.is_finished() {
            st.progress.finish();
            st.progress.start("checking pieces and bundles", None);
        }
        let checked = checking
            .join()
            .unwrap_or_else(|_| Err(refused(file, "the thread checking the packs failed".into())));
        (rest, checked)
    });
    st.progress.finish();
    rest?;
    Ok((out, checked?))
}

/// The snapshot, which must hash to its root, be the release the manifest names, and have
/// the expected root if one is given.
fn read_snapshot(
    file: &Path,
    bytes: &[u8],
    manifest: &ArchiveManifest,
    opts: &ImportOptions,
) -> Result<Snapshot, ArchiveError> {
    let refuse = |detail: String| refused(file, detail);
    let parsed = if manifest.shard.is_some() {
        Snapshot::parse_of_shard(bytes)
    } else {
        Snapshot::parse(bytes)
    };
    let snapshot = parsed.map_err(|e| refuse(format!("{RELEASE}: {e}")))?;
    let computed = snapshot.computed_root();
    if computed != snapshot.root {
        return Err(refuse(format!(
            "{RELEASE} states root {} but its instances hash to {computed}",
            snapshot.root
        )));
    }
    if manifest.root != snapshot.root || manifest.release != snapshot.name {
        return Err(refuse(format!(
            "{MANIFEST} names release {} with root {}, {RELEASE} release {} with root {}",
            manifest.release, manifest.root, snapshot.name, snapshot.root
        )));
    }
    if let Some(expected) = opts.expect_root
        && expected != snapshot.root
    {
        return Err(refuse(format!(
            "it holds release {} with root {}, not the expected {expected}",
            snapshot.name, snapshot.root
        )));
    }
    Ok(snapshot)
}

/// The release's bundles, each staged and of its instance, and no other.
#[allow(clippy::type_complexity)]
fn release_bundles(
    file: &Path,
    snapshot: &Snapshot,
    mut bundle_files: BTreeMap<Sha256Digest, PathBuf>,
    mut bundle_checks: BTreeMap<Sha256Digest, BundleCheck>,
) -> Result<
    (
        BTreeMap<Sha256Digest, PathBuf>,
        BTreeMap<Sha256Digest, BundleCheck>,
    ),
    ArchiveError,
> {
    let refuse = |detail: String| refused(file, detail);
    let mut files = BTreeMap::new();
    let mut checks = BTreeMap::new();
    for inst in &snapshot.instances {
        let (Some(path), Some(check)) = (
            bundle_files.remove(&inst.bundle),
            bundle_checks.remove(&inst.bundle),
        ) else {
            return Err(refuse(format!(
                "bundle {} of instance {} is not in the file",
                inst.bundle, inst.instance_id
            )));
        };
        if check.manifest.instance_id != inst.instance_id {
            return Err(refuse(format!(
                "bundle {} is of instance {}, the release says {}",
                inst.bundle, check.manifest.instance_id, inst.instance_id
            )));
        }
        files.insert(inst.bundle, path);
        checks.insert(inst.bundle, check);
    }
    if let Some(extra) = bundle_files.keys().next() {
        return Err(refuse(format!(
            "bundle {extra} is in the file but not in the release"
        )));
    }
    Ok((files, checks))
}

/// Each lock's needs must be here, and be what the release lists.
fn check_locks(
    file: &Path,
    snapshot: &Snapshot,
    bundles: &BTreeMap<Sha256Digest, BundleCheck>,
    objects: &BTreeMap<Sha256Digest, (PathBuf, u64)>,
    held: &dyn Fn(&Sha256Digest) -> bool,
) -> Result<(), ArchiveError> {
    let refuse = |detail: String| refused(file, detail);
    for inst in &snapshot.instances {
        let Some(check) = bundles.get(&inst.bundle) else {
            continue;
        };
        let Some(lock) = &check.lock else {
            if !inst.objects.is_empty() {
                return Err(refuse(format!(
                    "the release lists objects for {}, whose bundle holds no lock",
                    inst.instance_id
                )));
            }
            continue;
        };
        let needs = PyLock::parse(lock)
            .and_then(|l| l.needed_objects())
            .map_err(|e| {
                refuse(format!(
                    "the lock of {} is not valid: {e}",
                    inst.instance_id
                ))
            })?;
        let needed: BTreeSet<Sha256Digest> = needs.iter().map(|n| n.0).collect();
        let listed: BTreeSet<Sha256Digest> = inst.objects.iter().copied().collect();
        if needed != listed {
            return Err(refuse(format!(
                "the lock of {} needs {} object(s), the release lists {}",
                inst.instance_id,
                needed.len(),
                listed.len()
            )));
        }
        if let Some(o) = needed.iter().find(|o| !objects.contains_key(o) && !held(o)) {
            return Err(refuse(format!(
                "object {o}, which the lock of {} needs, is neither in the file nor in this \
                 archive",
                inst.instance_id
            )));
        }
    }
    Ok(())
}

/// Git bundles: read into mirrors in staging (git checks each pack), pins checked. Returns
/// each mirror's bundle file and staged mirror.
fn stage_mirrors(
    st: &Stager,
    slice: &IndexSlice,
    mirror_files: BTreeMap<RepoName, PathBuf>,
) -> Result<BTreeMap<RepoName, (PathBuf, PathBuf)>, ArchiveError> {
    let refuse = |detail: String| refused(st.file, detail);
    let mut mirrors = BTreeMap::new();
    let url_of: BTreeMap<&str, &str> = slice
        .mirrors
        .iter()
        .map(|m| (m.name.as_str(), m.url.as_str()))
        .collect();
    for (name, bundle_file) in mirror_files {
        let url = url_of.get(name.as_str()).copied().filter(|u| !u.is_empty());
        let (m, _) = mirror::import_bundle(
            &st.staging.join("repos"),
            &bundle_file,
            &name,
            url,
            st.progress,
        )
        .map_err(|e| refuse(format!("mirror {name}: {e}")))?;
        for pin in slice.pins.iter().filter(|p| p.mirror == name.as_str()) {
            let at = m
                .repo
                .refname_to_id(&pin.reference)
                .ok()
                .map(|o| o.to_string());
            if at.as_deref() != Some(pin.commit.as_str()) {
                return Err(refuse(format!(
                    "mirror {name} lacks pin {} at {}",
                    pin.reference, pin.commit
                )));
            }
        }
        mirrors.insert(name, (bundle_file, m.path.clone()));
    }
    Ok(mirrors)
}

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
        super::shard::check(stamp, &snapshot, &slice).map_err(refuse)?;
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

/// A shard file only where one of that plan is wanted (merge), and only a shard file there.
fn check_shard_wanted(
    file: &Path,
    stamp: Option<&super::ShardStamp>,
    wanted: Option<Sha256Digest>,
) -> Result<(), ArchiveError> {
    match (stamp, wanted) {
        (None, None) => Ok(()),
        (Some(s), None) => Err(refused(
            file,
            format!(
                "it is a shard file (shard {} of {} of plan {}): `swe-ark merge` takes it",
                s.index, s.shards, s.plan
            ),
        )),
        (None, Some(_)) => Err(refused(
            file,
            "it is a release file, not a shard file (`swe-ark import-archive` takes it)".into(),
        )),
        (Some(s), Some(plan)) if s.plan != plan => Err(refused(
            file,
            format!(
                "it is shard {} of plan {}, not of plan {plan}",
                s.index, s.plan
            ),
        )),
        (Some(_), Some(_)) => Ok(()),
    }
}

/// An incremental file's base release must be registered here (its import put it there).
fn check_base(file: &Path, receiver: Option<&Ark>, base: &BaseRelease) -> Result<(), ArchiveError> {
    let registered = match receiver {
        Some(ark) => crate::store::release_names(ark.root())?
            .into_keys()
            .filter_map(|name| {
                let snap = Snapshot::read(&ark.releases_dir().join(format!("{name}.json"))).ok()?;
                (snap.root == base.root).then_some(name)
            })
            .next(),
        None => None,
    };
    if registered.is_none() {
        return Err(refused(
            file,
            format!(
                "it is incremental: it holds only what an archive that imported release {} \
                 (root {}) lacks, and this archive has no release with that root; import {}'s \
                 file first",
                base.release, base.root, base.release
            ),
        ));
    }
    Ok(())
}

/// Every release instance's bundle is in the file and of that instance, or (in an incremental
/// file) held here already; the file carries no other bundle.
fn check_carried(
    file: &Path,
    snapshot: &Snapshot,
    bundles: &BTreeMap<Sha256Digest, BundleCheck>,
    receiver: Option<&Ark>,
    manifest: &ArchiveManifest,
) -> Result<(), ArchiveError> {
    let refuse = |detail: String| refused(file, detail);
    let mut release_bundles = BTreeSet::new();
    for inst in &snapshot.instances {
        release_bundles.insert(inst.bundle);
        if let Some(check) = bundles.get(&inst.bundle) {
            if check.manifest.instance_id != inst.instance_id {
                return Err(refuse(format!(
                    "bundle {} is of instance {}, the release says {}",
                    inst.bundle, check.manifest.instance_id, inst.instance_id
                )));
            }
            continue;
        }
        let here = match (receiver, &manifest.base) {
            (Some(ark), Some(_)) => ark
                .index()
                .bundles_with_prefix(&inst.bundle.hex())?
                .iter()
                .any(|b| b.id == inst.bundle),
            _ => false,
        };
        if !here {
            return Err(refuse(format!(
                "bundle {} of instance {} is neither in the file nor in this archive",
                inst.bundle, inst.instance_id
            )));
        }
    }
    if let Some(extra) = bundles.keys().find(|b| !release_bundles.contains(b)) {
        return Err(refuse(format!(
            "bundle {extra} is in the file but not in the release"
        )));
    }
    Ok(())
}

/// Version 2: every piece of the packs decoded and named by its content; every bundle the
/// index slice lists rebuilt from them (and from this archive's pieces, for an incremental
/// file) and checked against its id; no piece that no bundle needs.
fn check_store(
    file: &Path,
    table: &[u8],
    packs: Vec<(Sha256Digest, PathBuf, u64)>,
    slice: &IndexSlice,
    receiver: Option<&Ark>,
    progress: &dyn Progress,
) -> Result<(BTreeMap<Sha256Digest, BundleCheck>, Incoming), ArchiveError> {
    let refuse = |detail: String| refused(file, detail);
    let frames = super::table::decode(table, packs.len())
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
    let mut incoming =
        Incoming::check(receiver, incoming_packs, progress).map_err(|e| refuse(e.to_string()))?;
    // Each bundle's bundle.json and members: in the packs, or (incremental) here.
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
            if Contents::size(&incoming, &m.sha256).is_none() {
                return Err(refuse(format!(
                    "bundle {} needs piece {} (member `{}`), which neither the file nor this \
                     archive holds",
                    b.id,
                    m.sha256,
                    String::from_utf8_lossy(&m.path)
                )));
            }
        }
        manifests.insert(b.id, (piece, bytes, manifest));
    }
    // What each bundle needs of the packs, bases included; the packs carry nothing else.
    let mut needs: BTreeMap<Sha256Digest, BTreeSet<Sha256Digest>> = BTreeMap::new();
    for (id, (piece, _, manifest)) in &manifests {
        let mut need: BTreeSet<Sha256Digest> = manifest.members.iter().map(|m| m.sha256).collect();
        need.insert(*piece);
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
    let needed: HashSet<&Sha256Digest> = needs.values().flatten().collect();
    if let Some(extra) = incoming.pieces().iter().find(|p| !needed.contains(p)) {
        return Err(refuse(format!(
            "its packs hold piece {extra}, which no bundle of the release needs"
        )));
    }
    // Every bundle rebuilt and hashed, on every core.
    use rayon::prelude::*;
    let incoming_ref = &incoming;
    type Rebuilt = (Sha256Digest, Result<(u64, Option<Vec<u8>>), String>);
    let rebuilt: Vec<Rebuilt> = manifests
        .par_iter()
        .map(|(id, (_, bytes, manifest))| {
            let tar = RebuiltTar::new(incoming_ref, bytes, manifest, Some(*id), &NoProgress);
            let r = tar.hash_to_end().map_err(|e| e.to_string()).and_then(|n| {
                let lock = match manifest.member("env/pylock.toml") {
                    Some(m) => {
                        Some(Contents::get(incoming_ref, &m.sha256).map_err(|e| e.to_string())?)
                    }
                    None => None,
                };
                Ok((n, lock))
            });
            (*id, r)
        })
        .collect();
    let mut pack_pieces = Vec::new();
    for (k, p) in incoming.packs().iter().enumerate() {
        pack_pieces.push((p.size, incoming.pieces_of_pack(k).to_vec()));
    }
    let shares = super::pack_shares(&pack_pieces, &needs);
    let mut checks = BTreeMap::new();
    for (id, r) in rebuilt {
        let (tar_size, lock) = r.map_err(|e| refuse(format!("bundle {id}: {e}")))?;
        let Some((_, _, manifest)) = manifests.remove(&id) else {
            continue;
        };
        checks.insert(
            id,
            BundleCheck {
                manifest,
                tar_size,
                file_size: shares.get(&id).copied().unwrap_or(0),
                lock,
            },
        );
    }
    Ok((checks, incoming))
}

/// The slice's objects: exactly those in the file, each once, sizes as staged.
fn check_slice_objects(
    snapshot: &Snapshot,
    slice: &IndexSlice,
    objects: &BTreeMap<Sha256Digest, (PathBuf, u64)>,
    held: &dyn Fn(&Sha256Digest) -> bool,
) -> Result<(), SliceMismatch> {
    let listed: BTreeMap<Sha256Digest, u64> =
        slice.objects.iter().map(|o| (o.id, o.size)).collect();
    if listed.len() != slice.objects.len() {
        return Err(SliceMismatch::ObjectTwice);
    }
    for (id, (_, size)) in objects {
        match listed.get(id) {
            Some(s) if s == size => {}
            Some(s) => {
                return Err(SliceMismatch::ObjectSize {
                    id: *id,
                    listed: *s,
                    size: *size,
                });
            }
            None => return Err(SliceMismatch::ObjectUnlisted(*id)),
        }
    }
    if let Some(id) = listed.keys().find(|id| !objects.contains_key(id)) {
        return Err(SliceMismatch::ObjectMissing(*id));
    }
    for o in snapshot.objects() {
        if !objects.contains_key(&o) && !held(&o) {
            return Err(SliceMismatch::ReleaseObjectMissing(o));
        }
    }
    Ok(())
}

/// The slice's bundles: one row per release bundle, as the bundle itself says.
fn check_slice_bundles(
    slice: &IndexSlice,
    bundles: &BTreeMap<Sha256Digest, BundleCheck>,
) -> Result<(), SliceMismatch> {
    if slice.bundles.len() != bundles.len() {
        return Err(SliceMismatch::BundleCount {
            listed: slice.bundles.len(),
            release: bundles.len(),
        });
    }
    for b in &slice.bundles {
        let Some(c) = bundles.get(&b.id) else {
            return Err(SliceMismatch::BundleNotInRelease(b.id));
        };
        let codebase_files = c.manifest.codebase_members().count() as u64;
        let ok = b.instance_id == c.manifest.instance_id
            && b.format_version == c.manifest.version
            && b.codebase_tree == c.manifest.codebase_tree
            && b.tar_size == c.tar_size
            && b.file_size == c.file_size
            && b.member_count == c.manifest.members.len() as u64 + 1
            && b.codebase_files == codebase_files;
        if !ok {
            return Err(SliceMismatch::BundleRow(b.id));
        }
    }
    Ok(())
}

/// The index slice must describe exactly the release's bundles, instances and objects.
fn check_slice(
    snapshot: &Snapshot,
    slice: &IndexSlice,
    bundles: &BTreeMap<Sha256Digest, BundleCheck>,
    objects: &BTreeMap<Sha256Digest, (PathBuf, u64)>,
    held: &dyn Fn(&Sha256Digest) -> bool,
    others: &BTreeSet<&str>,
) -> Result<(), SliceMismatch> {
    let ids: BTreeSet<&str> = snapshot
        .instances
        .iter()
        .map(|i| i.instance_id.as_str())
        .collect();
    let mut released = 0;
    // The instances whose bundle the file carries (all of them, unless it is incremental).
    let carried = snapshot
        .instances
        .iter()
        .filter(|i| bundles.contains_key(&i.bundle))
        .count();
    check_slice_objects(snapshot, slice, objects, held)?;
    check_slice_bundles(slice, bundles)?;
    // Instances: each release instance once, as its bundle's instance.json holds it (and a
    // shard file's others, which the shard's checks take).
    let mut seen = BTreeSet::new();
    for v in &slice.instances {
        let inst = Instance::from_value(v.clone()).map_err(SliceMismatch::BadInstance)?;
        if others.contains(inst.instance_id.as_str()) {
            if !seen.insert(inst.instance_id.clone()) {
                return Err(SliceMismatch::InstanceTwice(inst.instance_id));
            }
            continue;
        }
        released += 1;
        let Some(ri) = snapshot
            .instances
            .iter()
            .find(|i| i.instance_id == inst.instance_id)
        else {
            return Err(SliceMismatch::InstanceNotInRelease(inst.instance_id));
        };
        if !seen.insert(inst.instance_id.clone()) {
            return Err(SliceMismatch::InstanceTwice(inst.instance_id));
        }
        let want = bundles
            .get(&ri.bundle)
            .and_then(|c| c.manifest.member("instance.json"))
            .map(|m| m.sha256);
        if want != Some(Sha256Digest::of(&inst.to_canonical_json())) {
            return Err(SliceMismatch::InstanceDiffers(inst.instance_id));
        }
    }
    if released != carried {
        return Err(SliceMismatch::InstanceCount {
            held: released,
            release: carried,
        });
    }
    // Locks and validations name objects in the file and instances of the release.
    for l in &slice.locks {
        if !objects.contains_key(&l.id) {
            return Err(SliceMismatch::LockMissing(l.id));
        }
    }
    for v in &slice.validations {
        if !ids.contains(v.instance_id.as_str()) && !others.contains(v.instance_id.as_str()) {
            return Err(SliceMismatch::ValidationNotInRelease(v.instance_id.clone()));
        }
        for o in [Some(v.results), v.log_pre, v.log_post]
            .into_iter()
            .flatten()
        {
            if !objects.contains_key(&o) {
                return Err(SliceMismatch::ValidationObjectMissing {
                    instance: v.instance_id.clone(),
                    object: o,
                });
            }
        }
    }
    let mirrors: BTreeSet<&str> = slice.mirrors.iter().map(|m| m.name.as_str()).collect();
    for p in &slice.pins {
        if !mirrors.contains(p.mirror.as_str()) || !ids.contains(p.instance_id.as_str()) {
            return Err(SliceMismatch::PinNotCarried {
                reference: p.reference.clone(),
                mirror: p.mirror.clone(),
            });
        }
    }
    Ok(())
}

/// The staged mirrors moved into place (or, where the archive has the mirror, the git bundle
/// fetched into it); `dirs` gets the folders to sync. Returns their index rows.
fn install_mirrors(
    ark: &Ark,
    staged: &Staged,
    dirs: &mut BTreeSet<PathBuf>,
    progress: &dyn Progress,
) -> Result<Vec<ImportedMirror>, ArchiveError> {
    let mut mirror_rows = Vec::new();
    let mirrors_dir = ark.mirrors_dir();
    for (name, (bundle_file, staged_repo)) in &staged.mirrors {
        let dest = Mirror::dir(&mirrors_dir, name);
        if dest.exists() {
            mirror::import_bundle(&mirrors_dir, bundle_file, name, None, progress)?;
        } else {
            fs::create_dir_all(&mirrors_dir).map_err(io_err(&mirrors_dir))?;
            fs::rename(staged_repo, &dest).map_err(io_err(&dest))?;
            dirs.insert(mirrors_dir.clone());
        }
        let m = Mirror::open(&mirrors_dir, name)?;
        let refs = mirror::upstream_refs(&m.repo).map_err(|source| MirrorError::Git {
            name: name.to_string(),
            source,
        })?;
        mirror_rows.push(ImportedMirror {
            name: name.to_string(),
            url: m.url(),
            refs_sha256: mirror::refs_hash(&refs),
            refs,
            size: mirror::disk_size(&m.path),
        });
    }
    Ok(mirror_rows)
}

/// The repository each incoming pack is recorded under: that of the first bundle, by id,
/// made of one of its pieces.
fn pack_repos(staged: &Staged, incoming: &Incoming) -> Vec<String> {
    let repo_of: BTreeMap<&str, &str> = staged
        .slice
        .instances
        .iter()
        .filter_map(|v| Some((v.get("instance_id")?.as_str()?, v.get("repo")?.as_str()?)))
        .collect();
    let made_of: Vec<(&str, HashSet<Sha256Digest>)> = staged
        .slice
        .bundles
        .iter()
        .filter_map(|b| {
            let check = staged.bundles.get(&b.id)?;
            let mut ids: HashSet<Sha256Digest> =
                check.manifest.members.iter().map(|m| m.sha256).collect();
            ids.extend(b.manifest_piece);
            Some((*repo_of.get(b.instance_id.as_str())?, ids))
        })
        .collect();
    (0..incoming.packs().len())
        .map(|k| {
            let pieces = incoming.pieces_of_pack(k);
            made_of
                .iter()
                .find(|(_, ids)| pieces.iter().any(|p| ids.contains(p)))
                .or(made_of.first())
                .map(|(repo, _)| repo.to_string())
                .unwrap_or_default()
        })
        .collect()
}

/// Moves what was staged into the archive and records it, in one transaction.
fn install(
    root: &Path,
    staged: Staged,
    progress: &dyn Progress,
) -> Result<ImportReport, ArchiveError> {
    let mut ark = Ark::create(root)?;
    // The release is registered in the archive (gc and `rm` keep its bundles); another
    // release of the same name is not silently replaced.
    let name = &staged.snapshot.name;
    let registered = ark.releases_dir().join(format!("{name}.json"));
    if !staged.shard
        && let Ok(old) = Snapshot::read(&registered)
        && old.root != staged.snapshot.root
    {
        return Err(ArchiveError::Refused {
            file: registered,
            detail: format!(
                "the archive holds another release named {name} (root {}, this one {}); \
                 `swe-ark release rm {name}` first",
                old.root, staged.snapshot.root
            ),
        });
    }
    // Held until the index names what this import stores: gc waits.
    let _held = ark.hold_store()?;
    let store = ark.objects();
    let (mut objects_added, mut bundles_added) = (0, 0);
    let mut dirs = BTreeSet::new();
    for (id, (path, _)) in &staged.objects {
        if store.install_file(path, id)? {
            objects_added += 1;
            dirs.insert(fsutil::parent_dir(&store.path_of(id)).to_path_buf());
        }
    }
    dirs.insert(crate::store::Layout::new(root).objects().join("sha256"));
    let present: BTreeSet<Sha256Digest> = ark.index().bundles()?.iter().map(|b| b.id).collect();
    let mut stored_rows = Vec::new();
    let mut packs = Vec::new();
    let options = PackOptions::default();
    if let Some(incoming) = &staged.incoming {
        // Version 2: the packs moved in (or cut down to what this archive lacks); the bundles'
        // rows name their bundle.json pieces.
        let repos = pack_repos(&staged, incoming);
        packs = ark.add_incoming(incoming, &repos, options.level)?;
        for b in &staged.slice.bundles {
            let Some(check) = staged.bundles.get(&b.id) else {
                continue;
            };
            if present.contains(&b.id) {
                continue;
            }
            let row = crate::store::BundleRow::from(b);
            stored_rows.push((row, crate::store::sketch_of(&check.manifest)));
            bundles_added += 1;
        }
    } else {
        // Version 1: each bundle goes into the deduplicated store, its pieces recorded as it
        // is stored so that the next finds them as delta bases; the bundles themselves are
        // listed in the one transaction below, in the order of their ids.
        let mut pending = Vec::new();
        for (id, path) in &staged.bundle_files {
            if present.contains(id) {
                continue;
            }
            let (row, sketch) = ark.store_for_import(path, *id, &pending, &options, progress)?;
            bundles_added += 1;
            stored_rows.push((row, sketch.sketch.clone()));
            pending.push(sketch);
        }
    }
    let mirror_rows = install_mirrors(&ark, &staged, &mut dirs, progress)?;
    // Every rename above on disk (one flush for the archive's filesystem) before the index
    // names what they moved.
    fsutil::sync_filesystem(root).map_err(io_err(root))?;
    failpoint::hit("import.before-index");
    let slice = &staged.slice;
    let instances = slice
        .instances
        .iter()
        .map(|v| Instance::from_value(v.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ArchiveError::Refused {
            file: root.to_path_buf(),
            detail: e.to_string(),
        })?;
    let rows = ImportRows {
        instances,
        bundles: stored_rows,
        packs,
        objects: slice
            .objects
            .iter()
            .map(|o| (o.id, o.size, o.kind.clone()))
            .collect(),
        locks: slice.locks.iter().map(LockRow::from).collect(),
        validations: slice.validations.iter().map(ValidationRow::from).collect(),
        mirrors: mirror_rows,
        pins: slice.pins.iter().map(PinRow::from).collect(),
    };
    if !staged.shard {
        ark.register_release(name, &staged.snapshot.to_bytes())?;
    }
    ark.index_mut().import_rows(&rows)?;
    let carried: BTreeSet<&str> = staged
        .incoming
        .iter()
        .flat_map(|i| i.packs())
        .map(|p| p.name.as_str())
        .collect();
    let packs_moved = rows
        .packs
        .iter()
        .filter(|p| carried.contains(p.name.as_str()))
        .count();
    let packs_cut = rows.packs.len() - packs_moved;
    Ok(ImportReport {
        release: staged.snapshot.name.clone(),
        root: staged.snapshot.root,
        version: staged.version,
        base: staged.base.clone(),
        instances: staged.snapshot.instances.len(),
        packs_moved,
        packs_cut,
        packs_present: carried.len() - rows.packs.len(),
        bundles_added,
        bundles_present: staged.bundles.len() - bundles_added,
        objects_added,
        objects_present: staged.objects.len() - objects_added,
        mirrors: staged.mirrors.keys().map(|m| m.to_string()).collect(),
        bytes: staged.bytes,
    })
}
