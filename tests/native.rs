//! The native (C/C++) kind, end to end, with no internet: two tiny Debian packages built here
//! (`dpkg-deb --build`: a test driver in `usr/bin`, beside a program that has no `--version`,
//! and the library file the driver reads from its own prefix) served as a flat repository on
//! 127.0.0.1, a C repository made by code whose test target compiles with the machine's gcc
//! and prints automake's `PASS:`/`FAIL:` lines, its instance imported, mirrored, locked (the
//! closure taken, the machine's part left out, every program started), validated (each run
//! from a fresh tree: its configure step's output seen every time; the machine's `od`, which
//! the context hides, not found), packed and replayed with the server gone and the network
//! cut. And a lock refused, naming each program of its package that cannot start.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use common::{TestContext, git_commit_all, git_init_commit, sha256_hex};

const DATE: &str = "2021-03-01T00:00:00Z";

const MANIFEST: &str = r#"repo = "acme/calc"
kind = "native"
source = "written for this test"
log_parser = "msb_jq"

[defaults]
debian = ["sweark-check"]
hidden_programs = ["od"]
test_cmd = "make check"

[versions."gcc"]
"#;

const ADD_C: &str = "int add(int a, int b) { return a - b; }\n";

const GOLD: &str = "diff --git a/add.c b/add.c\n--- a/add.c\n+++ b/add.c\n@@ -1 +1 @@\n\
-int add(int a, int b) { return a - b; }\n+int add(int a, int b) { return a + b; }\n";

const TEST_PATCH: &str = "diff --git a/tests/add.c b/tests/add.c\nnew file mode 100644\n\
--- /dev/null\n+++ b/tests/add.c\n@@ -0,0 +1,2 @@\n+int add(int, int);\n\
+int main(void) { return add(1, 2) == 3 ? 0 : 1; }\n";

/// The driver: compiles each `tests/*.c` with the project's sources and says how it went, in
/// the words its library file (found beside it in the prefix) gives.
const DRIVER: &str = "#!/bin/sh\n\
if [ \"$1\" = --version ]; then echo 'sweark-check 1.0'; exit 0; fi\n\
. \"$(dirname \"$0\")/../share/sweark-check/words.sh\"\n\
for t in tests/*.c; do n=$(basename \"$t\" .c)\n\
  if cc -o \"/tmp/$n\" \"$t\" $SOURCES && \"/tmp/$n\"; then echo \"$PASS: $n\"; else echo \"$FAIL: $n\"; fi\n\
done\n";

/// A program of a package that does not know `--version`, as python3's `pdb3`: it wants a
/// file, and says so.
const DEBUG: &str = "#!/bin/sh\necho 'usage: sweark-debug FILE' >&2\nexit 2\n";

/// A package: its name, its `Depends`, and its files (path, bytes, executable).
type Package<'a> = (&'a str, &'a str, Vec<(&'a str, Vec<u8>, bool)>);

/// A `.deb` of `name` with `files` (path, bytes, executable) and `depends`.
fn deb(dir: &Path, name: &str, depends: &str, files: &[(&str, Vec<u8>, bool)]) -> Vec<u8> {
    use std::os::unix::fs::PermissionsExt;
    let root = dir.join(name);
    std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
    std::fs::write(
        root.join("DEBIAN/control"),
        format!(
            "Package: {name}\nVersion: 1.0-1\nArchitecture: all\nMaintainer: t <t@example.org>\n\
             Depends: {depends}\nDescription: a test package\n"
        ),
    )
    .unwrap();
    for (path, text, exe) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        let mode = if *exe { 0o755 } else { 0o644 };
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let out_file = dir.join(format!("{name}.deb"));
    let out = Command::new("dpkg-deb")
        .args(["--root-owner-group", "--build"])
        .arg(&root)
        .arg(&out_file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    std::fs::read(out_file).unwrap()
}

/// A flat repository on 127.0.0.1: `Packages` and the `.deb` files.
struct Repository {
    url: String,
    _server: Arc<tiny_http::Server>,
}

/// The driver (and a program without `--version`) and its words.
fn calc_packages() -> Vec<Package<'static>> {
    vec![
        (
            "sweark-check",
            "sweark-words, libc6 (>= 2.17), make",
            vec![
                ("usr/bin/sweark-check", DRIVER.into(), true),
                ("usr/bin/sweark-debug", DEBUG.into(), true),
            ],
        ),
        (
            "sweark-words",
            "dpkg",
            vec![(
                "usr/share/sweark-check/words.sh",
                "PASS=PASS\nFAIL=FAIL\n".into(),
                false,
            )],
        ),
    ]
}

fn debian_repository(dir: &Path, packages: &[Package]) -> Repository {
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut index = String::new();
    for (name, depends, contents) in packages {
        let bytes = deb(dir, name, depends, contents);
        index.push_str(&format!(
            "Package: {name}\nVersion: 1.0-1\nArchitecture: all\nDepends: {depends}\n\
             Filename: pool/{name}_1.0-1_all.deb\nSize: {}\nSHA256: {}\n\n",
            bytes.len(),
            sha256_hex(&bytes)
        ));
        files.insert(format!("/pool/{name}_1.0-1_all.deb"), bytes);
    }
    // dpkg is Debian's essential set: the machine's, never carried.
    index.push_str(
        "Package: dpkg\nVersion: 1.21.22\nArchitecture: amd64\nEssential: yes\n\
         Priority: required\nFilename: pool/dpkg.deb\nSize: 1\nSHA256: \
         0000000000000000000000000000000000000000000000000000000000000000\n",
    );
    files.insert("/Packages".into(), index.into_bytes());
    let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
    let port = server.server_addr().to_ip().unwrap().port();
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
    Repository {
        url: format!("http://127.0.0.1:{port}"),
        _server: server,
    }
}

fn c_repository(dir: &Path) -> String {
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    std::fs::write(dir.join("add.c"), ADD_C).unwrap();
    std::fs::write(
        dir.join("tests/one.c"),
        "int main(void) { return 1 - 1; }\n",
    )
    .unwrap();
    // A configure step, as cmake's: it says what it checked only when its build directory
    // is new (in Multi-SWE-bench's runs, every phase's is), and Catch2's parser reads what
    // it says as tests.
    std::fs::write(
        dir.join("Makefile"),
        "check:\n\t@mkdir -p build; if [ -e build/configured ]; then echo cached; \
         else echo 'PASS: configured'; touch build/configured; fi\n\
         \t@found=no; for d in $$(echo $$PATH | tr : ' '); do \
         if test -e $$d/od && ! test -d $$d/od && { test -x $$d/od || test -r $$d/od; }; \
         then found=yes; fi; done; \
         if [ $$found = no ]; then echo 'PASS: no-od'; else echo 'FAIL: no-od'; fi\n\
         \tSOURCES=add.c sweark-check\n",
    )
    .unwrap();
    git_init_commit(dir, "calc", DATE);
    git_commit_all(dir, "calc", DATE)
}

fn has_tools() -> bool {
    ["dpkg-deb", "cc", "make"].iter().all(|t| {
        Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

#[test]
fn a_native_context_carries_its_packages_and_validates_and_replays_offline() {
    if !common::can_unshare() || !has_tools() {
        eprintln!("skipped: no namespaces, or no dpkg-deb, cc and make here");
        return;
    }
    let t = TestContext::new();
    let manifests = t.manifests_with("acme__calc.toml", MANIFEST);
    let run = |args: &[&str]| t.run_ok_with_manifests(&manifests, args);
    calc_imported(&t, &manifests);
    let debs = debian_repository(&t.path("debian"), &calc_packages());
    let lock = run(&[
        "env",
        "lock",
        "acme/calc",
        "gcc",
        "--index-url",
        &debs.url,
        "--json",
    ]);
    let lock: serde_json::Value = serde_json::from_str(&lock).unwrap();
    assert_eq!(lock["packages"], 2, "the driver and its words: {lock}");
    // The proof started both programs: the one without `--version` did not fail it.
    assert_eq!(
        lock["proof"]["answered_version"],
        serde_json::json!(["sweark-check"]),
        "{lock}"
    );
    assert_eq!(
        lock["proof"]["started_without_version"],
        serde_json::json!([{"program": "sweark-debug", "exit": 2}]),
        "{lock}"
    );
    let machine: Vec<&str> = lock["from_machine"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().split(' ').next().unwrap())
        .collect();
    assert_eq!(machine, vec!["dpkg", "libc6", "make"], "{lock}");
    drop(debs);

    run(&["validate", "--repo", "acme/calc"]);
    let rows: serde_json::Value =
        serde_json::from_str(&run(&["ls", "--validated", "--json"])).unwrap();
    let row = &rows[0];
    // Each evaluation and run from the tree as checked out: the configure step's check is
    // seen in every run, neither missing after the gold patch nor flaky.
    assert_eq!(row["verdict"], "kept", "{row}");
    assert_eq!(row["fail_to_pass"], 1, "{row}");
    // The context hides the machine's `od`, as an image without it: a search along PATH by
    // cmake's rule (a file, executable or only readable: CMP0109's old behaviour) passes it by.
    assert_eq!(row["pass_to_pass"], 3, "{row}");
    assert_eq!(row["flaky"], 0, "{row}");

    run(&["pack", "--all-validated"]);
    let shown: serde_json::Value =
        serde_json::from_str(&run(&["show", "acme__calc-3", "--json"])).unwrap();
    assert!(
        shown.to_string().contains("env/native-lock.toml"),
        "{shown}"
    );
    run(&["verify", "--rebuild"]);
    // From the objects alone: the built environment is only a cache.
    std::fs::remove_dir_all(t.ark().join("envs")).unwrap();
    run(&["replay", "--gold", "--run-id", "gold"]);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(t.ark().join("runs/gold/gold.gold.json")).unwrap())
            .unwrap();
    assert_eq!(summary["resolved_instances"], 1, "{summary}");
}

/// `acme/calc`'s repository made, its instance imported and the repository mirrored, in `t`'s
/// archive.
fn calc_imported(t: &TestContext, manifests: &Path) {
    let run = |args: &[&str]| t.run_ok_with_manifests(manifests, args);
    let repo = t.path("calc");
    let base = c_repository(&repo);
    let row = serde_json::json!({
        "repo": "acme/calc", "instance_id": "acme__calc-3", "base_commit": base,
        "patch": GOLD, "test_patch": TEST_PATCH, "problem_statement": "add subtracts",
        "hints_text": "", "created_at": "", "version": "gcc",
        "FAIL_TO_PASS": "[\"add\"]", "PASS_TO_PASS": "[\"configured\", \"no-od\", \"one\"]",
        "environment_setup_commit": "",
    });
    let file = t.path("instances.jsonl");
    std::fs::write(&file, format!("{row}\n")).unwrap();
    run(&[
        "import",
        file.to_str().unwrap(),
        "--dataset",
        "calc",
        "--environments-as-of",
        "2022-01-01",
    ]);
    run(&[
        "mirror",
        "add",
        repo.to_str().unwrap(),
        "--name",
        "acme/calc",
    ]);
}

/// A program the loader cannot start: built here against a library its package lacks.
fn program_without_its_library(dir: &Path) -> Vec<u8> {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("gone.c"), "int gone(void) { return 0; }\n").unwrap();
    std::fs::write(
        dir.join("main.c"),
        "int gone(void);\nint main(void) { return gone(); }\n",
    )
    .unwrap();
    for args in [
        &["-shared", "-fPIC", "-o", "libswearkgone.so", "gone.c"][..],
        &["-o", "sweark-nolib", "main.c", "-L.", "-lswearkgone"],
    ] {
        let out = Command::new("cc")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "cc {args:?}: {}",
            common::stderr(&out)
        );
    }
    std::fs::read(dir.join("sweark-nolib")).unwrap()
}

#[test]
fn a_native_lock_names_each_program_of_its_packages_that_does_not_start() {
    if !common::can_unshare() || !has_tools() {
        eprintln!("skipped: no namespaces, or no dpkg-deb, cc and make here");
        return;
    }
    let t = TestContext::new();
    let manifest = MANIFEST.replace("[\"sweark-check\"]", "[\"sweark-broken\"]");
    let manifests = t.manifests_with("acme__calc.toml", &manifest);
    calc_imported(&t, &manifests);
    let nolib = program_without_its_library(&t.path("nolib"));
    let broken: Package = (
        "sweark-broken",
        "libc6",
        vec![
            // Its `#!` interpreter is nowhere.
            (
                "usr/bin/sweark-noint",
                "#!/usr/lib/sweark-gone/interpreter\n".into(),
                true,
            ),
            ("usr/bin/sweark-nolib", nolib, true),
            ("usr/bin/sweark-debug", DEBUG.into(), true),
        ],
    );
    let debs = debian_repository(&t.path("debian"), &[broken]);
    let out = t
        .cmd()
        .env("SWE_ARK_MANIFESTS", &manifests)
        .args(["env", "lock", "acme/calc", "gcc", "--index-url", &debs.url])
        .output()
        .unwrap();
    let err = common::stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("2 of the programs of [\"sweark-broken\"] did not start"),
        "{err}"
    );
    assert!(
        err.contains(
            "sweark-noint: its `#!` interpreter /usr/lib/sweark-gone/interpreter is not on this machine"
        ),
        "{err}"
    );
    assert!(
        err.contains("sweark-nolib: a library it needs is not found"),
        "{err}"
    );
    // Started, without a `--version`: not named.
    assert!(!err.contains("sweark-debug"), "{err}");
    // Nothing is recorded of a lock that is not proven (`env ls` lists the locks).
    let listed = t
        .cmd()
        .env("SWE_ARK_MANIFESTS", &manifests)
        .args(["env", "ls", "--json"])
        .output()
        .unwrap();
    assert!(
        !common::stdout(&listed).contains("acme/calc"),
        "{}",
        common::stdout(&listed)
    );
}
