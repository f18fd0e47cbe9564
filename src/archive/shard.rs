//! A **shard file** (docs/DISTRIBUTED.md): the archive file of one shard of a plan. It is a
//! version 2 file whose manifest carries a [`ShardStamp`]: the plan it is of (by the plan
//! file's sha256), the shard's index, and what became of every instance of the shard. Its
//! release holds the instances validation kept; its index slice also holds the shard's other
//! instances and the validations of those that ran, so that a merged archive knows them.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::dataset::{Instance, InstanceError};
use crate::digest::Sha256Digest;
use crate::release::Snapshot;

use super::slice::IndexSlice;

/// What a shard file says of itself, in its manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardStamp {
    /// The plan's id: the sha256 of its file.
    pub plan: Sha256Digest,
    pub index: usize,
    /// How many shards the plan has.
    pub shards: usize,
    /// The sha256 of the shard's instances as the plan names them
    /// (`plan::instances_sha256`), which the worker checked before it ran them. The index
    /// slice carries them as validation left them (a kept instance published without test
    /// lists gets the lists it proved), so they may hash otherwise.
    pub instances_sha256: Sha256Digest,
    /// Every instance of the shard, by id.
    pub outcomes: Vec<ShardOutcome>,
}

/// What became of one instance of a shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardOutcome {
    pub instance_id: String,
    pub outcome: Outcome,
    /// The bundle of a kept instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<Sha256Digest>,
    /// Why it was not kept or not run ('' when kept).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Validated, kept and packed: in the release.
    Kept,
    /// Validated and not kept: its validation is in the index slice.
    NotKept,
    /// Not run (its context could not be locked, its mirror is missing, …): run it again.
    NotRun,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Kept => "kept",
            Outcome::NotKept => "not kept",
            Outcome::NotRun => "not run",
        }
    }
}

impl ShardStamp {
    /// The instances the stamp lists that are not in the release (not kept, not run).
    pub(crate) fn others(&self) -> BTreeSet<&str> {
        self.outcomes
            .iter()
            .filter(|o| o.outcome != Outcome::Kept)
            .map(|o| o.instance_id.as_str())
            .collect()
    }
}

/// The release name of shard `index` of plan `plan`.
pub fn release_name(plan: &Sha256Digest, index: usize, shards: usize) -> String {
    format!("shard-{index}-of-{shards}-{}", &plan.hex()[..12])
}

/// How a shard file's stamp disagrees with its release or index slice.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ShardMismatch {
    #[error("it says it is shard {index} of a plan of {shards} shard(s)")]
    IndexOutOfRange { index: usize, shards: usize },
    #[error("its release is named {release}, not as shard {index} of plan {plan} is")]
    ReleaseName {
        release: String,
        index: usize,
        plan: Sha256Digest,
    },
    #[error("it lists instance {0} twice")]
    InstanceTwice(String),
    #[error(
        "instance {instance} is {} and {} a bundle",
        outcome.as_str(),
        if *names_bundle { "names" } else { "names no" }
    )]
    BundleOfOutcome {
        instance: String,
        outcome: Outcome,
        names_bundle: bool,
    },
    #[error("it says {kept} instance(s) were kept; its release holds {released} ({difference})")]
    KeptNotReleased {
        kept: usize,
        released: usize,
        difference: String,
    },
    #[error("its index holds an instance that is not valid: {0}")]
    BadInstance(#[source] InstanceError),
    #[error(
        "its index carries other instances than its shard lists (missing: {missing:?}, \
         not listed: {extra:?})"
    )]
    OtherInstances {
        missing: Vec<String>,
        extra: Vec<String>,
    },
    #[error(
        "instance {instance} is {} and its index {} a validation of it",
        outcome.as_str(),
        if *validated { "holds" } else { "holds no" }
    )]
    ValidationOfOutcome {
        instance: String,
        outcome: Outcome,
        validated: bool,
    },
}

/// The stamp agrees with the release and the index slice: every instance once; the kept ones
/// exactly the release's, with its bundles; the index slice carries every instance of the
/// shard and a validation of exactly the instances that ran.
pub(crate) fn check(
    stamp: &ShardStamp,
    snapshot: &Snapshot,
    slice: &IndexSlice,
) -> Result<(), ShardMismatch> {
    if stamp.index >= stamp.shards {
        return Err(ShardMismatch::IndexOutOfRange {
            index: stamp.index,
            shards: stamp.shards,
        });
    }
    if snapshot.name != release_name(&stamp.plan, stamp.index, stamp.shards) {
        return Err(ShardMismatch::ReleaseName {
            release: snapshot.name.clone(),
            index: stamp.index,
            plan: stamp.plan,
        });
    }
    let mut outcomes = BTreeMap::new();
    for o in &stamp.outcomes {
        if outcomes.insert(o.instance_id.as_str(), o).is_some() {
            return Err(ShardMismatch::InstanceTwice(o.instance_id.clone()));
        }
        if (o.outcome == Outcome::Kept) != o.bundle.is_some() {
            return Err(ShardMismatch::BundleOfOutcome {
                instance: o.instance_id.clone(),
                outcome: o.outcome,
                names_bundle: o.bundle.is_some(),
            });
        }
    }
    let kept: BTreeMap<&str, Sha256Digest> = stamp
        .outcomes
        .iter()
        .filter_map(|o| Some((o.instance_id.as_str(), o.bundle?)))
        .collect();
    let released: BTreeMap<&str, Sha256Digest> = snapshot
        .instances
        .iter()
        .map(|i| (i.instance_id.as_str(), i.bundle))
        .collect();
    if kept != released {
        return Err(ShardMismatch::KeptNotReleased {
            kept: kept.len(),
            released: released.len(),
            difference: first_difference(&kept, &released),
        });
    }
    let mut ids = BTreeSet::new();
    for v in &slice.instances {
        let inst = Instance::from_value(v.clone()).map_err(ShardMismatch::BadInstance)?;
        ids.insert(inst.instance_id);
    }
    let listed: BTreeSet<String> = outcomes.keys().map(|s| s.to_string()).collect();
    if ids != listed {
        return Err(ShardMismatch::OtherInstances {
            missing: listed.difference(&ids).cloned().collect(),
            extra: ids.difference(&listed).cloned().collect(),
        });
    }
    let validated: BTreeSet<&str> = slice
        .validations
        .iter()
        .map(|v| v.instance_id.as_str())
        .collect();
    for o in &stamp.outcomes {
        let has = validated.contains(o.instance_id.as_str());
        let should = o.outcome != Outcome::NotRun;
        if has != should {
            return Err(ShardMismatch::ValidationOfOutcome {
                instance: o.instance_id.clone(),
                outcome: o.outcome,
                validated: has,
            });
        }
    }
    Ok(())
}

fn first_difference(a: &BTreeMap<&str, Sha256Digest>, b: &BTreeMap<&str, Sha256Digest>) -> String {
    for (id, bundle) in a {
        match b.get(id) {
            None => return format!("{id} is not in the release"),
            Some(other) if other != bundle => {
                return format!("{id}: bundle {bundle} in the list, {other} in the release");
            }
            _ => {}
        }
    }
    match b.keys().find(|id| !a.contains_key(*id)) {
        Some(id) => format!("{id} is in the release, not listed as kept"),
        None => "no difference".into(),
    }
}
