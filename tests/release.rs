//! Releases: the fixture release rebuilt from scratch against its committed root hash, the
//! root recomputed by the documented Python script, exports that are the same bytes for the
//! same release, and a real release (locked, validated, packed) exported, refused when cut
//! short or altered, imported into an empty archive and replayed there with no network, and
//! rebuilt from its mirror; installed states carried only when asked, and started from there.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::widget::{
    ADD_TEST, BASE_DATE, CORE, GOLD, TESTS, Widget, instance, offline_swe_ark, test_patch,
};
use common::{TestContext, git_init_commit, last_line, stderr, stdout};
use swe_ark::digest::Sha256Digest;
use swe_ark::release::{ReleaseInstance, Snapshot};
use swe_ark::store::{Ark, LockRow, ValidationRow};

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `python3 scripts/release_root.py FILE`: the root it prints, and whether it agreed with
/// the file's own.
fn script_root(snapshot: &Path) -> (String, bool) {
    let out = Command::new("python3")
        .arg(repo_root().join("scripts/release_root.py"))
        .arg(snapshot)
        .output()
        .expect("python3 runs");
    (last_line(&out.stdout), out.status.success())
}

/// The fixture's lock: two stand-in wheels whose bytes are made here, an interpreter named by
/// a fixed version and hash. Everything in it is the same on every machine, unlike a lock
/// `env lock` makes (it records this machine's exact Python and its executable's sha256).
fn fixture_lock(base: &str, wheels: &[(&str, &str, Sha256Digest, u64)]) -> String {
    let mut out = String::from(
        "lock-version = \"1.0\"\nrequires-python = \">=3.11\"\n\
         created-by = \"swe-ark tests (fixture release)\"\n",
    );
    for (name, file, sha, size) in wheels {
        let version = file.split('-').nth(1).unwrap();
        out.push_str(&format!(
            "\n[[packages]]\nname = \"{name}\"\nversion = \"{version}\"\n\
             wheels = [{{ name = \"{file}\", size = {size}, hashes = {{ sha256 = \"{sha}\" }} }}]\n"
        ));
    }
    out.push_str(&format!(
        "\n[tool.swe-ark]\nrepo = \"acme/widget\"\nversion = \"1.0\"\ncommit = \"{base}\"\n\
         exclude-newer = \"2021-06-01T00:00:00Z\"\nindex = \"https://pypi.org/simple\"\n\
         resolver = \"pip 23.2.1\"\n\n[tool.swe-ark.python]\nversion = \"3.11.7\"\n\
         implementation = \"cpython\"\nplatform = \"linux-x86_64\"\nsha256 = \"{}\"\n\n\
         [tool.swe-ark.context]\npython = \"3.11\"\npackages = []\npip-packages = [\"pytest\"]\n\
         pre-install = []\nskipped-pre-install = []\ninstall = \"python -m pip install -e .\"\n",
        Sha256Digest::of(b"fixture interpreter")
    ));
    out
}

/// Builds the fixture release from scratch in `t`'s archive: a repository made by code, its
/// mirror, two instances, a lock and two validations, the packs from the index, and
/// `release create`. `env lock` and `validate` run for real in the test below; here their
/// records are made with fixed bytes (validation logs hold timings and paths, a lock holds the
/// machine's interpreter), so that the root is the same on every machine and every run.
/// Returns the snapshot's path.
fn build_fixture_release(t: &TestContext) -> PathBuf {
    build_fixture_release_on(t, &Builder::default())
}

/// What differs between two machines' validations of the same instances: where they ran and
/// how long they took, which only the evidence (results.json, the raw logs) records.
/// `test_more` and `pytest_wheel` are inputs: a builder who changes them builds another release.
struct Builder {
    work: String,
    seconds: f64,
    /// The body of instance 2's `test_more`, in its test patch.
    test_more: &'static str,
    /// The stand-in bytes of the locked pytest wheel.
    pytest_wheel: &'static str,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            work: "/var/tmp/builder/ark/tmp/.tmp-validate-Fx1234".into(),
            seconds: 1.5,
            test_more: "assert True",
            pytest_wheel: "stand-in bytes of pytest-7.4.4-py3-none-any.whl\n",
        }
    }
}

fn build_fixture_release_on(t: &TestContext, builder: &Builder) -> PathBuf {
    let repo = t.path("repo");
    for (path, text) in [
        ("widget/__init__.py", ""),
        ("widget/core.py", CORE),
        ("tests/test_core.py", TESTS),
        (
            "setup.py",
            "from setuptools import setup\nsetup(name='widget', version='1.0')\n",
        ),
    ] {
        let p = repo.join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    let base = git_init_commit(&repo, "widget 1.0", BASE_DATE);
    let manifests = t.widget_manifests(
        "repo = \"acme/widget\"\nsource = \"tests/release.rs\"\nlog_parser = \"pytest\"\n\n\
         [defaults]\npython = \"3.11\"\npip_packages = [\"pytest\"]\n\
         install = \"python -m pip install -e .\"\ntest_cmd = \"pytest -rA\"\n\n\
         [versions.\"1.0\"]\n",
    );
    let run = |args: &[&str]| {
        let out = t
            .cmd()
            .env("SWE_ARK_MANIFESTS", &manifests)
            .args(args)
            .output()
            .unwrap();
        common::succeeded(&out, &format!("swe-ark {args:?}"))
    };
    run(&[
        "mirror",
        "add",
        repo.to_str().unwrap(),
        "--name",
        "acme/widget",
    ]);
    let add = "tests/test_core.py::test_add";
    let sub = "tests/test_core.py::test_sub";
    let instances = [
        instance(1, &test_patch(ADD_TEST), GOLD, &[add], &[sub], &base),
        instance(
            2,
            &test_patch(&format!(
                "{ADD_TEST}\n\ndef test_more():\n    {}\n",
                builder.test_more
            )),
            GOLD,
            &[add],
            &[sub, "tests/test_core.py::test_more"],
            &base,
        ),
    ];
    let file = t.path("instances.jsonl");
    fs::write(
        &file,
        instances
            .iter()
            .map(|i| format!("{i}\n"))
            .collect::<String>(),
    )
    .unwrap();
    run(&["import", file.to_str().unwrap()]);

    {
        let mut ark = Ark::open(&t.ark()).unwrap();
        let store = ark.objects();
        let mut wheels = Vec::new();
        for (name, file) in [
            ("iniconfig", "iniconfig-2.0.0-py3-none-any.whl"),
            ("pytest", "pytest-7.4.4-py3-none-any.whl"),
        ] {
            let bytes = if name == "pytest" {
                builder.pytest_wheel.to_string()
            } else {
                format!("stand-in bytes of {file}\n")
            };
            let id = store.put_bytes(bytes.as_bytes()).unwrap();
            wheels.push((name, file, id, bytes.len() as u64));
        }
        let lock = fixture_lock(&base, &wheels);
        let lock_id = store.put_bytes(lock.as_bytes()).unwrap();
        let mut objects: Vec<(Sha256Digest, u64, &str)> =
            vec![(lock_id, lock.len() as u64, "lock")];
        objects.extend(wheels.iter().map(|w| (w.2, w.3, "wheel")));
        ark.index_mut()
            .record_lock(
                &LockRow {
                    id: lock_id,
                    repo: "acme/widget".into(),
                    version: "1.0".into(),
                    commit_id: base.clone(),
                    python: "3.11.7".into(),
                    packages: 2,
                    artifacts: 2,
                    bytes: wheels.iter().map(|w| w.3).sum(),
                    created_at: 0,
                },
                &objects,
            )
            .unwrap();
        for n in [1, 2] {
            let id = format!("acme__widget-{n}");
            // As a run records them: its own paths, timings and tool version, which a bundle
            // keeps only normalized (format version 3).
            let work = &builder.work;
            let ark_dir = work.split("/tmp/.tmp-validate-").next().unwrap();
            let took = builder.seconds;
            let pre = format!(
                "# {id}\nrootdir: {work}/src\nFAILED {add}\nPASSED {sub}\n1 failed in {took:.2}s\n"
            );
            let post = format!(
                "# {id}\nrootdir: {work}/src\nPASSED {add}\nPASSED {sub}\n2 passed in {took:.2}s\n"
            );
            let results = serde_json::json!({
                "instance_id": id, "verdict": "kept", "reason_kind": "", "reason": "",
                "FAIL_TO_PASS": [add], "PASS_TO_PASS": [sub], "XFAIL": [], "flaky": {},
                "test_directives": ["tests/test_core.py"], "log_parser": "pytest",
                "pre": {add: "FAILED", sub: "PASSED"},
                "post": [{add: "PASSED", sub: "PASSED"}],
                "exit_codes": {"pre": 1, "post-1": 0},
                "timings": {"total": took, "pre": took},
                "network": "isolated", "lock": lock_id.hex(), "python": "3.11.7",
                "tool": "swe-ark 0.1.0",
                "paths": {
                    "work_tree": format!("{work}/src"),
                    "environment": format!("{work}/venv"),
                    "tmp": format!("{work}/tmp"),
                    "work": work,
                    "ark": ark_dir,
                },
            })
            .to_string();
            let ids: Vec<Sha256Digest> = [&pre, &post, &results]
                .iter()
                .map(|b| store.put_bytes(b.as_bytes()).unwrap())
                .collect();
            ark.index_mut()
                .record_validation(
                    &ValidationRow {
                        instance_id: id,
                        verdict: swe_ark::verdict::Verdict::Kept,
                        reason_kind: None,
                        reason: String::new(),
                        fail_to_pass: 1,
                        pass_to_pass: n as u64,
                        flaky: 0,
                        lock_id: lock_id.hex(),
                        results: ids[2],
                        log_pre: Some(ids[0]),
                        log_post: Some(ids[1]),
                        seconds: took,
                        validated_at: 0,
                    },
                    &[
                        (ids[0], pre.len() as u64, "log"),
                        (ids[1], post.len() as u64, "log"),
                        (ids[2], results.len() as u64, "results"),
                    ],
                    None,
                )
                .unwrap();
        }
    }
    run(&["pack", "--all-validated"]);
    let snapshot = t.path("fixture.json");
    run(&[
        "release",
        "create",
        "fixture",
        "--all-validated",
        "-o",
        snapshot.to_str().unwrap(),
    ]);
    snapshot
}

#[test]
fn the_fixture_release_has_the_committed_root_on_every_machine() {
    let t = TestContext::new();
    let built_path = build_fixture_release(&t);
    let built = Snapshot::read(&built_path).unwrap();
    let committed_path = repo_root().join("snapshots/fixture-release.json");
    if std::env::var_os("SWE_ARK_UPDATE_SNAPSHOTS").is_some() {
        fs::copy(&built_path, &committed_path).unwrap();
    }
    let committed = Snapshot::read(&committed_path).unwrap();
    assert_eq!(
        (&built.instances, built.root),
        (&committed.instances, committed.root),
        "the fixture release no longer has the committed root: what goes into a bundle \
         changed. If on purpose, run this test with SWE_ARK_UPDATE_SNAPSHOTS=1 and commit \
         snapshots/fixture-release.json with the reason (docs/RELEASES.md)"
    );
    assert_eq!(built.instances.len(), 2);
    assert_eq!(built.instances[0].objects.len(), 2, "{built:?}");

    // The documented script gives the same root, from the committed file and the new one.
    assert_eq!(script_root(&committed_path), (committed.root.hex(), true));
    assert_eq!(script_root(&built_path), (built.root.hex(), true));
    // The script in the doc is the one in scripts/, word for word.
    let script = fs::read_to_string(repo_root().join("scripts/release_root.py")).unwrap();
    let doc = fs::read_to_string(repo_root().join("docs/RELEASES.md")).unwrap();
    assert!(
        doc.contains(&format!("```python\n{script}```")),
        "docs/RELEASES.md must show scripts/release_root.py as it is"
    );

    // The archive agrees with its release.
    let out = t.run_expect(&["release", "verify", built_path.to_str().unwrap()], 0);
    assert!(stdout(&out).contains("ok  root"), "{}", stdout(&out));
}

#[test]
fn the_root_script_agrees_with_swe_ark_on_awkward_instance_ids() {
    let t = TestContext::new();
    let ids = [
        "plain__id-1",
        "quote\"back\\slash",
        "new\nline\ttab\u{1}ctl",
        "caf\u{e9} \u{1f600} \u{2028}",
        "Zed",
        "a",
    ];
    let instances: Vec<ReleaseInstance> = ids
        .iter()
        .enumerate()
        .map(|(n, id)| ReleaseInstance {
            instance_id: id.to_string(),
            bundle: Sha256Digest::of(id.as_bytes()),
            objects: (0..n)
                .map(|k| Sha256Digest::of(format!("{k}").as_bytes()))
                .rev()
                .collect(),
        })
        .collect();
    let snap = Snapshot::new("awkward", &instances).unwrap();
    let path = t.path("awkward.json");
    fs::write(&path, snap.to_bytes()).unwrap();
    assert_eq!(script_root(&path), (snap.root.hex(), true));
    // An edited list no longer matches its root: the script says so (exit 1).
    let edited = String::from_utf8(snap.to_bytes())
        .unwrap()
        .replace("plain__id-1", "plain__id-2");
    fs::write(&path, edited).unwrap();
    let (root, agreed) = script_root(&path);
    assert!(!agreed && root != snap.root.hex(), "{root}");
}

#[test]
fn two_builders_who_validated_in_other_places_for_other_times_make_the_same_release() {
    let a = TestContext::new();
    let b = TestContext::new();
    let snap_a = build_fixture_release_on(&a, &Builder::default());
    let snap_b = build_fixture_release_on(
        &b,
        &Builder {
            work: "/home/bob/archives/lite/tmp/.tmp-validate-Q9w8E7".into(),
            seconds: 73.25,
            ..Builder::default()
        },
    );
    // The snapshot files are byte for byte the same: same bundle ids, same root, no time.
    let (bytes_a, bytes_b) = (fs::read(&snap_a).unwrap(), fs::read(&snap_b).unwrap());
    assert_eq!(
        String::from_utf8_lossy(&bytes_a),
        String::from_utf8_lossy(&bytes_b)
    );
    // What differs stays in each archive's evidence: the raw logs name their own paths.
    let evidence = |t: &TestContext| {
        let (ark, v) = validation_of(t, "acme__widget-1");
        String::from_utf8(ark.objects().get(&v.log_pre.unwrap()).unwrap()).unwrap()
    };
    assert!(evidence(&a).contains("/var/tmp/builder/"));
    assert!(evidence(&b).contains("/home/bob/archives/"));
    // And the bundle holds them normalized, with what the validation proved.
    let id = Snapshot::read(&snap_a).unwrap().instances[0].bundle.hex();
    let out = a.path("unpacked");
    a.run_expect(&["unpack", &id, "-o", out.to_str().unwrap()], 0);
    let pre = fs::read_to_string(out.join("logs/pre.log")).unwrap();
    assert!(
        pre.contains("rootdir: /testbed\n") && pre.contains("1 failed in <duration>\n"),
        "{pre}"
    );
    let expected = fs::read_to_string(out.join("expected.json")).unwrap();
    assert!(
        expected.contains("\"FAIL_TO_PASS\": [\n    \"tests/test_core.py::test_add\"\n  ]"),
        "{expected}"
    );
    assert!(
        !expected.contains("timings") && !expected.contains("swe-ark 0.1"),
        "{expected}"
    );
    assert!(!out.join("results.json").exists());
}

/// `t`'s archive and the validation row of `instance_id` in it.
fn validation_of(t: &TestContext, instance_id: &str) -> (Ark, ValidationRow) {
    let ark = Ark::open(&t.ark()).unwrap();
    let v = ark
        .index()
        .validations()
        .unwrap()
        .into_iter()
        .find(|v| v.instance_id == instance_id)
        .unwrap();
    (ark, v)
}

/// `swe-ark release diff A B --json` run in `t`'s archive, with more archives to read from.
fn release_diff(t: &TestContext, a: &Path, b: &Path, others: &[&Path]) -> (i32, serde_json::Value) {
    let mut c = t.cmd();
    c.args(["release", "diff"]).arg(a).arg(b).arg("--json");
    for o in others {
        c.arg("--other-ark").arg(o);
    }
    let out = c.output().unwrap();
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    (out.status.code().unwrap(), v)
}

/// The `member` (or `name`) of each entry of `v[key]`.
fn names(v: &serde_json::Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["member"]
                .as_str()
                .or(m["name"].as_str())
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn release_diff_names_the_instance_member_and_object_an_input_changed() {
    let (a, b, c) = (TestContext::new(), TestContext::new(), TestContext::new());
    let snap_a = build_fixture_release_on(&a, &Builder::default());
    // B changed one line of instance 2's test patch; C was served another pytest wheel.
    let snap_b = build_fixture_release_on(
        &b,
        &Builder {
            test_more: "assert 1 + 1 == 2",
            ..Builder::default()
        },
    );
    let snap_c = build_fixture_release_on(
        &c,
        &Builder {
            pytest_wheel: "the bytes another day's index served\n",
            ..Builder::default()
        },
    );

    // The same release: nothing to say, exit 0.
    let (code, same) = release_diff(&a, &snap_a, &snap_a, &[]);
    assert_eq!(code, 0, "{same}");
    assert_eq!(same["same_root"], true);
    assert_eq!(same["changed"].as_array().unwrap().len(), 0);

    // B: exactly instance 2, and in it exactly the test patch and the instance row that
    // carries it; the objects are the same.
    let (code, d) = release_diff(&a, &snap_a, &snap_b, &[&b.ark()]);
    assert_eq!(code, 1, "{d}");
    assert_eq!(d["same"], 1);
    let changed = d["changed"].as_array().unwrap();
    assert_eq!(changed.len(), 1, "{d}");
    let i = &changed[0];
    assert_eq!(i["instance_id"], "acme__widget-2");
    assert_eq!(
        names(i, "members"),
        ["instance.json", "patches/test.diff"],
        "{i}"
    );
    let detail = |m: usize| i["members"][m]["details"].to_string();
    assert!(detail(0).contains("test_patch"), "{i}");
    assert!(detail(1).contains("assert 1 + 1 == 2"), "{i}");
    assert!(i["objects_only_in_a"].as_array().unwrap().is_empty(), "{i}");

    // C: both instances, through their lock, and the wheel named as both locks name it.
    let (code, d) = release_diff(&a, &snap_a, &snap_c, &[&c.ark()]);
    assert_eq!(code, 1, "{d}");
    let changed = d["changed"].as_array().unwrap();
    assert_eq!(changed.len(), 2, "{d}");
    for i in changed {
        assert_eq!(names(i, "members"), ["env/pylock.toml"], "{i}");
        let lock = i["members"][0]["details"].to_string();
        assert!(
            lock.contains("pytest 7.4.4: pytest-7.4.4-py3-none-any.whl sha256 "),
            "{lock}"
        );
        assert_eq!(
            names(i, "objects_only_in_a"),
            ["pytest-7.4.4-py3-none-any.whl"]
        );
        assert_eq!(
            names(i, "objects_only_in_b"),
            ["pytest-7.4.4-py3-none-any.whl"]
        );
    }
    // In words too.
    let out = a
        .cmd()
        .args(["release", "diff"])
        .arg(&snap_a)
        .arg(&snap_c)
        .arg("--other-ark")
        .arg(c.ark())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("differs    acme__widget-1: bundle ")
            && text.contains("    env/pylock.toml differs\n")
            && text.contains("object only in B: "),
        "{text}"
    );
    // Without C's archive its bundles cannot be read: the diff says so, and still names the
    // objects that differ.
    let (code, d) = release_diff(&a, &snap_a, &snap_c, &[]);
    assert_eq!(code, 1);
    let i = &d["changed"][0];
    assert!(
        i["unread"]
            .as_str()
            .unwrap()
            .contains("in none of the archives given"),
        "{i}"
    );
    assert_eq!(i["objects_only_in_b"].as_array().unwrap().len(), 1, "{i}");

    // Bad input: a file that is not a snapshot is an error that names it, exit 2.
    let bad = a.path("bad.json");
    fs::write(&bad, "{}").unwrap();
    let out = a
        .cmd()
        .args(["release", "diff"])
        .arg(&snap_a)
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("bad.json"), "{}", stderr(&out));
}

#[test]
fn migrate_packs_a_version_2_bundle_into_the_bundle_packing_from_the_index_makes() {
    let t = TestContext::new();
    let snapshot = build_fixture_release(&t);
    let v3 = Snapshot::read(&snapshot).unwrap().instances[0].clone();
    assert_eq!(v3.instance_id, "acme__widget-1");
    // The same validation packed by hand the way swe-ark did before version 3: the raw logs
    // and the run's results.json as given (version 2, with vcs.json from the mirror).
    let unpacked = t.path("v3");
    t.run_expect(
        &["unpack", &v3.bundle.hex(), "-o", unpacked.to_str().unwrap()],
        0,
    );
    let (pre, post, results) = {
        let (ark, v) = validation_of(&t, "acme__widget-1");
        let get = |id| ark.objects().get(&id).unwrap();
        (
            get(v.log_pre.unwrap()),
            get(v.log_post.unwrap()),
            get(v.results),
        )
    };
    for (name, bytes) in [
        ("pre.log", &pre),
        ("post.log", &post),
        ("results.json", &results),
    ] {
        fs::write(t.path(name), bytes).unwrap();
    }
    // Packed a second later, so that it is the instance's newest bundle.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let file = |p: &str| unpacked.join(p).to_str().unwrap().to_string();
    let (instance, spec, lock) = (
        file("instance.json"),
        file("env/spec.toml"),
        file("env/pylock.toml"),
    );
    let out = t.run_expect(
        &[
            "pack",
            "--instance",
            &instance,
            "--repo",
            "acme/widget",
            "--spec",
            &spec,
            "--lock",
            &lock,
            "--pre-log",
            "pre.log",
            "--post-log",
            "post.log",
            "--results",
            "results.json",
            "--json",
        ],
        0,
    );
    let packed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let v2 = packed["id"].as_str().unwrap().to_string();
    assert_ne!(v2, v3.bundle.hex());

    let migrate = |args: &[&str], code: i32| -> serde_json::Value {
        let mut all = vec!["migrate", "--json"];
        all.extend(args);
        let out = t.run_expect(&all, code);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let bundles = || {
        Ark::open(&t.ark())
            .unwrap()
            .index()
            .bundles()
            .unwrap()
            .len()
    };
    let before = bundles();
    // A dry run names the bundle it would make, and stores nothing.
    let dry = migrate(&["--dry-run"], 0);
    assert_eq!(dry.as_array().unwrap().len(), 1, "{dry}");
    assert_eq!(dry[0]["bundle"].as_str(), Some(v2.as_str()));
    assert_eq!(dry[0]["from_version"], 2);
    assert_eq!(dry[0]["migrated"].as_str(), Some(v3.bundle.hex().as_str()));
    assert_eq!(bundles(), before);
    // Migrated: the very bundle that packing the validation from the index made.
    let done = migrate(&["--instance-ids", "acme__widget-1"], 0);
    assert_eq!(
        done[0]["migrated"].as_str(),
        Some(v3.bundle.hex().as_str()),
        "{done}"
    );
    assert!(done[0]["problems"].as_array().unwrap().is_empty(), "{done}");
    t.run_expect(&["verify", &v3.bundle.hex()], 0);
    // Bad input: an instance with no bundle is an error that names it.
    let out = t.run_expect(&["migrate", "--instance-ids", "acme__nosuch-9"], 2);
    assert!(stderr(&out).contains("acme__nosuch-9"), "{}", stderr(&out));
}

#[test]
fn the_same_release_exports_to_the_same_bytes_from_two_archives() {
    let files: Vec<Vec<u8>> = (0..2)
        .map(|_| {
            let t = TestContext::new();
            let snapshot = build_fixture_release(&t);
            let out = t.path("fixture.ark");
            t.run_expect(
                &[
                    "export",
                    "--release",
                    snapshot.to_str().unwrap(),
                    "-o",
                    out.to_str().unwrap(),
                ],
                0,
            );
            fs::read(out).unwrap()
        })
        .collect();
    assert!(files[0] == files[1], "two exports of one release differ");
    // A plain tar: GNU tar lists it, the manifest first.
    let t = TestContext::new();
    let path = t.path("x.ark");
    fs::write(&path, &files[0]).unwrap();
    let out = Command::new("tar").arg("-tf").arg(&path).output().unwrap();
    let names = stdout(&out);
    let names: Vec<&str> = names.lines().collect();
    assert_eq!(
        names[..4],
        [
            "swe-ark-archive.json",
            "release.json",
            "index.json",
            "pieces.bin"
        ]
    );
    assert!(names.iter().any(|n| n.starts_with("packs/")), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("bundles/")));
    // Two wheels, the lock, and each validation's two logs and results.
    assert_eq!(
        names.iter().filter(|n| n.starts_with("objects/")).count(),
        9
    );
}

/// Where member `prefix…` of a tar file starts (its data).
fn member_offset(file: &Path, prefix: &str) -> u64 {
    let mut a = tar::Archive::new(fs::File::open(file).unwrap());
    for e in a.entries().unwrap() {
        let e = e.unwrap();
        if e.path().unwrap().to_string_lossy().starts_with(prefix) {
            return e.raw_file_position();
        }
    }
    panic!("no member {prefix} in {}", file.display());
}

fn read_report(path: PathBuf, id: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    v[id].clone()
}

#[test]
fn a_release_crosses_the_air_gap_and_replays_there_with_no_network() {
    let t = TestContext::new();
    let Some(w) = Widget::new(&t) else { return };
    let ok = |args: &[&str]| w.ok(&t, args);
    let more = "\n\ndef test_more():\n    assert True\n";
    w.mirror_lock_import(
        &t,
        &[
            instance(1, &test_patch(ADD_TEST), GOLD, &[], &[], &w.base),
            instance(
                2,
                &test_patch(&format!("{ADD_TEST}{more}")),
                GOLD,
                &[],
                &[],
                &w.base,
            ),
        ],
    );
    ok(&["validate", "--jobs", "2", "--runs", "1", "--timeout", "120"]);
    // Validation kept the installed state of the instances' base commit.
    let states = installed_states(&t.ark());
    assert!(!states.is_empty(), "validation kept no installed state");
    ok(&["pack", "--all-validated"]);
    let snap_path = t.path("e2e.json");
    let snap = snap_path.to_str().unwrap();
    let root =
        last_line(ok(&["release", "create", "e2e", "--all-validated", "-o", snap]).as_bytes());
    assert_eq!(script_root(&snap_path), (root.clone(), true));
    let verified = ok(&["release", "verify", snap]);
    assert!(verified.contains("ok  root"), "{verified}");
    // The same name and content again: the file is kept as it is.
    let before = fs::read(&snap_path).unwrap();
    ok(&["release", "create", "e2e", "--all-validated", "-o", snap]);
    assert_eq!(fs::read(&snap_path).unwrap(), before);

    // Export: the same bytes twice.
    let a = t.path("a.ark");
    let b = t.path("b.ark");
    ok(&["export", "--release", snap, "-o", a.to_str().unwrap()]);
    ok(&["export", "--release", snap, "-o", b.to_str().unwrap()]);
    assert!(fs::read(&a).unwrap() == fs::read(&b).unwrap());

    // Cut short or altered: refused, naming what is wrong, nothing written.
    let bytes = fs::read(&a).unwrap();
    let cut = t.path("cut.ark");
    fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let target = t.path("refused");
    // `import-archive file` into `ark`, refused (exit 2); its stderr.
    let refused_into = |ark: &Path, file: &Path| {
        let out = w.run_at(&t, ark, &["import-archive", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        stderr(&out)
    };
    let e = refused_into(&target, &cut);
    assert!(e.contains("truncated"), "{e}");
    assert!(
        !target.exists(),
        "a refused import left {}",
        target.display()
    );
    let pack_at = member_offset(&a, "packs/") as usize;
    let mut altered = bytes.clone();
    altered[pack_at + 100] ^= 0x01;
    let bad = t.path("altered.ark");
    fs::write(&bad, &altered).unwrap();
    let e = refused_into(&target, &bad);
    assert!(
        e.contains("(`packs/") && e.contains("hashes to") && e.contains("altered"),
        "{e}"
    );
    assert!(!target.exists());
    // Into an existing archive: the same refusal, and the archive is as it was.
    let listing = ok(&["ls", "--json"]);
    refused_into(&t.ark(), &bad);
    assert_eq!(ok(&["ls", "--json"]), listing);
    let leftovers: Vec<_> = fs::read_dir(t.ark().join("tmp"))
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // The wrong root expected: refused.
    let out = w.run_at(
        &t,
        &t.path("elsewhere"),
        &[
            "import-archive",
            a.to_str().unwrap(),
            "--expect-root",
            &Sha256Digest::of(b"another").hex(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not the expected"),
        "{}",
        stderr(&out)
    );

    // Killed just before the index is written: the index names nothing, verify is clean,
    // and the import can be run again.
    let killed = t.path("killed");
    let out = w
        .cmd_at(&t, &killed)
        .env("SWE_ARK_FAILPOINT", "import.before-index")
        .args(["import-archive", a.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let k = |args: &[&str]| w.run_at(&t, &killed, args);
    assert_eq!(stdout(&k(&["ls", "--json"])).trim(), "[]");
    assert_eq!(k(&["verify"]).status.code(), Some(0));
    assert_eq!(
        k(&["import-archive", a.to_str().unwrap()]).status.code(),
        Some(0)
    );
    assert_eq!(k(&["release", "verify", snap]).status.code(), Some(0));

    // The gold replay here, for comparison.
    ok(&["replay", "--gold", "--run-id", "gold"]);
    // An instance id that selects nothing is an error that names it, not a silent skip.
    let out = w.run(
        &t,
        &[
            "replay",
            "--gold",
            "--instance-ids",
            "acme__widget-1,acme__nosuch-7",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("with no bundle in the archive: acme__nosuch-7"),
        "{}",
        stderr(&out)
    );

    // There: an empty directory and an empty HOME, then no network at all.
    let other = t.path("other");
    let home = t.path("home");
    fs::create_dir_all(&home).unwrap();
    let out = w
        .cmd_at(&t, &other)
        .env("HOME", &home)
        .args([
            "import-archive",
            a.to_str().unwrap(),
            "--expect-root",
            &root,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(last_line(&out.stdout), root);
    // Without --installed-states the file carries none: the first run there makes one.
    assert_eq!(installed_states(&other), vec![]);
    let there = |args: &[&str]| w.run_at(&t, &other, args);
    assert_eq!(there(&["verify"]).status.code(), Some(0));
    let rv = there(&["release", "verify", snap]);
    assert_eq!(rv.status.code(), Some(0), "{}", stdout(&rv));
    // The gold replay in `ark`, with no network where it can be had; how each instance got
    // its installed state.
    let replay_offline = |ark: &Path| -> Vec<String> {
        let mut c = if common::can_unshare() {
            offline_swe_ark(&w.python, &home)
        } else {
            eprintln!("note: unshare -n is not available; the replay there keeps the network");
            let mut c = Command::new(env!("CARGO_BIN_EXE_swe-ark"));
            c.env_clear()
                .env("HOME", &home)
                .env(
                    "PATH",
                    format!("{}:/usr/bin:/bin", w.python.parent().unwrap().display()),
                )
                .arg("--no-progress");
            c
        };
        c.arg("--ark")
            .arg(ark)
            .args(["replay", "--gold", "--run-id", "gold"]);
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
        let mut how = Vec::new();
        for id in ["acme__widget-1", "acme__widget-2"] {
            let rel = format!("runs/gold/gold/{id}/report.json");
            let here = read_report(t.ark().join(&rel), id);
            let there = read_report(ark.join(&rel), id);
            assert_eq!(there["resolved"].as_bool(), Some(true), "{there}");
            assert_eq!(there["tests_status"], here["tests_status"], "{id}");
            assert_eq!(there["bundle"], here["bundle"], "{id}");
            how.push(
                there["installed_state"]["how"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            );
        }
        how
    };
    let how = replay_offline(&other);
    assert!(how.iter().any(|h| h == "made"), "{how:?}");

    // With --installed-states the archive's states go too, and the runs there start from them.
    let s = t.path("s.ark");
    let exported = ok(&[
        "export",
        "--release",
        snap,
        "-o",
        s.to_str().unwrap(),
        "--installed-states",
        "--json",
    ]);
    let exported: serde_json::Value = serde_json::from_str(&exported).unwrap();
    let states = installed_states(&t.ark());
    assert_eq!(
        exported["installed_states"].as_u64(),
        Some(states.len() as u64),
        "{exported}"
    );
    let carried = t.path("carried");
    let out = w
        .cmd_at(&t, &carried)
        .env("HOME", &home)
        .args([
            "import-archive",
            s.to_str().unwrap(),
            "--expect-root",
            &root,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(installed_states(&carried), states);
    assert_eq!(replay_offline(&carried), ["kept", "kept"]);

    // With history: the mirror goes too, and the bundles rebuild there bit for bit.
    let h = t.path("h.ark");
    ok(&[
        "export",
        "--release",
        snap,
        "-o",
        h.to_str().unwrap(),
        "--with-history",
    ]);
    let hist = t.path("hist");
    let hh = |args: &[&str]| w.run_at(&t, &hist, args);
    assert_eq!(
        hh(&["import-archive", h.to_str().unwrap()]).status.code(),
        Some(0)
    );
    assert_eq!(hh(&["mirror", "verify"]).status.code(), Some(0));
    let rebuilt = hh(&["verify", "--rebuild"]);
    assert_eq!(
        rebuilt.status.code(),
        Some(0),
        "{}{}",
        stdout(&rebuilt),
        stderr(&rebuilt)
    );
    assert_eq!(stdout(&rebuilt).matches("ok  rebuild").count(), 2);
    // Without history there is nothing to rebuild from, and it says so.
    let none = there(&["verify", "--rebuild"]);
    assert_eq!(none.status.code(), Some(1));
    assert!(
        stdout(&none).contains("nothing to rebuild from"),
        "{}",
        stdout(&none)
    );

    // Here: the bundles rebuild; one packed from an edited directory does not, naming the
    // member that differs.
    let rebuilt = ok(&["verify", "--rebuild", "--instance-ids", "acme__widget-1"]);
    assert!(rebuilt.contains("ok  rebuild acme__widget-1"), "{rebuilt}");
    let edited = t.path("edited");
    fs::create_dir_all(&edited).unwrap();
    for f in ["widget/core.py", "tests/test_core.py", "pyproject.toml"] {
        let dest = edited.join(f);
        fs::create_dir_all(dest.parent().unwrap()).unwrap();
        if w.repo.join(f).exists() {
            fs::copy(w.repo.join(f), dest).unwrap();
        }
    }
    let inst = t.path("inst1.json");
    let first = instance(1, &test_patch(ADD_TEST), GOLD, &[], &[], &w.base);
    fs::write(&inst, first.to_string()).unwrap();
    ok(&[
        "pack",
        "--instance",
        inst.to_str().unwrap(),
        "--codebase",
        edited.to_str().unwrap(),
    ]);
    let out = w.run(
        &t,
        &["verify", "--rebuild", "--instance-ids", "acme__widget-1"],
    );
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("BAD rebuild acme__widget-1"), "{text}");
    assert!(text.contains("is only in the rebuild"), "{text}");

    // There: an object gone and a bundle altered; release verify names both (exit 1).
    let rel: serde_json::Value = serde_json::from_slice(&fs::read(&snap_path).unwrap()).unwrap();
    let obj = rel["instances"][0]["objects"][0]
        .as_str()
        .unwrap()
        .to_string();
    fs::remove_file(other.join(format!("objects/sha256/{}/{}", &obj[..2], &obj[2..]))).unwrap();
    let bid = rel["instances"][1]["bundle"].as_str().unwrap().to_string();
    // The bundle's own `bundle.json` piece, where its pack holds it (docs/STORAGE.md).
    let (pack, offset, length): (String, i64, i64) =
        rusqlite::Connection::open(other.join("index.sqlite"))
            .unwrap()
            .query_row(
                "SELECT p.name, c.offset, c.length FROM bundles b
                 JOIN pieces c ON c.id = b.manifest_piece JOIN packs p ON p.no = c.pack
                 WHERE b.id = ?1",
                [&bid],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
    let bpath = other.join(format!("packs/{pack}.pack"));
    let mut bb = fs::read(&bpath).unwrap();
    bb[(offset + length / 2) as usize] ^= 0x40;
    fs::write(&bpath, bb).unwrap();
    let out = there(&["release", "verify", snap]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains(&format!("BAD object {obj}")), "{text}");
    assert!(text.contains("missing from the archive"), "{text}");
    assert!(
        text.contains(&format!("BAD bundle acme__widget-2 {bid}")),
        "{text}"
    );
    assert!(text.contains("BAD root"), "{text}");
}

/// Every member of an archive file, in order (the manifest first).
fn members_of(file: &Path) -> Vec<(String, Vec<u8>)> {
    let mut a = tar::Archive::new(fs::File::open(file).unwrap());
    a.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let path = e.path().unwrap().to_string_lossy().into_owned();
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut bytes).unwrap();
            (path, bytes)
        })
        .collect()
}

/// Writes `members` as an archive file whose manifest agrees with them (sizes, hashes, and
/// each pack named by its sha256): what a careful forger makes, so that only the deeper
/// checks can refuse it.
fn write_consistent(members: &[(String, Vec<u8>)], out: &Path) {
    let mut manifest: serde_json::Value = serde_json::from_slice(&members[0].1).unwrap();
    let mut listed = Vec::new();
    let mut renamed = Vec::new();
    for (path, bytes) in &members[1..] {
        let sha = Sha256Digest::of(bytes).hex();
        let path = if path.starts_with("packs/") {
            format!("packs/{sha}.pack")
        } else {
            path.clone()
        };
        listed.push(serde_json::json!({"path": path, "size": bytes.len(), "sha256": sha}));
        renamed.push((path, bytes.clone()));
    }
    manifest["members"] = serde_json::Value::Array(listed);
    let mut b = tar::Builder::new(fs::File::create(out).unwrap());
    let mut add = |path: &str, bytes: &[u8]| {
        let mut h = tar::Header::new_ustar();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, path, bytes).unwrap();
    };
    add(
        "swe-ark-archive.json",
        &serde_json::to_vec_pretty(&manifest).unwrap(),
    );
    for (path, bytes) in &renamed {
        add(path, bytes);
    }
    b.finish().unwrap();
}

/// The file with its piece table changed by `change`, consistent otherwise.
fn with_table(file: &Path, out: &Path, change: impl FnOnce(&mut Vec<Vec<swe_ark::store::Frame>>)) {
    let mut members = members_of(file);
    let packs = members
        .iter()
        .filter(|(p, _)| p.starts_with("packs/"))
        .count();
    let table = members.iter_mut().find(|(p, _)| p == "pieces.bin").unwrap();
    let mut frames = swe_ark::archive::decode_piece_table(&table.1, packs).unwrap();
    change(&mut frames);
    let refs: Vec<&[swe_ark::store::Frame]> = frames.iter().map(|f| &f[..]).collect();
    table.1 = swe_ark::archive::encode_piece_table(&refs);
    write_consistent(&members, out);
}

#[test]
fn a_release_file_carries_the_store_and_imports_all_or_nothing() {
    use swe_ark::store::{FrameBase, FrameHolds};
    let t = TestContext::new();
    let snapshot = build_fixture_release(&t);
    let snap = snapshot.to_str().unwrap();
    let export = |ark: &Path, out: &Path, extra: &[&str]| {
        let mut args = vec!["export", "--release", snap, "-o", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        let o = t.cmd_at(ark).args(&args).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    };
    let import = |ark: &Path, file: &Path| {
        t.cmd_at(ark)
            .arg("import-archive")
            .arg(file)
            .output()
            .unwrap()
    };
    let store = t.path("store.ark");
    let whole = t.path("whole.ark");
    export(&t.ark(), &store, &[]);
    export(&t.ark(), &whole, &["--self-contained"]);
    let (n_store, n_whole) = (
        fs::metadata(&store).unwrap().len(),
        fs::metadata(&whole).unwrap().len(),
    );
    assert!(n_store < n_whole, "{n_store} vs {n_whole}");
    let first = &members_of(&whole)[0].1;
    assert!(String::from_utf8_lossy(first).contains("\"version\": 1"));

    // Imported into an empty archive, it reads, verifies, and exports again to the same bytes.
    let x = t.path("x");
    let out = import(&x, &store);
    assert!(out.status.success(), "{}", stderr(&out));
    let ok_at = |ark: &Path, args: &[&str]| {
        let o = t.cmd_at(ark).args(args).output().unwrap();
        assert!(
            o.status.success(),
            "{:?}: {}{}",
            args,
            stdout(&o),
            stderr(&o)
        );
        stdout(&o)
    };
    ok_at(&x, &["verify"]);
    ok_at(&x, &["release", "verify", snap]);
    let again = t.path("again.ark");
    export(&x, &again, &[]);
    assert!(
        fs::read(&again).unwrap() == fs::read(&store).unwrap(),
        "a round trip changed the file"
    );
    // Imported again: nothing to add.
    let out = import(&x, &store);
    assert!(
        stderr(&out).contains("bundles 0 new, 2 already here"),
        "{}",
        stderr(&out)
    );

    // The old form still imports; then the store form adds only what is missing.
    let y = t.path("y");
    assert!(import(&y, &whole).status.success());
    ok_at(&y, &["release", "rm", "fixture", "--keep-bundles"]);
    let out = import(&y, &store);
    assert!(out.status.success(), "{}", stderr(&out));
    ok_at(&y, &["verify"]);
    ok_at(&y, &["release", "verify", snap]);

    // A pack that holds pieces a release needs and pieces it does not is cut down. Instance X
    // brings files a and b (one pack, one block); Y holds a alone: a release of Y needs half
    // of X's pack.
    let text = |seed: &str| -> String {
        (0..400)
            .map(|i| {
                format!(
                    "{seed} line {i}: {}\n",
                    Sha256Digest::of(format!("{seed}{i}").as_bytes())
                )
            })
            .collect()
    };
    for (name, files) in [("x", vec!["a", "b"]), ("y", vec!["a"])] {
        let dir = t.path(&format!("tree-{name}"));
        fs::create_dir_all(&dir).unwrap();
        for f in files {
            fs::write(dir.join(format!("{f}.txt")), text(f)).unwrap();
        }
        let mut inst: serde_json::Value =
            serde_json::from_str(&common::fixture_instance_json()).unwrap();
        inst["instance_id"] = format!("acme__cut-{name}").into();
        let path = t.path(&format!("cut-{name}.json"));
        fs::write(&path, inst.to_string()).unwrap();
        t.run_expect(
            &[
                "pack",
                "--instance",
                path.to_str().unwrap(),
                "--codebase",
                dir.to_str().unwrap(),
            ],
            0,
        );
    }
    let release_of = |name: &str, instances: &str| {
        let snap = t.path(&format!("{name}.json"));
        t.run_expect(
            &[
                "release",
                "create",
                name,
                "--instance-ids",
                instances,
                "-o",
                snap.to_str().unwrap(),
            ],
            0,
        );
        let file = t.path(&format!("{name}.ark"));
        let out = t.run_expect(
            &[
                "export",
                "--release",
                snap.to_str().unwrap(),
                "-o",
                file.to_str().unwrap(),
                "--json",
            ],
            0,
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (snap, file, report)
    };
    let (y_snap, y_file, report) = release_of("only-y", "acme__cut-y");
    assert_eq!(report["packs_cut"].as_u64(), Some(1), "{report}");
    let (xy_snap, xy_file, report) = release_of("x-and-y", "acme__cut-x,acme__cut-y");
    assert_eq!(report["packs_cut"].as_u64(), Some(0), "{report}");
    let w = t.path("w");
    let out = import(&w, &y_file);
    assert!(out.status.success(), "{}", stderr(&out));
    ok_at(&w, &["release", "verify", y_snap.to_str().unwrap()]);
    // On top: X's pack, whose piece a is here already, is cut down to the rest on this side;
    // Y's is here already.
    let out = import(&w, &xy_file);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("packs 0 moved in, 1 cut down to what was missing, 1 already here"),
        "{}",
        stderr(&out)
    );
    ok_at(&w, &["verify"]);
    ok_at(&w, &["release", "verify", xy_snap.to_str().unwrap()]);
    // No piece is kept twice: as many as an archive that imported the release alone.
    let fresh = t.path("fresh");
    assert!(import(&fresh, &xy_file).status.success());
    let count = |ark: &Path, table: &str| -> i64 {
        rusqlite::Connection::open(ark.join("index.sqlite"))
            .unwrap()
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(count(&w, "pieces"), count(&fresh, "pieces"));
    assert!(count(&w, "packs") > count(&fresh, "packs"));

    // Incremental: a release of instance 1, then the whole one on top of it.
    let old = t.path("old.json");
    let ids: Vec<String> = serde_json::from_slice::<serde_json::Value>(
        &fs::read(&snapshot).unwrap(),
    )
    .unwrap()["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["instance_id"].as_str().unwrap().to_string())
        .collect();
    t.run_expect(
        &[
            "release",
            "create",
            "old",
            "--instance-ids",
            &ids[0],
            "-o",
            old.to_str().unwrap(),
        ],
        0,
    );
    let old_file = t.path("old.ark");
    let old_snap = old.to_str().unwrap();
    let o = t
        .cmd()
        .args([
            "export",
            "--release",
            old_snap,
            "-o",
            old_file.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let inc = t.path("inc.ark");
    export(&t.ark(), &inc, &["--incremental", "--since", old_snap]);
    let n_inc = fs::metadata(&inc).unwrap().len();
    assert!(n_inc < n_store, "{n_inc} vs {n_store}");
    // Its base missing: refused, nothing made.
    let z = t.path("z");
    let out = import(&z, &inc);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("incremental") && stderr(&out).contains("old"),
        "{}",
        stderr(&out)
    );
    assert!(!z.exists());
    assert!(import(&z, &old_file).status.success());
    let out = import(&z, &inc);
    assert!(out.status.success(), "{}", stderr(&out));
    ok_at(&z, &["verify"]);
    ok_at(&z, &["release", "verify", snap]);
    assert_eq!(
        t.cmd_at(&z)
            .args([
                "export",
                "--release",
                snap,
                "--self-contained",
                "--incremental",
                "--since",
                old_snap,
                "-o",
                "/dev/null"
            ])
            .output()
            .unwrap()
            .status
            .code(),
        Some(2)
    );

    // Bad input: refused naming what is wrong (exit 2), nothing added.
    let refused = |file: &Path, want: &[&str]| {
        let target = t.path("target");
        let out = import(&target, file);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        for w in want {
            assert!(stderr(&out).contains(w), "{w}: {}", stderr(&out));
        }
        assert!(
            !target.exists(),
            "a refused import left {}",
            target.display()
        );
        // Into an archive with the release's base: refused too, and the archive unchanged.
        let before = ok_at(&z, &["ls", "--json"]);
        let out = import(&z, file);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert_eq!(ok_at(&z, &["ls", "--json"]), before);
    };
    let bytes = fs::read(&store).unwrap();
    let cut = t.path("cut.ark");
    fs::write(&cut, &bytes[..bytes.len() - 700]).unwrap();
    refused(&cut, &["truncated"]);
    fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    refused(&cut, &["truncated"]);
    // A flipped byte in a pack, the manifest left as it was.
    let pack_at = member_offset(&store, "packs/") as usize;
    let mut flipped = bytes.clone();
    flipped[pack_at + 40] ^= 0x20;
    let f1 = t.path("flipped.ark");
    fs::write(&f1, &flipped).unwrap();
    refused(&f1, &["(`packs/", "altered"]);
    // The same with a manifest that agrees: the pieces themselves are checked.
    let mut members = members_of(&store);
    let k = members
        .iter()
        .position(|(p, _)| p.starts_with("packs/"))
        .unwrap();
    let n = members[k].1.len();
    members[k].1[n - 3] ^= 0x20;
    let f2 = t.path("flipped2.ark");
    write_consistent(&members, &f2);
    refused(&f2, &["pack "]);
    // A pack whose table claims a piece it does not hold.
    let claims = t.path("claims.ark");
    with_table(&store, &claims, |packs| {
        let f = packs
            .iter_mut()
            .flatten()
            .find(|f| matches!(f.holds, FrameHolds::Whole(_)))
            .unwrap();
        if let FrameHolds::Whole(sizes) = &mut f.holds {
            sizes.push(10);
        }
    });
    refused(&claims, &["frame at byte", "holds"]);
    // A delta whose base is neither in the file nor here.
    let nobase = t.path("nobase.ark");
    let stranger = Sha256Digest::of(b"a piece nobody has");
    with_table(&store, &nobase, |packs| {
        let f = packs
            .iter_mut()
            .flatten()
            .find(|f| matches!(f.holds, FrameHolds::Delta { .. }))
            .expect("the fixture's second bundle.json is a delta");
        if let FrameHolds::Delta { base, .. } = &mut f.holds {
            *base = FrameBase::Held(stranger);
        }
    });
    refused(
        &nobase,
        &[&stranger.hex(), "neither in the file nor in this archive"],
    );
}

/// The installed states an archive keeps, by key: (key, object).
fn installed_states(ark: &Path) -> Vec<(String, String)> {
    Ark::open(ark)
        .unwrap()
        .index()
        .installed_states()
        .unwrap()
        .into_iter()
        .map(|s| (s.key.hex(), s.object.hex()))
        .collect()
}

#[test]
fn installed_states_travel_in_a_release_file_only_when_asked() {
    let t = TestContext::new();
    let snapshot = build_fixture_release(&t);
    let snap = snapshot.to_str().unwrap();
    let export = |out: &Path, extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["export", "--release", snap, "-o", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.push("--json");
        serde_json::from_slice(&t.run_expect(&args, 0).stdout).unwrap()
    };
    let before = t.path("before.ark");
    export(&before, &[]);

    // Two states: one made at the release's lock and base commit, one at another commit.
    let state = |ark: &Path, key: &str, bytes: &[u8], base: Option<&str>| {
        let mut ark = Ark::open(ark).unwrap();
        let lock = ark.index().locks().unwrap().pop().unwrap();
        let object = ark.objects().put_bytes(bytes).unwrap();
        ark.index_mut()
            .record_installed_state(&swe_ark::store::InstalledStateRow {
                key: Sha256Digest::of(key.as_bytes()),
                object,
                lock_id: lock.id.hex(),
                repo: lock.repo,
                base_commit: base.map_or(lock.commit_id, str::to_string),
                instance_id: "acme__widget-1".into(),
                editable: true,
                env_entries: 3,
                tree_entries: 1,
                size: bytes.len() as u64,
                install_seconds: 2.5,
                made_at: 0,
            })
            .unwrap();
        (Sha256Digest::of(key.as_bytes()).hex(), object.hex())
    };
    let kept = state(
        &t.ark(),
        "at base",
        b"the install's changes, as a tar.zst",
        None,
    );
    state(
        &t.ark(),
        "elsewhere",
        b"another commit's",
        Some(&"0".repeat(40)),
    );

    // Without the flag: the same bytes as before the archive had states.
    let plain = t.path("plain.ark");
    let report = export(&plain, &[]);
    assert_eq!(report["installed_states"].as_u64(), Some(0), "{report}");
    assert!(fs::read(&plain).unwrap() == fs::read(&before).unwrap());

    // With it: the state at the release's base commit and its object, the same bytes twice.
    let with = t.path("with.ark");
    let report = export(&with, &["--installed-states"]);
    assert_eq!(report["installed_states"].as_u64(), Some(1), "{report}");
    assert_eq!(
        report["installed_state_bytes"].as_u64(),
        Some(35),
        "{report}"
    );
    let again = t.path("again.ark");
    export(&again, &["--installed-states"]);
    assert!(fs::read(&with).unwrap() == fs::read(&again).unwrap());
    let out = t.run_expect(
        &[
            "export",
            "--release",
            snap,
            "-o",
            again.to_str().unwrap(),
            "--installed-states",
        ],
        0,
    );
    assert!(
        stderr(&out).contains("1 installed state(s)"),
        "{}",
        stderr(&out)
    );
    // An incremental file carries those of the instances it carries.
    let old = t.path("old.json");
    let old = old.to_str().unwrap();
    t.run_expect(
        &[
            "release",
            "create",
            "old",
            "--instance-ids",
            "acme__widget-1",
            "-o",
            old,
        ],
        0,
    );
    let inc = t.path("inc.ark");
    let report = export(
        &inc,
        &["--incremental", "--since", old, "--installed-states"],
    );
    assert_eq!(report["instances"].as_u64(), Some(2), "{report}");
    assert_eq!(report["bundles"].as_u64(), Some(1), "{report}");
    assert_eq!(report["installed_states"].as_u64(), Some(1), "{report}");

    // Imported: the state is there, under its key; without the flag, none.
    let x = t.path("x");
    let out = t.run_expect_at(&x, &["import-archive", with.to_str().unwrap(), "--json"], 0);
    let imported: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(imported["installed_states_added"].as_u64(), Some(1));
    assert_eq!(installed_states(&x), vec![kept.clone()]);
    t.run_expect_at(&x, &["verify"], 0);
    let y = t.path("y");
    t.run_expect_at(&y, &["import-archive", plain.to_str().unwrap()], 0);
    assert_eq!(installed_states(&y), vec![]);
    // Into an archive with its own state under the key: its own is kept.
    let mine = state(&y, "at base", b"this archive's own", None);
    let out = t.run_expect_at(&y, &["import-archive", with.to_str().unwrap()], 0);
    assert!(
        stderr(&out).contains("installed states 0 new, 1 already here"),
        "{}",
        stderr(&out)
    );
    assert_eq!(installed_states(&y), vec![mine]);
    // ... and the file's object for it, which nothing would name, is not stored.
    let theirs = &kept.1;
    let stored = |ark: &Path| {
        ark.join(format!("objects/sha256/{}/{}", &theirs[..2], &theirs[2..]))
            .is_file()
    };
    assert!(stored(&x), "an import whose state is new stores its object");
    assert!(
        !stored(&y),
        "an import whose state the archive had leaves its object out"
    );

    // A state whose object the file lacks, or made at a commit no instance has: refused,
    // naming it, nothing made.
    let refused = |members: &[(String, Vec<u8>)], want: &[&str]| {
        let file = t.path("damaged.ark");
        write_consistent(members, &file);
        let target = t.path("target");
        let out = t
            .cmd_at(&target)
            .arg("import-archive")
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        for w in want {
            assert!(stderr(&out).contains(w), "{w}: {}", stderr(&out));
        }
        assert!(!target.exists());
    };
    let members = members_of(&with);
    let slice_of = |members: &[(String, Vec<u8>)]| -> serde_json::Value {
        serde_json::from_slice(&members.iter().find(|(p, _)| p == "index.json").unwrap().1).unwrap()
    };
    let with_slice = |members: &mut Vec<(String, Vec<u8>)>, slice: &serde_json::Value| {
        let m = members.iter_mut().find(|(p, _)| p == "index.json").unwrap();
        m.1 = serde_json::to_vec_pretty(slice).unwrap();
    };
    let (key, object) = &kept;
    let mut lacking = members.clone();
    lacking.retain(|(p, _)| p != &format!("objects/sha256/{}/{}", &object[..2], &object[2..]));
    let mut slice = slice_of(&lacking);
    slice["objects"]
        .as_array_mut()
        .unwrap()
        .retain(|o| o["id"].as_str() != Some(object));
    with_slice(&mut lacking, &slice);
    refused(&lacking, &[key, object, "does not hold"]);
    let mut elsewhere = members.clone();
    let mut slice = slice_of(&elsewhere);
    slice["installed_states"][0]["base_commit"] = "0".repeat(40).into();
    with_slice(&mut elsewhere, &slice);
    refused(&elsewhere, &[key, "no instance the file carries"]);
}
