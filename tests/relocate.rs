//! An archive is a directory a user copies, moves, rsyncs and mounts elsewhere: nothing in it
//! may lead swe-ark back to where it was. A release of the widget fixture is imported and
//! replayed once (so that every cache is made: the built environment and its copy for the
//! fixed layout, the installed state's environment, the kept work tree, the unpacked
//! interpreter, pip's seeds), then copied with `cp -a`:
//!
//! - the original moved away, the copy replays: resolved, and nothing made again at the
//!   original's place;
//! - the original present (its environments made to fail the tests: a copy that used them
//!   would not resolve), a copy whose `env.json` is as swe-ark wrote it before (format 2,
//!   naming the original's places) is named by `gc --dry-run`, replays resolved, and the
//!   original is unchanged to the last byte and time;
//! - a copy given to an unprivileged user: its `gc` removes the environment built where the
//!   original is, and its replay resolves.

mod common;

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::widget::{ADD_TEST, GOLD, Widget, instance, test_patch};
use common::{TestContext, stderr, stdout};

const INSTANCE: &str = "acme__widget-1";

/// Every entry under `root` as `ls -lR` would tell it apart, and more: kind, mode, owner,
/// size, modification time to the nanosecond, and the content's (or link's) bytes hashed.
fn fingerprint(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let content = if m.file_type().is_symlink() {
                std::fs::read_link(&p)
                    .unwrap()
                    .as_os_str()
                    .as_bytes()
                    .to_vec()
            } else if m.is_file() {
                std::fs::read(&p).unwrap()
            } else {
                stack.push(p.clone());
                Vec::new()
            };
            out.insert(
                p.strip_prefix(root).unwrap().to_path_buf(),
                format!(
                    "{:o} {}:{} {} {}.{} {}",
                    m.mode(),
                    m.uid(),
                    m.gid(),
                    m.len(),
                    m.mtime(),
                    m.mtime_nsec(),
                    common::sha256_hex(&content)
                ),
            );
        }
    }
    // The directory itself: an entry made in it and removed again changes its time.
    let m = std::fs::metadata(root).unwrap();
    out.insert(PathBuf::new(), format!("{}.{}", m.mtime(), m.mtime_nsec()));
    out
}

/// The files under `root` whose bytes hold `needle`, two kinds aside: compiled modules
/// (`.pyc`: a code object keeps the path it was compiled at, which Python replaces with the
/// module's own as it imports it, `_imp._fix_co_filename`, and nothing else reads), and uv's
/// own cache (`cache/uv`: what it learned of an interpreter, filed under that interpreter's
/// path, which a copy never asks for).
fn files_naming(root: &Path, needle: &Path) -> Vec<PathBuf> {
    let needle = needle.as_os_str().as_bytes();
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                if !p.ends_with("cache/uv") {
                    stack.push(p);
                }
                continue;
            }
            let bytes = if m.file_type().is_symlink() {
                std::fs::read_link(&p)
                    .unwrap()
                    .as_os_str()
                    .as_bytes()
                    .to_vec()
            } else if p.extension().is_some_and(|x| x == "pyc") {
                continue;
            } else {
                std::fs::read(&p).unwrap()
            };
            if bytes.windows(needle.len()).any(|w| w == needle) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// `DIR/**/lib/python*/site-packages`: where the environments under `dir` keep their packages.
fn site_packages(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if !e.file_type().unwrap().is_dir() {
                continue;
            }
            let in_lib = p
                .parent()
                .and_then(Path::file_name)
                .is_some_and(|n| n.to_string_lossy().starts_with("python"));
            if p.file_name().is_some_and(|n| n == "site-packages") && in_lib {
                out.push(p);
            } else {
                stack.push(p);
            }
        }
    }
    out
}

/// The one built environment's record in the archive at `ark`: its directory and `env.json`.
fn env_record(ark: &Path) -> (PathBuf, serde_json::Value) {
    let dirs: Vec<PathBuf> = std::fs::read_dir(ark.join("envs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let json = std::fs::read(dirs[0].join("env.json")).unwrap();
    (dirs[0].clone(), serde_json::from_slice(&json).unwrap())
}

/// A record written where the archive at `ark` is: it names no place but the build's own
/// directory, which it was made at; the interpreter is the archive's, named within it.
fn assert_built_here(ark: &Path) {
    let (dir, env) = env_record(ark);
    assert_eq!(env["made_at"].as_str(), dir.to_str(), "{env}");
    assert_eq!(env["format"], 3, "{env}");
    let interpreter = env["interpreter"].as_str().unwrap();
    assert!(interpreter.starts_with("pythons/"), "{env}");
    for key in ["dir", "venv", "wheelhouse"] {
        assert!(env.get(key).is_none(), "{key} in {env}");
    }
}

fn cp_a(from: &Path, to: &Path) {
    let ok = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(ok.success(), "cp -a {} {}", from.display(), to.display());
}

/// The replay report of `run` in `ark`: every instance resolved, and what the one instance's
/// report says of the installed state it started from.
fn assert_resolved(ark: &Path, out: &Output, run: &str) -> String {
    assert!(out.status.success(), "{}", stderr(out));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary[0]["resolved_instances"],
        1,
        "{summary}\n{}",
        stderr(out)
    );
    let report = ark.join(format!("runs/{run}/gold/{INSTANCE}/report.json"));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap();
    report[INSTANCE]["installed_state"]["how"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn a_copied_or_moved_archive_uses_and_writes_only_itself() {
    let t = TestContext::new();
    let Some(w) = Widget::new(&t) else { return };
    w.mirror_lock_import(
        &t,
        &[instance(1, &test_patch(ADD_TEST), GOLD, &[], &[], &w.base)],
    );
    w.ok(&t, &["validate"]);
    w.ok(&t, &["pack", "--all-validated"]);
    let snapshot = t.path("r1.json");
    let file = t.path("r1.ark");
    w.ok(
        &t,
        &["release", "create", "r1", "-o", snapshot.to_str().unwrap()],
    );
    w.ok(
        &t,
        &[
            "export",
            "--release",
            snapshot.to_str().unwrap(),
            "-o",
            file.to_str().unwrap(),
        ],
    );
    // The imported archives keep every cache of their own (no machine-wide cache): the
    // unpacked interpreter and pip's seeds are theirs, and move with them.
    let swe = |ark: &Path| {
        let mut c = w.cmd_at(&t, ark);
        c.env_remove("SWE_ARK_SHARED_CACHE");
        c
    };
    let run = |ark: &Path, args: &[&str]| swe(ark).args(args).output().unwrap();
    let replay = |ark: &Path, id: &str| {
        run(
            ark,
            &["replay", "--gold", "--run-id", id, "--json", "--force"],
        )
    };

    let imp1 = t.path("imp1");
    let out = run(&imp1, &["import-archive", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let made = assert_resolved(&imp1, &replay(&imp1, "first"), "first");
    assert_eq!(made, "made");
    assert_built_here(&imp1);
    assert!(imp1.join("cache/pip-seeds").is_dir() && imp1.join("pythons").is_dir());
    assert!(
        files_naming(&imp1.join("cache"), &imp1).is_empty(),
        "pip's seeds name where they were taken"
    );
    let (imp2, imp3, imp4) = (t.path("imp2"), t.path("imp3"), t.path("imp4"));
    for copy in [&imp2, &imp3, &imp4] {
        cp_a(&imp1, copy);
    }

    // The original moved away: the copy replays from its own caches, and nothing is made
    // again where the original was.
    let away = t.path("moved-away");
    std::fs::rename(&imp1, &away).unwrap();
    let out = replay(&imp2, "moved");
    assert_eq!(assert_resolved(&imp2, &out, "moved"), "kept");
    assert!(!imp1.exists(), "{} was made again", imp1.display());
    assert_built_here(&imp2);
    assert_eq!(
        files_naming(&imp2, &imp1),
        Vec::<PathBuf>::new(),
        "the copy still names the original's place"
    );
    std::fs::rename(&away, &imp1).unwrap();

    // The original present, and its environments made to fail a test that passes: a run
    // that used them would not resolve.
    for site in site_packages(&imp1.join("envs")) {
        std::fs::write(
            site.join("relocate_breaker.py"),
            "import os\nos.environ['PYTEST_PLUGINS'] = 'relocate_breaker'\n\n\n\
             def pytest_runtest_call(item):\n    if item.name == 'test_sub':\n        \
             raise AssertionError('the original archive was used')\n",
        )
        .unwrap();
        std::fs::write(
            site.join("relocate_breaker.pth"),
            "import relocate_breaker\n",
        )
        .unwrap();
    }
    let before = fingerprint(&imp1);
    // The copy's record as swe-ark wrote it before relocatable archives: absolute places,
    // the original's.
    let (dir3, env) = env_record(&imp3);
    let lock = env["lock"].as_str().unwrap();
    let at1 = imp1.join("envs").join(lock);
    let old = serde_json::json!({
        "lock": lock,
        "dir": at1,
        "venv": at1.join("venv"),
        "wheelhouse": at1.join("wheelhouse"),
        "installer": env["installer"],
        "python": env["python"],
        "interpreter": imp1.join(env["interpreter"].as_str().unwrap()),
        "installed": env["installed"],
        "cached": false,
        "seconds": 1.0,
        "services": {"web": at1.join("services/web")},
        "format": 2,
    });
    std::fs::write(
        dir3.join("env.json"),
        serde_json::to_vec_pretty(&old).unwrap(),
    )
    .unwrap();
    let out = run(&imp3, &["gc", "--dry-run", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let gc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let named = &gc["environments"]["builds_removed"];
    assert_eq!(named[0]["dir"].as_str(), dir3.to_str(), "{gc}");
    assert!(
        named[0]["why"].as_str().unwrap().contains("older swe-ark"),
        "{gc}"
    );
    assert!(dir3.join("env.json").is_file(), "a dry run removed it");
    let out = replay(&imp3, "beside");
    assert_eq!(assert_resolved(&imp3, &out, "beside"), "kept");
    assert_built_here(&imp3);
    let out = run(&imp3, &["gc", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let gc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        gc["environments"]["builds_removed"],
        serde_json::json!([]),
        "{gc}"
    );
    assert!(dir3.join("env.json").is_file());
    assert_eq!(
        fingerprint(&imp1),
        before,
        "replaying a copy changed the original"
    );

    // A copy given to an unprivileged user, who cannot write the original: its gc removes
    // the environment built where the original is, and its replay resolves.
    unprivileged_user_replays(&t, &w, &imp4, &imp1);
    assert_eq!(
        fingerprint(&imp1),
        before,
        "another user's copy changed the original"
    );
}

/// As uid and gid 65534 (when the test runs as root): `copy`, a `cp -a` of the root-owned
/// `original`, given to that user, then its `gc` and its replay.
fn unprivileged_user_replays(t: &TestContext, w: &Widget, copy: &Path, original: &Path) {
    if let Some(why) = common::nobody_with_namespaces_unavailable() {
        eprintln!("skipped the unprivileged user: {why}");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let ok = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(copy)
        .status()
        .unwrap();
    assert!(ok.success());
    let home = t.path("nobody-home");
    std::fs::create_dir_all(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(65534), Some(65534)).unwrap();
    // The test's directory is root's (0700): the other user may pass through it only.
    std::fs::set_permissions(t.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let as_nobody = |args: &[&str]| {
        let mut c = w.cmd_at(t, copy);
        c.env_remove("SWE_ARK_SHARED_CACHE")
            .env("HOME", &home)
            .current_dir(&home)
            .args(args);
        common::as_nobody(&c).output().unwrap()
    };
    let probe = as_nobody(&["--version"]);
    if !probe.status.success() {
        eprintln!(
            "skipped the unprivileged user: uid 65534 cannot run this test's swe-ark: {}",
            stderr(&probe)
        );
        return;
    }
    let out = as_nobody(&["gc", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let gc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let removed = &gc["environments"]["builds_removed"];
    let envs = copy.join("envs");
    assert_eq!(removed.as_array().map(Vec::len), Some(1), "{gc}");
    let why = removed[0]["why"].as_str().unwrap();
    assert!(
        removed[0]["dir"]
            .as_str()
            .unwrap()
            .starts_with(envs.to_str().unwrap())
            && why.contains(original.to_str().unwrap())
            && why.contains("moved or copied"),
        "{gc}"
    );
    let out = as_nobody(&[
        "replay", "--gold", "--run-id", "nobody", "--json", "--force",
    ]);
    assert_eq!(
        assert_resolved(copy, &out, "nobody"),
        "kept",
        "{}",
        stdout(&out)
    );
    assert_built_here(copy);
}
