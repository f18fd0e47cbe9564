//! Where a bundle's tar stream comes from.

use std::fs::{self, File};
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::progress::Progress;

use super::pipe::CHUNK;
use crate::bundle::error::BundleError;

/// Where a bundle's tar stream comes from: a `.tar.zst` file (the exchange form), or an
/// archive's deduplicated store. Readers check whatever the source yields: every member
/// against `bundle.json`, the whole stream against the bundle's id.
pub trait BundleSource: Sync {
    /// How messages name the bundle.
    fn name(&self) -> &Path;
    /// How many units the reader `open` gives reports to progress in all, if known.
    fn progress_total(&self) -> Option<u64>;
    /// The uncompressed tar stream; what it consumes is reported to `progress`.
    fn open<'p>(
        &'p self,
        progress: &'p dyn Progress,
    ) -> Result<Box<dyn Read + Send + 'p>, BundleError>;
    /// What a failure of the stream itself (not of the tar in it) becomes.
    fn stream_error(&self, detail: String) -> BundleError;
}

/// A bundle file: the tar compressed with zstd (`<id>.tar.zst`, or any name).
#[derive(Debug, Clone)]
pub struct BundleFile {
    path: PathBuf,
}

impl BundleFile {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        BundleFile { path: path.into() }
    }
}

impl BundleSource for BundleFile {
    fn name(&self) -> &Path {
        &self.path
    }

    fn progress_total(&self) -> Option<u64> {
        fs::metadata(&self.path).ok().map(|m| m.len())
    }

    fn open<'p>(
        &'p self,
        progress: &'p dyn Progress,
    ) -> Result<Box<dyn Read + Send + 'p>, BundleError> {
        let file = open(&self.path)?;
        let counted = ProgressReader {
            inner: BufReader::with_capacity(CHUNK, file),
            progress,
        };
        let decoder = zstd::stream::read::Decoder::with_buffer(BufReader::new(counted))
            .map_err(|e| self.stream_error(e.to_string()))?;
        Ok(Box::new(decoder))
    }

    fn stream_error(&self, detail: String) -> BundleError {
        BundleError::Zstd {
            path: self.path.clone(),
            detail,
        }
    }
}

struct ProgressReader<'a, R> {
    inner: R,
    progress: &'a dyn Progress,
}

impl<R: Read> Read for ProgressReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n as u64);
        Ok(n)
    }
}

fn open(path: &Path) -> Result<File, BundleError> {
    File::open(path).map_err(|e| BundleError::io(path, e))
}
