//! Mirror names (OWNER/NAME) and what a user may give instead: a URL or a local path.

use std::fmt;
use std::path::Path;

use super::MirrorError;
use crate::dataset::is_repo;

/// A repository name, `OWNER/NAME`; its mirror lives in `mirrors/OWNER__NAME.git`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RepoName(String);

impl RepoName {
    pub fn parse(s: &str) -> Option<RepoName> {
        is_repo(s).then(|| RepoName(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn dir_name(&self) -> String {
        format!("{}.git", self.0.replacen('/', "__", 1))
    }
}

impl fmt::Display for RepoName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A repository to mirror: its name and where to fetch it from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub name: RepoName,
    pub url: String,
}

fn is_url(s: &str) -> bool {
    s.contains("://") || is_scp_like(s)
}

/// `user@host:path`, as ssh and git accept it.
fn is_scp_like(s: &str) -> bool {
    match (s.find('@'), s.find(':')) {
        (Some(at), Some(colon)) => at < colon && !s[..colon].contains('/'),
        _ => false,
    }
}

/// The last two components of a URL or path, `.git` dropped, made a valid OWNER/NAME.
pub(super) fn name_from_location(location: &str) -> Option<RepoName> {
    let path = if let Some((_, rest)) = location.split_once("://") {
        rest.split_once('/').map_or("", |(_, p)| p)
    } else if is_scp_like(location) {
        location.split_once(':').map_or("", |(_, p)| p)
    } else {
        location
    };
    let clean = |c: &str| -> String {
        let c = c.strip_suffix(".git").unwrap_or(c);
        c.chars()
            .map(|ch| {
                if ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.') {
                    ch
                } else {
                    '-'
                }
            })
            .collect()
    };
    let comps: Vec<String> = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != "." && *c != "..")
        .map(clean)
        .filter(|c| !c.is_empty() && c != "." && c != "..")
        .collect();
    let joined = match comps.as_slice() {
        [] => return None,
        [only] => format!("local/{only}"),
        [.., owner, name] => format!("{owner}/{name}"),
    };
    RepoName::parse(&joined)
}

/// Resolves what a user typed: `OWNER/NAME` (under `git_base`), a git URL, or a local path.
/// `name` overrides the name derived from a URL or path.
pub fn parse_source(arg: &str, git_base: &str, name: Option<&str>) -> Result<Source, MirrorError> {
    let forced = match name {
        Some(n) => Some(RepoName::parse(n).ok_or_else(|| MirrorError::BadSource(n.to_string()))?),
        None => None,
    };
    let local = Path::new(arg);
    let (url, derived) = if is_url(arg) {
        (arg.to_string(), name_from_location(arg))
    } else if local.exists() {
        let abs = std::path::absolute(local).map_err(|source| MirrorError::Io {
            path: local.to_path_buf(),
            source,
        })?;
        let abs = abs.to_string_lossy().into_owned();
        let derived = name_from_location(&abs);
        (abs, derived)
    } else if let Some(n) = RepoName::parse(arg) {
        (
            format!("{}/{}.git", git_base.trim_end_matches('/'), n),
            Some(n),
        )
    } else {
        return Err(MirrorError::BadSource(arg.to_string()));
    };
    let name = forced
        .or(derived)
        .ok_or_else(|| MirrorError::BadSource(arg.to_string()))?;
    Ok(Source { name, url })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "https://github.com";

    #[test]
    fn sources() {
        let s = parse_source("pylint-dev/astroid", BASE, None).unwrap();
        assert_eq!(s.url, "https://github.com/pylint-dev/astroid.git");
        assert_eq!(s.name.dir_name(), "pylint-dev__astroid.git");
        let s = parse_source("o/r", "https://ghe.example.com/", None).unwrap();
        assert_eq!(s.url, "https://ghe.example.com/o/r.git");
        let s = parse_source("git@github.com:sqlfluff/sqlfluff.git", BASE, None).unwrap();
        assert_eq!(s.name.as_str(), "sqlfluff/sqlfluff");
        let s = parse_source("file:///srv/git/team/tool.git", BASE, None).unwrap();
        assert_eq!(s.name.as_str(), "team/tool");
        let s = parse_source("git://127.0.0.1:9418/solo", BASE, None).unwrap();
        assert_eq!(s.name.as_str(), "local/solo");
        let s = parse_source("https://x/a/b", BASE, Some("acme/widgets")).unwrap();
        assert_eq!(s.name.as_str(), "acme/widgets");
        assert!(parse_source("not a repo", BASE, None).is_err());
        assert!(parse_source("https://x/a/b", BASE, Some("bad name")).is_err());
    }
}
