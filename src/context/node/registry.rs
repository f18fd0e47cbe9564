//! An npm registry, online (at lock time): packuments read to choose a release as of the
//! cutoff, and tarballs downloaded, checked against the integrity their lockfile gives them and
//! kept as objects.

use std::time::{Duration, SystemTime};

use sha1::Sha1;
use sha2::{Digest, Sha256, Sha384, Sha512};

use super::NodeError;
use super::document::{LockedPackage, Tarball};
use crate::store::ObjectStore;

/// npm's public registry: the default.
pub const NPMJS: &str = "https://registry.npmjs.org/";

/// Registries whose tarball URLs a lockfile may name for npm's own packages (yarn's mirror
/// serves the same files).
const PUBLIC: [&str; 3] = [
    "https://registry.npmjs.org/",
    "http://registry.npmjs.org/",
    "https://registry.yarnpkg.com/",
];

/// A registry, online.
pub struct Online {
    /// Its URL, ending in `/`.
    pub base: String,
    http: reqwest::blocking::Client,
}

impl Online {
    pub fn new(url: &str) -> Result<Online, NodeError> {
        let mut base = url.to_string();
        if !base.ends_with('/') {
            base.push('/');
        }
        let http = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(300))
            .user_agent(concat!("swe-ark/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| NodeError::Registry(format!("an HTTP client: {e}")))?;
        Ok(Online { base, http })
    }

    fn get(&self, url: &str) -> Result<Vec<u8>, NodeError> {
        let resp = self
            .http
            .get(url)
            .header("accept", "application/json")
            .send()
            .map_err(|e| NodeError::Registry(format!("GET {url}: {e}")))?;
        if !resp.status().is_success() {
            return Err(NodeError::Registry(format!("GET {url}: {}", resp.status())));
        }
        resp.bytes()
            .map(|b| b.to_vec())
            .map_err(|e| NodeError::Registry(format!("GET {url}: {e}")))
    }

    /// The newest release of `name` whose version is `spec` or starts with `spec.` (`18`,
    /// `18.20`), published before `cutoff`: its version and its tarball's URL and integrity.
    pub fn release_as_of(
        &self,
        name: &str,
        spec: &str,
        cutoff: SystemTime,
    ) -> Result<LockedPackage, NodeError> {
        let url = format!("{}{}", self.base, name.replace('/', "%2f"));
        let doc: serde_json::Value = serde_json::from_slice(&self.get(&url)?)
            .map_err(|e| NodeError::Registry(format!("{url} is not a packument: {e}")))?;
        let times = doc.get("time").and_then(|t| t.as_object());
        let versions = doc.get("versions").and_then(|v| v.as_object());
        let (Some(times), Some(versions)) = (times, versions) else {
            return Err(NodeError::Registry(format!(
                "{url} gives no versions with their publication times"
            )));
        };
        let matches = |v: &str| v == spec || v.starts_with(&format!("{spec}."));
        let best = versions
            .keys()
            .filter(|v| matches(v) && !v.contains('-'))
            .filter(|v| {
                times
                    .get(*v)
                    .and_then(|t| t.as_str())
                    .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
                    .is_some_and(|t| t <= cutoff)
            })
            .max_by_key(|v| numeric(v))
            .ok_or_else(|| {
                NodeError::Registry(format!(
                    "{name} has no release {spec} published before {}",
                    humantime::format_rfc3339_seconds(cutoff)
                ))
            })?;
        let dist = &versions[best]["dist"];
        let field = |k: &str| dist.get(k).and_then(|v| v.as_str()).map(str::to_string);
        Ok(LockedPackage {
            name: name.to_string(),
            version: best.clone(),
            resolved: field("tarball")
                .ok_or_else(|| NodeError::Registry(format!("{name}@{best} names no tarball")))?,
            integrity: field("integrity"),
        })
    }

    /// Where to download `resolved` from: a public registry's URL sent to this registry when
    /// it is another (a test's, a mirror).
    fn source_of(&self, resolved: &str) -> String {
        if self.base == NPMJS && !resolved.starts_with("https://registry.yarnpkg.com/") {
            return resolved.to_string();
        }
        for p in PUBLIC {
            if let Some(rest) = resolved.strip_prefix(p) {
                return format!("{}{rest}", self.base);
            }
        }
        resolved.to_string()
    }

    /// `p`'s tarball, downloaded, checked against its lockfile's integrity and kept as an
    /// object.
    pub fn fetch(&self, p: &LockedPackage, objects: &ObjectStore) -> Result<Tarball, NodeError> {
        let url = self.source_of(&p.resolved);
        let body = self.get(&url)?;
        let hashes = Hashes::of(&body);
        if let Some(want) = &p.integrity
            && !hashes.satisfies(want)
        {
            return Err(NodeError::Integrity {
                package: format!("{}@{}", p.name, p.version),
                url,
                want: want.clone(),
                got: hashes.sha512_sri(),
            });
        }
        let (id, size) = objects
            .put(&mut body.as_slice())
            .map_err(|e| NodeError::Registry(format!("{}@{}: {e}", p.name, p.version)))?;
        Ok(Tarball {
            name: p.name.clone(),
            version: p.version.clone(),
            resolved: p.resolved.clone(),
            integrity: hashes.sha512_sri(),
            sha1: hex::encode(hashes.sha1),
            sha256: id.hex(),
            size,
        })
    }
}

/// A version as numbers, for ordering (`18.20.8` after `18.9.1`).
fn numeric(v: &str) -> Vec<u64> {
    v.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

/// The digests an integrity string may name.
pub struct Hashes {
    pub sha1: Vec<u8>,
    sha256: Vec<u8>,
    sha384: Vec<u8>,
    pub sha512: Vec<u8>,
}

impl Hashes {
    pub fn of(bytes: &[u8]) -> Hashes {
        Hashes {
            sha1: Sha1::digest(bytes).to_vec(),
            sha256: Sha256::digest(bytes).to_vec(),
            sha384: Sha384::digest(bytes).to_vec(),
            sha512: Sha512::digest(bytes).to_vec(),
        }
    }

    pub fn sha512_sri(&self) -> String {
        format!("sha512-{}", base64(&self.sha512))
    }

    /// Whether an integrity string (`sha512-… sha1-…`, Subresource Integrity) holds: one of
    /// its hashes of an algorithm known here matches, and none mismatches.
    pub fn satisfies(&self, integrity: &str) -> bool {
        let mut matched = false;
        for part in integrity.split_whitespace() {
            let Some((algo, b64)) = part.split_once('-') else {
                return false;
            };
            let b64 = b64.split('?').next().unwrap_or(b64);
            let ours = match algo {
                "sha1" => &self.sha1,
                "sha256" => &self.sha256,
                "sha384" => &self.sha384,
                "sha512" => &self.sha512,
                _ => continue,
            };
            if base64(ours) != b64 {
                return false;
            }
            matched = true;
        }
        matched
    }
}

/// Standard base64 with padding, as Subresource Integrity writes digests.
pub fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The digest an integrity string's `algo-base64` part names, as bytes (for npm's cache,
/// which files content by its hex).
pub fn unbase64(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integrity_is_checked_as_npm_writes_it() {
        let h = Hashes::of(b"hello");
        assert_eq!(
            h.sha512_sri(),
            "sha512-m3HSJL1i83hdltRq0+o9czGb+8KJDKra4t/3JRlnPKcjI8PZm6XBHXx6zG4UuMXaDEZjR1wuXDre9G9zvN7AQw=="
        );
        assert!(h.satisfies("sha1-qvTGHdzF6KLavt4PO0gs2a6pQ00="));
        assert!(h.satisfies(&h.sha512_sri()));
        assert!(!h.satisfies("sha1-AAAAHdzF6KLavt4PO0gs2a6pQ00="));
        assert!(!h.satisfies("md5-XUFAKrxLKna5cZ2REBfFkg=="));
        assert_eq!(unbase64(&base64(b"hello!?")).unwrap(), b"hello!?");
    }
}
