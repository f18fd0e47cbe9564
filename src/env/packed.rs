//! Interpreters carried by a lock (by default; `env lock --no-pack-python` leaves them out):
//! the interpreter's prefix as one deterministic tar.zst object, unpacked by `env build` into
//! the archive, so that an environment never points outside it.
//!
//! Left out of the prefix: `site-packages` (third-party packages of the machine, which a
//! virtual environment does not see), CPython's own test suite and `__pycache__` directories.
//! A shared-library build (pyenv's, here) finds `libpython` through an absolute RUNPATH; the
//! packed executable's RUNPATH is rewritten to `$ORIGIN/../lib` so the copy runs from anywhere.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::pylock::{Artifact, Hashes};
use super::python::Interpreter;
use super::{ArtifactError, EnvError, io_err};
use crate::digest::Sha256Digest;
use crate::store::{ObjectError, ObjectStore};

/// Paths under the prefix that are not packed.
fn skipped(rel: &Path) -> bool {
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.iter().any(|p| p == "__pycache__") {
        return true;
    }
    // lib/pythonX.Y/site-packages/* and lib/pythonX.Y/test
    parts.len() >= 4
        && parts[0] == "lib"
        && parts[1].starts_with("python")
        && parts[2] == "site-packages"
        || parts.len() >= 3
            && parts[0] == "lib"
            && parts[1].starts_with("python")
            && parts[2] == "test"
}

/// `bytes` with every NUL-terminated occurrence of `old` replaced by `new` padded with NULs
/// (ELF string tables keep their size): how an absolute RUNPATH becomes a relative one.
fn rewrite_runpath(bytes: &mut [u8], old: &str, new: &str) -> bool {
    let needle: Vec<u8> = [old.as_bytes(), b"\0"].concat();
    if new.len() > old.len() {
        return false;
    }
    let mut changed = false;
    let mut i = 0;
    while i + needle.len() <= bytes.len() {
        if bytes[i..i + needle.len()] == needle[..] {
            let slot = &mut bytes[i..i + old.len()];
            slot.fill(0);
            slot[..new.len()].copy_from_slice(new.as_bytes());
            changed = true;
            i += needle.len();
        } else {
            i += 1;
        }
    }
    changed
}

/// [`pack_python`], remembered under `cache_dir` by the executable's hash and the prefix's
/// path: every lock of an archive carries its interpreter, and the prefix (tens of MB
/// compressed) is packed once, not once per lock. A remembered object the store lost is
/// packed again. With `shared` (`<shared cache>/packed-pythons`, [`super::shared_cache`]),
/// the packed object is kept there too, under the same name, and another archive takes it
/// from there (checked against its hash) instead of packing the prefix again.
pub fn pack_python_once(
    objects: &ObjectStore,
    cache_dir: &Path,
    shared: Option<&Path>,
    scratch: &Path,
    interp: &Interpreter,
) -> Result<Artifact, EnvError> {
    let prefix_key = Sha256Digest::of(interp.prefix.as_os_str().as_encoded_bytes());
    let name = format!("{}-{}", interp.sha256.hex(), &prefix_key.hex()[..16]);
    let entry = cache_dir.join(format!("{name}.json"));
    let remembered = std::fs::read(&entry)
        .ok()
        .and_then(|b| serde_json::from_slice::<Artifact>(&b).ok())
        .filter(|art| art.sha256().is_ok_and(|id| objects.has(&id)));
    if let Some(art) = remembered {
        return Ok(art);
    }
    let (art, packed) = match shared.and_then(|dir| take_shared(objects, dir, &name)) {
        Some(art) => (art, false),
        None => (pack_python(objects, scratch, interp)?, true),
    };
    // Only caches: a failure to remember costs a later pack, not this lock.
    if let Ok(bytes) = serde_json::to_vec(&art) {
        let _ = write_cached(&entry, &mut &bytes[..]);
        if let (Some(dir), true) = (shared, packed)
            && let Ok(id) = art.sha256()
            && let Ok(mut object) = std::fs::File::open(objects.path_of(&id))
        {
            // The object first, its description last: a description names a whole object.
            let _ = write_cached(&dir.join(format!("{name}.tar.zst")), &mut object)
                .and_then(|()| write_cached(&dir.join(format!("{name}.json")), &mut &bytes[..]));
        }
    }
    Ok(art)
}

/// The packed interpreter `name` of the shared cache `dir`, put into `objects` if it hashes
/// to what its description says; None when there is none, or it does not.
fn take_shared(objects: &ObjectStore, dir: &Path, name: &str) -> Option<Artifact> {
    let bytes = std::fs::read(dir.join(format!("{name}.json"))).ok()?;
    let art: Artifact = serde_json::from_slice(&bytes).ok()?;
    let id = art.sha256().ok()?;
    let mut file = std::fs::File::open(dir.join(format!("{name}.tar.zst"))).ok()?;
    match objects.put_checked(&mut file, Some(&id)) {
        Ok(_) => Some(art),
        Err(e) => {
            tracing::warn!("the shared packed interpreter {name} is not used: {e}");
            None
        }
    }
}

/// Writes what `from` yields to `dest`, under a temporary name renamed into place.
fn write_cached(dest: &Path, from: &mut dyn Read) -> std::io::Result<()> {
    let dir = crate::fsutil::parent_dir(dest);
    std::fs::create_dir_all(dir)?;
    let mut tmp = crate::fsutil::temp_file_in(dir)?;
    std::io::copy(from, &mut tmp)?;
    crate::fsutil::persist(tmp, dest)
}

/// Packs the prefix of `interp` into an object; returns it as an artifact.
pub fn pack_python(
    objects: &ObjectStore,
    scratch: &Path,
    interp: &Interpreter,
) -> Result<Artifact, EnvError> {
    let prefix = &interp.prefix;
    let runpath = prefix.join("lib").to_string_lossy().into_owned();
    let tmp_path = scratch.join("python.tar.zst");
    let file = std::fs::File::create(&tmp_path).map_err(io_err(&tmp_path))?;
    let mut enc = zstd::Encoder::new(file, 6).map_err(io_err(&tmp_path))?;
    let _ = enc.multithread(2);
    {
        let mut tar = tar::Builder::new(&mut enc);
        tar.follow_symlinks(false);
        let mut stack = vec![PathBuf::new()];
        while let Some(rel) = stack.pop() {
            let dir = prefix.join(&rel);
            let mut names: Vec<_> = std::fs::read_dir(&dir)
                .map_err(io_err(&dir))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(io_err(&dir))?;
            names.sort_by_key(|e| e.file_name());
            // Directories are pushed in reverse so they are visited in sorted order.
            let mut subdirs = Vec::new();
            for e in names {
                let r = rel.join(e.file_name());
                if skipped(&r) {
                    continue;
                }
                let path = prefix.join(&r);
                let meta = std::fs::symlink_metadata(&path).map_err(io_err(&path))?;
                let mut h = tar::Header::new_gnu();
                h.set_mtime(0);
                h.set_uid(0);
                h.set_gid(0);
                if meta.file_type().is_symlink() {
                    let target = std::fs::read_link(&path).map_err(io_err(&path))?;
                    h.set_entry_type(tar::EntryType::Symlink);
                    h.set_mode(0o777);
                    h.set_size(0);
                    tar.append_link(&mut h, &r, &target)
                        .map_err(io_err(&path))?;
                } else if meta.is_dir() {
                    h.set_entry_type(tar::EntryType::Directory);
                    h.set_mode(0o755);
                    h.set_size(0);
                    tar.append_data(&mut h, &r, std::io::empty())
                        .map_err(io_err(&path))?;
                    subdirs.push(r);
                } else if meta.is_file() {
                    let mut bytes = std::fs::read(&path).map_err(io_err(&path))?;
                    if bytes.starts_with(b"\x7fELF") {
                        rewrite_runpath(&mut bytes, &runpath, "$ORIGIN/../lib");
                    }
                    use std::os::unix::fs::PermissionsExt;
                    let exec = meta.permissions().mode() & 0o111 != 0;
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_mode(if exec { 0o755 } else { 0o644 });
                    h.set_size(bytes.len() as u64);
                    tar.append_data(&mut h, &r, &bytes[..])
                        .map_err(io_err(&path))?;
                }
            }
            stack.extend(subdirs.into_iter().rev());
        }
        tar.finish().map_err(io_err(&tmp_path))?;
    }
    let file = enc.finish().map_err(io_err(&tmp_path))?;
    file.sync_all().map_err(io_err(&tmp_path))?;
    let mut f = std::fs::File::open(&tmp_path).map_err(io_err(&tmp_path))?;
    let (id, size) = objects.put(&mut f)?;
    let _ = std::fs::remove_file(&tmp_path);
    Ok(Artifact {
        name: format!(
            "{}-{}-{}.tar.zst",
            interp.implementation, interp.version, interp.platform
        ),
        upload_time: None,
        url: None,
        size,
        hashes: Hashes { sha256: id.hex() },
    })
}

/// The packed interpreter of `art`, unpacked once under `<ark>/pythons/<sha256>/`; returns its
/// `bin/pythonX.Y`. With `shared` (`<shared cache>/pythons`, [`super::shared_cache`]), it is
/// unpacked and compiled once per machine, under `<shared>/<sha256>/`, and each archive's
/// tree is made of hard links to that one (copies across filesystems), its build files then
/// rewritten to name the archive's place: unpacking and compiling the standard library took
/// about 3 s of every new archive's first lock or build.
pub fn unpack_python(
    objects: &ObjectStore,
    ark_root: &Path,
    art: &Artifact,
    major_minor: &str,
    shared: Option<&Path>,
) -> Result<PathBuf, EnvError> {
    let id: Sha256Digest = art.sha256().map_err(|e| EnvError::BadLock {
        id: String::new(),
        detail: e.to_string(),
    })?;
    let root = crate::store::Layout::new(ark_root).pythons();
    let dest = root.join(id.hex());
    let exe = dest.join("bin").join(format!("python{major_minor}"));
    if is_complete(&dest) {
        // Unpacked by a swe-ark that left the build files naming the locker's prefix: best
        // effort (another user's unpacked interpreter may not be this user's to change).
        if let Err(e) = relocate_build_files(&dest, &dest) {
            tracing::debug!(
                "the build files of {} name another prefix: {e}",
                dest.display()
            );
        }
        return Ok(exe);
    }
    if let Some(shared) = shared {
        match link_shared(objects, shared, &root, &id, art, major_minor) {
            Ok(()) => return Ok(exe),
            // Only a cache: the archive unpacks its own.
            Err(e) => tracing::warn!(
                "the shared unpacked interpreter in {} is not used: {e}",
                shared.display()
            ),
        }
    }
    unpack_into(objects, &root, &id, art, major_minor)?;
    Ok(exe)
}

/// Whether `dir` is a whole unpacked interpreter (its marker is written last).
fn is_complete(dir: &Path) -> bool {
    dir.join(COMPLETE).is_file()
}

/// The marker of a whole unpacked interpreter: it holds the packed object's sha256.
const COMPLETE: &str = ".complete";

/// Unpacks the object `id` (of `art`) into `<root>/<id>/`: staged under `root`, its build files
/// rewritten to name that place, its standard library compiled, then renamed into place.
fn unpack_into(
    objects: &ObjectStore,
    root: &Path,
    id: &Sha256Digest,
    art: &Artifact,
    major_minor: &str,
) -> Result<(), EnvError> {
    let dest = root.join(id.hex());
    let staging = staging_in(root)?;
    let reader = match objects.open(id) {
        Ok(r) => r,
        Err(ObjectError::Missing(_)) => {
            return Err(ArtifactError::Missing {
                lock: String::new(),
                name: "the packed interpreter".into(),
                version: art.name.clone(),
                filename: art.name.clone(),
                sha256: id.hex(),
            }
            .into());
        }
        Err(e) => return Err(e.into()),
    };
    let dec = zstd::Decoder::new(reader).map_err(io_err(&dest))?;
    let mut archive = tar::Archive::new(dec);
    archive.set_preserve_permissions(true);
    archive.unpack(staging.path()).map_err(io_err(&dest))?;
    // The whole object must have been read (and so hash-checked) to the end.
    let mut rest = archive.into_inner();
    let mut sink = Vec::new();
    rest.read_to_end(&mut sink).map_err(io_err(&dest))?;
    finish_staged(staging, &dest, id, major_minor)
}

/// `<ark pythons>/<id>/` made of hard links to the machine's shared unpacked interpreter
/// (`<shared>/<id>/`, unpacked there first when it is not yet). The links are never written
/// through: the build files are replaced ([`relocate_build_files`] writes atomically) and so
/// are the compiled files of the ones it rewrites (`compileall` writes atomically too).
fn link_shared(
    objects: &ObjectStore,
    shared: &Path,
    root: &Path,
    id: &Sha256Digest,
    art: &Artifact,
    major_minor: &str,
) -> Result<(), EnvError> {
    let source = shared.join(id.hex());
    if !is_complete(&source) {
        unpack_into(objects, shared, id, art, major_minor)?;
    }
    let dest = root.join(id.hex());
    let staging = staging_in(root)?;
    crate::fsutil::link_tree(&source, staging.path()).map_err(io_err(&source))?;
    let marker = staging.path().join(COMPLETE);
    std::fs::remove_file(&marker).map_err(io_err(&marker))?;
    finish_staged(staging, &dest, id, major_minor)
}

/// A new staging directory under `root` (made if need be), removed unless it is kept: what a
/// killed process leaves is named as the archive's temporary files are.
fn staging_in(root: &Path) -> Result<tempfile::TempDir, EnvError> {
    std::fs::create_dir_all(root).map_err(io_err(root))?;
    tempfile::Builder::new()
        .prefix(crate::fsutil::TEMP_PREFIX)
        .tempdir_in(root)
        .map_err(io_err(root))
}

/// The last steps of an unpacked interpreter staged in `staging`: build files naming `dest`,
/// the standard library compiled (only what is not yet), the marker, the rename to `dest`.
/// Another process that put a whole one at `dest` first wins.
fn finish_staged(
    staging: tempfile::TempDir,
    dest: &Path,
    id: &Sha256Digest,
    major_minor: &str,
) -> Result<(), EnvError> {
    relocate_build_files(staging.path(), dest)?;
    compile_stdlib_once(staging.path(), major_minor);
    let mut marker = std::fs::File::create(staging.path().join(COMPLETE)).map_err(io_err(dest))?;
    marker
        .write_all(id.hex().as_bytes())
        .map_err(io_err(dest))?;
    let staged = staging.keep();
    if let Err(e) = std::fs::rename(&staged, dest) {
        let _ = std::fs::remove_dir_all(&staged);
        if !is_complete(dest) {
            return Err(io_err(dest)(e));
        }
    }
    Ok(())
}

/// Compiles the unpacked interpreter's standard library (`lib/pythonX.Y`, packed without
/// `__pycache__`) once, where it is unpacked: every environment copies it with its
/// `__pycache__` (the sources' times kept, so the `.pyc` files stay valid) instead of
/// compiling it again (about 5 s of CPU per environment). Best effort: what is not compiled
/// here is compiled by the environment ([`super::venv`]).
fn compile_stdlib_once(prefix: &Path, major_minor: &str) {
    let python = prefix.join("bin").join(format!("python{major_minor}"));
    let stdlib = prefix.join("lib").join(format!("python{major_minor}"));
    let mut cmd = std::process::Command::new(&python);
    cmd.env_clear().stdin(std::process::Stdio::null());
    super::venv::compile_tree(cmd, &stdlib, major_minor);
}

/// The prefix an interpreter was built for, as its `_sysconfigdata` module names it.
fn built_prefix(sysconfigdata: &str) -> Option<&str> {
    let start = sysconfigdata.find("'prefix': '")? + "'prefix': '".len();
    let len = sysconfigdata[start..].find('\'')?;
    Some(&sysconfigdata[start..start + len])
}

/// The build files of the interpreter unpacked in `unpacked`, rewritten to name `dest` (where
/// it is moved next) instead of the prefix it was built for: `_sysconfigdata` (where
/// `INCLUDEPY`, `LIBDIR` and friends come from: setuptools' distutils looks for `Python.h` in
/// `INCLUDEPY`, so a C extension built offline from another user's archive would look in the
/// locker's home), the `config-*/Makefile`, `pythonX.Y-config` and the `pkg-config` files. A
/// system prefix (`/usr`) is left alone: its paths are not the interpreter's alone.
pub(super) fn relocate_build_files(unpacked: &Path, dest: &Path) -> Result<(), EnvError> {
    let lib = unpacked.join("lib");
    let stdlibs: Vec<PathBuf> = std::fs::read_dir(&lib)
        .map_err(io_err(&lib))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("python"))
        })
        .collect();
    let mut files = Vec::new();
    for stdlib in &stdlibs {
        for e in std::fs::read_dir(stdlib).map_err(io_err(stdlib))?.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("_sysconfigdata") && name.ends_with(".py") {
                files.push(e.path());
            } else if name.starts_with("config-") && e.path().is_dir() {
                files.push(e.path().join("Makefile"));
            }
        }
    }
    let Some(old) = files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .find_map(|text| built_prefix(&text).map(str::to_string))
    else {
        return Ok(());
    };
    let new = dest.to_string_lossy();
    if ["", "/", "/usr", "/usr/local"].contains(&old.trim_end_matches('/')) || old == new {
        return Ok(());
    }
    for dir in [unpacked.join("bin"), lib.join("pkgconfig")] {
        if let Ok(rd) = std::fs::read_dir(&dir) {
            files.extend(rd.flatten().map(|e| e.path()).filter(|p| {
                p.file_name().is_some_and(|n| {
                    let n = n.to_string_lossy();
                    n.ends_with("-config") || n.ends_with(".pc")
                })
            }));
        }
    }
    for f in files {
        let Ok(meta) = std::fs::symlink_metadata(&f) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        if text.contains(&old) {
            // Atomic: another build may be starting this interpreter (permissions kept).
            crate::fsutil::write_atomic(&f, text.replace(&old, &new).as_bytes())
                .map_err(io_err(&f))?;
            std::fs::set_permissions(&f, meta.permissions()).map_err(io_err(&f))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shared packed interpreter is taken when it hashes to what its description says, and
    /// refused (nothing stored) when it does not.
    #[test]
    fn a_shared_packed_interpreter_is_taken_only_whole() {
        let dir = tempfile::tempdir().unwrap();
        let shared = dir.path().join("shared");
        let objects = ObjectStore::new(dir.path().join("objects"));
        let bytes = b"a packed interpreter".to_vec();
        let id = Sha256Digest::of(&bytes);
        let art = Artifact {
            name: "cpython-3.11.7-linux-x86_64.tar.zst".into(),
            upload_time: None,
            url: None,
            size: bytes.len() as u64,
            hashes: crate::env::pylock::Hashes { sha256: id.hex() },
        };
        assert!(
            take_shared(&objects, &shared, "k").is_none(),
            "nothing shared yet"
        );
        let json = serde_json::to_vec(&art).unwrap();
        write_cached(&shared.join("k.json"), &mut &json[..]).unwrap();
        write_cached(&shared.join("k.tar.zst"), &mut &b"not that"[..]).unwrap();
        assert!(take_shared(&objects, &shared, "k").is_none());
        assert!(!objects.has(&id));
        write_cached(&shared.join("k.tar.zst"), &mut &bytes[..]).unwrap();
        assert_eq!(take_shared(&objects, &shared, "k"), Some(art));
        assert!(objects.has(&id));
    }

    /// A packed interpreter as `pack_python` makes one: a build file naming the prefix it was
    /// built for, a module, an executable.
    fn packed_fixture(objects: &ObjectStore) -> Artifact {
        let mut tar = tar::Builder::new(Vec::new());
        let files: [(&str, &[u8], u32); 3] = [
            (
                "lib/python3.11/_sysconfigdata__linux_x86_64-linux-gnu.py",
                b"build_time_vars = {'prefix': '/home/locker/.pyenv/versions/3.11.7'}\n",
                0o644,
            ),
            ("lib/python3.11/json/__init__.py", b"x = 1\n", 0o644),
            ("bin/python3.11", b"not an interpreter", 0o755),
        ];
        for (path, bytes, mode) in files {
            let mut h = tar::Header::new_gnu();
            h.set_mode(mode);
            h.set_size(bytes.len() as u64);
            tar.append_data(&mut h, path, bytes).unwrap();
        }
        let packed = zstd::encode_all(&tar.into_inner().unwrap()[..], 3).unwrap();
        let (id, size) = objects.put(&mut &packed[..]).unwrap();
        Artifact {
            name: "cpython-3.11.7-linux-x86_64.tar.zst".into(),
            upload_time: None,
            url: None,
            size,
            hashes: crate::env::pylock::Hashes { sha256: id.hex() },
        }
    }

    /// With a shared cache, the interpreter is unpacked there once; each archive's tree is
    /// hard links to it but for the build files, which name the archive's own place and are
    /// new files: the shared tree and the other archive's are left as they were.
    #[test]
    fn archives_link_the_shared_unpacked_interpreter_and_relocate_their_own_copies() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let objects = ObjectStore::new(dir.path().join("objects"));
        let art = packed_fixture(&objects);
        let id = art.sha256().unwrap().hex();
        let shared = dir.path().join("shared/pythons");
        let (one, two) = (dir.path().join("one"), dir.path().join("two"));
        let data = "lib/python3.11/_sysconfigdata__linux_x86_64-linux-gnu.py";
        for ark in [&one, &two] {
            let exe = unpack_python(&objects, ark, &art, "3.11", Some(&shared)).unwrap();
            assert_eq!(exe, ark.join("pythons").join(&id).join("bin/python3.11"));
        }
        let read = |root: &Path| std::fs::read_to_string(root.join(&id).join(data)).unwrap();
        let inode =
            |root: &Path, rel: &str| std::fs::metadata(root.join(&id).join(rel)).unwrap().ino();
        assert!(read(&shared).contains(&format!("'prefix': '{}'", shared.join(&id).display())));
        for ark in [&one, &two] {
            let pythons = ark.join("pythons");
            let prefix = pythons.join(&id);
            assert!(read(&pythons).contains(&format!("'prefix': '{}'", prefix.display())));
            assert_ne!(inode(&pythons, data), inode(&shared, data));
            for rel in ["lib/python3.11/json/__init__.py", "bin/python3.11"] {
                assert_eq!(inode(&pythons, rel), inode(&shared, rel), "{rel} is linked");
            }
            assert_eq!(std::fs::read_to_string(prefix.join(COMPLETE)).unwrap(), id);
        }
        // Unpacked again: the archive's own tree is taken as it is.
        let before = inode(&one.join("pythons"), data);
        unpack_python(&objects, &one, &art, "3.11", Some(&shared)).unwrap();
        assert_eq!(inode(&one.join("pythons"), data), before);

        // A shared cache that cannot be written: the archive unpacks its own.
        let blocked = dir.path().join("blocked");
        std::fs::write(&blocked, "a file, not a directory").unwrap();
        let three = dir.path().join("three");
        unpack_python(
            &objects,
            &three,
            &art,
            "3.11",
            Some(&blocked.join("pythons")),
        )
        .unwrap();
        assert!(read(&three.join("pythons")).contains(&three.display().to_string()));
    }

    #[test]
    fn build_files_name_where_the_interpreter_is_unpacked() {
        let top = tempfile::tempdir().unwrap();
        let u = top.path();
        let stdlib = u.join("lib/python3.9");
        std::fs::create_dir_all(stdlib.join("config-3.9-x86_64-linux-gnu")).unwrap();
        std::fs::create_dir_all(u.join("bin")).unwrap();
        let data = "build_time_vars = {'prefix': '/home/locker/.pyenv/versions/3.9.18',\n                     'INCLUDEPY': '/home/locker/.pyenv/versions/3.9.18/include/python3.9',\n                     'CC': 'gcc -pthread'}\n";
        std::fs::write(
            stdlib.join("_sysconfigdata__linux_x86_64-linux-gnu.py"),
            data,
        )
        .unwrap();
        std::fs::write(
            stdlib.join("config-3.9-x86_64-linux-gnu/Makefile"),
            "prefix=\t\t/home/locker/.pyenv/versions/3.9.18\n",
        )
        .unwrap();
        std::fs::write(
            u.join("bin/python3.9-config"),
            "#!/bin/sh\nprefix_real=/home/locker/.pyenv/versions/3.9.18\n",
        )
        .unwrap();
        std::fs::write(
            u.join("bin/pip3"),
            "#!/home/locker/.pyenv/versions/3.9.18/bin/py\n",
        )
        .unwrap();
        relocate_build_files(u, Path::new("/ark/pythons/abc")).unwrap();
        // Again (an interpreter unpacked before): nothing left to change.
        relocate_build_files(u, Path::new("/ark/pythons/abc")).unwrap();
        let read = |p: &str| std::fs::read_to_string(u.join(p)).unwrap();
        let data = read("lib/python3.9/_sysconfigdata__linux_x86_64-linux-gnu.py");
        assert!(
            data.contains("'INCLUDEPY': '/ark/pythons/abc/include/python3.9'"),
            "{data}"
        );
        assert!(data.contains("'CC': 'gcc -pthread'"), "{data}");
        assert!(
            read("lib/python3.9/config-3.9-x86_64-linux-gnu/Makefile")
                .contains("/ark/pythons/abc\n")
        );
        assert!(read("bin/python3.9-config").contains("prefix_real=/ark/pythons/abc\n"));
        // Scripts other than the -config ones are not build files: left as they were.
        assert!(read("bin/pip3").contains("/home/locker/"));

        // A system prefix names more than the interpreter: nothing is rewritten.
        let sys = "build_time_vars = {'prefix': '/usr', 'INCLUDEPY': '/usr/include/python3.9'}\n";
        std::fs::write(
            stdlib.join("_sysconfigdata__linux_x86_64-linux-gnu.py"),
            sys,
        )
        .unwrap();
        std::fs::remove_file(stdlib.join("config-3.9-x86_64-linux-gnu/Makefile")).unwrap();
        relocate_build_files(u, Path::new("/ark/pythons/abc")).unwrap();
        assert_eq!(
            read("lib/python3.9/_sysconfigdata__linux_x86_64-linux-gnu.py"),
            sys
        );
    }

    #[test]
    fn runpaths_are_rewritten_in_place() {
        let mut b = b"xx/opt/py/lib\0yy".to_vec();
        assert!(rewrite_runpath(&mut b, "/opt/py/lib", "$O/lib"));
        assert_eq!(&b, b"xx$O/lib\0\0\0\0\0\0yy");
        assert!(skipped(Path::new("lib/python3.11/site-packages/foo")));
        assert!(skipped(Path::new("lib/python3.11/test")));
        assert!(skipped(Path::new("lib/python3.11/json/__pycache__")));
        assert!(!skipped(Path::new("lib/python3.11/site-packages")));
        assert!(!skipped(Path::new("lib/python3.11/json/decoder.py")));
    }
}
