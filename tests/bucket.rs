//! The archive's objects and packs kept in a bucket (`--store s3://…`, `store_url`;
//! docs/DISTRIBUTED.md) on a real S3 API (moto on 127.0.0.1): what commands write is uploaded,
//! checked against its name; local copies dropped are fetched again on demand; a seed of
//! nothing but its index (and its `config.toml`) runs a build shard and a replay shard from
//! the bucket; a pack whose bytes in the bucket are not what its name says is refused.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::s3::S3Server;
use common::widget::{ADD_TEST, GOLD, Widget, instance, test_patch};
use common::{TestContext, stderr, stdout};

const RUN: &[&str] = &["--runs", "1", "--timeout", "120"];

/// The files under `dir`, at any depth (none when it does not exist).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// A copy of the archive at `from` holding its index and its `config.toml` and nothing else.
fn index_only(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("index.sqlite") || name == "config.toml" {
            fs::copy(e.path(), to.join(&name)).unwrap();
        }
    }
}

#[test]
fn objects_and_packs_live_in_a_bucket_and_an_index_alone_seeds_shards() {
    let t = TestContext::new();
    let Some(s3) = S3Server::start() else { return };
    let Some(w) = Widget::new(&t) else { return };
    s3.make_bucket("ark");
    let env = s3.env();
    let run = |ark: &Path, args: &[&str]| -> Output {
        let mut c = w.cmd_at(&t, ark);
        c.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
        c.args(args).output().unwrap()
    };
    let ok = |ark: &Path, args: &[&str]| -> Output {
        let out = run(ark, args);
        assert!(
            out.status.success(),
            "swe-ark {args:?}\n{}\n{}",
            stdout(&out),
            stderr(&out)
        );
        out
    };

    // The coordinator's archive keeps its objects in the bucket (`store_url`): locking uploads
    // the wheels and the interpreter it stored, and the mirror.
    let seed = t.ark();
    fs::create_dir_all(&seed).unwrap();
    fs::write(seed.join("config.toml"), "store_url = \"s3://ark/seed\"\n").unwrap();
    w.add_mirror(&t);
    let out = ok(
        &seed,
        &["env", "lock", "acme/widget", "1.0", "--commit", &w.base],
    );
    assert!(
        stderr(&out).contains("to s3://ark/seed"),
        "{}",
        stderr(&out)
    );
    let objects = s3.keys("ark", "seed/objects/");
    let local: Vec<PathBuf> = files_under(&seed.join("objects"));
    assert!(!objects.is_empty());
    assert_eq!(objects.len(), local.len(), "{objects:?}\n{local:?}");
    assert_eq!(
        s3.keys("ark", "seed/mirrors/").len(),
        2,
        "a file and its .sha256"
    );
    let instances = [
        instance(1, &test_patch(ADD_TEST), GOLD, &[], &[], &w.base),
        instance(
            2,
            &test_patch(&format!(
                "{ADD_TEST}\n\ndef test_more():\n    assert True\n"
            )),
            GOLD,
            &[],
            &[],
            &w.base,
        ),
    ];
    let data: String = instances.iter().map(|i| format!("{i}\n")).collect();
    let file = t.path("instances.jsonl");
    fs::write(&file, data).unwrap();
    ok(&seed, &["import", file.to_str().unwrap()]);
    let plan = t.path("plan.json");
    let plan_s = plan.to_str().unwrap();
    ok(&seed, &["plan", "--shards", "1", "--all", "-o", plan_s]);

    // Pushed again: nothing to send; with --drop-local the local copies go.
    let out = ok(&seed, &["remote", "push", "--drop-local"]);
    let report: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(report["sent"], 0, "{report}");
    assert_eq!(report["dropped"], local.len(), "{report}");
    assert!(files_under(&seed.join("objects")).is_empty());

    // A worker's seed: the index alone. The shard's lock, wheels, interpreter and mirror come
    // from the bucket, into the worker's archive; the seed's copy is not written to.
    let seed_index = t.path("seed-index");
    index_only(&seed, &seed_index);
    let index_bytes = fs::read(seed_index.join("index.sqlite")).unwrap();
    let node = t.path("node");
    let shards = t.path("shards");
    let mut args = vec![
        "shard",
        "run",
        plan_s,
        "--index",
        "0",
        "--from",
        seed_index.to_str().unwrap(),
        "--to",
        shards.to_str().unwrap(),
        "--git-base",
        "file:///nonexistent",
    ];
    args.extend(RUN);
    let out = ok(&node, &args);
    assert!(
        stderr(&out).contains("from the seed's bucket"),
        "{}",
        stderr(&out)
    );
    // (SQLite's -wal and -shm beside the index are how it reads one, read-only too.)
    assert_eq!(
        fs::read(seed_index.join("index.sqlite")).unwrap(),
        index_bytes
    );
    for dir in ["objects", "packs", "mirrors", "cache", "tmp"] {
        assert!(!seed_index.join(dir).exists(), "{dir}");
    }
    assert!(node.join("mirrors/acme__widget.git").is_dir());
    assert!(!files_under(&node.join("objects")).is_empty());
    let shard_files = files_under(&shards);
    assert_eq!(shard_files.len(), 1, "{shard_files:?}");

    // Merged into an archive whose bucket is given by --store: its packs are uploaded; with
    // the local copies dropped, `verify` fetches them back and rebuilds every bundle.
    let merged = t.path("merged");
    let store = "s3://ark/merged";
    let mut args = vec!["--store", store, "merge", "--plan", plan_s];
    args.push(shard_files[0].to_str().unwrap());
    ok(&merged, &args);
    let packs = s3.keys("ark", "merged/packs/");
    assert!(!packs.is_empty());
    let listing = stdout(&ok(&merged, &["ls", "--json"]));
    ok(
        &merged,
        &["--store", store, "remote", "push", "--drop-local"],
    );
    assert!(files_under(&merged.join("packs")).is_empty());
    assert!(files_under(&merged.join("objects")).is_empty());
    let out = ok(&merged, &["--store", store, "verify"]);
    assert!(!files_under(&merged.join("packs")).is_empty());
    assert_eq!(stdout(&ok(&merged, &["ls", "--json"])), listing);
    drop(out);

    // A replay shard from the merged archive's index alone: its bundles are rebuilt from packs
    // fetched into the worker's cache, its locks' objects fetched into the worker's store.
    let preds: String = ["acme__widget-1", "acme__widget-2"]
        .iter()
        .map(|id| {
            format!(
                "{}\n",
                serde_json::json!({"instance_id": id, "model_name_or_path": "m",
                    "model_patch": GOLD})
            )
        })
        .collect();
    let preds_path = t.path("preds.jsonl");
    fs::write(&preds_path, preds).unwrap();
    fs::write(
        merged.join("config.toml"),
        format!("store_url = \"{store}\"\n"),
    )
    .unwrap();
    let rplan = t.path("rplan.json");
    let rplan_s = rplan.to_str().unwrap();
    ok(&merged, &["plan", "--shards", "1", "--all", "-o", rplan_s]);
    ok(&merged, &["remote", "push", "--drop-local"]);
    let merged_index = t.path("merged-index");
    index_only(&merged, &merged_index);
    let rnode = t.path("rnode");
    let rshards = t.path("rshards");
    let mut args = vec![
        "shard",
        "run",
        rplan_s,
        "--index",
        "0",
        "--from",
        merged_index.to_str().unwrap(),
        "--to",
        rshards.to_str().unwrap(),
        "--predictions",
        preds_path.to_str().unwrap(),
        "--run-id",
        "r",
    ];
    args.extend(RUN);
    let out = ok(&rnode, &args);
    assert!(!files_under(&rnode.join("cache/fetched-packs")).is_empty());
    let replayed = t.path("replayed");
    let rfiles = files_under(&rshards);
    let mut args = vec!["merge"];
    args.extend(rfiles.iter().map(|p| p.to_str().unwrap()));
    ok(&replayed, &args);
    let summary: serde_json::Value =
        serde_json::from_slice(&fs::read(replayed.join("runs/r/m.r.json")).unwrap()).unwrap();
    assert_eq!(summary["resolved_instances"], 2, "{summary}");
    drop(out);

    // A pack whose bytes in the bucket are not what its name says: refused, exit 2, and no
    // copy of it kept.
    let victim = &packs[0];
    let mut bytes = s3.get("ark", victim);
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    s3.put("ark", victim, bytes);
    ok(&merged, &["remote", "push", "--drop-local"]);
    let refused: Vec<String> = ["acme__widget-1", "acme__widget-2"]
        .iter()
        .map(|id| {
            let dir = t.path(&format!("unpacked-{id}"));
            run(&merged, &["unpack", id, "-o", dir.to_str().unwrap()])
        })
        .filter(|out| out.status.code() == Some(2))
        .map(|out| stderr(&out))
        .collect();
    assert!(!refused.is_empty());
    assert!(
        refused.iter().all(|e| e.contains("hashes to")),
        "{refused:?}"
    );
    let name = victim.rsplit('/').next().unwrap();
    assert!(!merged.join("packs").join(name).exists());
    assert!(
        files_under(&merged.join("packs"))
            .iter()
            .all(|p| !p.to_string_lossy().contains("/.tmp-")),
    );

    // A bucket that cannot be reached (--store over the config's store_url): exit 2, naming
    // the pack it could not fetch and the endpoint.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = w
        .cmd_at(&t, &merged)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{dead}"))
        .env("SWE_ARK_S3_TIMEOUT", "5")
        .args(["--store", store, "gc"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains(&format!("127.0.0.1:{dead}")), "{e}");

    // A store_url that is not an s3:// location: every command says so, exit 2.
    fs::write(
        merged.join("config.toml"),
        "store_url = \"http://bucket/x\"\n",
    )
    .unwrap();
    let out = run(&merged, &["ls"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is not an s3:// location") && stderr(&out).contains("store_url"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_local_file_that_is_not_what_its_name_says_is_never_uploaded() {
    let t = TestContext::new();
    let Some(s3) = S3Server::start() else { return };
    s3.make_bucket("ark");
    t.packed_fixture();
    let packs = t.pack_files();
    assert!(!packs.is_empty());
    // One pack damaged on disk, then the archive given a bucket.
    let victim = &packs[0];
    let mut bytes = fs::read(victim).unwrap();
    let n = bytes.len();
    bytes[n - 1] ^= 0xff;
    fs::write(victim, bytes).unwrap();
    fs::write(t.ark().join("config.toml"), "store_url = \"s3://ark/a\"\n").unwrap();
    let out = t
        .cmd()
        .envs(s3.env().iter().map(|(k, v)| (*k, v.as_str())))
        .args(["remote", "push", "--drop-local"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    let name = victim.file_name().unwrap().to_string_lossy().into_owned();
    assert!(e.contains("not uploaded") && e.contains(&name), "{e}");
    // Nothing of it in the bucket, and nothing dropped here.
    assert!(
        s3.keys("ark", "a/packs/")
            .iter()
            .all(|k| !k.ends_with(&name)),
        "{:?}",
        s3.keys("ark", "a/packs/")
    );
    assert!(victim.is_file());
    // Without a bucket, `remote push` says what to give.
    fs::remove_file(t.ark().join("config.toml")).unwrap();
    let out = t.run_expect(&["remote", "push"], 2);
    assert!(stderr(&out).contains("has no bucket"), "{}", stderr(&out));
}
