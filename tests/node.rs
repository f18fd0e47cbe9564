//! The node kind, end to end, with real npm and a registry on 127.0.0.1: a package published
//! twice (the second release, after the cutoff, breaks a test), a repository made by code with
//! no package-lock.json, its instance imported, mirrored, locked (a lockfile resolved as of the
//! cutoff, every tarball kept by its integrity), validated, packed and replayed offline with the
//! registry gone.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use common::{TestContext, git_commit_all, git_init_commit};

const DATE: &str = "2021-03-01T00:00:00Z";

const INDEX: &str = "const dep = require('sweark-dep');\n\
exports.add = (a, b) => a - b;\n\
exports.twice = (x) => dep.double(x);\n";

/// Prints what jest's verbose reporter prints (`PASS file`, `✓ title`): what the log parser of
/// Multi-SWE-bench's dayjs reads.
const RUNNER: &str = "const fs = require('fs');\nlet failed = false;\n\
for (const f of fs.readdirSync('test').sort()) {\n\
  const tests = require('./test/' + f);\n  let ok = true;\n  const lines = [];\n\
  for (const [name, fn] of Object.entries(tests)) {\n\
    let pass = false;\n    try { pass = fn() === true; } catch (e) { pass = false; }\n\
    lines.push((pass ? '  \u{2713} ' : '  \u{2715} ') + name);\n    if (!pass) ok = false;\n  }\n\
  console.log((ok ? 'PASS ' : 'FAIL ') + 'test/' + f);\n\
  for (const l of lines) console.log(l);\n  if (!ok) failed = true;\n}\n\
process.exit(failed ? 1 : 0);\n";

const TWICE_TEST: &str =
    "const app = require('..');\nexports['twice works'] = () => app.twice(2) === 4;\n";

const GOLD: &str = "diff --git a/index.js b/index.js\n--- a/index.js\n+++ b/index.js\n\
@@ -1,3 +1,3 @@\n const dep = require('sweark-dep');\n-exports.add = (a, b) => a - b;\n\
+exports.add = (a, b) => a + b;\n exports.twice = (x) => dep.double(x);\n";

const TEST_PATCH: &str = "diff --git a/test/add.test.js b/test/add.test.js\nnew file mode 100644\n\
--- /dev/null\n+++ b/test/add.test.js\n@@ -0,0 +1,2 @@\n+const app = require('..');\n\
+exports['add works'] = () => app.add(1, 2) === 3;\n";

const MANIFEST: &str = r#"repo = "acme/app"
kind = "node"
source = "written for this test"
log_parser = "msb_dayjs"

[defaults]
install = "npm ci --offline"
test_cmd = "node run-tests.js"

[versions."node"]
"#;

/// `sweark-dep` at `version`, packed by npm itself: its tarball, integrity and shasum.
fn package(dir: &Path, version: &str, factor: i32) -> (Vec<u8>, String, String) {
    let src = dir.join(format!("dep-{version}"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("package.json"),
        format!(
            "{{\"name\": \"sweark-dep\", \"version\": \"{version}\", \"main\": \"index.js\", \
             \"bin\": {{\"sweark-run\": \"run.js\"}}, \"license\": \"MIT\"}}\n"
        ),
    )
    .unwrap();
    // The test runner, as a package's `bin`: what `npm ci` links into node_modules/.bin.
    std::fs::write(
        src.join("run.js"),
        format!(
            "#!/usr/bin/env node\n{}",
            RUNNER.replace("'./test/'", "process.cwd() + '/test/'")
        ),
    )
    .unwrap();
    std::fs::write(
        src.join("index.js"),
        format!("exports.double = (x) => x * {factor};\n"),
    )
    .unwrap();
    let out = Command::new("npm")
        .args(["pack", "--json", "--pack-destination"])
        .arg(dir)
        .current_dir(&src)
        .env("npm_config_cache", dir.join("npm-cache"))
        .env("npm_config_update_notifier", "false")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let field = |k: &str| info[0][k].as_str().unwrap().to_string();
    let bytes = std::fs::read(dir.join(field("filename"))).unwrap();
    (bytes, field("integrity"), field("shasum"))
}

/// An npm registry on 127.0.0.1: the packument of `sweark-dep` (with its versions'
/// publication times) and its tarballs.
struct Registry {
    url: String,
    /// Each version's integrity.
    integrity: BTreeMap<String, String>,
    _server: Arc<tiny_http::Server>,
}

fn registry(dir: &Path) -> Registry {
    let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
    let port = server.server_addr().to_ip().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/");
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut versions = serde_json::Map::new();
    let mut time = serde_json::Map::new();
    let mut integrities = BTreeMap::new();
    // 1.0.1 came out after the cutoff, and doubles wrong.
    for (version, factor, published) in [
        ("1.0.0", 2, "2020-01-01T00:00:00.000Z"),
        ("1.0.1", 3, "2024-01-01T00:00:00.000Z"),
    ] {
        let (bytes, integrity, shasum) = package(dir, version, factor);
        let path = format!("sweark-dep/-/sweark-dep-{version}.tgz");
        versions.insert(
            version.into(),
            serde_json::json!({
                "name": "sweark-dep", "version": version, "main": "index.js",
                "bin": {"sweark-run": "run.js"},
                "dist": {"tarball": format!("{url}{path}"), "integrity": integrity.clone(), "shasum": shasum},
            }),
        );
        time.insert(version.into(), published.into());
        integrities.insert(version.to_string(), integrity.clone());
        files.insert(format!("/{path}"), bytes);
    }
    time.insert("created".into(), "2020-01-01T00:00:00.000Z".into());
    time.insert("modified".into(), "2024-01-01T00:00:00.000Z".into());
    let packument = serde_json::json!({
        "name": "sweark-dep", "dist-tags": {"latest": "1.0.1"},
        "versions": versions, "time": time,
    });
    files.insert("/sweark-dep".into(), packument.to_string().into_bytes());
    let served = Arc::new(Mutex::new(files));
    let srv = server.clone();
    std::thread::spawn(move || {
        for req in srv.incoming_requests() {
            let body = served.lock().unwrap().get(req.url()).cloned();
            let resp = match body {
                Some(b) => tiny_http::Response::from_data(b),
                None => tiny_http::Response::from_data(Vec::new()).with_status_code(404),
            };
            let _ = req.respond(resp);
        }
    });
    Registry {
        url,
        integrity: integrities,
        _server: server,
    }
}

fn repository(dir: &Path) -> String {
    std::fs::create_dir_all(dir.join("test")).unwrap();
    std::fs::write(
        dir.join("package.json"),
        "{\n  \"name\": \"app\",\n  \"version\": \"0.1.0\",\n  \"main\": \"index.js\",\n  \
         \"dependencies\": {\"sweark-dep\": \"^1.0.0\"}\n}\n",
    )
    .unwrap();
    std::fs::write(dir.join("index.js"), INDEX).unwrap();
    std::fs::write(dir.join("run-tests.js"), RUNNER).unwrap();
    std::fs::write(dir.join("test/twice.test.js"), TWICE_TEST).unwrap();
    std::fs::write(dir.join(".gitignore"), "node_modules/\n").unwrap();
    git_init_commit(dir, "app", DATE);
    git_commit_all(dir, "app", DATE)
}

#[test]
fn a_node_context_locks_as_of_its_date_and_validates_and_replays_offline() {
    if !common::can_unshare() {
        eprintln!("skipped: no namespaces here");
        return;
    }
    if Command::new("npm").arg("--version").output().is_err() {
        eprintln!("skipped: no npm here");
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
        "hints_text": "", "created_at": "", "version": "node",
        // The parser records each suite as a test too, as Multi-SWE-bench's does.
        "FAIL_TO_PASS": "[\"test/add.test.js\", \"test/add.test.js:add works\"]",
        "PASS_TO_PASS": "[\"test/twice.test.js\", \"test/twice.test.js:twice works\"]",
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
        "node",
        "--index-url",
        &reg.url,
        "--no-pack-runtime",
        "--json",
    ]);
    let lock: serde_json::Value = serde_json::from_str(&lock).unwrap();
    assert_eq!(lock["tarballs"], 1, "{lock}");
    assert_eq!(lock["generated_locks"], 1, "{lock}");
    assert_eq!(lock["exclude_newer"], "2022-01-01T00:00:00Z");
    drop(reg);

    run(&["validate", "--repo", "acme/app"]);
    let rows: serde_json::Value =
        serde_json::from_str(&run(&["ls", "--validated", "--json"])).unwrap();
    let row = &rows[0];
    assert_eq!(row["verdict"], "kept", "{row}");
    assert_eq!(row["fail_to_pass"], 2, "{row}");
    assert_eq!(
        row["pass_to_pass"], 2,
        "the dependency as of 2022 doubles right: {row}"
    );

    run(&["pack", "--all-validated"]);
    let shown: serde_json::Value =
        serde_json::from_str(&run(&["show", "acme__app-7", "--json"])).unwrap();
    assert!(shown.to_string().contains("env/node-lock.toml"), "{shown}");
    run(&["replay", "--gold", "--run-id", "gold"]);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(t.ark().join("runs/gold/gold.gold.json")).unwrap())
            .unwrap();
    assert_eq!(summary["resolved_instances"], 1, "{summary}");
}

/// A base commit whose package-lock.json is of version 1 (npm 6's): npm 10 would install it
/// offline without linking its packages' `bin` entries, so the lock upgrades it online (its
/// versions kept) and every offline install uses the upgrade.
#[test]
fn a_version_one_lockfile_is_upgraded_so_its_packages_bins_are_linked_offline() {
    if !common::can_unshare() {
        eprintln!("skipped: no namespaces here");
        return;
    }
    if Command::new("npm").arg("--version").output().is_err() {
        eprintln!("skipped: no npm here");
        return;
    }
    let t = TestContext::new();
    let manifests = t.manifests_with(
        "acme__app.toml",
        // The tests run only where Multi-SWE-bench's images have the tree, as its rows'
        // instances do here.
        &MANIFEST.replace(
            "node run-tests.js",
            "test \\\"$PWD\\\" = /home/app && node_modules/.bin/sweark-run",
        ),
    );
    let run = |args: &[&str]| t.run_ok_with_manifests(&manifests, args);
    let reg = registry(&t.path("registry"));
    let repo = t.path("app");
    repository(&repo);
    // What npm 6 wrote: the version locked is 1.0.0, older than the cutoff's newest.
    let v1 = serde_json::json!({
        "name": "app", "version": "0.1.0", "lockfileVersion": 1, "requires": true,
        "dependencies": {"sweark-dep": {
            "version": "1.0.0",
            "resolved": format!("{}sweark-dep/-/sweark-dep-1.0.0.tgz", reg.url),
            "integrity": reg.integrity["1.0.0"],
        }},
    });
    std::fs::write(
        repo.join("package-lock.json"),
        format!("{}\n", serde_json::to_string_pretty(&v1).unwrap()),
    )
    .unwrap();
    let base = git_commit_all(&repo, "app", DATE);
    // Multi-SWE-bench's own row form: its run is graded and reported in that form too.
    let (pass, fail, none) = ("PASS", "FAIL", "NONE");
    let status = |run: &str, test: &str, fix: &str| serde_json::json!({"run": run, "test": test, "fix": fix});
    let twice = ["test/twice.test.js", "test/twice.test.js:twice works"];
    let add = ["test/add.test.js", "test/add.test.js:add works"];
    let result = |passed: Vec<&str>, failed: Vec<&str>| {
        serde_json::json!({
            "passed_count": passed.len(), "failed_count": failed.len(), "skipped_count": 0,
            "passed_tests": passed, "failed_tests": failed, "skipped_tests": [],
        })
    };
    let f2p: serde_json::Map<String, serde_json::Value> = add
        .iter()
        .map(|n| (n.to_string(), status(none, fail, pass)))
        .collect();
    let p2p: serde_json::Map<String, serde_json::Value> = twice
        .iter()
        .map(|n| (n.to_string(), status(pass, pass, pass)))
        .collect();
    let row = serde_json::json!({
        "org": "acme", "repo": "app", "number": 8, "state": "closed",
        "title": "add subtracts", "body": "",
        "base": {"label": "acme:main", "ref": "main", "sha": base},
        "resolved_issues": [{"number": 7, "title": "add subtracts", "body": "1 + 2 is -1"}],
        "fix_patch": GOLD, "test_patch": TEST_PATCH,
        "fixed_tests": f2p, "p2p_tests": p2p, "f2p_tests": f2p, "s2p_tests": {}, "n2p_tests": {},
        "run_result": result(twice.to_vec(), vec![]),
        "test_patch_result": result(twice.to_vec(), add.to_vec()),
        "fix_patch_result": result([twice, add].concat(), vec![]),
        "instance_id": "acme__app-8", "language": "javascript",
    });
    let file = t.path("instances.jsonl");
    std::fs::write(&file, format!("{row}\n")).unwrap();
    run(&[
        "import",
        file.to_str().unwrap(),
        "--dataset",
        "app",
        "--environments-as-of",
        "2025-01-01",
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
        "node",
        "--index-url",
        &reg.url,
        "--no-pack-runtime",
        "--json",
    ]);
    let lock: serde_json::Value = serde_json::from_str(&lock).unwrap();
    assert_eq!(lock["tarballs"], 1, "the locked 1.0.0 only: {lock}");
    assert_eq!(lock["generated_locks"], 1, "the upgrade: {lock}");
    drop(reg);

    run(&["validate", "--repo", "acme/app"]);
    let rows: serde_json::Value =
        serde_json::from_str(&run(&["ls", "--validated", "--json"])).unwrap();
    let row = &rows[0];
    assert_eq!(row["verdict"], "kept", "the runner's bin was linked: {row}");
    assert_eq!(row["pass_to_pass"], 2, "1.0.0 as locked: {row}");

    run(&["pack", "--all-validated"]);
    run(&["replay", "--gold", "--run-id", "gold"]);
    let report = std::fs::read_to_string(t.ark().join("runs/gold/gold.gold.final_report.json"))
        .expect("Multi-SWE-bench's final_report.json form, beside SWE-bench's");
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(
        report["resolved_ids"],
        serde_json::json!(["acme/app:pr-8"]),
        "{report}"
    );
    assert_eq!(report["completed_instances"], 1, "{report}");
}
