//! An archive directory and the operations that touch both its files and its index.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::bundle::{
    self, BundleError, BundleFile, BundleSource, Limits, MANIFEST, PackInputs, PackOptions,
    PackedBundle,
};
use crate::dataset::Instance;
use crate::digest::{Sha256Digest, Sha256Hasher};
use crate::progress::{NoProgress, Progress};

use super::bucket::{Bucket, Fetch, PushReport};
use super::index::{BundleRow, BundleSketch, Index, IndexError, StoredParts};
use super::lock::StoreLock;
use super::objects::ObjectStore;
use super::pieces::{PACK_SUFFIX, PieceError, PieceReader};
use super::put::{self, Collected};
use super::stored::{RebuiltTar, StoredBundle};

#[derive(Debug, thiserror::Error)]
pub enum ArkError {
    #[error(
        "`{0}` is not a swe-ark archive (it has no index.sqlite); pack something into it first, \
         or point --ark / SWE_ARK_HOME at an archive"
    )]
    NotAnArchive(PathBuf),
    #[error(
        "no bundle in the archive matches `{0}` (give a bundle id, a unique prefix of one, or an instance id)"
    )]
    NoSuchBundle(String),
    #[error("no release `{name}` is registered in the archive (registered: {})", if .known.is_empty() { "none".to_string() } else { .known.join(", ") })]
    NoSuchRelease { name: String, known: Vec<String> },
    #[error("`{query}` matches {} bundles ({}); give more digits", .candidates.len(), .candidates.join(", "))]
    Ambiguous {
        query: String,
        candidates: Vec<String>,
    },
    #[error("archive I/O on `{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "another swe-ark process is using the archive `{0}` (a pack, a read, a replay); gc needs \
         it alone: run gc again when that process has ended"
    )]
    Busy(PathBuf),
    #[error(
        "bundle {bundle} is named by release snapshot(s) {}; a bundle a release names is not removed",
        .releases.join(", ")
    )]
    HeldByRelease {
        bundle: Sha256Digest,
        releases: Vec<String>,
    },
    #[error("bundle {bundle} cannot be stored: {detail}")]
    NotStored {
        bundle: Sha256Digest,
        detail: String,
    },
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Config(Box<super::ConfigError>),
    #[error("the archive's bucket: {0}")]
    Remote(Box<crate::remote::RemoteError>),
    #[error("cannot clone the mirror of {name} fetched from {url}: {source}")]
    MirrorFromBucket {
        name: String,
        url: String,
        #[source]
        source: Box<crate::mirror::MirrorError>,
    },
    #[error(transparent)]
    Bundle(#[from] BundleError),
    #[error(transparent)]
    Piece(#[from] PieceError),
}

pub struct Ark {
    root: PathBuf,
    index: Index,
    /// The bucket that holds the objects and packs, and where what a read misses is fetched
    /// into (`store_url`, `--store`).
    fetch: Option<Fetch>,
}

/// A bundle of the archive, ready to read: from the deduplicated store, or a whole file
/// kept from before. Holds the store lock shared while it lives, so gc leaves it alone.
pub struct ArkBundle {
    held: Held,
    _lock: Option<StoreLock>,
}

enum Held {
    Stored(Box<StoredBundle>),
    File(BundleFile, Sha256Digest),
}

impl ArkBundle {
    /// Whether the bundle is in the deduplicated store (not a whole file from before).
    pub fn is_stored(&self) -> bool {
        matches!(self.held, Held::Stored(_))
    }

    /// The uncompressed tar, which fails at its end unless it hashes to the bundle's id.
    pub fn tar<'a>(
        &'a self,
        progress: &'a dyn Progress,
    ) -> Result<Box<dyn Read + Send + 'a>, BundleError> {
        match &self.held {
            Held::Stored(s) => Ok(Box::new(s.tar(progress))),
            Held::File(f, id) => Ok(Box::new(Checked {
                inner: f.open(progress)?,
                hasher: Some(Sha256Hasher::new()),
                expected: *id,
            })),
        }
    }

    fn source(&self) -> &dyn BundleSource {
        match &self.held {
            Held::Stored(s) => s.as_ref(),
            Held::File(f, _) => f,
        }
    }
}

impl BundleSource for ArkBundle {
    fn name(&self) -> &Path {
        self.source().name()
    }
    fn progress_total(&self) -> Option<u64> {
        self.source().progress_total()
    }
    fn open<'p>(
        &'p self,
        progress: &'p dyn Progress,
    ) -> Result<Box<dyn Read + Send + 'p>, BundleError> {
        self.source().open(progress)
    }
    fn stream_error(&self, detail: String) -> BundleError {
        self.source().stream_error(detail)
    }
}

/// Hashes as it reads; at the end, a stream that is not the expected bundle is an error.
struct Checked<R> {
    inner: R,
    hasher: Option<Sha256Hasher>,
    expected: Sha256Digest,
}

impl<R: Read> Read for Checked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 {
            if let Some(h) = self.hasher.as_mut() {
                h.update(&buf[..n]);
            }
        } else if !buf.is_empty()
            && let Some(h) = self.hasher.take()
        {
            let actual = h.finish();
            if actual != self.expected {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "the bundle hashes to {actual}, not to its id {}",
                        self.expected
                    ),
                ));
            }
        }
        Ok(n)
    }
}

impl From<super::ConfigError> for ArkError {
    fn from(e: super::ConfigError) -> Self {
        ArkError::Config(Box::new(e))
    }
}

impl From<crate::remote::RemoteError> for ArkError {
    fn from(e: crate::remote::RemoteError) -> Self {
        ArkError::Remote(Box::new(e))
    }
}

impl Ark {
    /// Opens the archive at `root`, creating it if it does not exist.
    pub fn create(root: &Path) -> Result<Ark, ArkError> {
        let layout = super::Layout::new(root);
        for dir in [root.to_path_buf(), layout.packs(), layout.objects()] {
            fs::create_dir_all(&dir).map_err(|source| ArkError::Io { path: dir, source })?;
        }
        Self::open(root)
    }

    /// Opens an existing archive.
    pub fn open(root: &Path) -> Result<Ark, ArkError> {
        let layout = super::Layout::new(root);
        let index_path = layout.index();
        if !index_path.is_file() && !layout.bundles().is_dir() && !layout.packs().is_dir() {
            return Err(ArkError::NotAnArchive(root.to_path_buf()));
        }
        Ark::with_index(root, Index::open(&index_path)?)
    }

    /// The archive at `root` with `index`, and the bucket its configuration names.
    fn with_index(root: &Path, index: Index) -> Result<Ark, ArkError> {
        let mut ark = Ark {
            root: root.to_path_buf(),
            index,
            fetch: None,
        };
        if let Some(url) = super::store_url(&ark.layout())? {
            ark.use_store(&url)?;
        }
        Ok(ark)
    }

    /// Opens an existing archive to read its index only, writing nothing
    /// ([`Index::open_read_only`]): a seed archive another machine shares.
    pub fn open_read_only(root: &Path) -> Result<Ark, ArkError> {
        let index_path = super::Layout::new(root).index();
        if !index_path.is_file() {
            return Err(ArkError::NotAnArchive(root.to_path_buf()));
        }
        Ark::with_index(root, Index::open_read_only(&index_path)?)
    }

    /// Keeps the archive's objects and packs in the bucket at `url` (`s3://BUCKET/PREFIX`):
    /// what a read misses here is fetched from it into the archive's own directories.
    pub fn use_store(&mut self, url: &str) -> Result<(), ArkError> {
        let layout = self.layout();
        self.fetch = Some(Fetch {
            bucket: Arc::new(Bucket::open(url)?),
            objects: layout.objects(),
            packs: layout.packs(),
        });
        Ok(())
    }

    /// Fetches what reads of this (read-only) archive miss into `into`'s directories instead
    /// of its own: objects into `into`'s object store (they are named by content, so any
    /// archive may hold them), packs into `into`'s `cache/fetched-packs/`.
    pub fn fetch_into(&mut self, into: &super::Layout) {
        if let Some(f) = &mut self.fetch {
            f.objects = into.objects();
            f.packs = into.fetched_packs();
        }
    }

    /// Clones the mirror of `name` from the bucket into `mirrors_dir` (staged in `scratch`),
    /// as this archive's index records it; false when there is no bucket, no such mirror in
    /// the index, or the bucket does not hold it.
    pub fn mirror_from_bucket(
        &self,
        name: &crate::mirror::RepoName,
        mirrors_dir: &Path,
        scratch: &Path,
        progress: &dyn Progress,
    ) -> Result<bool, ArkError> {
        let (Some(fetch), Some(row)) = (&self.fetch, self.index.mirror(&name.to_string())?) else {
            return Ok(false);
        };
        let remote_name = super::bucket::mirror_name(&name.dir_name(), &row.refs_sha256);
        let Some(dir) = fetch.bucket.fetch_mirror(&remote_name, scratch)? else {
            return Ok(false);
        };
        let url = dir.path().to_string_lossy().into_owned();
        crate::mirror::Mirror::add(mirrors_dir, name, &url, progress).map_err(|source| {
            ArkError::MirrorFromBucket {
                name: name.to_string(),
                url: fetch.bucket.url().to_string(),
                source: Box::new(source),
            }
        })?;
        Ok(true)
    }

    /// The bucket that holds the archive's objects and packs, if any.
    pub fn bucket(&self) -> Option<&Bucket> {
        self.fetch.as_ref().map(|f| f.bucket.as_ref())
    }

    /// A reader of the archive's pieces (fetching packs from the bucket, if any).
    pub fn piece_reader(&self) -> PieceReader {
        PieceReader::new(self.packs_dir()).with_fetch(self.fetch.clone())
    }

    /// Uploads the objects and packs the bucket lacks, each checked against its name before
    /// the upload completes; with `drop_local`, then removes the local copies the bucket holds
    /// (reads fetch them again). Without a bucket, does nothing.
    pub fn push_store(
        &self,
        drop_local: bool,
        progress: &dyn Progress,
    ) -> Result<PushReport, ArkError> {
        let Some(fetch) = &self.fetch else {
            return Ok(PushReport::default());
        };
        let layout = self.layout();
        let local = local_files(&layout.objects(), &layout.packs())?;
        let held: std::collections::BTreeSet<String> =
            fetch.bucket.listing()?.into_iter().collect();
        let mut report = PushReport::default();
        let missing: Vec<_> = local
            .iter()
            .filter(|(_, n, _)| !held.contains(n))
            .cloned()
            .collect();
        report.held = (local.len() - missing.len()) as u64;
        let total = missing
            .iter()
            .map(|(p, _, _)| fs::metadata(p).map(|m| m.len()).unwrap_or(0))
            .sum();
        progress.start("uploading to the bucket", Some(total));
        let sizes = fetch.bucket.send_all(&missing, |n| progress.advance(n))?;
        report.sent = sizes.len() as u64;
        report.sent_bytes = sizes.iter().sum();
        progress.finish();
        // Mirrors, each as it stands in the index, unless the bucket holds that state.
        for m in self.index.mirrors()? {
            let Some(name) = crate::mirror::RepoName::parse(&m.name) else {
                continue;
            };
            let dir = crate::mirror::Mirror::dir(&self.mirrors_dir(), &name);
            let remote_name = super::bucket::mirror_name(&name.dir_name(), &m.refs_sha256);
            if !dir.is_dir() || fetch.bucket.holds(&remote_name)? {
                continue;
            }
            report.sent_bytes += fetch
                .bucket
                .send_mirror(&dir, &remote_name, &self.tmp_dir())?;
            report.sent += 1;
            report.mirrors += 1;
        }
        if drop_local {
            for (path, _, _) in &local {
                let size = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
                match fs::remove_file(path) {
                    Ok(()) => {
                        report.dropped += 1;
                        report.dropped_bytes += size;
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(source) => {
                        return Err(ArkError::Io {
                            path: path.clone(),
                            source,
                        });
                    }
                }
            }
        }
        Ok(report)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every path inside the archive.
    pub fn layout(&self) -> super::Layout {
        super::Layout::new(&self.root)
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    pub fn index_mut(&mut self) -> &mut Index {
        &mut self.index
    }

    /// The object store (fetching from the bucket, if any).
    pub fn objects(&self) -> ObjectStore {
        ObjectStore::new(self.layout().objects()).with_fetch(self.fetch.clone())
    }

    /// Bare mirrors, `mirrors/OWNER__NAME.git`.
    pub fn mirrors_dir(&self) -> PathBuf {
        self.layout().mirrors()
    }

    /// Pack files of the deduplicated store, `packs/<sha256>.pack`.
    pub fn packs_dir(&self) -> PathBuf {
        self.layout().packs()
    }

    /// Where bundles were kept as whole files before the deduplicated store:
    /// `bundles/<id>.tar.zst`. Read while the index names them so; `gc` moves them into the
    /// store.
    pub fn bundles_dir(&self) -> PathBuf {
        self.layout().bundles()
    }

    pub(crate) fn whole_file_path(&self, id: &Sha256Digest) -> PathBuf {
        self.bundles_dir()
            .join(format!("{}{}", id.hex(), bundle::FILE_SUFFIX))
    }

    /// Scratch space inside the archive (work directories, staged imports): on the archive's
    /// filesystem, so what is staged there moves into place by a rename.
    pub fn tmp_dir(&self) -> PathBuf {
        self.layout().tmp()
    }

    /// Release snapshots registered in the archive, `releases/<name>.json`: gc never frees
    /// and `rm` never removes a bundle that one of them names (docs/STORAGE.md).
    pub fn releases_dir(&self) -> PathBuf {
        self.layout().releases()
    }

    pub(crate) fn lock_shared(&self) -> Result<Option<StoreLock>, ArkError> {
        StoreLock::shared(&self.root).map_err(|source| ArkError::Io {
            path: self.root.join(super::lock::LOCK_FILE),
            source,
        })
    }

    /// Packs a bundle into the archive's deduplicated store and records it: the pieces the
    /// store lacks go into one new pack file, renamed into place before the index names it,
    /// so a crash in between leaves a pack the index does not name (gc removes it), never a
    /// row without its pieces.
    pub fn pack(
        &mut self,
        inputs: &PackInputs,
        options: &PackOptions,
        progress: &dyn Progress,
    ) -> Result<PackedBundle, ArkError> {
        let plan = bundle::plan(inputs);
        let _lock = self.lock_shared()?;
        // The tar is hashed (for the id) while its new pieces are compressed: nothing in one
        // depends on the other. A bundle stored already finds every piece there.
        let (hashed, parts) = std::thread::scope(|s| {
            let hashing = s.spawn(|| plan.write_tar(io::sink(), &NoProgress));
            let parts = put::put_members(
                &self.index,
                self.piece_reader(),
                &inputs.instance.repo,
                &[],
                &plan,
                options.level,
                options.threads,
                progress,
            );
            (hashing.join(), parts)
        });
        let (_, id, tar_size) = match hashed {
            Ok(h) => h?,
            Err(_) => {
                return Err(ArkError::Io {
                    path: self.packs_dir(),
                    source: io::Error::other("the thread hashing the tar panicked"),
                });
            }
        };
        let parts = parts?;
        crate::failpoint::hit("pack.before-index");
        let row = BundleRow {
            id,
            instance_id: inputs.instance.instance_id.clone(),
            format_version: plan.version(),
            codebase_tree: plan.codebase_tree(),
            tar_size,
            file_size: 0,
            member_count: plan.member_count() as u64 + 1,
            codebase_files: plan.codebase_files() as u64,
            packed_at: 0,
            manifest_piece: Some(parts.manifest_piece),
        };
        self.index
            .record_stored_bundle(Some(inputs.instance), &row, &parts)?;
        Ok(PackedBundle {
            id,
            path: None,
            tar_size,
            file_size: parts.pack.as_ref().map_or(0, |p| p.1),
            codebase_tree: plan.codebase_tree(),
            member_count: plan.member_count() + 1,
            codebase_files: plan.codebase_files(),
        })
    }

    /// Finds one bundle by full id, unique id prefix (4 hex digits at least) or instance id
    /// (its newest bundle).
    pub fn resolve(&self, query: &str) -> Result<BundleRow, ArkError> {
        let by_instance = self.index.bundles_of_instance(query)?;
        if let Some(newest) = by_instance.into_iter().max_by_key(|b| b.packed_at) {
            return Ok(newest);
        }
        if query.len() >= 4 {
            let mut matches = self.index.bundles_with_prefix(query)?;
            match matches.len() {
                0 => {}
                1 => return Ok(matches.remove(0)),
                _ => {
                    return Err(ArkError::Ambiguous {
                        query: query.to_string(),
                        candidates: matches.iter().map(|b| b.id.short()).collect(),
                    });
                }
            }
        }
        Err(ArkError::NoSuchBundle(query.to_string()))
    }

    /// The bundle `row` names, ready to read, check or unpack. This is how everything reads
    /// the archive's bundles, whatever way they are stored.
    pub fn bundle(&self, row: &BundleRow) -> Result<ArkBundle, ArkError> {
        let lock = self.lock_shared()?;
        let held = match row.manifest_piece {
            Some(m) => Held::Stored(Box::new(StoredBundle::load(
                &self.index,
                self.piece_reader(),
                row.id,
                row.tar_size,
                m,
            )?)),
            None => Held::File(BundleFile::new(self.whole_file_path(&row.id)), row.id),
        };
        Ok(ArkBundle { held, _lock: lock })
    }

    /// The `bundle.json` of bundle `row`, parsed: for a stored bundle only its own piece is
    /// read (re-hashed), not the locations of its members.
    pub fn bundle_manifest(&self, row: &BundleRow) -> Result<bundle::Manifest, ArkError> {
        match row.manifest_piece {
            Some(m) => {
                let _lock = self.lock_shared()?;
                let mut reader = self.piece_reader();
                reader.load(&self.index, &[m])?;
                let bytes = reader.get_checked(&m)?;
                Ok(super::stored::parse_manifest(
                    Path::new(&format!("bundle {}", row.id)),
                    &bytes,
                )?)
            }
            None => Ok(bundle::read_manifest_from(&BundleFile::new(
                self.whole_file_path(&row.id),
            ))?),
        }
    }

    /// The bundle whose id is `id`, ready to read, as [`Ark::bundle`] gives it.
    pub fn bundle_by_id(&self, id: &Sha256Digest) -> Result<ArkBundle, ArkError> {
        let row = self
            .index
            .bundles_with_prefix(&id.hex())?
            .into_iter()
            .find(|b| b.id == *id)
            .ok_or_else(|| ArkError::NoSuchBundle(id.hex()))?;
        self.bundle(&row)
    }

    /// Writes bundle `row` as a self-contained file, `dir/<id>.tar.zst` (the exchange form:
    /// the bytes `pack --output` writes for the same bundle). The stream is checked against
    /// the id as it is written; a mismatch leaves no file.
    pub fn export_bundle(
        &self,
        row: &BundleRow,
        dir: &Path,
        options: &PackOptions,
    ) -> Result<PathBuf, ArkError> {
        let b = self.bundle(row)?;
        let mut tar = b.tar(&NoProgress)?;
        Ok(bundle::write_bundle_file(&mut tar, &row.id, dir, options)?)
    }

    /// Stores a bundle file (the exchange form, checked member by member and as a whole)
    /// in the archive, with the instance its `instance.json` holds; returns its row.
    pub fn import_bundle_file(
        &mut self,
        path: &Path,
        expected: Option<Sha256Digest>,
        options: &PackOptions,
        progress: &dyn Progress,
    ) -> Result<BundleRow, ArkError> {
        let _lock = self.lock_shared()?;
        let (row, parts, instance) = self.store_file(path, expected, &[], options, progress)?;
        crate::failpoint::hit("pack.before-index");
        self.index
            .record_stored_bundle(Some(&instance), &row, &parts)?;
        Ok(row)
    }

    /// Stores the checked bundle file at `path` for an import: its new pieces are written and
    /// recorded, the bundle is not listed (the import lists all of its bundles in its one
    /// transaction). `pending`: the bundles this import stored before, tried as delta bases.
    /// The caller holds the store lock ([`Ark::hold_store`]) from the first bundle stored to
    /// the transaction, so gc cannot free the pieces in between.
    pub fn store_for_import(
        &mut self,
        path: &Path,
        id: Sha256Digest,
        pending: &[BundleSketch],
        options: &PackOptions,
        progress: &dyn Progress,
    ) -> Result<(BundleRow, BundleSketch), ArkError> {
        let (row, parts, _) = self.store_file(path, Some(id), pending, options, progress)?;
        self.index.record_pieces(&parts)?;
        let sketch = BundleSketch {
            bundle: row.id,
            manifest_piece: parts.manifest_piece,
            sketch: parts.sketch,
        };
        let row = BundleRow {
            file_size: parts.pack.map_or(0, |p| p.1),
            ..row
        };
        Ok((row, sketch))
    }

    /// Holds the store shared (as packing and reading do) until the guard is dropped: gc
    /// waits for it.
    pub fn hold_store(&self) -> Result<Option<StoreLock>, ArkError> {
        self.lock_shared()
    }

    /// Reads a bundle file into new pieces (written, not yet indexed). The tar is rebuilt
    /// from its manifest and contents first and must hash to the file's id: what the store
    /// keeps gives back exactly these bytes.
    pub(crate) fn store_file(
        &self,
        path: &Path,
        expected: Option<Sha256Digest>,
        pending: &[BundleSketch],
        options: &PackOptions,
        progress: &dyn Progress,
    ) -> Result<(BundleRow, StoredParts, Instance), ArkError> {
        let source = BundleFile::new(path);
        let mut collected = Collected {
            manifest_bytes: Vec::new(),
            members: Vec::new(),
        };
        let report = bundle::read_members(
            &source,
            expected.or_else(|| bundle::id_from_file_name(path)),
            &Limits::default(),
            progress,
            &mut |m| {
                if m.path == MANIFEST.as_bytes() {
                    collected.manifest_bytes = m.content.to_vec();
                } else {
                    collected.members.push((
                        m.path.to_vec(),
                        Sha256Digest::of(m.content),
                        m.content.to_vec(),
                    ));
                }
                Ok(())
            },
        )?;
        if !report.problems.is_empty() {
            return Err(BundleError::Failed {
                path: path.to_path_buf(),
                problems: report.problems,
            }
            .into());
        }
        let id = report.id;
        let not_stored = |detail: String| ArkError::NotStored { bundle: id, detail };
        {
            let mut contents: HashMap<Sha256Digest, &[u8]> = collected
                .members
                .iter()
                .map(|(_, sha, c)| (*sha, &c[..]))
                .collect();
            contents.insert(
                Sha256Digest::of(&collected.manifest_bytes),
                &collected.manifest_bytes,
            );
            let mut rebuilt = RebuiltTar::new(
                &contents,
                &collected.manifest_bytes,
                &report.manifest,
                Some(id),
                &NoProgress,
            );
            io::copy(&mut rebuilt, &mut io::sink()).map_err(|e| {
                not_stored(format!(
                    "its tar is not laid out as swe-ark lays bundles out, so it is kept whole ({e})"
                ))
            })?;
        }
        let instance_json = collected
            .members
            .iter()
            .find(|(p, _, _)| p == b"instance.json")
            .map(|(_, _, c)| c.clone())
            .ok_or_else(|| not_stored("it has no instance.json".into()))?;
        let instance = Instance::from_json(&instance_json)
            .map_err(|e| not_stored(format!("its instance.json: {e}")))?;
        let parts = put::put_members(
            &self.index,
            self.piece_reader(),
            &instance.repo,
            pending,
            &collected,
            options.level,
            options.threads,
            progress,
        )?;
        let row = BundleRow {
            id,
            instance_id: report.manifest.instance_id.clone(),
            format_version: report.manifest.version,
            codebase_tree: report.manifest.codebase_tree,
            tar_size: report.tar_size,
            file_size: 0,
            member_count: report.manifest.members.len() as u64 + 1,
            codebase_files: report.manifest.codebase_members().count() as u64,
            packed_at: 0,
            manifest_piece: Some(parts.manifest_piece),
        };
        Ok((row, parts, instance))
    }

    /// Pack files in `packs/` and whole bundle files in `bundles/` that the index does not
    /// name (a crash between writing and indexing leaves one; gc removes the packs), and
    /// temporary files of interrupted writes.
    pub fn strays(&self) -> Result<(Vec<PathBuf>, Vec<PathBuf>), ArkError> {
        let packs: std::collections::HashSet<String> =
            self.index.packs()?.into_iter().map(|p| p.name).collect();
        let known: std::collections::HashSet<Sha256Digest> =
            self.index.bundles()?.into_iter().map(|b| b.id).collect();
        let mut unindexed = Vec::new();
        let mut temps = Vec::new();
        for dir in [self.packs_dir(), self.bundles_dir()] {
            let io_err = |source| ArkError::Io {
                path: dir.clone(),
                source,
            };
            match fs::read_dir(&dir) {
                Ok(rd) => {
                    for entry in rd {
                        let path = entry.map_err(io_err)?.path();
                        let named = if let Some(id) = bundle::id_from_file_name(&path) {
                            known.contains(&id)
                        } else if let Some(name) = path
                            .file_name()
                            .and_then(|n| n.to_str())
                            .and_then(|n| n.strip_suffix(super::pieces::PACK_SUFFIX))
                        {
                            packs.contains(name)
                        } else {
                            true
                        };
                        if !named {
                            unindexed.push(path);
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err(e)),
            }
            temps.extend(crate::fsutil::stale_temp_files(&dir).map_err(io_err)?);
        }
        unindexed.sort();
        let objects = self.root.join("objects/sha256");
        temps.extend(
            crate::fsutil::stale_temp_files(&objects).map_err(|source| ArkError::Io {
                path: objects.clone(),
                source,
            })?,
        );
        Ok((unindexed, temps))
    }
}

/// The local objects and packs under `objects` and `packs`, as (path, name in the bucket,
/// sha256). Temporary files and anything not named by a sha256 are left out.
fn local_files(
    objects: &Path,
    packs: &Path,
) -> Result<Vec<(PathBuf, String, Sha256Digest)>, ArkError> {
    let list = |dir: &Path| {
        crate::fsutil::list_dir(dir).map_err(|source| ArkError::Io {
            path: dir.to_path_buf(),
            source,
        })
    };
    let name_of = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    let mut out = Vec::new();
    for shard in list(&objects.join("sha256"))? {
        let Some(head) = name_of(&shard).filter(|h| h.len() == 2 && shard.is_dir()) else {
            continue;
        };
        for obj in list(&shard)? {
            if let Some(Ok(id)) = name_of(&obj).map(|t| format!("{head}{t}").parse()) {
                out.push((obj, Bucket::object_name(&id), id));
            }
        }
    }
    for pack in list(packs)? {
        let Some(file) = name_of(&pack) else { continue };
        if let Some(Ok(id)) = file.strip_suffix(PACK_SUFFIX).map(str::parse) {
            out.push((pack, Bucket::pack_name(&file), id));
        }
    }
    Ok(out)
}
