//! The archive's optional settings, `<ark>/config.toml` ([`super::Layout::config`]).

use std::path::PathBuf;

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
}

/// The base URL OWNER/NAME is resolved against: `flag` (the command line's), then the
/// `git_base` key of `config.toml`, then GitHub.
pub fn git_base(layout: &Layout, flag: Option<String>) -> Result<String, ConfigError> {
    if let Some(f) = flag {
        return Ok(f);
    }
    let path = layout.config();
    if path.is_file() {
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        let table: toml::Table = text.parse().map_err(|source| ConfigError::Toml {
            path: path.clone(),
            source,
        })?;
        if let Some(v) = table.get("git_base") {
            return v
                .as_str()
                .map(str::to_string)
                .ok_or(ConfigError::NotAString {
                    key: "git_base",
                    path,
                });
        }
    }
    Ok(crate::mirror::DEFAULT_GIT_BASE.to_string())
}
