//! A **replay shard** (docs/DISTRIBUTED.md): the predictions of one shard of a plan replayed
//! on a machine of its own (`shard run … --predictions FILE --run-id R`), written as one
//! file, and merged into run R of another archive, which then has the run report a replay on
//! one machine gives.
//!
//! The file is a tar in swe-ark's one layout (`bundle::TarWriter`): first
//! `swe-ark-replay-shard.json` (a [`ReplayStamp`]: the plan and shard, the run, what became of
//! each prediction, and every other member's path, size and sha256), then the replayed
//! instances' files, `runs/<run>/<model>/<instance>/…`, as the replay wrote them.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufReader, Read, Write};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::bundle::{MemberKind, PackOptions, TarWriter};
use crate::dataset::Selection;
use crate::digest::{Sha256Digest, Sha256Hasher};
use crate::plan::Plan;
use crate::progress::Progress;
use crate::replay::{self, Prediction, Predictions, ReplayOptions};
use crate::store::{Ark, Layout};

use super::{ShardError, ShardOf};

/// The first member of a replay shard file.
pub const STAMP: &str = "swe-ark-replay-shard.json";
pub const FORMAT: &str = "swe-ark-replay-shard";
pub const VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayStamp {
    pub format: String,
    pub version: u32,
    /// The plan's id (the sha256 of its file), the shard, and the planned instances' sha256.
    pub plan: Sha256Digest,
    pub index: usize,
    pub shards: usize,
    pub instances_sha256: Sha256Digest,
    /// The replay run the files belong to (`runs/<run_id>/`).
    pub run_id: String,
    /// Every prediction of the shard's instances, by instance and model.
    pub outcomes: Vec<Replayed>,
    /// Every member after the stamp, in order.
    pub members: Vec<Member>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replayed {
    pub instance_id: String,
    pub model: String,
    /// Whether its report was written (resolved or not: the report says).
    pub replayed: bool,
    /// Why it was not.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Member {
    pub path: String,
    pub size: u64,
    pub sha256: Sha256Digest,
}

/// What the replay of a shard needs beside the plan.
#[derive(Debug, Clone)]
pub struct ReplayShard {
    pub predictions: PathBuf,
    pub run_id: String,
    pub grading: crate::logparse::Grading,
}

/// The replay shard file's name.
pub fn file_name(plan: &Sha256Digest, index: usize, shards: usize, run_id: &str) -> String {
    format!(
        "{}-replay-{run_id}.ark",
        crate::archive::shard_release_name(plan, index, shards)
    )
}

pub(super) struct Written {
    pub outcomes: Vec<Replayed>,
}

/// Replays the shard's predictions in the archive at `root` (bundles from `seed`, else from
/// `root`'s own index) and writes the replay shard file at `out`.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    root: &Path,
    seed: Option<&Ark>,
    shard: &crate::plan::Shard,
    which: ShardOf,
    how: &ReplayShard,
    opts: &super::RunOptions,
    out: &Path,
    progress: &dyn Progress,
) -> Result<Written, ShardError> {
    let step = |step: &'static str| which.step(step);
    if !replay::valid_run_id(&how.run_id) {
        return Err(ShardError::Input(format!(
            "`{}` is not a run id (letters, digits, `-`, `_`, `.`)",
            how.run_id
        )));
    }
    let all = replay::predictions::read(&how.predictions)
        .map_err(|e| ShardError::Input(format!("`{}`: {e}", how.predictions.display())))?;
    let mine: Vec<_> = all
        .into_iter()
        .filter(|p| shard.instance_ids().any(|i| i == p.instance_id))
        .collect();
    // The bundles: from the seed, written out as files into scratch space; else the local
    // archive's own.
    let tmp = Layout::new(root).tmp();
    fs::create_dir_all(&tmp).map_err(|e| step("making scratch space")(e.into()))?;
    let scratch = crate::fsutil::work_dir(&tmp, &format!("{}replay-", crate::fsutil::TEMP_PREFIX))
        .map_err(|e| step("making scratch space")(e.into()))?;
    let (bundles, with_bundle, reasons) = match seed {
        Some(seed) => seed_bundles(seed, &mine, scratch.path(), which)?,
        None => (
            Vec::new(),
            mine.iter().map(|p| p.instance_id.clone()).collect(),
            BTreeMap::new(),
        ),
    };
    let mut failures: BTreeMap<String, String> = BTreeMap::new();
    if !with_bundle.is_empty() {
        let report = replay::run(
            root,
            &ReplayOptions {
                predictions: Predictions::File(how.predictions.clone()),
                run_id: Some(how.run_id.clone()),
                objects: seed.map(Ark::objects),
                bundles,
                selection: Selection::ids(with_bundle),
                jobs: opts.jobs,
                force: false,
                run: opts.validate.run.clone(),
                grading: how.grading,
            },
            progress,
        )
        .map_err(|e| step("replaying")(e.into()))?;
        for f in report.failures {
            if let replay::ReplayError::Of { instance, source } = &f {
                failures.insert(instance.clone(), source.to_string());
            }
        }
    }
    drop(scratch);

    let why_not = |id: &str| {
        failures
            .get(id)
            .or(reasons.get(id))
            .cloned()
            .unwrap_or_else(|| "no report was written".into())
    };
    let (outcomes, files) = outcomes_and_files(root, &how.run_id, &mine, &why_not, which)?;
    let stamp = ReplayStamp {
        format: FORMAT.into(),
        version: VERSION,
        plan: which.plan,
        index: which.index,
        shards: which.shards,
        instances_sha256: shard.instances_sha256,
        run_id: how.run_id.clone(),
        outcomes: outcomes.clone(),
        members: members_of(&files, which)?,
    };
    write_file(out, &stamp, &files).map_err(|e| step("writing the shard file")(e.into()))?;
    Ok(Written { outcomes })
}

/// The bundle files a replay reads, the instances they are of, and why each other instance is
/// not replayed.
type SeedBundles = (Vec<PathBuf>, Vec<String>, BTreeMap<String, String>);

/// Each file of a run: its path under the archive, and where it is.
type RunFiles = Vec<(String, PathBuf)>;

/// The bundles of the predicted instances, from the seed's index, written as files into
/// `scratch`; the instances that have one; why the others are not replayed.
fn seed_bundles(
    seed: &Ark,
    mine: &[Prediction],
    scratch: &Path,
    which: ShardOf,
) -> Result<SeedBundles, ShardError> {
    let mut reasons: BTreeMap<String, String> = BTreeMap::new();
    let mut bundles = Vec::new();
    let mut with_bundle = Vec::new();
    let mut ids: Vec<&str> = mine.iter().map(|p| p.instance_id.as_str()).collect();
    ids.sort();
    ids.dedup();
    for id in ids {
        let rows = seed
            .index()
            .bundles_of_instance(id)
            .map_err(|e| which.step("reading the seed")(e.into()))?;
        match rows.first() {
            Some(row) => {
                let path = seed
                    .export_bundle(row, scratch, &PackOptions::default())
                    .map_err(|e| which.step("reading the seed's bundles")(e.into()))?;
                bundles.push(path);
                with_bundle.push(id.to_string());
            }
            None => {
                reasons.insert(id.to_string(), "the seed holds no bundle of it".into());
            }
        }
    }
    Ok((bundles, with_bundle, reasons))
}

/// What became of each prediction (sorted by instance and model; `why_not` says why one was
/// not replayed), and the files of those replayed: (path under `root`, path), sorted.
fn outcomes_and_files(
    root: &Path,
    run_id: &str,
    mine: &[Prediction],
    why_not: &dyn Fn(&str) -> String,
    which: ShardOf,
) -> Result<(Vec<Replayed>, RunFiles), ShardError> {
    let runs = Layout::new(root).runs();
    let mut outcomes = Vec::new();
    let mut files: RunFiles = Vec::new();
    for p in mine {
        let dir = replay::instance_dir(&runs, run_id, &p.model, &p.instance_id);
        let replayed = dir.join("report.json").is_file();
        let reason = if replayed {
            String::new()
        } else {
            why_not(&p.instance_id)
        };
        if replayed {
            for f in files_under(&dir).map_err(|e| which.step("reading the run")(e.into()))? {
                let rel = f
                    .strip_prefix(root)
                    .unwrap_or(&f)
                    .to_string_lossy()
                    .into_owned();
                files.push((rel, f));
            }
        }
        outcomes.push(Replayed {
            instance_id: p.instance_id.clone(),
            model: p.model.clone(),
            replayed,
            reason,
        });
    }
    outcomes.sort_by(|a, b| (&a.instance_id, &a.model).cmp(&(&b.instance_id, &b.model)));
    files.sort();
    Ok((outcomes, files))
}

/// The stamp's list of the members: each file's path, size and sha256.
fn members_of(files: &[(String, PathBuf)], which: ShardOf) -> Result<Vec<Member>, ShardError> {
    let mut members = Vec::new();
    for (rel, path) in files {
        let bytes = fs::read(path).map_err(|e| which.step("reading the run")(e.into()))?;
        members.push(Member {
            path: rel.clone(),
            size: bytes.len() as u64,
            sha256: Sha256Digest::of(&bytes),
        });
    }
    Ok(members)
}

/// The regular files under `dir`, sorted.
fn files_under(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let t = e.file_type()?;
        if t.is_dir() {
            out.extend(files_under(&e.path())?);
        } else if t.is_file() {
            out.push(e.path());
        }
    }
    Ok(out)
}

/// Writes the file at `out`: under a temporary name beside it, then renamed.
fn write_file(out: &Path, stamp: &ReplayStamp, files: &[(String, PathBuf)]) -> std::io::Result<()> {
    let dir = crate::fsutil::parent_dir(out);
    let tmp = crate::fsutil::temp_file_in(dir)?;
    {
        let mut w = TarWriter::new(std::io::BufWriter::new(tmp.as_file()));
        let mut json = serde_json::to_vec_pretty(stamp).map_err(std::io::Error::other)?;
        json.push(b'\n');
        w.append(
            STAMP.as_bytes(),
            MemberKind::File,
            json.len() as u64,
            b"",
            &mut &json[..],
        )?;
        for ((rel, path), m) in files.iter().zip(&stamp.members) {
            let mut f = File::open(path)?;
            w.append(rel.as_bytes(), MemberKind::File, m.size, b"", &mut f)?;
        }
        let mut inner = w.finish()?;
        inner.flush()?;
    }
    tmp.as_file().sync_all()?;
    crate::fsutil::persist(tmp, out)
}

/// A replay shard file that cannot be read, is not of the plan, or cannot be merged: why it is
/// refused.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReplayFileError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{STAMP} cannot be read: {0}")]
    StampUnreadable(#[source] std::io::Error),
    #[error("{STAMP} is not valid: {0}")]
    StampInvalid(#[source] serde_json::Error),
    #[error("it is {format} version {version}; this swe-ark reads {FORMAT} version {VERSION}")]
    Format { format: String, version: u32 },
    #[error("it is a replay of shard {index} of plan {plan}, not of plan {expected}")]
    OtherPlan {
        index: usize,
        plan: Sha256Digest,
        expected: Sha256Digest,
    },
    #[error("it says it is shard {index} of {shards} with instances the plan does not give it")]
    NotPlanned { index: usize, shards: usize },
    #[error("`{0}` is not a run id")]
    BadRunId(String),
    #[error("member `{path}` is not a file of run {run_id}")]
    OutsideRun { path: String, run_id: String },
    #[error("{}: {source}", path.display())]
    At {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{} instance(s) of run {run_id} have other reports here: {}",
        dirs.len(),
        dirs.join(", ")
    )]
    Conflicts { run_id: String, dirs: Vec<String> },
    #[error(transparent)]
    Summary(#[from] replay::ReplayError),
    #[error("it is damaged before `{path}`: {source}")]
    Damaged {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("it ends before `{path}`: it is truncated")]
    Truncated { path: String },
    #[error("`{found}` comes where its stamp lists `{listed}`")]
    OutOfOrder { found: String, listed: String },
    #[error("`{path}` cannot be read: {source}")]
    MemberUnreadable {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "`{path}` is {size} bytes hashing to {sha256}; its stamp says {listed_size} bytes, \
         {listed_sha256}: it was altered or cut short"
    )]
    Altered {
        path: String,
        size: u64,
        sha256: Sha256Digest,
        listed_size: u64,
        listed_sha256: Sha256Digest,
    },
    #[error("it holds `{0}`, which its stamp does not list")]
    Unlisted(String),
}

/// The stamp of a replay shard file, or `None` when the file is something else.
pub(super) fn read_stamp(path: &Path) -> Result<Option<ReplayStamp>, ReplayFileError> {
    let f = File::open(path)?;
    let mut archive = tar::Archive::new(BufReader::new(f));
    let mut entries = archive.entries()?;
    let Some(Ok(mut first)) = entries.next() else {
        return Ok(None);
    };
    if first.path_bytes().as_ref() != STAMP.as_bytes() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    first
        .by_ref()
        .take(64 << 20)
        .read_to_end(&mut bytes)
        .map_err(ReplayFileError::StampUnreadable)?;
    let stamp: ReplayStamp =
        serde_json::from_slice(&bytes).map_err(ReplayFileError::StampInvalid)?;
    if stamp.format != FORMAT || stamp.version != VERSION {
        return Err(ReplayFileError::Format {
            format: stamp.format,
            version: stamp.version,
        });
    }
    Ok(Some(stamp))
}

/// The stamp agrees with the plan (when given): its shard, its instances.
pub(super) fn against_plan(
    s: &ReplayStamp,
    plan_id: Sha256Digest,
    plan: Option<&Plan>,
) -> Result<(), ReplayFileError> {
    if s.plan != plan_id {
        return Err(ReplayFileError::OtherPlan {
            index: s.index,
            plan: s.plan,
            expected: plan_id,
        });
    }
    if let Some(plan) = plan {
        let planned = plan
            .shards
            .get(s.index)
            .filter(|_| s.shards == plan.shards.len());
        let ok = planned.is_some_and(|p| {
            p.instances_sha256 == s.instances_sha256
                && s.outcomes
                    .iter()
                    .all(|o| p.instance_ids().any(|i| i == o.instance_id))
        });
        if !ok {
            return Err(ReplayFileError::NotPlanned {
                index: s.index,
                shards: s.shards,
            });
        }
    }
    Ok(())
}

/// Merges a checked replay shard file into run `stamp.run_id` of the archive at `root`: its
/// files staged and checked member by member, refused whole on a conflict (another report
/// of an instance already there), then moved in and the run's reports written again.
/// Returns how many instances were added.
pub(super) fn merge(
    root: &Path,
    file: &Path,
    stamp: &ReplayStamp,
) -> Result<usize, ReplayFileError> {
    if !replay::valid_run_id(&stamp.run_id) {
        return Err(ReplayFileError::BadRunId(stamp.run_id.clone()));
    }
    let prefix = format!("runs/{}/", stamp.run_id);
    for m in &stamp.members {
        let rel = Path::new(&m.path);
        let safe = m.path.starts_with(&prefix)
            && rel.components().count() >= 5
            && rel.components().all(|c| matches!(c, Component::Normal(_)));
        if !safe {
            return Err(ReplayFileError::OutsideRun {
                path: m.path.clone(),
                run_id: stamp.run_id.clone(),
            });
        }
    }
    let tmp = Layout::new(root).tmp();
    let at = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ReplayFileError::At { path, source }
    };
    fs::create_dir_all(&tmp).map_err(at(&tmp))?;
    let staging = crate::fsutil::work_dir(
        &tmp,
        &format!("{}merge-replay-", crate::fsutil::TEMP_PREFIX),
    )
    .map_err(at(&tmp))?;
    stage(file, stamp, staging.path())?;
    let new = new_instances(root, stamp, staging.path())?;
    for d in &new {
        let to = root.join(d);
        let parent = crate::fsutil::parent_dir(&to);
        fs::create_dir_all(parent).map_err(at(parent))?;
        fs::rename(staging.path().join(d), &to).map_err(at(&to))?;
    }
    replay::summarize_run(root, &stamp.run_id)?;
    Ok(new.len())
}

/// The instances' directories (`runs/<run>/<model>/<instance>`) staged that are new here; one
/// the same as here was merged before; one that differs is a conflict, and refuses the file.
fn new_instances(
    root: &Path,
    stamp: &ReplayStamp,
    staging: &Path,
) -> Result<Vec<PathBuf>, ReplayFileError> {
    let mut dirs: Vec<PathBuf> = stamp
        .members
        .iter()
        .filter_map(|m| {
            let c: Vec<&str> = m.path.split('/').collect();
            (c.len() >= 5).then(|| PathBuf::from(c[..4].join("/")))
        })
        .collect();
    dirs.dedup();
    let mut new = Vec::new();
    let mut conflicts = Vec::new();
    for d in dirs {
        let here = root.join(&d);
        if !here.exists() {
            new.push(d);
            continue;
        }
        let staged_files = files_under(&staging.join(&d))?;
        let same = staged_files.iter().all(|f| {
            let rel = f.strip_prefix(staging).unwrap_or(f);
            fs::read(root.join(rel)).ok() == fs::read(f).ok()
        });
        if !same {
            conflicts.push(d.display().to_string());
        }
    }
    if !conflicts.is_empty() {
        return Err(ReplayFileError::Conflicts {
            run_id: stamp.run_id.clone(),
            dirs: conflicts,
        });
    }
    Ok(new)
}

/// Every member after the stamp, as listed, copied under `staging` and checked.
fn stage(file: &Path, stamp: &ReplayStamp, staging: &Path) -> Result<(), ReplayFileError> {
    let f = File::open(file)?;
    let mut archive = tar::Archive::new(BufReader::new(f));
    let mut entries = archive.entries()?;
    entries.next();
    for m in &stamp.members {
        let mut entry = match entries.next() {
            Some(Ok(e)) => e,
            Some(Err(source)) => {
                return Err(ReplayFileError::Damaged {
                    path: m.path.clone(),
                    source,
                });
            }
            None => {
                return Err(ReplayFileError::Truncated {
                    path: m.path.clone(),
                });
            }
        };
        if entry.path_bytes().as_ref() != m.path.as_bytes() {
            return Err(ReplayFileError::OutOfOrder {
                found: String::from_utf8_lossy(&entry.path_bytes()).into_owned(),
                listed: m.path.clone(),
            });
        }
        let dest = staging.join(&m.path);
        fs::create_dir_all(crate::fsutil::parent_dir(&dest))?;
        let mut out = File::create(&dest)?;
        let mut h = Sha256Hasher::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0u64;
        loop {
            let k = entry
                .read(&mut buf)
                .map_err(|source| ReplayFileError::MemberUnreadable {
                    path: m.path.clone(),
                    source,
                })?;
            if k == 0 {
                break;
            }
            h.update(&buf[..k]);
            out.write_all(&buf[..k])?;
            n += k as u64;
        }
        let sha = h.finish();
        if n != m.size || sha != m.sha256 {
            return Err(ReplayFileError::Altered {
                path: m.path.clone(),
                size: n,
                sha256: sha,
                listed_size: m.size,
                listed_sha256: m.sha256,
            });
        }
    }
    if let Some(Ok(extra)) = entries.next() {
        return Err(ReplayFileError::Unlisted(
            String::from_utf8_lossy(&extra.path_bytes()).into_owned(),
        ));
    }
    Ok(())
}
