//! The shard's repositories (and their instances' submodules) mirrored and its contexts locked
//! in the local archive: from the seed when it has them, else fetched and locked here. What cannot be is why their instances
//! are not run.

use std::collections::{BTreeMap, BTreeSet};

use crate::context::{self, Kind, LockOptions};
use crate::digest::Sha256Digest;
use crate::mirror::{Mirror, RepoName};
use crate::progress::Progress;
use crate::store::Ark;

use super::{Job, LockSettings, ShardError};

/// Why the instances of a repository or a context are not run: it could not be mirrored, or
/// locked.
#[derive(Debug, thiserror::Error)]
enum SetupError {
    #[error("`{repo}` is not OWNER/NAME")]
    RepoName { repo: String },
    #[error("cannot mirror {repo} from the seed's bucket: {source}")]
    SeedBucket {
        repo: String,
        #[source]
        source: crate::store::ArkError,
    },
    #[error("cannot open the mirror of {repo}: {source}")]
    OpenMirror {
        repo: String,
        #[source]
        source: Box<crate::mirror::MirrorError>,
    },
    #[error("cannot record the mirror of {repo}: {source}")]
    RecordMirror {
        repo: String,
        #[source]
        source: crate::store::MirrorStateError,
    },
    #[error("cannot mirror {repo} from {url}: {source}")]
    Mirror {
        repo: String,
        url: String,
        #[source]
        source: Box<crate::mirror::MirrorError>,
    },
    #[error("cannot mirror the submodules of {repo}: {source}")]
    Submodules {
        repo: String,
        #[source]
        source: Box<crate::store::MirrorStateError>,
    },
    #[error("taking the seed's lock of {repo} {version}: {source}")]
    SeedLock {
        repo: String,
        version: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("{repo} {version}: {source}")]
    Context {
        repo: String,
        version: String,
        #[source]
        source: Box<crate::context::resolve::ResolveError>,
    },
    #[error("locking {repo} {version} failed: {source}")]
    Lock {
        repo: String,
        version: String,
        #[source]
        source: Box<crate::context::ContextError>,
    },
}

/// Every repository of the shard mirrored in `ark`; the instances of those that cannot be,
/// with why.
pub(super) fn mirror_repos(
    job: &Job,
    ark: &mut Ark,
    seed: Option<&Ark>,
) -> BTreeMap<String, String> {
    let mut not_run: BTreeMap<String, String> = BTreeMap::new();
    let repos: BTreeSet<&str> = job.shard.contexts.iter().map(|c| c.repo.as_str()).collect();
    for repo in repos {
        let base = &job.opts.git_base;
        let mirrored = ensure_mirror(ark, seed, repo, base, job.progress)
            .and_then(|()| ensure_submodules(ark, seed, repo, base, job.manifests, job.progress));
        match mirrored {
            // Only the instances whose commits name such a gitlink stop, at validation.
            Ok(problems) => {
                for p in problems {
                    (job.say)(&format!("note: {p}"));
                }
            }
            Err(e) => {
                let why = e.to_string();
                (job.say)(&format!("not run: {why}"));
                for c in job.shard.contexts.iter().filter(|c| c.repo == repo) {
                    for i in &c.instances {
                        not_run.insert(i.clone(), why.clone());
                    }
                }
            }
        }
    }
    not_run
}

/// The mirrors of the submodules that `repo`'s instances name: the seed's copies of those it
/// has (its other mirrors holding pins of these instances), the rest fetched through the git
/// base, each gitlink commit pinned here. Returns what could not be mirrored.
fn ensure_submodules(
    ark: &mut Ark,
    seed: Option<&Ark>,
    repo: &str,
    git_base: &str,
    manifests: &crate::manifest::Manifests,
    progress: &dyn Progress,
) -> Result<Vec<String>, SetupError> {
    let fail = |source: crate::store::MirrorStateError| SetupError::Submodules {
        repo: repo.to_string(),
        source: Box::new(source),
    };
    let name = RepoName::parse(repo).ok_or_else(|| SetupError::RepoName {
        repo: repo.to_string(),
    })?;
    let mut fetched = BTreeSet::from([name.clone()]);
    if let Some(seed) = seed {
        let ids: BTreeSet<String> = ark
            .index()
            .instances_of_repo(repo)
            .map_err(|e| fail(e.into()))?
            .into_iter()
            .map(|i| i.instance_id)
            .collect();
        for m in seed.index().mirrors().map_err(|e| fail(e.into()))? {
            let Some(sub) = RepoName::parse(&m.name).filter(|s| *s != name) else {
                continue;
            };
            let pins = seed.index().pins(&m.name).map_err(|e| fail(e.into()))?;
            if pins.iter().any(|p| ids.contains(&p.instance_id)) {
                ensure_mirror(ark, Some(seed), sub.as_str(), git_base, progress)?;
                fetched.insert(sub);
            }
        }
    }
    let done = ark
        .mirror_submodules(
            &name,
            git_base,
            &mut fetched,
            &|i| manifests.leaves_submodules_empty(i),
            progress,
        )
        .map_err(fail)?;
    Ok(done.problems.iter().map(|e| e.to_string()).collect())
}

/// Every context of the shard whose instances can still run, and which `ark` has not locked,
/// locked; the instances of those that cannot be are added to `not_run`, with why.
pub(super) fn lock_contexts(
    job: &Job,
    ark: &mut Ark,
    seed: Option<&Ark>,
    not_run: &mut BTreeMap<String, String>,
) -> Result<(), ShardError> {
    let locked: BTreeSet<(String, String)> = ark
        .index()
        .locks()
        .map_err(|e| job.which.step("reading the local archive")(e.into()))?
        .into_iter()
        .map(|l| (l.repo, l.version))
        .collect();
    for c in &job.shard.contexts {
        if c.instances.iter().any(|i| not_run.contains_key(i))
            || locked.contains(&(c.repo.clone(), c.version.clone()))
        {
            continue;
        }
        if let Err(e) = adopt_or_lock(job, ark, seed, &c.repo, &c.version) {
            let why = e.to_string();
            (job.say)(&format!("not run: {why}"));
            for i in &c.instances {
                not_run.insert(i.clone(), why.clone());
            }
        }
    }
    Ok(())
}

/// The seed's lock of the context when it has one (no network: its wheels come with it), else
/// the context locked here.
fn adopt_or_lock(
    job: &Job,
    ark: &mut Ark,
    seed: Option<&Ark>,
    repo: &str,
    version: &str,
) -> Result<(), SetupError> {
    let context =
        context::resolve::to_lock(ark, job.manifests, repo, version, None).map_err(|source| {
            SetupError::Context {
                repo: repo.to_string(),
                version: version.to_string(),
                source: Box::new(source),
            }
        })?;
    let kind = context::kind_of(&context).map_err(|source| SetupError::Lock {
        repo: repo.to_string(),
        version: version.to_string(),
        source: Box::new(source),
    })?;
    let adopted = match seed {
        Some(seed) => adopt_lock(ark, seed, kind, repo, version)?,
        None => false,
    };
    if adopted {
        (job.say)(&format!(
            "{repo} {version}: the seed's lock, with its objects"
        ));
        return Ok(());
    }
    (job.say)(&format!("locking {repo} {version}"));
    lock_context(ark, kind, &context, &job.opts.lock, job.say)
}

/// The repository's mirror in the local archive: there already, or cloned from the seed's (its
/// directory, else its bucket's copy), or fetched from the git base.
fn ensure_mirror(
    ark: &mut Ark,
    seed: Option<&Ark>,
    repo: &str,
    git_base: &str,
    progress: &dyn Progress,
) -> Result<(), SetupError> {
    let name = RepoName::parse(repo).ok_or_else(|| SetupError::RepoName {
        repo: repo.to_string(),
    })?;
    let here = ark.mirrors_dir();
    if Mirror::dir(&here, &name).is_dir() {
        return Ok(());
    }
    let seed_dir = seed
        .map(|s| Mirror::dir(&s.mirrors_dir(), &name))
        .filter(|d| d.is_dir());
    if seed_dir.is_none()
        && let Some(seed) = seed
        && seed
            .mirror_from_bucket(&name, &here, &ark.tmp_dir(), progress)
            .map_err(|source| SetupError::SeedBucket {
                repo: repo.to_string(),
                source,
            })?
    {
        let m = Mirror::open(&here, &name).map_err(|source| SetupError::OpenMirror {
            repo: repo.to_string(),
            source: Box::new(source),
        })?;
        return record_mirror(ark, &m, repo);
    }
    let url = match seed_dir {
        Some(dir) => dir.to_string_lossy().into_owned(),
        None => format!("{}/{name}.git", git_base.trim_end_matches('/')),
    };
    let (m, _) =
        Mirror::add(&here, &name, &url, progress).map_err(|source| SetupError::Mirror {
            repo: repo.to_string(),
            url: url.clone(),
            source: Box::new(source),
        })?;
    record_mirror(ark, &m, repo)
}

/// The mirror's state recorded in the local archive's index.
fn record_mirror(ark: &mut Ark, m: &Mirror, repo: &str) -> Result<(), SetupError> {
    ark.record_mirror(m)
        .map_err(|source| SetupError::RecordMirror {
            repo: repo.to_string(),
            source,
        })
}

/// Copies the seed's newest lock of `repo` `version`, and every object it needs, into the
/// local archive; false when the seed has none.
fn adopt_lock(
    ark: &mut Ark,
    seed: &Ark,
    kind: &dyn Kind,
    repo: &str,
    version: &str,
) -> Result<bool, SetupError> {
    let fail = |e: Box<dyn std::error::Error + Send + Sync>| SetupError::SeedLock {
        repo: repo.to_string(),
        version: version.to_string(),
        source: e,
    };
    let Some(row) = seed
        .index()
        .locks()
        .map_err(|e| fail(e.into()))?
        .into_iter()
        .filter(|l| l.repo == repo && l.version == version)
        .max_by_key(|l| l.created_at)
    else {
        return Ok(false);
    };
    let bytes = seed.objects().get(&row.id).map_err(|e| fail(e.into()))?;
    let lock = kind.read_lock(row.id, &bytes).map_err(|e| fail(e.into()))?;
    let mut objects: Vec<(Sha256Digest, u64, &str)> = vec![(row.id, bytes.len() as u64, "lock")];
    objects.extend(lock.objects().into_iter().map(|o| (o.id, o.size, o.kind)));
    let here = ark.objects();
    for (id, _, _) in &objects {
        if here.has(id) {
            continue;
        }
        let mut from = seed.objects().open(id).map_err(|e| fail(e.into()))?;
        here.put_checked(&mut from, Some(id))
            .map_err(|e| fail(e.into()))?;
    }
    ark.index_mut()
        .record_lock(&row, &objects)
        .map_err(|e| fail(e.into()))?;
    Ok(true)
}

/// Locks a context the local archive has no lock of.
fn lock_context(
    ark: &mut Ark,
    kind: &dyn Kind,
    context: &crate::manifest::Context,
    settings: &LockSettings,
    say: &dyn Fn(&str),
) -> Result<(), SetupError> {
    let opts = LockOptions {
        commit: None,
        runtime: None,
        index_url: settings.index_url.clone(),
        exclude_newer: None,
        pack_runtime: true,
        allow_yanked: settings.allow_yanked,
        installer: settings.installer,
        unconfined: settings.unconfined,
    };
    kind.lock(ark, context, &opts, say)
        .map(|_| ())
        .map_err(|source| SetupError::Lock {
            repo: context.repo.clone(),
            version: context.version.clone(),
            source: Box::new(source),
        })
}
