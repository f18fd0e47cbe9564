//! `shard run`: one shard's steps in a local archive, written out as a shard file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::archive::{self, ExportOptions, Outcome, ShardOutcome, ShardStamp};
use crate::bundle::PackOptions;
use crate::dataset::{DatasetDate, Instance, Selection};
use crate::digest::Sha256Digest;
use crate::env::build::Installer;
use crate::env::lock::LockOptions;
use crate::env::pylock::PyLock;
use crate::manifest::Manifests;
use crate::mirror::{Mirror, RepoName};
use crate::plan::{self, Plan};
use crate::progress::Progress;
use crate::release::Snapshot;
use crate::store::Ark;
use crate::validate::{ManyOptions, ValidateError, ValidateOptions, Verdict};

use super::ShardError;

/// How contexts the local archive has not locked are locked (`env lock`'s flags).
#[derive(Debug, Clone)]
pub struct LockSettings {
    pub index_url: String,
    pub allow_yanked: bool,
    pub installer: Installer,
    pub unconfined: bool,
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub plan: Plan,
    pub index: usize,
    /// The archive the plan was made from (read only): instances and mirrors come from it.
    pub from: Option<PathBuf>,
    /// The bucket that holds `from`'s objects and packs when its `config.toml` names none
    /// (`--store`): what the shard reads of them is fetched into this archive.
    pub store: Option<String>,
    /// Where the shard file goes: a directory, or `s3://BUCKET/PREFIX/`.
    pub to: String,
    /// What a repository with no mirror here or in `from` is fetched from (OWNER/NAME.git).
    pub git_base: String,
    pub lock: LockSettings,
    pub validate: ValidateOptions,
    /// Instances validated (or replayed) at once.
    pub jobs: usize,
    /// Replay these predictions instead of building (the seed, or this archive, holds the
    /// bundles).
    pub replay: Option<super::replay::ReplayShard>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct RunReport {
    pub plan: Sha256Digest,
    pub index: usize,
    pub shards: usize,
    /// The shard file written: its path, or its s3:// URL.
    pub file: String,
    pub bytes: u64,
    /// Every instance of the shard, by id (a build).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub outcomes: Vec<ShardOutcome>,
    /// Every prediction of the shard's instances (a replay).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replays: Vec<super::replay::Replayed>,
    /// What was fetched from the seed's bucket (objects, packs, mirrors), when it has one:
    /// (files, bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fetched: Option<(u64, u64)>,
}

impl RunReport {
    pub fn count(&self, outcome: Outcome) -> usize {
        self.outcomes
            .iter()
            .filter(|o| o.outcome == outcome)
            .count()
    }

    /// Instances (or predictions) that could not be run: to run again.
    pub fn not_run(&self) -> usize {
        self.count(Outcome::NotRun) + self.replays.iter().filter(|r| !r.replayed).count()
    }
}

/// The shard file's name: `shard-K-of-N-<plan id, 12 hex>.ark`.
pub fn file_name(plan: &Sha256Digest, index: usize, shards: usize) -> String {
    format!("{}.ark", archive::shard_release_name(plan, index, shards))
}

/// Runs shard `opts.index` of `opts.plan` in the archive at `root` (created if needed) and
/// writes its shard file into `opts.to`. Instances that could not be run (no mirror, a context
/// that does not lock, …) are in the file as not run, with the reason.
pub fn run(
    root: &Path,
    manifests: &Manifests,
    opts: &RunOptions,
    say: &dyn Fn(&str),
    progress: &dyn Progress,
) -> Result<RunReport, ShardError> {
    let plan_id = opts.plan.id();
    let index = opts.index;
    let shards = opts.plan.shards.len();
    let shard = opts.plan.shards.get(index).ok_or_else(|| {
        ShardError::Input(format!(
            "the plan has {shards} shard(s), numbered from 0: there is no shard {index}"
        ))
    })?;
    let step = |step: &'static str| {
        move |e: Box<dyn std::error::Error + Send + Sync>| ShardError::Step {
            plan: plan_id,
            index,
            step,
            source: e,
        }
    };
    // The destination is tried first: an unreachable one fails now, not after the work.
    let remote = if crate::remote::is_remote(&opts.to) {
        let r =
            crate::remote::Remote::open(&opts.to).map_err(|e| ShardError::Input(e.to_string()))?;
        r.list()
            .map_err(|e| step("reaching the destination")(e.into()))?;
        Some(r)
    } else {
        std::fs::create_dir_all(&opts.to).map_err(|source| ShardError::Destination {
            dir: PathBuf::from(&opts.to),
            source,
        })?;
        None
    };
    let ids: Vec<&str> = shard.instance_ids().collect();
    let mut ark = Ark::create(root).map_err(|e| step("opening the local archive")(e.into()))?;
    let seed = match &opts.from {
        Some(p) => {
            let bad = |e: crate::store::ArkError| {
                ShardError::Input(format!("the seed archive `{}`: {e}", p.display()))
            };
            let mut seed = Ark::open_read_only(p).map_err(bad)?;
            if seed.bucket().is_none()
                && let Some(url) = &opts.store
            {
                seed.use_store(url).map_err(bad)?;
            }
            // The seed is not written to: what is fetched of it lands here.
            seed.fetch_into(&ark.layout());
            Some(seed)
        }
        None => None,
    };
    if let Some(seed) = &seed {
        seed_instances(&mut ark, seed, &ids)?;
    }
    // The planned instances are checked where the plan was made from: the seed, else here.
    // (Validation fills in the test lists of a kept instance published without them, so a
    // local archive that ran the shard before holds them changed.)
    check_instances(seed.as_ref().unwrap_or(&ark), shard, &ids, index)?;
    if let Some(how) = &opts.replay {
        drop(ark);
        let name = super::replay::file_name(&plan_id, index, shards, &how.run_id);
        let file = local_file(root, &opts.to, &name, remote.is_some())?;
        let written = super::replay::run(
            root,
            seed.as_ref(),
            shard,
            (plan_id, index, shards),
            how,
            opts,
            &file,
            progress,
        )?;
        let bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        let shown = deliver(remote.as_ref(), &file, &name)
            .map_err(|e| step("uploading the shard file")(e.into()))?;
        return Ok(RunReport {
            plan: plan_id,
            index,
            shards,
            file: shown,
            bytes,
            outcomes: Vec::new(),
            replays: written.outcomes,
            fetched: seed.as_ref().and_then(|s| s.bucket()).map(|b| b.fetched()),
        });
    }

    // Mirrors and locks, once per repository and context; what fails is not run, with why.
    let mut not_run: BTreeMap<String, String> = BTreeMap::new();
    let repos: BTreeSet<&str> = shard.contexts.iter().map(|c| c.repo.as_str()).collect();
    for repo in repos {
        if let Err(why) = ensure_mirror(&mut ark, seed.as_ref(), repo, &opts.git_base, progress) {
            say(&format!("not run: {why}"));
            for c in shard.contexts.iter().filter(|c| c.repo == repo) {
                for i in &c.instances {
                    not_run.insert(i.clone(), why.clone());
                }
            }
        }
    }
    let locked: BTreeSet<(String, String)> = ark
        .index()
        .locks()
        .map_err(|e| step("reading the local archive")(e.into()))?
        .into_iter()
        .map(|l| (l.repo, l.version))
        .collect();
    for c in &shard.contexts {
        if c.instances.iter().any(|i| not_run.contains_key(i))
            || locked.contains(&(c.repo.clone(), c.version.clone()))
        {
            continue;
        }
        // The seed's lock when it has one (no network: its wheels come with it), else locked
        // here.
        let adopted = match &seed {
            Some(seed) => adopt_lock(&mut ark, seed, &c.repo, &c.version),
            None => Ok(false),
        };
        let done = match adopted {
            Ok(true) => {
                say(&format!(
                    "{} {}: the seed's lock, with its objects",
                    c.repo, c.version
                ));
                Ok(())
            }
            Ok(false) => {
                say(&format!("locking {} {}", c.repo, c.version));
                lock_context(&mut ark, manifests, &c.repo, &c.version, &opts.lock, say)
            }
            Err(why) => Err(why),
        };
        if let Err(why) = done {
            say(&format!("not run: {why}"));
            for i in &c.instances {
                not_run.insert(i.clone(), why.clone());
            }
        }
    }
    drop(ark);
    let fetched = seed.as_ref().and_then(|s| s.bucket()).map(|b| b.fetched());
    drop(seed);

    // Validation of every instance ready for it (those validated before are left alone).
    let ready: Vec<String> = ids
        .iter()
        .filter(|i| !not_run.contains_key(**i))
        .map(|i| i.to_string())
        .collect();
    if !ready.is_empty() {
        let many = ManyOptions {
            validate: opts.validate.clone(),
            jobs: opts.jobs,
            force: false,
        };
        let report = crate::validate::run_many(
            root,
            manifests,
            &Selection::ids(ready.clone()),
            &many,
            progress,
        )
        .map_err(|e| step("validating")(e.into()))?;
        for r in report.outcomes.iter().filter(|r| r.is_setup_problem()) {
            let kind = crate::verdict::reason_word(r.reason_kind);
            let first = r.reason.lines().next().unwrap_or_default();
            not_run.insert(r.instance_id.clone(), format!("{kind}: {first}"));
        }
        for e in report.errors {
            match e {
                ValidateError::Of { instance, source } => {
                    not_run.insert(instance, source.to_string());
                }
                other => return Err(step("validating")(other.into())),
            }
        }
    }

    // What became of each: the index's verdicts; the kept ones packed.
    let mut ark = Ark::open(root).map_err(|e| step("opening the local archive")(e.into()))?;
    let verdicts: BTreeMap<String, (Verdict, String)> = ark
        .index()
        .validations()
        .map_err(|e| step("reading the local archive")(e.into()))?
        .into_iter()
        .map(|v| (v.instance_id, (v.verdict, v.reason)))
        .collect();
    let mut outcomes = Vec::new();
    let mut kept = Vec::new();
    for id in &ids {
        let (outcome, reason) = match (not_run.get(*id), verdicts.get(*id)) {
            (Some(why), _) => (Outcome::NotRun, why.clone()),
            (None, Some((Verdict::Kept, _))) => {
                kept.push(id.to_string());
                (Outcome::Kept, String::new())
            }
            (None, Some((verdict, reason))) => (
                Outcome::NotKept,
                format!("{}: {}", verdict.as_str(), first_line(reason)),
            ),
            (None, None) => (
                Outcome::NotRun,
                "validation recorded no verdict".to_string(),
            ),
        };
        outcomes.push(ShardOutcome {
            instance_id: id.to_string(),
            outcome,
            bundle: None,
            reason,
        });
    }
    let name = archive::shard_release_name(&plan_id, index, shards);
    let snap = if kept.is_empty() {
        Snapshot::of_shard(&name, &[])
    } else {
        crate::pack::from_index(
            &mut ark,
            manifests,
            &crate::pack::Validated::Ids(kept.clone()),
            false,
            &PackOptions::default(),
            progress,
        )
        .map_err(|e| step("packing")(e.into()))?;
        let released = crate::release::create(&ark, &name, &crate::release::Selection::Ids(kept))
            .map_err(|e| step("making the shard's release")(e.into()))?;
        Snapshot::of_shard(&name, &released.instances)
    }
    .map_err(|e| step("making the shard's release")(e.into()))?;
    let bundles: BTreeMap<&str, Sha256Digest> = snap
        .instances
        .iter()
        .map(|i| (i.instance_id.as_str(), i.bundle))
        .collect();
    for o in &mut outcomes {
        o.bundle = bundles.get(o.instance_id.as_str()).copied();
    }
    outcomes.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    let stamp = ShardStamp {
        plan: plan_id,
        index,
        shards,
        instances_sha256: shard.instances_sha256,
        outcomes: outcomes.clone(),
    };
    let name = file_name(&plan_id, index, shards);
    let file = local_file(root, &opts.to, &name, remote.is_some())?;
    let exported = archive::export(
        &ark,
        &snap,
        &file,
        &ExportOptions {
            shard: Some(stamp),
            ..ExportOptions::default()
        },
        progress,
    )
    .map_err(|e| step("writing the shard file")(e.into()))?;
    let shown = deliver(remote.as_ref(), &file, &name)
        .map_err(|e| step("uploading the shard file")(e.into()))?;
    Ok(RunReport {
        plan: plan_id,
        index,
        shards,
        file: shown,
        bytes: exported.bytes,
        outcomes,
        replays: Vec::new(),
        fetched,
    })
}

/// Where the shard file is written: in the destination directory, or (for a bucket) in the
/// archive's scratch space until it is uploaded.
fn local_file(root: &Path, to: &str, name: &str, remote: bool) -> Result<PathBuf, ShardError> {
    if !remote {
        return Ok(Path::new(to).join(name));
    }
    let tmp = crate::store::Layout::new(root).tmp();
    std::fs::create_dir_all(&tmp).map_err(|source| ShardError::Destination {
        dir: tmp.clone(),
        source,
    })?;
    Ok(tmp.join(name))
}

/// The written file uploaded (and its local copy removed) when the destination is a bucket;
/// where it is, to show.
fn deliver(
    remote: Option<&crate::remote::Remote>,
    file: &Path,
    name: &str,
) -> Result<String, crate::remote::RemoteError> {
    match remote {
        Some(r) => {
            let sent = r.upload(file, name);
            let _ = std::fs::remove_file(file);
            sent?;
            Ok(r.url(name))
        }
        None => Ok(file.display().to_string()),
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}

/// The shard's instances the local archive lacks, copied from the seed with the dataset each
/// was imported from (its environments date decides what a lock resolves).
fn seed_instances(ark: &mut Ark, seed: &Ark, ids: &[&str]) -> Result<(), ShardError> {
    let read = |e: crate::store::IndexError| {
        ShardError::Input(format!("the seed archive `{}`: {e}", seed.root().display()))
    };
    let mut groups: BTreeMap<Option<String>, (Option<DatasetDate>, Vec<Instance>)> =
        BTreeMap::new();
    for id in ids {
        if ark
            .index()
            .instance(id)
            .map_err(|e| ShardError::Input(e.to_string()))?
            .is_some()
        {
            continue;
        }
        let Some(inst) = seed.index().instance(id).map_err(read)? else {
            continue;
        };
        let dataset = seed.index().dataset_of(id).map_err(read)?;
        let entry = groups
            .entry(dataset.as_ref().map(|d| d.name.clone()))
            .or_insert_with(|| (dataset, Vec::new()));
        entry.1.push(inst);
    }
    for (dataset, instances) in groups.into_values() {
        ark.index_mut()
            .import_instances(&instances, dataset.as_ref())
            .map_err(|e| ShardError::Input(format!("cannot record the shard's instances: {e}")))?;
    }
    Ok(())
}

/// Every instance of the shard is in `ark`, and they are the ones planned.
fn check_instances(
    ark: &Ark,
    shard: &plan::Shard,
    ids: &[&str],
    index: usize,
) -> Result<(), ShardError> {
    let mut held = Vec::new();
    let mut missing = Vec::new();
    for id in ids {
        match ark
            .index()
            .instance(id)
            .map_err(|e| ShardError::Input(e.to_string()))?
        {
            Some(i) => held.push(i),
            None => missing.push(*id),
        }
    }
    if !missing.is_empty() {
        return Err(ShardError::Input(format!(
            "{} instance(s) of shard {index} are not in the archive `{}`: {}; give --from \
             the archive the plan was made from",
            missing.len(),
            ark.root().display(),
            missing.join(", ")
        )));
    }
    let refs: Vec<&Instance> = held.iter().collect();
    let computed = plan::instances_sha256(&refs);
    if computed != shard.instances_sha256 {
        return Err(ShardError::Input(format!(
            "the instances of shard {index} hash to {computed} here; the plan says {}: they \
             changed after the plan was made (make the plan again, or run from the archive it \
             was made from)",
            shard.instances_sha256
        )));
    }
    Ok(())
}

/// The repository's mirror in the local archive: there already, or cloned from the seed's (its
/// directory, else its bucket's copy), or fetched from the git base.
fn ensure_mirror(
    ark: &mut Ark,
    seed: Option<&Ark>,
    repo: &str,
    git_base: &str,
    progress: &dyn Progress,
) -> Result<(), String> {
    let name = RepoName::parse(repo).ok_or_else(|| format!("`{repo}` is not OWNER/NAME"))?;
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
            .map_err(|e| format!("cannot mirror {repo} from the seed's bucket: {e}"))?
    {
        let m = Mirror::open(&here, &name)
            .map_err(|e| format!("cannot open the mirror of {repo}: {e}"))?;
        ark.record_mirror(&m)
            .map_err(|e| format!("cannot record the mirror of {repo}: {e}"))?;
        return Ok(());
    }
    let url = match seed_dir {
        Some(dir) => dir.to_string_lossy().into_owned(),
        None => format!("{}/{name}.git", git_base.trim_end_matches('/')),
    };
    let (m, _) = Mirror::add(&here, &name, &url, progress)
        .map_err(|e| format!("cannot mirror {repo} from {url}: {e}"))?;
    ark.record_mirror(&m)
        .map_err(|e| format!("cannot record the mirror of {repo}: {e}"))?;
    Ok(())
}

/// Copies the seed's newest lock of `repo` `version`, and every object it needs, into the
/// local archive; false when the seed has none.
fn adopt_lock(ark: &mut Ark, seed: &Ark, repo: &str, version: &str) -> Result<bool, String> {
    let fail =
        |e: &dyn std::fmt::Display| format!("taking the seed's lock of {repo} {version}: {e}");
    let Some(row) = seed
        .index()
        .locks()
        .map_err(|e| fail(&e))?
        .into_iter()
        .filter(|l| l.repo == repo && l.version == version)
        .max_by_key(|l| l.created_at)
    else {
        return Ok(false);
    };
    let bytes = seed.objects().get(&row.id).map_err(|e| fail(&e))?;
    let lock = PyLock::parse(&bytes).map_err(|e| fail(&e))?;
    let mut objects: Vec<(Sha256Digest, u64, &str)> = vec![(row.id, bytes.len() as u64, "lock")];
    objects.extend(lock.needed_objects().map_err(|e| fail(&e))?);
    let here = ark.objects();
    for (id, _, _) in &objects {
        if here.has(id) {
            continue;
        }
        let mut from = seed.objects().open(id).map_err(|e| fail(&e))?;
        here.put_checked(&mut from, Some(id))
            .map_err(|e| fail(&e))?;
    }
    ark.index_mut()
        .record_lock(&row, &objects)
        .map_err(|e| fail(&e))?;
    Ok(true)
}

/// Locks a context the local archive has no lock of.
fn lock_context(
    ark: &mut Ark,
    manifests: &Manifests,
    repo: &str,
    version: &str,
    settings: &LockSettings,
    say: &dyn Fn(&str),
) -> Result<(), String> {
    let context = manifests
        .context(repo, version)
        .map_err(|e| format!("{repo} {version}: {e}"))?;
    let opts = LockOptions {
        commit: None,
        python: None,
        index_url: settings.index_url.clone(),
        exclude_newer: None,
        pack_python: true,
        allow_yanked: settings.allow_yanked,
        installer: settings.installer,
        unconfined: settings.unconfined,
    };
    crate::env::lock::lock(ark, &context, &opts, say)
        .map(|_| ())
        .map_err(|e| format!("locking {repo} {version} failed: {e}"))
}
