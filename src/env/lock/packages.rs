//! Steps 3 to 5: what the installs took, as the lock's packages: sdists built into wheels,
//! installed distributions matched to the files they came from, each release given its role.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::LockOptions;
use super::install::Installs;
use crate::digest::Sha256Digest;
use crate::env::proxy::{Fetched, LockProxy, percent_decode};
use crate::env::pylock::{
    Artifact, Bundled, Hashes, Package, PackageMeta, PackageTool, Role, normalize, parse_filename,
    same_version,
};
use crate::env::services::Locked;
use crate::env::venv::InstalledDist;
use crate::env::{EnvError, io_err};
use crate::store::Ark;

/// Sdist file name → the wheel built from it (an empty path when the name does not parse),
/// its object id and size.
type BuiltWheels = BTreeMap<String, (PathBuf, Sha256Digest, u64)>;

/// Step 3: every sdist becomes a wheel, once (building one may fetch more: repeat).
pub(super) fn build_sdists(
    ark: &Ark,
    ins: &Installs,
    pip_cache: &Path,
) -> Result<BuiltWheels, EnvError> {
    let Installs {
        step,
        venv,
        env,
        work,
        say,
        ..
    } = ins;
    let proxy = step.proxy;
    let built_dir = work.join("built");
    let sdist_dir = work.join("sdists");
    let mut built: BuiltWheels = BTreeMap::new();
    loop {
        let pending: Vec<Fetched> = proxy
            .fetched()
            .into_iter()
            .filter(|f| !f.info.filename.ends_with(".whl") && !built.contains_key(&f.info.filename))
            .collect();
        if pending.is_empty() {
            break;
        }
        for f in pending {
            let Some((n, v, _)) = parse_filename(&f.info.filename) else {
                built.insert(f.info.filename.clone(), (PathBuf::new(), f.sha256, 0));
                continue;
            };
            let wheel = match cached_built_wheel(pip_cache, &n, &v) {
                Some(w) => w,
                None => {
                    say(&format!("building a wheel of {}", f.info.filename));
                    std::fs::create_dir_all(&sdist_dir).map_err(io_err(&sdist_dir))?;
                    let sdist = sdist_dir.join(&f.info.filename);
                    let obj = ark.objects().ensure(&f.sha256)?;
                    std::fs::copy(&obj, &sdist).map_err(io_err(&obj))?;
                    let out_dir = built_dir.join(&n);
                    let wheel_cmd = || {
                        let mut c = venv.command(env);
                        c.args(["-m", "pip", "wheel", "--no-deps", "-w"])
                            .arg(&out_dir)
                            .arg(&sdist);
                        c
                    };
                    step.run(
                        &wheel_cmd,
                        &format!("building a wheel of {}", f.info.filename),
                    )?;
                    std::fs::read_dir(&out_dir)
                        .map_err(io_err(&out_dir))?
                        .flatten()
                        .map(|e| e.path())
                        .find(|p| p.extension().is_some_and(|x| x == "whl"))
                        .ok_or_else(|| EnvError::Command {
                            step: format!("building a wheel of {}", f.info.filename),
                            status: "no wheel".into(),
                            output: String::new(),
                        })?
                }
            };
            let mut file = std::fs::File::open(&wheel).map_err(io_err(&wheel))?;
            let (id, size) = ark.objects().put(&mut file)?;
            built.insert(f.info.filename.clone(), (wheel, id, size));
        }
    }
    Ok(built)
}

/// The wheel pip built from `name`/`version`'s sdist during the install, in its cache.
fn cached_built_wheel(cache: &Path, name: &str, version: &str) -> Option<PathBuf> {
    let mut stack = vec![cache.join("wheels")];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Some(f) = p.file_name().and_then(|f| f.to_str())
                && let Some((n, v, true)) = parse_filename(f)
                && n == name
                && same_version(&v, version)
            {
                return Some(p);
            }
        }
    }
    None
}

/// The names of the files fetched so far, by the lock's proxy and the services'.
pub(super) fn fetched_names(proxy: &LockProxy, services: &Locked) -> BTreeSet<String> {
    proxy
        .fetched()
        .into_iter()
        .chain(services.fetched.iter().cloned())
        .map(|f| f.info.filename)
        .collect()
}

/// Every file the lock's proxy fetched, then those only the services' fetched.
pub(super) fn all_fetched(proxy: &LockProxy, services: &Locked) -> Vec<Fetched> {
    let mut fetched = proxy.fetched();
    let known: BTreeSet<String> = fetched.iter().map(|f| f.info.filename.clone()).collect();
    fetched.extend(
        services
            .fetched
            .iter()
            .filter(|f| !known.contains(&f.info.filename))
            .cloned(),
    );
    fetched
}

/// A release: `(normalized name, version)`.
pub(super) type Release = (String, String);

/// A release → the files of it that were fetched.
type ByDist<'f> = BTreeMap<Release, Vec<&'f Fetched>>;

pub(super) fn by_distribution(fetched: &[Fetched]) -> ByDist<'_> {
    let mut by_dist: ByDist = BTreeMap::new();
    for f in fetched {
        if let Some((n, v, _)) = parse_filename(&f.info.filename) {
            by_dist.entry((n, v)).or_default().push(f);
        }
    }
    by_dist
}

/// What the installed distributions are: releases from the index (runtime), the installers
/// the venv came with (bundled), and the repository itself (project).
pub(super) struct Matched {
    pub(super) runtime: BTreeSet<Release>,
    pub(super) bundled: Vec<Bundled>,
    pub(super) project: Option<Bundled>,
}

/// Step 4: installed distributions ↔ the artifacts they came from.
pub(super) fn match_installed(
    installed: &[InstalledDist],
    by_dist: &ByDist,
    src: &Path,
) -> Result<Matched, EnvError> {
    let mut matched = Matched {
        runtime: BTreeSet::new(),
        bundled: Vec::new(),
        project: None,
    };
    for d in installed {
        let n = normalize(&d.name);
        let key = by_dist
            .keys()
            .find(|(kn, kv)| *kn == n && same_version(kv, &d.version))
            .cloned();
        if let Some(k) = key {
            matched.runtime.insert(k);
            continue;
        }
        // PEP 610's URL is percent-encoded (`file:///tmp/a%20b/src`): its path, decoded.
        let from_src = d
            .direct_url
            .as_deref()
            .and_then(|u| u.strip_prefix("file://"))
            .is_some_and(|p| Path::new(&percent_decode(p)).starts_with(src))
            || Path::new(&d.path).starts_with(src);
        if from_src {
            matched.project = Some(Bundled {
                name: d.name.clone(),
                version: d.version.clone(),
            });
        } else if ["pip", "setuptools", "wheel", "distribute"].contains(&n.as_str())
            && d.direct_url.is_none()
        {
            matched.bundled.push(Bundled {
                name: d.name.clone(),
                version: d.version.clone(),
            });
        } else {
            return Err(EnvError::NotLockable {
                name: d.name.clone(),
                version: d.version.clone(),
                detail: d
                    .direct_url
                    .clone()
                    .unwrap_or_else(|| "no file of it passed through the index".into()),
            });
        }
    }
    Ok(matched)
}

/// A release's role in the lock: installed (runtime), a service's, fetched only by the
/// installs at the instances' base commits (instance), or to build something (build).
pub(super) fn role_of(
    key: &Release,
    files: &[&Fetched],
    runtime: &BTreeSet<Release>,
    service_dists: &BTreeSet<Release>,
    before_instances: &BTreeSet<String>,
) -> Role {
    if runtime.contains(key) {
        Role::Runtime
    } else if service_dists.contains(key) {
        Role::Service
    } else if files
        .iter()
        .all(|f| !before_instances.contains(&f.info.filename))
    {
        Role::Instance
    } else {
        Role::Build
    }
}

/// Step 5: the packages of the lock, one per release fetched, and the names of the wheels
/// built from sdists.
pub(super) fn lock_packages(
    by_dist: &ByDist,
    role_of: &dyn Fn(&Release, &[&Fetched]) -> Role,
    built: &BuiltWheels,
    installed: &[InstalledDist],
    opts: &LockOptions,
) -> Result<(Vec<Package>, Vec<String>), EnvError> {
    let mut packages = Vec::new();
    let mut built_wheels = Vec::new();
    for (key, files) in by_dist {
        let role = role_of(key, files);
        let package = package_of(key, files, role, built, installed, opts, &mut built_wheels)?;
        packages.push(package);
    }
    Ok((packages, built_wheels))
}

/// The `[[packages]]` entry of one release, from its fetched files, with the name of the
/// wheel built from its sdist added to `built_wheels`.
fn package_of(
    (n, v): &(String, String),
    files: &[&Fetched],
    role: Role,
    built: &BuiltWheels,
    installed: &[InstalledDist],
    opts: &LockOptions,
    built_wheels: &mut Vec<String>,
) -> Result<Package, EnvError> {
    let mut wheels = Vec::new();
    let mut sdist = None;
    let mut built_wheel = None;
    let mut yanked = None;
    let mut requires_python = None;
    for f in files {
        if let Some(reason) = &f.info.yanked {
            yanked = Some(if reason.is_empty() {
                "no reason given".to_string()
            } else {
                reason.clone()
            });
            if !opts.allow_yanked {
                return Err(EnvError::Yanked {
                    name: n.clone(),
                    version: v.clone(),
                    filename: f.info.filename.clone(),
                    reason: yanked.clone().unwrap_or_default(),
                });
            }
        }
        requires_python = requires_python.or(f.info.requires_python.clone());
        if f.info.filename.ends_with(".whl") {
            wheels.push(artifact_of(f));
        } else {
            sdist = Some(artifact_of(f));
            if let Some((path, id, size)) = built.get(&f.info.filename)
                && !path.as_os_str().is_empty()
            {
                let name = path
                    .file_name()
                    .map(|x| x.to_string_lossy().into_owned())
                    .unwrap_or_default();
                built_wheels.push(name.clone());
                built_wheel = Some(Artifact {
                    name,
                    upload_time: None,
                    url: None,
                    size: *size,
                    hashes: Hashes { sha256: id.hex() },
                });
            }
        }
    }
    // Several wheels of one release (pip tried one, then another): keep them all, the
    // first one sorted is what gets installed.
    wheels.sort_by(|a, b| a.name.cmp(&b.name));
    if matches!(role, Role::Runtime | Role::Service) && wheels.is_empty() && built_wheel.is_none() {
        return Err(EnvError::NotLockable {
            name: n.clone(),
            version: v.clone(),
            detail: "no wheel of it could be built".into(),
        });
    }
    let name = installed
        .iter()
        .find(|d| normalize(&d.name) == *n)
        .map(|d| d.name.clone())
        .unwrap_or_else(|| n.clone());
    Ok(Package {
        name,
        version: v.clone(),
        index: Some(opts.index_url.clone()),
        requires_python,
        sdist,
        wheels,
        tool: PackageTool {
            swe_ark: PackageMeta {
                role: Some(role),
                built_wheel,
                yanked,
            },
        },
    })
}

fn artifact_of(f: &Fetched) -> Artifact {
    Artifact {
        name: f.info.filename.clone(),
        upload_time: f
            .info
            .upload_time
            .as_deref()
            .and_then(|t| t.parse::<toml::value::Datetime>().ok()),
        url: Some(f.info.url.clone()),
        size: f.size,
        hashes: Hashes {
            sha256: f.sha256.hex(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_project_is_found_by_its_url_at_a_path_with_spaces() {
        let installed = |url: &str| InstalledDist {
            name: "widget".into(),
            version: "1.0".into(),
            path: "/env/lib/python3.11/site-packages/widget-1.0.dist-info".into(),
            direct_url: Some(url.into()),
        };
        let src = Path::new("/tmp/a b/ark/tmp/.tmp-lock-x/src");
        let m = match_installed(
            &[installed("file:///tmp/a%20b/ark/tmp/.tmp-lock-x/src")],
            &BTreeMap::new(),
            src,
        )
        .unwrap();
        assert_eq!(m.project.map(|p| p.name), Some("widget".to_string()));
        // Another checkout whose path only begins like it is not the project.
        let other = match_installed(
            &[installed("file:///tmp/a%20b/ark/tmp/.tmp-lock-x/src2")],
            &BTreeMap::new(),
            src,
        );
        assert!(other.is_err());
    }
}
