//! The Rust kind's lock document (`env/rust-lock.toml`) and the `Cargo.lock` files it is
//! made from.
//!
//! The lock names every artifact by its sha256: each registry crate (its `.crate` file, whose
//! sha256 is the checksum `Cargo.lock` and the registry's index give it), the index line cargo
//! reads for it offline, each `Cargo.lock` swe-ark generated for a base commit that has none,
//! and the toolchain (by the hash of its files; as an object too when the lock carries it).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::RustError;
use crate::digest::Sha256Digest;

/// The version of the document's form.
pub const LOCK_VERSION: &str = "1";

/// `env/rust-lock.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct RustLock {
    pub lock_version: String,
    pub created_by: String,
    pub repo: String,
    pub version: String,
    /// The base commits it was made from (each one's `Cargo.lock`, committed or generated, and
    /// those its instances' patches make), the newest first.
    pub commits: Vec<String>,
    /// What crates were resolved as of, for commits without a `Cargo.lock`.
    pub exclude_newer: String,
    pub exclude_newer_rule: String,
    /// The registry's sparse index the crates came from (`sparse+https://index.crates.io/`).
    pub index: String,
    /// How the context's instances group into it (docs/LANGUAGES.md, "Contexts").
    pub grouping: String,
    pub toolchain: Toolchain,
    /// No manifest named the repository: its context was inferred from its build files (which
    /// file, at which commit, the manifest that gives it, what to write to change it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inferred: Option<crate::manifest::infer::Inferred>,
    /// `Cargo.lock` files swe-ark made: for base commits that have none (resolved as of
    /// `exclude_newer`), and after patches that change what a build needs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generated: Vec<GeneratedLock>,
    #[serde(default, rename = "crate", skip_serializing_if = "Vec::is_empty")]
    pub crates: Vec<Crate>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The toolchain: what `rustc -vV` and `cargo -V` say, and the hash of its files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Toolchain {
    /// `1.95.0`.
    pub rustc: String,
    pub commit_hash: String,
    pub host: String,
    /// `cargo 1.95.0 (f2d3ce0bd 2026-03-21)`.
    pub cargo: String,
    /// The rustup components its files are (`rustc`, `cargo`, `rust-std-…`), or `bin+lib`
    /// for a toolchain rustup did not install.
    pub components: Vec<String>,
    /// sha256 over the sorted listing `sha256  path` of those files: its identity.
    pub files_sha256: String,
    /// The toolchain as an object (a deterministic tar of those files), when carried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packed: Option<Packed>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Packed {
    pub sha256: String,
    pub size: u64,
    /// How the tar is compressed in its object: `zstd`, or empty for a plain tar (locks made
    /// before toolchains were compressed).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub compression: String,
}

/// A `Cargo.lock` swe-ark made, kept as an object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct GeneratedLock {
    pub commit: String,
    pub sha256: String,
    pub size: u64,
}

/// A registry crate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Crate {
    pub name: String,
    pub version: String,
    /// Of the `.crate` file: its object id, and the checksum `Cargo.lock` holds.
    pub sha256: String,
    pub size: u64,
    /// The registry index's line for this version, as it was served: what cargo reads of it
    /// offline (dependencies, features).
    pub index_line: String,
}

impl RustLock {
    pub fn to_bytes(&self) -> Result<Vec<u8>, RustError> {
        crate::context::lockdoc::to_toml(self).map_err(|e| RustError::Document(e.to_string()))
    }

    pub fn parse(bytes: &[u8]) -> Result<RustLock, RustError> {
        let lock: RustLock =
            crate::context::lockdoc::from_toml(bytes, LOCK_VERSION, |l: &RustLock| &l.lock_version)
                .map_err(|e| RustError::Document(e.to_string()))?;
        for c in &lock.crates {
            digest(&c.sha256)?;
        }
        for g in &lock.generated {
            digest(&g.sha256)?;
        }
        Ok(lock)
    }

    /// Every object it names: id, size, what it is; each once, by id.
    pub fn objects(&self) -> Vec<(Sha256Digest, u64, &'static str)> {
        let mut out: BTreeMap<Sha256Digest, (u64, &'static str)> = BTreeMap::new();
        for c in &self.crates {
            if let Ok(id) = digest(&c.sha256) {
                out.insert(id, (c.size, "crate"));
            }
        }
        for g in &self.generated {
            if let Ok(id) = digest(&g.sha256) {
                out.insert(id, (g.size, "cargo-lock"));
            }
        }
        if let Some(p) = &self.toolchain.packed
            && let Ok(id) = digest(&p.sha256)
        {
            out.insert(id, (p.size, "toolchain"));
        }
        out.into_iter().map(|(id, (s, k))| (id, s, k)).collect()
    }
}

pub fn digest(hex: &str) -> Result<Sha256Digest, RustError> {
    hex.parse()
        .map_err(|e| RustError::Document(format!("`{hex}`: {e}")))
}

/// A package of a `Cargo.lock` that comes from a registry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LockedCrate {
    pub name: String,
    pub version: String,
    /// Its checksum, when the lock has one (a version-1 lock keeps them in `[metadata]`).
    pub checksum: Option<String>,
}

/// The registry packages of a `Cargo.lock` (versions 1 to 4). A package from git or from
/// another registry than crates.io cannot be carried here: an error names it.
pub fn registry_crates(text: &str, what: &str) -> Result<Vec<LockedCrate>, RustError> {
    let doc: toml::Table = toml::from_str(text).map_err(|e| RustError::CargoLock {
        what: what.to_string(),
        detail: e.to_string(),
    })?;
    let metadata = doc.get("metadata").and_then(|m| m.as_table());
    let mut out = Vec::new();
    let packages = doc
        .get("package")
        .and_then(|p| p.as_array())
        .cloned()
        .unwrap_or_default();
    for p in packages {
        let field = |k: &str| p.get(k).and_then(|v| v.as_str()).map(str::to_string);
        let (Some(name), Some(version)) = (field("name"), field("version")) else {
            return Err(RustError::CargoLock {
                what: what.to_string(),
                detail: "a [[package]] lacks its name or version".into(),
            });
        };
        let Some(source) = field("source") else {
            continue; // a path dependency: part of the work tree
        };
        if !is_crates_io(&source) {
            return Err(RustError::UnsupportedSource {
                what: what.to_string(),
                package: format!("{name} {version}"),
                origin: source,
            });
        }
        let checksum = field("checksum").or_else(|| {
            metadata
                .and_then(|m| m.get(&format!("checksum {name} {version} ({source})")))
                .and_then(|v| v.as_str())
                .map(str::to_string)
        });
        out.push(LockedCrate {
            name,
            version,
            checksum,
        });
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn is_crates_io(source: &str) -> bool {
    matches!(
        source,
        "registry+https://github.com/rust-lang/crates.io-index" | "sparse+https://index.crates.io/"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_of_cargo_lock_gives_its_registry_crates() {
        let v1 = r#"
[[package]]
name = "app"
version = "0.1.0"
dependencies = ["memchr 2.0.1 (registry+https://github.com/rust-lang/crates.io-index)"]

[[package]]
name = "memchr"
version = "2.0.1"
source = "registry+https://github.com/rust-lang/crates.io-index"

[metadata]
"checksum memchr 2.0.1 (registry+https://github.com/rust-lang/crates.io-index)" = "aaaa"
"#;
        let got = registry_crates(v1, "v1").unwrap();
        assert_eq!(
            got,
            vec![LockedCrate {
                name: "memchr".into(),
                version: "2.0.1".into(),
                checksum: Some("aaaa".into())
            }]
        );
        let v3 = r#"
version = 3
[[package]]
name = "memchr"
version = "2.6.4"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "bbbb"
"#;
        assert_eq!(
            registry_crates(v3, "v3").unwrap()[0].checksum.as_deref(),
            Some("bbbb")
        );
        let git = r#"
[[package]]
name = "x"
version = "0.1.0"
source = "git+https://github.com/o/x#abc"
"#;
        let e = registry_crates(git, "Cargo.lock of abc")
            .unwrap_err()
            .to_string();
        assert!(e.contains("x 0.1.0") && e.contains("git+https"), "{e}");
    }

    #[test]
    fn the_document_reads_back_what_it_wrote() {
        let lock = RustLock {
            lock_version: LOCK_VERSION.into(),
            created_by: "swe-ark".into(),
            repo: "o/r".into(),
            version: "rust-latest".into(),
            commits: vec!["a".repeat(40)],
            exclude_newer: "2025-04-03T00:00:00Z".into(),
            exclude_newer_rule: "dataset".into(),
            index: "sparse+https://index.crates.io/".into(),
            grouping: "one".into(),
            toolchain: Toolchain {
                rustc: "1.95.0".into(),
                commit_hash: "c".into(),
                host: "x86_64-unknown-linux-gnu".into(),
                cargo: "cargo 1.95.0".into(),
                components: vec!["rustc".into()],
                files_sha256: "f".repeat(64),
                packed: None,
            },
            inferred: Some(crate::manifest::infer::Inferred {
                from: "Cargo.toml".into(),
                commit: "a".repeat(40),
                note: "no manifest names o/r".into(),
                manifest: "repo = \"o/r\"\n[versions.inferred]\n".into(),
            }),
            generated: vec![],
            crates: vec![Crate {
                name: "memchr".into(),
                version: "2.6.4".into(),
                sha256: "b".repeat(64),
                size: 10,
                index_line: "{\"name\":\"memchr\"}".into(),
            }],
            notes: vec![],
        };
        let bytes = lock.to_bytes().unwrap();
        assert_eq!(RustLock::parse(&bytes).unwrap(), lock);
        assert_eq!(lock.objects().len(), 1);
    }
}
