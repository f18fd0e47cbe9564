//! Objects and packs kept in an S3-compatible bucket, the SQLite index staying local
//! (`--store s3://BUCKET/PREFIX`, or `store_url` in `<ark>/config.toml`; docs/DISTRIBUTED.md).
//!
//! - The bucket holds what the archive's own directories hold, under the same names:
//!   `PREFIX/objects/sha256/ab/<62 hex>` and `PREFIX/packs/<sha256>.pack`. Each name says its
//!   content's sha256, so an upload that does not hash to its name is aborted before it
//!   completes (a multipart upload: never visible half-way), and a download that does not is
//!   refused and dropped.
//! - The archive's `objects/` and `packs/` become a cache of the bucket: an object or a pack a
//!   read misses there is fetched, checked, and kept ([`Fetch`]).
//! - [`super::Ark::push_store`] uploads what the bucket lacks (the command line does it when a
//!   command that wrote to the archive ends), and can then drop the local copies.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::digest::Sha256Digest;
use crate::fsutil;
use crate::remote::{Remote, RemoteError};

/// Uploads in flight at once: a bucket's requests take tens of milliseconds each whatever
/// their size, and an archive holds thousands of small objects.
const SENDS_AT_ONCE: usize = 8;

/// Where objects and packs are under the bucket's prefix.
const OBJECTS: &str = "objects";
const PACKS: &str = "packs";

/// A bucket and prefix that holds an archive's objects and packs.
pub struct Bucket {
    remote: Remote,
    url: String,
    fetched: AtomicU64,
    fetched_bytes: AtomicU64,
}

impl std::fmt::Debug for Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bucket({})", self.url)
    }
}

impl Bucket {
    /// A client for `url` (`s3://BUCKET/PREFIX`), configured from the environment; nothing is
    /// requested yet.
    pub fn open(url: &str) -> Result<Bucket, RemoteError> {
        Ok(Bucket {
            remote: Remote::open(url)?,
            url: url.trim_end_matches('/').to_string(),
            fetched: AtomicU64::new(0),
            fetched_bytes: AtomicU64::new(0),
        })
    }

    /// `s3://BUCKET/PREFIX`, as given.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// How many files this client fetched, and their bytes.
    pub fn fetched(&self) -> (u64, u64) {
        (
            self.fetched.load(Ordering::Relaxed),
            self.fetched_bytes.load(Ordering::Relaxed),
        )
    }

    pub(crate) fn object_name(id: &Sha256Digest) -> String {
        let hex = id.hex();
        format!("{OBJECTS}/sha256/{}/{}", &hex[..2], &hex[2..])
    }

    /// A pack's name in the bucket, from its file's name (`<sha256>.pack`).
    pub(crate) fn pack_name(file_name: &str) -> String {
        format!("{PACKS}/{file_name}")
    }

    /// Whether the bucket holds object `id`.
    pub(crate) fn has_object(&self, id: &Sha256Digest) -> Result<bool, RemoteError> {
        self.remote.exists(&Self::object_name(id))
    }

    /// Fetches NAME, which must hash to `expected`, to `dest` (through a temporary file beside
    /// it, renamed once checked). A missing NAME is [`RemoteError::NotFound`].
    pub(crate) fn fetch(
        &self,
        name: &str,
        expected: &Sha256Digest,
        dest: &Path,
    ) -> Result<u64, RemoteError> {
        let dir = fsutil::parent_dir(dest);
        let io = |source| RemoteError::Io {
            path: dir.to_path_buf(),
            source,
        };
        fs::create_dir_all(dir).map_err(io)?;
        let tmp = fsutil::temp_file_in(dir).map_err(io)?;
        let size = self.remote.download_addressed(name, tmp.path(), expected)?;
        fsutil::persist(tmp, dest).map_err(|source| RemoteError::Io {
            path: dest.to_path_buf(),
            source,
        })?;
        self.fetched.fetch_add(1, Ordering::Relaxed);
        self.fetched_bytes.fetch_add(size, Ordering::Relaxed);
        tracing::debug!(name, size, "fetched from {}", self.url);
        Ok(size)
    }

    /// The names under `objects/` and `packs/` the bucket holds.
    pub(crate) fn listing(&self) -> Result<Vec<String>, RemoteError> {
        let mut names = self.remote.list_under(OBJECTS)?;
        names.extend(self.remote.list_under(PACKS)?);
        Ok(names)
    }

    /// Uploads each (file, NAME, sha256), refused unless it hashes to its sha256,
    /// [`SENDS_AT_ONCE`] at a time; `done` is told each size as it completes.
    pub(crate) fn send_all(
        &self,
        files: &[(PathBuf, String, Sha256Digest)],
        done: impl FnMut(u64),
    ) -> Result<Vec<u64>, RemoteError> {
        self.remote.upload_addressed_all(files, SENDS_AT_ONCE, done)
    }
}

/// Reads that miss the local directories fetch from `bucket` into `objects` and `packs`: the
/// archive's own, or, for a seed opened read-only, a worker's.
#[derive(Debug, Clone)]
pub(crate) struct Fetch {
    pub(crate) bucket: Arc<Bucket>,
    pub(crate) objects: PathBuf,
    pub(crate) packs: PathBuf,
}

/// What [`super::Ark::push_store`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PushReport {
    /// Objects and packs uploaded, and their bytes.
    pub sent: u64,
    pub sent_bytes: u64,
    /// Objects and packs the bucket already held.
    pub held: u64,
    /// Of `sent`, mirrors.
    pub mirrors: u64,
    /// Local copies removed (`--drop-local`), and their bytes.
    pub dropped: u64,
    pub dropped_bytes: u64,
}

/// A mirror in the bucket: `mirrors/OWNER__NAME/<refs sha256>.tar.zst` (the bare repository,
/// named by the state of its refs the index records), with its `.sha256` beside it.
pub(crate) fn mirror_name(dir_name: &str, refs_sha256: &str) -> String {
    format!("mirrors/{dir_name}/{refs_sha256}.tar.zst")
}

impl Bucket {
    /// Whether the bucket holds NAME (a mirror's file, whose `.sha256` is written last).
    pub(crate) fn holds(&self, name: &str) -> Result<bool, RemoteError> {
        self.remote
            .exists(&format!("{name}{}", crate::remote::HASH_SUFFIX))
    }

    /// Uploads the bare repository at `dir` as NAME (a tar, zstd-compressed, staged in
    /// `scratch`); its size.
    pub(crate) fn send_mirror(
        &self,
        dir: &Path,
        name: &str,
        scratch: &Path,
    ) -> Result<u64, RemoteError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| RemoteError::Io { path, source }
        };
        fs::create_dir_all(scratch).map_err(io(scratch))?;
        let tmp = fsutil::temp_file_in(scratch).map_err(io(scratch))?;
        {
            let enc = zstd::Encoder::new(tmp.as_file(), 3).map_err(io(tmp.path()))?;
            let mut tar = tar::Builder::new(enc);
            tar.follow_symlinks(false);
            tar.append_dir_all(".", dir).map_err(io(dir))?;
            tar.into_inner()
                .and_then(|enc| enc.finish())
                .map_err(io(tmp.path()))?;
        }
        let (_, size) = self.remote.upload(tmp.path(), name)?;
        Ok(size)
    }

    /// Downloads mirror NAME (checked against its `.sha256`) and unpacks it into a new
    /// directory under `scratch`, which it returns (the caller clones from it, then removes
    /// it). `Ok(None)` when the bucket does not hold NAME.
    pub(crate) fn fetch_mirror(
        &self,
        name: &str,
        scratch: &Path,
    ) -> Result<Option<tempfile::TempDir>, RemoteError> {
        if !self.holds(name)? {
            return Ok(None);
        }
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| RemoteError::Io { path, source }
        };
        fs::create_dir_all(scratch).map_err(io(scratch))?;
        let file = fsutil::temp_file_in(scratch).map_err(io(scratch))?;
        self.remote.download(name, file.path())?;
        let size = file.as_file().metadata().map(|m| m.len()).unwrap_or(0);
        self.fetched.fetch_add(1, Ordering::Relaxed);
        self.fetched_bytes.fetch_add(size, Ordering::Relaxed);
        let dir = tempfile::Builder::new()
            .prefix(fsutil::TEMP_PREFIX)
            .tempdir_in(scratch)
            .map_err(io(scratch))?;
        let dec = zstd::Decoder::new(fs::File::open(file.path()).map_err(io(file.path()))?)
            .map_err(io(file.path()))?;
        tar::Archive::new(dec)
            .unpack(dir.path())
            .map_err(io(dir.path()))?;
        Ok(Some(dir))
    }
}
