//! Submodules: where a commit's gitlinks come from (its `.gitmodules`, each URL mapped to a
//! mirror of its own), and the codebase with every gitlink filled from that mirror at the
//! gitlink's commit, recursively.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::rc::Rc;

use crate::bundle::{Codebase, CodebaseEntry, Gitlink};
use crate::digest::GitOid;
use crate::progress::Progress;

use super::name::name_from_location;
use super::{DEFAULT_GIT_BASE, GitlinkAt, Mirror, MirrorError, RepoName, Source};

/// A submodule a commit names: its gitlink, and the repository `.gitmodules` says it comes
/// from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submodule {
    /// Its path from the top of the codebase (for a submodule of a submodule, the whole path).
    pub path: Vec<u8>,
    /// Its name in `.gitmodules` (`submodule.<name>.url`).
    pub name: String,
    /// The commit its gitlink names (40 hex digits).
    pub commit: String,
    /// The URL `.gitmodules` gives, as written.
    pub url: String,
    /// The mirror that keeps it, and where that mirror fetches from (through the git base the
    /// caller gave).
    pub source: Source,
}

impl Submodule {
    pub fn shown_path(&self) -> String {
        String::from_utf8_lossy(&self.path).into_owned()
    }
}

/// What reading submodules remembers across commits: the gitlinks under each tree and the
/// entries of each `.gitmodules`, by object id (the same id is the same content in any
/// repository), so that many base commits sharing most of their trees are read once.
#[derive(Default)]
pub struct SubmoduleScan {
    trees: HashMap<git2::Oid, Gitlinks>,
    gitmodules: HashMap<git2::Oid, Modules>,
}

/// The gitlinks under a tree: (path below it, commit).
type Gitlinks = Rc<[(Vec<u8>, git2::Oid)]>;

/// A `.gitmodules`: gitlink path → (name, URL).
type Modules = Rc<BTreeMap<Vec<u8>, (String, String)>>;

impl SubmoduleScan {
    pub fn new() -> Self {
        Self::default()
    }
}

/// Why a submodule URL names no repository to mirror.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmoduleUrlError {
    #[error("it is empty")]
    Empty,
    #[error("its `../` climb above `{0}`")]
    ClimbsAbove(String),
    #[error("`{0}` makes no OWNER/NAME")]
    NoName(String),
}

/// `OWNER/NAME` of a GitHub URL: `https://github.com/O/N(.git)`, `http://`, `git://`,
/// `ssh://git@github.com/O/N`, `git@github.com:O/N(.git)`; `None` for anything else.
fn github_name(url: &str) -> Option<RepoName> {
    let (host, path) = if let Some((scheme, rest)) = url.split_once("://") {
        if !matches!(
            scheme.to_ascii_lowercase().as_str(),
            "https" | "http" | "git" | "ssh" | "git+ssh"
        ) {
            return None;
        }
        let (authority, path) = rest.split_once('/')?;
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        // A port is not GitHub's.
        (host, path)
    } else {
        // scp-like: [user@]host:path, with no `/` before the colon.
        let (before, path) = url.split_once(':')?;
        if before.contains('/') {
            return None;
        }
        (before.rsplit_once('@').map_or(before, |(_, h)| h), path)
    };
    if !host.eq_ignore_ascii_case("github.com") && !host.eq_ignore_ascii_case("www.github.com") {
        return None;
    }
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    let (owner, name) = path.split_once('/')?;
    RepoName::parse(&format!("{owner}/{name}"))
}

/// Whether git reads `url` as relative to the superproject's URL.
fn is_relative(url: &str) -> bool {
    url.starts_with("./") || url.starts_with("../")
}

/// `url` (relative) resolved against `base` as git resolves a submodule's relative URL against
/// its superproject's remote: each `../` drops the last component (`/` or, last, `:`), each
/// `./` nothing. `None` when a `../` finds nothing left to drop.
fn resolve_relative(base: &str, url: &str) -> Option<String> {
    let mut base = base.trim_end_matches('/').to_string();
    let mut rest = url;
    let mut colon = false;
    loop {
        if let Some(r) = rest.strip_prefix("../") {
            rest = r;
            match base.rfind('/') {
                Some(i) => base.truncate(i),
                None => {
                    let i = base.rfind(':')?;
                    base.truncate(i);
                    colon = true;
                }
            }
        } else if let Some(r) = rest.strip_prefix("./") {
            rest = r;
        } else {
            break;
        }
    }
    if base.is_empty() {
        return None;
    }
    let rest = rest.trim_end_matches('/');
    Some(format!("{base}{}{rest}", if colon { ":" } else { "/" }))
}

/// The repository a submodule URL names: the mirror that keeps it and where it is fetched
/// from. A GitHub URL is OWNER/NAME, fetched through `git_base` like any mirror; a relative
/// URL (`../x.git`) is resolved against the superproject's name for the mirror's name (as if
/// it were on GitHub, `O/N` + `../x.git` = `O/x`) and against its URL (`superproject_url`, or
/// its URL under `git_base` when it has none) for fetching; any other URL is the source it
/// is, named by its last two components.
pub fn submodule_source(
    url: &str,
    superproject: &RepoName,
    superproject_url: &str,
    git_base: &str,
) -> Result<Source, SubmoduleUrlError> {
    let base = git_base.trim_end_matches('/');
    let through_base = |name: RepoName| Source {
        url: format!("{base}/{name}.git"),
        name,
    };
    if is_relative(url) {
        let by_name = resolve_relative(&format!("https://github.com/{superproject}"), url)
            .ok_or_else(|| SubmoduleUrlError::ClimbsAbove(superproject.to_string()))?;
        let name = github_name(&by_name)
            .or_else(|| name_from_location(&by_name))
            .ok_or(SubmoduleUrlError::NoName(by_name))?;
        let from = if superproject_url.is_empty() {
            format!("{base}/{superproject}.git")
        } else {
            superproject_url.to_string()
        };
        let fetch = resolve_relative(&from, url).ok_or(SubmoduleUrlError::ClimbsAbove(from))?;
        return Ok(Source { name, url: fetch });
    }
    if let Some(name) = github_name(url) {
        return Ok(through_base(name));
    }
    if url.trim().is_empty() {
        return Err(SubmoduleUrlError::Empty);
    }
    let name = name_from_location(url).ok_or_else(|| SubmoduleUrlError::NoName(url.to_string()))?;
    Ok(Source {
        name,
        url: url.to_string(),
    })
}

/// `submodule.<name>.path` and `.url` of a `.gitmodules` as `git config -z --list` prints
/// them: path → (name, url). Sections without both are left out; a path named twice keeps
/// the last, as git's lookup by path does.
fn parse_config_list(out: &[u8]) -> BTreeMap<Vec<u8>, (String, String)> {
    let mut by_name: BTreeMap<String, (Option<Vec<u8>>, Option<String>)> = BTreeMap::new();
    let mut order = Vec::new();
    for record in out.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        let (key, value) = match record.iter().position(|&b| b == b'\n') {
            Some(i) => (&record[..i], &record[i + 1..]),
            None => (record, &b""[..]),
        };
        let Some(key) = std::str::from_utf8(key)
            .ok()
            .and_then(|k| k.strip_prefix("submodule."))
        else {
            continue;
        };
        let (name, var) = match key.rsplit_once('.') {
            Some(x) => x,
            None => continue,
        };
        let entry = by_name.entry(name.to_string()).or_insert_with(|| {
            order.push(name.to_string());
            (None, None)
        });
        match var {
            "path" => entry.0 = Some(value.strip_suffix(b"/").unwrap_or(value).to_vec()),
            "url" => entry.1 = Some(String::from_utf8_lossy(value).into_owned()),
            _ => {}
        }
    }
    let mut out = BTreeMap::new();
    for name in order {
        if let Some((Some(path), Some(url))) = by_name.remove(&name) {
            out.insert(path, (name, url));
        }
    }
    out
}

fn hex(oid: &GitOid) -> String {
    oid.hex()
}

impl Mirror {
    /// `.gitmodules` of `commit`: gitlink path → (name, URL). Empty when there is none.
    fn gitmodules_at(
        &self,
        commit: &str,
        scan: &mut SubmoduleScan,
    ) -> Result<Modules, MirrorError> {
        let c = self.commit(commit)?;
        let tree = c.tree().map_err(self.git())?;
        let Some(entry) = tree.get_name(".gitmodules") else {
            return Ok(Rc::default());
        };
        if entry.kind() != Some(git2::ObjectType::Blob) {
            return Ok(Rc::default());
        }
        let oid = entry.id();
        if let Some(known) = scan.gitmodules.get(&oid) {
            return Ok(known.clone());
        }
        // git's own parser: quoting, escapes, comments and continuations as git reads them.
        let out = crate::gitcmd::command()
            .arg("--git-dir")
            .arg(&self.path)
            .args(["config", "--blob", &oid.to_string(), "-z", "--list"])
            .output()
            .map_err(|e| MirrorError::Gitmodules {
                name: self.name.to_string(),
                commit: commit.to_string(),
                detail: format!("git could not be started: {e}"),
            })?;
        if !out.status.success() {
            return Err(MirrorError::Gitmodules {
                name: self.name.to_string(),
                commit: commit.to_string(),
                detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        let parsed = Rc::new(parse_config_list(&out.stdout));
        scan.gitmodules.insert(oid, parsed.clone());
        Ok(parsed)
    }

    /// The gitlinks under tree `id`: (path below it, commit), each tree read once per scan.
    fn gitlinks_under(
        &self,
        id: git2::Oid,
        scan: &mut SubmoduleScan,
    ) -> Result<Gitlinks, MirrorError> {
        if let Some(known) = scan.trees.get(&id) {
            return Ok(known.clone());
        }
        let tree = self.repo.find_tree(id).map_err(self.git())?;
        let mut found = Vec::new();
        for entry in tree.iter() {
            match entry.filemode() {
                0o160000 => found.push((entry.name_bytes().to_vec(), entry.id())),
                0o040000 => {
                    for (p, c) in self.gitlinks_under(entry.id(), scan)?.iter() {
                        found.push(([entry.name_bytes(), b"/", p].concat(), *c));
                    }
                }
                _ => {}
            }
        }
        let found: Rc<[_]> = found.into();
        scan.trees.insert(id, found.clone());
        Ok(found)
    }

    /// The submodules `commit` names, each gitlink with its `.gitmodules` entry and where its
    /// repository is fetched from (through `git_base`), paths under `prefix`; and, apart, each
    /// gitlink that cannot be mirrored: one `.gitmodules` does not name, or whose URL names no
    /// repository.
    pub fn submodules_at(
        &self,
        commit: &str,
        git_base: &str,
        prefix: &[u8],
        scan: &mut SubmoduleScan,
    ) -> Result<(Vec<Submodule>, Vec<MirrorError>), MirrorError> {
        let c = self.commit(commit)?;
        let gitlinks = self.gitlinks_under(c.tree_id(), scan)?;
        if gitlinks.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let modules = self.gitmodules_at(commit, scan)?;
        let url = self.url();
        let (mut found, mut problems) = (Vec::new(), Vec::new());
        for (path, gitlink) in gitlinks.iter() {
            let full = if prefix.is_empty() {
                path.clone()
            } else {
                [prefix, b"/", path].concat()
            };
            let shown = String::from_utf8_lossy(&full).into_owned();
            let Some((name, sub_url)) = modules.get(path) else {
                problems.push(MirrorError::UnnamedSubmodule {
                    name: self.name.to_string(),
                    commit: commit.to_string(),
                    path: shown,
                    gitlink: gitlink.to_string(),
                });
                continue;
            };
            match submodule_source(sub_url, &self.name, &url, git_base) {
                Ok(source) => found.push(Submodule {
                    path: full,
                    name: name.clone(),
                    commit: gitlink.to_string(),
                    url: sub_url.clone(),
                    source,
                }),
                Err(why) => problems.push(MirrorError::SubmoduleUrl {
                    at: Box::new(GitlinkAt {
                        name: self.name.to_string(),
                        commit: commit.to_string(),
                        path: shown,
                        gitlink: gitlink.to_string(),
                        url: sub_url.clone(),
                    }),
                    why,
                }),
            }
        }
        Ok((found, problems))
    }

    /// The mirror under `mirrors_dir` that keeps `sub`, holding its commit; what to run when
    /// not (`top`: the repository whose instances need it, which `mirror update` walks from).
    pub fn submodule_mirror(
        &self,
        mirrors_dir: &Path,
        commit: &str,
        sub: &Submodule,
        top: &RepoName,
    ) -> Result<Mirror, MirrorError> {
        let at = || {
            Box::new(GitlinkAt {
                name: self.name.to_string(),
                commit: commit.to_string(),
                path: sub.shown_path(),
                gitlink: sub.commit.clone(),
                url: sub.url.clone(),
            })
        };
        let m = Mirror::open(mirrors_dir, &sub.source.name).map_err(|e| match e {
            MirrorError::NoSuchMirror(_) => MirrorError::NoSubmoduleMirror {
                at: at(),
                submodule: sub.source.name.to_string(),
                top: top.to_string(),
            },
            other => other,
        })?;
        if let Err(e) = m.commit(&sub.commit) {
            return Err(match e {
                MirrorError::MissingCommit { .. } => MirrorError::SubmoduleCommitMissing {
                    at: at(),
                    submodule: sub.source.name.to_string(),
                    top: top.to_string(),
                },
                other => other,
            });
        }
        Ok(m)
    }

    /// The codebase of `commit` as its context checks it out: with its submodules' files
    /// ([`Mirror::codebase_with_submodules`]), or, for a context whose dataset image never
    /// checked them out (`empty_submodules`), each submodule an empty directory and none filled.
    pub fn codebase_for(
        &self,
        mirrors_dir: &Path,
        commit: &str,
        empty_submodules: bool,
        progress: &dyn Progress,
    ) -> Result<(Codebase, Vec<Submodule>), MirrorError> {
        if empty_submodules {
            return Ok((self.codebase_at(commit, progress)?, Vec::new()));
        }
        self.codebase_with_submodules(mirrors_dir, commit, progress)
    }

    /// The codebase of `commit` with its submodules' files in place: every gitlink that
    /// `.gitmodules` names filled from the submodule's own mirror under `mirrors_dir` at the
    /// gitlink's commit, recursively, and carried (its `tree` the submodule commit's tree,
    /// which its files are checked to make). A gitlink that `.gitmodules` does not name stays
    /// empty, as `git submodule update` leaves it, and is said on `progress`. Returns the
    /// submodules filled. Fails, naming the submodule and what to run, when a submodule's
    /// mirror is missing or lacks the commit.
    pub fn codebase_with_submodules(
        &self,
        mirrors_dir: &Path,
        commit: &str,
        progress: &dyn Progress,
    ) -> Result<(Codebase, Vec<Submodule>), MirrorError> {
        let mut scan = SubmoduleScan::new();
        let mut filled = Vec::new();
        let (entries, gitlinks, tree) = self.filled(
            mirrors_dir,
            &self.name,
            commit,
            b"",
            &mut scan,
            &mut filled,
            progress,
        )?;
        if filled.is_empty() {
            return Ok((
                Codebase {
                    entries,
                    gitlinks,
                    tree,
                },
                filled,
            ));
        }
        let codebase =
            Codebase::from_entries(entries, gitlinks).map_err(|e| MirrorError::Unpackable {
                name: self.name.to_string(),
                commit: commit.to_string(),
                path: String::new(),
                reason: e.to_string(),
            })?;
        if codebase.tree != tree {
            return Err(MirrorError::Unpackable {
                name: self.name.to_string(),
                commit: commit.to_string(),
                path: String::new(),
                reason: format!(
                    "with its submodules' files, the tree is {}, not the commit's {tree}",
                    codebase.tree
                ),
            });
        }
        Ok((codebase, filled))
    }

    /// The entries and gitlinks of `commit` with its submodules filled, paths under `prefix`,
    /// and the commit's own tree id.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn filled(
        &self,
        mirrors_dir: &Path,
        top: &RepoName,
        commit: &str,
        prefix: &[u8],
        scan: &mut SubmoduleScan,
        filled: &mut Vec<Submodule>,
        progress: &dyn Progress,
    ) -> Result<(Vec<CodebaseEntry>, Vec<Gitlink>, GitOid), MirrorError> {
        let Codebase {
            mut entries,
            gitlinks: links,
            tree,
        } = self.codebase_at(commit, progress)?;
        let under = |p: &[u8]| -> Vec<u8> {
            if prefix.is_empty() {
                p.to_vec()
            } else {
                [prefix, b"/", p].concat()
            }
        };
        if !prefix.is_empty() {
            for e in &mut entries {
                e.path = under(&e.path);
            }
        }
        let mut gitlinks = Vec::with_capacity(links.len());
        if links.is_empty() {
            return Ok((entries, gitlinks, tree));
        }
        let (subs, problems) = self.submodules_at(commit, DEFAULT_GIT_BASE, prefix, scan)?;
        for problem in problems {
            match problem {
                MirrorError::UnnamedSubmodule { .. } => {
                    progress.line(&format!("note: {problem}; it is left empty"));
                }
                other => return Err(other),
            }
        }
        let by_path: HashMap<&[u8], &Submodule> =
            subs.iter().map(|s| (s.path.as_slice(), s)).collect();
        for g in links {
            let full = under(&g.path);
            let Some(sub) = by_path.get(full.as_slice()) else {
                gitlinks.push(Gitlink { path: full, ..g });
                continue;
            };
            let m = self.submodule_mirror(mirrors_dir, commit, sub, top)?;
            filled.push((*sub).clone());
            let (sub_entries, sub_links, sub_tree) = m.filled(
                mirrors_dir,
                top,
                &hex(&g.commit),
                &full,
                scan,
                filled,
                progress,
            )?;
            entries.extend(sub_entries);
            gitlinks.extend(sub_links);
            gitlinks.push(Gitlink {
                path: full,
                commit: g.commit,
                tree: Some(sub_tree),
            });
        }
        Ok((entries, gitlinks, tree))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "https://github.com";

    fn name(s: &str) -> RepoName {
        RepoName::parse(s).unwrap()
    }

    fn source(url: &str, sup: &str, sup_url: &str, base: &str) -> (String, String) {
        let s = submodule_source(url, &name(sup), sup_url, base).unwrap();
        (s.name.to_string(), s.url)
    }

    #[test]
    fn github_urls_are_owner_name_through_the_git_base() {
        let base = "file:///srv/base";
        for url in [
            "https://github.com/kkos/oniguruma.git",
            "https://github.com/kkos/oniguruma",
            "https://github.com/kkos/oniguruma/",
            "http://www.github.com/kkos/oniguruma.git",
            "git://github.com/kkos/oniguruma.git",
            "ssh://git@github.com/kkos/oniguruma.git",
            "git@github.com:kkos/oniguruma.git",
            "git@GitHub.com:kkos/oniguruma",
            "https://user@github.com/kkos/oniguruma.git",
        ] {
            assert_eq!(
                source(url, "jqlang/jq", "https://github.com/jqlang/jq.git", base),
                (
                    "kkos/oniguruma".into(),
                    "file:///srv/base/kkos/oniguruma.git".into()
                ),
                "{url}"
            );
        }
        // Not GitHub: the source as it is, named by its last two components.
        assert_eq!(
            source("https://gitlab.com/a/b/lib.git", "o/n", "", BASE),
            ("b/lib".into(), "https://gitlab.com/a/b/lib.git".into())
        );
        assert_eq!(
            source("https://github.com.evil/a/b", "o/n", "", BASE).0,
            "a/b"
        );
        assert!(submodule_source("", &name("o/n"), "", BASE).is_err());
    }

    #[test]
    fn relative_urls_resolve_as_git_resolves_them() {
        // The name from the superproject's name, the URL from its URL.
        assert_eq!(
            source(
                "../astropy-helpers.git",
                "astropy/astropy",
                "file:///base/astropy/astropy.git",
                BASE
            ),
            (
                "astropy/astropy-helpers".into(),
                "file:///base/astropy/astropy-helpers.git".into()
            )
        );
        assert_eq!(
            source("../../other/x.git", "o/n", "https://h/o/n.git", BASE),
            ("other/x".into(), "https://h/other/x.git".into())
        );
        assert_eq!(
            source("./sub", "o/n", "https://h/o/n", BASE),
            ("n/sub".into(), "https://h/o/n/sub".into())
        );
        // No URL of its own (imported from a bundle): the git base's.
        assert_eq!(
            source("../lib.git", "o/n", "", "https://ghe.example.com/"),
            ("o/lib".into(), "https://ghe.example.com/o/lib.git".into())
        );
        // scp-like: the last `../` may drop the path after the colon.
        assert_eq!(
            resolve_relative("git@host:n.git", "../x.git").as_deref(),
            Some("git@host:x.git")
        );
        assert_eq!(resolve_relative("n", "../../x"), None);
        assert!(submodule_source("../../../x.git", &name("o/n"), "", BASE).is_err());
    }

    #[test]
    fn gitmodules_entries_by_path() {
        let out = b"submodule.modules/oniguruma.path\nmodules/oniguruma\0\
                    submodule.modules/oniguruma.url\nhttps://github.com/kkos/oniguruma.git\0\
                    submodule.a.b.path\nvendor/ab/\0submodule.a.b.url\n../ab.git\0\
                    submodule.nourl.path\nx\0core.bare\0";
        let got = parse_config_list(out);
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[&b"modules/oniguruma"[..]],
            (
                "modules/oniguruma".to_string(),
                "https://github.com/kkos/oniguruma.git".to_string()
            )
        );
        assert_eq!(
            got[&b"vendor/ab"[..]],
            ("a.b".to_string(), "../ab.git".to_string())
        );
    }
}
