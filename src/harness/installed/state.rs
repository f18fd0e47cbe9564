//! An installed state as one object: a zstd-compressed tar in swe-ark's one tar layout
//! ([`crate::bundle::TarWriter`]: fixed headers, no times), `state.json` first (what was
//! removed, the directories, the environment files' times), then the environment's new and
//! changed files under `env/` and the work tree's under `tree/`, each in path order. The same
//! changes give the same bytes, so the same id.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::delta::Delta;
use crate::bundle::{MemberKind, TarWriter};
use crate::digest::Sha256Digest;
use crate::store::ObjectStore;

/// The format of `state.json` this swe-ark writes and reads.
pub(super) const FORMAT: u32 = 1;
const DOC: &str = "state.json";
const ZSTD_LEVEL: i32 = 3;

/// One side's removals, directories and (for the environment) times, paths as text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Side {
    pub removed: Vec<String>,
    pub dirs: Vec<(String, u32)>,
    /// Modification times of the files, by path: kept for the environment (a `.pyc` is valid
    /// for its source's), not for the work tree (its files are written after the checkout,
    /// so a build sees its products newer than their sources).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mtimes: BTreeMap<String, (i64, u32)>,
}

/// `state.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct StateDoc {
    pub format: u32,
    /// The key it was made under (what the install depended on).
    pub key: String,
    /// Whether the install left the work tree editable.
    pub editable: bool,
    pub env: Side,
    pub tree: Side,
}

/// A state packed into the object store.
#[derive(Debug, Clone, Copy)]
pub(super) struct Packed {
    pub id: Sha256Digest,
    pub size: u64,
}

fn text(p: &Path) -> io::Result<String> {
    p.to_str()
        .map(str::to_string)
        .ok_or_else(|| io::Error::other(format!("{}: the path is not UTF-8", p.display())))
}

fn side(delta: &Delta, times: bool) -> io::Result<Side> {
    Ok(Side {
        removed: delta
            .removed
            .iter()
            .map(|p| text(p))
            .collect::<io::Result<_>>()?,
        dirs: delta
            .dirs
            .iter()
            .map(|(p, m)| Ok((text(p)?, *m)))
            .collect::<io::Result<_>>()?,
        mtimes: if times {
            delta
                .changed
                .iter()
                .filter(|c| c.link.is_none())
                .map(|c| Ok((text(&c.rel)?, c.mtime)))
                .collect::<io::Result<_>>()?
        } else {
            BTreeMap::new()
        },
    })
}

fn append_side(
    tar: &mut TarWriter<impl Write>,
    prefix: &str,
    root: &Path,
    delta: &Delta,
) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    for c in &delta.changed {
        let mut name = prefix.as_bytes().to_vec();
        name.extend_from_slice(c.rel.as_os_str().as_bytes());
        match &c.link {
            Some(target) => tar.append(
                &name,
                MemberKind::Symlink,
                0,
                target.as_os_str().as_bytes(),
                &mut io::empty(),
            )?,
            None => {
                let path = root.join(&c.rel);
                let mut f = fs::File::open(&path)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
                let size = f.metadata()?.len();
                let kind = if c.executable {
                    MemberKind::Executable
                } else {
                    MemberKind::File
                };
                tar.append(&name, kind, size, b"", &mut f)?;
            }
        }
    }
    Ok(())
}

/// Packs the environment's changes (`env_root`'s files) and the work tree's (`tree_root`'s)
/// into one object; `staging` is a directory of the work directory's for the file on its way.
pub(super) fn pack(
    objects: &ObjectStore,
    staging: &Path,
    doc: (&Sha256Digest, bool),
    env: (&Path, &Delta),
    tree: (&Path, &Delta),
) -> io::Result<Packed> {
    let state = StateDoc {
        format: FORMAT,
        key: doc.0.hex(),
        editable: doc.1,
        env: side(env.1, true)?,
        tree: side(tree.1, false)?,
    };
    let json = serde_json::to_vec_pretty(&state).map_err(io::Error::other)?;
    let mut file = tempfile::tempfile_in(staging)?;
    {
        let encoder = zstd::stream::write::Encoder::new(io::BufWriter::new(&mut file), ZSTD_LEVEL)?;
        let mut tar = TarWriter::new(encoder);
        tar.append(
            DOC.as_bytes(),
            MemberKind::File,
            json.len() as u64,
            b"",
            &mut &json[..],
        )?;
        append_side(&mut tar, "env/", env.0, env.1)?;
        append_side(&mut tar, "tree/", tree.0, tree.1)?;
        tar.finish()?.finish()?.flush()?;
    }
    use std::io::Seek;
    file.seek(io::SeekFrom::Start(0))?;
    let (id, size) = objects.put(&mut file).map_err(io::Error::other)?;
    Ok(Packed { id, size })
}

/// `rel` as a path below a root: plain names only.
fn relative(rel: &str) -> io::Result<PathBuf> {
    let p = PathBuf::from(rel);
    if rel.is_empty() || !p.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the installed state names `{rel}`, which is not a plain relative path"),
        ));
    }
    Ok(p)
}

/// `root/rel`'s parent made (each directory a real one, never a link, so nothing is written
/// outside `root`), and `root/rel` itself cleared.
fn place(root: &Path, rel: &Path) -> io::Result<PathBuf> {
    let mut at = root.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for c in &parts[..parts.len().saturating_sub(1)] {
        at.push(c);
        match fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: not a directory in the installed state's way",
                        at.display()
                    ),
                ));
            }
            Err(_) => fs::create_dir(&at)?,
        }
    }
    let dest = root.join(rel);
    remove(&dest)?;
    Ok(dest)
}

/// Removes whatever is at `path` (a directory with what it holds), links not followed.
fn remove(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => crate::fsutil::remove_tree(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn apply_side_before(root: &Path, side: &Side) -> io::Result<()> {
    for r in &side.removed {
        let rel = relative(r)?;
        place(root, &rel)?;
    }
    for (d, mode) in &side.dirs {
        let rel = relative(d)?;
        let path = root.join(&rel);
        if !fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            let dest = place(root, &rel)?;
            fs::create_dir(&dest)?;
        }
        fs::set_permissions(&path, fs::Permissions::from_mode(mode & 0o7777))?;
    }
    Ok(())
}

/// Where the state's sides go: the environment's into a directory (a farm of the shared
/// copy, made by the caller), the work tree's into the tree; either may be left out.
pub(super) struct Targets<'p> {
    pub env: Option<&'p Path>,
    pub tree: Option<&'p Path>,
}

/// Applies the state `id` to `targets` (its removals, directories, files and links). The
/// caller checks the object against its id first (`Plan::kept_environment`, once per run):
/// nothing is written from an object that does not check. Returns its `state.json`.
pub(super) fn apply(
    objects: &ObjectStore,
    id: &Sha256Digest,
    targets: &Targets,
) -> io::Result<StateDoc> {
    let reader = objects.open(id).map_err(io::Error::other)?;
    let mut archive = tar::Archive::new(zstd::stream::read::Decoder::new(reader)?);
    let mut doc: Option<StateDoc> = None;
    for entry in archive.entries()? {
        let mut entry = entry?;
        let name = entry.path_bytes().into_owned();
        let name = String::from_utf8(name).map_err(|_| bad("a member name is not UTF-8"))?;
        if doc.is_none() {
            if name != DOC {
                return Err(bad(&format!("its first member is `{name}`, not {DOC}")));
            }
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes)?;
            let parsed: StateDoc =
                serde_json::from_slice(&bytes).map_err(|e| bad(&format!("{DOC}: {e}")))?;
            if parsed.format != FORMAT {
                return Err(bad(&format!(
                    "{DOC} has format {}, this swe-ark reads {FORMAT}",
                    parsed.format
                )));
            }
            if let Some(env) = targets.env {
                apply_side_before(env, &parsed.env)?;
            }
            if let Some(tree) = targets.tree {
                apply_side_before(tree, &parsed.tree)?;
            }
            doc = Some(parsed);
            continue;
        }
        let (root, rel) = match (name.strip_prefix("env/"), name.strip_prefix("tree/")) {
            (Some(rel), _) => (targets.env, rel),
            (_, Some(rel)) => (targets.tree, rel),
            _ => return Err(bad(&format!("member `{name}` is neither env/ nor tree/"))),
        };
        let Some(root) = root else { continue };
        let rel = relative(rel)?;
        let dest = place(root, &rel)?;
        let header = entry.header();
        if header.entry_type().is_symlink() {
            let target = entry
                .link_name()?
                .ok_or_else(|| bad(&format!("link `{name}` has no target")))?;
            std::os::unix::fs::symlink(target.as_ref(), &dest)?;
        } else if header.entry_type().is_file() {
            let mode = header.mode()? & 0o777;
            let mut out = fs::File::create(&dest)?;
            io::copy(&mut entry, &mut out)?;
            out.set_permissions(fs::Permissions::from_mode(mode))?;
        } else {
            return Err(bad(&format!(
                "member `{name}` is neither a file nor a link"
            )));
        }
    }
    let doc = doc.ok_or_else(|| bad(&format!("it has no {DOC}")))?;
    if let Some(env) = targets.env {
        for (rel, (secs, nanos)) in &doc.env.mtimes {
            let path = env.join(relative(rel)?);
            let t = std::time::UNIX_EPOCH
                + std::time::Duration::new(u64::try_from(*secs).unwrap_or(0), *nanos);
            // futimens asks for ownership, not write access: the file opened to read.
            if let Ok(f) = fs::File::open(&path) {
                let _ = f.set_modified(t);
            }
        }
    }
    Ok(doc)
}

fn bad(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("the installed state is malformed: {what}"),
    )
}

#[cfg(test)]
mod tests {
    use super::super::delta;
    use super::*;

    fn write(p: &Path, s: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    }

    #[test]
    fn a_state_packs_the_same_bytes_and_applies_to_a_farm_and_a_tree() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let objects = ObjectStore::new(d.join("objects"));
        // The shared environment, and a copy the install changed.
        let shared = d.join("shared");
        write(&shared.join("lib/site/dep.py"), "dep");
        write(&shared.join("lib/site/old.pth"), "old");
        let copy = d.join("copy");
        crate::fsutil::copy_tree(&shared, &copy).unwrap();
        write(&copy.join("lib/site/__editable__.pkg.pth"), "/testbed");
        fs::remove_file(copy.join("lib/site/old.pth")).unwrap();
        std::os::unix::fs::symlink("dep.py", copy.join("lib/site/alias.py")).unwrap();
        let env = delta::from_copy(&copy, &shared).unwrap();
        // The work tree the install built in.
        let tree = d.join("tree");
        write(&tree.join("pkg/a.py"), "a");
        crate::vcs::build_work_tree(&tree, None).unwrap();
        write(&tree.join("pkg/_ext.so"), "built");
        let tree_delta = delta::from_work_tree(&tree).unwrap();
        let key = Sha256Digest::of(b"key");
        let pack_once = || {
            pack(
                &objects,
                d,
                (&key, true),
                (&copy, &env),
                (&tree, &tree_delta),
            )
            .unwrap()
        };
        let (first, second) = (pack_once(), pack_once());
        assert_eq!(first.id, second.id);
        // Applied: a farm of the shared copy with the changes, the tree's file written.
        let farm_dir = d.join("farm");
        crate::fsutil::link_tree(&shared, &farm_dir).unwrap();
        let fresh = d.join("fresh");
        write(&fresh.join("pkg/a.py"), "a");
        let targets = Targets {
            env: Some(&farm_dir),
            tree: Some(&fresh),
        };
        let doc = apply(&objects, &first.id, &targets).unwrap();
        assert!(doc.editable);
        assert_eq!(
            fs::read_to_string(farm_dir.join("lib/site/__editable__.pkg.pth")).unwrap(),
            "/testbed"
        );
        assert!(!farm_dir.join("lib/site/old.pth").exists());
        assert_eq!(
            fs::read_link(farm_dir.join("lib/site/alias.py")).unwrap(),
            Path::new("dep.py")
        );
        assert_eq!(
            fs::read_to_string(fresh.join("pkg/_ext.so")).unwrap(),
            "built"
        );
        // The shared copy is untouched: the farm's removal and changes replaced its links.
        assert!(shared.join("lib/site/old.pth").exists());
        assert!(!shared.join("lib/site/__editable__.pkg.pth").exists());
        // The environment's file keeps its time.
        use std::os::unix::fs::MetadataExt;
        let (a, b) = (
            fs::metadata(copy.join("lib/site/__editable__.pkg.pth")).unwrap(),
            fs::metadata(farm_dir.join("lib/site/__editable__.pkg.pth")).unwrap(),
        );
        assert_eq!((a.mtime(), a.mtime_nsec()), (b.mtime(), b.mtime_nsec()));
    }

    #[test]
    fn a_state_naming_a_path_outside_is_refused() {
        for bad in ["../x", "/etc/passwd", "a/../../b", ""] {
            assert!(relative(bad).is_err(), "{bad}");
        }
        // A link in the way is not followed.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        fs::create_dir_all(&root).unwrap();
        std::os::unix::fs::symlink(dir.path(), root.join("out")).unwrap();
        assert!(place(&root, Path::new("out/x")).is_err());
    }
}
