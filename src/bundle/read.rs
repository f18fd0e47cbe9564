//! Reading a bundle: the zstd stream is decoded and hashed on one thread while the tar is
//! checked on another; every member is checked against `bundle.json` before it is trusted.
//! Unpacking writes into a staging directory inside the target and moves the members into
//! place only when the whole bundle checked out.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{self, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use tar::EntryType;

use crate::digest::{GitBlobHasher, GitOid, Sha256Digest, Sha256Hasher};
use crate::fsutil;
use crate::progress::Progress;

use super::error::{BundleError, Problem};
use super::manifest::{Manifest, ManifestMember, MemberKind};
use super::{
    CODEBASE_DIR, FILE_SUFFIX, FIXED_MEMBERS, FORMAT, MANIFEST, REQUIRED_MEMBERS,
    SUPPORTED_VERSIONS, gittree, path,
};

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

const CHUNK: usize = 1 << 20;

/// The largest pax extended header a reader accepts: swe-ark writes one only to carry a path or
/// link target over 100 bytes.
const MAX_PAX_HEADER: u64 = 1 << 20;

/// A pax record's key and value.
type PaxRecord<'a> = (&'a [u8], &'a [u8]);

/// The `path` and `linkpath` a pax header gives the entry after it.
type PaxNames = (Option<Vec<u8>>, Option<Vec<u8>>);

/// The records of a pax extended header, each `<len> <key>=<value>\n` where `<len>` counts
/// the whole record. Split by length, not at newlines: a value may hold a newline.
/// A pax record that does not read as `<len> <key>=<value>\n` (its first 40 bytes).
#[derive(Debug, thiserror::Error)]
#[error("malformed record `{0}`")]
struct MalformedPax(String);

fn pax_records(mut data: &[u8]) -> Result<Vec<PaxRecord<'_>>, MalformedPax> {
    let mut records = Vec::new();
    while !data.is_empty() {
        let bad = || MalformedPax(path::display(&data[..data.len().min(40)]));
        let space = data.iter().position(|&b| b == b' ').ok_or_else(bad)?;
        let len: usize = std::str::from_utf8(&data[..space])
            .ok()
            .and_then(|n| n.parse().ok())
            .ok_or_else(bad)?;
        if len <= space + 1 || len > data.len() || data[len - 1] != b'\n' {
            return Err(bad());
        }
        let record = &data[space + 1..len - 1];
        let eq = record.iter().position(|&b| b == b'=').ok_or_else(bad)?;
        records.push((&record[..eq], &record[eq + 1..]));
        data = &data[len..];
    }
    Ok(records)
}

/// What reading a member found.
struct MemberContent {
    sha256: Sha256Digest,
    /// Its git blob id (zero for a regular file outside the codebase).
    blob: GitOid,
    len: u64,
    kind: MemberKind,
    /// Its content, when it is a record checked once its hash is known.
    record: Option<Vec<u8>>,
}

/// A tar entry with its path and link target (from its pax header, if it has one).
type Member<'a, R> = (tar::Entry<'a, R>, Vec<u8>, Option<Vec<u8>>);

type Chunk = Result<Vec<u8>, io::Error>;

/// The decoded tar stream, as it arrives from the decoding thread.
struct Pipe {
    rx: Receiver<Chunk>,
    cur: Vec<u8>,
    pos: usize,
    zstd_error: Rc<RefCell<Option<String>>>,
}

impl Read for Pipe {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.cur.len() {
            match self.rx.recv() {
                Ok(Ok(chunk)) => {
                    self.cur = chunk;
                    self.pos = 0;
                }
                Ok(Err(e)) => {
                    let msg = e.to_string();
                    *self.zstd_error.borrow_mut() = Some(msg.clone());
                    return Err(io::Error::other(msg));
                }
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.cur.len() - self.pos);
        buf[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Reads the tar stream from `reader`, hashing it, and sends it on in chunks. Stops early if
/// the reader hangs up.
fn pump(mut reader: Box<dyn Read + Send + '_>, tx: SyncSender<Chunk>) -> (Sha256Digest, u64) {
    let mut hasher = Sha256Hasher::new();
    let mut len = 0u64;
    loop {
        let mut buf = vec![0u8; CHUNK];
        let mut filled = 0;
        // Fill whole chunks so the reader side sees few, large pieces.
        while filled < CHUNK {
            match reader.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return (hasher.finish(), len);
                }
            }
        }
        if filled == 0 {
            return (hasher.finish(), len);
        }
        buf.truncate(filled);
        hasher.update(&buf);
        len += filled as u64;
        if tx.send(Ok(buf)).is_err() {
            return (hasher.finish(), len);
        }
    }
}

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

/// One member as a reader met it: `bundle.json` first, then the rest in tar order. A
/// symlink's content is its target.
pub struct ReadMember<'m> {
    pub path: &'m [u8],
    pub kind: MemberKind,
    pub content: &'m [u8],
}

/// What [`read_members`] hands each member to.
pub type OnMember<'a> = &'a mut dyn FnMut(ReadMember) -> Result<(), BundleError>;

/// Where checked members go.
enum Sink<'a> {
    Discard,
    Dir(&'a Path),
    Collect(OnMember<'a>),
}

struct Seen {
    kinds: HashMap<Vec<u8>, MemberKind>,
    gitlinks: HashSet<Vec<u8>>,
    created_dirs: HashSet<PathBuf>,
    codebase: Vec<(Vec<u8>, MemberKind, GitOid)>,
    total: u64,
}

fn kind_name(t: EntryType) -> String {
    match t {
        EntryType::Directory => "a directory entry (bundle format v1 has none)".into(),
        EntryType::Char | EntryType::Block => "a device file".into(),
        EntryType::Fifo => "a FIFO".into(),
        EntryType::GNUSparse => "a sparse file".into(),
        EntryType::XGlobalHeader => "a pax global header".into(),
        other => format!("an entry of tar type `{}`", other.as_byte() as char),
    }
}

struct Scanner<'a> {
    bundle: &'a Path,
    source: &'a dyn BundleSource,
    limits: &'a Limits,
    sink: Sink<'a>,
    problems: Vec<Problem>,
}

impl Scanner<'_> {
    fn refuse(&self, member: &[u8], reason: impl Into<String>) -> BundleError {
        BundleError::Refused {
            path: self.bundle.to_path_buf(),
            member: path::display(member),
            reason: reason.into(),
        }
    }

    /// Refuses member `name` when its `size` is over `limit`, the most `what` may hold.
    fn size_within(
        &self,
        name: &[u8],
        size: u64,
        limit: u64,
        what: &str,
    ) -> Result<(), BundleError> {
        if size > limit {
            return Err(self.refuse(
                name,
                format!("{size} bytes is over the limit of {limit} for {what}"),
            ));
        }
        Ok(())
    }

    fn problem(&mut self, member: &[u8], reason: impl Into<String>) {
        self.problems.push(Problem {
            member: path::display(member),
            reason: reason.into(),
        });
    }

    fn read_manifest(
        &self,
        entry: &mut tar::Entry<impl Read>,
        name: &[u8],
    ) -> Result<(Manifest, Vec<u8>), BundleError> {
        let not_bundle = |detail: String| BundleError::NotABundle {
            path: self.bundle.to_path_buf(),
            detail,
        };
        if name != MANIFEST.as_bytes() || !entry.header().entry_type().is_file() {
            return Err(not_bundle(format!(
                "its first member is `{}`, not {MANIFEST}",
                path::display(name)
            )));
        }
        let size = entry.size();
        self.size_within(name, size, self.limits.max_manifest_size, MANIFEST)?;
        let mut bytes = Vec::with_capacity(size as usize);
        entry
            .read_to_end(&mut bytes)
            .map_err(|e| BundleError::io(self.bundle, e))?;
        let bad = |detail: String| BundleError::BadManifest {
            path: self.bundle.to_path_buf(),
            detail,
        };
        let loose: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
        if loose.get("format").and_then(|v| v.as_str()) != Some(FORMAT) {
            return Err(not_bundle(format!(
                "bundle.json has format {}, not \"{FORMAT}\"",
                loose
                    .get("format")
                    .map_or("(none)".to_string(), |v| v.to_string())
            )));
        }
        match loose.get("version").and_then(|v| v.as_u64()) {
            Some(v) if SUPPORTED_VERSIONS.iter().any(|&s| u64::from(s) == v) => {}
            Some(found) => {
                return Err(BundleError::UnsupportedVersion {
                    path: self.bundle.to_path_buf(),
                    found,
                });
            }
            None => return Err(bad("it has no numeric `version`".into())),
        }
        let manifest: Manifest = serde_json::from_value(loose).map_err(|e| bad(e.to_string()))?;
        if let Some(why) = manifest.version_mismatch() {
            return Err(bad(why));
        }
        let mut paths = HashSet::new();
        for m in &manifest.members {
            if m.path == MANIFEST.as_bytes() || !paths.insert(&m.path[..]) {
                return Err(bad(format!(
                    "member `{}` is listed twice (or bundle.json lists itself)",
                    path::display(&m.path)
                )));
            }
        }
        let mut links = HashSet::new();
        for g in &manifest.gitlinks {
            let name = path::display(&g.path);
            if !g.path.starts_with(CODEBASE_DIR.as_bytes()) || g.path.len() == CODEBASE_DIR.len() {
                return Err(bad(format!("gitlink `{name}` is not inside codebase/")));
            }
            if paths.contains(&g.path[..]) || !links.insert(&g.path[..]) {
                return Err(bad(format!(
                    "gitlink `{name}` is listed twice or is also a member"
                )));
            }
        }
        for m in &manifest.members {
            if let Some(anc) = path::ancestors(&m.path).find(|a| links.contains(a)) {
                return Err(bad(format!(
                    "member `{}` lies inside the submodule `{}`",
                    path::display(&m.path),
                    path::display(anc)
                )));
            }
        }
        for required in REQUIRED_MEMBERS {
            if !paths.contains(required.as_bytes()) {
                return Err(bad(format!(
                    "it does not list `{required}`, which every bundle holds"
                )));
            }
        }
        if manifest.members.len() as u64 > self.limits.max_members {
            return Err(bad(format!(
                "it lists {} members, over the limit of {}",
                manifest.members.len(),
                self.limits.max_members
            )));
        }
        Ok((manifest, bytes))
    }

    /// Structural checks on one entry, before a byte of it is written.
    fn check_entry(
        &self,
        name: &[u8],
        etype: EntryType,
        link: Option<&[u8]>,
        seen: &Seen,
    ) -> Result<MemberKind, BundleError> {
        if let Some(reason) = path::invalid_reason(name) {
            return Err(self.refuse(name, reason));
        }
        let in_codebase =
            name.starts_with(CODEBASE_DIR.as_bytes()) && name.len() > CODEBASE_DIR.len();
        if !in_codebase && !FIXED_MEMBERS.iter().any(|f| f.as_bytes() == name) {
            return Err(self.refuse(
                name,
                "not a member of the bundle format (only codebase/… and the fixed members)",
            ));
        }
        if seen.kinds.contains_key(name) {
            return Err(self.refuse(name, "the member appears twice"));
        }
        if let Some(g) = std::iter::once(name)
            .chain(path::ancestors(name))
            .find(|p| seen.gitlinks.contains(*p))
        {
            return Err(self.refuse(
                name,
                format!(
                    "bundle.json lists `{}` as a submodule, whose content a bundle never holds",
                    path::display(g)
                ),
            ));
        }
        for anc in path::ancestors(name) {
            match seen.kinds.get(anc) {
                Some(MemberKind::Symlink) => {
                    return Err(self.refuse(
                        name,
                        format!("its path goes through the symlink `{}`", path::display(anc)),
                    ));
                }
                Some(_) => {
                    return Err(self.refuse(
                        name,
                        format!("its path goes through the file `{}`", path::display(anc)),
                    ));
                }
                None => {}
            }
        }
        match etype {
            EntryType::Regular => Ok(MemberKind::File),
            EntryType::Symlink => {
                let target = link.unwrap_or_default();
                if !in_codebase {
                    return Err(self.refuse(name, "only codebase/ may hold symlinks"));
                }
                if !path::link_stays_inside(CODEBASE_DIR.as_bytes(), name, target) {
                    return Err(self.refuse(
                        name,
                        format!(
                            "the symlink points outside the tree (to `{}`)",
                            path::display(target)
                        ),
                    ));
                }
                Ok(MemberKind::Symlink)
            }
            EntryType::Link => {
                let target = link.unwrap_or_default();
                let outside = path::invalid_reason(target).is_some();
                Err(self.refuse(
                    name,
                    format!(
                        "a hard link to `{}`{}; bundle format v1 has no hard links",
                        path::display(target),
                        if outside { ", outside the tree" } else { "" }
                    ),
                ))
            }
            other => Err(self.refuse(name, kind_name(other))),
        }
    }

    fn scan(
        &mut self,
        expected: Option<Sha256Digest>,
        progress: &dyn Progress,
    ) -> Result<ScanReport, BundleError> {
        let reader = self.source.open(progress)?;
        let (tx, rx) = sync_channel::<Chunk>(8);
        let zstd_error = Rc::new(RefCell::new(None));
        let pipe = Pipe {
            rx,
            cur: Vec::new(),
            pos: 0,
            zstd_error: zstd_error.clone(),
        };
        std::thread::scope(|scope| {
            let decoder = scope.spawn(move || pump(reader, tx));
            let result = self.scan_tar(pipe, &zstd_error);
            // The decoder thread ends once the pipe is dropped or the stream ends.
            let (id, tar_size) = decoder.join().expect("the decoding thread does not panic");
            let manifest = result?;
            if let Some(expected) = expected
                && expected != id
            {
                self.problems.push(Problem {
                    member: "(whole bundle)".into(),
                    reason: format!("the bundle hashes to {id}, but its id is {expected}"),
                });
            }
            Ok(ScanReport {
                id,
                tar_size,
                manifest,
                problems: std::mem::take(&mut self.problems),
            })
        })
    }

    fn classify(&self, e: io::Error, zstd_error: &Rc<RefCell<Option<String>>>) -> BundleError {
        match zstd_error.borrow().clone() {
            Some(detail) => self.source.stream_error(detail),
            None => BundleError::Tar {
                path: self.bundle.to_path_buf(),
                detail: e.to_string(),
            },
        }
    }

    /// The next member and the path and link target its pax header gives it. The tar is read
    /// raw: the tar crate would read a pax header of any size into memory before a limit is
    /// checked, and would take records such as `size` from it. Here a pax header is held to the
    /// limits from its header, like a member, and may hold only `path`, `linkpath` and
    /// `hdrcharset` records.
    fn next_member<'a, R: Read>(
        &self,
        entries: &mut tar::Entries<'a, R>,
        total: &mut u64,
        zstd_error: &Rc<RefCell<Option<String>>>,
    ) -> Result<Option<Member<'a, R>>, BundleError> {
        let mut pax: Option<PaxNames> = None;
        loop {
            let mut entry = match entries.next() {
                Some(e) => e.map_err(|e| self.classify(e, zstd_error))?,
                None if pax.is_some() => {
                    return Err(BundleError::Tar {
                        path: self.bundle.to_path_buf(),
                        detail: "the archive ends after a pax header".into(),
                    });
                }
                None => return Ok(None),
            };
            let header_name = entry.path_bytes().into_owned();
            if entry.header().entry_type() != EntryType::XHeader {
                let (path, linkpath) = pax.unwrap_or_default();
                let link = linkpath.or_else(|| entry.link_name_bytes().map(|l| l.into_owned()));
                return Ok(Some((entry, path.unwrap_or(header_name), link)));
            }
            if pax.is_some() {
                return Err(self.refuse(&header_name, "two pax headers in a row"));
            }
            let size = entry.size();
            let limit = MAX_PAX_HEADER.min(self.limits.max_member_size);
            if size > limit {
                return Err(self.refuse(
                    &header_name,
                    format!("{size} bytes is over the limit of {limit} for a pax header"),
                ));
            }
            *total += size;
            if *total > self.limits.max_total_size {
                return Err(self.refuse(
                    &header_name,
                    format!(
                        "the bundle expands past the total size limit of {} bytes",
                        self.limits.max_total_size
                    ),
                ));
            }
            let mut data = Vec::with_capacity(size as usize);
            entry
                .read_to_end(&mut data)
                .map_err(|e| self.classify(e, zstd_error))?;
            if data.len() as u64 != size {
                return Err(BundleError::Tar {
                    path: self.bundle.to_path_buf(),
                    detail: format!("a pax header is truncated ({} of {size} bytes)", data.len()),
                });
            }
            let records = pax_records(&data).map_err(|e| BundleError::Tar {
                path: self.bundle.to_path_buf(),
                detail: format!("a pax header is malformed: {e}"),
            })?;
            let mut found: PaxNames = (None, None);
            for (key, value) in records {
                match key {
                    b"path" => found.0 = Some(value.to_vec()),
                    b"linkpath" => found.1 = Some(value.to_vec()),
                    b"hdrcharset" => {}
                    other => {
                        return Err(self.refuse(
                            &header_name,
                            format!(
                                "a pax `{}` record (bundle format v1 has only `path` and `linkpath`)",
                                path::display(other)
                            ),
                        ));
                    }
                }
            }
            pax = Some(found);
        }
    }

    fn scan_tar(
        &mut self,
        pipe: Pipe,
        zstd_error: &Rc<RefCell<Option<String>>>,
    ) -> Result<Manifest, BundleError> {
        let mut archive = tar::Archive::new(pipe);
        let mut entries = archive
            .entries()
            .map_err(|e| self.classify(e, zstd_error))?
            .raw(true);
        let mut total = 0;
        let (mut first, first_name, _) =
            match self.next_member(&mut entries, &mut total, zstd_error)? {
                Some(m) => m,
                None => {
                    return Err(BundleError::NotABundle {
                        path: self.bundle.to_path_buf(),
                        detail: "the tar archive is empty".into(),
                    });
                }
            };
        let (manifest, manifest_bytes) = self.read_manifest(&mut first, &first_name)?;
        drop(first);
        let listed: HashMap<&[u8], &ManifestMember> =
            manifest.members.iter().map(|m| (&m.path[..], m)).collect();
        let mut seen = Seen {
            kinds: HashMap::new(),
            gitlinks: manifest.gitlinks.iter().map(|g| g.path.clone()).collect(),
            created_dirs: HashSet::new(),
            codebase: Vec::new(),
            total,
        };
        if let Some((mut f, p)) =
            self.create_file(MANIFEST.as_bytes(), MemberKind::File, &mut seen)?
        {
            f.write_all(&manifest_bytes)
                .map_err(|e| BundleError::io(&p, e))?;
        }
        self.collect(MANIFEST.as_bytes(), MemberKind::File, &manifest_bytes)?;
        seen.kinds
            .insert(MANIFEST.as_bytes().to_vec(), MemberKind::File);
        let mut buf = vec![0u8; 256 * 1024];
        while let Some((mut entry, name, link)) =
            self.next_member(&mut entries, &mut seen.total, zstd_error)?
        {
            let etype = entry.header().entry_type();
            let kind = self.check_entry(&name, etype, link.as_deref(), &seen)?;
            let size = entry.size();
            self.check_member_size(&name, kind, size, &mut seen)?;
            let in_codebase = name.starts_with(CODEBASE_DIR.as_bytes());
            let content = if kind == MemberKind::Symlink {
                let target = link.unwrap_or_default();
                self.write_symlink(&name, &target, &mut seen)?;
                self.collect(&name, kind, &target)?;
                let mut b = GitBlobHasher::new(target.len() as u64);
                b.update(&target);
                MemberContent {
                    sha256: Sha256Digest::of(&target),
                    blob: b.finish(),
                    len: target.len() as u64,
                    kind,
                    record: None,
                }
            } else {
                self.read_file_member(
                    &mut entry,
                    &name,
                    in_codebase,
                    &mut seen,
                    &mut buf,
                    zstd_error,
                )?
            };
            seen.kinds.insert(name.clone(), content.kind);
            if in_codebase {
                seen.codebase.push((
                    name[CODEBASE_DIR.len()..].to_vec(),
                    content.kind,
                    content.blob,
                ));
            }
            self.check_listed(&listed, &name, content)?;
        }
        for m in &manifest.members {
            if !seen.kinds.contains_key(&m.path) {
                self.problem(&m.path, "listed in bundle.json but missing from the bundle");
            }
        }
        self.check_codebase_tree(&manifest, &seen)?;
        self.check_trailing(archive.into_inner(), &mut buf, zstd_error)?;
        Ok(manifest)
    }

    /// A member's size against the limits (a symlink carries none), counted in the total.
    fn check_member_size(
        &self,
        name: &[u8],
        kind: MemberKind,
        size: u64,
        seen: &mut Seen,
    ) -> Result<(), BundleError> {
        if kind == MemberKind::Symlink && size != 0 {
            return Err(self.refuse(name, "a symlink entry that carries data"));
        }
        if seen.kinds.len() as u64 >= self.limits.max_members {
            return Err(self.refuse(
                name,
                format!("the bundle has over {} members", self.limits.max_members),
            ));
        }
        if size > self.limits.max_member_size {
            return Err(self.refuse(
                name,
                format!(
                    "{size} bytes is over the member size limit of {}",
                    self.limits.max_member_size
                ),
            ));
        }
        if let Some(limit) = record_limit(name) {
            self.size_within(name, size, limit, &path::display(name))?;
        }
        seen.total += size;
        if seen.total > self.limits.max_total_size {
            return Err(self.refuse(
                name,
                format!(
                    "the bundle expands past the total size limit of {} bytes",
                    self.limits.max_total_size
                ),
            ));
        }
        Ok(())
    }

    /// A regular file member's content, read once: hashed, written or collected as the sink
    /// wants, and kept when it is a record checked below (vcs.json, expected.json).
    fn read_file_member(
        &mut self,
        entry: &mut tar::Entry<Pipe>,
        name: &[u8],
        in_codebase: bool,
        seen: &mut Seen,
        buf: &mut [u8],
        zstd_error: &Rc<RefCell<Option<String>>>,
    ) -> Result<MemberContent, BundleError> {
        let size = entry.size();
        let kind = if entry.header().mode().unwrap_or(0o644) & 0o100 != 0 {
            MemberKind::Executable
        } else {
            MemberKind::File
        };
        let mut out = self.create_file(name, kind, seen)?;
        let mut sha = Sha256Hasher::new();
        let mut blob = in_codebase.then(|| GitBlobHasher::new(size));
        // vcs.json and expected.json are read by every reader, to be checked below.
        let is_record = record_limit(name).is_some();
        let mut collected = (matches!(self.sink, Sink::Collect(_)) || is_record)
            .then(|| Vec::with_capacity(size as usize));
        let mut n_total = 0u64;
        let mut record = None;
        loop {
            let n = fsutil::read_some(entry, buf).map_err(|e| self.classify(e, zstd_error))?;
            if n == 0 {
                break;
            }
            sha.update(&buf[..n]);
            if let Some(b) = blob.as_mut() {
                b.update(&buf[..n]);
            }
            if let Some((f, p)) = out.as_mut() {
                f.write_all(&buf[..n])
                    .map_err(|e| BundleError::io(&*p, e))?;
            }
            if let Some(c) = collected.as_mut() {
                c.extend_from_slice(&buf[..n]);
            }
            n_total += n as u64;
        }
        if let Some(c) = collected {
            if is_record {
                record = Some(c.clone());
            }
            self.collect(name, kind, &c)?;
        }
        if n_total != size {
            return Err(BundleError::Tar {
                path: self.bundle.to_path_buf(),
                detail: format!(
                    "member `{}` is truncated ({n_total} of {size} bytes)",
                    path::display(name)
                ),
            });
        }
        Ok(MemberContent {
            sha256: sha.finish(),
            blob: blob.map_or(GitOid([0; 20]), |b| b.finish()),
            len: n_total,
            kind,
            record,
        })
    }

    /// A member against its listing in bundle.json: its kind and content; a record whose
    /// content is right must also make sense.
    fn check_listed(
        &mut self,
        listed: &HashMap<&[u8], &ManifestMember>,
        name: &[u8],
        content: MemberContent,
    ) -> Result<(), BundleError> {
        let MemberContent {
            sha256,
            len: content_len,
            kind,
            record: mut record_content,
            ..
        } = content;
        match listed.get(name) {
            None => self.problem(name, "the member is not listed in bundle.json"),
            Some(m) => {
                if m.kind != kind {
                    self.problem(
                        name,
                        format!("it is a {kind:?} but bundle.json lists a {:?}", m.kind),
                    );
                }
                if m.sha256 == sha256
                    && m.size == content_len
                    && let Some(bytes) = record_content.take()
                {
                    // Its hash is right: what it says must make sense.
                    check_record(name, &bytes).map_err(|e| self.refuse(name, e.to_string()))?;
                }
                if m.sha256 != sha256 || m.size != content_len {
                    self.problem(
                        name,
                        format!(
                            "content does not match bundle.json (sha256 {sha256}, {content_len} bytes; \
                             expected {}, {} bytes)",
                            m.sha256, m.size
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    /// The codebase's git tree id, from its members and gitlinks, against bundle.json's; each
    /// submodule unpacked as an empty directory, as `git checkout` leaves it.
    fn check_codebase_tree(&mut self, manifest: &Manifest, seen: &Seen) -> Result<(), BundleError> {
        let gitlinks = manifest.gitlinks.iter().map(|g| {
            (
                &g.path[CODEBASE_DIR.len()..],
                gittree::GITLINK_MODE,
                g.commit,
            )
        });
        let entries = seen
            .codebase
            .iter()
            .map(|(p, k, o)| (&p[..], k.git_mode(), *o))
            .chain(gitlinks);
        match gittree::tree_id(entries) {
            Ok(tree) if tree != manifest.codebase_tree => self.problem(
                b"codebase/",
                format!(
                    "its git tree id is {tree}, but bundle.json says {}",
                    manifest.codebase_tree
                ),
            ),
            Ok(_) => {}
            Err(e) => self.problem(b"codebase/", e.to_string()),
        }
        if let Sink::Dir(root) = self.sink {
            for g in &manifest.gitlinks {
                let dir = Self::target_path(root, &g.path);
                fs::create_dir_all(&dir).map_err(|e| BundleError::io(&dir, e))?;
            }
        }
        Ok(())
    }

    /// Whatever follows the end-of-archive marker must be zero padding.
    fn check_trailing(
        &mut self,
        mut pipe: Pipe,
        buf: &mut [u8],
        zstd_error: &Rc<RefCell<Option<String>>>,
    ) -> Result<(), BundleError> {
        loop {
            let n = pipe.read(buf).map_err(|e| self.classify(e, zstd_error))?;
            if n == 0 {
                break;
            }
            if buf[..n].iter().any(|&b| b != 0) {
                self.problem(b"(whole bundle)", "data follows the end of the tar archive");
                io::copy(&mut pipe, &mut io::sink()).map_err(|e| self.classify(e, zstd_error))?;
                break;
            }
        }
        Ok(())
    }

    fn collect(
        &mut self,
        path: &[u8],
        kind: MemberKind,
        content: &[u8],
    ) -> Result<(), BundleError> {
        if let Sink::Collect(f) = &mut self.sink {
            f(ReadMember {
                path,
                kind,
                content,
            })?;
        }
        Ok(())
    }

    fn target_path(root: &Path, name: &[u8]) -> PathBuf {
        root.join(OsStr::from_bytes(name))
    }

    fn ensure_parent(&self, root: &Path, name: &[u8], seen: &mut Seen) -> Result<(), BundleError> {
        if let Some(pos) = name.iter().rposition(|&b| b == b'/') {
            let dir = Self::target_path(root, &name[..pos]);
            if !seen.created_dirs.contains(&dir) {
                fs::create_dir_all(&dir).map_err(|e| BundleError::io(&dir, e))?;
                seen.created_dirs.insert(dir);
            }
        }
        Ok(())
    }

    fn create_file(
        &self,
        name: &[u8],
        kind: MemberKind,
        seen: &mut Seen,
    ) -> Result<Option<(File, PathBuf)>, BundleError> {
        let Sink::Dir(root) = self.sink else {
            return Ok(None);
        };
        self.ensure_parent(root, name, seen)?;
        let p = Self::target_path(root, name);
        let f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(kind.tar_mode())
            .open(&p)
            .map_err(|e| BundleError::io(&p, e))?;
        Ok(Some((f, p)))
    }

    fn write_symlink(
        &self,
        name: &[u8],
        target: &[u8],
        seen: &mut Seen,
    ) -> Result<(), BundleError> {
        let Sink::Dir(root) = self.sink else {
            return Ok(());
        };
        self.ensure_parent(root, name, seen)?;
        let p = Self::target_path(root, name);
        std::os::unix::fs::symlink(OsStr::from_bytes(target), &p)
            .map_err(|e| BundleError::io(&p, e))
    }
}

fn open(path: &Path) -> Result<File, BundleError> {
    File::open(path).map_err(|e| BundleError::io(path, e))
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
