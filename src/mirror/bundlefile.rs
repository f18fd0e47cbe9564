//! Git bundles, to carry a mirror across an air gap: `mirror export` writes one that
//! `git clone FILE.bundle` reads (format v2: a header of refs, then a pack of every object
//! they reach), `mirror import` reads one back into a mirror. libgit2 has no bundle support,
//! so the header is written and parsed here and the pack goes through libgit2's pack builder
//! and pack writer.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;

use git2::{ObjectType, Oid, Repository};

use super::{FETCH_REFSPECS, Mirror, MirrorError, RepoName};
use crate::fsutil;
use crate::progress::Progress;

const V2_SIGNATURE: &str = "# v2 git bundle";
const V3_SIGNATURE: &str = "# v3 git bundle";

#[derive(Debug, Clone, serde::Serialize)]
pub struct ExportStats {
    pub refs: usize,
    pub objects: usize,
    pub bytes: u64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ImportStats {
    pub name: String,
    pub refs: usize,
    pub created: bool,
}

struct Header {
    refs: BTreeMap<String, Oid>,
    head: Option<Oid>,
    prerequisites: Vec<Oid>,
}

fn bad(path: &Path, detail: impl Into<String>) -> MirrorError {
    MirrorError::BadBundle {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}

fn read_header(path: &Path, r: &mut impl BufRead) -> Result<Header, MirrorError> {
    let mut line = Vec::new();
    let mut next_line = |r: &mut dyn BufRead| -> Result<Option<String>, MirrorError> {
        line.clear();
        let n = r
            .take(64 * 1024)
            .read_until(b'\n', &mut line)
            .map_err(|source| MirrorError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        if n == 0 {
            return Ok(None);
        }
        if line.last() != Some(&b'\n') {
            return Err(bad(path, "the header ends in the middle of a line"));
        }
        line.pop();
        String::from_utf8(line.clone())
            .map(Some)
            .map_err(|_| bad(path, "the header is not UTF-8"))
    };
    let signature = next_line(r)?.ok_or_else(|| bad(path, "the file is empty"))?;
    let v3 = match signature.as_str() {
        V2_SIGNATURE => false,
        V3_SIGNATURE => true,
        other => {
            return Err(bad(
                path,
                format!(
                    "it does not start with `{V2_SIGNATURE}` (found `{}`)",
                    other.chars().take(40).collect::<String>()
                ),
            ));
        }
    };
    let mut header = Header {
        refs: BTreeMap::new(),
        head: None,
        prerequisites: Vec::new(),
    };
    loop {
        let Some(l) = next_line(r)? else {
            return Err(bad(
                path,
                "the header is truncated (no blank line before the pack)",
            ));
        };
        if l.is_empty() {
            break;
        }
        if v3 && let Some(cap) = l.strip_prefix('@') {
            if cap.starts_with("object-format=") && cap != "object-format=sha1" {
                return Err(bad(path, format!("unsupported capability `{cap}`")));
            }
            continue;
        }
        let parse_oid =
            |s: &str| Oid::from_str(s).map_err(|_| bad(path, format!("bad line `{l}`")));
        if let Some(rest) = l.strip_prefix('-') {
            let id = rest.split(' ').next().unwrap_or_default();
            header.prerequisites.push(parse_oid(id)?);
            continue;
        }
        let (id, name) = l
            .split_once(' ')
            .ok_or_else(|| bad(path, format!("bad ref line `{l}`")))?;
        let oid = parse_oid(id)?;
        if name == "HEAD" {
            header.head = Some(oid);
        } else if git2::Reference::is_valid_name(name) {
            header.refs.insert(name.to_string(), oid);
        } else {
            return Err(bad(path, format!("`{name}` is not a valid ref name")));
        }
    }
    Ok(header)
}

impl Mirror {
    /// Writes every ref of the mirror (pins and pull-request heads included) and every object
    /// they reach as a git bundle at `out`, atomically.
    pub fn export_bundle(
        &self,
        out: &Path,
        progress: &dyn Progress,
    ) -> Result<ExportStats, MirrorError> {
        let git = self.git();
        let mut refs: BTreeMap<String, Oid> = BTreeMap::new();
        for r in self.repo.references().map_err(&git)? {
            let r = r.map_err(&git)?;
            if let (Ok(name), Some(t)) = (r.name(), r.target()) {
                refs.insert(name.to_string(), t);
            }
        }
        let mut pb = self.repo.packbuilder().map_err(&git)?;
        let mut walk = self.repo.revwalk().map_err(&git)?;
        for oid in refs.values() {
            // Tags go in as objects, then whatever they point at, down to a commit.
            let mut obj = self.repo.find_object(*oid, None).map_err(&git)?;
            loop {
                match obj.kind() {
                    Some(ObjectType::Tag) => {
                        pb.insert_object(obj.id(), None).map_err(&git)?;
                        let tag = obj.into_tag().map_err(|_| {
                            git2::Error::from_str("an object said to be a tag is not one")
                        });
                        obj = tag.map_err(&git)?.target().map_err(&git)?;
                    }
                    Some(ObjectType::Commit) => {
                        walk.push(obj.id()).map_err(&git)?;
                        break;
                    }
                    _ => {
                        pb.insert_recursive(obj.id(), None).map_err(&git)?;
                        break;
                    }
                }
            }
        }
        pb.insert_walk(&mut walk).map_err(&git)?;
        let objects = pb.object_count();
        let dir = fsutil::parent_dir(out);
        let io_err = |source| MirrorError::Io {
            path: out.to_path_buf(),
            source,
        };
        let mut tmp = fsutil::temp_file_in(dir).map_err(io_err)?;
        {
            let mut w = io::BufWriter::new(tmp.as_file_mut());
            writeln!(w, "{V2_SIGNATURE}").map_err(io_err)?;
            let head = self.repo.head().ok().and_then(|h| h.target());
            for (name, oid) in &refs {
                writeln!(w, "{oid} {name}").map_err(io_err)?;
            }
            if let Some(h) = head {
                writeln!(w, "{h} HEAD").map_err(io_err)?;
            }
            writeln!(w).map_err(io_err)?;
            progress.start("writing pack", None);
            let mut failed = None;
            pb.foreach(|chunk| match w.write_all(chunk) {
                Ok(()) => {
                    progress.advance(chunk.len() as u64);
                    true
                }
                Err(e) => {
                    failed = Some(e);
                    false
                }
            })
            .map_err(&git)?;
            if let Some(e) = failed {
                return Err(io_err(e));
            }
            w.flush().map_err(io_err)?;
            progress.finish();
        }
        fsutil::persist(tmp, out).map_err(io_err)?;
        let bytes = fs::metadata(out).map_err(io_err)?.len();
        Ok(ExportStats {
            refs: refs.len(),
            objects,
            bytes,
        })
    }
}

/// The mirror name `mirror import` gives a bundle file when none is given: `local/STEM`, the
/// file's stem with every character a name cannot have made `-`.
pub fn import_name(file: &Path) -> String {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let cleaned: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("local/{cleaned}")
}

/// A new, empty bare repository for mirror `name` in a temporary folder of `mirrors_dir`
/// (renamed into place once the import succeeded), with `url` as its `origin`.
fn new_mirror(
    mirrors_dir: &Path,
    name: &RepoName,
    url: Option<&str>,
) -> Result<tempfile::TempDir, MirrorError> {
    let io_err = |source| MirrorError::Io {
        path: mirrors_dir.to_path_buf(),
        source,
    };
    let git = |source| MirrorError::Git {
        name: name.to_string(),
        source,
    };
    fs::create_dir_all(mirrors_dir).map_err(io_err)?;
    let tmp = tempfile::Builder::new()
        .prefix(&format!("{}{}-", fsutil::TEMP_PREFIX, name.dir_name()))
        .tempdir_in(mirrors_dir)
        .map_err(io_err)?;
    let repo = Repository::init_bare(tmp.path()).map_err(git)?;
    if let Some(url) = url {
        repo.remote_with_fetch("origin", url, FETCH_REFSPECS[0])
            .map_err(git)?;
        for spec in &FETCH_REFSPECS[1..] {
            repo.remote_add_fetch("origin", spec).map_err(git)?;
        }
    }
    Ok(tmp)
}

/// The bundle's pack, read from `r` (after its header) through libgit2's pack writer, which
/// checks it before anything is kept.
fn write_pack(
    repo: &Repository,
    r: &mut impl Read,
    file: &Path,
    total: Option<u64>,
    name: &RepoName,
    progress: &dyn Progress,
) -> Result<(), MirrorError> {
    let git = |source| MirrorError::Git {
        name: name.to_string(),
        source,
    };
    let odb = repo.odb().map_err(git)?;
    let mut writer = odb.packwriter().map_err(git)?;
    progress.start("reading pack", total);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = r.read(&mut buf).map_err(|source| MirrorError::Io {
            path: file.to_path_buf(),
            source,
        })?;
        if n == 0 {
            break;
        }
        writer
            .write_all(&buf[..n])
            .map_err(|e| bad(file, format!("the pack is malformed: {e}")))?;
        progress.advance(n as u64);
    }
    writer.commit().map_err(|e| {
        bad(
            file,
            format!("the pack is truncated or corrupt: {}", e.message()),
        )
    })?;
    progress.finish();
    Ok(())
}

/// The bundle's refs, each of an object the pack brought, set in `repo`, and its HEAD when a
/// branch points where it does.
fn set_refs(
    repo: &Repository,
    header: &Header,
    file: &Path,
    name: &RepoName,
) -> Result<(), MirrorError> {
    let git = |source| MirrorError::Git {
        name: name.to_string(),
        source,
    };
    for (refname, oid) in &header.refs {
        if repo.find_object(*oid, None).is_err() {
            return Err(bad(
                file,
                format!("ref {refname} names {oid}, which the pack does not hold"),
            ));
        }
    }
    for (refname, oid) in &header.refs {
        repo.reference(refname, *oid, true, "swe-ark mirror import")
            .map_err(git)?;
    }
    if let Some(head) = header.head {
        let branch = ["refs/heads/main", "refs/heads/master"]
            .iter()
            .map(|s| s.to_string())
            .chain(
                header
                    .refs
                    .keys()
                    .filter(|r| r.starts_with("refs/heads/"))
                    .cloned(),
            )
            .find(|r| header.refs.get(r) == Some(&head));
        if let Some(b) = branch {
            repo.set_head(&b).map_err(git)?;
        }
    }
    Ok(())
}

/// Reads the git bundle at `file` into mirror `name` under `mirrors_dir`, creating it if
/// needed (with `url` as its `origin`, or none). Every object arrives through libgit2's pack
/// writer, which checks the pack before anything is kept; a new mirror appears only when the
/// import succeeded, and an existing one gets its refs only after its objects are in.
pub fn import_bundle(
    mirrors_dir: &Path,
    file: &Path,
    name: &RepoName,
    url: Option<&str>,
    progress: &dyn Progress,
) -> Result<(Mirror, ImportStats), MirrorError> {
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| MirrorError::Io { path, source }
    };
    let f = File::open(file).map_err(io_err(file))?;
    let total = f.metadata().map(|m| m.len()).ok();
    let mut r = BufReader::with_capacity(1 << 20, f);
    let header = read_header(file, &mut r)?;
    let git = |source| MirrorError::Git {
        name: name.to_string(),
        source,
    };
    let dest = Mirror::dir(mirrors_dir, name);
    let created = !dest.is_dir();
    let tmp = if created {
        Some(new_mirror(mirrors_dir, name, url)?)
    } else {
        None
    };
    let repo_path = tmp
        .as_ref()
        .map_or(dest.clone(), |t| t.path().to_path_buf());
    let repo = Repository::open_bare(&repo_path).map_err(git)?;
    for p in &header.prerequisites {
        if repo.find_commit(*p).is_err() {
            return Err(bad(
                file,
                format!(
                    "it needs commit {p}, which the mirror does not have (an incremental bundle?)"
                ),
            ));
        }
    }
    write_pack(&repo, &mut r, file, total, name, progress)?;
    set_refs(&repo, &header, file, name)?;
    drop(repo);
    if let Some(tmp) = tmp {
        let kept = tmp.keep();
        fs::rename(&kept, &dest).map_err(io_err(&dest))?;
    }
    let mirror = Mirror::open(mirrors_dir, name)?;
    if let Some(url) = url
        && !created
    {
        mirror
            .repo
            .remote_set_url("origin", url)
            .map_err(mirror.git())?;
    }
    Ok((
        mirror,
        ImportStats {
            name: name.to_string(),
            refs: header.refs.len(),
            created,
        },
    ))
}
