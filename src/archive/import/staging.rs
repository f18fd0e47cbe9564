//! Every member streamed from the file into staging, hashed and checked against the
//! manifest as it arrives; the bundles (version 1) or the packs' pieces (version 2) checked on
//! other threads meanwhile.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};

use crate::archive::slice::IndexSlice;
use crate::archive::{ArchiveError, ArchiveManifest, INDEX, Part};
use crate::bundle::{self, BundleError, BundleFile, Limits, Problem};
use crate::digest::{Sha256Digest, Sha256Hasher};
use crate::fsutil;
use crate::mirror::RepoName;
use crate::progress::{NoProgress, Progress};

use super::packs::{StoreChecked, check_store};
use super::{BundleCheck, first_line, open_receiver, read_small, refused};

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
    let lock = crate::context::kind_of_bundle(|m| members.files.contains_key(m)).and_then(|k| {
        members
            .files
            .remove(k.lock_member())
            .map(|bytes| (k, bytes))
    });
    Ok(BundleCheck {
        lock,
        manifest: members.manifest,
        tar_size: members.tar_size,
        file_size,
    })
}

/// The members as staged: the release and index slice in memory, the rest as files.
#[derive(Default)]
pub(super) struct StagedFiles {
    pub(super) release: Vec<u8>,
    pub(super) index: Vec<u8>,
    /// Version 2: the piece table, and the packs in file order.
    pub(super) pieces: Vec<u8>,
    pub(super) packs: Vec<(Sha256Digest, PathBuf, u64)>,
    pub(super) bundles: BTreeMap<Sha256Digest, PathBuf>,
    pub(super) objects: BTreeMap<Sha256Digest, (PathBuf, u64)>,
    pub(super) mirrors: BTreeMap<RepoName, PathBuf>,
}

/// Where members are staged from and to, and where progress goes.
pub(super) struct Stager<'a> {
    pub(super) file: &'a Path,
    pub(super) staging: &'a Path,
    pub(super) progress: &'a dyn Progress,
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
pub(super) fn stage_and_check(
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

/// Version 2: every member staged; the packs' pieces, and the bundles made of them, checked on
/// other threads as soon as the packs are staged, while the objects and mirrors after them
/// arrive.
pub(super) fn stage_and_check_store(
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
