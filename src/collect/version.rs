//! The release version of a repository at a commit, kept as major.minor, as SWE-bench groups
//! instances into executable contexts. Read from the source first (the package's own
//! declaration), else from the newest release tag before the instance was created.

use std::sync::OnceLock;

use git2::{ObjectType, Oid, Repository, Tree};
use regex::Regex;

use crate::manifest::VersionRule;

/// Where a version came from, for the record.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DetectedVersion {
    /// major.minor, e.g. `0.6`.
    pub version: String,
    /// The full version string found, e.g. `0.6.9.dev0`.
    pub full: String,
    /// `pyproject.toml`, `setup.cfg`, `setup.py`, `src/pkg/__init__.py`, or `tag v0.6.9`.
    pub source: String,
}

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("the pattern is valid"))
}

/// `1.2.3rc1` → `1.2`; `v2.10.0` → `2.10`; anything without major.minor → `None`.
pub fn major_minor(full: &str) -> Option<String> {
    static MM: OnceLock<Regex> = OnceLock::new();
    let caps = re(&MM, r"^[vV]?(\d+)\.(\d+)").captures(full.trim())?;
    Some(format!("{}.{}", &caps[1], &caps[2]))
}

fn blob_text(repo: &Repository, tree: &Tree<'_>, path: &str) -> Option<String> {
    let entry = tree.get_path(std::path::Path::new(path)).ok()?;
    if entry.kind() != Some(ObjectType::Blob) {
        return None;
    }
    let blob = repo.find_blob(entry.id()).ok()?;
    // Declarations of a version are small; a huge file is not one.
    if blob.size() > 1 << 20 {
        return None;
    }
    String::from_utf8(blob.content().to_vec()).ok()
}

/// A static version in one of the packaging files at the root.
fn from_packaging(repo: &Repository, tree: &Tree<'_>) -> Option<(String, String)> {
    if let Some(text) = blob_text(repo, tree, "pyproject.toml")
        && let Ok(doc) = text.parse::<toml::Table>()
    {
        for section in [&["project"][..], &["tool", "poetry"]] {
            let mut cur = doc.get(section[0]);
            for key in &section[1..] {
                cur = cur.and_then(|v| v.get(key));
            }
            if let Some(v) = cur.and_then(|t| t.get("version")).and_then(|v| v.as_str()) {
                return Some((v.to_string(), "pyproject.toml".into()));
            }
        }
    }
    static CFG: OnceLock<Regex> = OnceLock::new();
    if let Some(text) = blob_text(repo, tree, "setup.cfg")
        && let Some(c) = re(&CFG, r"(?m)^\s*version\s*=\s*([0-9][^\s#;]*)\s*$").captures(&text)
    {
        return Some((c[1].to_string(), "setup.cfg".into()));
    }
    static SETUP: OnceLock<Regex> = OnceLock::new();
    if let Some(text) = blob_text(repo, tree, "setup.py")
        && let Some(c) = re(&SETUP, r#"(?m)\bversion\s*=\s*['"]([0-9][^'"]*)['"]"#).captures(&text)
    {
        return Some((c[1].to_string(), "setup.py".into()));
    }
    None
}

/// `__version__ = "…"` in a package's `__init__.py`, `_version.py`, `version.py`,
/// `__version__.py` or `__pkginfo__.py` (astroid, pylint), at most three directories deep (`pkg/`, `src/pkg/`, `lib/pkg/sub/`).
fn from_module(repo: &Repository, tree: &Tree<'_>) -> Option<(String, String)> {
    static VER: OnceLock<Regex> = OnceLock::new();
    let pattern = re(
        &VER,
        r#"(?m)^\s*__version__\s*(?::\s*str\s*)?=\s*['"]([0-9][^'"]*)['"]"#,
    );
    let mut found: Vec<(usize, String, String)> = Vec::new();
    let mut stack: Vec<(String, Oid, usize)> = vec![(String::new(), tree.id(), 0)];
    while let Some((prefix, id, depth)) = stack.pop() {
        let Ok(t) = repo.find_tree(id) else { continue };
        for entry in t.iter() {
            let Ok(name) = std::str::from_utf8(entry.name_bytes()) else {
                continue;
            };
            let path = format!("{prefix}{name}");
            match entry.kind() {
                Some(ObjectType::Tree)
                    if depth < 3 && !name.starts_with('.') && !name.contains("test") =>
                {
                    stack.push((format!("{path}/"), entry.id(), depth + 1));
                }
                Some(ObjectType::Blob)
                    if depth > 0
                        && matches!(
                            name,
                            "__init__.py"
                                | "_version.py"
                                | "version.py"
                                | "__version__.py"
                                | "__pkginfo__.py"
                        ) =>
                {
                    if let Some(text) = blob_text(repo, tree, &path)
                        && let Some(c) = pattern.captures(&text)
                    {
                        found.push((depth, path, c[1].to_string()));
                    }
                }
                _ => {}
            }
        }
    }
    // The shallowest declaration is the package's own, not a vendored one's.
    found.sort();
    found.into_iter().next().map(|(_, path, v)| (v, path))
}

/// The newest tag that names a version and points at a commit made before `before` (RFC 3339,
/// compared in UTC as text, as GitHub writes times).
fn from_tags(repo: &Repository, before: &str) -> Option<(String, String)> {
    let mut best: Option<(i64, String, String)> = None;
    let names = repo.tag_names(None).ok()?;
    for name in names.iter().flatten().flatten() {
        let Some(_) = major_minor(name) else { continue };
        let Ok(obj) = repo.revparse_single(&format!("refs/tags/{name}^{{commit}}")) else {
            continue;
        };
        let Some(commit) = obj.as_commit() else {
            continue;
        };
        let when = commit.time().seconds();
        let stamp = humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(when.max(0) as u64),
        )
        .to_string();
        if !before.is_empty() && stamp.as_str() >= before {
            continue;
        }
        if best.as_ref().is_none_or(|(t, _, _)| when > *t) {
            best = Some((
                when,
                name.trim_start_matches(['v', 'V']).to_string(),
                name.to_string(),
            ));
        }
    }
    best.map(|(_, v, tag)| (v, format!("tag {tag}")))
}

/// A repository's own rule from its manifest: the first capture group of `pattern` in `file`.
fn from_rule(repo: &Repository, tree: &Tree<'_>, rule: &VersionRule) -> Option<(String, String)> {
    let text = blob_text(repo, tree, &rule.file)?;
    let re = Regex::new(&rule.pattern).ok()?;
    let full = re.captures(&text)?.get(1)?.as_str().to_string();
    Some((full, format!("{} (manifest rule)", rule.file)))
}

/// The version of the repository at `commit`: the manifest's rule if it has one and it
/// matches, else its packaging files, then a module's `__version__`, then the newest version
/// tag before `created_at`.
pub fn detect(
    repo: &Repository,
    commit: Oid,
    created_at: &str,
    rule: Option<&VersionRule>,
) -> Option<DetectedVersion> {
    let tree = repo.find_commit(commit).ok()?.tree().ok()?;
    let (full, source) = rule
        .and_then(|r| from_rule(repo, &tree, r))
        .or_else(|| from_packaging(repo, &tree))
        .or_else(|| from_module(repo, &tree))
        .or_else(|| from_tags(repo, created_at))?;
    Some(DetectedVersion {
        version: major_minor(&full)?,
        full,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_minor_forms() {
        assert_eq!(major_minor("0.6.9").as_deref(), Some("0.6"));
        assert_eq!(major_minor("v2.10.0rc1").as_deref(), Some("2.10"));
        assert_eq!(major_minor("3.0"), Some("3.0".into()));
        assert_eq!(major_minor("release-1"), None);
        assert_eq!(major_minor("7"), None);
    }
}
