//! Mirrors: full history over file:// and git://, pins that survive force-pushes and deleted
//! branches, packing straight from the object database, git bundles across the air gap, and
//! clear errors for bad input.

mod common;

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

/// An upstream repository made by code, with every kind of ref and entry a mirror must keep.
struct Upstream {
    dir: PathBuf,
    /// The commit instances are packed at (on branch `feature`, later deleted upstream).
    base: String,
}

fn write(dir: &Path, rel: &str, content: &str) {
    let p = dir.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

fn make_upstream(root: &Path) -> Upstream {
    let dir = root.join("upstream");
    fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    write(&dir, "widgets/__init__.py", "");
    write(&dir, "widgets/core.py", "def f(): return 1\n");
    write(&dir, "README.md", "# widgets\n");
    git_commit_all(&dir, "first", "2024-01-01T00:00:00Z");
    git(&dir, &["tag", "v0.1"]);
    git(
        &dir,
        &["tag", "-a", "v0.1-annotated", "-m", "the first release"],
    );
    // A branch with a symlink, an executable, a non-UTF-8 name and a submodule gitlink.
    git(&dir, &["checkout", "-q", "-b", "feature"]);
    std::os::unix::fs::symlink("widgets/core.py", dir.join("core-link.py")).unwrap();
    write(&dir, "run.sh", "#!/bin/sh\necho run\n");
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(dir.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    use std::os::unix::ffi::OsStrExt;
    fs::write(
        dir.join(std::ffi::OsStr::from_bytes(b"caf\xe9.txt")),
        "latin-1 name\n",
    )
    .unwrap();
    git(&dir, &["add", "-A"]);
    git(
        &dir,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            "160000,89abcdef0123456789abcdef0123456789abcdef,vendor/lib",
        ],
    );
    git_commit_staged(&dir, "feature work", "2024-01-02T00:00:00Z");
    let base = git(&dir, &["rev-parse", "HEAD"]);
    // Back on main: a commit, then a merge of the feature branch.
    git(&dir, &["checkout", "-q", "main"]);
    write(&dir, "CHANGES.md", "- first\n");
    git(&dir, &["add", "-A"]);
    git_commit_all(&dir, "changes", "2024-01-03T00:00:00Z");
    git(&dir, &["merge", "-q", "--no-ff", "--no-edit", "feature"]);
    // A note, and a pull-request head as GitHub publishes them.
    git(&dir, &["notes", "add", "-m", "reviewed", "HEAD"]);
    git(&dir, &["update-ref", "refs/pull/7/head", &base]);
    Upstream { dir, base }
}

fn mirror_dir(t: &TestContext) -> PathBuf {
    t.ark().join("mirrors/acme__widgets.git")
}

fn refs_of(git_dir: &Path) -> String {
    git(
        git_dir,
        &["for-each-ref", "--format=%(objectname) %(refname)"],
    )
}

fn add_file_mirror(t: &TestContext, up: &Upstream) -> String {
    let url = format!("file://{}", up.dir.display());
    stdout(&t.run_expect(&["mirror", "add", &url, "--name", "acme/widgets"], 0))
}

/// A fresh test directory with the upstream mirrored as acme/widgets.
fn mirrored() -> (TestContext, Upstream) {
    let t = TestContext::new();
    let up = make_upstream(t.dir.path());
    add_file_mirror(&t, &up);
    (t, up)
}

/// `swe-ark pack --repo REPO --instance INST`, expecting exit `code`.
fn pack_repo(t: &TestContext, repo: &str, inst: &Path, code: i32) -> std::process::Output {
    t.run_expect(
        &["pack", "--repo", repo, "--instance", inst.to_str().unwrap()],
        code,
    )
}

/// `swe-ark mirror import BUNDLE --name acme/widgets`, expecting exit `code`.
fn import_widgets(t: &TestContext, bundle: &Path, code: i32) -> std::process::Output {
    t.run_expect(
        &[
            "mirror",
            "import",
            bundle.to_str().unwrap(),
            "--name",
            "acme/widgets",
        ],
        code,
    )
}

/// `swe-ark mirror update ARGS` once an instance at the fixture's base commit is in the
/// archive: its gitlink `vendor/lib` has no `.gitmodules` entry, so no submodule can be
/// mirrored for it, which the update notes (as git, it leaves it empty) while it updates the
/// mirror all the same.
fn update_with_unnamed_gitlink(t: &TestContext, args: &[&str]) -> String {
    let out = t.run_expect(&[&["mirror", "update"], args].concat(), 0);
    let err = stderr(&out);
    assert!(
        err.contains("submodule at `vendor/lib`") && err.contains(".gitmodules does not name"),
        "{err}"
    );
    stdout(&out)
}

fn pack_from_mirror(t: &TestContext, inst: &Path) -> String {
    last_line(&pack_repo(t, "acme/widgets", inst, 0).stdout)
}

#[test]
fn a_file_mirror_holds_every_ref_and_packs_the_exact_tree() {
    let t = TestContext::new();
    let up = make_upstream(t.dir.path());
    let out = add_file_mirror(&t, &up);
    assert!(out.contains("mirrored acme/widgets"), "{out}");

    // Every upstream ref, including tags (both kinds), notes and pull heads, is in the mirror.
    let upstream_refs = refs_of(&up.dir);
    let mirror_refs: String = refs_of(&mirror_dir(&t))
        .lines()
        .filter(|l| !l.contains("refs/swe-ark/"))
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(mirror_refs, upstream_refs);
    for r in [
        "refs/tags/v0.1-annotated",
        "refs/notes/commits",
        "refs/pull/7/head",
        "refs/heads/feature",
    ] {
        assert!(mirror_refs.contains(r), "{r} missing:\n{mirror_refs}");
    }
    assert_eq!(
        git(&mirror_dir(&t), &["rev-parse", "--is-bare-repository"]),
        "true"
    );

    let ls: serde_json::Value =
        serde_json::from_slice(&t.run_expect(&["mirror", "ls", "--json"], 0).stdout).unwrap();
    assert_eq!(ls[0]["name"], "acme/widgets");
    assert_eq!(ls[0]["refs_count"], upstream_refs.lines().count());

    // Pack from the mirror: the tree id is the commit's, the submodule is a gitlink.
    let inst = t.instance_at(&up.base, "acme__widgets-1");
    let id = pack_from_mirror(&t, &inst);
    let show: serde_json::Value =
        serde_json::from_slice(&t.run_expect(&["show", "--json", &id], 0).stdout).unwrap();
    let tree = git(&up.dir, &["rev-parse", &format!("{}^{{tree}}", up.base)]);
    assert_eq!(show["manifest"]["codebase_tree"], tree.as_str());
    assert_eq!(
        show["manifest"]["gitlinks"][0]["path"],
        "codebase/vendor/lib"
    );
    assert_eq!(
        show["manifest"]["gitlinks"][0]["commit"],
        "89abcdef0123456789abcdef0123456789abcdef"
    );

    // Unpacked, the codebase is the commit's tree, file for file (git archive leaves the
    // submodule an empty directory, as unpack does).
    t.run_expect(&["unpack", &id, "-o", "out"], 0);
    fs::create_dir(t.path("by-git")).unwrap();
    let status = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "git --git-dir={} archive {} | tar -x -C {}",
            up.dir.join(".git").display(),
            up.base,
            t.path("by-git").display()
        ))
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        tree_listing(&t.path("out/codebase")),
        tree_listing(&t.path("by-git"))
    );
    assert!(t.path("out/codebase/vendor/lib").is_dir());
    t.run_expect(&["verify"], 0);
    t.run_expect(&["mirror", "verify"], 0);
}

#[test]
fn pins_survive_an_upstream_force_push_and_a_deleted_branch() {
    let (t, up) = mirrored();
    let inst = t.instance_at(&up.base, "acme__widgets-2");
    let id = pack_from_mirror(&t, &inst);

    // Upstream rewrites history: the feature branch and the pull ref go, main is reset to
    // before the merge and force-pushed over, and the old objects are collected.
    git(&up.dir, &["branch", "-D", "feature"]);
    git(&up.dir, &["update-ref", "-d", "refs/pull/7/head"]);
    git(&up.dir, &["reset", "-q", "--hard", "HEAD~1"]);
    git(&up.dir, &["notes", "remove", "HEAD@{1}"]);
    write(&up.dir, "CHANGES.md", "- rewritten\n");
    git(&up.dir, &["add", "-A"]);
    git_commit_all(&up.dir, "rewritten", "2024-02-01T00:00:00Z");
    git(&up.dir, &["reflog", "expire", "--expire=now", "--all"]);
    git(&up.dir, &["gc", "-q", "--prune=now"]);
    assert!(
        Command::new("git")
            .args(["cat-file", "-e", &up.base])
            .current_dir(&up.dir)
            .status()
            .unwrap()
            .code()
            != Some(0),
        "the base commit is gone upstream"
    );

    let out = update_with_unnamed_gitlink(&t, &[]);
    assert!(out.contains("- refs/heads/feature"), "{out}");
    assert!(out.contains("- refs/pull/7/head"), "{out}");
    assert!(out.contains("~ refs/heads/main"), "{out}");
    // Pruned from the branches, kept by the pin.
    let refs = refs_of(&mirror_dir(&t));
    assert!(!refs.contains("refs/heads/feature"), "{refs}");
    assert!(refs.contains(&format!(
        "{} refs/swe-ark/instances/acme__widgets-2/base_commit",
        up.base
    )));
    git(
        &mirror_dir(&t),
        &["cat-file", "-e", &format!("{}^{{tree}}", up.base)],
    );
    // The instance packs again, to the same bundle.
    assert_eq!(pack_from_mirror(&t, &inst), id);
    t.run_expect(&["mirror", "verify"], 0);
}

#[test]
fn update_fetches_only_what_is_new() {
    let (t, up) = mirrored();
    let before: serde_json::Value =
        serde_json::from_slice(&t.run_expect(&["mirror", "ls", "--json"], 0).stdout).unwrap();

    let first_fetch = before[0]["refs_count"].clone();
    assert!(first_fetch.as_u64().unwrap() > 0);
    let json: serde_json::Value =
        serde_json::from_slice(&t.run_expect(&["mirror", "update", "--json"], 0).stdout).unwrap();
    assert_eq!(json[0]["changes"].as_array().unwrap().len(), 0);
    assert_eq!(json[0]["received_objects"], 0);

    write(&up.dir, "NEW.md", "new\n");
    git(&up.dir, &["add", "-A"]);
    git_commit_all(&up.dir, "new", "2024-03-01T00:00:00Z");
    let json: serde_json::Value =
        serde_json::from_slice(&t.run_expect(&["mirror", "update", "--json"], 0).stdout).unwrap();
    assert_eq!(json[0]["changes"][0]["change"], "moved");
    assert_eq!(json[0]["changes"][0]["name"], "refs/heads/main");
    // The new commit, tree and blob travel; not the whole history again.
    let received = json[0]["received_objects"].as_u64().unwrap();
    let total: u64 = git(&up.dir, &["rev-list", "--all", "--objects"])
        .lines()
        .count() as u64;
    assert!(
        (3..total / 2).contains(&received),
        "received {received} of {total}"
    );
    let after: serde_json::Value =
        serde_json::from_slice(&t.run_expect(&["mirror", "ls", "--json"], 0).stdout).unwrap();
    assert_ne!(
        before[0]["refs_sha256"], after[0]["refs_sha256"],
        "the ref list hash shows the change"
    );
}

/// `git daemon` on a free port of 127.0.0.1, serving `base`; stopped when dropped.
struct Daemon {
    child: Child,
    port: u16,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_daemon(base: &Path) -> Daemon {
    let port = free_port();
    let child = Command::new("git")
        .args([
            "daemon",
            "--reuseaddr",
            "--export-all",
            "--listen=127.0.0.1",
            &format!("--port={port}"),
            &format!("--base-path={}", base.display()),
        ])
        .arg(base)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("git daemon starts");
    // The guard owns the child from here: it is killed and waited for on every path.
    let daemon = Daemon { child, port };
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return daemon;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("git daemon did not listen on port {port}");
}

#[test]
fn mirrors_over_the_git_protocol_on_loopback() {
    let t = TestContext::new();
    let up = make_upstream(t.dir.path());
    let daemon = start_daemon(t.dir.path());
    let url = format!("git://127.0.0.1:{}/upstream", daemon.port);
    let out = stdout(&t.run_expect(&["mirror", "add", &url, "--name", "acme/widgets"], 0));
    assert!(out.contains("mirrored acme/widgets"), "{out}");
    let mirror_refs: Vec<String> = refs_of(&mirror_dir(&t))
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(mirror_refs.join("\n"), refs_of(&up.dir));
    let inst = t.instance_at(&up.base, "acme__widgets-3");
    pack_from_mirror(&t, &inst);
    write(&up.dir, "NEW.md", "new\n");
    git(&up.dir, &["add", "-A"]);
    git_commit_all(&up.dir, "new", "2024-03-01T00:00:00Z");
    let out = update_with_unnamed_gitlink(&t, &["acme/widgets"]);
    assert!(out.contains("~ refs/heads/main"), "{out}");
    drop(daemon);
}

#[test]
fn owner_name_resolves_against_the_configured_git_base() {
    let t = TestContext::new();
    let up = make_upstream(t.dir.path());
    // A company mirror: <base>/OWNER/NAME.git.
    fs::create_dir_all(t.path("base/acme")).unwrap();
    let status = Command::new("git")
        .args(["clone", "-q", "--mirror"])
        .arg(&up.dir)
        .arg(t.path("base/acme/widgets.git"))
        .status()
        .unwrap();
    assert!(status.success());
    fs::create_dir_all(t.ark()).unwrap();
    fs::write(
        t.ark().join("config.toml"),
        format!("git_base = \"file://{}\"\n", t.path("base").display()),
    )
    .unwrap();
    t.run_expect(&["mirror", "add", "acme/widgets"], 0);
    let ls: serde_json::Value =
        serde_json::from_slice(&t.run_expect(&["mirror", "ls", "--json"], 0).stdout).unwrap();
    assert_eq!(
        ls[0]["url"],
        format!("file://{}/acme/widgets.git", t.path("base").display()).as_str()
    );
    // The flag wins over the config.
    let err = stderr(&t.run_expect(
        &[
            "mirror",
            "add",
            "acme/other",
            "--git-base",
            "file:///nonexistent/base",
        ],
        2,
    ));
    assert!(
        err.contains("file:///nonexistent/base/acme/other.git"),
        "{err}"
    );
}

#[test]
fn export_and_import_carry_a_mirror_across_the_air_gap() {
    let (t, up) = mirrored();
    let inst = t.instance_at(&up.base, "acme__widgets-4");
    let id = pack_from_mirror(&t, &inst);
    t.run_expect(
        &["mirror", "export", "acme/widgets", "-o", "widgets.bundle"],
        0,
    );

    // Plain git reads it.
    git(
        t.dir.path(),
        &[
            "-c",
            "init.defaultBranch=main",
            "clone",
            "-q",
            "widgets.bundle",
            "cloned",
        ],
    );
    git(&t.path("cloned"), &["cat-file", "-e", &up.base]);
    assert!(
        t.path("cloned/CHANGES.md").is_file(),
        "the default branch is checked out"
    );

    // Another archive, with no network: import, verify, pack the same bundle.
    let other = TestContext::new();
    let bundle = t.path("widgets.bundle");
    let out = stdout(&import_widgets(&other, &bundle, 0));
    assert!(out.contains("imported acme/widgets"), "{out}");
    assert_eq!(
        refs_of(&other.ark().join("mirrors/acme__widgets.git")),
        refs_of(&mirror_dir(&t)),
        "every ref, pins included, arrives"
    );
    other.run_expect(&["mirror", "verify"], 0);
    let inst2 = other.instance_at(&up.base, "acme__widgets-4");
    assert_eq!(pack_from_mirror(&other, &inst2), id);
    // With no URL, update skips it and says why.
    let err = stderr(&other.run_expect(&["mirror", "update"], 0));
    assert!(err.contains("no upstream URL"), "{err}");
}

#[test]
fn bad_sources_and_commits_are_clear_errors_that_change_nothing() {
    let t = TestContext::new();
    let up = make_upstream(t.dir.path());

    // A URL that does not answer.
    let port = free_port();
    let url = format!("git://127.0.0.1:{port}/nothing");
    let err = stderr(&t.run_expect(&["mirror", "add", &url, "--name", "acme/gone"], 2));
    assert!(err.contains(&url), "{err}");
    // A repository that does not exist.
    let err = stderr(&t.run_expect(
        &[
            "mirror",
            "add",
            "file:///nonexistent/repo.git",
            "--name",
            "acme/nope",
        ],
        2,
    ));
    assert!(err.contains("/nonexistent/repo.git"), "{err}");
    assert!(!t.ark().join("mirrors/acme__gone.git").exists());
    assert!(!t.ark().join("mirrors/acme__nope.git").exists());
    let leftovers: Vec<_> = fs::read_dir(t.ark().join("mirrors"))
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let err = stderr(&t.run_expect(&["mirror", "add", "not a repo"], 2));
    assert!(err.contains("not a repo"), "{err}");

    add_file_mirror(&t, &up);
    // A commit the mirror does not have.
    let inst = t.instance_at(
        "0123456789abcdef0123456789abcdef01234567",
        "acme__widgets-5",
    );
    let err = stderr(&pack_repo(&t, "acme/widgets", &inst, 2));
    assert!(err.contains("has no commit 0123456789abcdef"), "{err}");
    // A mirror that does not exist, and a repo that is not the instance's.
    let inst = t.instance_at(&up.base, "acme__widgets-6");
    let err = stderr(&pack_repo(&t, "acme/nothing", &inst, 2));
    assert!(err.contains("acme/nothing"), "{err}");
    // An unreachable upstream on update: an error, and the mirror as it was.
    let refs_before = refs_of(&mirror_dir(&t));
    fs::rename(&up.dir, t.path("moved-away")).unwrap();
    let err = stderr(&t.run_expect(&["mirror", "update"], 2));
    assert!(err.contains("cannot fetch acme/widgets"), "{err}");
    assert_eq!(refs_of(&mirror_dir(&t)), refs_before);
    t.run_expect(&["mirror", "verify"], 0);
}

#[test]
fn a_truncated_bundle_is_refused_and_leaves_the_mirror_intact() {
    let (t, _) = mirrored();
    t.run_expect(&["mirror", "export", "acme/widgets", "-o", "w.bundle"], 0);
    let bytes = fs::read(t.path("w.bundle")).unwrap();
    fs::write(t.path("cut.bundle"), &bytes[..bytes.len() * 2 / 3]).unwrap();

    let other = TestContext::new();
    let cut = t.path("cut.bundle");
    let err = stderr(&import_widgets(&other, &cut, 2));
    assert!(
        err.contains("cut.bundle") && err.contains("truncated"),
        "{err}"
    );
    assert!(!other.ark().join("mirrors/acme__widgets.git").exists());

    // Into an existing mirror: refused, refs unchanged.
    let before = refs_of(&mirror_dir(&t));
    import_widgets(&t, &cut, 2);
    assert_eq!(refs_of(&mirror_dir(&t)), before);
    fs::write(t.path("junk.bundle"), "not a bundle\n").unwrap();
    let err = stderr(&import_widgets(&t, Path::new("junk.bundle"), 2));
    assert!(err.contains("# v2 git bundle"), "{err}");
}

#[test]
fn verify_finds_a_corrupt_object_and_pack_names_it() {
    let (t, _) = mirrored();
    // Damage the mirror's pack in the middle: some object can no longer be read.
    let pack_dir = mirror_dir(&t).join("objects/pack");
    let pack = fs::read_dir(&pack_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "pack"))
        .expect("the mirror has a pack");
    let mut bytes = fs::read(&pack).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 64] {
        *b ^= 0xff;
    }
    fs::set_permissions(&pack, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    fs::write(&pack, bytes).unwrap();
    let out = t.run_expect(&["mirror", "verify"], 1);
    let text = stdout(&out);
    assert!(text.contains("BAD mirror acme/widgets"), "{text}");
    assert!(text.contains("cannot be read"), "{text}");
}

#[test]
fn a_missing_blob_is_named_by_pack_and_verify() {
    let (t, up) = mirrored();
    let inst = t.instance_at(&up.base, "acme__widgets-7");
    pack_from_mirror(&t, &inst);
    // Turn the mirror's pack into loose objects, then lose one blob the base commit needs.
    let m = mirror_dir(&t);
    let pack_dir = m.join("objects/pack");
    let packs: Vec<PathBuf> = fs::read_dir(&pack_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    let pack = packs
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "pack"))
        .unwrap();
    let bytes = fs::read(pack).unwrap();
    for p in &packs {
        fs::remove_file(p).unwrap();
    }
    let mut child = Command::new("git")
        .args(["unpack-objects", "-q"])
        .current_dir(&m)
        .env("GIT_DIR", &m)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    assert!(child.wait().unwrap().success());
    let blob = git(&m, &["rev-parse", &format!("{}:widgets/core.py", up.base)]);
    fs::remove_file(m.join("objects").join(&blob[..2]).join(&blob[2..])).unwrap();

    let err = stderr(&pack_repo(&t, "acme/widgets", &inst, 2));
    assert!(
        err.contains("widgets/core.py") && err.contains(&blob),
        "{err}"
    );
    let text = stdout(&t.run_expect(&["mirror", "verify"], 1));
    assert!(
        text.contains(&format!("blob {blob} at `widgets/core.py`")),
        "{text}"
    );
}

#[test]
fn a_fetch_killed_half_way_leaves_the_mirror_as_it_was() {
    let (t, up) = mirrored();
    let before = refs_of(&mirror_dir(&t));
    write(&up.dir, "NEW.md", "new\n");
    git_commit_all(&up.dir, "new", "2024-03-01T00:00:00Z");

    // The update stops while objects arrive, and is killed there.
    let mut child = t
        .cmd()
        .env("SWE_ARK_FAILPOINT", "mirror.transfer:stall")
        .args(["mirror", "update"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::BufRead;
    let reached = std::io::BufReader::new(child.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .any(|l| l.contains("failpoint `mirror.transfer` reached"));
    assert!(reached);
    child.kill().unwrap();
    child.wait().unwrap();

    assert_eq!(refs_of(&mirror_dir(&t)), before, "no ref moved");
    t.run_expect(&["mirror", "verify"], 0);
    let out = stdout(&t.run_expect(&["mirror", "update"], 0));
    assert!(out.contains("~ refs/heads/main"), "{out}");
    t.run_expect(&["mirror", "verify"], 0);
}

#[test]
fn a_source_that_lacks_objects_is_mirrored_with_what_it_has_when_asked() {
    let t = TestContext::new();
    let up = make_upstream(t.dir.path());
    // A file that lived on main for one commit, whose blob the source then loses (as
    // snapshots and damaged clones do); the instance's base commit does not have it.
    write(&up.dir, "old.txt", "soon gone\n");
    let with_old = git_commit_all(&up.dir, "add old", "2024-01-04T00:00:00Z");
    git(&up.dir, &["rm", "-q", "old.txt"]);
    git_commit_all(&up.dir, "drop old", "2024-01-05T00:00:00Z");
    git(&up.dir, &["update-ref", "refs/pull/7/merge", &with_old]);
    git(
        &up.dir,
        &["update-ref", "refs/remotes/fork/main", &with_old],
    );
    let blob = git(&up.dir, &["rev-parse", &format!("{with_old}:old.txt")]);
    let objects = up.dir.join(".git/objects");
    fs::remove_file(objects.join(&blob[..2]).join(&blob[2..])).unwrap();

    // A fetch cannot take it: the error says why and what to do, and nothing is left.
    let url = format!("file://{}", up.dir.display());
    let err = stderr(&t.run_expect(&["mirror", "add", &url, "--name", "acme/widgets"], 2));
    assert!(
        err.contains("lacks this object") && err.contains("--allow-missing-objects"),
        "{err}"
    );
    assert!(!mirror_dir(&t).exists());

    // Asked to, swe-ark takes every object it has and lists what is missing.
    let path = up.dir.to_str().unwrap();
    let args = [
        "mirror",
        "add",
        path,
        "--name",
        "acme/widgets",
        "--allow-missing-objects",
    ];
    let out = t.run_expect(&args, 0);
    let err = stderr(&out);
    assert!(
        err.contains("lacks 1 object") && err.contains(&blob) && err.contains("`old.txt`"),
        "{err}"
    );
    assert!(
        stdout(&out).contains("mirrored acme/widgets"),
        "{}",
        stdout(&out)
    );
    let listed = fs::read_to_string(mirror_dir(&t).join("swe-ark-missing-objects")).unwrap();
    assert_eq!(listed, format!("{blob} blob {with_old} old.txt\n"));
    // The refs a fetch takes, and only those.
    let refs = refs_of(&mirror_dir(&t));
    for kept in [
        "refs/heads/main",
        "refs/heads/feature",
        "refs/tags/v0.1-annotated",
    ] {
        assert!(refs.contains(kept), "{refs}");
    }
    assert!(refs.contains("refs/pull/7/head"), "{refs}");
    assert!(!refs.contains("refs/pull/7/merge"), "{refs}");
    assert!(!refs.contains("refs/remotes/"), "{refs}");

    // An instance whose commit is whole packs exactly as from a whole mirror, and verifies.
    let inst = t.instance_at(&up.base, "acme__widgets-7");
    let id = pack_from_mirror(&t, &inst);
    let whole = {
        let t2 = TestContext::new();
        let up2 = make_upstream(t2.dir.path());
        add_file_mirror(&t2, &up2);
        pack_from_mirror(&t2, &t2.instance_at(&up2.base, "acme__widgets-7"))
    };
    assert_eq!(id, whole);
    let text = stdout(&t.run_expect(&["mirror", "verify"], 0));
    assert!(
        text.contains("ok  mirror acme/widgets") && text.contains("lacked 1 object of its history"),
        "{text}"
    );
    // One whose tree needs the missing blob is refused by name.
    let inst = t.instance_at(&with_old, "acme__widgets-8");
    let err = stderr(&pack_repo(&t, "acme/widgets", &inst, 2));
    assert!(err.contains(&blob) && err.contains("old.txt"), "{err}");

    // The flag makes new mirrors only, of local repositories only.
    let err = stderr(&t.run_expect(&args, 2));
    assert!(err.contains("already in the archive"), "{err}");
    let err = stderr(&t.run_expect(
        &[
            "mirror",
            "add",
            "git://127.0.0.1:9/nothing",
            "--name",
            "acme/other",
            "--allow-missing-objects",
        ],
        2,
    ));
    assert!(err.contains("takes a local repository"), "{err}");
}
