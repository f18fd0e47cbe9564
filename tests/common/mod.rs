//! Shared test support: a temporary archive and work directory, a hermetic way to run
//! `swe-ark` and `git`, and fixtures made by code.
#![allow(dead_code)]

pub mod pyfix;
pub mod pyindex;
pub mod s3;
pub mod widget;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BASE_COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// A temporary home for one test: `ark/` for the archive, anything else beside it.
pub struct TestContext {
    pub dir: tempfile::TempDir,
}

impl TestContext {
    pub fn new() -> Self {
        TestContext {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn ark(&self) -> PathBuf {
        self.path("ark")
    }

    /// `swe-ark --ark <tmp>/ark --no-progress …`, with no SWE_ARK_* from the outside but
    /// the cache that every test's archives share ([`shared_cache`]).
    pub fn cmd(&self) -> Command {
        self.cmd_at(&self.ark())
    }

    /// [`TestContext::cmd`] on another archive directory.
    pub fn cmd_at(&self, ark: &Path) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_swe-ark"));
        c.env_remove("SWE_ARK_HOME")
            .env_remove("SWE_ARK_FAILPOINT")
            .env_remove("RUST_LOG")
            .env("SWE_ARK_SHARED_CACHE", shared_cache())
            .current_dir(self.dir.path())
            .arg("--ark")
            .arg(ark)
            .arg("--no-progress");
        c
    }

    /// A manifests folder (`SWE_ARK_MANIFESTS`) holding one manifest, `name` with `text`.
    pub fn manifests_with(&self, name: &str, text: &str) -> PathBuf {
        let dir = self.path("manifests");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), text).unwrap();
        dir
    }

    /// Runs `swe-ark` with `args` and the manifests folder `manifests`, insisting on success
    /// (printing everything if not); returns its stdout.
    pub fn run_ok_with_manifests(&self, manifests: &Path, args: &[&str]) -> String {
        let out = self
            .cmd()
            .env("SWE_ARK_MANIFESTS", manifests)
            .args(args)
            .output()
            .expect("swe-ark runs");
        assert!(
            out.status.success(),
            "swe-ark {args:?}\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs `swe-ark` with `args`; returns its output whatever the exit code.
    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Output {
        let mut c = self.cmd();
        c.args(args);
        c.output().expect("swe-ark runs")
    }

    /// Runs `swe-ark` and insists on exit code `code`, printing everything if not.
    pub fn run_expect<S: AsRef<OsStr>>(&self, args: &[S], code: i32) -> Output {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "swe-ark {:?} in {}\n--- stdout\n{}\n--- stderr\n{}",
            args.iter()
                .map(|a| a.as_ref().to_string_lossy().into_owned())
                .collect::<Vec<_>>(),
            self.dir.path().display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// [`TestContext::run_expect`] on another archive directory.
    pub fn run_expect_at<S: AsRef<OsStr>>(&self, ark: &Path, args: &[S], code: i32) -> Output {
        let out = self.cmd_at(ark).args(args).output().expect("swe-ark runs");
        assert_eq!(
            out.status.code(),
            Some(code),
            "swe-ark --ark {} {:?}\n--- stdout\n{}\n--- stderr\n{}",
            ark.display(),
            args.iter()
                .map(|a| a.as_ref().to_string_lossy().into_owned())
                .collect::<Vec<_>>(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Writes the fixture instance to `inst.json` and returns its path.
    pub fn instance_file(&self) -> PathBuf {
        let p = self.path("inst.json");
        fs::write(&p, fixture_instance_json()).unwrap();
        p
    }

    /// Imports the fixture instance (no GitHub behind it: its environment resolves as of its
    /// commit) and plans it over `shards` shards; returns the plan file. With 2 shards, shard 1
    /// has nothing to do: running it is quick and still writes a whole shard file.
    pub fn fixture_plan(&self, shards: usize) -> PathBuf {
        let file = self.instance_file();
        let f = file.to_str().unwrap();
        self.run_expect(&["import", f, "--environments-as-of", "commit"], 0);
        let plan = self.path("plan.json");
        let n = shards.to_string();
        self.run_expect(
            &[
                "plan",
                "--shards",
                &n,
                "--all",
                "-o",
                plan.to_str().unwrap(),
            ],
            0,
        );
        plan
    }

    /// Packs `codebase` with the fixture instance; returns the bundle id.
    pub fn pack(&self, codebase: &Path) -> String {
        let inst = self.instance_file();
        let out = self.run_expect(
            &[
                OsStr::new("pack"),
                OsStr::new("--instance"),
                inst.as_os_str(),
                OsStr::new("--codebase"),
                codebase.as_os_str(),
            ],
            0,
        );
        last_line(&out.stdout)
    }

    /// The fixture codebase made at `<tmp>/cb` and packed: its path and the bundle id.
    pub fn packed_fixture(&self) -> (PathBuf, String) {
        let cb = self.path("cb");
        make_fixture_codebase(&cb);
        let id = self.pack(&cb);
        (cb, id)
    }

    /// The bundle `id` of the archive as a self-contained file (`swe-ark export-bundle`),
    /// `<tmp>/exported/<id>.tar.zst`, written anew on each call.
    pub fn bundle_path(&self, id: &str) -> PathBuf {
        let dir = self.path("exported");
        let out = self.run_expect(
            &[
                OsStr::new("export-bundle"),
                OsStr::new(id),
                OsStr::new("-o"),
                dir.as_os_str(),
            ],
            0,
        );
        let path = dir.join(format!("{id}.tar.zst"));
        assert_eq!(last_line(&out.stdout), path.display().to_string());
        path
    }

    /// The archive's pack files.
    /// Flips one byte in the middle of the pack frame that holds the piece with this content
    /// (docs/STORAGE.md): every bundle that reads it must then fail, naming a member.
    pub fn damage_piece_of(&self, content: &[u8]) {
        use sha2::Digest;
        let id = sha2::Sha256::digest(content).to_vec();
        let (pack, offset, length): (String, i64, i64) =
            rusqlite::Connection::open(self.ark().join("index.sqlite"))
                .unwrap()
                .query_row(
                    "SELECT p.name, c.offset, c.length FROM pieces c
                     JOIN packs p ON p.no = c.pack WHERE c.id = ?1",
                    [id],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .unwrap();
        let path = self.ark().join(format!("packs/{pack}.pack"));
        let mut bytes = fs::read(&path).unwrap();
        bytes[(offset + length / 2) as usize] ^= 0x20;
        fs::write(&path, bytes).unwrap();
    }

    /// A manifests folder, `<tmp>/manifests`, holding `acme__widget.toml` with `text`.
    pub fn widget_manifests(&self, text: &str) -> PathBuf {
        let manifests = self.path("manifests");
        fs::create_dir_all(&manifests).unwrap();
        fs::write(manifests.join("acme__widget.toml"), text).unwrap();
        manifests
    }

    /// The fixture instance at `commit` (base and environment setup) as `id`, written to
    /// `<id>.json`; returns its path.
    pub fn instance_at(&self, commit: &str, id: &str) -> PathBuf {
        let mut v: serde_json::Value = serde_json::from_str(&fixture_instance_json()).unwrap();
        v["instance_id"] = id.into();
        v["base_commit"] = commit.into();
        v["environment_setup_commit"] = commit.into();
        let p = self.path(&format!("{id}.json"));
        fs::write(&p, v.to_string()).unwrap();
        p
    }

    /// How many instances `ls --json` lists.
    pub fn listed_instances(&self) -> usize {
        let out = self.run_expect(&["ls", "--json"], 0);
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .len()
    }

    pub fn pack_files(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = fs::read_dir(self.ark().join("packs"))
            .map(|rd| {
                rd.map(|e| e.unwrap().path())
                    .filter(|p| p.extension().is_some_and(|e| e == "pack"))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

/// What depends only on this machine's interpreters (`swe_ark::env::shared_cache`: ensurepip's
/// results, packed interpreters), kept once for every test of every binary: each archive
/// would otherwise run ensurepip again (4–6 s of CPU two or three times a lock) and pack the
/// interpreter again (1–2 s).
pub fn shared_cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("shared-cache")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// stdout of a command that must have succeeded; else a panic with `what` and both outputs.
pub fn succeeded(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}\n{}{}",
        stdout(out),
        stderr(out)
    );
    stdout(out)
}

/// The text at `key` of each object of the JSON list `list`, in order.
pub fn column<'a>(list: &'a serde_json::Value, key: &str) -> Vec<&'a str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|x| x[key].as_str().unwrap())
        .collect()
}

pub fn last_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

/// One SWE-bench instance, with its test lists as JSON strings, as the published data has them.
pub fn fixture_instance_json() -> String {
    serde_json::json!({
        "instance_id": "acme__widgets-42",
        "repo": "acme/widgets",
        "base_commit": BASE_COMMIT,
        "patch": "diff --git a/widgets/core.py b/widgets/core.py\n--- a/widgets/core.py\n+++ b/widgets/core.py\n@@ -1 +1 @@\n-def f(): return 1\n+def f(): return 2\n",
        "test_patch": "diff --git a/tests/test_core.py b/tests/test_core.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/test_core.py\n@@ -0,0 +1,2 @@\n+from widgets.core import f\n+def test_f(): assert f() == 2\n",
        "problem_statement": "f() returns 1\nIt should return 2.\n",
        "hints_text": "",
        "created_at": "2024-03-01T12:00:00Z",
        "version": "1.0",
        "environment_setup_commit": BASE_COMMIT,
        "FAIL_TO_PASS": "[\"tests/test_core.py::test_f\"]",
        "PASS_TO_PASS": "[]"
    })
    .to_string()
}

fn write(root: &Path, rel: &[u8], content: &[u8], mode: u32) {
    let p = root.join(OsStr::from_bytes(rel));
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(&p, content).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
}

fn symlink(root: &Path, rel: &str, target: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, p).unwrap();
}

/// A small codebase that exercises the format: nested packages, an executable, symlinks (to a
/// file and to a directory), names whose git order differs from byte order (`a.b`, `a-b`,
/// `a/`), a path and a link target over 100 bytes, a non-UTF-8 file name, an empty file, and a `.git` that must
/// be left out. `file_mode` and `exe_mode` let a test vary permissions as a umask would.
pub fn make_fixture_codebase_with_modes(root: &Path, file_mode: u32, exe_mode: u32) {
    fs::create_dir_all(root).unwrap();
    write(root, b"widgets/__init__.py", b"", file_mode);
    write(root, b"widgets/core.py", b"def f(): return 1\n", file_mode);
    write(
        root,
        b"setup.py",
        b"from setuptools import setup\nsetup(name='widgets')\n",
        file_mode,
    );
    write(
        root,
        b"scripts/run-tests",
        b"#!/bin/sh\nexec python -m pytest \"$@\"\n",
        exe_mode,
    );
    write(root, b"a.b", b"dot\n", file_mode);
    write(root, b"a-b", b"dash\n", file_mode);
    write(root, b"a/inner.txt", b"inner\n", file_mode);
    let long = format!("deep/{}/{}.py", "d".repeat(60), "m".repeat(70));
    write(root, long.as_bytes(), b"# a long path\n", file_mode);
    write(
        root,
        b"data/caf\xe9-latin1.txt",
        b"not utf-8 in the name\n",
        file_mode,
    );
    write(
        root,
        b"data/blob.bin",
        &(0u8..=255).cycle().take(5000).collect::<Vec<_>>(),
        file_mode,
    );
    symlink(root, "docs/core-link.py", "../widgets/core.py");
    symlink(root, "widgets-alias", "widgets");
    // A link target over 100 bytes goes into a pax header too.
    symlink(root, "long-link.py", &long);
    write(root, b".git/HEAD", b"ref: refs/heads/main\n", file_mode);
    write(root, b"widgets/.git", b"gitdir: elsewhere\n", file_mode);
}

pub fn make_fixture_codebase(root: &Path) {
    make_fixture_codebase_with_modes(root, 0o644, 0o755);
}

/// `git args` in `dir` with no user or system config, a fixed identity, and author and
/// committer dated `date`; it must succeed; its output as it is (a diff's last line keeps its
/// newline).
pub fn git_dated_raw(dir: &Path, args: &[&str], date: &str) -> Vec<u8> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", dir)
        .env("GIT_AUTHOR_NAME", "Test Author")
        .env("GIT_AUTHOR_EMAIL", "author@example.com")
        .env("GIT_AUTHOR_DATE", date)
        .env("GIT_COMMITTER_NAME", "Test Committer")
        .env("GIT_COMMITTER_EMAIL", "committer@example.com")
        .env("GIT_COMMITTER_DATE", date)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// [`git_dated_raw`], trimmed to a string.
pub fn git_dated(dir: &Path, args: &[&str], date: &str) -> String {
    String::from_utf8_lossy(&git_dated_raw(dir, args, date))
        .trim()
        .to_string()
}

/// [`git_dated_raw`] at a fixed date.
pub fn git_raw(dir: &Path, args: &[&str]) -> Vec<u8> {
    git_dated_raw(dir, args, "2024-01-01T00:00:00Z")
}

/// [`git_raw`], trimmed to a string.
pub fn git(dir: &Path, args: &[&str]) -> String {
    String::from_utf8_lossy(&git_raw(dir, args))
        .trim()
        .to_string()
}

/// Commits what is staged in `dir` at `date` (author and committer), hermetically; returns the
/// new commit's id. `--allow-empty`: a commit may only move a tag's history on.
pub fn git_commit_staged(dir: &Path, msg: &str, date: &str) -> String {
    git_dated_raw(dir, &["commit", "-q", "--allow-empty", "-m", msg], date);
    git(dir, &["rev-parse", "HEAD"])
}

/// A new repository in `dir` (branch main) with everything in it committed at `date`; returns
/// the commit's id.
pub fn git_init_commit(dir: &Path, msg: &str, date: &str) -> String {
    git(dir, &["init", "-q", "-b", "main"]);
    git_commit_all(dir, msg, date)
}

/// Stages everything in `dir` and commits it at `date`; returns the commit's id.
pub fn git_commit_all(dir: &Path, msg: &str, date: &str) -> String {
    git(dir, &["add", "-A"]);
    git_commit_staged(dir, msg, date)
}

/// The uncompressed tar inside a bundle file.
pub fn decompress(path: &Path) -> Vec<u8> {
    zstd::decode_all(fs::File::open(path).unwrap()).unwrap()
}

pub fn compress(tar: &[u8]) -> Vec<u8> {
    zstd::encode_all(tar, 3).unwrap()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    swe_ark::digest::Sha256Digest::of(bytes).hex()
}

/// Every file and symlink under `root` as (relative path bytes, kind, content or target).
pub fn tree_listing(root: &Path) -> Vec<(Vec<u8>, &'static str, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(Vec<u8>, &'static str, Vec<u8>)>) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .as_os_str()
                .as_bytes()
                .to_vec();
            let meta = fs::symlink_metadata(&p).unwrap();
            if meta.file_type().is_symlink() {
                out.push((
                    rel,
                    "symlink",
                    fs::read_link(&p).unwrap().as_os_str().as_bytes().to_vec(),
                ));
            } else if meta.is_dir() {
                walk(root, &p, out);
            } else {
                let kind = if meta.permissions().mode() & 0o100 != 0 {
                    "exe"
                } else {
                    "file"
                };
                out.push((rel, kind, fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// SWE-bench Lite's dev split, the file `SWE_ARK_LITE_DEV` names, for the tests that check the
/// published data; `None`, saying so, when it is not given (the checkout holds no such data).
pub fn lite_dev() -> Option<PathBuf> {
    let path = std::env::var_os("SWE_ARK_LITE_DEV").map(PathBuf::from);
    match path {
        Some(p) if p.is_file() => Some(p),
        _ => {
            eprintln!(
                "skipped: SWE_ARK_LITE_DEV is not a file ({path:?}); set it to \
                 swe-bench-lite-dev.jsonl to check the published data"
            );
            None
        }
    }
}

/// `unshare -n` works here (root, or unprivileged user namespaces).
pub fn can_unshare() -> bool {
    Command::new("unshare")
        .args(["-n", "true"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `setpriv`'s arguments that run what follows as uid and gid 65534 with no groups.
pub const AS_NOBODY: [&str; 5] = [
    "/usr/bin/setpriv",
    "--reuid=65534",
    "--regid=65534",
    "--clear-groups",
    "--",
];

/// `cmd` as uid and gid 65534 run it, through `setpriv` ([`AS_NOBODY`]): its program,
/// arguments, working directory and environment.
pub fn as_nobody(cmd: &Command) -> Command {
    let mut n = Command::new(AS_NOBODY[0]);
    n.args(&AS_NOBODY[1..])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        n.current_dir(dir);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => n.env(k, v),
            None => n.env_remove(k),
        };
    }
    n
}

/// Why this test cannot run a command as an unprivileged user (65534) that makes user
/// namespaces of its own, as confinement needs; None when it can: the test runs as root (to
/// become that user), `setpriv` is here, and the kernel lets an unprivileged user unshare.
pub fn nobody_with_namespaces_unavailable() -> Option<&'static str> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 || !Path::new(AS_NOBODY[0]).exists() {
        return Some("needs root (to become nobody) and setpriv");
    }
    let allowed = Command::new(AS_NOBODY[0])
        .args(&AS_NOBODY[1..])
        .args(["/usr/bin/unshare", "--user", "--map-root-user", "true"])
        .status()
        .is_ok_and(|s| s.success());
    (!allowed).then_some("unprivileged user namespaces are not allowed here")
}

/// The python of `.tools/NAME-venv` (which `make tools` installs, with `what`), or `None`,
/// saying so.
pub fn tool_python(name: &str, what: &str) -> Option<PathBuf> {
    let py =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!(".tools/{name}-venv/bin/python"));
    if py.is_file() {
        Some(py)
    } else {
        eprintln!("skipped: no .tools/{name}-venv (`make tools` installs {what})");
        None
    }
}

/// Runs `script` with the python `py` in `t`'s directory, `args` after it; it must succeed;
/// its stdout.
pub fn run_python(t: &TestContext, py: &Path, script: &str, args: &[&str]) -> String {
    let out = Command::new(py)
        .arg("-c")
        .arg(script)
        .args(args)
        .current_dir(t.path("."))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
