//! The environments of a context's services (the manifest's `services`, e.g. a loopback
//! httpbin): each service's pinned packages, locked with the context but installed apart from
//! the tests' environment, so that the tests never see them.
//!
//! - At lock time ([`install`]): the pins are resolved by the interpreter's own pip with
//!   `pip wheel` (which resolves as if nothing were installed, and builds sdists) through a
//!   proxy of their own: the lock's index, cutoff and object store, so every file is checked,
//!   stored and recorded like the context's, but with the services' pins as the pins that pass
//!   the cutoff, so that they never change what the tests' environment resolves to. What comes
//!   out must be exactly the pins: a dependency left unpinned is an error, so that a service
//!   resolves the same whatever the lock's date ([`lock_meta`] then names each distribution's
//!   `[[packages]]` entry in `[[tool.swe-ark.services]]`).
//! - At build time ([`build`]): a virtual environment per service in
//!   `envs/<lock>/services/<name>/`, its distributions installed from the wheelhouse with no
//!   index, and checked against the lock.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::install::{self, Installer};
use super::pipseed::PipSeeds;
use super::proxy::{Fetched, LockProxy, ProxyConfig};
use super::pylock::{Bundled, PyLock, ServiceMeta, normalize, parse_filename, same_version};
use super::steps::StepRunner;
use super::venv::Venv;
use super::{EnvError, asof, io_err};
use crate::digest::Sha256Digest;
use crate::manifest::Service;
use crate::store::ObjectStore;

/// A service's pins and what installing them gave (name and version of each distribution).
#[derive(Debug, Clone)]
pub(super) struct Installed {
    pub name: String,
    pub packages: Vec<String>,
    pub dists: Vec<(String, String)>,
}

/// `(normalized name, version)` of a pin `NAME[extras]==VERSION`.
fn pin_key(pin: &str) -> Option<(String, String)> {
    let (name, version) = pin.split_once("==")?;
    let name = name.split_once('[').map_or(name, |(n, _)| n);
    Some((normalize(name.trim()), version.trim().to_string()))
}

/// What locking the services gave: each service's closure, and every file their resolution
/// downloaded (wheels, sdists, build backends), with the wheels built from the sdists, for the
/// lock's packages; and what their proxy had to say.
pub(super) struct Locked {
    pub installed: Vec<Installed>,
    pub fetched: Vec<Fetched>,
    /// Sdist file name → the wheel built from it, its object id and size.
    pub built: Vec<(String, PathBuf, Sha256Digest, u64)>,
    pub notes: Vec<String>,
}

/// Resolves each service's pins at lock time (see the module's documentation). `proxy` is the
/// lock's proxy configuration (index, cutoff, objects); the services get a proxy of their own
/// with their pins as its pins, so that they pass the cutoff for the services alone and never
/// change what the tests' environment resolves to.
pub(super) fn install(
    steps: &StepRunner,
    services: &[Service],
    python: &Path,
    work: &Path,
    seeds: &PipSeeds,
    mut proxy: ProxyConfig,
    say: &dyn Fn(&str),
) -> Result<Locked, EnvError> {
    let mut out = Locked {
        installed: Vec::new(),
        fetched: Vec::new(),
        built: Vec::new(),
        notes: Vec::new(),
    };
    if services.iter().all(|s| s.packages.is_empty()) {
        out.installed = services
            .iter()
            .map(|s| Installed {
                name: s.name.clone(),
                packages: Vec::new(),
                dists: Vec::new(),
            })
            .collect();
        return Ok(out);
    }
    proxy.pins = asof::explicit_pins(
        services
            .iter()
            .flat_map(|s| &s.packages)
            .map(String::as_str),
    );
    let objects = proxy.objects.clone();
    let exclude_newer = proxy.exclude_newer;
    let proxy = LockProxy::start(proxy).map_err(io_err(work))?;
    // The interpreter's own pip (ensurepip, offline), in a virtual environment that is only
    // the installer: nothing of the context's era or environment.
    let pip = Venv::create(python, &work.join("service-installer"), Some(seeds))?;
    let env = installer_env(exclude_newer, &proxy, work);
    for s in services {
        let mut dists = Vec::new();
        if !s.packages.is_empty() {
            say(&format!(
                "resolving service {}: {}",
                s.name,
                s.packages.join(" ")
            ));
            // `pip wheel` resolves as if nothing were installed: a dependency the pins leave
            // out is downloaded, not borrowed from the installer's environment. Its folder
            // holds the closure as wheels, sdists built.
            let wheels = work.join("service-wheels").join(&s.name);
            let mut cmd = pip.command(&env);
            cmd.args(["-m", "pip", "wheel", "--wheel-dir"])
                .arg(&wheels)
                .args(&s.packages);
            let step = format!("resolving the packages of service {}", s.name);
            if let Err(e) = steps.run(&mut cmd, &step) {
                return Err(match proxy.failures().first() {
                    Some(f) => EnvError::Fetch {
                        step,
                        failure: f.to_string(),
                    },
                    None => e,
                });
            }
            let files = wheels_in(&wheels, &mut dists)?;
            dists.sort();
            check_closure(&s.name, &s.packages, &dists)?;
            // A wheel of the folder that was not downloaded was built from an sdist.
            out.built
                .extend(built_from_sdists(&proxy, &objects, files)?);
        }
        out.installed.push(Installed {
            name: s.name.clone(),
            packages: s.packages.clone(),
            dists,
        });
    }
    out.fetched = proxy.fetched();
    out.notes.extend(
        proxy
            .admitted()
            .into_iter()
            .map(|n| n.replacen("pinned by the context", "pinned by a service", 1)),
    );
    out.notes.extend(proxy.reuploaded());
    Ok(out)
}

/// The installer's environment: reproducible builds, the services' proxy as the index,
/// PEP 517 builds, and a pip cache in `work`.
fn installer_env(
    exclude_newer: Option<std::time::SystemTime>,
    proxy: &LockProxy,
    work: &Path,
) -> BTreeMap<String, String> {
    let mut env = super::venv::reproducible_build_env(
        exclude_newer.unwrap_or(std::time::UNIX_EPOCH),
        &BTreeMap::new(),
    );
    env.extend([
        ("PIP_INDEX_URL".to_string(), proxy.url()),
        // Sdists built in isolated environments (their build backends fetched through the
        // proxy too, and locked): the installer's environment has no `wheel` for a legacy
        // `setup.py bdist_wheel`.
        ("PIP_USE_PEP517".to_string(), "1".to_string()),
        (
            "PIP_CACHE_DIR".to_string(),
            work.join("service-pip-cache").display().to_string(),
        ),
    ]);
    env
}

/// The wheels in the folder `pip wheel` filled, each with its path; their (name, version)
/// added to `dists`.
fn wheels_in(
    wheels: &Path,
    dists: &mut Vec<(String, String)>,
) -> Result<Vec<(String, PathBuf)>, EnvError> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(wheels).map_err(io_err(wheels))? {
        let path = e.map_err(io_err(wheels))?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some((n, v, true)) = parse_filename(&name) {
            dists.push((n, v));
            files.push((name, path));
        }
    }
    Ok(files)
}

/// The wheels of `files` that were not downloaded, each stored with the sdist it was built
/// from: (sdist file name, wheel path, object id, size).
fn built_from_sdists(
    proxy: &LockProxy,
    objects: &ObjectStore,
    files: Vec<(String, PathBuf)>,
) -> Result<Vec<(String, PathBuf, Sha256Digest, u64)>, EnvError> {
    let mut built = Vec::new();
    let fetched = proxy.fetched();
    for (name, path) in files {
        if fetched.iter().any(|f| f.info.filename == name) {
            continue;
        }
        let Some(sdist) = fetched.iter().find(|f| {
            parse_filename(&f.info.filename).is_some_and(|(n, v, wheel)| {
                !wheel
                    && Some((n.clone(), v.clone())) == parse_filename(&name).map(|(a, b, _)| (a, b))
            })
        }) else {
            continue;
        };
        let mut file = std::fs::File::open(&path).map_err(io_err(&path))?;
        let (id, size) = objects.put(&mut file)?;
        built.push((sdist.info.filename.clone(), path, id, size));
    }
    Ok(built)
}

/// The installed distributions must be the pins, no more, no less.
fn check_closure(
    service: &str,
    packages: &[String],
    dists: &[(String, String)],
) -> Result<(), EnvError> {
    let pins: Vec<(String, String)> = packages.iter().filter_map(|p| pin_key(p)).collect();
    let pinned = |n: &str, v: &str| {
        pins.iter()
            .any(|(pn, pv)| *pn == normalize(n) && same_version(pv, v))
    };
    let unpinned: Vec<String> = dists
        .iter()
        .filter(|(n, v)| !pinned(n, v))
        .map(|(n, v)| format!("{n} {v}"))
        .collect();
    let missing: Vec<String> = pins
        .iter()
        .filter(|(pn, pv)| {
            !dists
                .iter()
                .any(|(n, v)| normalize(n) == *pn && same_version(pv, v))
        })
        .map(|(n, v)| format!("{n}=={v}"))
        .collect();
    if unpinned.is_empty() && missing.is_empty() {
        return Ok(());
    }
    let mut parts = Vec::new();
    if !unpinned.is_empty() {
        parts.push(format!(
            "they also need {}, which they do not pin",
            unpinned.join(", ")
        ));
    }
    if !missing.is_empty() {
        parts.push(format!(
            "{} did not come out of the resolution",
            missing.join(", ")
        ));
    }
    Err(EnvError::ServiceClosure {
        service: service.to_string(),
        detail: parts.join("; "),
    })
}

/// The lock's key (normalized name, version as the index wrote it) of an installed
/// distribution, when a file of it passed through the index.
pub(super) type KeyOf<'a> = &'a dyn Fn(&str, &str) -> Option<(String, String)>;

/// `[[tool.swe-ark.services]]`: each installed distribution named by the lock's key of the
/// file it came from (`key_of`: normalized name and version as the index wrote them), or an
/// error when it did not come from the index.
pub(super) fn lock_meta(
    installed: &[Installed],
    key_of: KeyOf,
) -> Result<Vec<ServiceMeta>, EnvError> {
    let mut out = Vec::new();
    for s in installed {
        let mut distributions = Vec::new();
        for (n, v) in &s.dists {
            let (name, version) = key_of(n, v).ok_or_else(|| EnvError::NotLockable {
                name: n.clone(),
                version: v.clone(),
                detail: format!(
                    "a package of service {}, but no file of it passed through the index",
                    s.name
                ),
            })?;
            distributions.push(Bundled { name, version });
        }
        out.push(ServiceMeta {
            name: s.name.clone(),
            packages: s.packages.clone(),
            distributions,
        });
    }
    Ok(out)
}

/// The `(normalized name, version)` of every distribution of every service.
pub(super) fn distributions(services: &[ServiceMeta]) -> BTreeSet<(String, String)> {
    services
        .iter()
        .flat_map(|s| &s.distributions)
        .map(|d| (normalize(&d.name), d.version.clone()))
        .collect()
}

/// Where a service's environment lives in a built environment's directory.
pub fn venv_dir(env_dir: &Path, service: &str) -> PathBuf {
    env_dir.join("services").join(service)
}

/// Builds every service's environment of `lock` under `dir` (the lock's built environment),
/// from the wheelhouse, with no index; returns name → virtual environment.
#[allow(clippy::too_many_arguments)]
pub(super) fn build(
    steps: &StepRunner,
    lock: &PyLock,
    lock_id: &str,
    wheelhouse: &Path,
    python: &Path,
    installer: Installer,
    uv: Option<&Path>,
    uv_cache: &Path,
    seeds: &PipSeeds,
    dir: &Path,
) -> Result<BTreeMap<String, PathBuf>, EnvError> {
    let mut out = BTreeMap::new();
    for s in &lock.tool.swe_ark.services {
        let bad = |detail: String| EnvError::BadLock {
            id: lock_id.to_string(),
            detail,
        };
        if !crate::manifest::is_plain_service_name(&s.name) {
            return Err(bad(format!(
                "service name `{}` is not a plain name",
                s.name
            )));
        }
        let mut files = Vec::new();
        for d in &s.distributions {
            let pkg = lock
                .packages
                .iter()
                .find(|p| {
                    normalize(&p.name) == normalize(&d.name) && same_version(&p.version, &d.version)
                })
                .ok_or_else(|| {
                    bad(format!(
                        "service {} needs {} {}, which the lock has no package of",
                        s.name, d.name, d.version
                    ))
                })?;
            let art = pkg.install_wheel().ok_or_else(|| {
                bad(format!(
                    "{} {} has no wheel to install",
                    pkg.name, pkg.version
                ))
            })?;
            files.push(wheelhouse.join(&art.name));
        }
        let venv_path = venv_dir(dir, &s.name);
        // pip needs itself in the environment (ensurepip); uv does not.
        let with_pip = installer != Installer::Uv;
        // A prefix of its own: a run sees a copy of it at a place of its own, with nothing of
        // the interpreter's installation.
        let venv = Venv::create_prefix(python, &venv_path, with_pip.then_some(seeds))?;
        let steps = steps.writable(&venv_path)?;
        install::install_wheels(&steps, &venv, installer, uv, uv_cache, &files)?;
        check_built(&steps, lock_id, s, &venv, with_pip)?;
        out.insert(s.name.clone(), venv_path);
    }
    Ok(out)
}

/// A service's environment must hold exactly its distributions (and ensurepip's own pip and
/// setuptools, when pip installed it).
fn check_built(
    steps: &StepRunner,
    lock_id: &str,
    service: &ServiceMeta,
    venv: &Venv,
    with_pip: bool,
) -> Result<(), EnvError> {
    let expected: BTreeMap<String, String> = service
        .distributions
        .iter()
        .map(|d| (normalize(&d.name), d.version.clone()))
        .collect();
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for d in venv.installed(steps)? {
        let n = normalize(&d.name);
        match expected.get(&n) {
            Some(v) if same_version(v, &d.version) => {}
            Some(v) => problems.push(format!("{} is {} (the lock says {v})", d.name, d.version)),
            None if with_pip && ["pip", "setuptools"].contains(&n.as_str()) => {}
            None => problems.push(format!("{} {} is not in the lock", d.name, d.version)),
        }
        seen.insert(n);
    }
    for (n, v) in &expected {
        if !seen.contains(n) {
            problems.push(format!("{n} {v} is missing"));
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(EnvError::BuildMismatch {
        lock: lock_id.to_string(),
        detail: format!("service {}: {}", service.name, problems.join("; ")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_closure_must_be_the_pins() {
        let pins = vec!["Flask[async]==3.0.3".to_string(), "six==1.16".to_string()];
        let ok = vec![
            ("flask".to_string(), "3.0.3".to_string()),
            ("six".to_string(), "1.16.0".to_string()),
        ];
        assert!(check_closure("web", &pins, &ok).is_ok());
        let mut more = ok.clone();
        more.push(("Werkzeug".into(), "3.0.3".into()));
        let e = check_closure("web", &pins, &more).unwrap_err().to_string();
        assert!(
            e.contains("service web") && e.contains("they also need Werkzeug 3.0.3"),
            "{e}"
        );
        let e = check_closure("web", &pins, &ok[..1])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("six==1.16 did not come out of the resolution"),
            "{e}"
        );
    }
}
