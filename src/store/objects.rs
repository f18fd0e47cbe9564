//! Content-addressed objects: stored under their sha256, written atomically, re-hashed when
//! read back. With a bucket ([`super::bucket`]), an object missing here is fetched from it.

use std::fs::{self, File};
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use crate::digest::{Sha256Digest, Sha256Hasher};
use crate::fsutil;
use crate::remote::RemoteError;

use super::bucket::{Bucket, Fetch};

#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("object {0} is not in the store")]
    Missing(Sha256Digest),
    #[error("object {id} is corrupt: its content hashes to {actual}")]
    Corrupt {
        id: Sha256Digest,
        actual: Sha256Digest,
    },
    #[error("content expected to hash to {expected} hashes to {actual}; not stored")]
    Mismatch {
        expected: Sha256Digest,
        actual: Sha256Digest,
    },
    #[error("object {id} is not here, and fetching it failed: {source}")]
    Fetch {
        id: Sha256Digest,
        #[source]
        source: Box<RemoteError>,
    },
    #[error("object store I/O on `{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ObjectError + '_ {
    move |source| ObjectError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Objects under `<root>/sha256/ab/<other 62 hex digits>`.
#[derive(Debug, Clone)]
pub struct ObjectStore {
    root: PathBuf,
    /// Where a missing object is fetched from, and into.
    fetch: Option<Fetch>,
}

fn under(root: &Path, id: &Sha256Digest) -> PathBuf {
    let hex = id.hex();
    root.join("sha256").join(&hex[..2]).join(&hex[2..])
}

impl ObjectStore {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ObjectStore {
            root: root.into(),
            fetch: None,
        }
    }

    pub(crate) fn with_fetch(mut self, fetch: Option<Fetch>) -> Self {
        self.fetch = fetch;
        self
    }

    /// Where object `id` is stored here (whether or not it is).
    pub fn path_of(&self, id: &Sha256Digest) -> PathBuf {
        under(&self.root, id)
    }

    /// The file that holds object `id` on this machine: here, or where fetches went.
    pub fn locate(&self, id: &Sha256Digest) -> Option<PathBuf> {
        let here = self.path_of(id);
        if here.is_file() {
            return Some(here);
        }
        let fetched = under(&self.fetch.as_ref()?.objects, id);
        fetched.is_file().then_some(fetched)
    }

    /// Whether object `id` can be read: it is here, or in the bucket.
    pub fn has(&self, id: &Sha256Digest) -> bool {
        self.locate(id).is_some()
            || self
                .fetch
                .as_ref()
                .is_some_and(|f| f.bucket.has_object(id).unwrap_or(false))
    }

    /// The file that holds object `id`, fetched from the bucket (and checked) when it is not
    /// on this machine.
    pub fn ensure(&self, id: &Sha256Digest) -> Result<PathBuf, ObjectError> {
        if let Some(p) = self.locate(id) {
            return Ok(p);
        }
        let Some(fetch) = &self.fetch else {
            return Err(ObjectError::Missing(*id));
        };
        let dest = under(&fetch.objects, id);
        match fetch.bucket.fetch(&Bucket::object_name(id), id, &dest) {
            Ok(_) => Ok(dest),
            Err(RemoteError::NotFound(_)) => Err(ObjectError::Missing(*id)),
            Err(source) => Err(ObjectError::Fetch {
                id: *id,
                source: Box::new(source),
            }),
        }
    }

    /// Stores everything `reader` yields; returns its id and size. Storing what is already
    /// there is a no-op.
    pub fn put(&self, reader: &mut dyn Read) -> Result<(Sha256Digest, u64), ObjectError> {
        self.put_checked(reader, None)
    }

    /// Like [`ObjectStore::put`], but when `expected` is given, content that hashes to
    /// anything else is refused and nothing is stored.
    pub fn put_checked(
        &self,
        reader: &mut dyn Read,
        expected: Option<&Sha256Digest>,
    ) -> Result<(Sha256Digest, u64), ObjectError> {
        let staging = self.root.join("sha256");
        fs::create_dir_all(&staging).map_err(io_err(&staging))?;
        let mut tmp = fsutil::temp_file_in(&staging).map_err(io_err(&staging))?;
        let mut hasher = Sha256Hasher::new();
        let mut size = 0u64;
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = fsutil::read_some(reader, &mut buf).map_err(io_err(&staging))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            tmp.write_all(&buf[..n]).map_err(io_err(tmp.path()))?;
            size += n as u64;
        }
        let id = hasher.finish();
        if let Some(expected) = expected
            && *expected != id
        {
            return Err(ObjectError::Mismatch {
                expected: *expected,
                actual: id,
            });
        }
        let dest = self.path_of(&id);
        if dest.is_file() {
            return Ok((id, size));
        }
        let dir = dest.parent().expect("an object path has a parent");
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        fsutil::persist(tmp, &dest).map_err(io_err(&dest))?;
        Ok((id, size))
    }

    /// Moves `staged`, a file already checked to hash to `id` and synced to disk, into the
    /// store (on the same filesystem). An object the store already holds is kept. Returns
    /// whether the file was moved; the caller syncs the object's directory.
    pub fn install_file(&self, staged: &Path, id: &Sha256Digest) -> Result<bool, ObjectError> {
        let dest = self.path_of(id);
        if dest.is_file() {
            return Ok(false);
        }
        let dir = fsutil::parent_dir(&dest);
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        fs::rename(staged, &dest).map_err(io_err(&dest))?;
        Ok(true)
    }

    pub fn put_bytes(&self, bytes: &[u8]) -> Result<Sha256Digest, ObjectError> {
        self.put(&mut &bytes[..]).map(|(id, _)| id)
    }

    /// A reader over the object that fails at the end if the content does not hash to `id`.
    pub fn open(&self, id: &Sha256Digest) -> Result<VerifyingReader<BufReader<File>>, ObjectError> {
        let path = self.ensure(id)?;
        let f = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(ObjectError::Missing(*id)),
            Err(e) => return Err(io_err(&path)(e)),
        };
        Ok(VerifyingReader {
            inner: BufReader::new(f),
            hasher: Some(Sha256Hasher::new()),
            expected: *id,
        })
    }

    /// The whole object, checked against its id.
    pub fn get(&self, id: &Sha256Digest) -> Result<Vec<u8>, ObjectError> {
        let mut r = self.open(id)?;
        let mut out = Vec::new();
        r.read_to_end(&mut out).map_err(|e| r.error(e))?;
        Ok(out)
    }

    /// Re-hashes the stored object.
    pub fn check(&self, id: &Sha256Digest) -> Result<u64, ObjectError> {
        let mut r = self.open(id)?;
        io::copy(&mut r, &mut io::sink()).map_err(|e| r.error(e))
    }
}

/// Hashes as it reads; at the end of the stream, a mismatch is an `InvalidData` error.
pub struct VerifyingReader<R> {
    inner: R,
    hasher: Option<Sha256Hasher>,
    expected: Sha256Digest,
}

impl<R> VerifyingReader<R> {
    /// Turns an error from `read` back into the typed error it carries.
    pub fn error(&self, e: io::Error) -> ObjectError {
        match e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<CorruptObject>())
        {
            Some(c) => ObjectError::Corrupt {
                id: self.expected,
                actual: c.0,
            },
            None => ObjectError::Io {
                path: PathBuf::from(format!("object {}", self.expected)),
                source: e,
            },
        }
    }
}

#[derive(Debug)]
struct CorruptObject(Sha256Digest);

impl std::fmt::Display for CorruptObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the object's content hashes to {}", self.0)
    }
}
impl std::error::Error for CorruptObject {}

impl<R: Read> Read for VerifyingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 {
            if let Some(h) = self.hasher.take() {
                let actual = h.finish();
                if actual != self.expected {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        CorruptObject(actual),
                    ));
                }
            }
        } else if let Some(h) = self.hasher.as_mut() {
            h.update(&buf[..n]);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_has_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let store = ObjectStore::new(dir.path().join("objects"));
        let id = store.put_bytes(b"wheel bytes").unwrap();
        assert_eq!(id, Sha256Digest::of(b"wheel bytes"));
        assert!(store.has(&id));
        assert_eq!(store.get(&id).unwrap(), b"wheel bytes");
        let hex = id.hex();
        assert!(
            store
                .path_of(&id)
                .ends_with(format!("sha256/{}/{}", &hex[..2], &hex[2..]))
        );
        // Storing it again is a no-op.
        assert_eq!(store.put_bytes(b"wheel bytes").unwrap(), id);
        // A flipped byte is caught on read.
        fs::write(store.path_of(&id), b"wheel bytez").unwrap();
        assert!(matches!(store.get(&id), Err(ObjectError::Corrupt { .. })));
        assert!(matches!(store.check(&id), Err(ObjectError::Corrupt { .. })));
        let other = Sha256Digest::of(b"nothing");
        assert!(!store.has(&other));
        assert!(matches!(store.get(&other), Err(ObjectError::Missing(_))));
        // No temporary file is left behind.
        assert!(
            fsutil::stale_temp_files(&dir.path().join("objects/sha256"))
                .unwrap()
                .is_empty()
        );
    }
}
