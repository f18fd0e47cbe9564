//! The context of a repository version: its manifest's, or, for a repository no manifest
//! names, one inferred from its build files ([`crate::manifest::infer`]) at the commit it is
//! locked at. The lock records the inferred context whole (`[inferred]` of its document), and
//! validation and packing read it back from there, so that every later step runs the context
//! the lock was made for, whatever the tree or swe-ark's rules do since.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::digest::Sha256Digest;
use crate::manifest::infer::{self, InferError, Inferred};
use crate::manifest::{Context, ManifestError, Manifests, RepoManifest};
use crate::mirror::{Mirror, MirrorError, RepoName};
use crate::store::{Ark, IndexError};

/// Why a repository version has no context.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Infer(#[from] InferError),
    #[error(
        "no manifest names {repo}, so its context is inferred from its build files at the \
         newest base commit of the archive's instances of the version locked, and none is at \
         version {version}: {}",
        describe_versions(.versions)
    )]
    NoSuchVersion {
        repo: String,
        version: String,
        /// The archive's instances of the repository, by version.
        versions: BTreeMap<String, usize>,
    },
    #[error(
        "no manifest describes repository {repo}, and no lock of {repo} {version} records a \
         context inferred for it: run `swe-ark env lock {repo} {version}` (online) first, which \
         infers one from the repository's build files; or {}",
        infer::what_to_write(repo)
    )]
    NotLocked { repo: String, version: String },
    #[error(
        "{unknown}. Or let swe-ark infer one from its build files: the archive has no mirror of \
         it (`swe-ark mirror add URL --name {repo}`, then import its instances)"
    )]
    NoMirror {
        repo: String,
        /// The manifests' own error ([`ManifestError::UnknownRepo`]).
        unknown: Box<ManifestError>,
    },
    #[error("{repo}: {source}")]
    Mirror {
        repo: String,
        #[source]
        source: Box<MirrorError>,
    },
    #[error("{0} is not OWNER/NAME")]
    BadRepo(String),
    #[error("the archive's index: {0}")]
    Index(#[from] IndexError),
    #[error("lock {id}: {detail}")]
    Lock { id: String, detail: String },
}

/// What the archive's instances of a repository name as versions, for a sentence.
fn describe_versions(versions: &BTreeMap<String, usize>) -> String {
    if versions.is_empty() {
        return "the archive holds no instance of it: import them first, or name the commit to \
                infer at with --commit"
            .into();
    }
    let listed: Vec<String> = versions.iter().map(|(v, n)| format!("{v} ({n})")).collect();
    let inferred = match versions.contains_key(infer::VERSION) {
        true => format!(" (`{}`: the rows that named none)", infer::VERSION),
        false => String::new(),
    };
    format!(
        "the archive's instances of it are at {}{inferred}; lock one of those, or name the \
         commit to infer at with --commit",
        listed.join(", ")
    )
}

/// A context and the manifest it came from (a file, or one inferred).
pub struct Resolved<'a> {
    pub manifest: Cow<'a, RepoManifest>,
    pub context: Context,
}

/// The context `env lock` locks: the manifest's, else one inferred from the repository's build
/// files at `commit` (`--commit`), or at the newest base commit of the archive's instances of
/// `version`.
pub fn to_lock(
    ark: &Ark,
    manifests: &Manifests,
    repo: &str,
    version: &str,
    commit: Option<&str>,
) -> Result<Context, ResolveError> {
    let unknown = match manifests.repo(repo) {
        Ok(m) => return Ok(m.context(version)?),
        Err(e @ ManifestError::UnknownRepo { .. }) => e,
        Err(e) => return Err(e.into()),
    };
    let name = RepoName::parse(repo).ok_or_else(|| ResolveError::BadRepo(repo.to_string()))?;
    let mirror = Mirror::open(&ark.mirrors_dir(), &name).map_err(|e| match e {
        MirrorError::NoSuchMirror(_) => ResolveError::NoMirror {
            repo: repo.to_string(),
            unknown: Box::new(unknown),
        },
        e => ResolveError::Mirror {
            repo: repo.to_string(),
            source: Box::new(e),
        },
    })?;
    let at = match commit {
        Some(c) => c.to_string(),
        None => newest_base_commit(ark, &mirror, repo, version)?,
    };
    // The commit as the mirror names it in full: the lock and its notes name it so.
    let at = mirror
        .commit(&at)
        .map(|c| c.id().to_string())
        .map_err(|e| ResolveError::Mirror {
            repo: repo.to_string(),
            source: Box::new(e),
        })?;
    let manifest = infer::infer(repo, version, &at, &|path| mirror.file_at(&at, path))?;
    Ok(manifest.context(version)?)
}

/// The newest (by commit time) base commit of the archive's instances of `repo` `version`.
fn newest_base_commit(
    ark: &Ark,
    mirror: &Mirror,
    repo: &str,
    version: &str,
) -> Result<String, ResolveError> {
    let rows = ark.index().instances_of_repo(repo)?;
    let mut newest: Option<(i64, String)> = None;
    for row in rows
        .iter()
        .filter(|r| r.version == version && !r.base_commit.is_empty())
    {
        let time = mirror
            .commit(&row.base_commit)
            .map_err(|e| ResolveError::Mirror {
                repo: repo.to_string(),
                source: Box::new(e),
            })?
            .time()
            .seconds();
        if newest.as_ref().is_none_or(|(t, _)| time > *t) {
            newest = Some((time, row.base_commit.clone()));
        }
    }
    match newest {
        Some((_, commit)) => Ok(commit),
        None => {
            let mut versions = BTreeMap::new();
            for r in &rows {
                *versions.entry(r.version.clone()).or_default() += 1;
            }
            Err(ResolveError::NoSuchVersion {
                repo: repo.to_string(),
                version: version.to_string(),
                versions,
            })
        }
    }
}

/// The context of an instance of `repo` `version` that runs with a lock: the manifest's, else
/// the one inferred that the lock records (the lock `lock` names, else the newest of the
/// version, as validation chooses it).
pub fn locked<'a>(
    ark: &Ark,
    manifests: &'a Manifests,
    repo: &str,
    version: &str,
    lock: Option<&Sha256Digest>,
) -> Result<Resolved<'a>, ResolveError> {
    match manifests.repo(repo) {
        Ok(m) => {
            return Ok(Resolved {
                context: m.context(version)?,
                manifest: Cow::Borrowed(m),
            });
        }
        Err(ManifestError::UnknownRepo { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let not_locked = || ResolveError::NotLocked {
        repo: repo.to_string(),
        version: version.to_string(),
    };
    let id = match lock {
        Some(id) => *id,
        None => {
            ark.index()
                .locks()?
                .into_iter()
                .filter(|l| l.repo == repo && l.version == version)
                .max_by_key(|l| l.created_at)
                .ok_or_else(not_locked)?
                .id
        }
    };
    let bytes = ark.objects().get(&id).map_err(|e| ResolveError::Lock {
        id: id.hex(),
        detail: format!("not in the archive's objects: {e}"),
    })?;
    let inferred = inferred_in(&bytes)
        .map_err(|e| ResolveError::Lock {
            id: id.hex(),
            detail: e.to_string(),
        })?
        .ok_or_else(not_locked)?;
    let manifest = infer::read_back(repo, inferred)?;
    Ok(Resolved {
        context: manifest.context(version)?,
        manifest: Cow::Owned(manifest),
    })
}

/// Why a lock document's `[inferred]` table cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum UnreadableLock {
    #[error("not UTF-8: {0}")]
    NotUtf8(#[from] std::str::Utf8Error),
    #[error("not TOML: {0}")]
    NotToml(String),
    #[error("its [inferred] table: {0}")]
    BadInferred(String),
}

/// What a lock document records of an inferred context (its `[inferred]` table), whatever its
/// kind; None when its context came from a manifest.
pub fn inferred_in(lock: &[u8]) -> Result<Option<Inferred>, UnreadableLock> {
    let table: toml::Table = toml::from_str(std::str::from_utf8(lock)?)
        .map_err(|e| UnreadableLock::NotToml(e.to_string()))?;
    match table.get("inferred") {
        None => Ok(None),
        Some(v) => v
            .clone()
            .try_into()
            .map(Some)
            .map_err(|e| UnreadableLock::BadInferred(e.to_string())),
    }
}
