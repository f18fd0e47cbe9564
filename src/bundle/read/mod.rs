//! Reading a bundle: the zstd stream is decoded and hashed on one thread while the tar is
//! checked on another; every member is checked against `bundle.json` before it is trusted.
//! Unpacking writes into a staging directory inside the target and moves the members into
//! place only when the whole bundle checked out.
//!
//! The parts: where the tar stream comes from (`source`), the decoding thread (`pipe`), the
//! scanner's loop over the members (`scan`), tar entries read raw with their pax headers
//! (`pax`), `bundle.json` (`bundle_json`), one entry's path, type and size (`entry`), the
//! checks after a member or the whole tar (`checks`), where members go (`sink`), `unpack`.

mod bundle_json;
mod checks;
mod entry;
mod pax;
mod pipe;
mod scan;
mod sink;
mod source;
mod unpack;

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use crate::digest::Sha256Digest;
use crate::progress::Progress;

use super::FILE_SUFFIX;
use super::error::{BundleError, Problem};
use super::manifest::{Manifest, MemberKind};
use scan::Scanner;
use sink::Sink;

pub use sink::{OnMember, ReadMember};
pub use source::{BundleFile, BundleSource};
pub use unpack::{unpack, unpack_from};

/// Bounds on what a bundle may expand to, against decompression bombs.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_member_size: u64,
    pub max_total_size: u64,
    pub max_manifest_size: u64,
    pub max_members: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_member_size: 4 << 30,
            max_total_size: 32 << 30,
            max_manifest_size: 256 << 20,
            max_members: 4_000_000,
        }
    }
}

/// What reading a whole bundle found.
#[derive(Debug, Clone)]
pub struct ScanReport {
    /// The sha256 of the uncompressed tar: the bundle's id.
    pub id: Sha256Digest,
    pub tar_size: u64,
    pub manifest: Manifest,
    /// Every member that did not check out; empty for a good bundle.
    pub problems: Vec<Problem>,
}

/// The id a bundle file's name claims (`<64 hex>.tar.zst`), if it has one.
pub fn id_from_file_name(path: &Path) -> Option<Sha256Digest> {
    let name = path.file_name()?.to_str()?;
    name.strip_suffix(FILE_SUFFIX)?.parse().ok()
}

/// Reads and checks the whole bundle at `path`, writing nothing. Hash mismatches and members
/// missing from or absent in `bundle.json` are listed in the report's `problems`; a bundle that
/// cannot be read safely at all is an error.
pub fn verify_file(
    path: &Path,
    expected: Option<Sha256Digest>,
    limits: &Limits,
    progress: &dyn Progress,
) -> Result<ScanReport, BundleError> {
    verify(&BundleFile::new(path), expected, limits, progress)
}

/// [`verify_file`] for a bundle from any source.
pub fn verify(
    source: &dyn BundleSource,
    expected: Option<Sha256Digest>,
    limits: &Limits,
    progress: &dyn Progress,
) -> Result<ScanReport, BundleError> {
    scan_whole(
        source,
        expected,
        limits,
        progress,
        "verifying",
        Sink::Discard,
    )
}

/// Reads and checks the whole bundle, handing its members to `sink`; `what` names the work
/// in the progress shown.
fn scan_whole<'a>(
    source: &'a dyn BundleSource,
    expected: Option<Sha256Digest>,
    limits: &'a Limits,
    progress: &dyn Progress,
    what: &str,
    sink: Sink<'a>,
) -> Result<ScanReport, BundleError> {
    progress.start(what, source.progress_total());
    let mut scanner = Scanner {
        bundle: source.name(),
        source,
        limits,
        sink,
        problems: Vec::new(),
    };
    let report = scanner.scan(expected, progress);
    progress.finish();
    report
}

/// Reads and checks the whole bundle like [`verify`], handing every member to `on_member` as
/// it is read (`bundle.json` first). A member is handed over before the checks that need the
/// whole bundle: a caller keeps nothing unless the report has no problems.
pub fn read_members(
    source: &dyn BundleSource,
    expected: Option<Sha256Digest>,
    limits: &Limits,
    progress: &dyn Progress,
    on_member: OnMember,
) -> Result<ScanReport, BundleError> {
    let sink = Sink::Collect(on_member);
    scan_whole(source, expected, limits, progress, "reading", sink)
}

/// Members read into memory by [`read_members_into_memory`]: path inside the bundle, and what
/// it holds.
pub type MemoryMembers = Vec<(Vec<u8>, MemoryMember)>;

/// A member read into memory by [`read_members_into_memory`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryMember {
    File { content: Vec<u8>, executable: bool },
    Symlink { target: Vec<u8> },
}

/// Reads and checks the whole bundle like [`verify`], writing nothing, and returns the members
/// whose path `keep` accepts (`instance.json`, `codebase/…`), in the bundle's order. Nothing is
/// returned unless every check passed.
pub fn read_members_into_memory(
    source: &dyn BundleSource,
    expected: Option<Sha256Digest>,
    limits: &Limits,
    keep: &dyn Fn(&[u8]) -> bool,
    progress: &dyn Progress,
) -> Result<(ScanReport, MemoryMembers), BundleError> {
    let mut members = MemoryMembers::new();
    let mut on_member = |m: ReadMember| {
        if keep(m.path) {
            let member = match m.kind {
                MemberKind::Symlink => MemoryMember::Symlink {
                    target: m.content.to_vec(),
                },
                kind => MemoryMember::File {
                    content: m.content.to_vec(),
                    executable: kind == MemberKind::Executable,
                },
            };
            members.push((m.path.to_vec(), member));
        }
        Ok(())
    };
    let report = read_members(source, expected, limits, progress, &mut on_member)?;
    if !report.problems.is_empty() {
        return Err(BundleError::Failed {
            path: source.name().to_path_buf(),
            problems: report.problems,
        });
    }
    Ok((report, members))
}

/// Reads only `bundle.json`, without checking the rest of the bundle: for showing, not trusting.
pub fn read_manifest(path: &Path) -> Result<Manifest, BundleError> {
    read_manifest_from(&BundleFile::new(path))
}

/// [`read_manifest`] for a bundle from any source.
pub fn read_manifest_from(source: &dyn BundleSource) -> Result<Manifest, BundleError> {
    let path = source.name();
    let reader = source.open(&crate::progress::NoProgress)?;
    let mut archive = tar::Archive::new(reader);
    let mut entries = archive
        .entries()
        .map_err(|e| BundleError::Tar {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?
        .raw(true);
    let scanner = Scanner {
        bundle: path,
        source,
        limits: &Limits::default(),
        sink: Sink::Discard,
        problems: Vec::new(),
    };
    // No decoding thread here: a stream error reaches the tar reader as a read error.
    let no_zstd_error = Rc::new(RefCell::new(None));
    match scanner.next_member(&mut entries, &mut 0, &no_zstd_error)? {
        Some((mut e, name, _)) => scanner.read_manifest(&mut e, &name).map(|(m, _)| m),
        None => Err(BundleError::NotABundle {
            path: path.to_path_buf(),
            detail: "the tar archive is empty".into(),
        }),
    }
}

/// The size limit of a member that every reader parses and checks (`vcs.json`,
/// `expected.json`), or None for any other member.
fn record_limit(name: &[u8]) -> Option<u64> {
    if name == crate::vcs::MEMBER.as_bytes() {
        Some(crate::vcs::MAX_MEMBER_SIZE)
    } else if name == super::EXPECTED_MEMBER.as_bytes() {
        Some(super::expected::MAX_MEMBER_SIZE)
    } else {
        None
    }
}

/// Checks a member that [`record_limit`] names: valid, in canonical form.
pub(super) fn check_record(name: &[u8], bytes: &[u8]) -> Result<(), BadRecord> {
    if name == crate::vcs::MEMBER.as_bytes() {
        crate::vcs::VcsRecord::from_bytes(bytes)?;
    } else if name == super::EXPECTED_MEMBER.as_bytes() {
        super::Expected::from_bytes(bytes)?;
    }
    Ok(())
}

/// Why a record member (vcs.json, expected.json) is not valid.
#[derive(Debug, thiserror::Error)]
pub(super) enum BadRecord {
    #[error(transparent)]
    Vcs(#[from] crate::vcs::VcsError),
    #[error(transparent)]
    Expected(#[from] super::expected::ExpectedError),
}
