//! The native kind's lock document (`env/native-lock.toml`): every Debian package the
//! context carries (its `.deb` by the sha256 Debian's Packages index gives it), the compiler
//! the machine provides, and what else the machine must have.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::NativeError;
use crate::digest::Sha256Digest;

/// The version of the document's form.
pub const LOCK_VERSION: &str = "1";

/// `env/native-lock.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct NativeLock {
    pub lock_version: String,
    pub created_by: String,
    pub repo: String,
    pub version: String,
    /// The base commits of the instances it was made for, the newest first.
    pub commits: Vec<String>,
    /// Where the packages came from: `apt` (this machine's sources, as `apt-get` resolves
    /// them) or the URL of a flat repository's `Packages` file.
    pub source: String,
    /// The packages the manifest names; the rest of `package` is their dependencies.
    pub requested: Vec<String>,
    /// The compiler the machine provides (not carried).
    pub compiler: Compiler,
    /// No manifest named the repository: its context was inferred from its build files (which
    /// file, at which commit, the manifest that gives it, what to write to change it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inferred: Option<crate::manifest::infer::Inferred>,
    /// Packages the dependencies named that the machine provides instead of the lock (the
    /// toolchain, Debian's essential and required set), with the version this machine had.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from_machine: Vec<String>,
    #[serde(default, rename = "package", skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<Deb>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// What `gcc` and `g++` say of themselves on the machine that locked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Compiler {
    /// `gcc -dumpfullversion` (`12.2.0`).
    pub gcc: String,
    pub gxx: String,
    /// `gcc -dumpmachine` (`x86_64-linux-gnu`).
    pub target: String,
}

/// A Debian package, kept as an object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Deb {
    pub name: String,
    pub version: String,
    pub arch: String,
    /// Of the `.deb` file: its object id, as the Packages index gives it.
    pub sha256: String,
    pub size: u64,
    /// Where it was fetched from.
    pub url: String,
}

impl NativeLock {
    pub fn to_bytes(&self) -> Result<Vec<u8>, NativeError> {
        crate::context::lockdoc::to_toml(self).map_err(|e| NativeError::Document(e.to_string()))
    }

    pub fn parse(bytes: &[u8]) -> Result<NativeLock, NativeError> {
        let lock: NativeLock =
            crate::context::lockdoc::from_toml(bytes, LOCK_VERSION, |l: &NativeLock| {
                &l.lock_version
            })
            .map_err(|e| NativeError::Document(e.to_string()))?;
        for p in &lock.packages {
            digest(&p.sha256)?;
        }
        Ok(lock)
    }

    /// Every object it names: id, size, what it is; each once, by id.
    pub fn objects(&self) -> Vec<(Sha256Digest, u64, &'static str)> {
        let mut out: BTreeMap<Sha256Digest, u64> = BTreeMap::new();
        for p in &self.packages {
            if let Ok(id) = digest(&p.sha256) {
                out.insert(id, p.size);
            }
        }
        out.into_iter().map(|(id, s)| (id, s, "deb")).collect()
    }
}

pub fn digest(hex: &str) -> Result<Sha256Digest, NativeError> {
    hex.parse()
        .map_err(|e| NativeError::Document(format!("`{hex}`: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_reads_back_what_it_wrote() {
        let lock = NativeLock {
            lock_version: LOCK_VERSION.into(),
            created_by: "swe-ark".into(),
            repo: "o/r".into(),
            version: "gcc".into(),
            commits: vec!["a".repeat(40)],
            source: "apt".into(),
            requested: vec!["cmake".into()],
            compiler: Compiler {
                gcc: "12.2.0".into(),
                gxx: "12.2.0".into(),
                target: "x86_64-linux-gnu".into(),
            },
            inferred: None,
            from_machine: vec!["libc6 2.36-9".into()],
            packages: vec![Deb {
                name: "cmake".into(),
                version: "3.25.1-1".into(),
                arch: "amd64".into(),
                sha256: "b".repeat(64),
                size: 10,
                url: "http://deb.debian.org/debian/pool/main/c/cmake/cmake_3.25.1-1_amd64.deb"
                    .into(),
            }],
            notes: vec![],
        };
        let bytes = lock.to_bytes().unwrap();
        assert_eq!(NativeLock::parse(&bytes).unwrap(), lock);
        assert_eq!(lock.objects().len(), 1);
        let bad = String::from_utf8(bytes)
            .unwrap()
            .replace(&"b".repeat(64), "xyz");
        assert!(NativeLock::parse(bad.as_bytes()).is_err());
    }
}
