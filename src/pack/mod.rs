//! Packing task instances into bundles: from files given on the command line ([`one`]), or
//! validated instances from the index ([`from_index`]), the codebase from a directory or
//! straight from the mirror, with what git says about the base commit (`vcs.json`), and the
//! commits a bundle needs pinned in the mirror so that no later fetch can drop them. The
//! bundle format itself is [`crate::bundle`]'s.

mod files;

use std::path::{Path, PathBuf};

use crate::bundle::{
    BundleError, Codebase, PackInputs, PackOptions, PackedBundle, ValidationRecord,
};
use crate::dataset::{Instance, InstanceError};
use crate::digest::Sha256Digest;
use crate::manifest::{ManifestError, Manifests};
use crate::mirror::{Mirror, MirrorError, RepoName};
use crate::progress::Progress;
use crate::store::{
    Ark, ArkError, IndexError, MirrorStateError, ObjectError, PinRow, ValidationRow,
};
use crate::validate::expected::BundleRecord;
use crate::vcs::VcsRecord;

pub use files::{CodebaseSource, FileInputs, PackedOne, one};

#[derive(Debug, thiserror::Error)]
pub enum PackError {
    #[error("cannot read {what} `{}`: {source}", .path.display())]
    Read {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} `{}` {why}", .path.display())]
    BadFile {
        what: &'static str,
        path: PathBuf,
        why: String,
    },
    #[error("instance file `{}`: {source}", .path.display())]
    Instance {
        path: PathBuf,
        #[source]
        source: InstanceError,
    },
    #[error("--repo `{0}` is not of the form OWNER/NAME")]
    BadRepo(String),
    #[error("instance {instance} is of repository {repo}, not {asked}")]
    OtherRepo {
        instance: String,
        repo: String,
        asked: String,
    },
    #[error("--commit {given} is not the base_commit of instance {instance} ({base})")]
    OtherCommit {
        given: String,
        instance: String,
        base: String,
    },
    #[error("what git says about commit {commit} of mirror {mirror} (vcs.json): {why}")]
    Vcs {
        commit: String,
        mirror: String,
        why: String,
    },
    #[error("instance {0} has not been validated (run `swe-ark validate --instance-ids {0}`)")]
    NotValidated(String),
    #[error(
        "instance {instance} was not kept by validation ({verdict}: {reason}); only proven instances are packed (--unproven also packs those whose tests ran)"
    )]
    NotKept {
        instance: String,
        verdict: String,
        reason: String,
    },
    #[error("instance {0} is not in the index")]
    NotIndexed(String),
    #[error("the context of {repo} {version}: {why}")]
    Context {
        repo: String,
        version: String,
        why: String,
    },
    #[error("lock id `{0}` is not a sha256")]
    BadLockId(String),
    #[error("the results of {instance}'s validation (object {object}) are not readable: {why}")]
    Results {
        instance: String,
        object: Sha256Digest,
        why: String,
    },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Mirror(#[from] MirrorError),
    #[error(transparent)]
    MirrorState(#[from] MirrorStateError),
    #[error(transparent)]
    Ark(#[from] ArkError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Object(#[from] ObjectError),
    #[error(transparent)]
    Bundle(#[from] BundleError),
}

/// Reads the instance's base commit from its mirror, its submodules from theirs (an error
/// naming what to mirror when one is missing), with what git says about it, and pins it (the
/// environment setup commit too, when the mirror has it, and the submodules' commits) so that
/// no later fetch can drop them. `repo` and `commit`, when given, must be the instance's.
pub fn codebase_from_mirror(
    ark: &mut Ark,
    instance: &Instance,
    repo: &str,
    commit: Option<&str>,
    empty_submodules: bool,
    progress: &dyn Progress,
) -> Result<(Codebase, VcsRecord), PackError> {
    let name = RepoName::parse(repo).ok_or_else(|| PackError::BadRepo(repo.to_string()))?;
    if !instance.repo.eq_ignore_ascii_case(name.as_str()) {
        return Err(PackError::OtherRepo {
            instance: instance.instance_id.clone(),
            repo: instance.repo.clone(),
            asked: name.to_string(),
        });
    }
    if let Some(c) = commit
        && c != instance.base_commit
    {
        return Err(PackError::OtherCommit {
            given: c.to_string(),
            instance: instance.instance_id.clone(),
            base: instance.base_commit.clone(),
        });
    }
    let mirror = Mirror::open(&ark.mirrors_dir(), &name)?;
    // Submodules carried, from their own mirrors: a bundle must replay with no mirror (unless
    // the context leaves them empty, as its dataset's image did).
    let (codebase, submodules) = mirror.codebase_for(
        &ark.mirrors_dir(),
        &instance.base_commit,
        empty_submodules,
        progress,
    )?;
    let vcs =
        crate::vcs::record(&mirror.path, &instance.base_commit).map_err(|e| PackError::Vcs {
            commit: instance.base_commit.clone(),
            mirror: name.to_string(),
            why: e.to_string(),
        })?;
    let mut pins = vec![("base_commit", instance.base_commit.as_str())];
    let env = instance.environment_setup_commit.as_str();
    if !env.is_empty() && env != instance.base_commit {
        if mirror.commit(env).is_ok() {
            pins.push(("environment_setup_commit", env));
        } else {
            progress.line(&format!(
                "warning: the environment setup commit {env} is not in mirror {name}; it is not pinned"
            ));
        }
    }
    for (role, commit) in pins {
        let reference = mirror.pin(&instance.instance_id, role, commit)?;
        ark.index_mut().record_pin(&PinRow {
            mirror: name.to_string(),
            reference,
            commit: commit.to_string(),
            instance_id: instance.instance_id.clone(),
            role: role.to_string(),
        })?;
    }
    ark.pin_submodules(&instance.instance_id, "base_commit", &submodules)?;
    Ok((codebase, vcs))
}

/// `git describe 4.4.2-6-g…, ` for a note (`no tag in N commits, ` when none is reachable).
pub fn describe_note(vcs: Option<&VcsRecord>) -> String {
    match vcs {
        None => String::new(),
        Some(v) => match (&v.describe, v.tags.first()) {
            (Some(_), Some(t)) => format!("git describe {}-{}, ", t.name, t.distance),
            _ => format!("no tag in {} commits, ", v.commits),
        },
    }
}

/// Which validated instances to pack.
#[derive(Debug, Clone)]
pub enum Validated {
    /// Every instance validation kept.
    All,
    /// These; each must have been validated and kept.
    Ids(Vec<String>),
}

/// Whether validation proved `v` (kept it), or, with `unproven`, at least ran its tests before
/// and after the gold patch in its locked environment: such a bundle records the verdict
/// (`expected.json`), and replay grades it against the published lists but counts it apart
/// from the instances that reproduce.
fn packable(v: &ValidationRow, unproven: bool) -> bool {
    v.verdict == crate::verdict::Verdict::Kept
        || (unproven && v.log_post.is_some() && !v.lock_id.is_empty())
}

/// The validations of `which`, checked: each named one validated and packable.
fn chosen<'a>(
    validations: &'a [ValidationRow],
    which: &Validated,
    unproven: bool,
) -> Result<Vec<&'a ValidationRow>, PackError> {
    let kept = |v: &ValidationRow| packable(v, unproven);
    let ids = match which {
        Validated::All => return Ok(validations.iter().filter(|v| kept(v)).collect()),
        Validated::Ids(ids) => ids,
    };
    let mut out = Vec::new();
    for id in ids {
        let v = validations
            .iter()
            .find(|v| &v.instance_id == id)
            .ok_or_else(|| PackError::NotValidated(id.clone()))?;
        if !kept(v) {
            return Err(PackError::NotKept {
                instance: id.clone(),
                verdict: v.verdict.to_string(),
                reason: v.reason.lines().next().unwrap_or("").to_string(),
            });
        }
        out.push(v);
    }
    Ok(out)
}

/// Packs validated instances from the index: everything a bundle holds comes from the archive
/// (the codebase from the mirror, the context from `manifests`, the lock, logs and results of
/// the validation). Those validation kept; with `unproven`, also those whose tests ran
/// ([`packable`]). Returns each instance id with its bundle, in the order packed.
pub fn from_index(
    ark: &mut Ark,
    manifests: &Manifests,
    which: &Validated,
    unproven: bool,
    options: &PackOptions,
    progress: &dyn Progress,
) -> Result<Vec<(String, PackedBundle)>, PackError> {
    let validations = ark.index().validations()?;
    let mut packed_all = Vec::new();
    for v in chosen(&validations, which, unproven)? {
        let instance = ark
            .index()
            .instance(&v.instance_id)?
            .ok_or_else(|| PackError::NotIndexed(v.instance_id.clone()))?;
        let packed = pack_validated(ark, manifests, v, &instance, options, progress)?;
        packed_all.push((instance.instance_id.clone(), packed));
    }
    Ok(packed_all)
}

/// One validated instance into the archive's store.
fn pack_validated(
    ark: &mut Ark,
    manifests: &Manifests,
    v: &ValidationRow,
    instance: &Instance,
    options: &PackOptions,
    progress: &dyn Progress,
) -> Result<PackedBundle, PackError> {
    let lock_id: Option<Sha256Digest> = if v.lock_id.is_empty() {
        None
    } else {
        Some(
            v.lock_id
                .parse()
                .map_err(|_| PackError::BadLockId(v.lock_id.clone()))?,
        )
    };
    // A repository no manifest names: the context its lock recorded as inferred.
    let context = crate::context::resolve::locked(
        ark,
        manifests,
        &instance.repo,
        &instance.version,
        lock_id.as_ref(),
    )
    .map_err(|e| PackError::Context {
        repo: instance.repo.clone(),
        version: instance.version.clone(),
        why: e.to_string(),
    })?
    .context;
    let spec = toml::to_string(&context)
        .map_err(|e| PackError::Context {
            repo: instance.repo.clone(),
            version: instance.version.clone(),
            why: e.to_string(),
        })?
        .into_bytes();
    let objects = ark.objects();
    let lock = if let Some(id) = lock_id {
        let member = crate::context::kind_of(&context)
            .map_err(|e| PackError::Context {
                repo: instance.repo.clone(),
                version: instance.version.clone(),
                why: e.to_string(),
            })?
            .lock_member();
        Some((member, objects.get(&id)?))
    } else {
        None
    };
    let get = |id: &Option<Sha256Digest>| id.as_ref().map(|id| objects.get(id)).transpose();
    let raw_pre = get(&v.log_pre)?;
    let raw_post = get(&v.log_post)?;
    let results: crate::validate::Results = serde_json::from_slice(&objects.get(&v.results)?)
        .map_err(|e| PackError::Results {
            instance: v.instance_id.clone(),
            object: v.results,
            why: e.to_string(),
        })?;
    let kept = BundleRecord::of(&results, raw_pre.as_deref(), raw_post.as_deref());
    let repo = instance.repo.clone();
    let (codebase, vcs) = codebase_from_mirror(
        ark,
        instance,
        &repo,
        None,
        context.empty_submodules,
        progress,
    )?;
    // The mirror may have been fetched since the validation: say so when git answers
    // differently now.
    if let Some(then) = &results.describe
        && Some(then) != vcs.describe.as_ref()
    {
        progress.line(&format!(
            "warning: {}: validation saw `git describe` {then}, the mirror now gives {}",
            instance.instance_id,
            vcs.describe.as_deref().unwrap_or("no tag")
        ));
    }
    let inputs = PackInputs {
        instance,
        codebase: &codebase,
        spec: Some(spec),
        lock,
        pre_log: kept.pre_log,
        post_log: kept.post_log,
        record: Some(ValidationRecord::Expected(kept.expected)),
        vcs: Some(&vcs),
    };
    let packed = ark.pack(&inputs, options, progress)?;
    progress.line(&format!(
        "packed {}: {} codebase files, {}{} added to the store",
        instance.instance_id,
        packed.codebase_files,
        describe_note(Some(&vcs)),
        crate::units::human_bytes(packed.file_size)
    ));
    Ok(packed)
}

/// Where `vcs.json` of a codebase packed from a directory comes from.
#[derive(Debug, Clone)]
pub enum VcsSource {
    /// Left out (a format version 1 bundle).
    None,
    /// A file.
    File(PathBuf),
    /// The directory's own repository, when it is a git work tree at the base commit; else
    /// left out, said on `progress` when the directory has a `.git` that could not give it.
    FromDir,
}

/// `vcs.json` for a codebase packed from directory `dir`.
pub fn vcs_for_dir(
    source: &VcsSource,
    dir: &Path,
    instance: &Instance,
    progress: &dyn Progress,
) -> Result<Option<VcsRecord>, PackError> {
    match source {
        VcsSource::None => Ok(None),
        VcsSource::File(file) => vcs_from_file(file, instance).map(Some),
        VcsSource::FromDir => Ok(vcs_from_dir(dir, instance, progress)),
    }
}

fn vcs_from_file(file: &Path, instance: &Instance) -> Result<VcsRecord, PackError> {
    let bad = |why: String| PackError::BadFile {
        what: "--vcs",
        path: file.to_path_buf(),
        why,
    };
    let bytes = read(file, "--vcs")?;
    let record: VcsRecord =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("is not a VCS record: {e}")))?;
    if let Err(why) = record.check() {
        return Err(bad(format!("is not a valid VCS record: {why}")));
    }
    if record.base_commit.hex() != instance.base_commit {
        return Err(bad(format!(
            "is about commit {}, not the base commit of instance {} ({})",
            record.base_commit, instance.instance_id, instance.base_commit
        )));
    }
    Ok(record)
}

fn vcs_from_dir(dir: &Path, instance: &Instance, progress: &dyn Progress) -> Option<VcsRecord> {
    let git_dir = dir.join(".git");
    if !git_dir.exists() {
        return None;
    }
    let skip = |why: String| {
        progress.line(&format!(
            "note: no vcs.json: {why} (give --vcs FILE, or --no-vcs to silence this)"
        ));
        None
    };
    let head = crate::gitcmd::command()
        .arg("--git-dir")
        .arg(&git_dir)
        .args(["rev-parse", "--verify", "-q", "HEAD^{commit}"])
        .output();
    let head = match head {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => return skip(format!("`{}` is not a git repository", git_dir.display())),
    };
    if head != instance.base_commit {
        return skip(format!(
            "the HEAD of `{}` is {head}, not the base commit {}",
            dir.display(),
            instance.base_commit
        ));
    }
    match crate::vcs::record(&git_dir, &instance.base_commit) {
        Ok(r) => Some(r),
        Err(e) => skip(e.to_string()),
    }
}

/// A file given on the command line.
pub fn read(path: &Path, what: &'static str) -> Result<Vec<u8>, PackError> {
    std::fs::read(path).map_err(|source| PackError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}
