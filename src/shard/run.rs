//! `shard run`: one shard's steps in a local archive, written out as a shard file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::archive::{self, ExportOptions, Outcome, ShardOutcome, ShardStamp};
use crate::bundle::PackOptions;
use crate::context::Installer;
use crate::dataset::{DatasetDate, Instance, Selection};
use crate::digest::Sha256Digest;
use crate::manifest::Manifests;
use crate::plan::{self, Plan};
use crate::progress::Progress;
use crate::release::Snapshot;
use crate::store::Ark;
use crate::validate::{ManyOptions, ValidateError, ValidateOptions, Verdict};

use super::setup::{lock_contexts, mirror_repos};
use super::{Job, ShardError, ShardOf};

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
    let which = ShardOf {
        plan: opts.plan.id(),
        index: opts.index,
        shards: opts.plan.shards.len(),
    };
    let shard = opts.plan.shards.get(which.index).ok_or_else(|| {
        ShardError::Input(format!(
            "the plan has {} shard(s), numbered from 0: there is no shard {}",
            which.shards, which.index
        ))
    })?;
    let job = Job {
        root,
        manifests,
        opts,
        shard,
        which,
        say,
        progress,
    };
    // The destination is tried first: an unreachable one fails now, not after the work.
    let remote = open_destination(&opts.to, which)?;
    let ids: Vec<&str> = shard.instance_ids().collect();
    let mut ark =
        Ark::create(root).map_err(|e| which.step("opening the local archive")(e.into()))?;
    let seed = open_seed(opts, &ark)?;
    if let Some(seed) = &seed {
        seed_instances(&mut ark, seed, &ids)?;
    }
    // The planned instances are checked where the plan was made from: the seed, else here.
    // (Validation fills in the test lists of a kept instance published without them, so a
    // local archive that ran the shard before holds them changed.)
    check_instances(seed.as_ref().unwrap_or(&ark), shard, &ids, which.index)?;
    if let Some(how) = &opts.replay {
        drop(ark);
        return replay_shard(&job, seed.as_ref(), how, remote.as_ref());
    }

    // Mirrors and locks, once per repository and context; what fails is not run, with why.
    let mut not_run = mirror_repos(&job, &mut ark, seed.as_ref());
    lock_contexts(&job, &mut ark, seed.as_ref(), &mut not_run)?;
    drop(ark);
    let fetched = seed.as_ref().and_then(|s| s.bucket()).map(|b| b.fetched());
    drop(seed);

    validate_ready(&job, &ids, &mut not_run)?;

    // What became of each: the index's verdicts; the kept ones packed.
    let mut ark = Ark::open(root).map_err(|e| which.step("opening the local archive")(e.into()))?;
    let (mut outcomes, kept) = outcomes_of(&ark, &ids, &not_run, which)?;
    let snap = release_kept(&job, &mut ark, kept)?;
    let bundles: BTreeMap<&str, Sha256Digest> = snap
        .instances
        .iter()
        .map(|i| (i.instance_id.as_str(), i.bundle))
        .collect();
    for o in &mut outcomes {
        o.bundle = bundles.get(o.instance_id.as_str()).copied();
    }
    outcomes.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    let (file, bytes) = write_shard_file(&job, &ark, &snap, &outcomes, remote.as_ref())?;
    Ok(RunReport {
        plan: which.plan,
        index: which.index,
        shards: which.shards,
        file,
        bytes,
        outcomes,
        replays: Vec::new(),
        fetched,
    })
}

/// The destination reached (a bucket, listed) or made (a directory); the bucket, if it is one.
fn open_destination(to: &str, which: ShardOf) -> Result<Option<crate::remote::Remote>, ShardError> {
    if crate::remote::is_remote(to) {
        let r = crate::remote::Remote::open(to).map_err(|e| ShardError::Input(e.to_string()))?;
        r.list()
            .map_err(|e| which.step("reaching the destination")(e.into()))?;
        Ok(Some(r))
    } else {
        std::fs::create_dir_all(to).map_err(|source| ShardError::Destination {
            dir: PathBuf::from(to),
            source,
        })?;
        Ok(None)
    }
}

/// The seed archive (`--from`), opened read only, with the bucket `--store` names when its
/// configuration names none; what is fetched of it lands in `ark`.
fn open_seed(opts: &RunOptions, ark: &Ark) -> Result<Option<Ark>, ShardError> {
    let Some(p) = &opts.from else {
        return Ok(None);
    };
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
    Ok(Some(seed))
}

/// The shard's predictions replayed instead of built: the replay shard file written and
/// delivered.
fn replay_shard(
    job: &Job,
    seed: Option<&Ark>,
    how: &super::replay::ReplayShard,
    remote: Option<&crate::remote::Remote>,
) -> Result<RunReport, ShardError> {
    let ShardOf {
        plan,
        index,
        shards,
    } = job.which;
    let name = super::replay::file_name(&plan, index, shards, &how.run_id);
    let file = local_file(job.root, &job.opts.to, &name, remote.is_some())?;
    let written = super::replay::run(
        job.root,
        seed,
        job.shard,
        job.which,
        how,
        job.opts,
        &file,
        job.progress,
    )?;
    let bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    let shown = deliver(remote, &file, &name)
        .map_err(|e| job.which.step("uploading the shard file")(e.into()))?;
    Ok(RunReport {
        plan,
        index,
        shards,
        file: shown,
        bytes,
        outcomes: Vec::new(),
        replays: written.outcomes,
        fetched: seed.and_then(|s| s.bucket()).map(|b| b.fetched()),
    })
}

/// Validation of every instance ready for it (those validated before are left alone); the
/// instances that could not be validated are added to `not_run`, with why.
fn validate_ready(
    job: &Job,
    ids: &[&str],
    not_run: &mut BTreeMap<String, String>,
) -> Result<(), ShardError> {
    let (root, manifests, opts, progress) = (job.root, job.manifests, job.opts, job.progress);
    let step = |step: &'static str| job.which.step(step);
    let ready: Vec<String> = ids
        .iter()
        .filter(|i| !not_run.contains_key(**i))
        .map(|i| i.to_string())
        .collect();
    if ready.is_empty() {
        return Ok(());
    }
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
    Ok(())
}

/// What became of each instance of the shard (not run, with why; else the index's verdict),
/// in the shard's order, and the ids of the kept ones.
fn outcomes_of(
    ark: &Ark,
    ids: &[&str],
    not_run: &BTreeMap<String, String>,
    which: ShardOf,
) -> Result<(Vec<ShardOutcome>, Vec<String>), ShardError> {
    let verdicts: BTreeMap<String, (Verdict, String)> = ark
        .index()
        .validations()
        .map_err(|e| which.step("reading the local archive")(e.into()))?
        .into_iter()
        .map(|v| (v.instance_id, (v.verdict, v.reason)))
        .collect();
    let mut outcomes = Vec::new();
    let mut kept = Vec::new();
    for id in ids {
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
    Ok((outcomes, kept))
}

/// The shard's release: the `kept` instances packed and released (none kept, an empty one).
fn release_kept(job: &Job, ark: &mut Ark, kept: Vec<String>) -> Result<Snapshot, ShardError> {
    let ShardOf {
        plan,
        index,
        shards,
    } = job.which;
    let step = |step: &'static str| job.which.step(step);
    let name = archive::shard_release_name(&plan, index, shards);
    let snap = if kept.is_empty() {
        Snapshot::of_shard(&name, &[])
    } else {
        crate::pack::from_index(
            ark,
            job.manifests,
            &crate::pack::Validated::Ids(kept.clone()),
            false,
            &PackOptions::default(),
            job.progress,
        )
        .map_err(|e| step("packing")(e.into()))?;
        let released = crate::release::create(ark, &name, &crate::release::Selection::Ids(kept))
            .map_err(|e| step("making the shard's release")(e.into()))?;
        Snapshot::of_shard(&name, &released.instances)
    };
    snap.map_err(|e| step("making the shard's release")(e.into()))
}

/// The shard file: the release `snap` exported with the shard's stamp (its `outcomes`), and
/// delivered; where it is, to show, and its size.
fn write_shard_file(
    job: &Job,
    ark: &Ark,
    snap: &Snapshot,
    outcomes: &[ShardOutcome],
    remote: Option<&crate::remote::Remote>,
) -> Result<(String, u64), ShardError> {
    let ShardOf {
        plan,
        index,
        shards,
    } = job.which;
    let stamp = ShardStamp {
        plan,
        index,
        shards,
        instances_sha256: job.shard.instances_sha256,
        outcomes: outcomes.to_vec(),
    };
    let name = file_name(&plan, index, shards);
    let file = local_file(job.root, &job.opts.to, &name, remote.is_some())?;
    let exported = archive::export(
        ark,
        snap,
        &file,
        &ExportOptions {
            shard: Some(stamp),
            ..ExportOptions::default()
        },
        job.progress,
    )
    .map_err(|e| job.which.step("writing the shard file")(e.into()))?;
    let shown = deliver(remote, &file, &name)
        .map_err(|e| job.which.step("uploading the shard file")(e.into()))?;
    Ok((shown, exported.bytes))
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
