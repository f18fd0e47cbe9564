//! The archive's optional settings, `<ark>/config.toml` ([`super::Layout::config`]).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::Layout;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read `{}`: {source}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{}` is not valid TOML: {source}", .path.display())]
    Toml {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    #[error("`{key}` in `{}` must be a string", .path.display())]
    NotAString { key: &'static str, path: PathBuf },
    #[error("{source} (the archive's bucket{})", .path.as_ref().map(|p| format!(", `store_url` in `{}`", p.display())).unwrap_or_default())]
    BadStore {
        path: Option<PathBuf>,
        #[source]
        source: Box<crate::remote::RemoteError>,
    },
}

/// The command line's `--store`: (the archive it is for, as an absolute path; the URL).
static STORE_FLAG: OnceLock<(PathBuf, String)> = OnceLock::new();

/// Makes `url` the bucket of the archive at `root` for the rest of the process, over its
/// `store_url` (the command line's `--store`). Set once; a later call is ignored.
pub fn set_store_flag(root: &Path, url: &str) -> Result<(), ConfigError> {
    crate::remote::parse_url(url).map_err(|source| ConfigError::BadStore {
        path: None,
        source: Box::new(source),
    })?;
    let _ = STORE_FLAG.set((absolute(root), url.to_string()));
    Ok(())
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The base URL OWNER/NAME is resolved against: `flag` (the command line's), then the
/// `git_base` key of `config.toml`, then GitHub.
pub fn git_base(layout: &Layout, flag: Option<String>) -> Result<String, ConfigError> {
    if let Some(f) = flag {
        return Ok(f);
    }
    Ok(string_key(layout, "git_base")?
        .unwrap_or_else(|| crate::mirror::DEFAULT_GIT_BASE.to_string()))
}

/// The bucket that holds the archive's objects and packs, if any: the command line's
/// `--store` for this archive, else `store_url = "s3://BUCKET/PREFIX"` in `config.toml`.
pub fn store_url(layout: &Layout) -> Result<Option<String>, ConfigError> {
    if let Some((root, url)) = STORE_FLAG.get()
        && *root == absolute(layout.root())
    {
        return Ok(Some(url.clone()));
    }
    let url = string_key(layout, "store_url")?;
    if let Some(u) = &url {
        crate::remote::parse_url(u).map_err(|source| ConfigError::BadStore {
            path: Some(layout.config()),
            source: Box::new(source),
        })?;
    }
    Ok(url)
}

/// The string at `key` in `config.toml`; None without the file or the key.
fn string_key(layout: &Layout, key: &'static str) -> Result<Option<String>, ConfigError> {
    let path = layout.config();
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
        path: path.clone(),
        source,
    })?;
    let table: toml::Table = text.parse().map_err(|source| ConfigError::Toml {
        path: path.clone(),
        source,
    })?;
    match table.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_str()
            .map(|s| Some(s.to_string()))
            .ok_or(ConfigError::NotAString { key, path }),
    }
}
