//! A Rust lock's environment, built offline from its objects into `envs/<lock id>/` (a cache,
//! safe to delete): the local registry of its crates, the `Cargo.lock` files it generated, and
//! the toolchain (unpacked from its object when the lock carries it, else the machine's copy
//! whose files hash as the lock says). Built once and shared by the context's instances: a run
//! mounts it read-only; cargo's own writes go to the instance's `CARGO_HOME` and its tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::RustError;
use super::document::{RustLock, digest};
use super::locking::offline_config;
use super::{registry, toolchain};
use crate::context::{Built, ContextError, RunEnvironment, layout};
use crate::digest::Sha256Digest;
use crate::sandbox::Mount;
use crate::store::ObjectStore;

/// Where a run sees the lock's `Cargo.lock` files, by commit.
pub const CARGO_LOCKS: &str = "/swe-ark/cargo-locks";
/// The instance's own `CARGO_HOME` (its configuration, cargo's unpacked crates).
pub const CARGO_HOME: &str = "/swe-ark/cargo-home";

/// What [`build`] made (or found made).
#[derive(Debug, Clone)]
pub struct RustBuilt {
    /// `envs/<lock id>/`.
    pub dir: PathBuf,
    pub registry: PathBuf,
    /// The toolchain's root: under `dir` when unpacked, else the machine's.
    pub toolchain: PathBuf,
    /// Each generated `Cargo.lock`, by base commit.
    pub generated: BTreeMap<String, PathBuf>,
}

// The name every kind gives its record of a built environment (`env ls` reads it).
const RECORD: &str = "env.json";

/// What `env.json` keeps: only what cannot be read off the directory, so that an archive
/// that moved still finds its environments.
#[derive(serde::Serialize, serde::Deserialize)]
struct Record {
    /// The machine's copy of the toolchain the lock's identity was found in (a lock that does
    /// not carry its toolchain); None: the archive's own. Records before relocatable
    /// archives named the archive's `toolchains/<files sha256>/` here too, by the absolute
    /// path of the archive they were made in: for a lock that carries its toolchain it is
    /// not read.
    machine_toolchain: Option<PathBuf>,
}

/// The build in `dir` (`envs/<lock id>/` of the archive at `root`) its record describes. A
/// carried toolchain is the archive's `toolchains/<files sha256>/` (or, as swe-ark unpacked
/// it before the archive shared it, `toolchain/` in `dir`), wherever the record was written.
fn from_record(root: &Path, dir: &Path, lock: &RustLock) -> Option<RustBuilt> {
    let record: Record = serde_json::from_slice(&std::fs::read(dir.join(RECORD)).ok()?).ok()?;
    let toolchain = match (&lock.toolchain.packed, record.machine_toolchain) {
        (None, Some(machine)) => machine,
        (Some(_), _) => {
            let shared = crate::store::Layout::new(root)
                .toolchains()
                .join(&lock.toolchain.files_sha256);
            if shared.join("bin/cargo").is_file() {
                shared
            } else {
                dir.join("toolchain")
            }
        }
        (None, None) => dir.join("toolchain"),
    };
    toolchain.join("bin/cargo").is_file().then(|| RustBuilt {
        dir: dir.to_path_buf(),
        registry: dir.join("registry"),
        toolchain,
        generated: generated_in(dir, lock),
    })
}

fn generated_in(dir: &Path, lock: &RustLock) -> BTreeMap<String, PathBuf> {
    lock.generated
        .iter()
        .map(|g| {
            let file = dir.join("cargo-locks").join(format!("{}.lock", g.commit));
            (g.commit.clone(), file)
        })
        .collect()
}

/// The environment of `lock` (whose id is `id`) in `envs/` under `cache_root` (an archive's
/// root): found built, or built now.
pub fn build(
    lock: &RustLock,
    id: &Sha256Digest,
    objects: &ObjectStore,
    cache_root: &Path,
) -> Result<RustBuilt, RustError> {
    let io = |p: &Path, e: std::io::Error| RustError::Io(format!("{}: {e}", p.display()));
    // The paths go into cargo's configuration, read from other directories.
    let root = std::path::absolute(cache_root).map_err(|e| io(cache_root, e))?;
    let cache_root = &root.join("envs");
    let dir = cache_root.join(id.hex());
    if let Some(built) = from_record(&root, &dir, lock) {
        return Ok(built);
    }
    std::fs::create_dir_all(cache_root).map_err(|e| io(cache_root, e))?;
    let staged = tempfile::Builder::new()
        .prefix(".tmp-build-")
        .tempdir_in(cache_root)
        .map_err(|e| io(cache_root, e))?;
    let s = staged.path();
    let registry_dir = s.join("registry");
    std::fs::create_dir_all(registry_dir.join("index")).map_err(|e| io(&registry_dir, e))?;
    registry::make_local(&lock.crates, objects, &registry_dir)?;
    let locks = s.join("cargo-locks");
    std::fs::create_dir_all(&locks).map_err(|e| io(&locks, e))?;
    for g in &lock.generated {
        let bytes = objects
            .get(&digest(&g.sha256)?)
            .map_err(|e| RustError::Io(format!("generated Cargo.lock of {}: {e}", g.commit)))?;
        let file = locks.join(format!("{}.lock", g.commit));
        std::fs::write(&file, bytes).map_err(|e| io(&file, e))?;
    }
    // The archive's own toolchain is found by the lock's hash of its files: recorded, it
    // would name where the archive is now.
    let machine_toolchain = match &lock.toolchain.packed {
        Some(packed) => {
            unpacked_once(packed, lock, objects, &root)?;
            None
        }
        None => Some(toolchain::locate(&lock.toolchain)?),
    };
    let record = serde_json::to_vec_pretty(&Record { machine_toolchain })
        .map_err(|e| RustError::Io(e.to_string()))?;
    std::fs::write(s.join(RECORD), record).map_err(|e| io(s, e))?;
    let staged = staged.keep();
    // A directory left without its record (a crash, another swe-ark's) is only a cache.
    if dir.exists() && from_record(&root, &dir, lock).is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    match std::fs::rename(&staged, &dir) {
        Ok(()) => from_record(&root, &dir, lock)
            .ok_or_else(|| RustError::Io(format!("{}: built, then not found", dir.display()))),
        // Another run built it first: theirs is as good.
        Err(_) if dir.join(RECORD).is_file() => {
            let _ = std::fs::remove_dir_all(&staged);
            // The archive's root, not its `envs/` (which `cache_root` names here).
            build(lock, id, objects, &root)
        }
        Err(e) => Err(io(&dir, e)),
    }
}

/// The packed toolchain unpacked under the archive's `toolchains/<files sha256>/`, once: every
/// lock that carries it shares it.
fn unpacked_once(
    packed: &super::document::Packed,
    lock: &RustLock,
    objects: &ObjectStore,
    root: &Path,
) -> Result<PathBuf, RustError> {
    let io = |p: &Path, e: std::io::Error| RustError::Io(format!("{}: {e}", p.display()));
    let dir = crate::store::Layout::new(root).toolchains();
    let dest = dir.join(&lock.toolchain.files_sha256);
    if dest.join("bin/cargo").is_file() {
        return Ok(dest);
    }
    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
    let staged = tempfile::Builder::new()
        .prefix(".tmp-toolchain-")
        .tempdir_in(&dir)
        .map_err(|e| io(&dir, e))?;
    toolchain::unpack(packed, &lock.toolchain, objects, staged.path())?;
    let staged = staged.keep();
    if dest.exists() {
        // Unpacked meanwhile by another run, or left half by a crash: a cache either way.
        if dest.join("bin/cargo").is_file() {
            let _ = std::fs::remove_dir_all(&staged);
            return Ok(dest);
        }
        let _ = std::fs::remove_dir_all(&dest);
    }
    std::fs::rename(&staged, &dest).map_err(|e| io(&dest, e))?;
    Ok(dest)
}

impl Built for RustBuilt {
    /// The toolchain at [`layout::ENVIRONMENT`] and the registry at [`layout::WHEELHOUSE`],
    /// both read-only; a `CARGO_HOME` of the instance's own that sends crates.io to that
    /// registry, offline; and, for a base commit without a `Cargo.lock`, the one the lock
    /// generated for it, put in the tree before the install.
    fn for_run(&self, work: &Path, base_commit: &str) -> Result<RunEnvironment, ContextError> {
        let home = work.join("cargo-home");
        std::fs::create_dir_all(&home)
            .map_err(|e| RustError::Io(format!("{}: {e}", home.display())))?;
        std::fs::write(home.join("config.toml"), offline_config(layout::WHEELHOUSE))
            .map_err(|e| RustError::Io(format!("{}: {e}", home.display())))?;
        let mut mounts = vec![
            Mount::new(&self.toolchain, layout::ENVIRONMENT, false),
            Mount::new(&self.registry, layout::WHEELHOUSE, false),
            Mount::new(&home, CARGO_HOME, true),
        ];
        let mut prepare = String::new();
        if self.generated.contains_key(base_commit) {
            mounts.push(Mount::new(self.dir.join("cargo-locks"), CARGO_LOCKS, false));
            prepare =
                format!("[ -e Cargo.lock ] || cp {CARGO_LOCKS}/{base_commit}.lock Cargo.lock\n");
        }
        let vars = BTreeMap::from([
            ("CARGO_HOME".to_string(), CARGO_HOME.to_string()),
            ("CARGO_NET_OFFLINE".to_string(), "true".to_string()),
        ]);
        Ok(RunEnvironment {
            mounts,
            vars,
            path: vec![format!("{}/bin", layout::ENVIRONMENT)],
            service_envs: BTreeMap::new(),
            prepare,
        })
    }
}
