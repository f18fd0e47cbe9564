//! The Rust toolchain: found on the machine, named by what `rustc -vV` says and by the hash of
//! its files, and (when a lock carries it) packed into a deterministic tar kept as an object.
//!
//! A toolchain is relocatable (`rustc` finds its libraries by `$ORIGIN/../lib`), so the one
//! rustup installed runs the same from any directory, read-only, at [`layout::ENVIRONMENT`].
//! What it needs of the machine beyond its files: glibc and the system linker `cc`.
//!
//! [`layout::ENVIRONMENT`]: crate::context::layout::ENVIRONMENT

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use rayon::prelude::*;

use super::RustError;
use super::document::{Packed, Toolchain};
use crate::digest::{Sha256Digest, Sha256Hasher};
use crate::store::ObjectStore;

/// zstd's level for a packed toolchain: near the best ratio this size of input gets, in well
/// under a minute for a 600 MB toolchain on one core.
const TOOLCHAIN_LEVEL: i32 = 12;

/// A toolchain on this machine: where its root is, what it is, and its files.
#[derive(Debug, Clone)]
pub struct Found {
    pub root: PathBuf,
    pub identity: Toolchain,
    /// Its files, relative to `root`, sorted bytewise.
    pub files: Vec<String>,
}

/// The toolchain `explicit` names (its root, or its `rustc`), else the one `rustc` on `PATH`
/// runs (through rustup's proxy: the default toolchain).
pub fn find(explicit: Option<&Path>) -> Result<Found, RustError> {
    let root = match explicit {
        Some(p) if p.is_dir() => p.to_path_buf(),
        Some(p) => sysroot_of(p)?,
        None => sysroot_of(Path::new("rustc"))?,
    };
    probe(&root)
}

fn sysroot_of(rustc: &Path) -> Result<PathBuf, RustError> {
    let out = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| RustError::Toolchain(format!("cannot run `{}`: {e}", rustc.display())))?;
    if !out.status.success() {
        return Err(RustError::Toolchain(format!(
            "`{} --print sysroot` failed: {}",
            rustc.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    ))
}

/// What the toolchain at `root` is: its own `rustc -vV` and `cargo -V`, and its files' hash.
pub fn probe(root: &Path) -> Result<Found, RustError> {
    let run = |tool: &str, arg: &str| -> Result<String, RustError> {
        let exe = root.join("bin").join(tool);
        let out = Command::new(&exe)
            .arg(arg)
            .env_remove("RUSTUP_TOOLCHAIN")
            .output()
            .map_err(|e| RustError::Toolchain(format!("cannot run {}: {e}", exe.display())))?;
        if !out.status.success() {
            return Err(RustError::Toolchain(format!(
                "{} {arg} failed: {}",
                exe.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let vv = run("rustc", "-vV")?;
    let field = |k: &str| {
        vv.lines()
            .find_map(|l| l.strip_prefix(k).map(|v| v.trim().to_string()))
            .unwrap_or_default()
    };
    let (rustc, commit_hash, host) = (field("release:"), field("commit-hash:"), field("host:"));
    if rustc.is_empty() || host.is_empty() {
        return Err(RustError::Toolchain(format!(
            "{}/bin/rustc -vV does not say its release and host",
            root.display()
        )));
    }
    let cargo = run("cargo", "-V")?.trim().to_string();
    let (components, files) = files_of(root, &host)?;
    let files_sha256 = files_hash(root, &files)?.hex();
    Ok(Found {
        root: root.to_path_buf(),
        identity: Toolchain {
            rustc,
            commit_hash,
            host,
            cargo,
            components,
            files_sha256,
            packed: None,
        },
        files,
    })
}

/// The files of the components a build needs (`rustc`, `cargo`, the standard library), from
/// rustup's own lists of each component's files; for a toolchain rustup did not install,
/// every file under `bin/` and `lib/`.
fn files_of(root: &Path, host: &str) -> Result<(Vec<String>, Vec<String>), RustError> {
    let rustlib = root.join("lib/rustlib");
    let components = ["rustc", "cargo", "rust-std"].map(|c| format!("{c}-{host}"));
    let lists: Vec<PathBuf> = components
        .iter()
        .map(|c| rustlib.join(format!("manifest-{c}")))
        .collect();
    let mut files = Vec::new();
    let names: Vec<String> = if lists.iter().all(|p| p.is_file()) {
        for list in &lists {
            let text = std::fs::read_to_string(list)
                .map_err(|e| RustError::Toolchain(format!("{}: {e}", list.display())))?;
            for line in text.lines() {
                if let Some(f) = line.strip_prefix("file:") {
                    files.push(f.to_string());
                } else if let Some(d) = line.strip_prefix("dir:") {
                    walk(root, Path::new(d), &mut files)?;
                }
            }
        }
        components.to_vec()
    } else {
        walk(root, Path::new("bin"), &mut files)?;
        walk(root, Path::new("lib"), &mut files)?;
        vec!["bin+lib".into()]
    };
    files.sort();
    files.dedup();
    Ok((names, files))
}

fn walk(root: &Path, rel: &Path, out: &mut Vec<String>) -> Result<(), RustError> {
    let dir = root.join(rel);
    let entries = std::fs::read_dir(&dir)
        .map_err(|e| RustError::Toolchain(format!("{}: {e}", dir.display())))?;
    for entry in entries {
        let entry = entry.map_err(|e| RustError::Toolchain(format!("{}: {e}", dir.display())))?;
        let path = rel.join(entry.file_name());
        let ft = entry
            .file_type()
            .map_err(|e| RustError::Toolchain(format!("{}: {e}", path.display())))?;
        if ft.is_dir() {
            walk(root, &path, out)?;
        } else if ft.is_file() {
            out.push(path.to_string_lossy().into_owned());
        }
    }
    Ok(())
}

/// sha256 over the listing `sha256  path\n` of `files` (sorted), as `sha256sum` prints it.
pub fn files_hash(root: &Path, files: &[String]) -> Result<Sha256Digest, RustError> {
    let hashes: Vec<Result<String, RustError>> = files
        .par_iter()
        .map(|f| {
            let path = root.join(f);
            let mut file = std::fs::File::open(&path)
                .map_err(|e| RustError::Toolchain(format!("{}: {e}", path.display())))?;
            let mut h = Sha256Hasher::new();
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = file
                    .read(&mut buf)
                    .map_err(|e| RustError::Toolchain(format!("{}: {e}", path.display())))?;
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
            }
            Ok(format!("{}  {f}\n", h.finish().hex()))
        })
        .collect();
    let mut listing = Sha256Hasher::new();
    for line in hashes {
        listing.update(line?.as_bytes());
    }
    Ok(listing.finish())
}

/// Where rustup keeps toolchains here (`$RUSTUP_HOME`, else `~/.rustup`), each a candidate.
fn candidates() -> Vec<PathBuf> {
    let home = std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".rustup")));
    let mut out: Vec<PathBuf> = home
        .and_then(|h| std::fs::read_dir(h.join("toolchains")).ok())
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("bin/rustc").is_file())
        .collect();
    out.sort();
    if let Ok(root) = sysroot_of(Path::new("rustc"))
        && !out.contains(&root)
    {
        out.push(root);
    }
    out
}

/// The machine's copy of `want`: a toolchain whose `rustc -vV` says the same and whose
/// files hash the same.
pub fn locate(want: &Toolchain) -> Result<PathBuf, RustError> {
    let looked = candidates();
    for root in &looked {
        let Ok(found) = probe(root) else { continue };
        if found.identity.rustc == want.rustc
            && found.identity.commit_hash == want.commit_hash
            && found.identity.host == want.host
            && found.identity.files_sha256 == want.files_sha256
        {
            return Ok(root.clone());
        }
    }
    Err(RustError::ToolchainNotHere {
        rustc: want.rustc.clone(),
        host: want.host.clone(),
        files_sha256: want.files_sha256.clone(),
        looked: looked
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// The toolchain's files as a deterministic tar (sorted, mtime 0, owner 0, modes 0644/0755),
/// kept as an object: what a lock that carries the toolchain names.
pub fn pack(found: &Found, objects: &ObjectStore, tmp: &Path) -> Result<Packed, RustError> {
    let io = |e: std::io::Error| RustError::Toolchain(format!("packing the toolchain: {e}"));
    let staged = tempfile::NamedTempFile::new_in(tmp).map_err(io)?;
    {
        // Compressed like the archive's other big objects: a toolchain is most of a small
        // release's size, and compresses to about a quarter. One thread and a fixed level: the
        // same files make the same object, so its hash names it.
        let mut out =
            zstd::Encoder::new(std::io::BufWriter::new(staged.as_file()), TOOLCHAIN_LEVEL)
                .map_err(io)?;
        let mut tar = tar::Builder::new(&mut out);
        tar.mode(tar::HeaderMode::Deterministic);
        for f in &found.files {
            let path = found.root.join(f);
            let meta = std::fs::metadata(&path).map_err(io)?;
            let mut header = tar::Header::new_gnu();
            header.set_size(meta.len());
            header.set_mode(if executable(&meta) { 0o755 } else { 0o644 });
            header.set_mtime(0);
            header.set_uid(0);
            header.set_gid(0);
            header.set_entry_type(tar::EntryType::Regular);
            let file = std::fs::File::open(&path).map_err(io)?;
            tar.append_data(&mut header, f, file).map_err(io)?;
        }
        tar.finish().map_err(io)?;
        drop(tar);
        out.finish().map_err(io)?.flush().map_err(io)?;
    }
    let mut reader = std::fs::File::open(staged.path()).map_err(io)?;
    let (id, size) = objects
        .put(&mut reader)
        .map_err(|e| RustError::Toolchain(format!("storing the packed toolchain: {e}")))?;
    Ok(Packed {
        sha256: id.hex(),
        size,
        compression: "zstd".into(),
    })
}

/// [`pack`], once per toolchain and archive: `cache` remembers which object packs which
/// toolchain (by its files' hash), and the object is reused while the store has it.
pub fn pack_once(
    found: &Found,
    objects: &ObjectStore,
    cache: &Path,
    tmp: &Path,
) -> Result<Packed, RustError> {
    let record = cache.join(format!("{}.json", found.identity.files_sha256));
    if let Ok(bytes) = std::fs::read(&record)
        && let Ok(packed) = serde_json::from_slice::<Packed>(&bytes)
        && let Ok(id) = super::document::digest(&packed.sha256)
        && objects.has(&id)
    {
        return Ok(packed);
    }
    let packed = pack(found, objects, tmp)?;
    let io = |e: std::io::Error| RustError::Toolchain(format!("{}: {e}", record.display()));
    std::fs::create_dir_all(cache).map_err(io)?;
    let bytes = serde_json::to_vec(&packed).map_err(|e| RustError::Toolchain(e.to_string()))?;
    crate::fsutil::write_atomic(&record, &bytes).map_err(io)?;
    Ok(packed)
}

fn executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

/// A packed toolchain unpacked into `dest` (from its object, checked by hash as it is read),
/// then checked against the identity the lock gives it.
pub fn unpack(
    packed: &Packed,
    want: &Toolchain,
    objects: &ObjectStore,
    dest: &Path,
) -> Result<(), RustError> {
    let io = |e: std::io::Error| RustError::Toolchain(format!("unpacking the toolchain: {e}"));
    let id = super::document::digest(&packed.sha256)?;
    let reader = objects
        .open(&id)
        .map_err(|e| RustError::Toolchain(format!("the packed toolchain: {e}")))?;
    let reader: Box<dyn Read> = match packed.compression.as_str() {
        "" => Box::new(reader),
        "zstd" => Box::new(zstd::Decoder::new(reader).map_err(io)?),
        other => {
            return Err(RustError::Toolchain(format!(
                "the packed toolchain is compressed with `{other}`, which this swe-ark cannot read"
            )));
        }
    };
    let mut archive = tar::Archive::new(reader);
    archive.set_preserve_permissions(true);
    let mut files = Vec::new();
    for entry in archive.entries().map_err(io)? {
        let mut entry = entry.map_err(io)?;
        let path = entry.path().map_err(io)?.into_owned();
        if path.is_absolute() || path.components().any(|c| c.as_os_str() == "..") {
            return Err(RustError::Toolchain(format!(
                "the packed toolchain holds `{}`, outside its root",
                path.display()
            )));
        }
        entry.unpack_in(dest).map_err(io)?;
        files.push(path.to_string_lossy().into_owned());
    }
    files.sort();
    let got = files_hash(dest, &files)?.hex();
    if got != want.files_sha256 {
        return Err(RustError::Toolchain(format!(
            "the packed toolchain's files hash to {got}, the lock says {}",
            want.files_sha256
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toolchain's files, packed: compressed, the same object from the same files, and
    /// unpacked to files that hash as the lock says.
    #[test]
    fn a_packed_toolchain_is_compressed_deterministic_and_unpacks_to_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("tc");
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::create_dir_all(root.join("lib")).unwrap();
        std::fs::write(root.join("bin/rustc"), "#!/bin/sh\necho rustc\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            root.join("bin/rustc"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        // Repetitive, as libraries are: it must come out much smaller than it went in.
        std::fs::write(root.join("lib/libstd.rlib"), "std ".repeat(100_000)).unwrap();
        let files = vec!["bin/rustc".to_string(), "lib/libstd.rlib".to_string()];
        let identity = Toolchain {
            rustc: "1.0.0".into(),
            commit_hash: "x".into(),
            host: "x86_64-unknown-linux-gnu".into(),
            cargo: "cargo 1.0.0".into(),
            components: vec!["bin+lib".into()],
            files_sha256: files_hash(&root, &files).unwrap().hex(),
            packed: None,
        };
        let found = Found {
            root: root.clone(),
            identity: identity.clone(),
            files,
        };
        let objects = ObjectStore::new(dir.path().join("objects"));
        let tmp = dir.path().join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let a = pack(&found, &objects, &tmp).unwrap();
        let b = pack(&found, &objects, &tmp).unwrap();
        assert_eq!(a, b, "the same files, the same object");
        assert_eq!(a.compression, "zstd");
        assert!(
            a.size < 40_000,
            "400 kB of files packed into {} bytes",
            a.size
        );
        let dest = dir.path().join("unpacked");
        std::fs::create_dir_all(&dest).unwrap();
        unpack(&a, &identity, &objects, &dest).unwrap();
        assert_eq!(
            std::fs::read_to_string(dest.join("bin/rustc")).unwrap(),
            "#!/bin/sh\necho rustc\n"
        );
        let mode = std::fs::metadata(dest.join("bin/rustc"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111, "still executable");
        // A compression this swe-ark does not know is named, not guessed at.
        let odd = Packed {
            compression: "xz".into(),
            ..a.clone()
        };
        let e = unpack(&odd, &identity, &objects, &dir.path().join("odd")).unwrap_err();
        assert!(e.to_string().contains("`xz`"), "{e}");
    }
}
