//! The lock file: PEP 751 `pylock.toml`, with swe-ark's own facts under `[tool.swe-ark]`.
//!
//! Every artifact's sha256 is also its object id in the archive. The file is written
//! deterministically (packages sorted by name, then version; no timestamps of the lock run),
//! so the same inputs give the same bytes and so the same lock id.

use serde::{Deserialize, Serialize};

use crate::digest::{ParseDigestError, Sha256Digest};

/// Why a pylock.toml cannot be read or written; the messages are those of the parts that
/// failed.
#[derive(Debug, thiserror::Error)]
pub enum PyLockError {
    #[error("{0}")]
    Utf8(#[from] std::str::Utf8Error),
    #[error("{0}")]
    Read(#[from] toml::de::Error),
    #[error("{0}")]
    Write(#[from] toml::ser::Error),
    #[error("lock-version {0} is not {LOCK_VERSION}")]
    Version(String),
    #[error("{0}")]
    Digest(#[from] ParseDigestError),
}

pub const LOCK_VERSION: &str = "1.0";

/// What a package is in the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Installed in the environment.
    Runtime,
    /// Only needed to build something (an sdist, the repository's own install): kept in the
    /// environment's wheelhouse, not installed.
    Build,
    /// Needed by the repository's install at some instance's base commit, or after some
    /// instance's patches, but not at the environment setup commit (dependencies change
    /// between commits, and a fix may add one): kept in the wheelhouse, installed by that
    /// instance's own install.
    Instance,
    /// Installed in a service's own environment only (`[[tool.swe-ark.services]]`), not in
    /// the tests' environment.
    Service,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hashes {
    pub sha256: String,
}

/// One file: a wheel or an sdist, as PEP 751 describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Artifact {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_time: Option<toml::value::Datetime>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub size: u64,
    pub hashes: Hashes,
}

impl Artifact {
    pub fn sha256(&self) -> Result<Sha256Digest, ParseDigestError> {
        self.hashes.sha256.parse()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PackageMeta {
    pub role: Option<Role>,
    /// The wheel built from the sdist at lock time: what `env build` installs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub built_wheel: Option<Artifact>,
    /// The reason the index gave, when the release was yanked (locked with --allow-yanked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub yanked: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageTool {
    #[serde(rename = "swe-ark", default)]
    pub swe_ark: PackageMeta,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Package {
    pub name: String,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_python: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sdist: Option<Artifact>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wheels: Vec<Artifact>,
    #[serde(default)]
    pub tool: PackageTool,
}

impl Package {
    pub fn role(&self) -> Role {
        self.tool.swe_ark.role.unwrap_or(Role::Runtime)
    }

    /// The wheel `env build` installs: the downloaded one, else the one built from the sdist.
    pub fn install_wheel(&self) -> Option<&Artifact> {
        self.wheels
            .first()
            .or(self.tool.swe_ark.built_wheel.as_ref())
    }

    /// Every artifact the lock keeps for this package (each one an object).
    pub fn artifacts(&self) -> impl Iterator<Item = &Artifact> {
        self.sdist
            .iter()
            .chain(self.wheels.iter())
            .chain(self.tool.swe_ark.built_wheel.iter())
    }
}

/// The interpreter the environment was locked with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PythonMeta {
    pub version: String,
    pub implementation: String,
    pub platform: String,
    /// sha256 of the interpreter's executable.
    pub sha256: String,
    /// The object holding the interpreter's whole prefix (tar.zst); none with --no-pack-python.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packed: Option<Artifact>,
    /// The prefix's path when it was packed, in locks made before swe-ark named interpreters
    /// by content only (a lock names nothing of the machine it was made on); read, never
    /// written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packed_from: Option<String>,
}

/// The executable context as it was locked (the manifest's fields that shape the environment).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ContextMeta {
    pub python: String,
    /// The requirement file installed (the first of the manifest's that exists), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements_file: Option<String>,
    pub packages: Vec<String>,
    /// The conda environment file SWE-bench builds the environment from, if any, and the pip
    /// requirements it was mapped to (`env::conda`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conda_environment: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conda_mapped: Vec<String>,
    pub pip_packages: Vec<String>,
    pub pre_install: Vec<String>,
    /// pre_install commands not run: system package managers are outside a Python lock.
    pub skipped_pre_install: Vec<String>,
    pub install: String,
}

/// A distribution that came with the interpreter (ensurepip), not from the index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Bundled {
    pub name: String,
    pub version: String,
}

/// A service's own environment (a manifest's `services`): its pins, and the distributions
/// installed for them, each one a `[[packages]]` entry of the lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ServiceMeta {
    pub name: String,
    /// The manifest's `packages`, as written.
    pub packages: Vec<String>,
    /// The exact closure: what `env build` installs in `envs/<lock>/services/<name>/`.
    pub distributions: Vec<Bundled>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct LockMeta {
    pub repo: String,
    pub version: String,
    /// The environment setup commit the context was installed at.
    pub commit: String,
    /// Nothing uploaded after this instant was seen by the resolver (RFC 3339), but the
    /// exceptions the notes name (explicit pins, installers as of the interpreter).
    pub exclude_newer: String,
    /// Where that instant comes from: a dataset's environments date, `--exclude-newer`, or the
    /// environment setup commit's date. Absent in locks made before the rule was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_newer_rule: Option<String>,
    /// The index artifacts were resolved from.
    pub index: String,
    /// The installer that resolved the lock (`pip X.Y`).
    pub resolver: String,
    pub python: PythonMeta,
    pub context: ContextMeta,
    #[serde(default)]
    pub bundled: Vec<Bundled>,
    /// The repository's own distribution, installed per instance rather than locked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<Bundled>,
    /// The instances' base commits whose install was run too (their dependencies are in
    /// the wheelhouse).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instance_commits: Vec<String>,
    /// The instances whose test patch or gold patch changes a build file, whose install after
    /// the patches was run too (what the patches add is in the wheelhouse). Absent in locks
    /// made before patched trees were installed, and where no instance's patches change one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instance_patches: Vec<String>,
    /// What the lock run had to say (re-uploaded projects, skipped commands, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The services' own environments; a context without services has none (and the lock
    /// the same bytes as before services were locked).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<ServiceMeta>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tool {
    #[serde(rename = "swe-ark")]
    pub swe_ark: LockMeta,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PyLock {
    pub lock_version: String,
    #[serde(default)]
    pub environments: Vec<String>,
    pub requires_python: String,
    #[serde(default)]
    pub extras: Vec<String>,
    #[serde(default)]
    pub dependency_groups: Vec<String>,
    #[serde(default)]
    pub default_groups: Vec<String>,
    pub created_by: String,
    #[serde(default)]
    pub packages: Vec<Package>,
    pub tool: Tool,
}

impl PyLock {
    /// The canonical bytes: packages sorted by (normalized name, version).
    pub fn to_bytes(&self) -> Result<Vec<u8>, PyLockError> {
        let mut lock = self.clone();
        lock.packages.sort_by(|a, b| {
            (normalize(&a.name), &a.version).cmp(&(normalize(&b.name), &b.version))
        });
        lock.tool.swe_ark.bundled.sort();
        for s in &mut lock.tool.swe_ark.services {
            s.distributions.sort_by(|a, b| {
                (normalize(&a.name), &a.version).cmp(&(normalize(&b.name), &b.version))
            });
        }
        Ok(toml::to_string(&lock).map(String::into_bytes)?)
    }

    pub fn parse(bytes: &[u8]) -> Result<PyLock, PyLockError> {
        let text = std::str::from_utf8(bytes)?;
        let lock: PyLock = toml::from_str(text)?;
        if lock.lock_version != LOCK_VERSION {
            return Err(PyLockError::Version(lock.lock_version));
        }
        Ok(lock)
    }

    /// Every object an offline build of this lock reads, with its size and kind (`wheel`,
    /// `sdist`, `built-wheel`, `interpreter`), sorted by id, each once: what the lock's
    /// archive row counts, what a release lists and an export carries.
    pub fn needed_objects(&self) -> Result<Vec<(Sha256Digest, u64, &'static str)>, PyLockError> {
        let mut out = Vec::new();
        for p in &self.packages {
            for a in p.artifacts() {
                let kind = if Some(a) == p.tool.swe_ark.built_wheel.as_ref() {
                    "built-wheel"
                } else if a.name.ends_with(".whl") {
                    "wheel"
                } else {
                    "sdist"
                };
                out.push((a.sha256()?, a.size, kind));
            }
        }
        if let Some(a) = &self.tool.swe_ark.python.packed {
            out.push((a.sha256()?, a.size, "interpreter"));
        }
        out.sort_by_key(|o| o.0);
        out.dedup_by_key(|o| o.0);
        Ok(out)
    }

    /// Every artifact object the lock needs, with the package it belongs to.
    pub fn objects(&self) -> Vec<(&Package, &Artifact)> {
        let mut out: Vec<(&Package, &Artifact)> = self
            .packages
            .iter()
            .flat_map(|p| p.artifacts().map(move |a| (p, a)))
            .collect();
        out.sort_by(|a, b| a.1.hashes.sha256.cmp(&b.1.hashes.sha256));
        out.dedup_by(|a, b| a.1.hashes.sha256 == b.1.hashes.sha256);
        out
    }
}

/// PEP 503 name normalization: lowercase, runs of `-`, `_`, `.` become one `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// The (name, version) a distribution file name carries: wheels per the wheel spec
/// (`name-version(-build)?-py-abi-plat.whl`), sdists as `name-version.tar.gz|.zip|.tar.bz2`.
pub fn parse_filename(filename: &str) -> Option<(String, String, bool)> {
    if let Some(stem) = filename.strip_suffix(".whl") {
        let parts: Vec<&str> = stem.split('-').collect();
        if parts.len() < 5 {
            return None;
        }
        return Some((normalize(parts[0]), parts[1].to_string(), true));
    }
    let stem = [".tar.gz", ".zip", ".tar.bz2", ".tgz", ".tar.xz"]
        .iter()
        .find_map(|s| filename.strip_suffix(s))?;
    // The version starts after the last `-` followed by a digit.
    let idx = stem
        .char_indices()
        .filter(|&(i, c)| c == '-' && stem[i + 1..].starts_with(|d: char| d.is_ascii_digit()))
        .map(|(i, _)| i)
        .next_back()?;
    Some((normalize(&stem[..idx]), stem[idx + 1..].to_string(), false))
}

/// Versions compare equal when they are the same release written two ways (`1.0` and
/// `1.0.0`, `2.0rc1` and `2.0.rc1` are not merged: only case and trailing `.0`s).
pub fn same_version(a: &str, b: &str) -> bool {
    fn canon(v: &str) -> String {
        let mut v = v.to_ascii_lowercase();
        while v.ends_with(".0") && v.matches('.').count() > 1 {
            v.truncate(v.len() - 2);
        }
        v
    }
    a == b || canon(a) == canon(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_file_names() {
        assert_eq!(normalize("Foo.Bar__baz"), "foo-bar-baz");
        assert_eq!(
            parse_filename("typing_extensions-4.7.1-py3-none-any.whl"),
            Some(("typing-extensions".into(), "4.7.1".into(), true))
        );
        assert_eq!(
            parse_filename("python-dateutil-2.8.2.tar.gz"),
            Some(("python-dateutil".into(), "2.8.2".into(), false))
        );
        assert_eq!(
            parse_filename("zope.interface-5.0.zip"),
            Some(("zope-interface".into(), "5.0".into(), false))
        );
        assert_eq!(parse_filename("README.txt"), None);
        assert!(same_version("1.0", "1.0.0"));
        assert!(!same_version("1.0", "1.1"));
    }

    #[test]
    fn a_lock_round_trips_and_its_bytes_do_not_depend_on_package_order() {
        let art = |name: &str, sha: &str| Artifact {
            name: name.into(),
            upload_time: Some("2020-01-02T03:04:05.123456Z".parse().unwrap()),
            url: Some(format!("https://example.org/{name}")),
            size: 10,
            hashes: Hashes { sha256: sha.into() },
        };
        let pkg = |name: &str, sha: &str| Package {
            name: name.into(),
            version: "1.0".into(),
            index: Some("https://pypi.org/simple".into()),
            requires_python: None,
            sdist: None,
            wheels: vec![art(&format!("{name}-1.0-py3-none-any.whl"), sha)],
            tool: PackageTool::default(),
        };
        let mut lock = PyLock {
            lock_version: LOCK_VERSION.into(),
            environments: vec![],
            requires_python: "==3.11.7".into(),
            extras: vec![],
            dependency_groups: vec![],
            default_groups: vec![],
            created_by: "swe-ark".into(),
            packages: vec![pkg("zeta", &"a".repeat(64)), pkg("alpha", &"b".repeat(64))],
            tool: Tool {
                swe_ark: LockMeta {
                    repo: "o/n".into(),
                    version: "1.0".into(),
                    commit: "c".repeat(40),
                    exclude_newer: "2020-01-01T00:00:00Z".into(),
                    exclude_newer_rule: None,
                    index: "https://pypi.org/simple".into(),
                    resolver: "pip 24.0".into(),
                    python: PythonMeta {
                        version: "3.11.7".into(),
                        implementation: "cpython".into(),
                        platform: "linux-x86_64".into(),
                        sha256: "c".repeat(64),
                        packed: None,
                        packed_from: None,
                    },
                    context: ContextMeta::default(),
                    bundled: vec![],
                    project: None,
                    instance_commits: vec![],
                    instance_patches: vec![],
                    notes: vec![],
                    services: vec![],
                },
            },
        };
        let a = lock.to_bytes().unwrap();
        lock.packages.reverse();
        assert_eq!(a, lock.to_bytes().unwrap());
        let text = String::from_utf8(a.clone()).unwrap();
        assert!(text.starts_with("lock-version = \"1.0\""), "{text}");
        assert!(text.contains("[[packages.wheels]]"), "{text}");
        let back = PyLock::parse(&a).unwrap();
        assert_eq!(back.to_bytes().unwrap(), a);
        assert_eq!(back.packages[0].name, "alpha");
        // No services: nothing of them in the file (locks made before them keep their ids).
        assert!(!text.contains("service"), "{text}");

        lock.packages[0].tool.swe_ark.role = Some(Role::Service);
        lock.tool.swe_ark.services = vec![ServiceMeta {
            name: "web".into(),
            packages: vec!["zeta==1.0".into()],
            distributions: vec![Bundled {
                name: "zeta".into(),
                version: "1.0".into(),
            }],
        }];
        let b = lock.to_bytes().unwrap();
        let text = String::from_utf8(b.clone()).unwrap();
        assert!(text.contains("[[tool.swe-ark.services]]"), "{text}");
        assert!(text.contains("role = \"service\""), "{text}");
        assert_eq!(PyLock::parse(&b).unwrap().to_bytes().unwrap(), b);
    }
}
