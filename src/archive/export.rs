//! `export`: a release, and everything an evaluation of it needs, as one file. The same
//! release from the same archive gives the same bytes: fixed member order, fixed tar
//! metadata, no times.

mod incremental;
mod installed;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::bundle::{self, MemberKind, PackOptions, TarWriter};
use crate::dataset::Instance;
use crate::digest::{Sha256Digest, Sha256Hasher};
use crate::fsutil;
use crate::mirror::{Mirror, RepoName};
use crate::progress::Progress;
use crate::release::{self, Snapshot};
use crate::store::{Ark, BundleRow, Carried, LockRow, ObjectStore, ValidationRow};

use super::slice::{
    IndexSlice, SliceBundle, SliceLock, SliceMirror, SliceObject, SlicePin, SliceValidation,
};
use super::{
    ArchiveError, ArchiveManifest, ArchiveMember, BaseRelease, FORMAT, Part,
    SELF_CONTAINED_VERSION, VERSION, io_err,
};
use incremental::{Held, held_by_base, narrow_to_new};

#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// Add a git bundle of each instance's repository mirror (its whole history).
    pub with_history: bool,
    /// Write version 1: every bundle as its exchange file, for readers without swe-ark.
    pub self_contained: bool,
    /// Write only what a receiver that imported this release lacks (an incremental file).
    pub since: Option<Snapshot>,
    /// Write a shard file: the stamp goes into the manifest, and the index slice also carries
    /// the instances it lists as not kept or not run, with their validations.
    pub shard: Option<super::ShardStamp>,
    /// Also carry the installed states of the instances the file carries (not in shard files).
    pub installed_states: bool,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ExportReport {
    pub path: PathBuf,
    pub release: String,
    pub root: Sha256Digest,
    /// The file's format version: 2, the store form; 1, self-contained.
    pub version: u32,
    /// An incremental file's base release.
    pub base: Option<String>,
    /// The file's size.
    pub bytes: u64,
    /// The members' sizes added up (the manifest included).
    pub parts_bytes: u64,
    pub instances: usize,
    pub bundles: usize,
    /// Version 2: the packs carried, how many of them were cut down, and their pieces.
    pub packs: usize,
    pub packs_cut: usize,
    pub pieces: usize,
    pub objects: usize,
    pub mirrors: usize,
    /// The installed states carried (`--installed-states`), and their objects' bytes.
    pub installed_states: usize,
    pub installed_state_bytes: u64,
    /// What the other side should know (a lock without a packed interpreter, say).
    pub notes: Vec<String>,
}

/// Where a member's bytes come from.
enum Source {
    Bytes(Vec<u8>),
    Object(Sha256Digest),
    File(PathBuf),
}

struct Planned {
    part: Part,
    source: Source,
}

/// Start writing the file to disk after this many bytes, so the final fsync waits less.
const WRITEBACK_EVERY: u64 = 32 << 20;

/// A reader that hands a copy of every chunk it reads to the hashing thread.
struct Tee<'a, R: Read + ?Sized> {
    inner: &'a mut R,
    tx: &'a std::sync::mpsc::SyncSender<Option<Vec<u8>>>,
}

impl<R: Read + ?Sized> Read for Tee<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 {
            self.tx
                .send(Some(buf[..n].to_vec()))
                .map_err(|_| io::Error::other("the hashing thread stopped"))?;
        }
        Ok(n)
    }
}

/// The error of exporting `snap`'s release, saying why.
fn export_error(snap: &Snapshot, detail: String) -> ArchiveError {
    ArchiveError::Export {
        release: snap.name.clone(),
        detail,
    }
}

/// What the release's instances bring into the file: the index slice (instances, bundles,
/// locks, validations), every object it carries (id → kind), the repositories, notes for the
/// other side, and the rows of the bundles.
#[derive(Default)]
struct Gathered {
    slice: IndexSlice,
    objects: BTreeMap<Sha256Digest, &'static str>,
    repos: BTreeSet<String>,
    notes: BTreeSet<String>,
    rows: BTreeMap<Sha256Digest, BundleRow>,
    /// The objects each instance brings (its lock's needs, the lock, its validation's).
    brings: BTreeMap<String, BTreeSet<Sha256Digest>>,
    /// Each instance's lock, when its bundle has one.
    locks_of: BTreeMap<String, Sha256Digest>,
}

/// The index's rows the instances refer to: locks by id, validations by instance.
struct Rows {
    locks: BTreeMap<Sha256Digest, LockRow>,
    validations: BTreeMap<String, ValidationRow>,
}

/// Everything the release's instances need, checked against the snapshot and the store.
fn gather(ark: &Ark, snap: &Snapshot) -> Result<Gathered, ArchiveError> {
    let store = ark.objects();
    let rows = Rows {
        locks: ark
            .index()
            .locks()?
            .into_iter()
            .map(|l| (l.id, l))
            .collect(),
        validations: ark
            .index()
            .validations()?
            .into_iter()
            .map(|v| (v.instance_id.clone(), v))
            .collect(),
    };
    let mut g = Gathered::default();
    let mut lock_reader = release::LockReader::new(ark);
    for inst in &snap.instances {
        gather_instance(ark, snap, inst, &rows, &mut lock_reader, &mut g)?;
    }
    g.slice.locks.sort_by_key(|l| l.id);
    g.slice.locks.dedup_by_key(|l| l.id);
    for o in snap.objects() {
        if !store.has(&o) {
            return Err(export_error(snap, format!("the archive lacks object {o}")));
        }
    }
    Ok(g)
}

/// A shard file's instances outside its release: each as the index holds it, with its
/// validation and the validation's objects when it ran.
fn gather_others(
    ark: &Ark,
    snap: &Snapshot,
    others: &BTreeSet<&str>,
    g: &mut Gathered,
) -> Result<(), ArchiveError> {
    let validations: BTreeMap<String, crate::store::ValidationRow> = ark
        .index()
        .validations()?
        .into_iter()
        .map(|v| (v.instance_id.clone(), v))
        .collect();
    for id in others {
        let instance = ark.index().instance(id)?.ok_or_else(|| {
            export_error(snap, format!("the archive does not hold instance {id}"))
        })?;
        add_task_files(ark, snap, &instance, g)?;
        g.slice.instances.push(instance.to_value());
        if let Some(v) = validations.get(*id) {
            add_validation(ark, snap, id, v, g)?;
        }
    }
    g.slice
        .instances
        .sort_by(|a, b| a["instance_id"].as_str().cmp(&b["instance_id"].as_str()));
    g.slice
        .validations
        .sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    Ok(())
}

/// The files of the task repository an instance was imported from (its `test_assets`, its
/// `Dockerfile`, the repository's `sweb.yaml`, …), kept as objects: they travel with it.
fn add_task_files(
    ark: &Ark,
    snap: &Snapshot,
    instance: &Instance,
    g: &mut Gathered,
) -> Result<(), ArchiveError> {
    let Some(record) = crate::dataset::TaskRecord::of(instance) else {
        return Ok(());
    };
    let store = ark.objects();
    let id = &instance.instance_id;
    for (path, kept) in record.files.iter().chain(&record.repo_files) {
        if !store.has(&kept.sha256) {
            let o = kept.sha256;
            let detail = format!("the task file `{path}` of {id} is object {o}, which is missing");
            return Err(export_error(snap, detail));
        }
        g.objects.entry(kept.sha256).or_insert("task-file");
        g.brings.entry(id.clone()).or_default().insert(kept.sha256);
    }
    Ok(())
}

/// An instance's validation row and the objects it names (results, logs).
fn add_validation(
    ark: &Ark,
    snap: &Snapshot,
    id: &str,
    v: &crate::store::ValidationRow,
    g: &mut Gathered,
) -> Result<(), ArchiveError> {
    let store = ark.objects();
    let logs = [
        (Some(v.results), "results"),
        (v.log_pre, "log"),
        (v.log_post, "log"),
    ];
    for (o, kind) in logs {
        if let Some(o) = o {
            if !store.has(&o) {
                return Err(export_error(
                    snap,
                    format!("the validation of {id} names object {o}, which the archive lacks"),
                ));
            }
            g.objects.entry(o).or_insert(kind);
            g.brings.entry(id.to_string()).or_default().insert(o);
        }
    }
    g.slice.validations.push(SliceValidation::from(v));
    Ok(())
}

/// One instance of the release: its bundle, its lock's objects, the instance as the bundle
/// holds it, and its validation.
fn gather_instance(
    ark: &Ark,
    snap: &Snapshot,
    inst: &release::ReleaseInstance,
    rows: &Rows,
    lock_reader: &mut release::LockReader,
    g: &mut Gathered,
) -> Result<(), ArchiveError> {
    let fail = |detail: String| export_error(snap, detail);
    let id = &inst.instance_id;
    let row = bundle_row(ark, snap, inst)?;
    let manifest = ark.bundle_manifest(&row)?;
    let needed = lock_objects(ark, snap, id, &row, rows, lock_reader, g)?;
    let listed: BTreeSet<Sha256Digest> = inst.objects.iter().copied().collect();
    if listed != needed {
        return Err(fail(format!(
            "the snapshot lists {} object(s) for {id} but its lock needs {} (`swe-ark \
             release verify` names them)",
            listed.len(),
            needed.len()
        )));
    }
    let instance = instance_of_bundle(ark, snap, id, &row, &manifest)?;
    add_task_files(ark, snap, &instance, g)?;
    g.repos.insert(instance.repo.clone());
    g.slice.instances.push(instance.to_value());
    g.slice.bundles.push(SliceBundle::from(&row));
    g.rows.insert(row.id, row.clone());
    if let Some(v) = rows.validations.get(id) {
        add_validation(ark, snap, id, v, g)?;
    }
    Ok(())
}

/// The index's row of the instance's bundle, which must be of that instance.
fn bundle_row(
    ark: &Ark,
    snap: &Snapshot,
    inst: &release::ReleaseInstance,
) -> Result<BundleRow, ArchiveError> {
    let fail = |detail: String| export_error(snap, detail);
    let id = &inst.instance_id;
    let row = ark
        .index()
        .bundles_with_prefix(&inst.bundle.hex())?
        .into_iter()
        .find(|b| b.id == inst.bundle)
        .ok_or_else(|| {
            fail(format!(
                "the archive does not hold bundle {} of {id}",
                inst.bundle
            ))
        })?;
    if &row.instance_id != id {
        return Err(fail(format!(
            "bundle {} is of instance {}, the snapshot says {id}",
            row.id, row.instance_id
        )));
    }
    Ok(row)
}

/// The objects the lock of bundle `row` needs (added to the file's, with the lock itself and
/// its row when the store has it): what the snapshot must list for the instance.
fn lock_objects(
    ark: &Ark,
    snap: &Snapshot,
    id: &str,
    row: &BundleRow,
    rows: &Rows,
    lock_reader: &mut release::LockReader,
    g: &mut Gathered,
) -> Result<BTreeSet<Sha256Digest>, ArchiveError> {
    let fail = |detail: String| export_error(snap, detail);
    let mut needed = BTreeSet::new();
    let Some(bundle_lock) = lock_reader.lock_of_bundle(&row.id)? else {
        return Ok(needed);
    };
    let lock_id = bundle_lock.id;
    g.locks_of.insert(id.to_string(), lock_id);
    let lock = bundle_lock
        .kind
        .read_lock(lock_id, &bundle_lock.bytes)
        .map_err(|e| {
            fail(format!(
                "the lock of {id} (in bundle {}) is not valid: {e}",
                row.id
            ))
        })?;
    for o in lock.objects() {
        needed.insert(o.id);
        g.objects.entry(o.id).or_insert(o.kind);
        g.brings.entry(id.to_string()).or_default().insert(o.id);
    }
    if let Some(needs) = lock.needs_from_machine() {
        g.notes.insert(format!(
            "lock {} carries no packed runtime (its interpreter, toolchain or node): the machine that replays it needs {needs}",
            lock_id.short(),
        ));
    }
    if ark.objects().has(&lock_id) {
        g.objects.entry(lock_id).or_insert("lock");
        g.brings.entry(id.to_string()).or_default().insert(lock_id);
        if let Some(l) = rows.locks.get(&lock_id) {
            g.slice.locks.push(SliceLock::from(l));
        }
    }
    Ok(needed)
}

/// The instance as its bundle holds it (the index may have a newer import).
fn instance_of_bundle(
    ark: &Ark,
    snap: &Snapshot,
    id: &str,
    row: &BundleRow,
    manifest: &bundle::Manifest,
) -> Result<Instance, ArchiveError> {
    let fail = |detail: String| export_error(snap, detail);
    let listed_instance = manifest
        .member("instance.json")
        .map(|m| m.sha256)
        .ok_or_else(|| fail(format!("bundle {} has no instance.json", row.id)))?;
    Ok(match ark.index().instance(id)? {
        Some(i) if Sha256Digest::of(&i.to_canonical_json()) == listed_instance => i,
        _ => {
            let source = ark.bundle(row)?;
            let members = bundle::read_fixed_members(&source, Some(row.id))?;
            let bytes = members
                .files
                .get("instance.json")
                .ok_or_else(|| fail(format!("bundle {} has no instance.json", row.id)))?;
            Instance::from_json(bytes)
                .map_err(|e| fail(format!("instance.json of bundle {}: {e}", row.id)))?
        }
    })
}

/// Mirrors (the instances' repositories and their submodules'), as git bundles, written to
/// `scratch`; their rows and the instances' pins go into the slice.
fn export_mirrors(
    ark: &Ark,
    snap: &Snapshot,
    repos: &BTreeSet<String>,
    scratch: &Path,
    slice: &mut IndexSlice,
    progress: &dyn Progress,
) -> Result<Vec<(RepoName, PathBuf)>, ArchiveError> {
    let fail = |detail: String| export_error(snap, detail);
    let mut mirror_files = Vec::new();
    let ids: BTreeSet<&str> = snap
        .instances
        .iter()
        .map(|i| i.instance_id.as_str())
        .collect();
    let mut names = BTreeSet::new();
    for repo in repos {
        names.insert(
            RepoName::parse(repo)
                .ok_or_else(|| fail(format!("repository `{repo}` is not OWNER/NAME")))?,
        );
    }
    // The submodules' mirrors too: those holding pins of the release's instances (`pack` pins
    // each submodule it carries), so that a rebuild elsewhere finds them.
    for m in ark.index().mirrors()? {
        if let Some(name) = RepoName::parse(&m.name)
            && !names.contains(&name)
            && ark
                .index()
                .pins(&m.name)?
                .iter()
                .any(|p| ids.contains(p.instance_id.as_str()))
        {
            names.insert(name);
        }
    }
    for name in names {
        let mirror = Mirror::open(&ark.mirrors_dir(), &name)
            .map_err(|e| fail(format!("--with-history needs the mirror of {name}: {e}")))?;
        let file = scratch.join(format!("{}.bundle", name.dir_name()));
        mirror.export_bundle(&file, progress)?;
        let url = ark
            .index()
            .mirror(name.as_str())?
            .map(|m| m.url)
            .unwrap_or_default();
        slice.mirrors.push(SliceMirror {
            name: name.to_string(),
            url,
        });
        for pin in ark.index().pins(name.as_str())? {
            if ids.contains(pin.instance_id.as_str()) {
                slice.pins.push(SlicePin::from(&pin));
            }
        }
        mirror_files.push((name, file));
    }
    Ok(mirror_files)
}

/// The plan's first members: the snapshot, and the index slice (its bytes to come).
fn metadata_parts(snap: &Snapshot) -> Vec<Planned> {
    vec![
        Planned {
            part: Part::Release,
            source: Source::Bytes(
                Snapshot {
                    created_at: None,
                    ..snap.clone()
                }
                .to_bytes(),
            ),
        },
        Planned {
            part: Part::Index,
            source: Source::Bytes(Vec::new()),
        },
    ]
}

/// The plan's last members: objects, then mirrors.
fn object_and_mirror_parts(
    plan: &mut Vec<Planned>,
    g: &Gathered,
    mirror_files: Vec<(RepoName, PathBuf)>,
) {
    for id in g.objects.keys() {
        plan.push(Planned {
            part: Part::Object(*id),
            source: Source::Object(*id),
        });
    }
    for (name, file) in mirror_files {
        plan.push(Planned {
            part: Part::Mirror(name),
            source: Source::File(file),
        });
    }
}

/// The self-contained plan (version 1): metadata, bundles, objects, mirrors, each group
/// sorted.
fn plan_self_contained(
    ark: &Ark,
    snap: &Snapshot,
    g: &mut Gathered,
    mirror_files: Vec<(RepoName, PathBuf)>,
    scratch: &Path,
) -> Result<Vec<Planned>, ArchiveError> {
    let mut plan = metadata_parts(snap);
    for b in &mut g.slice.bundles {
        // Version 1 names no pieces.
        b.manifest_piece = None;
    }
    // Each bundle in its exchange form, `<id>.tar.zst`, written from the store at the default
    // level: the same release gives the same file however the archive stores it.
    let bundles_dir = scratch.join("bundles");
    let ids: Vec<Sha256Digest> = g.rows.keys().copied().collect();
    for id in &ids {
        let row = &g.rows[id];
        let file = ark.export_bundle(row, &bundles_dir, &PackOptions::default())?;
        // The index slice gives the size of the file as it is here, whatever the archive's
        // store spent on the bundle.
        let size = std::fs::metadata(&file).map_err(io_err(&file))?.len();
        for b in g.slice.bundles.iter_mut().filter(|b| b.id == *id) {
            b.file_size = size;
        }
        plan.push(Planned {
            part: Part::Bundle(*id),
            source: Source::File(file),
        });
    }
    object_and_mirror_parts(&mut plan, g, mirror_files);
    Ok(plan)
}

/// The store plan (version 2): metadata, the piece table, the packs that carry exactly what
/// the bundles need and `held` lacks (whole, or cut down in `scratch`), objects, mirrors.
fn plan_store(
    ark: &Ark,
    snap: &Snapshot,
    g: &mut Gathered,
    held: &HashSet<Sha256Digest>,
    mirror_files: Vec<(RepoName, PathBuf)>,
    scratch: &Path,
) -> Result<(Vec<Planned>, Carried), ArchiveError> {
    let rows: Vec<BundleRow> = g.rows.values().cloned().collect();
    let carried = ark.carry(&rows, held, scratch, PackOptions::default().level)?;
    let frames: Vec<&[crate::store::Frame]> = carried.packs.iter().map(|p| &p.frames[..]).collect();
    let table = super::table::encode(&frames);
    if table.is_empty() {
        return Err(export_error(
            snap,
            "the piece table cannot be compressed".into(),
        ));
    }
    let mut at = 0;
    let mut pack_pieces = Vec::new();
    for p in &carried.packs {
        let n: usize = p.frames.iter().map(|f| f.piece_count()).sum();
        pack_pieces.push((p.size, carried.pieces[at..at + n].to_vec()));
        at += n;
    }
    let shares = super::pack_shares(&pack_pieces, &carried.needs);
    for b in &mut g.slice.bundles {
        b.file_size = shares.get(&b.id).copied().unwrap_or(0);
    }
    let mut plan = metadata_parts(snap);
    plan.push(Planned {
        part: Part::Pieces,
        source: Source::Bytes(table),
    });
    for p in &carried.packs {
        let name: Sha256Digest = p.name.parse().map_err(|_| {
            export_error(snap, format!("pack `{}` is not named by a sha256", p.name))
        })?;
        plan.push(Planned {
            part: Part::Pack(name),
            source: Source::File(p.path.clone()),
        });
    }
    object_and_mirror_parts(&mut plan, g, mirror_files);
    Ok((plan, carried))
}

/// The file a member's bytes are read from, if any (an object the archive keeps in its bucket
/// was fetched by [`size_parts`]).
fn path_of(store: &ObjectStore, s: &Source) -> Option<PathBuf> {
    match s {
        Source::Bytes(_) => None,
        Source::Object(id) => Some(store.locate(id).unwrap_or_else(|| store.path_of(id))),
        Source::File(p) => Some(p.clone()),
    }
}

/// The members' sizes, with the index slice (whose objects need their sizes) put in the plan
/// first, and the manifest with its hashes still to come.
fn size_parts(
    store: &ObjectStore,
    snap: &Snapshot,
    g: &mut Gathered,
    plan: &mut [Planned],
    version: u32,
    base: Option<BaseRelease>,
    shard: Option<super::ShardStamp>,
) -> Result<(Vec<u64>, ArchiveManifest), ArchiveError> {
    let mut sizes = Vec::with_capacity(plan.len());
    for p in plan.iter() {
        if let Source::Object(id) = &p.source {
            store.ensure(id)?;
        }
        sizes.push(match path_of(store, &p.source) {
            Some(f) => std::fs::metadata(&f).map_err(io_err(&f))?.len(),
            None => 0,
        });
    }
    let object_sizes: BTreeMap<Sha256Digest, u64> = plan
        .iter()
        .zip(&sizes)
        .filter_map(|(p, n)| match p.source {
            Source::Object(id) => Some((id, *n)),
            _ => None,
        })
        .collect();
    g.slice.objects = g
        .objects
        .iter()
        .map(|(id, kind)| SliceObject {
            id: *id,
            size: object_sizes.get(id).copied().unwrap_or(0),
            kind: kind.to_string(),
        })
        .collect();
    plan[1].source = Source::Bytes(g.slice.to_bytes());
    for (p, n) in plan.iter().zip(sizes.iter_mut()) {
        if let Source::Bytes(b) = &p.source {
            *n = b.len() as u64;
        }
    }
    let manifest = ArchiveManifest {
        format: FORMAT.to_string(),
        version,
        release: snap.name.clone(),
        root: snap.root,
        base,
        shard,
        members: plan
            .iter()
            .zip(&sizes)
            .map(|(p, n)| ArchiveMember {
                path: p.part.path(),
                size: *n,
                sha256: Sha256Digest([0; 32]),
            })
            .collect(),
    };
    Ok((sizes, manifest))
}

/// The members to write: the plan, each member's size and path in the manifest, and the store
/// objects are read from.
struct Members<'a> {
    plan: &'a [Planned],
    manifest: &'a ArchiveManifest,
    sizes: &'a [u64],
    store: &'a ObjectStore,
}

/// The tar of the placeholder manifest and every member, written to `file`, each member's
/// bytes also handed to `tx` (then a `None` after each member) for hashing.
fn write_members(
    file: std::fs::File,
    tmp_path: &Path,
    placeholder: &[u8],
    members: &Members,
    tx: &std::sync::mpsc::SyncSender<Option<Vec<u8>>>,
    progress: &dyn Progress,
) -> Result<std::fs::File, ArchiveError> {
    let Members {
        plan,
        manifest,
        sizes,
        store,
    } = members;
    let sync_handle = file.try_clone().map_err(io_err(tmp_path))?;
    let mut tar = TarWriter::new(BufWriter::with_capacity(1 << 20, file));
    tar.append(
        super::MANIFEST.as_bytes(),
        MemberKind::File,
        placeholder.len() as u64,
        b"",
        &mut &placeholder[..],
    )
    .map_err(io_err(Path::new(super::MANIFEST)))?;
    let mut unsynced = 0u64;
    for ((p, m), size) in plan.iter().zip(&manifest.members).zip(sizes.iter()) {
        let mut source: Box<dyn Read> = match (&p.source, path_of(store, &p.source)) {
            (Source::Bytes(b), _) => Box::new(&b[..]),
            (_, Some(f)) => {
                let r = std::fs::File::open(&f).map_err(io_err(&f))?;
                Box::new(BufReader::with_capacity(1 << 20, r))
            }
            (_, None) => Box::new(io::empty()),
        };
        let mut tee = Tee {
            inner: &mut source,
            tx,
        };
        tar.append(m.path.as_bytes(), MemberKind::File, *size, b"", &mut tee)
            .map_err(io_err(Path::new(&m.path)))?;
        let _ = tx.send(None);
        progress.advance(*size);
        unsynced += size;
        if unsynced >= WRITEBACK_EVERY {
            fsutil::start_writeback(&sync_handle);
            unsynced = 0;
        }
    }
    let w = tar.finish().map_err(io_err(tmp_path))?;
    w.into_inner().map_err(|e| io_err(tmp_path)(e.into_error()))
}

/// The hashes of the members, one per member, from the chunks `rx` hands over (a `None` ends
/// a member).
fn hash_members(rx: std::sync::mpsc::Receiver<Option<Vec<u8>>>) -> Vec<Sha256Digest> {
    let mut out = Vec::new();
    let mut h = Sha256Hasher::new();
    while let Ok(msg) = rx.recv() {
        match msg {
            Some(chunk) => h.update(&chunk),
            None => out.push(std::mem::replace(&mut h, Sha256Hasher::new()).finish()),
        }
    }
    out
}

/// The manifest's hashes, as the hashing thread took them; a store object whose bytes do not
/// hash to its id is corrupt.
fn fill_hashes(
    snap: &Snapshot,
    plan: &[Planned],
    manifest: &mut ArchiveManifest,
    hashed: Vec<Sha256Digest>,
) -> Result<(), ArchiveError> {
    if hashed.len() != plan.len() {
        return Err(export_error(
            snap,
            "the hashing thread stopped early".into(),
        ));
    }
    for ((p, m), sha) in plan.iter().zip(manifest.members.iter_mut()).zip(hashed) {
        if let Source::Object(id) = &p.source
            && *id != sha
        {
            return Err(ArchiveError::Object(crate::store::ObjectError::Corrupt {
                id: *id,
                actual: sha,
            }));
        }
        if let Part::Pack(name) = &p.part
            && *name != sha
        {
            return Err(export_error(
                snap,
                format!(
                    "pack {name} of the archive hashes to {sha}, not to its name: it is \
                     damaged (`swe-ark verify` checks the store)"
                ),
            ));
        }
        m.sha256 = sha;
    }
    Ok(())
}

/// Writes `snap`'s release from `ark` to `out` (atomically).
pub fn export(
    ark: &Ark,
    snap: &Snapshot,
    out: &Path,
    opts: &ExportOptions,
    progress: &dyn Progress,
) -> Result<ExportReport, ArchiveError> {
    let store = ark.objects();
    let (mut g, held) = gather_release(ark, snap, opts)?;
    if opts.installed_states && opts.shard.is_none() {
        installed::gather(ark, &mut g)?;
    }

    // Mirrors, as git bundles, written to scratch space first.
    let tmp = ark.tmp_dir();
    std::fs::create_dir_all(&tmp).map_err(io_err(&tmp))?;
    let scratch = crate::fsutil::work_dir(&tmp, &format!("{}export-", fsutil::TEMP_PREFIX))
        .map_err(io_err(&tmp))?;
    let mirror_files = if opts.with_history {
        export_mirrors(ark, snap, &g.repos, scratch.path(), &mut g.slice, progress)?
    } else {
        Vec::new()
    };
    let bundles = g.rows.len();
    let (mut plan, carried, version) = if opts.self_contained {
        let plan = plan_self_contained(ark, snap, &mut g, mirror_files, scratch.path())?;
        (plan, None, SELF_CONTAINED_VERSION)
    } else {
        let no_pieces = HashSet::new();
        let held_pieces = held.as_ref().map_or(&no_pieces, |h| &h.pieces);
        let (plan, carried) =
            plan_store(ark, snap, &mut g, held_pieces, mirror_files, scratch.path())?;
        (plan, Some(carried), VERSION)
    };
    let base = held.as_ref().map(|h| BaseRelease {
        release: h.release.clone(),
        root: h.root,
    });

    // Sizes first (the manifest is written first, with its hashes to come); the hashes are
    // computed while the file is written, on other threads, and the manifest written over
    // its placeholder at the end: one pass over the data, two cores busy.
    let (sizes, manifest) = size_parts(
        &store,
        snap,
        &mut g,
        &mut plan,
        version,
        base,
        opts.shard.clone(),
    )?;
    let (bytes, parts_bytes) = write_file(snap, out, &plan, &sizes, &store, manifest, progress)?;
    Ok(ExportReport {
        path: out.to_path_buf(),
        release: snap.name.clone(),
        root: snap.root,
        version,
        base: held.map(|h| h.release),
        bytes,
        parts_bytes,
        instances: snap.instances.len(),
        bundles,
        packs: carried.as_ref().map_or(0, |c| c.packs.len()),
        packs_cut: carried
            .as_ref()
            .map_or(0, |c| c.packs.iter().filter(|p| !p.whole).count()),
        pieces: carried.as_ref().map_or(0, |c| c.pieces.len()),
        objects: g.objects.len(),
        mirrors: g.slice.mirrors.len(),
        installed_states: g.slice.installed_states.len(),
        installed_state_bytes: g.slice.installed_states.iter().map(|s| s.size).sum(),
        notes: g.notes.into_iter().collect(),
    })
}

/// What the file of `snap`'s release carries, as `opts` asks: the snapshot's root checked,
/// the shard's other instances added, and for an incremental file, what its base holds left
/// out (with what the base holds).
fn gather_release(
    ark: &Ark,
    snap: &Snapshot,
    opts: &ExportOptions,
) -> Result<(Gathered, Option<Held>), ArchiveError> {
    let fail = |detail: String| export_error(snap, detail);
    let computed = snap.computed_root();
    if computed != snap.root {
        return Err(fail(format!(
            "the snapshot states root {} but its instances hash to {computed} (the file was \
             changed after it was made)",
            snap.root
        )));
    }
    let mut g = gather(ark, snap)?;
    if let Some(stamp) = &opts.shard {
        if opts.self_contained || opts.since.is_some() {
            return Err(fail(
                "a shard file is a whole file in the store form".into(),
            ));
        }
        gather_others(ark, snap, &stamp.others(), &mut g)?;
    }
    if opts.self_contained && opts.since.is_some() {
        return Err(fail(
            "an incremental file is in the store form: --incremental and --self-contained \
             do not go together"
                .into(),
        ));
    }
    let held = match &opts.since {
        Some(old) => {
            let held = held_by_base(ark, old)?;
            narrow_to_new(&mut g, &held);
            Some(held)
        }
        None => None,
    };
    Ok((g, held))
}

/// The file written beside `out` and renamed over it: the placeholder manifest and every
/// member, hashed on another thread as they are copied (a `Tee` hands each chunk over: one
/// read of the data, two cores busy), then the manifest with its hashes written over the
/// placeholder. Returns the file's size and the members' sizes added up.
fn write_file(
    snap: &Snapshot,
    out: &Path,
    plan: &[Planned],
    sizes: &[u64],
    store: &ObjectStore,
    mut manifest: ArchiveManifest,
    progress: &dyn Progress,
) -> Result<(u64, u64), ArchiveError> {
    let placeholder = manifest.to_bytes();
    let parts_bytes = placeholder.len() as u64 + sizes.iter().sum::<u64>();
    let dir = fsutil::parent_dir(out);
    let tmp_file = fsutil::temp_file_in(dir).map_err(io_err(dir))?;
    let tmp_path = tmp_file.path().to_path_buf();
    let file = tmp_file.as_file().try_clone().map_err(io_err(&tmp_path))?;
    progress.start("exporting", Some(parts_bytes));
    let (tx, rx) = std::sync::mpsc::sync_channel::<Option<Vec<u8>>>(16);
    let (written, hashed) = std::thread::scope(|scope| {
        let hasher = scope.spawn(move || hash_members(rx));
        let members = Members {
            plan,
            manifest: &manifest,
            sizes,
            store,
        };
        let written = write_members(file, &tmp_path, &placeholder, &members, &tx, progress);
        drop(tx);
        let hashed = hasher.join().unwrap_or_default();
        (written, hashed)
    });
    let mut file = written?;
    fill_hashes(snap, plan, &mut manifest, hashed)?;
    let manifest_bytes = manifest.to_bytes();
    if manifest_bytes.len() != placeholder.len() {
        return Err(export_error(
            snap,
            "the manifest changed length when its hashes were filled in".into(),
        ));
    }
    // The manifest's content starts after its one 512-byte header (its name is short).
    file.seek(SeekFrom::Start(512)).map_err(io_err(&tmp_path))?;
    file.write_all(&manifest_bytes).map_err(io_err(&tmp_path))?;
    drop(file);
    progress.finish();
    fsutil::persist(tmp_file, out).map_err(io_err(out))?;
    let bytes = std::fs::metadata(out).map_err(io_err(out))?.len();
    Ok((bytes, parts_bytes))
}
