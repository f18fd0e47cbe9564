//! `import-archive`: every member of an exported file staged under `<ark>/tmp/` and checked
//! (its sha256 and size against the manifest, each object against its id, each bundle
//! against its id by hashing its whole uncompressed tar, the snapshot against its root, the
//! index slice against the bundles, each lock's needs against the objects, each git bundle
//! by git's pack reader); only then moved into place (objects and bundles are
//! content-addressed: one already present is kept), and the index rows written in one
//! transaction. A refused file leaves the target as it was; a killed import leaves at most
//! files that no index row names.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};

use crate::bundle::{self, BundleFile, Limits, Manifest, PackOptions};
use crate::dataset::Instance;
use crate::digest::{Sha256Digest, Sha256Hasher};
use crate::env::pylock::PyLock;
use crate::failpoint;
use crate::fsutil;
use crate::mirror::{self, Mirror, MirrorError, RepoName};
use crate::progress::{NoProgress, Progress};
use crate::release::Snapshot;
use crate::store::{Ark, ImportRows, ImportedMirror, LockRow, PinRow, ValidationRow};

use super::slice::IndexSlice;
use super::{
    ArchiveError, ArchiveManifest, FORMAT, INDEX, MANIFEST, MAX_METADATA, Part, RELEASE, VERSION,
    io_err,
};

#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Refuse the file unless its release has this root hash (the one published).
    pub expect_root: Option<Sha256Digest>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ImportReport {
    pub release: String,
    pub root: Sha256Digest,
    pub instances: usize,
    pub bundles_added: usize,
    pub bundles_present: usize,
    pub objects_added: usize,
    pub objects_present: usize,
    pub mirrors: Vec<String>,
    /// The file's size.
    pub bytes: u64,
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
    bundles: BTreeMap<Sha256Digest, (PathBuf, BundleCheck)>,
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
    let tmp = root.join("tmp");
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
    let staged = stage(file, staging.path(), opts, progress);
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

/// Copies a member to `dest` (synced), hashing it; returns its sha256 and length.
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
        let k = match entry.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        h.update(&buf[..k]);
        f.write_all(&buf[..k])?;
        n += k as u64;
        progress.advance(k as u64);
        if n % (32 << 20) < k as u64 {
            // Writing to disk starts now, so the sync below waits less.
            fsutil::start_writeback(&f);
        }
    }
    f.sync_all()?;
    Ok((h.finish(), n))
}

/// Reads a staged bundle once: its whole uncompressed tar hashed and compared with its id
/// (a match vouches for every byte), its manifest and lock kept. On a mismatch, the full
/// check names the bad members.
fn check_bundle(path: &Path, id: Sha256Digest) -> Result<BundleCheck, String> {
    let mut members = match bundle::read_fixed_members(&BundleFile::new(path), Some(id)) {
        Ok(m) => m,
        Err(e) => {
            let mut msg = format!("bundle {id}: {e}");
            if let Ok(report) = bundle::verify_file(path, Some(id), &Limits::default(), &NoProgress)
            {
                for p in report.problems {
                    msg.push_str(&format!("; {p}"));
                }
            }
            return Err(msg);
        }
    };
    let file_size = fs::metadata(path).map_err(|e| e.to_string())?.len();
    Ok(BundleCheck {
        lock: members.files.remove("env/pylock.toml"),
        manifest: members.manifest,
        tar_size: members.tar_size,
        file_size,
    })
}

fn stage(
    file: &Path,
    staging: &Path,
    opts: &ImportOptions,
    progress: &dyn Progress,
) -> Result<Staged, ArchiveError> {
    let refuse = |detail: String| ArchiveError::Refused {
        file: file.to_path_buf(),
        detail,
    };
    let f = File::open(file).map_err(io_err(file))?;
    let bytes = f.metadata().map_err(io_err(file))?.len();
    let mut archive = tar::Archive::new(BufReader::with_capacity(1 << 20, f));
    let mut entries = archive
        .entries()
        .map_err(|e| refuse(format!("it is not a tar archive: {e}")))?;

    // The manifest, first.
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
    if manifest.version != VERSION {
        return Err(refuse(format!(
            "it is archive format version {}; this swe-ark reads version {VERSION}",
            manifest.version
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
    for dir in ["bundles", "objects", "mirrors", "repos"] {
        let d = staging.join(dir);
        fs::create_dir_all(&d).map_err(io_err(&d))?;
    }
    let total: u64 = manifest.members.iter().map(|m| m.size).sum();
    progress.start("importing", Some(total));

    // Each member in turn, streamed to staging and hashed; bundles are hashed whole by
    // workers while the next members arrive.
    // As many as there are cores: the reading thread mostly waits on I/O.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let failed = AtomicBool::new(false);
    let checked: Mutex<Vec<(Sha256Digest, Result<BundleCheck, String>)>> = Mutex::new(Vec::new());
    let (tx, rx) = mpsc::channel::<(Sha256Digest, PathBuf)>();
    let rx = Mutex::new(rx);
    let mut release_bytes = Vec::new();
    let mut index_bytes = Vec::new();
    let mut bundle_files = BTreeMap::new();
    let mut objects = BTreeMap::new();
    let mut mirror_files = BTreeMap::new();
    let streamed: Result<(), ArchiveError> = std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
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
            });
        }
        let n = manifest.members.len();
        let result = (|| {
            for (i, (m, part)) in manifest.members.iter().zip(&parts).enumerate() {
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
                let short = |got: u64| {
                    refuse(format!(
                        "{what} is cut short ({got} of {} bytes): the file is truncated",
                        m.size
                    ))
                };
                let (sha, got) = match part {
                    Part::Release | Part::Index => {
                        let b = read_small(&mut entry, size)
                            .map_err(|e| refuse(format!("{what} cannot be read: {e}")))?;
                        progress.advance(b.len() as u64);
                        let r = (Sha256Digest::of(&b), b.len() as u64);
                        if *part == Part::Release {
                            release_bytes = b;
                        } else {
                            index_bytes = b;
                        }
                        r
                    }
                    Part::Bundle(id) => {
                        let dest = staging.join("bundles").join(format!(
                            "{}{}",
                            id.hex(),
                            bundle::FILE_SUFFIX
                        ));
                        let r = copy_hashed(&mut entry, &dest, progress)
                            .map_err(|e| refuse(format!("{what} cannot be staged: {e}")))?;
                        bundle_files.insert(*id, dest);
                        r
                    }
                    Part::Object(id) => {
                        let dest = staging.join("objects").join(id.hex());
                        let r = copy_hashed(&mut entry, &dest, progress)
                            .map_err(|e| refuse(format!("{what} cannot be staged: {e}")))?;
                        objects.insert(*id, (dest, r.1));
                        r
                    }
                    Part::Mirror(name) => {
                        let dest = staging
                            .join("mirrors")
                            .join(format!("{}.bundle", name.dir_name()));
                        let r = copy_hashed(&mut entry, &dest, progress)
                            .map_err(|e| refuse(format!("{what} cannot be staged: {e}")))?;
                        mirror_files.insert(name.clone(), dest);
                        r
                    }
                };
                if got != m.size {
                    return Err(short(got));
                }
                if sha != m.sha256 {
                    return Err(refuse(format!(
                        "{what} hashes to {sha}, the manifest says {}: the file was altered \
                         or damaged",
                        m.sha256
                    )));
                }
                if let Part::Object(id) = part
                    && *id != sha
                {
                    return Err(refuse(format!(
                        "{what} holds content that hashes to {sha}, not to the object id it \
                         is named by"
                    )));
                }
                if let Part::Bundle(id) = part {
                    let _ = tx.send((*id, bundle_files[id].clone()));
                }
            }
            match entries.next() {
                None => Ok(()),
                Some(Ok(e)) => Err(refuse(format!(
                    "it holds `{}` after the last member its manifest lists",
                    String::from_utf8_lossy(&e.path_bytes())
                ))),
                Some(Err(e)) => Err(refuse(format!(
                    "it has unreadable data after its last member: {e}"
                ))),
            }
        })();
        if result.is_err() {
            failed.store(true, Ordering::SeqCst);
        }
        drop(tx);
        result
    });
    progress.finish();
    streamed?;
    let mut bundle_checks = BTreeMap::new();
    let mut bad = Vec::new();
    for (id, r) in checked.into_inner().unwrap_or_else(|p| p.into_inner()) {
        match r {
            Ok(c) => {
                bundle_checks.insert(id, c);
            }
            Err(e) => bad.push(e),
        }
    }
    if !bad.is_empty() {
        bad.sort();
        return Err(refuse(format!(
            "{} bundle(s) do not match their ids: {}",
            bad.len(),
            bad.join("; ")
        )));
    }

    // The snapshot, and what it says must be here.
    let snapshot =
        Snapshot::parse(&release_bytes).map_err(|e| refuse(format!("{RELEASE}: {e}")))?;
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
    let slice: IndexSlice = serde_json::from_slice(&index_bytes)
        .map_err(|e| refuse(format!("{INDEX} is not valid: {e}")))?;

    let mut bundles = BTreeMap::new();
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
        bundles.insert(inst.bundle, (path, check));
    }
    if let Some(extra) = bundle_files.keys().next() {
        return Err(refuse(format!(
            "bundle {extra} is in the file but not in the release"
        )));
    }
    check_slice(&snapshot, &slice, &bundles, &objects).map_err(&refuse)?;

    // Each lock's needs must be here, and be what the release lists.
    for inst in &snapshot.instances {
        let Some((_, check)) = bundles.get(&inst.bundle) else {
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
        if let Some(o) = needed.iter().find(|o| !objects.contains_key(o)) {
            return Err(refuse(format!(
                "object {o}, which the lock of {} needs, is not in the file",
                inst.instance_id
            )));
        }
    }

    // Git bundles: read into mirrors in staging (git checks each pack), pins checked.
    let mut mirrors = BTreeMap::new();
    let url_of: BTreeMap<&str, &str> = slice
        .mirrors
        .iter()
        .map(|m| (m.name.as_str(), m.url.as_str()))
        .collect();
    for (name, bundle_file) in mirror_files {
        let url = url_of.get(name.as_str()).copied().filter(|u| !u.is_empty());
        let (m, _) =
            mirror::import_bundle(&staging.join("repos"), &bundle_file, &name, url, progress)
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
    Ok(Staged {
        snapshot,
        slice,
        bundles,
        objects,
        mirrors,
        bytes,
    })
}

/// The index slice must describe exactly the release's bundles, instances and objects.
fn check_slice(
    snapshot: &Snapshot,
    slice: &IndexSlice,
    bundles: &BTreeMap<Sha256Digest, (PathBuf, BundleCheck)>,
    objects: &BTreeMap<Sha256Digest, (PathBuf, u64)>,
) -> Result<(), String> {
    let ids: BTreeSet<&str> = snapshot
        .instances
        .iter()
        .map(|i| i.instance_id.as_str())
        .collect();
    // Objects: exactly those in the file, each once, sizes as staged.
    let listed: BTreeMap<Sha256Digest, u64> =
        slice.objects.iter().map(|o| (o.id, o.size)).collect();
    if listed.len() != slice.objects.len() {
        return Err(format!("{INDEX} lists an object twice"));
    }
    for (id, (_, size)) in objects {
        match listed.get(id) {
            Some(s) if s == size => {}
            Some(s) => {
                return Err(format!(
                    "{INDEX} says object {id} is {s} bytes; it is {size}"
                ));
            }
            None => return Err(format!("{INDEX} does not list object {id}")),
        }
    }
    if let Some(id) = listed.keys().find(|id| !objects.contains_key(id)) {
        return Err(format!(
            "{INDEX} lists object {id}, which the file does not hold"
        ));
    }
    for o in snapshot.objects() {
        if !objects.contains_key(&o) {
            return Err(format!(
                "object {o}, which the release lists, is not in the file"
            ));
        }
    }
    // Bundles: one row per release bundle, as the bundle itself says.
    if slice.bundles.len() != bundles.len() {
        return Err(format!(
            "{INDEX} lists {} bundle(s), the release has {}",
            slice.bundles.len(),
            bundles.len()
        ));
    }
    for b in &slice.bundles {
        let Some((_, c)) = bundles.get(&b.id) else {
            return Err(format!(
                "{INDEX} lists bundle {}, which is not in the release",
                b.id
            ));
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
            return Err(format!(
                "{INDEX}'s row of bundle {} does not match the bundle",
                b.id
            ));
        }
    }
    // Instances: each release instance once, as its bundle's instance.json holds it.
    let mut seen = BTreeSet::new();
    for v in &slice.instances {
        let inst = Instance::from_value(v.clone())
            .map_err(|e| format!("{INDEX} holds an instance that is not valid: {e}"))?;
        let Some(ri) = snapshot
            .instances
            .iter()
            .find(|i| i.instance_id == inst.instance_id)
        else {
            return Err(format!(
                "{INDEX} holds instance {}, which is not in the release",
                inst.instance_id
            ));
        };
        if !seen.insert(inst.instance_id.clone()) {
            return Err(format!("{INDEX} holds instance {} twice", inst.instance_id));
        }
        let want = bundles
            .get(&ri.bundle)
            .and_then(|(_, c)| c.manifest.member("instance.json"))
            .map(|m| m.sha256);
        if want != Some(Sha256Digest::of(&inst.to_canonical_json())) {
            return Err(format!(
                "{INDEX}'s instance {} is not the one its bundle holds",
                inst.instance_id
            ));
        }
    }
    if seen.len() != ids.len() {
        return Err(format!(
            "{INDEX} holds {} of the release's {} instances",
            seen.len(),
            ids.len()
        ));
    }
    // Locks and validations name objects in the file and instances of the release.
    for l in &slice.locks {
        if !objects.contains_key(&l.id) {
            return Err(format!(
                "{INDEX} lists lock {}, whose file is not in the archive file",
                l.id
            ));
        }
    }
    for v in &slice.validations {
        if !ids.contains(v.instance_id.as_str()) {
            return Err(format!(
                "{INDEX} holds a validation of {}, which is not in the release",
                v.instance_id
            ));
        }
        for o in [Some(v.results), v.log_pre, v.log_post]
            .into_iter()
            .flatten()
        {
            if !objects.contains_key(&o) {
                return Err(format!(
                    "the validation of {} names object {o}, which the file does not hold",
                    v.instance_id
                ));
            }
        }
    }
    let mirrors: BTreeSet<&str> = slice.mirrors.iter().map(|m| m.name.as_str()).collect();
    for p in &slice.pins {
        if !mirrors.contains(p.mirror.as_str()) || !ids.contains(p.instance_id.as_str()) {
            return Err(format!(
                "{INDEX} holds pin {} of mirror {}, which the file does not carry",
                p.reference, p.mirror
            ));
        }
    }
    Ok(())
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
    if let Ok(old) = Snapshot::read(&registered)
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
    dirs.insert(root.join("objects").join("sha256"));
    // Bundles go into the deduplicated store, each one's pieces recorded as it is stored so
    // that the next finds them as delta bases; the bundles themselves are listed in the one
    // transaction below, in the order of their ids.
    let present: BTreeSet<Sha256Digest> = ark.index().bundles()?.iter().map(|b| b.id).collect();
    let mut stored_rows = Vec::new();
    let mut pending = Vec::new();
    let options = PackOptions::default();
    for (id, (path, _)) in &staged.bundles {
        if present.contains(id) {
            continue;
        }
        let (row, sketch) = ark.store_for_import(path, *id, &pending, &options, progress)?;
        bundles_added += 1;
        stored_rows.push((row, sketch.sketch.clone()));
        pending.push(sketch);
    }
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
    for d in &dirs {
        if d.is_dir() {
            fsutil::sync_dir(d).map_err(io_err(d))?;
        }
    }
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
    ark.register_release(name, &staged.snapshot.to_bytes())?;
    ark.index_mut().import_rows(&rows)?;
    Ok(ImportReport {
        release: staged.snapshot.name.clone(),
        root: staged.snapshot.root,
        instances: staged.snapshot.instances.len(),
        bundles_added,
        bundles_present: staged.bundles.len() - bundles_added,
        objects_added,
        objects_present: staged.objects.len() - objects_added,
        mirrors: staged.mirrors.keys().map(|m| m.to_string()).collect(),
        bytes: staged.bytes,
    })
}
