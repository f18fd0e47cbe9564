//! Splitting work over many machines (docs/DISTRIBUTED.md): a **plan** cuts a set of instances
//! into N shards, deterministically. The instances of one (repository, version) stay in one
//! shard, so that their context is locked once; shards are balanced by an estimate of their
//! cost: the test durations validation recorded, when known, else the number of instances.
//! The plan names its inputs by hash, so that a shard's results can be matched to it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::dataset::Instance;
use crate::digest::Sha256Digest;

/// The `format` of a plan file.
pub const FORMAT: &str = "swe-ark-plan";
/// The plan format version this swe-ark writes and reads.
pub const VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("a plan needs at least 1 shard")]
    NoShards,
    #[error("there are no instances to plan (import some, or name them with --instance-ids)")]
    NoInstances,
    #[error("instance {0} is listed twice")]
    Twice(String),
    #[error("`{path}` is not a plan: {detail}")]
    NotAPlan { path: String, detail: String },
}

/// What the plan knows of one instance.
#[derive(Debug, Clone)]
pub struct Planned {
    pub instance: Instance,
    /// How long validating it took, when an earlier validation recorded it.
    pub seconds: Option<f64>,
}

/// How costs are counted: milliseconds of recorded test runs, or instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CostUnit {
    Milliseconds,
    Instances,
}

/// A plan file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub format: String,
    pub version: u32,
    /// The instances planned: how many, and the sha256 of their list (each instance's id and
    /// the sha256 of its canonical JSON, one per line, sorted by id).
    pub instances: usize,
    pub instances_sha256: Sha256Digest,
    pub cost_unit: CostUnit,
    /// How many instances' costs were estimated (no recorded duration: the median of the
    /// recorded ones).
    pub estimated: usize,
    pub shards: Vec<Shard>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shard {
    pub index: usize,
    pub cost: u64,
    /// The sha256 of the shard's instances, as [`instances_sha256`] names them: a worker
    /// checks that the instances it is given are the ones planned.
    pub instances_sha256: Sha256Digest,
    /// The shard's contexts, by repository and version, each with its instances by id.
    pub contexts: Vec<Context>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Context {
    pub repo: String,
    pub version: String,
    pub cost: u64,
    pub instances: Vec<String>,
}

impl Shard {
    pub fn instance_ids(&self) -> impl Iterator<Item = &str> {
        self.contexts
            .iter()
            .flat_map(|c| c.instances.iter().map(String::as_str))
    }
}

/// The sha256 that names a set of instances: one line `<id>\t<sha256 of its canonical JSON>`
/// per instance, sorted by id.
pub fn instances_sha256(instances: &[&Instance]) -> Sha256Digest {
    let mut lines: Vec<String> = instances
        .iter()
        .map(|i| {
            format!(
                "{}\t{}\n",
                i.instance_id,
                Sha256Digest::of(&i.to_canonical_json())
            )
        })
        .collect();
    lines.sort();
    Sha256Digest::of(lines.concat().as_bytes())
}

/// Plans `instances` over `shards` shards.
pub fn make(instances: &[Planned], shards: usize) -> Result<Plan, PlanError> {
    if shards == 0 {
        return Err(PlanError::NoShards);
    }
    if instances.is_empty() {
        return Err(PlanError::NoInstances);
    }
    let mut seen = std::collections::BTreeSet::new();
    for p in instances {
        if !seen.insert(p.instance.instance_id.as_str()) {
            return Err(PlanError::Twice(p.instance.instance_id.clone()));
        }
    }
    // Costs: recorded durations in milliseconds, the median of them for the rest; or one
    // per instance when none is recorded.
    let mut known: Vec<u64> = instances
        .iter()
        .filter_map(|p| p.seconds)
        .map(|s| (s.max(0.0) * 1000.0).round() as u64)
        .collect();
    known.sort_unstable();
    let (unit, fallback) = match known.get(known.len() / 2) {
        Some(median) => (CostUnit::Milliseconds, (*median).max(1)),
        None => (CostUnit::Instances, 1),
    };
    let cost_of = |p: &Planned| match (unit, p.seconds) {
        (CostUnit::Milliseconds, Some(s)) => ((s.max(0.0) * 1000.0).round() as u64).max(1),
        _ => fallback,
    };
    let estimated = match unit {
        CostUnit::Milliseconds => instances.iter().filter(|p| p.seconds.is_none()).count(),
        CostUnit::Instances => 0,
    };
    // Contexts: (repository, version), each with its instances sorted by id.
    let mut contexts: BTreeMap<(String, String), Context> = BTreeMap::new();
    for p in instances {
        let i = &p.instance;
        let c = contexts
            .entry((i.repo.clone(), i.version.clone()))
            .or_insert_with(|| Context {
                repo: i.repo.clone(),
                version: i.version.clone(),
                cost: 0,
                instances: Vec::new(),
            });
        c.cost += cost_of(p);
        c.instances.push(i.instance_id.clone());
    }
    let mut contexts: Vec<Context> = contexts.into_values().collect();
    for c in &mut contexts {
        c.instances.sort();
    }
    // Longest processing time first: the costliest context goes to the least loaded shard
    // (ties: the lowest index). Ties between contexts go by repository and version.
    contexts.sort_by(|a, b| {
        b.cost
            .cmp(&a.cost)
            .then_with(|| (&a.repo, &a.version).cmp(&(&b.repo, &b.version)))
    });
    let mut out: Vec<Shard> = (0..shards)
        .map(|index| Shard {
            index,
            cost: 0,
            instances_sha256: Sha256Digest::of(b""),
            contexts: Vec::new(),
        })
        .collect();
    for c in contexts {
        let least = out
            .iter_mut()
            .min_by_key(|s| (s.cost, s.index))
            .expect("at least one shard");
        least.cost += c.cost;
        least.contexts.push(c);
    }
    let by_id: BTreeMap<&str, &Instance> = instances
        .iter()
        .map(|p| (p.instance.instance_id.as_str(), &p.instance))
        .collect();
    for s in &mut out {
        s.contexts
            .sort_by(|a, b| (&a.repo, &a.version).cmp(&(&b.repo, &b.version)));
        let mine: Vec<&Instance> = s
            .instance_ids()
            .filter_map(|i| by_id.get(i).copied())
            .collect();
        s.instances_sha256 = instances_sha256(&mine);
    }
    let all: Vec<&Instance> = instances.iter().map(|p| &p.instance).collect();
    Ok(Plan {
        format: FORMAT.to_string(),
        version: VERSION,
        instances: instances.len(),
        instances_sha256: instances_sha256(&all),
        cost_unit: unit,
        estimated,
        shards: out,
    })
}

impl Plan {
    /// The plan file's bytes: pretty JSON with a final newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// The plan's id: the sha256 of its file. A shard's results name the plan they are of.
    pub fn id(&self) -> Sha256Digest {
        Sha256Digest::of(&self.to_bytes())
    }

    /// Reads a plan file, refusing another format or version.
    pub fn parse(path: &str, bytes: &[u8]) -> Result<Plan, PlanError> {
        let bad = |detail: String| PlanError::NotAPlan {
            path: path.to_string(),
            detail,
        };
        let plan: Plan = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
        if plan.format != FORMAT {
            return Err(bad(format!("its format is `{}`", plan.format)));
        }
        if plan.version != VERSION {
            return Err(bad(format!(
                "it is plan version {}; this swe-ark reads version {VERSION}",
                plan.version
            )));
        }
        Ok(plan)
    }

    /// The costliest shard's cost against the mean: 1.0 is perfectly balanced.
    pub fn imbalance(&self) -> f64 {
        let total: u64 = self.shards.iter().map(|s| s.cost).sum();
        let max = self.shards.iter().map(|s| s.cost).max().unwrap_or(0);
        if total == 0 {
            1.0
        } else {
            max as f64 * self.shards.len() as f64 / total as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(id: &str, repo: &str, version: &str) -> Instance {
        Instance::from_value(serde_json::json!({
            "instance_id": id,
            "repo": repo,
            "base_commit": "0123456789abcdef0123456789abcdef01234567",
            "patch": "",
            "test_patch": "",
            "problem_statement": "",
            "version": version,
            "FAIL_TO_PASS": "[]",
            "PASS_TO_PASS": "[]",
        }))
        .unwrap()
    }

    fn planned(id: &str, repo: &str, version: &str, seconds: Option<f64>) -> Planned {
        Planned {
            instance: inst(id, repo, version),
            seconds,
        }
    }

    #[test]
    fn contexts_stay_together_and_shards_balance_by_recorded_time() {
        let set = vec![
            planned("a__x-1", "a/x", "1.0", Some(30.0)),
            planned("a__x-2", "a/x", "1.0", Some(30.0)),
            planned("a__x-3", "a/x", "2.0", Some(50.0)),
            planned("b__y-1", "b/y", "0.1", Some(10.0)),
            planned("b__y-2", "b/y", "0.1", None),
            planned("c__z-1", "c/z", "3", Some(45.0)),
        ];
        let plan = make(&set, 2).unwrap();
        assert_eq!(plan.cost_unit, CostUnit::Milliseconds);
        assert_eq!(plan.estimated, 1);
        // Every context whole in one shard, every instance once.
        let mut all: Vec<&str> = plan.shards.iter().flat_map(|s| s.instance_ids()).collect();
        all.sort();
        assert_eq!(all.len(), 6);
        all.dedup();
        assert_eq!(all.len(), 6);
        let shard_of = |id: &str| {
            plan.shards
                .iter()
                .position(|s| s.instance_ids().any(|i| i == id))
                .unwrap()
        };
        assert_eq!(shard_of("a__x-1"), shard_of("a__x-2"));
        assert_eq!(shard_of("b__y-1"), shard_of("b__y-2"));
        // Costs: a/x 1.0 60 s, a/x 2.0 50 s, c/z 45 s, b/y 10 s + the median (30 s).
        // Longest first: 60 → 0, 50 → 1, 45 → 1 (95), 40 → 0 (100).
        let costs: Vec<u64> = plan.shards.iter().map(|s| s.cost).collect();
        assert_eq!(costs, [100_000, 95_000]);
        assert!(plan.imbalance() < 1.03);
        // The same input in another order: the same bytes.
        let mut shuffled = set.clone();
        shuffled.reverse();
        assert_eq!(make(&shuffled, 2).unwrap().to_bytes(), plan.to_bytes());
        // Read back.
        let again = Plan::parse("p.json", &plan.to_bytes()).unwrap();
        assert_eq!(again, plan);
        assert_eq!(again.id(), plan.id());
    }

    #[test]
    fn with_no_recorded_time_instances_are_counted_and_bad_input_is_named() {
        let set: Vec<Planned> = (0..7)
            .map(|i| planned(&format!("r__r-{i}"), &format!("r/r{}", i % 4), "1", None))
            .collect();
        let plan = make(&set, 3).unwrap();
        assert_eq!(plan.cost_unit, CostUnit::Instances);
        let costs: Vec<u64> = plan.shards.iter().map(|s| s.cost).collect();
        assert_eq!(costs.iter().sum::<u64>(), 7);
        assert!(costs.iter().all(|c| (2..=3).contains(c)), "{costs:?}");
        // More shards than contexts: some are empty, and that is said by their cost.
        let wide = make(&set, 6).unwrap();
        assert_eq!(
            wide.shards.iter().filter(|s| s.contexts.is_empty()).count(),
            2
        );
        assert!(matches!(make(&set, 0), Err(PlanError::NoShards)));
        assert!(matches!(make(&[], 2), Err(PlanError::NoInstances)));
        let twice = vec![set[0].clone(), set[0].clone()];
        assert!(matches!(make(&twice, 2), Err(PlanError::Twice(_))));
        let mut other = make(&set, 2).unwrap();
        other.version = 9;
        let err = Plan::parse("p.json", &other.to_bytes())
            .unwrap_err()
            .to_string();
        assert!(err.contains("plan version 9"), "{err}");
        assert!(Plan::parse("p.json", b"{}").is_err());
    }
}
