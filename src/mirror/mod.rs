//! Bare mirrors of the repositories an archive needs, with their full history: every branch,
//! tag, note and pull-request head, fetched incrementally. The commits instances need are
//! pinned under `refs/swe-ark/`, which no fetch prunes, so an upstream force-push or a deleted
//! branch cannot take them away.

mod bundlefile;
mod check;
mod codebase;
mod incomplete;
mod name;
mod submodules;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

use git2::{AutotagOption, FetchOptions, FetchPrune, RemoteCallbacks, Repository};

use crate::digest::{Sha256Digest, Sha256Hasher};
use crate::progress::Progress;

pub use bundlefile::{ExportStats, ImportStats, import_bundle, import_name};
pub use check::{Checked, Expected, ExpectedPin, verify};
pub use incomplete::{MISSING_OBJECTS_FILE, MissingObject};
pub use name::{RepoName, Source, parse_source};
pub use submodules::{Submodule, SubmoduleScan, SubmoduleUrlError, submodule_source};

/// What a mirror fetches, and where each ref lands: everything, under its own name.
pub const FETCH_REFSPECS: [&str; 4] = [
    "+refs/heads/*:refs/heads/*",
    "+refs/tags/*:refs/tags/*",
    "+refs/notes/*:refs/notes/*",
    "+refs/pull/*/head:refs/pull/*/head",
];

/// Refs that swe-ark owns in a mirror. No refspec above writes here, so pruning never touches
/// them.
pub const PIN_PREFIX: &str = "refs/swe-ark/";

/// The base URL that turns OWNER/NAME into a clone URL.
pub const DEFAULT_GIT_BASE: &str = "https://github.com";

#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error(
        "`{0}` is neither OWNER/NAME, a git URL (https://, ssh://, git://, file://, user@host:path) \
         nor an existing local path"
    )]
    BadSource(String),
    #[error("cannot fetch {name} from `{url}`: {detail}")]
    Fetch {
        name: String,
        url: String,
        detail: String,
    },
    #[error(
        "mirror {0} is not in the archive (add it with `swe-ark mirror add {0}` or import a \
         bundle of it)"
    )]
    NoSuchMirror(String),
    #[error("mirror {name} has no commit {commit}{hint}")]
    MissingCommit {
        name: String,
        commit: String,
        hint: String,
    },
    #[error(
        "mirror {name} lacks the {kind} {oid} at `{path}` of commit {commit} (a partial clone \
         without its large files?)"
    )]
    MissingObject {
        name: String,
        commit: String,
        path: String,
        oid: String,
        kind: &'static str,
    },
    #[error("cannot pack {path} of {name} at {commit}: {reason}")]
    Unpackable {
        name: String,
        commit: String,
        path: String,
        reason: String,
    },
    #[error(
        "commit {commit} of {name} has a submodule at `{path}` (commit {gitlink}) that its \
         .gitmodules does not name, so no URL says where it comes from (`git submodule update` \
         fails on it too)"
    )]
    UnnamedSubmodule {
        name: String,
        commit: String,
        path: String,
        gitlink: String,
    },
    #[error(
        "the submodule at `{}` of {} at commit {} has the URL `{}`, which names no repository \
         to mirror: {why}",
        .at.path, .at.name, .at.commit, .at.url
    )]
    SubmoduleUrl {
        at: Box<GitlinkAt>,
        why: SubmoduleUrlError,
    },
    #[error(
        "the submodule at `{}` of {} at commit {} is commit {} of `{}`, which mirror \
         {submodule} does not have (run `swe-ark mirror update {top}`; if it still lacks it, \
         upstream lost the commit)",
        .at.path, .at.name, .at.commit, .at.gitlink, .at.url
    )]
    SubmoduleCommitMissing {
        at: Box<GitlinkAt>,
        submodule: String,
        top: String,
    },
    #[error(
        "the submodule at `{}` of {} at commit {} (commit {} of `{}`) needs mirror \
         {submodule}, which is not in the archive: run `swe-ark mirror update {top}` to mirror \
         the submodules its instances name",
        .at.path, .at.name, .at.commit, .at.gitlink, .at.url
    )]
    NoSubmoduleMirror {
        at: Box<GitlinkAt>,
        submodule: String,
        top: String,
    },
    #[error(
        "cannot fetch the submodule at `{}` of {} at commit {} (commit {} of `{}`) into mirror \
         {submodule}: {detail}",
        .at.path, .at.name, .at.commit, .at.gitlink, .at.url
    )]
    SubmoduleFetch {
        at: Box<GitlinkAt>,
        submodule: String,
        detail: String,
    },
    #[error(".gitmodules of commit {commit} of {name} cannot be read: {detail}")]
    Gitmodules {
        name: String,
        commit: String,
        detail: String,
    },
    #[error("git bundle `{path}`: {detail}")]
    BadBundle { path: PathBuf, detail: String },
    #[error("mirror {name}: {source}")]
    Git {
        name: String,
        #[source]
        source: git2::Error,
    },
    #[error("mirror I/O on `{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// A gitlink, for the errors about it: the repository and commit whose tree has it, its path
/// there, the commit it names and the URL `.gitmodules` gives.
#[derive(Debug, Clone)]
pub struct GitlinkAt {
    pub name: String,
    pub commit: String,
    pub path: String,
    pub gitlink: String,
    pub url: String,
}

/// A change to a ref between two states of a mirror.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "change", rename_all = "lowercase")]
pub enum RefChange {
    Added {
        name: String,
        new: String,
    },
    Deleted {
        name: String,
        old: String,
    },
    Moved {
        name: String,
        old: String,
        new: String,
    },
}

impl std::fmt::Display for RefChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short = |s: &str| s.get(..12).unwrap_or(s).to_string();
        match self {
            RefChange::Added { name, new } => write!(f, "+ {name} {}", short(new)),
            RefChange::Deleted { name, old } => write!(f, "- {name} (was {})", short(old)),
            RefChange::Moved { name, old, new } => {
                write!(f, "~ {name} {}..{}", short(old), short(new))
            }
        }
    }
}

/// What a fetch did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FetchReport {
    pub name: String,
    pub url: String,
    pub changes: Vec<RefChange>,
    pub refs: usize,
    pub received_objects: usize,
    pub received_bytes: usize,
    pub seconds: f64,
    pub created: bool,
}

/// The refs of a mirror that came from upstream (pins left out): name → target.
pub fn upstream_refs(repo: &Repository) -> Result<BTreeMap<String, String>, git2::Error> {
    let mut out = BTreeMap::new();
    for r in repo.references()? {
        let r = r?;
        let name = String::from_utf8_lossy(r.name_bytes()).into_owned();
        if name.starts_with(PIN_PREFIX) {
            continue;
        }
        if let Some(target) = r.target() {
            out.insert(name, target.to_string());
        }
    }
    Ok(out)
}

/// The sha256 of a ref list as sorted `<target> <name>\n` lines: equal lists, equal hashes.
pub fn refs_hash(refs: &BTreeMap<String, String>) -> Sha256Digest {
    let mut h = Sha256Hasher::new();
    for (name, target) in refs {
        h.update(format!("{target} {name}\n").as_bytes());
    }
    h.finish()
}

/// Changes from `before` to `after`, by ref name.
pub fn diff_refs(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> Vec<RefChange> {
    let mut out = Vec::new();
    for (name, new) in after {
        match before.get(name) {
            None => out.push(RefChange::Added {
                name: name.clone(),
                new: new.clone(),
            }),
            Some(old) if old != new => out.push(RefChange::Moved {
                name: name.clone(),
                old: old.clone(),
                new: new.clone(),
            }),
            Some(_) => {}
        }
    }
    for (name, old) in before {
        if !after.contains_key(name) {
            out.push(RefChange::Deleted {
                name: name.clone(),
                old: old.clone(),
            });
        }
    }
    out.sort_by(|a, b| change_name(a).cmp(change_name(b)));
    out
}

fn change_name(c: &RefChange) -> &str {
    match c {
        RefChange::Added { name, .. }
        | RefChange::Deleted { name, .. }
        | RefChange::Moved { name, .. } => name,
    }
}

/// `s` as part of a ref name when it makes a valid one (with `/` only where `slashes`);
/// otherwise `_/` and a hash of it: instance ids and paths are free text, ref names are not.
fn ref_component(s: &str, slashes: bool) -> String {
    if git2::Reference::is_valid_name(&format!("refs/x/{s}")) && (slashes || !s.contains('/')) {
        s.to_string()
    } else {
        hashed_component(s.as_bytes())
    }
}

fn hashed_component(s: &[u8]) -> String {
    format!("_/{}", &Sha256Digest::of(s).hex()[..24])
}

/// Bytes under `dir`, for `mirror ls`.
pub fn disk_size(dir: &Path) -> u64 {
    fn walk(dir: &Path) -> u64 {
        let Ok(rd) = fs::read_dir(dir) else { return 0 };
        rd.flatten()
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => walk(&e.path()),
                Ok(_) => e.metadata().map_or(0, |m| m.len()),
                Err(_) => 0,
            })
            .sum()
    }
    walk(dir)
}

/// A bare mirror on disk.
pub struct Mirror {
    pub name: RepoName,
    pub path: PathBuf,
    pub repo: Repository,
}

impl Mirror {
    /// The directory of mirror `name` under `mirrors_dir`.
    pub fn dir(mirrors_dir: &Path, name: &RepoName) -> PathBuf {
        mirrors_dir.join(name.dir_name())
    }

    pub fn open(mirrors_dir: &Path, name: &RepoName) -> Result<Mirror, MirrorError> {
        let path = Self::dir(mirrors_dir, name);
        if !path.is_dir() {
            return Err(MirrorError::NoSuchMirror(name.to_string()));
        }
        let repo = Repository::open_bare(&path).map_err(|source| MirrorError::Git {
            name: name.to_string(),
            source,
        })?;
        Ok(Mirror {
            name: name.clone(),
            path,
            repo,
        })
    }

    fn git(&self) -> impl Fn(git2::Error) -> MirrorError + '_ {
        move |source| MirrorError::Git {
            name: self.name.to_string(),
            source,
        }
    }

    /// Clones `url` into a new bare mirror, or fetches into the existing one. A new mirror is
    /// built under a temporary name and renamed into place only when the fetch succeeded.
    pub fn add(
        mirrors_dir: &Path,
        name: &RepoName,
        url: &str,
        progress: &dyn Progress,
    ) -> Result<(Mirror, FetchReport), MirrorError> {
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| MirrorError::Io { path, source }
        };
        if Self::dir(mirrors_dir, name).is_dir() {
            let mut mirror = Self::open(mirrors_dir, name)?;
            let report = mirror.fetch(Some(url), progress)?;
            return Ok((mirror, report));
        }
        fs::create_dir_all(mirrors_dir).map_err(io_err(mirrors_dir))?;
        let tmp = tempfile::Builder::new()
            .prefix(&format!(
                "{}{}-",
                crate::fsutil::TEMP_PREFIX,
                name.dir_name()
            ))
            .tempdir_in(mirrors_dir)
            .map_err(io_err(mirrors_dir))?;
        let git = |source| MirrorError::Git {
            name: name.to_string(),
            source,
        };
        let repo = Repository::init_bare(tmp.path()).map_err(git)?;
        repo.remote_with_fetch("origin", url, FETCH_REFSPECS[0])
            .map_err(git)?;
        for spec in &FETCH_REFSPECS[1..] {
            repo.remote_add_fetch("origin", spec).map_err(git)?;
        }
        let mut mirror = Mirror {
            name: name.clone(),
            path: tmp.path().to_path_buf(),
            repo,
        };
        let mut report = mirror.fetch(None, progress)?;
        report.created = true;
        let dest = Self::dir(mirrors_dir, name);
        let kept = tmp.keep();
        fs::rename(&kept, &dest).map_err(io_err(&dest))?;
        let mirror = Self::open(mirrors_dir, name)?;
        Ok((mirror, report))
    }

    /// Fetches what is new from `origin` (its URL changed to `url` first, if given). Refs
    /// deleted upstream are pruned, except the pins. A failed fetch changes no ref.
    pub fn fetch(
        &mut self,
        url: Option<&str>,
        progress: &dyn Progress,
    ) -> Result<FetchReport, MirrorError> {
        let started = Instant::now();
        if let Some(url) = url {
            self.repo
                .remote_set_url("origin", url)
                .map_err(self.git())?;
        }
        let mut remote = self.repo.find_remote("origin").map_err(self.git())?;
        let url = remote.url().unwrap_or_default().to_string();
        let before = upstream_refs(&self.repo).map_err(self.git())?;
        let fetch_err = |e: git2::Error| {
            let mut detail = e.message().to_string();
            if e.code() == git2::ErrorCode::NotFound && detail.contains("object not found") {
                // What a partial or damaged clone of the source gives: say so.
                detail.push_str(
                    " (the source repository lacks this object: is it a partial clone, a \
                     snapshot, or damaged? the mirror was left as it was; for a local \
                     repository, `mirror add --allow-missing-objects` takes every object it \
                     has and lists those it lacks)",
                );
            }
            MirrorError::Fetch {
                name: self.name.to_string(),
                url: url.clone(),
                detail,
            }
        };
        {
            let mut callbacks = RemoteCallbacks::new();
            let mut last = 0u64;
            let mut started_bar = false;
            callbacks.transfer_progress(|stats| {
                if !started_bar && stats.total_objects() > 0 {
                    crate::failpoint::hit("mirror.transfer");
                    progress.start("receiving objects", Some(stats.total_objects() as u64));
                    started_bar = true;
                }
                let done = stats.received_objects() as u64;
                progress.advance(done.saturating_sub(last));
                last = done;
                true
            });
            let mut attempts = 0;
            callbacks.credentials(|_url, username, allowed| {
                // libgit2 asks again after every refusal: give up after a few tries.
                attempts += 1;
                if attempts > 3 {
                    return Err(git2::Error::from_str(
                        "authentication failed (tried ssh-agent and GITHUB_TOKEN)",
                    ));
                }
                if allowed.contains(git2::CredentialType::SSH_KEY) {
                    return git2::Cred::ssh_key_from_agent(username.unwrap_or("git"));
                }
                if allowed.contains(git2::CredentialType::USER_PASS_PLAINTEXT)
                    && let Ok(token) = std::env::var("GITHUB_TOKEN")
                {
                    return git2::Cred::userpass_plaintext("x-access-token", &token);
                }
                git2::Cred::default()
            });
            let mut options = FetchOptions::new();
            options
                .remote_callbacks(callbacks)
                .prune(FetchPrune::On)
                .download_tags(AutotagOption::All);
            let empty: [&str; 0] = [];
            remote
                .fetch(&empty, Some(&mut options), Some("swe-ark mirror update"))
                .map_err(fetch_err)?;
            progress.finish();
        }
        let stats = remote.stats();
        let (received_objects, received_bytes) = (stats.received_objects(), stats.received_bytes());
        if let Ok(head) = remote.default_branch()
            && let Ok(head) = head.as_str()
            && self.repo.find_reference(head).is_ok()
        {
            let _ = self.repo.set_head(head);
        }
        drop(remote);
        let after = upstream_refs(&self.repo).map_err(self.git())?;
        Ok(FetchReport {
            name: self.name.to_string(),
            url,
            changes: diff_refs(&before, &after),
            refs: after.len(),
            received_objects,
            received_bytes,
            seconds: started.elapsed().as_secs_f64(),
            created: false,
        })
    }

    /// The URL of `origin`, or `""` for a mirror made from a bundle with no URL.
    pub fn url(&self) -> String {
        self.repo
            .find_remote("origin")
            .ok()
            .and_then(|r| r.url().ok().map(str::to_string))
            .unwrap_or_default()
    }

    /// Resolves a full commit id in the mirror.
    pub fn commit(&self, id: &str) -> Result<git2::Commit<'_>, MirrorError> {
        let missing = || MirrorError::MissingCommit {
            name: self.name.to_string(),
            commit: id.to_string(),
            hint: format!(
                " (run `swe-ark mirror update {}`, or check the id)",
                self.name
            ),
        };
        let oid = git2::Oid::from_str(id).map_err(|_| missing())?;
        match self.repo.find_commit(oid) {
            Ok(c) => Ok(c),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Err(missing()),
            Err(e) => Err(self.git()(e)),
        }
    }

    /// The bytes of the file at `path` in `commit`'s tree; None when the commit or the file is
    /// not there (or is not a file).
    pub fn file_at(&self, commit: &str, path: &str) -> Option<Vec<u8>> {
        let tree = self.commit(commit).ok()?.tree().ok()?;
        let entry = tree.get_path(Path::new(path)).ok()?;
        let blob = entry.to_object(&self.repo).ok()?.into_blob().ok()?;
        Some(blob.content().to_vec())
    }

    /// Pins `commit` under `refs/swe-ark/instances/<instance>/<role>`, so no fetch can drop it.
    /// Returns the ref's name.
    pub fn pin(&self, instance_id: &str, role: &str, commit: &str) -> Result<String, MirrorError> {
        let name = format!(
            "{PIN_PREFIX}instances/{}/{role}",
            ref_component(instance_id, false)
        );
        self.pin_as(&name, commit)
    }

    /// Pins the commit of the submodule at `path` (from the top of the codebase) that the
    /// instance's `role` commit names, in this, the submodule's mirror:
    /// `refs/swe-ark/instances/<instance>/<role>-submodules/<path>`. Returns the ref's name.
    pub fn pin_submodule(
        &self,
        instance_id: &str,
        role: &str,
        path: &[u8],
        commit: &str,
    ) -> Result<String, MirrorError> {
        let path = match std::str::from_utf8(path) {
            Ok(p) => ref_component(p, true),
            Err(_) => hashed_component(path),
        };
        let name = format!(
            "{PIN_PREFIX}instances/{}/{role}-submodules/{path}",
            ref_component(instance_id, false)
        );
        self.pin_as(&name, commit)
    }

    fn pin_as(&self, name: &str, commit: &str) -> Result<String, MirrorError> {
        let c = self.commit(commit)?;
        self.repo
            .reference(name, c.id(), true, "swe-ark pin")
            .map_err(self.git())?;
        Ok(name.to_string())
    }

    /// Every ref under `refs/swe-ark/`: name → target.
    pub fn pins(&self) -> Result<BTreeMap<String, String>, MirrorError> {
        let mut out = BTreeMap::new();
        let glob = format!("{PIN_PREFIX}*");
        for r in self.repo.references_glob(&glob).map_err(self.git())? {
            let r = r.map_err(self.git())?;
            if let Some(t) = r.target() {
                out.insert(
                    String::from_utf8_lossy(r.name_bytes()).into_owned(),
                    t.to_string(),
                );
            }
        }
        Ok(out)
    }

    /// Reads every object in the mirror (libgit2 re-hashes each one it reads) and checks that
    /// every ref points at an object that is there. Returns what is wrong.
    pub fn check_objects(
        &self,
        progress: &dyn Progress,
    ) -> Result<(usize, Vec<String>), MirrorError> {
        let odb = self.repo.odb().map_err(self.git())?;
        let mut oids = Vec::new();
        let listed = odb.foreach(|oid| {
            oids.push(*oid);
            true
        });
        let mut problems = Vec::new();
        if let Err(e) = listed {
            problems.push(format!("cannot list the object database: {}", e.message()));
        }
        progress.start("reading objects", Some(oids.len() as u64));
        for oid in &oids {
            if let Err(e) = odb.read(*oid) {
                problems.push(format!("object {oid} cannot be read: {}", e.message()));
            }
            progress.advance(1);
        }
        progress.finish();
        for r in self.repo.references().map_err(self.git())? {
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    problems.push(format!("a ref cannot be read: {}", e.message()));
                    continue;
                }
            };
            if let Some(t) = r.target()
                && odb.read_header(t).is_err()
            {
                problems.push(format!(
                    "ref {} points at {t}, which is not in the mirror",
                    String::from_utf8_lossy(r.name_bytes())
                ));
            }
        }
        Ok((oids.len(), problems))
    }
}
