//! A cargo registry, both ways: read online (its sparse index and its `.crate` downloads, at
//! lock time), and made offline (a cargo `local-registry` of the lock's crates: the `.crate`
//! files as they are, and their index lines), which cargo reads with no network and checks
//! each crate against.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::RustError;
use super::document::Crate;
use crate::digest::Sha256Digest;
use crate::store::ObjectStore;

/// crates.io's sparse index: the default.
pub const CRATES_IO: &str = "sparse+https://index.crates.io/";

/// Where the index keeps a crate's lines (`se/rd/serde`, `3/s/syn`), as cargo lays out both
/// a sparse index and a local registry.
pub fn index_path(name: &str) -> String {
    let n = name.to_ascii_lowercase();
    match n.len() {
        1 => format!("1/{n}"),
        2 => format!("2/{n}"),
        3 => format!("3/{}/{n}", &n[..1]),
        _ => format!("{}/{}/{n}", &n[..2], &n[2..4]),
    }
}

/// A sparse registry, online.
pub struct Online {
    /// The index's URL, ending in `/`, without `sparse+`.
    base: String,
    /// Its `dl` template.
    dl: String,
    http: reqwest::blocking::Client,
    lines: BTreeMap<String, Vec<String>>,
}

impl Online {
    pub fn new(index: &str) -> Result<Online, RustError> {
        let mut base = index.strip_prefix("sparse+").unwrap_or(index).to_string();
        if !base.ends_with('/') {
            base.push('/');
        }
        let http = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(120))
            .user_agent(concat!("swe-ark/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| RustError::Registry(format!("an HTTP client: {e}")))?;
        let config = get(&http, &format!("{base}config.json"))?;
        let config: serde_json::Value = serde_json::from_slice(&config).map_err(|e| {
            RustError::Registry(format!("{base}config.json is not a registry's config: {e}"))
        })?;
        let dl = config
            .get("dl")
            .and_then(|d| d.as_str())
            .ok_or_else(|| RustError::Registry(format!("{base}config.json names no `dl`")))?
            .to_string();
        Ok(Online {
            base,
            dl,
            http,
            lines: BTreeMap::new(),
        })
    }

    /// The index line of `name` `version`.
    pub fn line(&mut self, name: &str, version: &str) -> Result<String, RustError> {
        if !self.lines.contains_key(name) {
            let url = format!("{}{}", self.base, index_path(name));
            let body = get(&self.http, &url)?;
            let text = String::from_utf8_lossy(&body);
            let lines = text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_string)
                .collect();
            self.lines.insert(name.to_string(), lines);
        }
        self.lines[name]
            .iter()
            .find(|l| {
                serde_json::from_str::<serde_json::Value>(l)
                    .ok()
                    .and_then(|v| v.get("vers").and_then(|v| v.as_str()).map(str::to_string))
                    .as_deref()
                    == Some(version)
            })
            .cloned()
            .ok_or_else(|| {
                RustError::Registry(format!(
                    "the index at {} has no version {version} of crate `{name}`",
                    self.base
                ))
            })
    }

    /// `name` `version` as a [`Crate`]: its `.crate` file kept as an object, checked against
    /// `checksum` (the lock's, else the index line's `cksum`).
    pub fn fetch(
        &mut self,
        name: &str,
        version: &str,
        checksum: Option<&str>,
        objects: &ObjectStore,
    ) -> Result<Crate, RustError> {
        let line = self.line(name, version)?;
        let cksum = serde_json::from_str::<serde_json::Value>(&line)
            .ok()
            .and_then(|v| v.get("cksum").and_then(|c| c.as_str()).map(str::to_string))
            .ok_or_else(|| {
                RustError::Registry(format!("the index line of {name} {version} has no cksum"))
            })?;
        let want = checksum.unwrap_or(&cksum);
        if want != cksum {
            return Err(RustError::Registry(format!(
                "{name} {version}: Cargo.lock's checksum {want} is not the registry's {cksum}"
            )));
        }
        let id: Sha256Digest = super::document::digest(want)?;
        let size = match objects.check(&id) {
            Ok(size) => size,
            Err(_) => {
                let body = get(&self.http, &self.download_url(name, version, want))?;
                objects
                    .put_checked(&mut body.as_slice(), Some(&id))
                    .map_err(|e| {
                        RustError::Registry(format!("{name} {version}'s .crate file: {e}"))
                    })?
                    .1
            }
        };
        Ok(Crate {
            name: name.to_string(),
            version: version.to_string(),
            sha256: id.hex(),
            size,
            index_line: line,
        })
    }

    /// The `dl` template filled in, as cargo fills it (`{crate}`, `{version}`, `{prefix}`,
    /// `{lowerprefix}`, `{sha256-checksum}`), or `/{crate}/{version}/download` after it.
    fn download_url(&self, name: &str, version: &str, sha: &str) -> String {
        let markers = [
            "{crate}",
            "{version}",
            "{prefix}",
            "{lowerprefix}",
            "{sha256-checksum}",
        ];
        if !markers.iter().any(|m| self.dl.contains(m)) {
            return format!(
                "{}/{name}/{version}/download",
                self.dl.trim_end_matches('/')
            );
        }
        let path = index_path(name);
        let prefix = path.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
        self.dl
            .replace("{crate}", name)
            .replace("{version}", version)
            .replace("{lowerprefix}", &prefix.to_ascii_lowercase())
            .replace("{prefix}", prefix)
            .replace("{sha256-checksum}", sha)
    }
}

fn get(http: &reqwest::blocking::Client, url: &str) -> Result<Vec<u8>, RustError> {
    let resp = http
        .get(url)
        .send()
        .map_err(|e| RustError::Registry(format!("GET {url}: {e}")))?;
    if !resp.status().is_success() {
        return Err(RustError::Registry(format!("GET {url}: {}", resp.status())));
    }
    resp.bytes()
        .map(|b| b.to_vec())
        .map_err(|e| RustError::Registry(format!("GET {url}: {e}")))
}

/// The crates of a lock as a cargo local registry in `dir`: `index/<path>` with each crate's
/// lines, and `<name>-<version>.crate` (a copy of its object, checked as it is read).
pub fn make_local(crates: &[Crate], objects: &ObjectStore, dir: &Path) -> Result<(), RustError> {
    let io = |p: &Path, e: std::io::Error| RustError::Registry(format!("{}: {e}", p.display()));
    let mut by_name: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for c in crates {
        by_name
            .entry(c.name.clone())
            .or_default()
            .push(&c.index_line);
        let id = super::document::digest(&c.sha256)?;
        let mut reader = objects
            .open(&id)
            .map_err(|e| RustError::Registry(format!("{} {}: {e}", c.name, c.version)))?;
        let dest = dir.join(format!("{}-{}.crate", c.name, c.version));
        let mut out = std::fs::File::create(&dest).map_err(|e| io(&dest, e))?;
        std::io::copy(&mut reader, &mut out).map_err(|e| io(&dest, e))?;
    }
    for (name, lines) in by_name {
        let path = dir.join("index").join(index_path(&name));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        }
        let mut text = lines.join("\n");
        text.push('\n');
        std::fs::write(&path, text).map_err(|e| io(&path, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_paths_are_cargos() {
        assert_eq!(index_path("a"), "1/a");
        assert_eq!(index_path("ab"), "2/ab");
        assert_eq!(index_path("syn"), "3/s/syn");
        assert_eq!(index_path("Serde"), "se/rd/serde");
    }
}
