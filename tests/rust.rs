//! The Rust kind, end to end, with real cargo and a real registry on 127.0.0.1: a crate
//! published twice (the second release, after the cutoff, breaks a test), a repository made by
//! code whose base commit has no Cargo.lock, its instance imported, mirrored, locked (crates
//! resolved as of the cutoff, kept by their checksums), validated and replayed offline with
//! the registry gone.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use common::{TestContext, git_commit_all, git_init_commit, sha256_hex, stdout};

const DATE: &str = "2021-03-01T00:00:00Z";

const LIB: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n\n\
pub fn twice(x: i32) -> i32 {\n    sweark_dep::double(x)\n}\n\n\
#[cfg(test)]\nmod tests {\n    #[test]\n    fn twice_works() {\n        assert_eq!(super::twice(2), 4);\n    }\n}\n";

const GOLD: &str = "diff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n\
@@ -1,3 +1,3 @@\n pub fn add(a: i32, b: i32) -> i32 {\n-    a - b\n+    a + b\n }\n";

const TEST_PATCH: &str = "diff --git a/tests/add.rs b/tests/add.rs\nnew file mode 100644\n\
--- /dev/null\n+++ b/tests/add.rs\n@@ -0,0 +1,4 @@\n+#[test]\n+fn add_works() {\n\
+    assert_eq!(app::add(1, 2), 3);\n+}\n";

const MANIFEST: &str = r#"repo = "acme/app"
kind = "rust"
source = "written for this test"
log_parser = "msb_cargo"

[defaults]
test_cmd = "cargo test"

[versions."rust-latest"]
"#;

/// `sweark-dep` at `version`, packaged by cargo itself: its `.crate` bytes.
fn package(dir: &Path, version: &str, factor: i32) -> Vec<u8> {
    let src = dir.join(format!("dep-{version}"));
    std::fs::create_dir_all(src.join("src")).unwrap();
    std::fs::write(
        src.join("Cargo.toml"),
        format!(
            "[package]\nname = \"sweark-dep\"\nversion = \"{version}\"\nedition = \"2021\"\n\
             license = \"MIT\"\ndescription = \"a test crate\"\n"
        ),
    )
    .unwrap();
    std::fs::write(
        src.join("src/lib.rs"),
        format!("pub fn double(x: i32) -> i32 {{\n    x * {factor}\n}}\n"),
    )
    .unwrap();
    let out = Command::new("cargo")
        .args(["package", "--no-verify", "--allow-dirty", "--offline"])
        .current_dir(&src)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(
        dir.join("target/package")
            .join(format!("sweark-dep-{version}.crate")),
    )
    .unwrap()
}

/// A sparse registry on 127.0.0.1: `config.json`, the index file of `sweark-dep`, downloads.
struct Registry {
    url: String,
    _server: Arc<tiny_http::Server>,
}

fn registry(dir: &Path) -> Registry {
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut lines = String::new();
    // 0.1.1 came out after the cutoff, and doubles wrong.
    for (version, factor, pubtime) in [
        ("0.1.0", 2, "2020-01-01T00:00:00Z"),
        ("0.1.1", 3, "2024-01-01T00:00:00Z"),
    ] {
        let bytes = package(dir, version, factor);
        lines.push_str(
            &serde_json::json!({
                "name": "sweark-dep", "vers": version, "deps": [], "features": {},
                "cksum": sha256_hex(&bytes), "yanked": false, "pubtime": pubtime,
            })
            .to_string(),
        );
        lines.push('\n');
        files.insert(format!("/dl/sweark-dep/{version}/download"), bytes);
    }
    files.insert("/sw/ea/sweark-dep".into(), lines.into_bytes());
    let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
    let port = server.server_addr().to_ip().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    files.insert(
        "/config.json".into(),
        format!("{{\"dl\": \"{url}/dl\"}}").into_bytes(),
    );
    let srv = server.clone();
    std::thread::spawn(move || {
        for req in srv.incoming_requests() {
            let resp = match files.get(req.url()) {
                Some(b) => tiny_http::Response::from_data(b.clone()),
                None => tiny_http::Response::from_data(Vec::new()).with_status_code(404),
            };
            let _ = req.respond(resp);
        }
    });
    Registry {
        url: format!("sparse+{url}/"),
        _server: server,
    }
}

fn repository(dir: &Path) -> String {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\nsweark-dep = \"0.1\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/lib.rs"), LIB).unwrap();
    std::fs::write(dir.join(".gitignore"), "/target\n").unwrap();
    git_init_commit(dir, "app", DATE);
    git_commit_all(dir, "app", DATE)
}

#[test]
fn a_rust_context_locks_as_of_its_date_and_validates_and_replays_offline() {
    if !common::can_unshare() {
        eprintln!("skipped: no namespaces here");
        return;
    }
    let t = TestContext::new();
    let manifests = t.manifests_with("acme__app.toml", MANIFEST);
    let run = |args: &[&str]| t.run_ok_with_manifests(&manifests, args);
    let repo = t.path("app");
    let base = repository(&repo);
    let reg = registry(&t.path("registry"));
    let row = serde_json::json!({
        "repo": "acme/app", "instance_id": "acme__app-7", "base_commit": base,
        "patch": GOLD, "test_patch": TEST_PATCH, "problem_statement": "add subtracts",
        "hints_text": "", "created_at": "", "version": "rust-latest",
        "FAIL_TO_PASS": "[\"add_works\"]", "PASS_TO_PASS": "[\"tests::twice_works\"]",
        "environment_setup_commit": "",
    });
    let file = t.path("instances.jsonl");
    std::fs::write(&file, format!("{row}\n")).unwrap();
    run(&[
        "import",
        file.to_str().unwrap(),
        "--dataset",
        "app",
        "--environments-as-of",
        "2022-01-01",
    ]);
    run(&[
        "mirror",
        "add",
        repo.to_str().unwrap(),
        "--name",
        "acme/app",
    ]);
    let lock = run(&[
        "env",
        "lock",
        "acme/app",
        "rust-latest",
        "--index-url",
        &reg.url,
        "--no-pack-runtime",
        "--json",
    ]);
    let lock: serde_json::Value = serde_json::from_str(&lock).unwrap();
    assert_eq!(lock["crates"], 1, "{lock}");
    assert_eq!(lock["generated_locks"], 1, "{lock}");
    assert_eq!(lock["exclude_newer"], "2022-01-01T00:00:00Z");
    drop(reg);

    run(&["validate", "--repo", "acme/app"]);
    let rows: serde_json::Value =
        serde_json::from_str(&run(&["ls", "--validated", "--json"])).unwrap();
    let row = &rows[0];
    assert_eq!(row["verdict"], "kept", "{row}");
    assert_eq!(row["fail_to_pass"], 1, "{row}");
    assert_eq!(
        row["pass_to_pass"], 1,
        "the dependency as of 2022 doubles right: {row}"
    );

    run(&["pack", "--all-validated"]);
    let shown: serde_json::Value =
        serde_json::from_str(&run(&["show", "acme__app-7", "--json"])).unwrap();
    assert!(shown.to_string().contains("env/rust-lock.toml"), "{shown}");
    // The bundle rebuilds bit for bit from the mirror, its lock included.
    run(&["verify", "--rebuild"]);
    run(&["replay", "--gold", "--run-id", "gold"]);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(t.ark().join("runs/gold/gold.gold.json")).unwrap())
            .unwrap();
    assert_eq!(summary["resolved_instances"], 1, "{summary}");

    // Released, exported as one file, imported into an empty archive and replayed there: the
    // lock's crates and generated Cargo.lock travel as objects, checked by hash.
    let snap = t.path("r1.json");
    run(&[
        "release",
        "create",
        "r1",
        "--all-validated",
        "-o",
        snap.to_str().unwrap(),
    ]);
    let file = t.path("r1.ark");
    run(&[
        "export",
        "--release",
        snap.to_str().unwrap(),
        "-o",
        file.to_str().unwrap(),
    ]);
    let other = t.path("other");
    let there = |args: &[&str]| {
        let out = t
            .cmd_at(&other)
            .env("SWE_ARK_MANIFESTS", &manifests)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    there(&["import-archive", file.to_str().unwrap()]);
    there(&["replay", "--gold", "--run-id", "gold"]);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(other.join("runs/gold/gold.gold.json")).unwrap())
            .unwrap();
    assert_eq!(summary["resolved_instances"], 1, "{summary}");
}

/// `acme/app` with a committed `Cargo.lock` that pins `sweark-dep` at `pinned` while
/// Cargo.toml asks for `wanted`.
fn repository_with_lock(dir: &Path, wanted: &str, pinned: &str) -> String {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\nsweark-dep = \"{wanted}\"\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.join("src/lib.rs"), LIB).unwrap();
    std::fs::write(
        dir.join("Cargo.lock"),
        format!(
            "version = 3\n\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\n\
             dependencies = [\"sweark-dep\"]\n\n[[package]]\nname = \"sweark-dep\"\n\
             version = \"{pinned}\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n"
        ),
    )
    .unwrap();
    git_init_commit(dir, "app", DATE);
    git_commit_all(dir, "app", DATE)
}

#[test]
fn a_lock_that_cannot_be_had_is_refused_naming_the_crate_or_the_commit() {
    if !common::can_unshare() {
        eprintln!("skipped: no namespaces here");
        return;
    }
    let t = TestContext::new();
    let manifests = t.manifests_with("acme__app.toml", MANIFEST);
    let reg = registry(&t.path("registry"));
    let swe_ark = |ark: &Path, args: &[&str]| {
        let mut c = t.cmd_at(ark);
        c.env("SWE_ARK_MANIFESTS", &manifests).args(args);
        c.output().unwrap()
    };
    // Two cases, each in an archive of its own: a version the registry does not have, and a
    // Cargo.lock that does not satisfy its Cargo.toml.
    for (case, wanted, pinned, says) in [
        (
            "missing",
            "0.1",
            "0.1.7",
            "no version 0.1.7 of crate `sweark-dep`",
        ),
        (
            "stale",
            "0.2",
            "0.1.0",
            "the lock does not cover base commit",
        ),
    ] {
        let repo = t.path(case);
        let base = repository_with_lock(&repo, wanted, pinned);
        let row = serde_json::json!({
            "repo": "acme/app", "instance_id": "acme__app-1", "base_commit": base,
            "patch": GOLD, "test_patch": TEST_PATCH, "problem_statement": "p",
            "version": "rust-latest", "FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]",
        });
        let file = t.path(&format!("{case}.jsonl"));
        std::fs::write(&file, format!("{row}\n")).unwrap();
        let ark = t.path(&format!("ark-{case}"));
        for args in [
            vec![
                "import",
                file.to_str().unwrap(),
                "--environments-as-of",
                "2022-01-01",
            ],
            vec![
                "mirror",
                "add",
                repo.to_str().unwrap(),
                "--name",
                "acme/app",
            ],
        ] {
            let out = swe_ark(&ark, &args);
            assert!(out.status.success(), "{}", common::stderr(&out));
        }
        let out = swe_ark(
            &ark,
            &[
                "env",
                "lock",
                "acme/app",
                "rust-latest",
                "--index-url",
                &reg.url,
                "--no-pack-runtime",
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(2),
            "{case}: {}",
            common::stderr(&out)
        );
        assert!(
            common::stderr(&out).contains(says),
            "{case}: {}",
            common::stderr(&out)
        );
        let locks = swe_ark(&ark, &["env", "ls", "--json"]);
        assert_eq!(stdout(&locks).trim(), "[]", "{case}: nothing recorded");
    }
}

/// A crate with no dependency whose `add` subtracts, and one test that passes.
const TINY_LIB: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n\n\
#[cfg(test)]\nmod tests {\n    #[test]\n    fn zero_works() {\n        assert_eq!(super::add(0, 0), 0);\n    }\n}\n";

const TINY_TEST_PATCH: &str = "diff --git a/tests/add.rs b/tests/add.rs\nnew file mode 100644\n\
--- /dev/null\n+++ b/tests/add.rs\n@@ -0,0 +1,4 @@\n+#[test]\n+fn add_works() {\n\
+    assert_eq!(tiny::add(1, 2), 3);\n+}\n";

#[test]
fn a_repository_no_manifest_names_gets_a_context_from_its_cargo_toml_recorded_in_the_lock() {
    if !common::can_unshare() {
        eprintln!("skipped: no namespaces here");
        return;
    }
    let t = TestContext::new();
    // Manifests that name another repository only.
    let manifests = t.manifests_with("acme__app.toml", MANIFEST);
    let swe_ark = |args: &[&str]| {
        t.cmd()
            .env("SWE_ARK_MANIFESTS", &manifests)
            .args(args)
            .output()
            .unwrap()
    };
    let run = |args: &[&str]| t.run_ok_with_manifests(&manifests, args);
    let repo = t.path("tiny");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    std::fs::write(
        repo.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(repo.join("src/lib.rs"), TINY_LIB).unwrap();
    std::fs::write(repo.join(".gitignore"), "/target\n").unwrap();
    let base = git_init_commit(&repo, "tiny", DATE);
    // A row that names no version, as Multi-SWE-bench's do.
    let row = serde_json::json!({
        "repo": "acme/tiny", "instance_id": "acme__tiny-3", "base_commit": base,
        "patch": GOLD, "test_patch": TINY_TEST_PATCH, "problem_statement": "add subtracts",
        "FAIL_TO_PASS": "[\"add_works\"]", "PASS_TO_PASS": "[\"tests::zero_works\"]",
    });
    let file = t.path("instances.jsonl");
    std::fs::write(&file, format!("{row}\n")).unwrap();
    let out = swe_ark(&[
        "import",
        file.to_str().unwrap(),
        "--environments-as-of",
        "2022-01-01",
    ]);
    assert!(
        common::stderr(&out).contains("they get version `inferred`"),
        "{}",
        common::stderr(&out)
    );
    run(&[
        "mirror",
        "add",
        repo.to_str().unwrap(),
        "--name",
        "acme/tiny",
    ]);
    let reg = registry(&t.path("registry"));

    // A version none of its instances has: the error lists theirs.
    let out = swe_ark(&["env", "lock", "acme/tiny", "rust-latest"]);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    assert!(
        common::stderr(&out).contains("none is at version rust-latest")
            && common::stderr(&out).contains("inferred (1)"),
        "{}",
        common::stderr(&out)
    );

    let lock = run(&[
        "env",
        "lock",
        "acme/tiny",
        "inferred",
        "--index-url",
        &reg.url,
        "--no-pack-runtime",
        "--json",
    ]);
    let lock: serde_json::Value = serde_json::from_str(&lock).unwrap();
    assert_eq!(lock["inferred"]["from"], "Cargo.toml", "{lock}");
    assert_eq!(lock["inferred"]["commit"], base.as_str(), "{lock}");
    drop(reg);
    // The lock as stored says so, with the manifest that gives the context and what to do.
    let id = lock["id"].as_str().unwrap();
    let shown = run(&["env", "show", id]);
    for needle in [
        "[inferred]",
        "from = \"Cargo.toml\"",
        "acme__tiny.toml",
        "--manifests DIR",
        "kind = \"rust\"",
    ] {
        assert!(shown.contains(needle), "{needle}: {shown}");
    }
    let listed: serde_json::Value = serde_json::from_str(&run(&["env", "ls", "--json"])).unwrap();
    assert_eq!(listed[0]["inferred_from"], "Cargo.toml", "{listed}");

    // Validated and replayed offline with the context the lock recorded.
    run(&["validate", "--repo", "acme/tiny"]);
    let rows: serde_json::Value =
        serde_json::from_str(&run(&["ls", "--validated", "--json"])).unwrap();
    let row = &rows[0];
    assert_eq!(row["verdict"], "kept", "{row}");
    assert_eq!(row["fail_to_pass"], 1, "{row}");
    assert_eq!(row["pass_to_pass"], 1, "{row}");
    run(&["pack", "--all-validated"]);
    run(&["replay", "--gold", "--run-id", "gold"]);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(t.ark().join("runs/gold/gold.gold.json")).unwrap())
            .unwrap();
    assert_eq!(summary["resolved_instances"], 1, "{summary}");
}

#[test]
fn a_repository_with_no_manifest_and_no_build_file_is_told_what_to_write() {
    let t = TestContext::new();
    let manifests = t.manifests_with("acme__app.toml", MANIFEST);
    let repo = t.path("docs");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("README.md"), "words\n").unwrap();
    let base = git_init_commit(&repo, "docs", DATE);
    let row = serde_json::json!({
        "repo": "acme/docs", "instance_id": "acme__docs-1", "base_commit": base,
        "patch": GOLD, "test_patch": TEST_PATCH, "problem_statement": "p",
    });
    let file = t.path("instances.jsonl");
    std::fs::write(&file, format!("{row}\n")).unwrap();
    let swe_ark = |args: &[&str]| {
        t.cmd()
            .env("SWE_ARK_MANIFESTS", &manifests)
            .args(args)
            .output()
            .unwrap()
    };
    // Without a mirror: what to write, or what inference needs.
    let out = swe_ark(&["env", "lock", "acme/docs", "inferred"]);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    let e = common::stderr(&out);
    assert!(
        e.contains("no manifest describes repository acme/docs")
            && e.contains("acme__docs.toml")
            && e.contains("mirror add"),
        "{e}"
    );
    for args in [
        vec!["import", file.to_str().unwrap()],
        vec![
            "mirror",
            "add",
            repo.to_str().unwrap(),
            "--name",
            "acme/docs",
        ],
    ] {
        let out = swe_ark(&args);
        assert!(out.status.success(), "{}", common::stderr(&out));
    }
    let out = swe_ark(&["env", "lock", "acme/docs", "inferred"]);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    let e = common::stderr(&out);
    for needle in [
        "no manifest describes repository acme/docs",
        &base,
        "Cargo.toml, package.json, CMakeLists.txt, configure.ac, configure, meson.build",
        "acme__docs.toml (manifests/README.md says how)",
        "--manifests DIR",
    ] {
        assert!(e.contains(needle), "{needle}: {e}");
    }
    let locks = swe_ark(&["env", "ls", "--json"]);
    assert_eq!(stdout(&locks).trim(), "[]", "nothing recorded");
}
