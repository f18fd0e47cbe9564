//! What git says about a base commit (`vcs.json`) and the work tree that says the same: a
//! repository made here with lightweight and annotated tags, a merge, a tag whose commit is
//! dated after the base commit (SWE-bench's setup deletes it), a tag after the base commit;
//! the record computed and compared with git in a clone set up as SWE-bench's script sets it
//! up; the work tree's `git describe` and setuptools_scm's version against that clone's; the
//! record carried in bundles packed from a mirror and from a clone, rebuilt by
//! `verify --rebuild`; and validation and replay running a test that asks git for the version.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::widget::{ADD_TEST, GOLD, Widget, instance, test_patch};
use common::{TestContext, git, git_commit_all, git_dated, last_line, stderr, stdout};
use swe_ark::vcs::{self, TagRecord, VcsRecord};

/// `git` that may fail: (success, stdout).
fn git_try(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    )
}

/// The upstream repository and its commits.
struct Upstream {
    dir: PathBuf,
    /// The base commit: c1 ← c2 ← c3 ← merge(c3, s1) ← c5 ← c6, with s1 on a branch from c2.
    base: String,
    /// c5, tagged v1.1 but committed (2025) after the base commit (2021).
    c5: String,
    c3: String,
}

/// ```text
/// c1 v0.9 (lightweight)     2020-01-01
/// c2 v1.0 (annotated)       2020-02-01
/// │ └ s1 v1.0.post1 (annotated, on a branch)   2020-02-15
/// c3                        2020-03-01
/// c4 = merge c3 s1, latest (lightweight)        2020-04-01
/// c5 v1.1 (lightweight)     2025-01-01   dated after the base: SWE-bench deletes the tag
/// c6 the base commit        2021-01-01
/// c7 v2.0 (annotated)       2021-02-01   after the base: not reachable from it
/// ```
fn upstream(t: &TestContext) -> Upstream {
    let dir = t.path("upstream");
    fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    let step = |n: &str, date: &str| {
        fs::write(dir.join("step.txt"), n).unwrap();
        git_commit_all(&dir, n, date)
    };
    fs::write(dir.join("README.txt"), "tagged\n").unwrap();
    let c1 = step("c1", "2020-01-01T00:00:00Z");
    git(&dir, &["tag", "v0.9", &c1]);
    let c2 = step("c2", "2020-02-01T00:00:00Z");
    git(&dir, &["tag", "-a", "-m", "1.0", "v1.0", &c2]);
    git(&dir, &["checkout", "-q", "-b", "side"]);
    fs::write(dir.join("side.txt"), "side\n").unwrap();
    let s1 = git_commit_all(&dir, "s1", "2020-02-15T00:00:00Z");
    git(&dir, &["tag", "-a", "-m", "1.0.post1", "v1.0.post1", &s1]);
    git(&dir, &["checkout", "-q", "main"]);
    let c3 = step("c3", "2020-03-01T00:00:00Z");
    git_dated(
        &dir,
        &["merge", "-q", "--no-ff", "-m", "c4", "side"],
        "2020-04-01T00:00:00Z",
    );
    git(&dir, &["tag", "latest"]);
    let c5 = step("c5", "2025-01-01T00:00:00Z");
    git(&dir, &["tag", "v1.1", &c5]);
    let base = step("c6", "2021-01-01T00:00:00Z");
    let c7 = step("c7", "2021-02-01T00:00:00Z");
    git(&dir, &["tag", "-a", "-m", "2.0", "v2.0", &c7]);
    Upstream { dir, base, c5, c3 }
}

/// A clone set up as SWE-bench's setup script sets one up: reset to the base commit, then
/// every tag whose commit's `%ci` is later than the base commit's deleted.
fn swe_bench_clone(t: &TestContext, up: &Upstream, name: &str) -> PathBuf {
    let dir = t.path(name);
    git(
        t.dir.path(),
        &[
            "clone",
            "-q",
            up.dir.to_str().unwrap(),
            dir.to_str().unwrap(),
        ],
    );
    git(&dir, &["reset", "-q", "--hard", &up.base]);
    git(&dir, &["remote", "remove", "origin"]);
    let target = git(&dir, &["show", "-s", "--format=%ci", &up.base]);
    for tag in git(&dir, &["tag", "-l"]).lines() {
        let commit = git(&dir, &["rev-list", "-n", "1", tag]);
        let when = git(&dir, &["show", "-s", "--format=%ci", &commit]);
        if when > target {
            git(&dir, &["tag", "-d", tag]);
        }
    }
    dir
}

fn tag(name: &str, distance: u64, annotated: bool) -> TagRecord {
    TagRecord {
        annotated,
        distance,
        name: name.into(),
    }
}

/// `git describe args` in `dir`, as `(tag, distance)`.
fn describe(dir: &Path, args: &[&str]) -> Option<(String, u64)> {
    let mut all = vec!["describe", "--long"];
    all.extend_from_slice(args);
    let (ok, out) = git_try(dir, &all);
    if !ok {
        return None;
    }
    let (rest, _hash) = out.rsplit_once("-g")?;
    let (name, n) = rest.rsplit_once('-')?;
    Some((name.to_string(), n.parse().ok()?))
}

/// What a tool may ask git about the version, each answered by the SWE-bench clone and by a
/// work tree: every way must agree.
const QUESTIONS: &[&[&str]] = &[
    &["--tags"],
    // setuptools_scm's pattern; versioneer's is a prefix.
    &["--tags", "--match", "*[0-9]*"],
    &["--tags", "--match", "v0*"],
    &["--tags", "--match", "v1.0", "--match", "v0.9"],
    &["--tags", "--exclude", "latest", "--exclude", "v1.0.post1"],
    // Annotated tags only.
    &[],
];

fn assert_answers_like(work: &Path, clone: &Path) {
    for q in QUESTIONS {
        assert_eq!(
            describe(work, q),
            describe(clone, q),
            "git describe --long {q:?}"
        );
    }
    assert_eq!(
        git(work, &["rev-list", "--count", "HEAD"]),
        git(clone, &["rev-list", "--count", "HEAD"])
    );
}

#[test]
fn the_record_says_what_git_says_in_swe_benchs_clone() {
    let t = TestContext::new();
    let up = upstream(&t);
    let record = vcs::record(&up.dir.join(".git"), &up.base).unwrap();
    let expected_tags = vec![
        tag("latest", 2, false),
        tag("v1.0.post1", 4, true),
        tag("v1.0", 5, true),
        tag("v0.9", 6, false),
    ];
    assert_eq!(record.base_commit.hex(), up.base);
    assert_eq!(record.commits, 7);
    assert_eq!(record.committer_date, "1609459200 +0000");
    assert_eq!(
        record.describe.as_deref(),
        Some(format!("latest-2-g{}", up.base).as_str())
    );
    assert_eq!(record.tags, expected_tags);

    // The same as git says in a clone set up as SWE-bench's: describe, and each distance.
    let clone = swe_bench_clone(&t, &up, "clone");
    assert_eq!(
        git(&clone, &["describe", "--tags", "--long", "--abbrev=40"]),
        record.describe.clone().unwrap()
    );
    for t in &record.tags {
        let range = format!("{}..HEAD", t.name);
        assert_eq!(
            git(&clone, &["rev-list", "--count", &range]),
            t.distance.to_string(),
            "{}",
            t.name
        );
    }
    // v1.1 is reachable in the upstream repository, and nearer, but its commit is newer.
    assert_eq!(
        describe(&up.dir, &["--tags", &up.base]),
        Some(("v1.1".to_string(), 1))
    );
    assert!(!git(&clone, &["tag", "-l"]).contains("v1.1"));

    // A base commit with no tag below it, and one that is a tag itself.
    let first = git(&up.dir, &["rev-list", "--max-parents=0", "HEAD"]);
    let untagged = t.path("untagged");
    fs::create_dir_all(&untagged).unwrap();
    git(&untagged, &["init", "-q", "-b", "main"]);
    fs::write(untagged.join("a"), "a").unwrap();
    let one = git_commit_all(&untagged, "one", "2020-01-01T00:00:00Z");
    let r = vcs::record(&untagged.join(".git"), &one).unwrap();
    assert_eq!((r.commits, r.describe, r.tags), (1, None, vec![]));
    let r = vcs::record(&up.dir.join(".git"), &first).unwrap();
    assert_eq!(r.tags, vec![tag("v0.9", 0, false)]);

    // A shallow clone's history is cut: no record from it.
    let shallow = t.path("shallow");
    git(
        t.dir.path(),
        &[
            "clone",
            "-q",
            "--depth",
            "2",
            &format!("file://{}", up.dir.display()),
            shallow.to_str().unwrap(),
        ],
    );
    let head = git(&shallow, &["rev-parse", "HEAD"]);
    let err = vcs::record(&shallow.join(".git"), &head).unwrap_err();
    assert!(err.to_string().contains("shallow"), "{err}");
}

#[test]
fn the_work_tree_answers_git_as_swe_benchs_clone_does() {
    let t = TestContext::new();
    let up = upstream(&t);
    let record = vcs::record(&up.dir.join(".git"), &up.base).unwrap();
    let clone = swe_bench_clone(&t, &up, "clone");

    let build = |name: &str| {
        let dir = t.path(name);
        fs::create_dir_all(dir.join("pkg")).unwrap();
        fs::write(dir.join("pkg/__init__.py"), "").unwrap();
        fs::write(dir.join("README.txt"), "tagged\n").unwrap();
        vcs::build_work_tree(&dir, Some(&record)).unwrap();
        dir
    };
    let work = build("work");
    assert_answers_like(&work, &clone);
    assert_eq!(
        describe(&work, &["--tags", "--match", "*[0-9]*"]),
        Some(("v1.0.post1".to_string(), 4))
    );
    // HEAD holds the codebase, committed: nothing to add, nothing modified.
    assert_eq!(git(&work, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&work, &["ls-tree", "-r", "--name-only", "HEAD"]),
        "README.txt\npkg/__init__.py"
    );

    // The same commits and tags anywhere: fixed names, e-mails and dates.
    let again = build("again");
    let ids = |dir: &Path| {
        (
            git(dir, &["rev-parse", "HEAD"]),
            git(dir, &["show-ref", "--tags"]),
        )
    };
    assert_eq!(ids(&work), ids(&again));
    assert_eq!(
        ids(&work).0,
        "87aa5ede957e4a752650bb48cfde0341dc2dc6e1",
        "the work tree's commits changed: builders of other versions would disagree"
    );

    // No record (a bundle from before version 2): one commit, no tag, the same anywhere.
    let bare = t.path("no-record");
    fs::create_dir_all(&bare).unwrap();
    fs::write(bare.join("README.txt"), "tagged\n").unwrap();
    vcs::build_work_tree(&bare, None).unwrap();
    assert_eq!(git(&bare, &["rev-list", "--count", "HEAD"]), "1");
    assert_eq!(describe(&bare, &["--tags"]), None);
    assert_eq!(
        git(&bare, &["rev-parse", "HEAD"]),
        "09ea43672c9ec7906b9c46514be5e56001533015"
    );

    // An empty codebase still makes a work tree.
    let empty = t.path("empty");
    fs::create_dir_all(&empty).unwrap();
    vcs::build_work_tree(&empty, Some(&record)).unwrap();
    assert_answers_like(&empty, &clone);
}

#[test]
fn a_long_history_is_one_fast_import() {
    let t = TestContext::new();
    let base: swe_ark::digest::GitOid = "0123456789abcdef0123456789abcdef01234567".parse().unwrap();
    let tags = vec![tag("release-7", 3, true), tag("7.0", 12_000, true)];
    let record = VcsRecord {
        base_commit: base,
        commits: 20_000,
        committer_date: "1556784672 +0200".into(),
        describe: VcsRecord::describe_of(&base, &tags),
        tags,
    };
    let dir = t.path("long");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("a"), "a").unwrap();
    vcs::build_work_tree(&dir, Some(&record)).unwrap();
    assert_eq!(git(&dir, &["rev-list", "--count", "HEAD"]), "20000");
    assert_eq!(
        describe(&dir, &["--tags"]),
        Some(("release-7".to_string(), 3))
    );
    assert_eq!(
        describe(&dir, &["--tags", "--match", "[0-9]*"]),
        Some(("7.0".to_string(), 12_000))
    );
    // HEAD carries the base commit's date.
    assert_eq!(
        git(&dir, &["log", "-1", "--format=%cd", "--date=raw"]),
        "1556784672 +0200"
    );
}

/// setuptools_scm (from the wheels `make test` fetched), run on `dir` with nothing but the
/// interpreter's standard library and those wheels: the version it computes.
fn setuptools_scm_version(python: &Path, site: &Path, dir: &Path) -> String {
    let out = Command::new(python)
        .args(["-S", "-m", "setuptools_scm"])
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("PYTHONPATH", site)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "setuptools_scm in {}: {}",
        dir.display(),
        stderr(&out)
    );
    last_line(&out.stdout)
}

#[test]
fn setuptools_scm_computes_the_version_swe_benchs_clone_gives() {
    let t = TestContext::new();
    let Some((_, python)) = common::pyfix::python() else {
        eprintln!("skipped: no Python 3.9-3.13 on this machine");
        return;
    };
    let wheels = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/scm-wheels");
    let Ok(list) = fs::read_dir(&wheels) else {
        eprintln!("skipped: no .tools/scm-wheels (`make test` fetches them)");
        return;
    };
    // Pure-Python wheels are zip files of what an install puts in site-packages.
    let site = t.path("site");
    for w in list.flatten() {
        let out = Command::new(&python)
            .args([
                "-c",
                "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])",
            ])
            .arg(w.path())
            .arg(&site)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let up = upstream(&t);
    let record = vcs::record(&up.dir.join(".git"), &up.base).unwrap();
    let clone = swe_bench_clone(&t, &up, "clone");
    let work = t.path("work");
    fs::create_dir_all(&work).unwrap();
    fs::write(work.join("README.txt"), "tagged\n").unwrap();
    vcs::build_work_tree(&work, Some(&record)).unwrap();

    let public = |v: String| v.split('+').next().unwrap_or_default().to_string();
    let expected = setuptools_scm_version(&python, &site, &clone);
    assert_eq!(public(expected.clone()), "1.0.post2.dev4", "{expected}");
    let got = setuptools_scm_version(&python, &site, &work);
    assert_eq!(
        public(got.clone()),
        public(expected.clone()),
        "{got} vs {expected}"
    );
    // Without the history, as swe-ark's work tree was before vcs.json.
    let bare = t.path("bare");
    fs::create_dir_all(&bare).unwrap();
    fs::write(bare.join("README.txt"), "tagged\n").unwrap();
    vcs::build_work_tree(&bare, None).unwrap();
    assert_eq!(
        public(setuptools_scm_version(&python, &site, &bare)),
        "0.1.dev1"
    );
}

/// An instance of the upstream repository at its base commit.
fn tagged_instance(t: &TestContext, base: &str) -> PathBuf {
    let p = t.path("inst.json");
    let v = serde_json::json!({
        "instance_id": "acme__tagged-1",
        "repo": "acme/tagged",
        "base_commit": base,
        "patch": "diff --git a/README.txt b/README.txt\n--- a/README.txt\n+++ b/README.txt\n@@ -1 +1 @@\n-tagged\n+fixed\n",
        "test_patch": "diff --git a/t.txt b/t.txt\nnew file mode 100644\n--- /dev/null\n+++ b/t.txt\n@@ -0,0 +1 @@\n+t\n",
        "version": "1.0",
        "FAIL_TO_PASS": [],
        "PASS_TO_PASS": [],
    });
    fs::write(&p, v.to_string()).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A new archive mirroring the upstream as acme/tagged, and the instance at its base commit.
fn tagged_archive() -> (TestContext, Upstream, PathBuf) {
    let t = TestContext::new();
    let up = upstream(&t);
    let inst = tagged_instance(&t, &up.base);
    t.run_expect(&["mirror", "add", s(&up.dir), "--name", "acme/tagged"], 0);
    (t, up, inst)
}

#[test]
fn bundles_carry_the_record_from_a_mirror_or_a_clone_alike() {
    let (t, up, inst) = tagged_archive();
    let pack = |extra: &[&str], out: &str| {
        let mut args = vec!["pack", "--instance", s(&inst), "--output"];
        let dir = t.path(out);
        args.push(s(&dir));
        args.extend_from_slice(extra);
        let o = t.run_expect(&args, 0);
        (last_line(&o.stdout), stderr(&o))
    };
    let (from_mirror, note) = pack(&["--repo", "acme/tagged"], "m");
    assert!(note.contains("git describe latest-2"), "{note}");
    // A full clone checked out at the base commit gives the same bundle.
    let clone = t.path("checkout");
    git(t.dir.path(), &["clone", "-q", s(&up.dir), s(&clone)]);
    git(&clone, &["checkout", "-q", &up.base]);
    let (from_clone, _) = pack(&["--codebase", s(&clone)], "c");
    assert_eq!(from_clone, from_mirror);

    let record = vcs::record(&up.dir.join(".git"), &up.base).unwrap();
    let target = t.path("unpacked");
    let bundle = t.path(&format!("m/{from_mirror}.tar.zst"));
    t.run_expect(&["unpack", s(&bundle), "-o", s(&target)], 0);
    assert_eq!(
        fs::read(target.join("vcs.json")).unwrap(),
        record.to_bytes()
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&fs::read(target.join("bundle.json")).unwrap()).unwrap();
    assert_eq!(manifest["version"], 2);

    // Without it: a version 1 bundle, as before, whether asked for or for want of a repository.
    let (no_vcs, _) = pack(&["--repo", "acme/tagged", "--no-vcs"], "n");
    let plain = t.path("plain");
    git(t.dir.path(), &["clone", "-q", s(&up.dir), s(&plain)]);
    git(&plain, &["checkout", "-q", &up.base]);
    fs::remove_dir_all(plain.join(".git")).unwrap();
    let (from_plain, _) = pack(&["--codebase", s(&plain)], "p");
    assert_eq!(from_plain, no_vcs);
    assert_ne!(no_vcs, from_mirror);
    let target = t.path("unpacked-v1");
    let bundle = t.path(&format!("n/{no_vcs}.tar.zst"));
    t.run_expect(&["unpack", s(&bundle), "-o", s(&target)], 0);
    assert!(!target.join("vcs.json").exists());

    // A checkout at another commit says why it gives none.
    git(&clone, &["checkout", "-q", &up.c3]);
    let (_, note) = pack(&["--codebase", s(&clone)], "o");
    assert!(note.contains("not the base commit"), "{note}");

    // From a file: the same bundle; a record of another commit is refused.
    let file = t.path("vcs.json");
    fs::write(&file, record.to_bytes()).unwrap();
    let (from_file, _) = pack(&["--codebase", s(&plain), "--vcs", s(&file)], "f");
    assert_eq!(from_file, from_mirror);
    let mut other = record.clone();
    other.base_commit = up.c5.parse().unwrap();
    other.describe = VcsRecord::describe_of(&other.base_commit, &other.tags);
    fs::write(&file, other.to_bytes()).unwrap();
    let out = t.run_expect(
        &[
            "pack",
            "--instance",
            s(&inst),
            "--codebase",
            s(&plain),
            "--vcs",
            s(&file),
            "--output",
            s(&t.path("x")),
        ],
        2,
    );
    assert!(
        stderr(&out).contains("not the base commit"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn verify_rebuild_makes_the_record_again_and_names_a_moved_tag() {
    let (t, up, inst) = tagged_archive();
    t.run_expect(
        &["pack", "--instance", s(&inst), "--repo", "acme/tagged"],
        0,
    );
    let shown = stdout(&t.run_expect(&["show", "acme__tagged-1"], 0));
    assert!(shown.contains("swe-ark-bundle v2"), "{shown}");
    assert!(shown.contains("vcs.json"), "{shown}");
    let out = t.run_expect(&["verify", "--rebuild"], 0);
    assert!(stdout(&out).contains("acme__tagged-1"), "{}", stdout(&out));

    // Upstream tags c3 afterwards: the mirror now says something else about the base commit.
    git(&up.dir, &["tag", "v1.0.1", &up.c3]);
    t.run_expect(&["mirror", "update", "acme/tagged"], 0);
    let out = t.run_expect(&["verify", "--rebuild"], 1);
    let text = stdout(&out);
    assert!(text.contains("vcs.json"), "{text}");
    assert!(text.contains("v1.0.1 at 4"), "{text}");

    // A version 1 bundle is rebuilt as version 1.
    let (t, _, inst) = tagged_archive();
    t.run_expect(
        &[
            "pack",
            "--instance",
            s(&inst),
            "--repo",
            "acme/tagged",
            "--no-vcs",
        ],
        0,
    );
    t.run_expect(&["verify", "--rebuild"], 0);
}

#[test]
fn validation_and_replay_run_tests_in_the_same_history() {
    let t = TestContext::new();
    let Some(w) = Widget::new(&t) else { return };
    // The widget's one commit tagged, two more on top: the base commit is v1.0-2.
    git(&w.repo, &["tag", "-a", "-m", "1.0", "v1.0"]);
    fs::write(w.repo.join("NEWS.txt"), "one\n").unwrap();
    git_commit_all(&w.repo, "news", "2021-06-02T00:00:00Z");
    fs::write(w.repo.join("NEWS.txt"), "two\n").unwrap();
    let base = git_commit_all(&w.repo, "more news", "2021-06-03T00:00:00Z");
    // The context's setup (its pre_install) runs before the install, and what it made is in
    // the setup commit; a system package manager's command is not run.
    let manifest = w.manifests.join("acme__widget.toml");
    let text = fs::read_to_string(&manifest).unwrap().replace(
        "[versions.\"1.0\"]\n",
        "[versions.\"1.0\"]\npre_install = [\"apt-get install -y nothing\", \
         \"echo done > setup-marker.txt\"]\n",
    );
    fs::write(&manifest, text).unwrap();
    // A test that asks git, in the sandbox, what a version tool would ask: one commit more
    // than the base, the setup commit SWE-bench's image makes (`SWE-bench`), as there.
    let describe_test = "\n\ndef test_describe():\n    import subprocess\n    out = subprocess.run(['git', 'describe', '--tags', '--long', '--match', '*[0-9]*'], capture_output=True, text=True, check=True).stdout\n    assert out.startswith('v1.0-3-g'), out\n    log = subprocess.run(['git', 'log', '-1', '--format=%s'], capture_output=True, text=True, check=True).stdout\n    assert log == 'SWE-bench\\n', log\n    made = subprocess.run(['git', 'show', '--name-only', '--format=', 'HEAD'], capture_output=True, text=True, check=True).stdout\n    assert made == 'setup-marker.txt\\n', made\n    assert open('setup-marker.txt').read() == 'done\\n'\n";
    let add = "tests/test_core.py::test_add";
    let sub = "tests/test_core.py::test_sub";
    let described = "tests/test_core.py::test_describe";
    let inst = instance(
        1,
        &test_patch(&format!("{ADD_TEST}{describe_test}")),
        GOLD,
        &[add],
        &[sub, described],
        &base,
    );
    w.mirror_lock_import(&t, &[inst]);
    // Published lists that hold test_describe: kept only if it passed before and after.
    let out = w.ok(&t, &["validate", "--timeout", "60"]);
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&w.ok(&t, &["ls", "--validated", "--json"])).unwrap();
    assert_eq!(rows[0]["verdict"], "kept", "{out}\n{rows:?}");
    w.ok(&t, &["pack", "--all-validated"]);

    // Replayed from the bundle: the work tree made from its vcs.json.
    let mut run = w.cmd(&t);
    run.args(["replay", "--gold", "--run-id", "gold"]);
    let out = run.output().unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(
        &fs::read(t.ark().join("runs/gold/gold/acme__widget-1/report.json")).unwrap(),
    )
    .unwrap();
    let r = &report["acme__widget-1"];
    assert_eq!(r["resolved"], true, "{report}");
    assert_eq!(
        r["tests_status"]["PASS_TO_PASS"]["success"],
        serde_json::json!([sub, described]),
        "{report}"
    );
}
