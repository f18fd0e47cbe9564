//! Submodules: mirrored with their full history like any repository, pinned by the
//! superproject's gitlinks, carried in bundles (checked by tree id), unpacked and rebuilt
//! offline; gitlinks that cannot be mirrored are errors naming them.
//!
//! The repositories sit behind a git base directory (`base/OWNER/NAME.git`, bare), as GitHub
//! would serve them: `.gitmodules` names one submodule by its GitHub URL and one by a relative
//! URL, which itself has a submodule of its own named by an scp-like GitHub URL.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const DATE: &str = "2024-01-01T00:00:00Z";

fn write(dir: &Path, rel: &str, content: &str) {
    let p = dir.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

/// Stages a gitlink at `path` to `commit` in the repository at `dir`.
fn gitlink(dir: &Path, path: &str, commit: &str) {
    git(
        dir,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{commit},{path}"),
        ],
    );
}

/// The repositories, bare under `base/`, and the commits that matter.
struct Upstreams {
    base: PathBuf,
    /// `file://…/base`: the git base `mirror add` resolves OWNER/NAME against.
    base_url: String,
    /// acme/app's commit with both submodules.
    app: String,
    /// kkos/onig's commit that acme/app names (on branch `feature` only).
    onig: String,
    /// acme/helpers's commit that acme/app names, and other/tiny's that it names.
    helpers: String,
    tiny: String,
}

/// Publishes the repository at `work` as `base/<name>.git`.
fn publish(base: &Path, work: &Path, name: &str) {
    let dest = base.join(format!("{name}.git"));
    fs::create_dir_all(dest.parent().unwrap()).unwrap();
    git(
        work,
        &["clone", "-q", "--bare", ".", dest.to_str().unwrap()],
    );
}

fn make_upstreams(root: &Path) -> Upstreams {
    let base = root.join("base");
    let work = root.join("work");

    let tiny_dir = work.join("tiny");
    fs::create_dir_all(&tiny_dir).unwrap();
    write(&tiny_dir, "tiny.h", "#define TINY 1\n");
    let tiny = git_init_commit(&tiny_dir, "tiny", DATE);
    publish(&base, &tiny_dir, "other/tiny");

    let helpers_dir = work.join("helpers");
    fs::create_dir_all(&helpers_dir).unwrap();
    write(
        &helpers_dir,
        "helpers.py",
        "def helped():\n    return True\n",
    );
    write(
        &helpers_dir,
        ".gitmodules",
        "[submodule \"deps/tiny\"]\n\tpath = deps/tiny\n\turl = git@github.com:other/tiny.git\n",
    );
    git(&helpers_dir, &["init", "-q", "-b", "main"]);
    git(&helpers_dir, &["add", "-A"]);
    gitlink(&helpers_dir, "deps/tiny", &tiny);
    let helpers = git_commit_staged(&helpers_dir, "helpers", DATE);
    publish(&base, &helpers_dir, "acme/helpers");

    // The commit acme/app names is on a branch only, which upstream deletes later.
    let onig_dir = work.join("onig");
    fs::create_dir_all(&onig_dir).unwrap();
    write(&onig_dir, "README", "oniguruma\n");
    git_init_commit(&onig_dir, "first", DATE);
    git(&onig_dir, &["checkout", "-q", "-b", "feature"]);
    write(
        &onig_dir,
        "src/onig.c",
        "int onig_main(void) { return 0; }\n",
    );
    write(&onig_dir, "configure", "#!/bin/sh\necho configured\n");
    fs::set_permissions(
        onig_dir.join("configure"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::os::unix::fs::symlink("onig.c", onig_dir.join("src/link.c")).unwrap();
    let onig = git_commit_all(&onig_dir, "feature", "2024-01-02T00:00:00Z");
    git(&onig_dir, &["checkout", "-q", "main"]);
    publish(&base, &onig_dir, "kkos/onig");

    let app_dir = work.join("app");
    fs::create_dir_all(&app_dir).unwrap();
    write(&app_dir, "app.py", "print('app')\n");
    write(
        &app_dir,
        ".gitmodules",
        "[submodule \"onig\"]\n\tpath = modules/onig\n\turl = https://github.com/kkos/onig.git\n\
         [submodule \"helpers\"]\n\tpath = vendor/helpers\n\turl = ../helpers.git\n",
    );
    git(&app_dir, &["init", "-q", "-b", "main"]);
    git(&app_dir, &["add", "-A"]);
    gitlink(&app_dir, "modules/onig", &onig);
    gitlink(&app_dir, "vendor/helpers", &helpers);
    let app = git_commit_staged(&app_dir, "app", "2024-01-03T00:00:00Z");
    publish(&base, &app_dir, "acme/app");

    let base_url = format!("file://{}", base.display());
    Upstreams {
        base,
        base_url,
        app,
        onig,
        helpers,
        tiny,
    }
}

/// Instance `id` of `repo` at `commit`, written to `<id>.json`; its path.
fn instance_file(t: &TestContext, repo: &str, id: &str, commit: &str) -> PathBuf {
    let mut v: serde_json::Value = serde_json::from_str(&fixture_instance_json()).unwrap();
    v["instance_id"] = id.into();
    v["repo"] = repo.into();
    v["base_commit"] = commit.into();
    v["environment_setup_commit"] = commit.into();
    let p = t.path(&format!("{id}.json"));
    fs::write(&p, v.to_string()).unwrap();
    p
}

/// Imports the instance of [`instance_file`] into the archive; its file.
fn import(t: &TestContext, repo: &str, id: &str, commit: &str) -> PathBuf {
    let file = instance_file(t, repo, id, commit);
    t.run_expect(
        &[
            "import",
            file.to_str().unwrap(),
            "--environments-as-of",
            "commit",
        ],
        0,
    );
    file
}

fn mirror_git(t: &TestContext, name: &str) -> PathBuf {
    t.ark()
        .join("mirrors")
        .join(format!("{}.git", name.replacen('/', "__", 1)))
}

fn pack(t: &TestContext, inst: &Path) -> String {
    let out = t.run_expect(
        &[
            "pack",
            "--repo",
            "acme/app",
            "--instance",
            inst.to_str().unwrap(),
        ],
        0,
    );
    last_line(&out.stdout)
}

/// `git archive COMMIT` of the bare repository `git_dir`, extracted under `dest`.
fn git_archive(git_dir: &Path, commit: &str, dest: &Path) {
    fs::create_dir_all(dest).unwrap();
    let status = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "git --git-dir={} archive {commit} | tar -x -C {}",
            git_dir.display(),
            dest.display()
        ))
        .status()
        .unwrap();
    assert!(status.success());
}

fn tree_of(git_dir: &Path, commit: &str) -> String {
    git(git_dir, &["rev-parse", &format!("{commit}^{{tree}}")])
}

#[test]
fn submodules_are_mirrored_pinned_carried_and_rebuilt() {
    let t = TestContext::new();
    let up = make_upstreams(t.dir.path());
    let inst = import(&t, "acme/app", "acme__app-1", &up.app);

    // One command: the superproject and, for its instance's base commit, each submodule a
    // mirror of its own, the GitHub URLs through the git base, the relative one beside the
    // superproject, the submodule's own submodule too.
    let out = stdout(&t.run_expect(
        &["mirror", "add", "acme/app", "--git-base", &up.base_url],
        0,
    ));
    for name in ["acme/app", "kkos/onig", "acme/helpers", "other/tiny"] {
        assert!(out.contains(&format!("mirrored {name}:")), "{out}");
    }
    assert!(
        out.contains("submodule modules/onig of acme/app: kkos/onig"),
        "{out}"
    );
    assert!(
        out.contains("submodule vendor/helpers/deps/tiny of acme/app: other/tiny"),
        "{out}"
    );
    // Each gitlink commit pinned in its mirror, for the instance that needs it.
    let pinned = |name: &str, path: &str, commit: &str| {
        let r = format!("refs/swe-ark/instances/acme__app-1/base_commit-submodules/{path}");
        assert_eq!(
            git(&mirror_git(&t, name), &["rev-parse", &r]),
            commit,
            "{r}"
        );
    };
    pinned("kkos/onig", "modules/onig", &up.onig);
    pinned("acme/helpers", "vendor/helpers", &up.helpers);
    pinned("other/tiny", "vendor/helpers/deps/tiny", &up.tiny);
    // Full history: the other branch came too.
    git(
        &mirror_git(&t, "kkos/onig"),
        &["rev-parse", "refs/heads/main"],
    );
    t.run_expect(&["mirror", "verify"], 0);

    // Upstream deletes the branch and collects the commit; the pin keeps it here.
    let onig_up = up.base.join("kkos/onig.git");
    git(&onig_up, &["branch", "-D", "feature"]);
    git(&onig_up, &["reflog", "expire", "--expire=now", "--all"]);
    git(&onig_up, &["gc", "-q", "--prune=now"]);
    let update = stdout(&t.run_expect(&["mirror", "update", "--git-base", &up.base_url], 0));
    assert!(update.contains("- refs/heads/feature"), "{update}");
    git(&mirror_git(&t, "kkos/onig"), &["cat-file", "-e", &up.onig]);

    // Packed: the submodules' files in the bundle, each gitlink with its commit's tree.
    let id = pack(&t, &inst);
    let show: serde_json::Value =
        serde_json::from_slice(&t.run_expect(&["show", "--json", &id], 0).stdout).unwrap();
    let manifest = &show["manifest"];
    assert_eq!(
        manifest["codebase_tree"],
        tree_of(&up.base.join("acme/app.git"), &up.app).as_str()
    );
    let links: Vec<(String, String, String)> = manifest["gitlinks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["path"].as_str().unwrap().to_string(),
                g["commit"].as_str().unwrap().to_string(),
                g["tree"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        links,
        vec![
            (
                "codebase/modules/onig".to_string(),
                up.onig.clone(),
                tree_of(&mirror_git(&t, "kkos/onig"), &up.onig)
            ),
            (
                "codebase/vendor/helpers".to_string(),
                up.helpers.clone(),
                tree_of(&up.base.join("acme/helpers.git"), &up.helpers)
            ),
            (
                "codebase/vendor/helpers/deps/tiny".to_string(),
                up.tiny.clone(),
                tree_of(&up.base.join("other/tiny.git"), &up.tiny)
            ),
        ]
    );
    t.run_expect(&["verify"], 0);

    // Unpacked: file for file what a recursive checkout gives.
    t.run_expect(&["unpack", &id, "-o", "out"], 0);
    let by_git = t.path("by-git");
    git_archive(&up.base.join("acme/app.git"), &up.app, &by_git);
    git_archive(
        &mirror_git(&t, "kkos/onig"),
        &up.onig,
        &by_git.join("modules/onig"),
    );
    git_archive(
        &up.base.join("acme/helpers.git"),
        &up.helpers,
        &by_git.join("vendor/helpers"),
    );
    git_archive(
        &up.base.join("other/tiny.git"),
        &up.tiny,
        &by_git.join("vendor/helpers/deps/tiny"),
    );
    let listing = tree_listing(&t.path("out/codebase"));
    assert_eq!(listing, tree_listing(&by_git));
    assert!(
        listing
            .iter()
            .any(|(p, kind, _)| p == b"modules/onig/configure" && *kind == "exe")
    );

    // Rebuilt from the mirrors, bit for bit.
    let rebuilt = stdout(&t.run_expect(&["verify", "--rebuild"], 0));
    assert!(rebuilt.contains("ok  rebuild acme__app-1"), "{rebuilt}");

    // With history, the submodules' mirrors travel too, with their pins: another archive
    // rebuilds the bundle from them.
    let snap = t.path("r1.json");
    t.run_expect(
        &["release", "create", "r1", "-o", snap.to_str().unwrap()],
        0,
    );
    let file = t.path("r1.ark");
    t.run_expect(
        &[
            "export",
            "--release",
            snap.to_str().unwrap(),
            "-o",
            file.to_str().unwrap(),
            "--with-history",
        ],
        0,
    );
    let other = t.path("other");
    t.run_expect_at(&other, &["import-archive", file.to_str().unwrap()], 0);
    let ls = stdout(&t.run_expect_at(&other, &["mirror", "ls"], 0));
    for name in ["acme/app", "kkos/onig", "acme/helpers", "other/tiny"] {
        assert!(ls.contains(name), "{ls}");
    }
    t.run_expect_at(&other, &["mirror", "verify"], 0);
    let rebuilt = stdout(&t.run_expect_at(&other, &["verify", "--rebuild"], 0));
    assert!(rebuilt.contains("ok  rebuild acme__app-1"), "{rebuilt}");
}

/// The bytes of `file` with `from` replaced by `to` (the same length) once.
fn replaced(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("the bytes to replace are there");
    let mut out = bytes.to_vec();
    out[at..at + from.len()].copy_from_slice(to);
    out
}

#[test]
fn a_tampered_submodule_is_caught_and_a_missing_mirror_is_named() {
    let t = TestContext::new();
    let up = make_upstreams(t.dir.path());
    // Mirrored before the archive has an instance: nothing says which submodules to mirror,
    // and it says so.
    let out = t.run_expect(
        &["mirror", "add", "acme/app", "--git-base", &up.base_url],
        0,
    );
    assert!(
        stderr(&out).contains("no instance of it"),
        "{}",
        stderr(&out)
    );
    assert!(!mirror_git(&t, "kkos/onig").exists());
    let inst = import(&t, "acme/app", "acme__app-1", &up.app);

    // Packing needs the submodules' mirrors and says what to run.
    let out = t.run_expect(
        &[
            "pack",
            "--repo",
            "acme/app",
            "--instance",
            inst.to_str().unwrap(),
        ],
        2,
    );
    let err = stderr(&out);
    for needle in [
        "modules/onig",
        "kkos/onig",
        up.onig.as_str(),
        "https://github.com/kkos/onig.git",
        "swe-ark mirror update acme/app",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    t.run_expect(&["mirror", "update", "--git-base", &up.base_url], 0);
    let id = pack(&t, &inst);

    // The same bundle as an archive that mirrored the submodules first.
    let t2 = TestContext::new();
    let inst2 = {
        let f = instance_file(&t2, "acme/app", "acme__app-1", &up.app);
        t2.run_expect(
            &[
                "import",
                f.to_str().unwrap(),
                "--environments-as-of",
                "commit",
            ],
            0,
        );
        f
    };
    t2.run_expect(
        &["mirror", "add", "acme/app", "--git-base", &up.base_url],
        0,
    );
    assert_eq!(pack(&t2, &inst2), id);

    // A submodule's file changed in the bundle: named, exit 1.
    let file = t.bundle_path(&id);
    let tar = decompress(&file);
    let bad = t.path("bad");
    fs::create_dir_all(&bad).unwrap();
    let tampered = bad.join(format!("{id}.tar.zst"));
    fs::write(
        &tampered,
        compress(&replaced(&tar, b"onig_main(void)", b"onig_mainXvoid)")),
    )
    .unwrap();
    let out = t.run_expect(&["verify", tampered.to_str().unwrap()], 1);
    assert!(
        stdout(&out).contains("codebase/modules/onig/src/onig.c"),
        "{}",
        stdout(&out)
    );
    // bundle.json claiming another tree for a submodule: named by its path.
    let onig_tree = tree_of(&mirror_git(&t, "kkos/onig"), &up.onig);
    let other_tree = tree_of(&up.base.join("other/tiny.git"), &up.tiny);
    fs::write(
        &tampered,
        compress(&replaced(
            &tar,
            format!("\"tree\": \"{onig_tree}\"").as_bytes(),
            format!("\"tree\": \"{other_tree}\"").as_bytes(),
        )),
    )
    .unwrap();
    let out = t.run_expect(&["verify", tampered.to_str().unwrap()], 1);
    let text = stdout(&out);
    assert!(
        text.contains("codebase/modules/onig") && text.contains(&onig_tree),
        "{text}"
    );
    // Unpacking refuses both, writing nothing.
    t.run_expect(&["unpack", tampered.to_str().unwrap(), "-o", "refused"], 2);
    assert!(!t.path("refused").exists());
}

#[test]
fn gitlinks_that_cannot_be_mirrored_are_named_and_a_missing_commit_is_an_error() {
    let t = TestContext::new();
    let up = make_upstreams(t.dir.path());
    // acme/bad: a gitlink .gitmodules does not name, and one at a commit its submodule lacks.
    let dir = t.path("work/bad");
    fs::create_dir_all(&dir).unwrap();
    write(&dir, "bad.py", "pass\n");
    write(
        &dir,
        ".gitmodules",
        "[submodule \"onig\"]\n\tpath = modules/onig\n\turl = https://github.com/kkos/onig.git\n",
    );
    git(&dir, &["init", "-q", "-b", "main"]);
    git(&dir, &["add", "-A"]);
    let lost = "89abcdef0123456789abcdef0123456789abcdef";
    gitlink(&dir, "modules/onig", lost);
    gitlink(&dir, "lib/stray", &up.tiny);
    let bad = git_commit_staged(&dir, "bad", DATE);
    publish(&up.base, &dir, "acme/bad");
    let inst = import(&t, "acme/bad", "acme__bad-1", &bad);

    let out = t.run_expect(
        &["mirror", "add", "acme/bad", "--git-base", &up.base_url],
        2,
    );
    let err = stderr(&out);
    for needle in [
        // The gitlink .gitmodules does not name (a note: git leaves it empty too).
        "`lib/stray`",
        up.tiny.as_str(),
        // The commit its submodule lacks.
        "`modules/onig`",
        lost,
        "https://github.com/kkos/onig.git",
        "kkos/onig",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    assert!(err.contains(&bad), "{err}");
    assert!(err.contains("acme/bad"), "{err}");
    // The superproject and the submodule it could fetch stay mirrored.
    let ls = stdout(&t.run_expect(&["mirror", "ls"], 0));
    assert!(ls.contains("acme/bad") && ls.contains("kkos/onig"), "{ls}");

    // Packing names the missing commit; the gitlink nothing names stays empty.
    let out = t.run_expect(
        &[
            "pack",
            "--repo",
            "acme/bad",
            "--instance",
            inst.to_str().unwrap(),
        ],
        2,
    );
    let err = stderr(&out);
    assert!(err.contains(lost) && err.contains("modules/onig"), "{err}");
}

/// A project whose test reads a file of its submodule: the lock's checkout, validation and
/// an offline replay from the bundle all see the submodule's files (without them the test
/// fails, validation computes other lists and replay does not resolve the instance).
#[test]
fn the_lock_validation_and_replay_see_the_submodules_files() {
    use common::widget::{ADD_TEST, GOLD, Widget, instance, test_patch};
    let t = TestContext::new();
    let Some(w) = Widget::new(&t) else { return };
    let base = t.path("base");
    let data = t.path("work/data");
    fs::create_dir_all(&data).unwrap();
    write(&data, "value.txt", "42\n");
    let data_commit = git_init_commit(&data, "data", DATE);
    publish(&base, &data, "acme/data");
    write(
        &w.repo,
        ".gitmodules",
        "[submodule \"data\"]\n\tpath = vendor/data\n\turl = https://github.com/acme/data.git\n",
    );
    git(&w.repo, &["add", "-A"]);
    gitlink(&w.repo, "vendor/data", &data_commit);
    let commit = git_commit_staged(&w.repo, "vendored data", "2021-06-02T00:00:00Z");

    let vendored =
        "\n\ndef test_vendored():\n    assert open('vendor/data/value.txt').read() == '42\\n'\n";
    let (add, sub) = (
        "tests/test_core.py::test_add",
        "tests/test_core.py::test_sub",
    );
    let row = instance(
        1,
        &test_patch(&format!("{ADD_TEST}{vendored}")),
        GOLD,
        &[add],
        &[sub, "tests/test_core.py::test_vendored"],
        &commit,
    );
    let file = t.path("instances.jsonl");
    fs::write(&file, format!("{row}\n")).unwrap();
    w.ok(&t, &["import", file.to_str().unwrap()]);
    let base_url = format!("file://{}", base.display());
    let out = w.ok(
        &t,
        &[
            "mirror",
            "add",
            w.repo.to_str().unwrap(),
            "--name",
            "acme/widget",
            "--git-base",
            &base_url,
        ],
    );
    assert!(out.contains("mirrored acme/data"), "{out}");

    let out = w.run(
        &t,
        &["env", "lock", "acme/widget", "1.0", "--commit", &commit],
    );
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(
        !stderr(&out).contains("leaves it empty"),
        "{}",
        stderr(&out)
    );
    let v: serde_json::Value =
        serde_json::from_str(&w.ok(&t, &["validate", "--json", "--runs", "1"])).unwrap();
    assert_eq!(v["validated"][0]["verdict"], "kept", "{v}");
    w.ok(&t, &["pack", "--all-validated"]);
    w.ok(&t, &["replay", "--gold", "--run-id", "gold"]);
    let report: serde_json::Value = serde_json::from_slice(
        &fs::read(t.ark().join("runs/gold/gold/acme__widget-1/report.json")).unwrap(),
    )
    .unwrap();
    let report = &report["acme__widget-1"];
    assert_eq!(report["resolved"], true, "{report}");
}

#[test]
fn a_context_whose_image_never_checked_submodules_out_needs_none_and_carries_none() {
    let t = TestContext::new();
    let up = make_upstreams(t.dir.path());
    // The fixture's instance is version 1.0; its context says its image was a plain clone.
    let manifests = t.manifests_with(
        "acme__app.toml",
        "repo = \"acme/app\"\nsource = \"tests/submodules.rs\"\nlog_parser = \"pytest\"\n\n\
         [defaults]\npython = \"3.11\"\ntest_cmd = \"pytest -rA\"\nempty_submodules = true\n\n\
         [versions.\"1.0\"]\n",
    );
    let inst = instance_file(&t, "acme/app", "acme__app-1", &up.app);
    let with = |args: &[&str]| t.run_ok_with_manifests(&manifests, args);
    with(&[
        "import",
        inst.to_str().unwrap(),
        "--environments-as-of",
        "commit",
    ]);
    // No submodule is mirrored: none is needed.
    let out = with(&["mirror", "add", "acme/app", "--git-base", &up.base_url]);
    assert!(out.contains("mirrored acme/app:"), "{out}");
    assert!(!out.contains("kkos/onig"), "{out}");
    assert!(!mirror_git(&t, "kkos/onig").exists());
    // Packed with the context's spec: each submodule an empty directory, nothing carried.
    let spec = t.path("spec.toml");
    fs::write(&spec, "empty_submodules = true\n").unwrap();
    let out = with(&[
        "pack",
        "--repo",
        "acme/app",
        "--instance",
        inst.to_str().unwrap(),
        "--spec",
        spec.to_str().unwrap(),
    ]);
    let id = last_line(out.as_bytes());
    let dest = t.path("unpacked");
    with(&["unpack", &id, "-o", dest.to_str().unwrap()]);
    let onig = dest.join("codebase/modules/onig");
    assert!(onig.is_dir(), "the gitlink's directory is there");
    assert_eq!(fs::read_dir(&onig).unwrap().count(), 0, "and empty");
}
