//! Shard files on a real S3 API (moto on 127.0.0.1): written, listed, read back and merged;
//! an interrupted upload never visible; an endpoint that refuses, one that never answers, a
//! file whose bytes do not match its sha256, one whose upload did not finish: each a clear
//! error, exit 2, nothing merged.

mod common;

use std::net::TcpListener;
use std::path::Path;
use std::process::Output;

use common::s3::S3Server;
use common::{TestContext, stderr, stdout};

fn swe_ark(t: &TestContext, ark: &Path, env: &[(&str, String)], args: &[&str]) -> Output {
    let mut c = t.cmd_at(ark);
    for (k, v) in env {
        c.env(k, v);
    }
    c.env_remove("SWE_ARK_FAILPOINT");
    c.args(args).output().unwrap()
}

#[test]
fn shard_files_go_to_s3_and_come_back_checked() {
    let t = TestContext::new();
    let Some(s3) = S3Server::start() else { return };
    s3.make_bucket("shards");
    let plan = t.fixture_plan(2).to_str().unwrap().to_string();
    let env = s3.env();
    let node = t.path("node");

    // The plan staged in the bucket (`remote put`), read back (`remote get`), and run from
    // there.
    let out = swe_ark(
        &t,
        &node,
        &env,
        &["remote", "put", &plan, "s3://shards/plans/"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let plan_url = stdout(&out).trim().to_string();
    assert_eq!(plan_url, "s3://shards/plans/plan.json");
    let back = t.path("plan-back.json");
    let out = swe_ark(
        &t,
        &node,
        &env,
        &["remote", "get", &plan_url, back.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&plan).unwrap());
    let out = swe_ark(
        &t,
        &node,
        &env,
        &[
            "remote",
            "get",
            "s3://shards/plans/none.json",
            back.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&plan).unwrap());

    // Written: the file and its sha256 beside it.
    let out = swe_ark(
        &t,
        &node,
        &env,
        &[
            "shard",
            "run",
            &plan_url,
            "--index",
            "1",
            "--from",
            t.ark().to_str().unwrap(),
            "--to",
            "s3://shards/run-1/",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let url = stdout(&out).trim().to_string();
    assert!(
        url.starts_with("s3://shards/run-1/shard-1-of-2-") && url.ends_with(".ark"),
        "{url}"
    );
    let name = url.rsplit('/').next().unwrap().to_string();
    let keys = s3.keys("shards", "run-1/");
    assert_eq!(
        keys,
        [format!("run-1/{name}"), format!("run-1/{name}.sha256")],
        "{keys:?}"
    );
    let hash = s3.get("shards", &format!("run-1/{name}.sha256"));
    let body = s3.get("shards", &format!("run-1/{name}"));
    let hash = String::from_utf8(hash).unwrap();
    assert_eq!(hash, format!("{}  {name}\n", common::sha256_hex(&body)));
    assert!(
        !node
            .join("tmp")
            .read_dir()
            .unwrap()
            .any(|e| e.unwrap().file_name() == name.as_str())
    );

    // Read back and merged, by prefix and by URL: shard 0 is missing (exit 1), said.
    let merged = t.path("merged");
    let out = swe_ark(&t, &merged, &env, &["merge", "s3://shards/run-1/"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("merged shard 1 (s3://shards/run-1/"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("no file merged of shard(s) 0 of 2"),
        "{}",
        stderr(&out)
    );
    let out = swe_ark(&t, &merged, &env, &["merge", &url]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        !merged.join("tmp").exists() || merged.join("tmp").read_dir().unwrap().next().is_none()
    );

    // Interrupted after its first part: nothing of it is ever visible.
    let mut c = t.cmd_at(&node);
    for (k, v) in &env {
        c.env(k, v);
    }
    let out = c
        .env("SWE_ARK_FAILPOINT", "s3.upload-part")
        .args([
            "shard",
            "run",
            &plan,
            "--index",
            "1",
            "--to",
            "s3://shards/run-2/",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("failpoint `s3.upload-part` reached"),
        "{}",
        stderr(&out)
    );
    assert!(s3.keys("shards", "run-2/").is_empty());
    let out = swe_ark(&t, &t.path("fresh"), &env, &["merge", "s3://shards/run-2/"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no shard file there"),
        "{}",
        stderr(&out)
    );

    // Other bytes than uploaded: refused, nothing merged.
    s3.put(
        "shards",
        &format!("run-1/{name}.sha256"),
        format!("{}  {name}\n", "0".repeat(64)).into_bytes(),
    );
    let fresh = t.path("fresh2");
    let out = swe_ark(&t, &fresh, &env, &["merge", "s3://shards/run-1/"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("gave other bytes than were uploaded"),
        "{}",
        stderr(&out)
    );
    assert!(!fresh.exists(), "a refused merge left {}", fresh.display());
    // Its sha256 gone (an upload that did not finish): refused.
    s3.delete("shards", &format!("run-1/{name}.sha256"));
    let out = swe_ark(&t, &fresh, &env, &["merge", "s3://shards/run-1/"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("its upload did not finish"),
        "{}",
        stderr(&out)
    );

    // An endpoint that refuses connections: the shard fails before any work, exit 2.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let refusing = vec![
        ("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{closed}")),
        ("AWS_ACCESS_KEY_ID", "testing".into()),
        ("AWS_SECRET_ACCESS_KEY", "testing".into()),
        ("SWE_ARK_S3_TIMEOUT", "2".into()),
    ];
    let out = swe_ark(
        &t,
        &node,
        &refusing,
        &[
            "shard",
            "run",
            &plan,
            "--index",
            "1",
            "--to",
            "s3://shards/run-3/",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("reaching the destination"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains(&format!("127.0.0.1:{closed}")),
        "{}",
        stderr(&out)
    );
    let out = swe_ark(&t, &fresh, &refusing, &["merge", "s3://shards/run-1/"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));

    // An endpoint that accepts and never answers: given up after the timeout, exit 2.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in silent.incoming() {
            held.push(conn);
        }
    });
    let mut hanging = refusing.clone();
    hanging[0].1 = format!("http://127.0.0.1:{port}");
    hanging[3].1 = "1".into();
    let out = swe_ark(
        &t,
        &node,
        &hanging,
        &[
            "shard",
            "run",
            &plan,
            "--index",
            "1",
            "--to",
            "s3://shards/run-4/",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("reaching the destination"),
        "{}",
        stderr(&out)
    );
    // A malformed location.
    let out = swe_ark(
        &t,
        &node,
        &env,
        &[
            "shard",
            "run",
            &plan,
            "--index",
            "1",
            "--to",
            "s3://Bad_Bucket/x",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("is not an s3:// location"),
        "{}",
        stderr(&out)
    );
}
