//! `export`: a release, and everything an evaluation of it needs, as one file. The same
//! release from the same archive gives the same bytes: fixed member order, fixed tar
//! metadata, no times.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::bundle::{self, MemberKind, PackOptions, TarWriter};
use crate::dataset::Instance;
use crate::digest::{Sha256Digest, Sha256Hasher};
use crate::env::pylock::PyLock;
use crate::fsutil;
use crate::mirror::{Mirror, RepoName};
use crate::progress::Progress;
use crate::release::{self, Snapshot};
use crate::store::{Ark, BundleRow};

use super::slice::{
    IndexSlice, SliceBundle, SliceLock, SliceMirror, SliceObject, SlicePin, SliceValidation,
};
use super::{ArchiveError, ArchiveManifest, ArchiveMember, FORMAT, Part, VERSION, io_err};

#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// Add a git bundle of each instance's repository mirror (its whole history).
    pub with_history: bool,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ExportReport {
    pub path: PathBuf,
    pub release: String,
    pub root: Sha256Digest,
    /// The file's size.
    pub bytes: u64,
    /// The members' sizes added up (the manifest included).
    pub parts_bytes: u64,
    pub instances: usize,
    pub bundles: usize,
    pub objects: usize,
    pub mirrors: usize,
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

/// Writes `snap`'s release from `ark` to `out` (atomically).
pub fn export(
    ark: &Ark,
    snap: &Snapshot,
    out: &Path,
    opts: &ExportOptions,
    progress: &dyn Progress,
) -> Result<ExportReport, ArchiveError> {
    let fail = |detail: String| ArchiveError::Export {
        release: snap.name.clone(),
        detail,
    };
    let computed = snap.computed_root();
    if computed != snap.root {
        return Err(fail(format!(
            "the snapshot states root {} but its instances hash to {computed} (the file was \
             changed after it was made)",
            snap.root
        )));
    }
    let store = ark.objects();
    let locks: BTreeMap<Sha256Digest, _> = ark
        .index()
        .locks()?
        .into_iter()
        .map(|l| (l.id, l))
        .collect();
    let validations: BTreeMap<String, _> = ark
        .index()
        .validations()?
        .into_iter()
        .map(|v| (v.instance_id.clone(), v))
        .collect();
    let mut slice = IndexSlice::default();
    // Object id → kind, for every object the file carries.
    let mut objects: BTreeMap<Sha256Digest, &'static str> = BTreeMap::new();
    let mut repos = BTreeSet::new();
    let mut notes = BTreeSet::new();
    let mut lock_reader = release::LockReader::new(ark);
    let mut rows: BTreeMap<Sha256Digest, BundleRow> = BTreeMap::new();
    for inst in &snap.instances {
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
        let source = ark.bundle(&row)?;
        let manifest = bundle::read_manifest_from(&source)?;
        // The lock: what it needs must be what the snapshot lists.
        let mut needed = BTreeSet::new();
        if let Some((lock_id, lock)) = lock_reader.lock_of_bundle(&row.id)? {
            let parsed = PyLock::parse(&lock).map_err(|e| {
                fail(format!(
                    "the lock of {id} (in bundle {}) is not valid: {e}",
                    row.id
                ))
            })?;
            for (o, _, kind) in parsed.needed_objects().map_err(|e| {
                fail(format!(
                    "the lock of {id} (in bundle {}) is not valid: {e}",
                    row.id
                ))
            })? {
                needed.insert(o);
                objects.entry(o).or_insert(kind);
            }
            let python = &parsed.tool.swe_ark.python;
            if python.packed.is_none() {
                notes.insert(format!(
                    "lock {} carries no packed interpreter: the machine that replays it needs \
                     Python {} ({}) installed (lock with --pack-python to carry it)",
                    lock_id.short(),
                    python.version,
                    python.implementation
                ));
            }
            if store.has(&lock_id) {
                objects.entry(lock_id).or_insert("lock");
                if let Some(l) = locks.get(&lock_id) {
                    slice.locks.push(SliceLock::from(l));
                }
            }
        }
        let listed: BTreeSet<Sha256Digest> = inst.objects.iter().copied().collect();
        if listed != needed {
            return Err(fail(format!(
                "the snapshot lists {} object(s) for {id} but its lock needs {} (`swe-ark \
                 release verify` names them)",
                listed.len(),
                needed.len()
            )));
        }
        // The instance as its bundle holds it (the index may have a newer import).
        let listed_instance = manifest
            .member("instance.json")
            .map(|m| m.sha256)
            .ok_or_else(|| fail(format!("bundle {} has no instance.json", row.id)))?;
        let instance = match ark.index().instance(id)? {
            Some(i) if Sha256Digest::of(&i.to_canonical_json()) == listed_instance => i,
            _ => {
                let members = bundle::read_fixed_members(&source, Some(row.id))?;
                let bytes = members
                    .files
                    .get("instance.json")
                    .ok_or_else(|| fail(format!("bundle {} has no instance.json", row.id)))?;
                Instance::from_json(bytes)
                    .map_err(|e| fail(format!("instance.json of bundle {}: {e}", row.id)))?
            }
        };
        repos.insert(instance.repo.clone());
        slice.instances.push(instance.to_value());
        slice.bundles.push(SliceBundle::from(&row));
        rows.insert(row.id, row.clone());
        if let Some(v) = validations.get(id) {
            let logs = [
                (Some(v.results), "results"),
                (v.log_pre, "log"),
                (v.log_post, "log"),
            ];
            for (o, kind) in logs {
                if let Some(o) = o {
                    if !store.has(&o) {
                        return Err(fail(format!(
                            "the validation of {id} names object {o}, which the archive lacks"
                        )));
                    }
                    objects.entry(o).or_insert(kind);
                }
            }
            slice.validations.push(SliceValidation::from(v));
        }
    }
    slice.locks.sort_by_key(|l| l.id);
    slice.locks.dedup_by_key(|l| l.id);
    for o in snap.objects() {
        if !store.has(&o) {
            return Err(fail(format!("the archive lacks object {o}")));
        }
    }

    // Mirrors, as git bundles, written to scratch space first.
    let tmp = ark.tmp_dir();
    std::fs::create_dir_all(&tmp).map_err(io_err(&tmp))?;
    let scratch = tempfile::Builder::new()
        .prefix(&format!("{}export-", fsutil::TEMP_PREFIX))
        .tempdir_in(&tmp)
        .map_err(io_err(&tmp))?;
    let mut mirror_files = Vec::new();
    if opts.with_history {
        for repo in &repos {
            let name = RepoName::parse(repo)
                .ok_or_else(|| fail(format!("repository `{repo}` is not OWNER/NAME")))?;
            let mirror = Mirror::open(&ark.mirrors_dir(), &name)
                .map_err(|e| fail(format!("--with-history needs the mirror of {name}: {e}")))?;
            let file = scratch.path().join(format!("{}.bundle", name.dir_name()));
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
            let ids: BTreeSet<&str> = snap
                .instances
                .iter()
                .map(|i| i.instance_id.as_str())
                .collect();
            for pin in ark.index().pins(name.as_str())? {
                if ids.contains(pin.instance_id.as_str()) {
                    slice.pins.push(SlicePin::from(&pin));
                }
            }
            mirror_files.push((name, file));
        }
    }

    // The plan: metadata, bundles, objects, mirrors, each group sorted.
    let mut plan = vec![
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
    ];
    let mut bundle_ids: Vec<Sha256Digest> = snap.instances.iter().map(|i| i.bundle).collect();
    bundle_ids.sort();
    bundle_ids.dedup();
    // Each bundle in its exchange form, `<id>.tar.zst`, written from the store at the default
    // level: the same release gives the same file however the archive stores it.
    let bundles_dir = scratch.path().join("bundles");
    for id in &bundle_ids {
        let row = rows
            .get(id)
            .ok_or_else(|| fail(format!("bundle {id} is not in the index")))?;
        let file = ark.export_bundle(row, &bundles_dir, &PackOptions::default())?;
        // The index slice gives the size of the file as it is here, whatever the archive's
        // store spent on the bundle.
        let size = std::fs::metadata(&file).map_err(io_err(&file))?.len();
        for b in slice.bundles.iter_mut().filter(|b| b.id == *id) {
            b.file_size = size;
        }
        plan.push(Planned {
            part: Part::Bundle(*id),
            source: Source::File(file),
        });
    }
    for id in objects.keys() {
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

    // Sizes first (the manifest is written first, with its hashes to come); the hashes are
    // computed while the file is written, on other threads, and the manifest written over
    // its placeholder at the end: one pass over the data, two cores busy.
    let path_of = |s: &Source| -> Option<PathBuf> {
        match s {
            Source::Bytes(_) => None,
            Source::Object(id) => Some(store.path_of(id)),
            Source::File(p) => Some(p.clone()),
        }
    };
    let mut sizes = Vec::with_capacity(plan.len());
    for p in &plan {
        sizes.push(match path_of(&p.source) {
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
    slice.objects = objects
        .iter()
        .map(|(id, kind)| SliceObject {
            id: *id,
            size: object_sizes.get(id).copied().unwrap_or(0),
            kind: kind.to_string(),
        })
        .collect();
    plan[1].source = Source::Bytes(slice.to_bytes());
    for (p, n) in plan.iter().zip(sizes.iter_mut()) {
        if let Source::Bytes(b) = &p.source {
            *n = b.len() as u64;
        }
    }
    let mut manifest = ArchiveManifest {
        format: FORMAT.to_string(),
        version: VERSION,
        release: snap.name.clone(),
        root: snap.root,
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
    let placeholder = manifest.to_bytes();
    let parts_bytes = placeholder.len() as u64 + sizes.iter().sum::<u64>();

    let dir = fsutil::parent_dir(out);
    let tmp_file = fsutil::temp_file_in(dir).map_err(io_err(dir))?;
    let tmp_path = tmp_file.path().to_path_buf();
    let file = tmp_file.as_file().try_clone().map_err(io_err(&tmp_path))?;
    progress.start("exporting", Some(parts_bytes));
    // The hashes are taken on another thread from the bytes as they are copied (a
    // `Tee` hands each chunk over): one read of the data, two cores busy.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Option<Vec<u8>>>(16);
    let (written, hashed) = std::thread::scope(|scope| {
        let hasher = scope.spawn(move || {
            let mut out = Vec::new();
            let mut h = Sha256Hasher::new();
            while let Ok(msg) = rx.recv() {
                match msg {
                    Some(chunk) => h.update(&chunk),
                    None => out.push(std::mem::replace(&mut h, Sha256Hasher::new()).finish()),
                }
            }
            out
        });
        let written = (|| -> Result<std::fs::File, ArchiveError> {
            let sync_handle = file.try_clone().map_err(io_err(&tmp_path))?;
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
            for ((p, m), size) in plan.iter().zip(&manifest.members).zip(&sizes) {
                let mut source: Box<dyn Read> = match (&p.source, path_of(&p.source)) {
                    (Source::Bytes(b), _) => Box::new(&b[..]),
                    (_, Some(f)) => {
                        let r = std::fs::File::open(&f).map_err(io_err(&f))?;
                        Box::new(BufReader::with_capacity(1 << 20, r))
                    }
                    (_, None) => Box::new(io::empty()),
                };
                let mut tee = Tee {
                    inner: &mut source,
                    tx: &tx,
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
            let w = tar.finish().map_err(io_err(&tmp_path))?;
            w.into_inner()
                .map_err(|e| io_err(&tmp_path)(e.into_error()))
        })();
        drop(tx);
        let hashed = hasher.join().unwrap_or_default();
        (written, hashed)
    });
    let mut file = written?;
    if hashed.len() != plan.len() {
        return Err(fail("the hashing thread stopped early".into()));
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
        m.sha256 = sha;
    }
    let manifest_bytes = manifest.to_bytes();
    if manifest_bytes.len() != placeholder.len() {
        return Err(fail(
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
    Ok(ExportReport {
        path: out.to_path_buf(),
        release: snap.name.clone(),
        root: snap.root,
        bytes,
        parts_bytes,
        instances: snap.instances.len(),
        bundles: bundle_ids.len(),
        objects: objects.len(),
        mirrors: slice.mirrors.len(),
        notes: notes.into_iter().collect(),
    })
}
