//! `swe-ark plan`: instances cut into shards, a context's instances together, the same plan
//! for the same input, and bad input refused.

mod common;

use std::fs;

use common::*;

fn record(id: &str, repo: &str, version: &str) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(&fixture_instance_json()).unwrap();
    v["instance_id"] = id.into();
    v["repo"] = repo.into();
    v["version"] = version.into();
    v
}

#[test]
fn a_plan_keeps_contexts_whole_and_is_the_same_for_the_same_instances() {
    let t = TestContext::new();
    let records: Vec<serde_json::Value> = [
        ("acme__a-1", "acme/a", "1.0"),
        ("acme__a-2", "acme/a", "1.0"),
        ("acme__a-3", "acme/a", "1.0"),
        ("acme__a-4", "acme/a", "2.0"),
        ("beta__b-1", "beta/b", "0.1"),
        ("beta__b-2", "beta/b", "0.1"),
        ("gamma__c-1", "gamma/c", "3"),
    ]
    .iter()
    .map(|(i, r, v)| record(i, r, v))
    .collect();
    let lines: String = records.iter().map(|r| format!("{r}\n")).collect();
    fs::write(t.path("ds.jsonl"), lines).unwrap();
    t.run_expect(&["import", "ds.jsonl", "--environments-as-of", "commit"], 0);

    let plan_path = t.path("plan.json");
    let p = plan_path.to_str().unwrap();
    let out = t.run_expect(&["plan", "--shards", "3", "--all", "-o", p], 0);
    assert_eq!(stdout(&out).trim(), p);
    assert!(
        stderr(&out).contains("planned 7 instance(s) over 3 shard(s)"),
        "{}",
        stderr(&out)
    );
    let bytes = fs::read(&plan_path).unwrap();
    let plan: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(plan["format"], "swe-ark-plan");
    assert_eq!(plan["cost_unit"], "instances");
    let shards = plan["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 3);
    // Every instance once; each (repository, version) in one shard.
    let mut seen = Vec::new();
    for s in shards {
        for c in s["contexts"].as_array().unwrap() {
            for i in c["instances"].as_array().unwrap() {
                seen.push((
                    i.as_str().unwrap().to_string(),
                    s["index"].as_u64().unwrap(),
                ));
            }
        }
    }
    seen.sort();
    assert_eq!(seen.len(), 7);
    let shard_of = |id: &str| seen.iter().find(|(i, _)| i == id).unwrap().1;
    assert_eq!(shard_of("acme__a-1"), shard_of("acme__a-3"));
    assert_eq!(shard_of("beta__b-1"), shard_of("beta__b-2"));
    // Costs 3, 2, 1, 1 over three shards: 3 | 2 | 1 + 1.
    let mut costs: Vec<u64> = shards.iter().map(|s| s["cost"].as_u64().unwrap()).collect();
    costs.sort();
    assert_eq!(costs, [2, 2, 3]);
    // The same instances planned again, into another archive in another order: the same file.
    let t2 = TestContext::new();
    let reversed: String = records.iter().rev().map(|r| format!("{r}\n")).collect();
    fs::write(t2.path("ds.jsonl"), reversed).unwrap();
    t2.run_expect(&["import", "ds.jsonl", "--environments-as-of", "commit"], 0);
    let p2 = t2.path("plan.json");
    t2.run_expect(
        &["plan", "--shards", "3", "--all", "-o", p2.to_str().unwrap()],
        0,
    );
    assert_eq!(fs::read(&p2).unwrap(), bytes);
    // A selection: only those, and the inputs' hash says so.
    let out = t.run_expect(
        &[
            "plan",
            "--shards",
            "2",
            "--instance-ids",
            "acme__a-1,gamma__c-1",
            "--json",
            "-o",
            p,
        ],
        0,
    );
    let sub: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sub["instances"], 2);
    assert_ne!(sub["instances_sha256"], plan["instances_sha256"]);

    // Bad input: exit 2, naming the problem; the plan file as it was.
    let before = fs::read(&plan_path).unwrap();
    let e = stderr(&t.run_expect(&["plan", "--shards", "0", "--all", "-o", p], 2));
    assert!(e.contains("at least 1 shard"), "{e}");
    let e = stderr(&t.run_expect(
        &[
            "plan",
            "--shards",
            "2",
            "--instance-ids",
            "acme__a-1,nosuch-9",
            "-o",
            p,
        ],
        2,
    ));
    assert!(e.contains("nosuch-9"), "{e}");
    let e = stderr(&t.run_expect(&["plan", "--shards", "2", "-o", p], 2));
    assert!(e.contains("--all") || e.contains("--instance-ids"), "{e}");
    let e = stderr(&t.run_expect(
        &[
            "plan",
            "--shards",
            "2",
            "--all",
            "-o",
            t.path("no/such/dir/p.json").to_str().unwrap(),
        ],
        2,
    ));
    assert!(e.contains("cannot write"), "{e}");
    assert_eq!(fs::read(&plan_path).unwrap(), before);
}
