//! `shard run` and `merge` (docs/DISTRIBUTED.md) on the acme/widget fixture: a plan of three
//! shards run in three archives of their own, merged into a fourth, equals the archive one
//! machine builds; every bad shard file is refused whole, with exit 2.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::widget::{ADD_TEST, GOLD, Widget, instance, test_patch};
use common::{TestContext, last_line, stderr, stdout};

const RUN: &[&str] = &["--runs", "1", "--timeout", "120"];

/// The widget's manifest with versions 1.1, 1.2 and 1.3 beside 1.0 (three more contexts);
/// `broken` makes 1.3 need a distribution the index does not have.
fn write_manifest(w: &Widget, broken: bool) {
    let v13 = if broken {
        "[versions.\"1.3\"]\npip_packages = [\"pytest\", \"no-such-dist-anywhere\"]\n"
    } else {
        "[versions.\"1.3\"]\n"
    };
    w.set_versions(&format!(
        "[versions.\"1.1\"]\n\n[versions.\"1.2\"]\n\n{v13}"
    ));
}

fn with_version(mut v: serde_json::Value, version: &str) -> serde_json::Value {
    v["version"] = version.into();
    v
}

fn shard_files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "ark"))
        .collect();
    out.sort();
    out
}

fn strs(paths: &[PathBuf]) -> Vec<&str> {
    paths.iter().map(|p| p.to_str().unwrap()).collect()
}

/// The shard holding version `version`'s context.
fn shard_of(plan: &Path, version: &str) -> usize {
    let plan: serde_json::Value = serde_json::from_slice(&fs::read(plan).unwrap()).unwrap();
    plan["shards"]
        .as_array()
        .unwrap()
        .iter()
        .position(|s| {
            s["contexts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["version"] == version)
        })
        .unwrap()
}

/// Bundle ids by instance, as `ls --json` lists them.
fn bundles(w: &Widget, t: &TestContext, ark: &Path) -> Vec<(String, String)> {
    let out = w.run_at(t, ark, &["ls", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut rows: Vec<(String, String)> = v
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| !r["bundles"].as_array().unwrap().is_empty())
        .map(|r| {
            (
                r["instance_id"].as_str().unwrap().to_string(),
                r["bundles"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| b["id"].as_str().unwrap())
                    .collect::<Vec<_>>()
                    .join(","),
            )
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn shards_run_apart_merge_into_what_seed_builds_and_bad_files_are_refused() {
    let t = TestContext::new();
    let Some(w) = Widget::new(&t) else { return };
    write_manifest(&w, true);
    let never = "\n\ndef test_never():\n    assert False\n";
    let more = "\n\ndef test_more():\n    assert True\n";
    let instances = [
        instance(1, &test_patch(ADD_TEST), GOLD, &[], &[], &w.base),
        with_version(
            instance(
                2,
                &test_patch(&format!("{ADD_TEST}{more}")),
                GOLD,
                &[],
                &[],
                &w.base,
            ),
            "1.1",
        ),
        with_version(
            instance(3, &test_patch(ADD_TEST), GOLD, &[], &[], &w.base),
            "1.2",
        ),
        // Never passes: validated, not kept.
        with_version(
            instance(4, &test_patch(never), GOLD, &[], &[], &w.base),
            "1.2",
        ),
        // Its context does not lock (until the manifest is mended): not run.
        with_version(
            instance(5, &test_patch(ADD_TEST), GOLD, &[], &[], &w.base),
            "1.3",
        ),
    ];
    // The coordinator's archive: the instances and the mirror, nothing locked.
    w.add_mirror(&t);
    let data: String = instances.iter().map(|i| format!("{i}\n")).collect();
    let file = t.path("instances.jsonl");
    fs::write(&file, data).unwrap();
    w.ok(&t, &["import", file.to_str().unwrap()]);
    let plan = t.path("plan.json");
    let plan_s = plan.to_str().unwrap();
    w.ok(&t, &["plan", "--shards", "3", "--all", "-o", plan_s]);
    let seed = t.ark();
    let seed_s = seed.to_str().unwrap();
    let dest = t.path("shards");
    let dest_s = dest.to_str().unwrap();

    // Each shard on a "machine" of its own; the index from the flag, from Slurm's variable,
    // from Kubernetes'.
    let node = |k: usize| t.path(&format!("node{k}"));
    let shard_run = |k: usize, how: &str| {
        let mut c = w.cmd_at(&t, &node(k));
        c.args(["shard", "run", plan_s, "--from", seed_s, "--to", dest_s])
            .args(RUN)
            .env_remove("SLURM_ARRAY_TASK_ID")
            .env_remove("JOB_COMPLETION_INDEX");
        match how {
            "flag" => {
                c.args(["--index", &k.to_string()]);
            }
            "slurm" => {
                c.env("SLURM_ARRAY_TASK_ID", k.to_string());
            }
            _ => {
                c.env("JOB_COMPLETION_INDEX", k.to_string());
            }
        }
        c.output().unwrap()
    };
    let broken = shard_of(&plan, "1.3");
    for (k, how) in [(0, "flag"), (1, "slurm"), (2, "k8s")] {
        let out = shard_run(k, how);
        let want = if k == broken { 1 } else { 0 };
        assert_eq!(
            out.status.code(),
            Some(want),
            "shard {k}\n{}\n{}",
            stdout(&out),
            stderr(&out)
        );
        if k == broken {
            assert!(
                stderr(&out).contains("acme__widget-5: not run: locking acme/widget 1.3 failed"),
                "{}",
                stderr(&out)
            );
        }
    }
    let files = shard_files(&dest);
    assert_eq!(files.len(), 3, "{files:?}");

    // Merged: everything but the instance that did not run; incomplete (exit 1), it says
    // which and why, and how to run it again.
    let merged = t.path("merged");
    let merge = |files: &[PathBuf], extra: &[&str]| {
        let mut c = w.cmd_at(&t, &merged);
        c.args(["merge", "--plan", plan_s])
            .args(extra)
            .args(strs(files));
        c.output().unwrap()
    };
    let out = merge(&files, &["--release", "all"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("not run: acme__widget-5") && e.contains("locking acme/widget 1.3 failed"),
        "{e}"
    );
    assert!(e.contains(&format!("run shard(s) {broken} again")), "{e}");

    // The context mended, the failed shard run again alone: complete.
    write_manifest(&w, false);
    let out = shard_run(broken, "flag");
    assert!(out.status.success(), "{}", stderr(&out));
    let out = merge(&files, &["--release", "all"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let merged_root = last_line(&out.stdout);
    let listing = w.run_at(&t, &merged, &["ls", "--json"]).stdout;
    // Merging again changes nothing.
    let out = merge(&files, &["--release", "all"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("bundles 0 new"), "{}", stderr(&out));
    assert_eq!(last_line(&out.stdout), merged_root);
    assert_eq!(w.run_at(&t, &merged, &["ls", "--json"]).stdout, listing);

    // One machine, the same instances: the same bundles, the same release root.
    for v in ["1.0", "1.1", "1.2", "1.3"] {
        w.ok(&t, &["env", "lock", "acme/widget", v]);
    }
    // Before it validates (which changes the instances the plan was made of), another machine
    // takes these locks from it.
    conflict_refused(&t, &w, &plan, &merged, &listing);
    let mut args = vec!["validate"];
    args.extend(RUN);
    w.ok(&t, &args);
    w.ok(&t, &["pack", "--all-validated"]);
    let one = t.path("one.json");
    let one_root = last_line(
        w.ok(
            &t,
            &[
                "release",
                "create",
                "one",
                "--all-validated",
                "-o",
                one.to_str().unwrap(),
            ],
        )
        .as_bytes(),
    );
    assert_eq!(merged_root, one_root);
    let here = bundles(&w, &t, &seed);
    assert_eq!(bundles(&w, &t, &merged), here);
    assert_eq!(here.len(), 4, "{here:?}");
    // The instance that was not kept is known to the merged archive, with its verdict.
    let shown = w.ok_at(&t, &merged, &["ls", "--json"]);
    assert!(shown.contains("acme__widget-4"), "{shown}");

    bad_input(&t, &w, &files, &merged, &seed, plan_s);
    replay_in_shards(&t, &w, &merged);
}

/// The shard of context 1.0 built otherwise (another test command, so another bundle) on
/// another machine, which takes the contexts' locks from the seed (it holds them now): merged
/// into `merged`, a conflict, named, and that file refused whole, `merged` still `listing`.
fn conflict_refused(t: &TestContext, w: &Widget, plan: &Path, merged: &Path, listing: &[u8]) {
    let path = w.manifests.join("acme__widget.toml");
    let text = fs::read_to_string(&path).unwrap();
    fs::write(
        &path,
        text.replace(
            "test_cmd = \"pytest -rA\"",
            "test_cmd = \"pytest -rA -p no:cacheprovider\"",
        ),
    )
    .unwrap();
    let plan_s = plan.to_str().unwrap();
    let k = shard_of(plan, "1.0");
    let other_dest = t.path("other-shards");
    let out = w
        .cmd_at(t, &t.path("other-node"))
        .args(["shard", "run", plan_s, "--index", &k.to_string(), "--from"])
        .arg(t.ark())
        .arg("--to")
        .arg(&other_dest)
        .args(RUN)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("acme/widget 1.0: the seed's lock"),
        "{}",
        stderr(&out)
    );
    let out = w
        .cmd_at(t, merged)
        .args(["merge", "--plan", plan_s])
        .args(strs(&shard_files(&other_dest)))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("two bundle ids") && e.contains("acme__widget-1 has bundle"),
        "{e}"
    );
    assert_eq!(w.run_at(t, merged, &["ls", "--json"]).stdout, listing);
    fs::write(&path, text).unwrap();
}

/// Predictions replayed in two shards from the merged archive (the seed now: it holds the
/// bundles) and merged into a run of a fresh archive: the same run report as one machine's
/// replay of them; merged again, nothing added; an altered replay shard file refused.
fn replay_in_shards(t: &TestContext, w: &Widget, seed: &Path) {
    let preds: String = [1, 2, 3, 5]
        .iter()
        .map(|n| {
            let patch = if *n == 3 { "" } else { GOLD };
            format!(
                "{}\n",
                serde_json::json!({"instance_id": format!("acme__widget-{n}"),
                    "model_name_or_path": "m", "model_patch": patch})
            )
        })
        .collect();
    let preds_path = t.path("preds.jsonl");
    fs::write(&preds_path, preds).unwrap();
    let p = preds_path.to_str().unwrap();
    let rplan = t.path("rplan.json");
    let rplan_s = rplan.to_str().unwrap();
    w.ok_at(t, seed, &["plan", "--shards", "2", "--all", "-o", rplan_s]);
    let one = [
        "replay",
        "--predictions",
        p,
        "--run-id",
        "one",
        "--timeout",
        "120",
    ];
    w.ok_at(t, seed, &one);
    let rdest = t.path("replay-shards");
    for k in 0..2 {
        let out = w
            .cmd_at(t, &t.path(&format!("rnode{k}")))
            .args(["shard", "run", rplan_s, "--index", &k.to_string(), "--from"])
            .arg(seed)
            .arg("--to")
            .arg(&rdest)
            .args(["--predictions", p, "--run-id", "dist", "--timeout", "120"])
            .output()
            .unwrap();
        assert!(out.status.success(), "replay shard {k}\n{}", stderr(&out));
    }
    let files = shard_files(&rdest);
    assert_eq!(files.len(), 2);
    let rmerged = t.path("rmerged");
    let merge = |files: &[PathBuf]| {
        w.cmd_at(t, &rmerged)
            .args(["merge", "--plan", rplan_s])
            .args(strs(files))
            .output()
            .unwrap()
    };
    let out = merge(&files);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = |ark: &Path, run: &str| {
        let mut v: serde_json::Value = serde_json::from_slice(
            &fs::read(ark.join(format!("runs/{run}/m.{run}.json"))).unwrap(),
        )
        .unwrap();
        // Times differ from run to run; everything else must not.
        for k in ["overhead_seconds", "test_seconds"] {
            v.as_object_mut().unwrap().remove(k);
        }
        v
    };
    let dist = summary(&rmerged, "dist");
    assert_eq!(dist, summary(seed, "one"));
    // swebench's run.json beside the merged run's reports, as beside the one run on one machine.
    let meta = |ark: &Path, run: &str| -> serde_json::Value {
        serde_json::from_slice(&fs::read(ark.join(format!("runs/{run}/run.json"))).unwrap())
            .unwrap()
    };
    let (one, merged_meta) = (meta(seed, "one"), meta(&rmerged, "dist"));
    assert!(merged_meta["created_at"].is_string(), "{merged_meta}");
    for k in ["dataset", "split", "task_repo"] {
        assert_eq!(one[k], merged_meta[k], "{k}: {one} {merged_meta}");
    }
    assert_eq!(dist["resolved_instances"], 3, "{dist}");
    assert_eq!(dist["submitted_instances"], 4, "{dist}");
    // Again: nothing added, the same report.
    let out = merge(&files);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("0 instance report(s) added"),
        "{}",
        stderr(&out)
    );
    assert_eq!(summary(&rmerged, "dist"), dist);
    // A replay shard file altered: refused whole, exit 2.
    let mut bytes = fs::read(&files[0]).unwrap();
    // A byte of a report's content (not of the tar's padding, which nothing reads).
    let at = find(&bytes, b"\"resolved\"").expect("a report in the file");
    bytes[at + 1] ^= 0x20;
    let bad = t.path("bad-replay.ark");
    fs::write(&bad, &bytes).unwrap();
    let out = w
        .cmd_at(t, &t.path("rmerged2"))
        .args(["merge", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!t.path("rmerged2").join("runs").exists());
}

impl WidgetExt for Widget {
    fn ok_at(&self, t: &TestContext, ark: &Path, args: &[&str]) -> String {
        let out = self.run_at(t, ark, args);
        assert!(out.status.success(), "{args:?}\n{}", stderr(&out));
        stdout(&out)
    }
}

trait WidgetExt {
    fn ok_at(&self, t: &TestContext, ark: &Path, args: &[&str]) -> String;
}

/// Each bad shard file refused whole (exit 2, what is wrong named), the archive as it was;
/// good files given with it still merge.
fn bad_input(
    t: &TestContext,
    w: &Widget,
    files: &[PathBuf],
    merged: &Path,
    seed: &Path,
    plan_s: &str,
) {
    let listing = w.run_at(t, merged, &["ls", "--json"]).stdout;
    let refused = |file: &Path, extra: &[&str]| {
        let target = t.path("fresh");
        let out = w.run_at(
            t,
            &target,
            &[&["merge", file.to_str().unwrap()][..], extra].concat(),
        );
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            !target.join("index.sqlite").exists() || {
                let ls = w.run_at(t, &target, &["ls", "--json"]);
                stdout(&ls).trim() == "[]"
            },
            "a refused merge left instances"
        );
        stderr(&out)
    };
    let good = files
        .iter()
        .max_by_key(|f| fs::metadata(f).unwrap().len())
        .unwrap();
    let bytes = fs::read(good).unwrap();
    // Truncated.
    let cut = t.path("cut.ark");
    fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let e = refused(&cut, &[]);
    assert!(e.contains("truncated"), "{e}");
    // Tampered: a byte of a pack flipped.
    let header = (0..bytes.len())
        .step_by(512)
        .find(|&i| bytes[i..].starts_with(b"packs/"))
        .expect("a pack member");
    let at = header + 512 + 100;
    let mut tampered = bytes.clone();
    tampered[at] ^= 0x01;
    let bad = t.path("tampered.ark");
    fs::write(&bad, &tampered).unwrap();
    let e = refused(&bad, &[]);
    assert!(e.contains("packs/"), "{e}");
    // Another format version.
    let mut other_version = bytes.clone();
    let v = find(&other_version, b"\"version\": 2").unwrap();
    other_version[v + 11] = b'7';
    let ov = t.path("version.ark");
    fs::write(&ov, &other_version).unwrap();
    let e = refused(&ov, &[]);
    assert!(e.contains("format version 7"), "{e}");
    // Another plan.
    let plan2 = t.path("plan2.json");
    w.ok_at(
        t,
        seed,
        &[
            "plan",
            "--shards",
            "2",
            "--all",
            "-o",
            plan2.to_str().unwrap(),
        ],
    );
    let e = refused(good, &["--plan", plan2.to_str().unwrap()]);
    assert!(
        e.contains("not of plan") || e.contains("--plan is plan"),
        "{e}"
    );
    // A release file is not a shard file, and import-archive refuses shard files.
    let release = t.path("one.ark");
    w.ok_at(
        t,
        seed,
        &[
            "export",
            "--release",
            t.path("one.json").to_str().unwrap(),
            "-o",
            release.to_str().unwrap(),
        ],
    );
    let e = refused(&release, &[]);
    assert!(e.contains("not a shard file"), "{e}");
    let out = w.run_at(
        t,
        &t.path("fresh"),
        &["import-archive", good.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("`swe-ark merge` takes it"),
        "{}",
        stderr(&out)
    );
    // With good files, a bad one is refused and the good ones merged: exit 2.
    let mut mixed = files.to_vec();
    mixed.push(cut.clone());
    let out = w.run_at(
        t,
        merged,
        &[&["merge", "--plan", plan_s][..], &strs(&mixed)].concat(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("cut.ark"), "{}", stderr(&out));
    assert_eq!(w.run_at(t, merged, &["ls", "--json"]).stdout, listing);
    // Bad runs: no such shard, no index at all.
    let mut c = w.cmd_at(t, &t.path("nodeX"));
    let out = c
        .args(["shard", "run", plan_s, "--index", "3", "--to"])
        .arg(t.path("x"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("there is no shard 3"),
        "{}",
        stderr(&out)
    );
    let mut c = w.cmd_at(t, &t.path("nodeX"));
    let out = c
        .args(["shard", "run", plan_s, "--to"])
        .arg(t.path("x"))
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("JOB_COMPLETION_INDEX")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("which shard?"), "{}", stderr(&out));
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A seed archive on a read-only filesystem (a read-only bind mount, in a mount namespace of
/// the test's own) is read, never written: its instances reach the shard, and an instance
/// whose repository cannot be mirrored is reported as not run (exit 1), its file written.
#[test]
fn a_seed_on_a_read_only_filesystem_is_only_read() {
    let t = TestContext::new();
    let mounts = std::process::Command::new("unshare")
        .args(["-m", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !mounts {
        eprintln!("skipped: no mount namespaces here (`unshare -m` needs root)");
        return;
    }
    let plan = t.fixture_plan(1);
    let seed = t.ark();
    let script = format!(
        "mount --bind -o ro '{seed}' '{seed}' && touch '{seed}/probe' 2>/dev/null && exit 9; \
         exec '{bin}' --no-progress --ark '{node}' shard run '{plan}' --index 0 --from '{seed}' \
         --to '{out}' --git-base file:///nonexistent",
        seed = seed.display(),
        bin = env!("CARGO_BIN_EXE_swe-ark"),
        node = t.path("node").display(),
        plan = plan.display(),
        out = t.path("out").display(),
    );
    let out = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("not run: cannot mirror acme/widgets"), "{e}");
    assert_eq!(shard_files(&t.path("out")).len(), 1);
    assert!(!seed.join("probe").exists());
}
