//! Building an environment from its lock with no network: every artifact copied out of the
//! object store with its hash checked, the runtime wheels installed with `--no-index
//! --no-deps` (uv when it can serve the interpreter, pip otherwise), and the result compared
//! with the lock. Built environments are cached under `envs/<lock id>/` (always safe to
//! delete); an instance gets a cheap copy of the cached one.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub use super::install::{Installer, find_uv};
use super::install::{choose_installer, install_wheels};
use super::pipseed::PipSeeds;
use super::pylock::{PyLock, Role, normalize, same_version};
use super::steps::StepRunner;
use super::venv::{self, Venv};
use super::{ArtifactError, EnvError, io_err, packed, python};
use crate::digest::Sha256Digest;
use crate::fsutil;
use crate::sandbox::Network;
use crate::store::{ObjectError, ObjectStore};

#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    pub installer: Installer,
    /// Use this interpreter (it must be the lock's major.minor) instead of the exact one.
    pub python: Option<PathBuf>,
    /// Only the interpreter the lock carries: never the machine's, nor `python`.
    pub packed_python: bool,
    /// Rebuild even when the cache has the environment.
    pub force: bool,
    /// Run the installer and the environment's interpreter with the caller's rights, not
    /// confined by the sandbox (`--unconfined`).
    pub unconfined: bool,
}

/// A built environment in the cache, as this archive has it: every place in it is derived
/// from where the archive is now, never read from its record.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BuiltEnv {
    pub lock: String,
    /// `envs/<lock id>/`.
    pub dir: PathBuf,
    pub venv: PathBuf,
    /// Every artifact of the lock, by file name: what an instance's install finds offline.
    pub wheelhouse: PathBuf,
    /// `dir` as the environment's own files name it (its scripts' `#!` lines, its build
    /// files): `dir` itself, or the same directory by another path (a symlink's). What a
    /// copy rewrites to the place it is seen at.
    pub made_at: PathBuf,
    pub installer: String,
    pub python: String,
    /// The interpreter the environment was made from (the machine's, or the lock's packed
    /// one under `pythons/`); the environment is a prefix of its own, with a copy of it.
    pub interpreter: PathBuf,
    pub installed: usize,
    pub cached: bool,
    pub seconds: f64,
    /// Each service's own environment (`services/<name>/`), by name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub services: BTreeMap<String, PathBuf>,
    /// [`BUILD_FORMAT`] of the swe-ark that built it.
    pub format: u32,
}

/// What a build makes, as a number: a cached build of another format is built again. 1: a
/// carried interpreter's build files (and so the environment's copy of its standard
/// library) name where it is unpacked, not the locker's prefix. 2: the environment holds the
/// interpreter's headers and its build files name the environment itself; services'
/// environments are prefixes of their own too (an instance's run sees nothing else). 3: the
/// record names no place of the archive but where the build was made (`made_at`), which is
/// compared with where it is: an archive moved or copied builds its environments again
/// instead of using, and writing into, the places the record of 2 named; and no
/// distribution keeps a `direct_url.json` naming the wheelhouse it was installed from.
pub const BUILD_FORMAT: u32 = 3;

const MARKER: &str = "env.json";

/// `env.json`: what a build was, and where it was made; every other place is derived from
/// the archive's layout when it is read.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Marker {
    lock: String,
    format: u32,
    /// The build's directory as it was when it was made: the path the environment's own
    /// files name. Compared with where the directory is now, never used as a place.
    made_at: PathBuf,
    installer: String,
    python: String,
    /// The interpreter: relative to the archive's root when it is the archive's own (the
    /// lock's packed one, `pythons/<sha256>/bin/pythonX.Y`), else the machine's.
    interpreter: PathBuf,
    installed: usize,
    seconds: f64,
    /// The services' names: each one's environment is `services/<name>/`.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    services: BTreeSet<String>,
}

impl Marker {
    fn of(built: &BuiltEnv, ark_root: &Path) -> Marker {
        Marker {
            lock: built.lock.clone(),
            format: BUILD_FORMAT,
            made_at: built.made_at.clone(),
            installer: built.installer.clone(),
            python: built.python.clone(),
            interpreter: built
                .interpreter
                .strip_prefix(ark_root)
                .unwrap_or(&built.interpreter)
                .to_path_buf(),
            installed: built.installed,
            seconds: built.seconds,
            services: built.services.keys().cloned().collect(),
        }
    }

    /// The build at `dir` (`envs/<lock id>/` of the archive at `ark_root`) this record
    /// describes.
    fn built(self, ark_root: &Path, dir: &Path) -> BuiltEnv {
        BuiltEnv {
            lock: self.lock,
            dir: dir.to_path_buf(),
            venv: dir.join("venv"),
            wheelhouse: dir.join("wheelhouse"),
            made_at: self.made_at,
            installer: self.installer,
            python: self.python,
            // An absolute path (the machine's interpreter) stays as it is.
            interpreter: ark_root.join(&self.interpreter),
            installed: self.installed,
            cached: true,
            seconds: self.seconds,
            services: self
                .services
                .into_iter()
                .map(|name| {
                    let at = super::services::venv_dir(dir, &name);
                    (name, at)
                })
                .collect(),
            format: self.format,
        }
    }
}

/// What the cache holds for a lock.
enum Cached {
    /// Nothing, or a build that did not finish (no record).
    Missing,
    /// A build to use as it is.
    Current(Marker),
    /// A build that cannot be used as it is, and why: it is built again.
    Stale(String),
}

/// The build recorded in `dir`, and whether it can be used where it is. A record written by
/// another kind (Rust's and C's environments keep an `env.json` too) is not a Python build:
/// [`Cached::Missing`].
fn cached(dir: &Path) -> Cached {
    #[derive(serde::Deserialize)]
    struct Head {
        lock: Option<String>,
        #[serde(default)]
        format: u32,
    }
    let Ok(bytes) = std::fs::read(dir.join(MARKER)) else {
        return Cached::Missing;
    };
    let head = match serde_json::from_slice::<Head>(&bytes) {
        Ok(Head { lock: None, .. }) => return Cached::Missing,
        Ok(head) => head,
        Err(e) => return Cached::Stale(format!("its {MARKER} cannot be read: {e}")),
    };
    if head.format != BUILD_FORMAT {
        return Cached::Stale(format!(
            "it was built by an older swe-ark (format {}, now {BUILD_FORMAT}), whose {MARKER} \
             named the places of the archive it was made in",
            head.format
        ));
    }
    let marker = match serde_json::from_slice::<Marker>(&bytes) {
        Ok(m) => m,
        Err(e) => return Cached::Stale(format!("its {MARKER} cannot be read: {e}")),
    };
    if !same_directory(&marker.made_at, dir) {
        return Cached::Stale(format!(
            "it was built at {}, and its files name that place: the archive was moved or \
             copied since",
            marker.made_at.display()
        ));
    }
    Cached::Current(marker)
}

/// Whether `named` leads to the directory `dir`: the same path, or the same directory on
/// disk by another one (a symlink on the way). A place that is gone, or that this user
/// cannot look at, does not.
fn same_directory(named: &Path, dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if named == dir {
        return true;
    }
    match (std::fs::metadata(named), std::fs::metadata(dir)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Why the build in `dir` (an `envs/<lock id>/` directory) would not be used as it is (built
/// by an older swe-ark, or where the archive was before it was moved or copied); None when
/// it would be, when there is none, or when it is another kind's.
pub fn stale(dir: &Path) -> Option<String> {
    match cached(dir) {
        Cached::Stale(why) => Some(why),
        Cached::Missing | Cached::Current(_) => None,
    }
}

/// The file a build of the lock whose directory is `dir` holds while it builds.
fn build_lock_of(dir: &Path) -> PathBuf {
    dir.with_extension("lock")
}

/// What [`remove_stale`] removed (or would).
#[derive(Debug, Clone, serde::Serialize)]
pub struct StaleBuild {
    pub dir: PathBuf,
    /// Why it would not have been used as it is.
    pub why: String,
    pub bytes: u64,
}

/// Removes the build in `dir` (an `envs/<lock id>/` directory) when it would not be used as
/// it is ([`stale`]) and nothing uses it: no build of the lock runs (its lock file is free)
/// and no run holds a directory in it (an installed state's environment). With `dry_run`,
/// only says so. None when it is kept.
pub fn remove_stale(dir: &Path, dry_run: bool) -> std::io::Result<Option<StaleBuild>> {
    use std::fs::TryLockError;
    if stale(dir).is_none() {
        return Ok(None);
    }
    // A dry run changes nothing, not even the lock file.
    let _guard = if dry_run {
        None
    } else {
        let guard = std::fs::File::create(build_lock_of(dir))?;
        match guard.try_lock() {
            Ok(()) => Some(guard),
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => return Err(e),
        }
    };
    // Asked again under the lock: a build that just finished made it current.
    let Some(why) = stale(dir) else {
        return Ok(None);
    };
    let mut holds = Vec::new();
    for entry in fsutil::list_dir(dir)? {
        if !std::fs::symlink_metadata(&entry).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let f = std::fs::File::open(&entry)?;
        match f.try_lock() {
            Ok(()) => holds.push(f),
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => return Err(e),
        }
    }
    let bytes = fsutil::workdir::tree_bytes(dir);
    if !dry_run {
        fsutil::remove_tree(dir)?;
    }
    Ok(Some(StaleBuild {
        dir: dir.to_path_buf(),
        why,
        bytes,
    }))
}

/// The interpreter to build with: the one the lock carries, unpacked in the archive (so
/// that the environment never points outside it, whoever builds it); else the machine's
/// exact version. `--python` names another build of the version instead.
fn interpreter(
    objects: &ObjectStore,
    ark_root: &Path,
    lock_id: &str,
    lock: &PyLock,
    opts: &BuildOptions,
) -> Result<PathBuf, EnvError> {
    let meta = &lock.tool.swe_ark.python;
    let major_minor: String = meta
        .version
        .split('.')
        .take(2)
        .collect::<Vec<_>>()
        .join(".");
    if let Some(p) = opts.python.as_ref().filter(|_| !opts.packed_python) {
        return Ok(python::find(&major_minor, Some(p))?.path);
    }
    let Some(art) = &meta.packed else {
        let found = if opts.packed_python {
            "no packed interpreter in the lock (it was made with --no-pack-python)".to_string()
        } else {
            match python::find_exact(&meta.version) {
                Ok(i) => return Ok(i.path),
                Err(e) => match python::find(&major_minor, None) {
                    Ok(i) => format!("{} at {}", i.version, i.path.display()),
                    Err(_) => e.to_string(),
                },
            }
        };
        return Err(EnvError::InterpreterMismatch {
            lock: lock_id.to_string(),
            wanted: meta.version.clone(),
            found,
        });
    };
    let shared = super::shared_cache(super::Shared::Pythons);
    packed::unpack_python(objects, ark_root, art, &major_minor, shared.as_deref())
}

/// Copies every artifact of the lock out of the store into `wheelhouse/<file name>`, each
/// checked against its hash on the way.
fn fill_wheelhouse(
    objects: &ObjectStore,
    lock_id: &str,
    lock: &PyLock,
    wheelhouse: &Path,
) -> Result<(), EnvError> {
    std::fs::create_dir_all(wheelhouse).map_err(io_err(wheelhouse))?;
    for pkg in &lock.packages {
        for art in pkg.artifacts() {
            let bad = |detail: String| EnvError::BadLock {
                id: lock_id.to_string(),
                detail,
            };
            let id: Sha256Digest = art.sha256().map_err(|e| bad(e.to_string()))?;
            if art.name.contains('/') || art.name.starts_with('.') {
                return Err(bad(format!(
                    "artifact file name `{}` is not a plain name",
                    art.name
                )));
            }
            let dest = wheelhouse.join(&art.name);
            let missing = || ArtifactError::Missing {
                lock: lock_id.to_string(),
                name: pkg.name.clone(),
                version: pkg.version.clone(),
                filename: art.name.clone(),
                sha256: id.hex(),
            };
            let mut reader = match objects.open(&id) {
                Ok(r) => r,
                Err(ObjectError::Missing(_)) => return Err(missing().into()),
                Err(e) => return Err(e.into()),
            };
            let mut tmp = fsutil::temp_file_in(wheelhouse).map_err(io_err(wheelhouse))?;
            if let Err(e) = std::io::copy(&mut reader, &mut tmp) {
                return Err(match reader.error(e) {
                    ObjectError::Corrupt { actual, .. } => ArtifactError::Tampered {
                        lock: lock_id.to_string(),
                        name: pkg.name.clone(),
                        version: pkg.version.clone(),
                        filename: art.name.clone(),
                        sha256: id.hex(),
                        actual: actual.hex(),
                    }
                    .into(),
                    other => other.into(),
                });
            }
            tmp.flush().map_err(io_err(&dest))?;
            tmp.persist(&dest).map_err(|e| io_err(&dest)(e.error))?;
        }
    }
    Ok(())
}

/// The lock's runtime set: normalized name → version.
fn expected_dists(lock: &PyLock) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = lock
        .tool
        .swe_ark
        .bundled
        .iter()
        .map(|b| (normalize(&b.name), b.version.clone()))
        .collect();
    for p in lock.packages.iter().filter(|p| p.role() == Role::Runtime) {
        out.insert(normalize(&p.name), p.version.clone());
    }
    out
}

/// Compares what is installed in `venv` with the lock's runtime set (leaving out `project`).
pub fn check_installed(
    steps: &StepRunner,
    lock_id: &str,
    lock: &PyLock,
    venv: &Venv,
    project: Option<&str>,
) -> Result<usize, EnvError> {
    let expected = expected_dists(lock);
    let found = venv.installed(steps)?;
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for d in &found {
        let n = normalize(&d.name);
        if Some(n.as_str()) == project.map(normalize).as_deref() {
            continue;
        }
        seen.insert(n.clone());
        match expected.get(&n) {
            Some(v) if same_version(v, &d.version) => {}
            Some(v) => problems.push(format!("{} is {} (the lock says {v})", d.name, d.version)),
            None => problems.push(format!("{} {} is not in the lock", d.name, d.version)),
        }
    }
    for (n, v) in &expected {
        if !seen.contains(n) {
            problems.push(format!("{n} {v} is missing"));
        }
    }
    if problems.is_empty() {
        Ok(seen.len())
    } else {
        Err(EnvError::BuildMismatch {
            lock: lock_id.to_string(),
            detail: problems.join("; "),
        })
    }
}

/// Builds (or finds in the cache) the environment of lock `lock_id`. Never touches the network.
/// A cached build is used only where it was made: one the archive brought from where it was
/// before it was moved or copied is built again here, in this archive alone.
pub fn build(
    objects: &ObjectStore,
    ark_root: &Path,
    lock_id: &Sha256Digest,
    lock: &PyLock,
    opts: &BuildOptions,
) -> Result<BuiltEnv, EnvError> {
    let start = Instant::now();
    let id = lock_id.hex();
    // Absolute: scripts in the environment carry its path, and copies rewrite it.
    let ark_root = &std::path::absolute(ark_root).map_err(io_err(ark_root))?;
    let layout = crate::store::Layout::new(ark_root);
    let dir = layout.env(lock_id);
    let marker = dir.join(MARKER);
    let venv_dir = dir.join("venv");
    // One build of a lock at a time: a second process waits, then finds the cache.
    let envs = layout.envs();
    std::fs::create_dir_all(&envs).map_err(io_err(&envs))?;
    let lock_path = build_lock_of(&dir);
    let guard = std::fs::File::create(&lock_path).map_err(io_err(&lock_path))?;
    guard.lock().map_err(io_err(&lock_path))?;
    let stale = match cached(&dir) {
        Cached::Current(found) if !opts.force => {
            let mut built = found.built(ark_root, &dir);
            built.seconds = start.elapsed().as_secs_f64();
            return Ok(built);
        }
        Cached::Stale(why) => {
            tracing::info!(
                "the environment of lock {} in {} is built again: {why}",
                lock_id.short(),
                dir.display()
            );
            Some(why)
        }
        Cached::Current(_) | Cached::Missing => None,
    };
    // Refused up front, before the old build is removed, when confinement is impossible.
    let steps = StepRunner::new(opts.unconfined, Network::Isolated)?;
    // A directory without its marker is a build that did not finish.
    if dir.exists() {
        fsutil::remove_tree(&dir).map_err(|source| match stale {
            Some(why) => EnvError::StaleBuild {
                lock: id.clone(),
                dir: dir.clone(),
                why,
                source,
            },
            None => io_err(&dir)(source),
        })?;
    }
    std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    let result = build_into(&steps, objects, ark_root, &id, lock, opts, &dir, &venv_dir);
    match result {
        Ok(mut built) => {
            built.seconds = start.elapsed().as_secs_f64();
            let json = serde_json::to_vec_pretty(&Marker::of(&built, ark_root)).map_err(|e| {
                EnvError::Io {
                    path: marker.clone(),
                    source: std::io::Error::other(e),
                }
            })?;
            fsutil::write_atomic(&marker, &json).map_err(io_err(&marker))?;
            Ok(built)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(e)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn build_into(
    steps: &StepRunner,
    objects: &ObjectStore,
    ark_root: &Path,
    id: &str,
    lock: &PyLock,
    opts: &BuildOptions,
    dir: &Path,
    venv_dir: &Path,
) -> Result<BuiltEnv, EnvError> {
    let wheelhouse = dir.join("wheelhouse");
    fill_wheelhouse(objects, id, lock, &wheelhouse)?;
    let python = interpreter(objects, ark_root, id, lock, opts)?;
    let (installer, uv) = choose_installer(opts.installer, &lock.tool.swe_ark.python.version)?;
    // ensurepip only when the lock keeps what it brings; otherwise the lock's own pip wheel.
    let with_pip = !lock.tool.swe_ark.bundled.is_empty() || installer == Installer::Pip;
    let seeds = PipSeeds::for_ark(ark_root);
    let venv = Venv::create_prefix(&python, venv_dir, with_pip.then_some(&seeds))?;
    // The installer writes the environment (and uv its cache) and reads the wheelhouse; what
    // the installed packages run at the interpreter's start sees nothing else.
    let uv_cache = crate::store::Layout::new(ark_root).uv_cache();
    let mut steps = steps
        .read_only(&wheelhouse)
        .read_only(&python::prefix_of(&python));
    if uv.is_some() {
        steps = steps.writable(&uv_cache)?;
    }
    let mut files = Vec::new();
    for p in lock.packages.iter().filter(|p| p.role() == Role::Runtime) {
        let art = p.install_wheel().ok_or_else(|| EnvError::BadLock {
            id: id.to_string(),
            detail: format!("{} {} has no wheel to install", p.name, p.version),
        })?;
        files.push(wheelhouse.join(&art.name));
    }
    let env_steps = steps.writable(venv_dir)?;
    install_wheels(
        &env_steps,
        &venv,
        installer,
        uv.as_deref(),
        &uv_cache,
        &files,
    )?;
    let installed = check_installed(&env_steps, id, lock, &venv, None)?;
    let services = super::services::build(
        &steps,
        lock,
        id,
        &wheelhouse,
        &python,
        installer,
        uv.as_deref(),
        &uv_cache,
        &seeds,
        dir,
    )?;
    Ok(BuiltEnv {
        lock: id.to_string(),
        dir: dir.to_path_buf(),
        venv: venv_dir.to_path_buf(),
        wheelhouse,
        made_at: dir.to_path_buf(),
        installer: match installer {
            Installer::Uv => "uv".into(),
            _ => venv.pip_version(&env_steps).unwrap_or_else(|| "pip".into()),
        },
        python: lock.tool.swe_ark.python.version.clone(),
        interpreter: python.clone(),
        installed,
        cached: false,
        seconds: 0.0,
        services,
        format: BUILD_FORMAT,
    })
}

/// A per-instance environment at `dest`, for commands that see it at `seen_at` (`dest`
/// itself, or the place a run mounts it): a copy of the cached one, the files that name its
/// place rewritten. The instance's own install then runs in it offline, with
/// [`offline_install_env`].
pub fn instance_copy(built: &BuiltEnv, dest: &Path, seen_at: &Path) -> Result<Venv, EnvError> {
    if dest.exists() {
        return Err(EnvError::Io {
            path: dest.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "the destination already exists",
            ),
        });
    }
    let dest = &std::path::absolute(dest).map_err(io_err(dest))?;
    let seen_at = &std::path::absolute(seen_at).map_err(io_err(seen_at))?;
    venv::copy_venv_named(&built.venv, &built.made_at.join("venv"), dest, seen_at)?;
    Ok(Venv {
        dir: dest.to_path_buf(),
    })
}

/// A built environment and its services' as the fixed layout shows them: each a copy whose
/// files name the place a run mounts it at, owned by `owner` (who a confined run is outside,
/// so that it can be the shared layer under an instance's own).
#[derive(Debug, Clone)]
pub struct AtLayout {
    pub venv: PathBuf,
    pub services: BTreeMap<String, PathBuf>,
}

/// [`AtLayout`] of `built` for runs that see it at `env_at` and its services at
/// `services_at/<name>`: made once per owner in the build's directory (`layout-<owner>/`,
/// staged and renamed into place, so a reader sees it whole or not at all) and shared by
/// every instance of the lock.
pub fn at_layout(
    built: &BuiltEnv,
    env_at: &Path,
    services_at: &Path,
    owner: u32,
) -> Result<AtLayout, EnvError> {
    let dir = built.dir.join(format!("layout-{owner}"));
    let of = |root: &Path| AtLayout {
        venv: root.join("venv"),
        services: built
            .services
            .keys()
            .map(|name| (name.clone(), root.join("services").join(name)))
            .collect(),
    };
    if dir.is_dir() {
        return Ok(of(&dir));
    }
    // Marked: what a killed run leaves is removed by the next staging here, or by gc.
    let staged = crate::fsutil::work_dir(&built.dir, crate::fsutil::TEMP_PREFIX)
        .map_err(io_err(&built.dir))?;
    let made = of(staged.path());
    venv::copy_venv_named(&built.venv, &built.made_at.join("venv"), &made.venv, env_at)?;
    for (name, src) in &built.services {
        let dest = &made.services[name];
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        let named = super::services::venv_dir(&built.made_at, name);
        venv::copy_venv_named(src, &named, dest, &services_at.join(name))?;
    }
    crate::sandbox::give_to_layer_owner(staged.path(), owner).map_err(|e| EnvError::Io {
        path: staged.path().to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    // Another process may have put its own in place first: the same files, kept.
    let staged = staged.keep();
    if let Err(e) = std::fs::rename(&staged, &dir) {
        let _ = crate::fsutil::remove_tree(&staged);
        if !dir.is_dir() {
            return Err(EnvError::Io {
                path: dir.clone(),
                source: e,
            });
        }
    }
    Ok(of(&dir))
}

/// `wheelhouse` as `PIP_FIND_LINKS` and `UV_FIND_LINKS` can hold it: pip splits the variable
/// at whitespace and uv at commas, so a path with either is given as its `file://` URL,
/// percent-encoded (which both read as the directory); any other path as it is (what the
/// installs print of it stays as it was).
fn find_links(wheelhouse: &Path) -> String {
    let path = wheelhouse.display().to_string();
    if !path.contains(|c: char| c.is_whitespace() || c == ',') {
        return path;
    }
    let encoded: Vec<String> = path
        .split('/')
        .map(crate::env::proxy::percent_encode)
        .collect();
    format!("file://{}", encoded.join("/"))
}

/// The variables that make pip (and uv) install from the wheelhouse only, seen at
/// `wheelhouse` (the built environment's own, or where a run mounts it).
pub fn offline_install_env(wheelhouse: &Path) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let wh = find_links(wheelhouse);
    env.insert("PIP_NO_INDEX".into(), "1".into());
    env.insert("PIP_FIND_LINKS".into(), wh.clone());
    env.insert("UV_OFFLINE".into(), "1".into());
    env.insert("UV_NO_INDEX".into(), "1".into());
    env.insert("UV_FIND_LINKS".into(), wh);
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `envs/<lock>/` under `root` with a record of format `format` made at `made_at`.
    fn recorded(root: &Path, format: u32, made_at: &Path) -> PathBuf {
        let dir = root.join("envs").join("ab".repeat(32));
        std::fs::create_dir_all(dir.join("venv")).unwrap();
        let marker = Marker {
            lock: "ab".repeat(32),
            format,
            made_at: made_at.to_path_buf(),
            installer: "uv".into(),
            python: "3.11.7".into(),
            interpreter: PathBuf::from("pythons/cd/bin/python3.11"),
            installed: 1,
            seconds: 0.5,
            services: BTreeSet::from(["web".to_string()]),
        };
        std::fs::write(dir.join(MARKER), serde_json::to_vec(&marker).unwrap()).unwrap();
        dir
    }

    /// A record is used only where it was made (or by a path that leads there); one made by
    /// an older swe-ark, or where a copied or moved archive was, says why it is not; another
    /// kind's record is not a Python build's.
    #[test]
    fn a_build_is_used_only_where_it_was_made() {
        let t = tempfile::tempdir().unwrap();
        let (here, there) = (t.path().join("here"), t.path().join("there"));
        let dir = recorded(
            &here,
            BUILD_FORMAT,
            &here.join("envs").join("ab".repeat(32)),
        );
        assert_eq!(stale(&dir), None);
        let Cached::Current(m) = cached(&dir) else {
            panic!("not current")
        };
        let built = m.built(&here, &dir);
        assert_eq!(built.venv, dir.join("venv"));
        assert_eq!(built.interpreter, here.join("pythons/cd/bin/python3.11"));
        assert_eq!(built.services["web"], dir.join("services/web"));

        // The same directory by a symlink's path: its files still lead to it.
        std::os::unix::fs::symlink(&here, t.path().join("link")).unwrap();
        recorded(
            &here,
            BUILD_FORMAT,
            &t.path().join("link/envs").join("ab".repeat(32)),
        );
        assert_eq!(stale(&dir), None);

        // Copied: made where the other copy is (present, or gone).
        let other = recorded(
            &there,
            BUILD_FORMAT,
            &there.join("envs").join("ab".repeat(32)),
        );
        recorded(&here, BUILD_FORMAT, &other);
        let why = stale(&dir).unwrap();
        assert!(why.contains(&other.display().to_string()) && why.contains("moved or copied"));
        recorded(&here, BUILD_FORMAT, &t.path().join("gone"));
        assert!(stale(&dir).is_some());

        recorded(&here, 2, &dir);
        assert!(stale(&dir).unwrap().contains("older swe-ark (format 2"));
        std::fs::write(dir.join(MARKER), b"{\"machine_toolchain\": null}").unwrap();
        assert_eq!(stale(&dir), None, "a Rust environment's record");
        std::fs::write(dir.join(MARKER), b"{\"lock\": 1").unwrap();
        assert!(stale(&dir).unwrap().contains("cannot be read"));
    }

    /// gc's part: a stale build goes whole unless a build of its lock runs or a run holds a
    /// directory in it; a dry run only says so.
    #[test]
    fn a_stale_build_is_removed_when_nothing_uses_it() {
        let t = tempfile::tempdir().unwrap();
        let dir = recorded(t.path(), 2, &t.path().join("elsewhere"));
        std::fs::create_dir_all(dir.join("installed-0-ef/env")).unwrap();
        std::fs::write(dir.join("venv/big"), vec![0u8; 1000]).unwrap();

        let held = std::fs::File::open(dir.join("installed-0-ef")).unwrap();
        held.lock_shared().unwrap();
        assert!(remove_stale(&dir, false).unwrap().is_none());
        drop(held);
        let building = std::fs::File::create(build_lock_of(&dir)).unwrap();
        building.lock().unwrap();
        assert!(remove_stale(&dir, false).unwrap().is_none());
        drop(building);

        let said = remove_stale(&dir, true).unwrap().unwrap();
        assert!(said.bytes >= 1000 && said.why.contains("older swe-ark"));
        assert!(dir.join(MARKER).is_file(), "a dry run removes nothing");
        let removed = remove_stale(&dir, false).unwrap().unwrap();
        assert_eq!(removed.dir, dir);
        assert!(!dir.exists());

        let current = recorded(
            t.path(),
            BUILD_FORMAT,
            &t.path().join("envs").join("ab".repeat(32)),
        );
        assert!(remove_stale(&current, false).unwrap().is_none());
        assert!(current.join(MARKER).is_file());
    }

    #[test]
    fn a_wheelhouse_with_spaces_or_commas_is_given_as_a_file_url() {
        let env = offline_install_env(Path::new("/tmp/c d,e/ark/envs/x/wheelhouse"));
        assert_eq!(
            env.get("PIP_FIND_LINKS").map(String::as_str),
            Some("file:///tmp/c%20d%2Ce/ark/envs/x/wheelhouse")
        );
        assert_eq!(env.get("UV_FIND_LINKS"), env.get("PIP_FIND_LINKS"));
        let env = offline_install_env(Path::new("/swe-ark/wheelhouse"));
        assert_eq!(
            env.get("PIP_FIND_LINKS").map(String::as_str),
            Some("/swe-ark/wheelhouse")
        );
    }
}
