//! Unpacking: members written into a staging directory inside the target and moved into
//! place only when the whole bundle checked out.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::digest::Sha256Digest;
use crate::progress::Progress;

use super::sink::Sink;
use super::source::{BundleFile, BundleSource};
use super::{Limits, ScanReport, scan_whole};
use crate::bundle::error::BundleError;

/// Unpacks the bundle at `path` into `target` (which must be missing or empty). Nothing is left
/// in `target` unless every check passed.
pub fn unpack(
    path: &Path,
    target: &Path,
    expected: Option<Sha256Digest>,
    limits: &Limits,
    progress: &dyn Progress,
) -> Result<ScanReport, BundleError> {
    unpack_from(&BundleFile::new(path), target, expected, limits, progress)
}

/// [`unpack`] for a bundle from any source.
pub fn unpack_from(
    source: &dyn BundleSource,
    target: &Path,
    expected: Option<Sha256Digest>,
    limits: &Limits,
    progress: &dyn Progress,
) -> Result<ScanReport, BundleError> {
    let bad_target = |reason: String| BundleError::BadTarget {
        path: target.to_path_buf(),
        reason,
    };
    // The directories this unpack creates (the target and any missing parents), deepest
    // first, so that a refused bundle leaves none of them behind.
    let mut created: Vec<PathBuf> = Vec::new();
    match fs::symlink_metadata(target) {
        Ok(m) if m.is_dir() => {
            let mut rd = fs::read_dir(target).map_err(|e| BundleError::io(target, e))?;
            if rd.next().is_some() {
                return Err(bad_target("the directory is not empty".into()));
            }
        }
        Ok(_) => return Err(bad_target("it exists and is not a directory".into())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            created = target
                .ancestors()
                .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
                .map(Path::to_path_buf)
                .collect();
            fs::create_dir_all(target).map_err(|e| BundleError::io(target, e))?;
        }
        Err(e) => return Err(BundleError::io(target, e)),
    }
    let staging = tempfile::Builder::new()
        .prefix(".swe-ark-unpack-")
        .tempdir_in(target)
        .map_err(|e| BundleError::io(target, e))?;
    let sink = Sink::Dir(staging.path());
    let result =
        scan_whole(source, expected, limits, progress, "unpacking", sink).and_then(|report| {
            if report.problems.is_empty() {
                Ok(report)
            } else {
                Err(BundleError::Failed {
                    path: source.name().to_path_buf(),
                    problems: report.problems,
                })
            }
        });
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            drop(staging);
            // remove_dir only removes empty directories: nothing else can go.
            for dir in &created {
                let _ = fs::remove_dir(dir);
            }
            return Err(e);
        }
    };
    let entries = fs::read_dir(staging.path()).map_err(|e| BundleError::io(staging.path(), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| BundleError::io(staging.path(), e))?;
        let dest = target.join(entry.file_name());
        fs::rename(entry.path(), &dest).map_err(|e| BundleError::io(&dest, e))?;
    }
    Ok(report)
}
