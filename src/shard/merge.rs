//! `merge`: shard files brought into one archive, each all or nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::archive::{self, ImportOptions, Outcome, ShardStamp};
use crate::digest::Sha256Digest;
use crate::plan::Plan;
use crate::progress::Progress;
use crate::store::Ark;
use crate::validate::Verdict;

use super::ShardError;

#[derive(Debug, Clone, Default)]
pub struct MergeOptions {
    /// The plan the shards are of: each file is checked against it, and what the archive
    /// still lacks of it is reported. Without it, the first file's plan is the reference.
    pub plan: Option<Plan>,
    /// Register a release of the kept instances (of the plan, with `plan`; of the files
    /// merged, without) under this name.
    pub release: Option<String>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct MergedShard {
    pub index: usize,
    /// A replay shard's run (its reports went to `runs/<run_id>/`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// A replay shard: the instances whose reports were added.
    pub replayed: usize,
    /// The file as given (a path, or an s3:// URL).
    pub file: String,
    pub kept: usize,
    pub not_kept: usize,
    pub not_run: usize,
    pub bundles_added: usize,
    pub bundles_present: usize,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct RefusedFile {
    pub file: String,
    pub reason: String,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct NotRun {
    pub shard: usize,
    pub instance_id: String,
    pub reason: String,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct MergeReport {
    /// The plan the shards are of (none when no file could be read).
    pub plan: Option<Sha256Digest>,
    pub shards: usize,
    pub merged: Vec<MergedShard>,
    pub refused: Vec<RefusedFile>,
    /// Shards of which no file was merged (with a plan: whose instances the archive still
    /// lacks).
    pub missing: Vec<usize>,
    /// Instances not run, with why: to run again (`shard run … --index K`).
    pub not_run: Vec<NotRun>,
    /// The release registered, with its root.
    pub release: Option<(String, Sha256Digest)>,
}

/// Merges the shard files `sources` (paths; `s3://…/NAME` URLs; `s3://…/PREFIX/`, every
/// shard file there) into the archive at `root` (created if needed).
pub fn merge(
    root: &Path,
    sources: &[String],
    opts: &MergeOptions,
    progress: &dyn Progress,
) -> Result<MergeReport, ShardError> {
    if sources.is_empty() {
        return Err(ShardError::Input("give at least one shard file".into()));
    }
    let mut refused = Vec::new();
    // Remote files are downloaded (and checked against their sha256) into the archive's
    // scratch space first; a directory this merge made is removed if nothing came of it.
    let created: Vec<PathBuf> = root
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
        .map(Path::to_path_buf)
        .collect();
    let scratch = if sources.iter().any(|s| crate::remote::is_remote(s)) {
        let tmp = crate::store::Layout::new(root).tmp();
        std::fs::create_dir_all(&tmp).map_err(|source| ShardError::Destination {
            dir: tmp.clone(),
            source,
        })?;
        Some(
            crate::fsutil::work_dir(&tmp, &format!("{}merge-", crate::fsutil::TEMP_PREFIX))
                .map_err(|source| ShardError::Destination { dir: tmp, source })?,
        )
    } else {
        None
    };
    let files = fetch(sources, scratch.as_ref().map(|d| d.path()), &mut refused);
    let report = merge_files(root, &files, opts, refused, progress);
    drop(scratch);
    let merged_any = report.as_ref().is_ok_and(|r| !r.merged.is_empty());
    if !merged_any {
        let _ = std::fs::remove_dir(crate::store::Layout::new(root).tmp());
        for dir in &created {
            let _ = std::fs::remove_dir(dir);
        }
    }
    report
}

/// The sources as local files, each with how it was given; what cannot be fetched is refused.
fn fetch(
    sources: &[String],
    scratch: Option<&Path>,
    refused: &mut Vec<RefusedFile>,
) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for source in sources {
        let Some(dir) = scratch.filter(|_| crate::remote::is_remote(source)) else {
            out.push((source.clone(), PathBuf::from(source)));
            continue;
        };
        let mut refuse = |file: String, reason: String| refused.push(RefusedFile { file, reason });
        // s3://…/NAME.ark is one file; anything else a prefix of shard files.
        let (base, one) = match source.strip_suffix(".ark") {
            Some(_) => {
                let (base, name) = source.rsplit_once('/').unwrap_or((source, ""));
                (format!("{base}/"), Some(name.to_string()))
            }
            None => (format!("{}/", source.trim_end_matches('/')), None),
        };
        let remote = match crate::remote::Remote::open(&base) {
            Ok(r) => r,
            Err(e) => {
                refuse(source.clone(), e.to_string());
                continue;
            }
        };
        let names = match one {
            Some(name) => vec![name],
            None => match remote.list() {
                Err(e) => {
                    refuse(source.clone(), e.to_string());
                    continue;
                }
                Ok(listed) => {
                    // A file without its .sha256 beside it did not finish uploading.
                    let (complete, unfinished): (Vec<String>, Vec<String>) = listed
                        .iter()
                        .filter(|n| n.ends_with(".ark"))
                        .cloned()
                        .partition(|n| {
                            listed.contains(&format!("{n}{}", crate::remote::HASH_SUFFIX))
                        });
                    if complete.is_empty() && unfinished.is_empty() {
                        refuse(source.clone(), "no shard file there".into());
                    }
                    for n in unfinished {
                        refuse(
                            remote.url(&n),
                            format!(
                                "its upload did not finish (no {n}{} beside it)",
                                crate::remote::HASH_SUFFIX
                            ),
                        );
                    }
                    complete
                }
            },
        };
        for name in names {
            let local = dir.join(&name);
            match remote.download(&name, &local) {
                Ok(_) => out.push((remote.url(&name), local)),
                Err(e) => refuse(remote.url(&name), e.to_string()),
            }
        }
    }
    out
}

/// A file to merge: as given (a path, or an s3:// URL), where it is here, and its stamp.
struct Given<S> {
    shown: String,
    path: PathBuf,
    stamp: S,
}

impl<S> Given<S> {
    fn new(shown: &str, path: &Path, stamp: S) -> Self {
        Given {
            shown: shown.to_string(),
            path: path.to_path_buf(),
            stamp,
        }
    }
}

type ReplayFile = Given<super::replay::ReplayStamp>;

fn refuse(refused: &mut Vec<RefusedFile>, file: &str, reason: String) {
    refused.push(RefusedFile {
        file: file.to_string(),
        reason,
    })
}

fn merge_files(
    root: &Path,
    files: &[(String, PathBuf)],
    opts: &MergeOptions,
    mut refused: Vec<RefusedFile>,
    progress: &dyn Progress,
) -> Result<MergeReport, ShardError> {
    // Each file's manifest, read alone, and checked against the plan.
    let (stamped, replays) = read_stamps(files, &mut refused);
    let plan_id = opts
        .plan
        .as_ref()
        .map(Plan::id)
        .or_else(|| stamped.first().map(|f| f.stamp.plan))
        .or_else(|| replays.first().map(|f| f.stamp.plan));
    let Some(plan_id) = plan_id else {
        return Ok(MergeReport {
            plan: None,
            shards: 0,
            merged: Vec::new(),
            refused,
            missing: Vec::new(),
            not_run: Vec::new(),
            release: None,
        });
    };
    let mut of_plan = Vec::new();
    for f in stamped {
        match against_plan(&f.stamp, plan_id, opts.plan.as_ref()) {
            Ok(()) => of_plan.push(f),
            Err(reason) => refuse(&mut refused, &f.shown, reason.to_string()),
        }
    }
    let shards = opts
        .plan
        .as_ref()
        .map(|p| p.shards.len())
        .or_else(|| of_plan.first().map(|f| f.stamp.shards))
        .or_else(|| replays.first().map(|f| f.stamp.shards))
        .unwrap_or(0);

    let accepted = without_conflicts(root, of_plan, &mut refused)?;
    let (mut merged, merged_stamps) = import_each(root, accepted, plan_id, &mut refused, progress);
    let (replay_not_run, replayed_shards) = merge_replays(
        root,
        &replays,
        (plan_id, opts.plan.as_ref()),
        &mut merged,
        &mut refused,
    );
    let (mut missing, mut not_run, kept) = if stamped_any(&merged_stamps, &replays) {
        completeness(root, opts.plan.as_ref(), shards, &merged_stamps)?
    } else {
        (Vec::new(), Vec::new(), Vec::new())
    };
    if !replays.is_empty() {
        missing.extend((0..shards).filter(|i| !replayed_shards.contains(i)));
        missing.sort_unstable();
        missing.dedup();
        not_run.extend(replay_not_run);
    }
    let release = match (&opts.release, kept.is_empty()) {
        (Some(name), false) => Some(register(root, name, kept)?),
        _ => None,
    };
    merged.sort_by_key(|m| m.index);
    Ok(MergeReport {
        plan: Some(plan_id),
        shards,
        merged,
        refused,
        missing,
        not_run,
        release,
    })
}

/// Each file's stamp, read alone: the build shard files' and the replay shard files'; a file
/// that is neither (or cannot be read) is refused.
fn read_stamps(
    files: &[(String, PathBuf)],
    refused: &mut Vec<RefusedFile>,
) -> (Vec<Given<ShardStamp>>, Vec<ReplayFile>) {
    let mut stamped = Vec::new();
    let mut replays = Vec::new();
    for (shown, f) in files {
        match super::replay::read_stamp(f) {
            Ok(Some(r)) => {
                replays.push(Given::new(shown, f, r));
                continue;
            }
            Ok(None) => {}
            Err(e) => {
                refuse(refused, shown, e.to_string());
                continue;
            }
        }
        match archive::read_file_manifest(f) {
            Err(e) => refuse(refused, shown, e.to_string()),
            Ok(m) => match m.shard {
                None => refuse(
                    refused,
                    shown,
                    "it is a release file, not a shard file (`swe-ark import-archive` takes it)"
                        .into(),
                ),
                Some(s) => stamped.push(Given::new(shown, f, s)),
            },
        }
    }
    (stamped, replays)
}

/// The files without a conflict: an instance with another bundle in another file, or in the
/// archive. A file with one is refused.
fn without_conflicts(
    root: &Path,
    of_plan: Vec<Given<ShardStamp>>,
    refused: &mut Vec<RefusedFile>,
) -> Result<Vec<Given<ShardStamp>>, ShardError> {
    let held = held_bundles(root)?;
    let mut claimed: BTreeMap<String, (Sha256Digest, String)> = BTreeMap::new();
    let mut accepted = Vec::new();
    for f in of_plan {
        let s = &f.stamp;
        let mut conflicts = Vec::new();
        for o in &s.outcomes {
            let Some(bundle) = o.bundle else { continue };
            if let Some((other, other_file)) = claimed.get(&o.instance_id)
                && *other != bundle
            {
                conflicts.push(format!(
                    "{} has bundle {bundle} here and {other} in `{other_file}`",
                    o.instance_id,
                ));
            }
            if let Some(ids) = held.get(&o.instance_id)
                && !ids.contains(&bundle)
            {
                conflicts.push(format!(
                    "{} has bundle {bundle} here; the archive holds {}",
                    o.instance_id,
                    ids.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        if !conflicts.is_empty() {
            refuse(
                refused,
                &f.shown,
                format!(
                    "shard {}: {} conflict(s), the same instance with two bundle ids: {}",
                    s.index,
                    conflicts.len(),
                    conflicts.join("; ")
                ),
            );
            continue;
        }
        for o in &s.outcomes {
            if let Some(bundle) = o.bundle {
                claimed.insert(o.instance_id.clone(), (bundle, f.shown.clone()));
            }
        }
        accepted.push(f);
    }
    Ok(accepted)
}

/// Each file imported whole, or not at all (refused): what was merged, and the stamps of the
/// files merged.
fn import_each(
    root: &Path,
    accepted: Vec<Given<ShardStamp>>,
    plan_id: Sha256Digest,
    refused: &mut Vec<RefusedFile>,
    progress: &dyn Progress,
) -> (Vec<MergedShard>, Vec<ShardStamp>) {
    let mut merged = Vec::new();
    let mut merged_stamps = Vec::new();
    for Given {
        shown,
        path,
        stamp: s,
    } in accepted
    {
        let import = archive::import(
            root,
            &path,
            &ImportOptions {
                expect_root: None,
                shard_of: Some(plan_id),
            },
            progress,
        );
        match import {
            Ok(r) => {
                let count = |k: Outcome| s.outcomes.iter().filter(|o| o.outcome == k).count();
                merged.push(MergedShard {
                    index: s.index,
                    run_id: None,
                    replayed: 0,
                    file: shown,
                    kept: count(Outcome::Kept),
                    not_kept: count(Outcome::NotKept),
                    not_run: count(Outcome::NotRun),
                    bundles_added: r.bundles_added,
                    bundles_present: r.bundles_present,
                });
                merged_stamps.push(s);
            }
            Err(e) => refuse(refused, &shown, e.to_string()),
        }
    }
    (merged, merged_stamps)
}

/// Replay shards: their reports added to their run, each file whole or not at all (refused),
/// each added to `merged`. The predictions not replayed, and the shards merged.
fn merge_replays(
    root: &Path,
    replays: &[ReplayFile],
    (plan_id, plan): (Sha256Digest, Option<&Plan>),
    merged: &mut Vec<MergedShard>,
    refused: &mut Vec<RefusedFile>,
) -> (Vec<NotRun>, BTreeSet<usize>) {
    let mut replay_not_run = Vec::new();
    let mut replayed_shards = BTreeSet::new();
    for Given {
        shown,
        path,
        stamp: r,
    } in replays
    {
        let checked = super::replay::against_plan(r, plan_id, plan)
            .and_then(|()| super::replay::merge(root, path, r));
        match checked {
            Ok(added) => {
                replayed_shards.insert(r.index);
                merged.push(MergedShard {
                    index: r.index,
                    run_id: Some(r.run_id.clone()),
                    replayed: added,
                    file: shown.clone(),
                    kept: 0,
                    not_kept: 0,
                    not_run: r.outcomes.iter().filter(|o| !o.replayed).count(),
                    bundles_added: 0,
                    bundles_present: 0,
                });
                replay_not_run.extend(r.outcomes.iter().filter(|o| !o.replayed).map(|o| NotRun {
                    shard: r.index,
                    instance_id: o.instance_id.clone(),
                    reason: format!("not replayed ({}): {}", o.model, o.reason),
                }));
            }
            Err(reason) => refuse(refused, shown, reason.to_string()),
        }
    }
    (replay_not_run, replayed_shards)
}

/// Whether the build shards' completeness is to be judged: there were build files, or no
/// replay file at all.
fn stamped_any(merged: &[ShardStamp], replays: &[ReplayFile]) -> bool {
    !merged.is_empty() || replays.is_empty()
}

/// A shard file that is not of the plan merged: why it is refused.
#[derive(Debug, thiserror::Error)]
enum NotOfPlan {
    #[error("it is shard {index} of plan {plan}; {reference} plan {expected}")]
    OtherPlan {
        index: usize,
        plan: Sha256Digest,
        /// What the plan merged comes from: `--plan`, or the first shard file.
        reference: &'static str,
        expected: Sha256Digest,
    },
    #[error("it says it is shard {index} of {shards}; the plan has {planned} shard(s)")]
    NoSuchShard {
        index: usize,
        shards: usize,
        planned: usize,
    },
    #[error(
        "its instances are not those the plan gives shard {index} ({listed} listed, {planned} \
         planned)"
    )]
    OtherInstances {
        index: usize,
        listed: usize,
        planned: usize,
    },
}

/// A stamp of the plan `plan_id` (and, given the plan, as it plans that shard).
fn against_plan(
    s: &ShardStamp,
    plan_id: Sha256Digest,
    plan: Option<&Plan>,
) -> Result<(), NotOfPlan> {
    if s.plan != plan_id {
        return Err(NotOfPlan::OtherPlan {
            index: s.index,
            plan: s.plan,
            reference: if plan.is_some() {
                "--plan is"
            } else {
                "the first shard file is of"
            },
            expected: plan_id,
        });
    }
    let Some(plan) = plan else { return Ok(()) };
    let Some(planned) = plan
        .shards
        .get(s.index)
        .filter(|_| s.shards == plan.shards.len())
    else {
        return Err(NotOfPlan::NoSuchShard {
            index: s.index,
            shards: s.shards,
            planned: plan.shards.len(),
        });
    };
    let listed: BTreeSet<&str> = s.outcomes.iter().map(|o| o.instance_id.as_str()).collect();
    let wanted: BTreeSet<&str> = planned.instance_ids().collect();
    if listed != wanted || s.instances_sha256 != planned.instances_sha256 {
        return Err(NotOfPlan::OtherInstances {
            index: s.index,
            listed: listed.len(),
            planned: wanted.len(),
        });
    }
    Ok(())
}

/// The error of an archive to merge into that cannot be read.
fn unreadable(root: &Path) -> impl Fn(Box<dyn std::error::Error + Send + Sync>) -> ShardError + '_ {
    move |e| ShardError::Input(format!("the archive `{}`: {e}", root.display()))
}

/// The bundles the archive at `root` holds, by instance (none when there is no archive yet).
fn held_bundles(root: &Path) -> Result<BTreeMap<String, BTreeSet<Sha256Digest>>, ShardError> {
    if !crate::store::Layout::new(root).index().is_file() {
        return Ok(BTreeMap::new());
    }
    let fail = unreadable(root);
    let ark = Ark::open(root).map_err(|e| fail(e.into()))?;
    let mut out: BTreeMap<String, BTreeSet<Sha256Digest>> = BTreeMap::new();
    for b in ark.index().bundles().map_err(|e| fail(e.into()))? {
        out.entry(b.instance_id).or_default().insert(b.id);
    }
    Ok(out)
}

type Completeness = (Vec<usize>, Vec<NotRun>, Vec<String>);

/// What is still missing: shards with no file merged, instances not run (with why), and the
/// kept instances a release takes. With the plan, judged on the archive (earlier merges
/// count); without it, on the files merged now.
fn completeness(
    root: &Path,
    plan: Option<&Plan>,
    shards: usize,
    stamps: &[ShardStamp],
) -> Result<Completeness, ShardError> {
    let reasons: BTreeMap<&str, (usize, &str)> = stamps
        .iter()
        .flat_map(|s| {
            s.outcomes
                .iter()
                .filter(|o| o.outcome == Outcome::NotRun)
                .map(move |o| (o.instance_id.as_str(), (s.index, o.reason.as_str())))
        })
        .collect();
    let merged: BTreeSet<usize> = stamps.iter().map(|s| s.index).collect();
    let Some(plan) = plan else {
        let missing = (0..shards).filter(|i| !merged.contains(i)).collect();
        let not_run = reasons
            .iter()
            .map(|(id, (shard, why))| NotRun {
                shard: *shard,
                instance_id: id.to_string(),
                reason: why.to_string(),
            })
            .collect();
        let kept = stamps
            .iter()
            .flat_map(|s| &s.outcomes)
            .filter(|o| o.outcome == Outcome::Kept)
            .map(|o| o.instance_id.clone())
            .collect();
        return Ok((missing, not_run, kept));
    };
    if !crate::store::Layout::new(root).index().is_file() {
        let missing = (0..plan.shards.len()).collect();
        return Ok((missing, Vec::new(), Vec::new()));
    }
    let fail = unreadable(root);
    let ark = Ark::open(root).map_err(|e| fail(e.into()))?;
    let verdicts: BTreeMap<String, Verdict> = ark
        .index()
        .validations()
        .map_err(|e| fail(e.into()))?
        .into_iter()
        .map(|v| (v.instance_id, v.verdict))
        .collect();
    let bundled: BTreeSet<String> = ark
        .index()
        .bundles()
        .map_err(|e| fail(e.into()))?
        .into_iter()
        .map(|b| b.instance_id)
        .collect();
    let (mut missing, mut not_run, mut kept) = (Vec::new(), Vec::new(), Vec::new());
    for s in &plan.shards {
        let mut lacking = false;
        for id in s.instance_ids() {
            match verdicts.get(id) {
                Some(Verdict::Kept) if bundled.contains(id) => kept.push(id.to_string()),
                Some(_) => {}
                None => {
                    lacking = true;
                    let reason = match reasons.get(id) {
                        Some((_, why)) => why.to_string(),
                        None if merged.contains(&s.index) => "not run".to_string(),
                        None => "no file of its shard was merged".to_string(),
                    };
                    not_run.push(NotRun {
                        shard: s.index,
                        instance_id: id.to_string(),
                        reason,
                    });
                }
            }
        }
        if lacking && !merged.contains(&s.index) {
            missing.push(s.index);
        }
    }
    Ok((missing, not_run, kept))
}

/// Registers release `name` of the `kept` instances (replacing an earlier one of that name:
/// a merge's release grows as shards come in).
fn register(
    root: &Path,
    name: &str,
    kept: Vec<String>,
) -> Result<(String, Sha256Digest), ShardError> {
    let step = |e: Box<dyn std::error::Error + Send + Sync>| ShardError::Merge {
        step: "registering the merged release",
        source: e,
    };
    let ark = Ark::open(root).map_err(|e| step(e.into()))?;
    let snap = crate::release::create(&ark, name, &crate::release::Selection::Ids(kept))
        .map_err(|e| step(e.into()))?;
    ark.register_release(name, &snap.to_bytes())
        .map_err(|e| step(e.into()))?;
    Ok((snap.name, snap.root))
}
