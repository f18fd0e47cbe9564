//! Hostile predictions (docs/SANDBOX.md, "Confinement"): `replay --predictions` of patches on
//! the widget fixture whose code, run by the FAIL_TO_PASS test, writes outside its work tree,
//! reads the archive, runs `rm -rf /`, forks without end, fills the disk, leaves links and
//! set-uid shells behind, calls mount, unshare and ptrace, leaves processes behind and reaches
//! for the network. Each is contained: its run is reported, and nothing outside its work tree
//! changes: the archive, the caller's HOME and the host's /tmp are fingerprinted before and
//! after, no process outlives the replay, and a listener of the test's gets no connection.
//!
//! The cases are predictions of one validated instance under models of their own, replayed
//! by one `replay` (two at a time). As the caller (root, the normal case), and as an
//! unprivileged user (65534) to whom root hands the archive it made.

mod common;

use std::collections::BTreeMap;
use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::{Path, PathBuf};

use common::widget::{ADD_TEST, GOLD, Widget, instance, test_patch};
use common::{TestContext, stderr, stdout};
use sha2::{Digest, Sha256};
use swe_ark::sandbox::{self, Confine, SandboxError, Spec};

/// The hostile module, with `@NAME@` placeholders.
const HOSTILE_PY: &str = include_str!("fixtures/hostile.py");

/// The cases, one prediction (model) each: the `case_*` functions of hostile.py.
const CASES: &[&str] = &[
    "writes",
    "reads",
    "rm",
    "fork-bomb",
    "disk",
    "links",
    "syscalls",
    "outlive",
    "network",
];

/// The instance the predictions are for.
const ID: &str = "acme__widget-1";

/// Confinement needs user namespaces (tests/confine.rs skips the same way).
fn confinement_or_skip() -> bool {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = Spec::new("/bin/true", dir.path(), dir.path().join("out"));
    let mut confine = Confine::new();
    confine.writable.push(dir.path().to_path_buf());
    spec.confine = Some(confine);
    match sandbox::run(&spec) {
        Ok(_) => true,
        Err(SandboxError::NoConfinement { reason }) => {
            eprintln!("skipped: confinement is not possible here: {reason}");
            false
        }
        Err(e) => panic!("{e}"),
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// sha256 of a file's bytes, read without following a link.
fn file_sha(path: &Path) -> String {
    let mut h = Sha256::new();
    let mut f = std::fs::File::open(path).unwrap();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Every entry below `dir` (links not followed) with its kind, content hash (a link's
/// target), mode and owner, but for the top-level names in `skip`.
fn fingerprint(dir: &Path, skip: &[&str]) -> BTreeMap<PathBuf, String> {
    let mut seen = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        if p.parent() == Some(dir)
            && p.file_name()
                .is_some_and(|n| skip.iter().any(|s| n == std::ffi::OsStr::new(s)))
        {
            continue;
        }
        let m = std::fs::symlink_metadata(&p).unwrap();
        let what = if m.file_type().is_symlink() {
            format!("link {}", std::fs::read_link(&p).unwrap().display())
        } else if m.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
            "dir".to_string()
        } else if m.is_file() {
            format!("file {}", file_sha(&p))
        } else {
            "other".to_string()
        };
        seen.insert(
            p.strip_prefix(dir).unwrap().to_path_buf(),
            format!("{what} {:o} {}:{}", m.mode(), m.uid(), m.gid()),
        );
    }
    seen
}

/// What changed between two fingerprints, one line each.
fn changes(before: &BTreeMap<PathBuf, String>, after: &BTreeMap<PathBuf, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (p, b) in before {
        match after.get(p) {
            None => out.push(format!("removed {}", p.display())),
            Some(a) if a != b => out.push(format!("changed {}: {b} -> {a}", p.display())),
            _ => {}
        }
    }
    for p in after.keys().filter(|p| !before.contains_key(*p)) {
        out.push(format!("added {}", p.display()));
    }
    out
}

/// The names in `dir` that contain `token`.
fn named_with(dir: &Path, token: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(token))
                .collect()
        })
        .unwrap_or_default()
}

/// The pids whose command line holds `token`.
fn processes_with(token: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmdline) = std::fs::read(e.path().join("cmdline"))
            && cmdline.windows(token.len()).any(|w| w == token.as_bytes())
        {
            out.push(format!("{name}: {}", String::from_utf8_lossy(&cmdline)));
        }
    }
    out
}

/// An address of this machine other than loopback, if it has one (no packet is sent).
fn host_address() -> Option<String> {
    let s = UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("1.1.1.1:80").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then(|| ip.to_string())
}

/// A diff on the fixture: `add` runs `case` of the hostile module, then returns the right sum
/// (the FAIL_TO_PASS test passes when the case lets pytest go on).
fn hostile_patch(module: &str) -> String {
    let added: String = module.lines().map(|l| format!("+{l}\n")).collect();
    format!(
        "diff --git a/widget/core.py b/widget/core.py\n--- a/widget/core.py\n+++ b/widget/core.py\n\
         @@ -1,5 +1,7 @@\n def add(a, b):\n-    return a - b\n+    from widget import hostile\n\
         +    hostile.run()\n+    return a + b\n \n \n def sub(a, b):\n\
         diff --git a/widget/hostile.py b/widget/hostile.py\nnew file mode 100644\n\
         --- /dev/null\n+++ b/widget/hostile.py\n@@ -0,0 +1,{} @@\n{added}",
        module.lines().count()
    )
}

/// The run's files of one case.
struct CaseRun {
    report: serde_json::Value,
    output: String,
}

impl CaseRun {
    /// The result of `label` as the hostile code printed it.
    fn result(&self, case: &str, label: &str) -> String {
        let prefix = format!("HOSTILE {case} {label}: ");
        self.output
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` in the output of {case}:\n{}", self.output))
            .to_string()
    }

    fn refused(&self, case: &str, label: &str) {
        let r = self.result(case, label);
        assert!(r.starts_with("refused"), "{case} {label}: {r}");
    }
}

/// Who replays the hostile predictions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Replayer {
    /// The user running the test, who made the archive.
    Caller,
    /// uid and gid 65534, to whom root hands the archive it made (as a cluster user gets a
    /// release another user built): the command is root of a user namespace that is that
    /// unprivileged user outside.
    Nobody,
}

/// The uid that owns what a replay leaves behind.
fn replayer_uid(replayer: Replayer) -> u32 {
    match replayer {
        Replayer::Caller => euid(),
        Replayer::Nobody => 65534,
    }
}

/// `cmd` as `replayer` runs it.
fn as_replayer(cmd: std::process::Command, replayer: Replayer) -> std::process::Command {
    match replayer {
        Replayer::Caller => cmd,
        Replayer::Nobody => common::as_nobody(&cmd),
    }
}

/// Gives everything under `dir` (links not followed) to uid and gid 65534.
fn give_to_nobody(dir: &Path) {
    for p in walk(dir) {
        std::os::unix::fs::lchown(&p, Some(65534), Some(65534)).unwrap();
    }
}

/// The whole suite: a validated instance, another whose gold patch holds a secret (both
/// made by the caller), the hostile predictions replayed by `replayer`, and the host checked.
/// False when it skipped (it said why).
fn hostile_suite(replayer: Replayer) -> bool {
    let base_dir = match replayer {
        Replayer::Caller => PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
        // Where `nobody` may pass; not /tmp, which is checked.
        Replayer::Nobody => PathBuf::from("/var/tmp"),
    };
    let t = TestContext {
        dir: tempfile::Builder::new()
            .prefix("swe-ark-hostile-")
            .tempdir_in(&base_dir)
            .unwrap(),
    };
    let started = std::time::Instant::now();
    let Some(w) = Widget::new(&t) else {
        return false;
    };
    let ark = t.ark();
    let home = t.path("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join(".profile"), "the caller's own\n").unwrap();
    let ok = |args: &[&str]| {
        let out = w.cmd(&t).env("HOME", &home).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "swe-ark {args:?}\n{}{}",
            stdout(&out),
            stderr(&out)
        );
        out
    };

    // A token no file or command line of this machine holds yet: every name the hostile code
    // makes carries it.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let token = format!("hx{:x}{:x}", std::process::id(), nanos);
    let secret = format!("SWE-ARK-GOLD-SECRET-{:x}", nanos.wrapping_mul(0x9e37_79b9));

    // Instance 1 is validated and packed; instance 2 is only imported: its gold patch, which
    // holds the secret, is in the index and nowhere a replay may show it.
    let secret_gold = GOLD
        .replace(
            "+    return a + b\n",
            &format!("+    # {secret}\n+    return a + b\n"),
        )
        .replace("@@ -1,5 +1,5 @@", "@@ -1,5 +1,6 @@");
    let sub = "tests/test_core.py::test_sub";
    let add = "tests/test_core.py::test_add";
    let instances = [
        instance(1, &test_patch(ADD_TEST), GOLD, &[add], &[sub], &w.base),
        instance(
            2,
            &test_patch(ADD_TEST),
            &secret_gold,
            &[add],
            &[sub],
            &w.base,
        ),
    ];
    w.add_mirror(&t);
    ok(&["env", "lock", "acme/widget", "1.0", "--commit", &w.base]);
    let file = t.path("instances.jsonl");
    let data: String = instances.iter().map(|i| format!("{i}\n")).collect();
    std::fs::write(&file, data).unwrap();
    ok(&["import", file.to_str().unwrap()]);
    ok(&["validate", "--instance-ids", ID, "--timeout", "120"]);
    ok(&["pack", "--all-validated"]);
    let index_holds_secret = ["index.sqlite", "index.sqlite-wal"].iter().any(|f| {
        std::fs::read(ark.join(f))
            .is_ok_and(|b| b.windows(secret.len()).any(|w| w == secret.as_bytes()))
    });
    assert!(
        index_holds_secret,
        "the index does not hold the secret: reading it would prove nothing"
    );
    if replayer == Replayer::Nobody {
        // The archive (with the interpreter its lock carries) and the HOME are nobody's now;
        // the test's directory (0700) it may pass through only.
        use std::os::unix::fs::PermissionsExt;
        give_to_nobody(&ark);
        give_to_nobody(&home);
        std::fs::set_permissions(t.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    // What the hostile code reaches for on the host.
    let listener = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let abstract_name = format!("swe-ark-hostile-{token}");
    let abstract_listener =
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap())
            .unwrap();
    abstract_listener.set_nonblocking(true).unwrap();
    let host_ip = host_address().unwrap_or_default();
    let marker = tempfile::Builder::new()
        .prefix(&format!("swe-ark-hostile-marker-{token}-"))
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::write(marker.path().join("kept"), "the host's /tmp\n").unwrap();
    let passwd_before = std::fs::symlink_metadata("/etc/passwd").unwrap();
    // The installation the environment was made from (the one the lock carries, inside the
    // archive), shown to the run read-only.
    let interpreter = env_interpreter_prefix(&ark);
    let interpreter_named_before = named_with(&interpreter, &token);

    let preds: String = CASES
        .iter()
        .map(|case| {
            let module = HOSTILE_PY
                .replace("@CASE@", case)
                .replace("@TOKEN@", &token)
                .replace("@ARK@", ark.to_str().unwrap())
                .replace("@CALLER_HOME@", home.to_str().unwrap())
                .replace("@HOST_MARKER@", marker.path().to_str().unwrap())
                .replace("@INTERPRETER@", interpreter.to_str().unwrap())
                .replace("@PORT@", &port.to_string())
                .replace("@HOST_IP@", &host_ip)
                .replace("@ABSTRACT@", &abstract_name);
            let p = serde_json::json!({
                "instance_id": ID,
                "model_name_or_path": case,
                "model_patch": hostile_patch(&module),
            });
            format!("{p}\n")
        })
        .collect();
    // Each model's predictions file, all in one replay: one prediction per instance per file.
    let pred_files: Vec<PathBuf> = preds
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let f = t.path(&format!("preds-{i}.jsonl"));
            std::fs::write(&f, format!("{line}\n")).unwrap();
            f
        })
        .collect();

    // A gold replay first, as the replayer: the installed state validation kept gets its
    // environment (a cache beside the lock's shared copy, made once per owner), which every
    // hostile run is then shown read-only under its own layer: the fingerprints below prove
    // that none of them changed it.
    let mut warm = w.cmd(&t);
    warm.env("HOME", &home)
        .args(["replay", "--gold", "--run-id", "warm"]);
    let warm = as_replayer(warm, replayer).output().unwrap();
    assert!(warm.status.success(), "{}{}", stdout(&warm), stderr(&warm));
    let farms: Vec<PathBuf> = walk(&ark.join("envs"))
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("installed-"))
        })
        .collect();
    assert_eq!(
        farms.len(),
        1,
        "one installed state's environment: {farms:?}"
    );
    let kept_trees = walk(&ark.join("trees"))
        .into_iter()
        .filter(|p| p.ends_with("tree/.git/HEAD"))
        .count();
    assert!(kept_trees > 0, "the bundles' work trees are kept");

    // Fingerprints: the archive but the run's own outputs (runs/: its reports, written by
    // design; tmp/: its work directories, the work trees the hostile code may wreck), the
    // caller's HOME, and the host's /tmp marker.
    let skip = ["runs", "tmp"];
    let ark_before = fingerprint(&ark, &skip);
    let home_before = fingerprint(&home, &[]);
    let marker_before = fingerprint(marker.path(), &[]);
    let tmp_named_before = named_with(Path::new("/tmp"), &token);
    let root_named_before = named_with(Path::new("/root"), &token);

    eprintln!("{:?} replaying", started.elapsed());
    // Two replays at a time (one predictions file cannot predict an instance twice). The
    // first of each pair keeps its work directory (a copy of the bundle's kept work tree);
    // the second is given the kept tree under a private layer where it can be (as root): the
    // archive's fingerprint below says that no run reached the kept trees either way.
    let mut outputs = String::new();
    for pair in pred_files.chunks(2) {
        let children: Vec<_> = pair
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let mut c = w.cmd(&t);
                c.env("HOME", &home)
                    .args(["replay", "--predictions"])
                    .arg(f)
                    .args(["--run-id", "hostile", "--timeout", "300"]);
                if i == 0 {
                    c.arg("--keep-workdir");
                }
                as_replayer(c, replayer)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            // Replay ended as it should, whatever the predictions did: not crashed.
            assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
            outputs.push_str(&stdout(&out));
            outputs.push_str(&stderr(&out));
        }
    }

    eprintln!("{:?} replayed", started.elapsed());
    // Nothing outside the work trees changed.
    let ark_after = fingerprint(&ark, &skip);
    assert_eq!(
        changes(&ark_before, &ark_after),
        Vec::<String>::new(),
        "the archive changed"
    );
    assert_eq!(
        changes(&home_before, &fingerprint(&home, &[])),
        Vec::<String>::new(),
        "the caller's HOME changed"
    );
    assert_eq!(
        changes(&marker_before, &fingerprint(marker.path(), &[])),
        Vec::<String>::new(),
        "the host's /tmp marker changed"
    );
    assert_eq!(named_with(Path::new("/tmp"), &token), tmp_named_before);
    assert_eq!(named_with(Path::new("/root"), &token), root_named_before);
    let passwd_after = std::fs::symlink_metadata("/etc/passwd").unwrap();
    assert_eq!(
        (passwd_after.uid(), passwd_after.gid(), passwd_after.mode()),
        (
            passwd_before.uid(),
            passwd_before.gid(),
            passwd_before.mode()
        )
    );
    // (Not fingerprinted: other programs of this machine may compile into it meanwhile.)
    assert_eq!(named_with(&interpreter, &token), interpreter_named_before);
    assert_eq!(
        processes_with(&token),
        Vec::<String>::new(),
        "outlived the run"
    );
    assert!(
        listener
            .accept()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
        "the host's listener got a connection"
    );
    assert!(
        abstract_listener
            .accept()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
        "the host's abstract socket got a connection"
    );

    // Every case was reported; nothing it read of the archive reached any output.
    let runs = ark.join("runs/hostile");
    let mut all_written = outputs.clone();
    for e in walk(&runs) {
        if std::fs::symlink_metadata(&e).unwrap().is_file() {
            all_written.push_str(&String::from_utf8_lossy(&std::fs::read(&e).unwrap()));
        }
    }
    assert!(
        !all_written.contains(&secret),
        "the secret reached an output"
    );
    let leaks: Vec<&str> = all_written
        .lines()
        .filter(|l| l.starts_with("LEAK "))
        .collect();
    assert_eq!(
        leaks,
        Vec::<&str>::new(),
        "what the archive held reached an output"
    );
    let runs_of: BTreeMap<&str, CaseRun> = CASES
        .iter()
        .map(|case| {
            let dir = runs.join(case).join(ID);
            let report: serde_json::Value =
                serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
            let output = std::fs::read_to_string(dir.join("test_output.txt")).unwrap();
            eprintln!(
                "{case}: {}",
                serde_json::to_string(&report[ID]).unwrap_or_default()
            );
            (
                *case,
                CaseRun {
                    report: report[ID].clone(),
                    output,
                },
            )
        })
        .collect();
    for (case, r) in &runs_of {
        assert_eq!(r.report["confinement"].as_str(), Some("confined"), "{case}");
        assert_eq!(
            r.report["patch_successfully_applied"].as_bool(),
            Some(true),
            "{case}"
        );
        for line in r.output.lines().filter(|l| l.starts_with("HOSTILE ")) {
            eprintln!("{line}");
        }
    }

    check_cases(&runs_of, &token, replayer, &ark);
    check_kept_work_dirs(&ark.join("tmp"), replayer_uid(replayer));
    true
}

/// The prefix of the interpreter the archive's one environment was built from.
fn env_interpreter_prefix(ark: &Path) -> PathBuf {
    let envs: Vec<PathBuf> = std::fs::read_dir(ark.join("envs"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("env.json"))
        .filter(|p| p.is_file())
        .collect();
    assert_eq!(envs.len(), 1, "{envs:?}");
    let env: serde_json::Value = serde_json::from_slice(&std::fs::read(&envs[0]).unwrap()).unwrap();
    // Named within the archive (env.json names no place of it but where it was built).
    let python = ark.join(env["interpreter"].as_str().unwrap());
    assert!(
        python.starts_with(ark.join("pythons")),
        "{}",
        python.display()
    );
    python
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf()
}

/// Every path below `dir`, links not followed.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if m.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
        }
        out.push(p);
    }
    out
}

/// What each case's code found inside.
fn check_cases(runs: &BTreeMap<&str, CaseRun>, token: &str, replayer: Replayer, ark: &Path) {
    let r = |case: &str| &runs[case];
    for (case, run) in runs {
        // The code ran to its end (but where a failed service drops the log, below).
        if *case != "links" {
            assert_eq!(run.result(case, "end"), "reached", "{case}");
        }
    }

    // Its own /tmp and HOME (/root, as in SWE-bench's containers) are writable; nothing of
    // the host is.
    let w = r("writes");
    assert_eq!(w.result("writes", "tmp"), "ok");
    assert_eq!(w.result("writes", "home"), "ok");
    assert_eq!(w.result("writes", "root"), "ok");
    assert_eq!(w.result("writes", "environment"), "ok");
    // The environment was given under a private layer wherever this machine has them, and
    // the report says which way it went.
    let expected_mount = match sandbox::layers_available(&ark.join("tmp")) {
        Ok(()) => "overlay",
        Err(_) => "copy",
    };
    for case in CASES {
        assert_eq!(
            r(case).report["environment_mount"].as_str(),
            Some(expected_mount),
            "{case}: {}",
            r(case).report
        );
    }
    // The work tree: the bundle's kept tree under a private layer (as root), or a copy of it
    // (`--keep-workdir`, or not root).
    let tree_mounts: std::collections::BTreeSet<&str> = CASES
        .iter()
        .filter_map(|case| r(case).report["worktree_mount"].as_str())
        .collect();
    assert!(
        tree_mounts
            .iter()
            .all(|m| ["overlay", "reflink", "copy"].contains(m)),
        "{tree_mounts:?}"
    );
    if replayer_uid(replayer) == 0 {
        assert!(tree_mounts.contains("overlay"), "{tree_mounts:?}");
    }
    // Where the archive's path lies under /tmp or /root (a clone there), the run may make
    // directories of that name in its own /tmp or HOME: its own, not the archive (the
    // fingerprints say so, and no part of the path existed for it: `host-paths-seen`).
    let ark_under_own = ark.starts_with("/tmp") || ark.starts_with("/root");
    if !ark_under_own {
        w.refused("writes", "archive-mkdir");
    }
    for label in [
        "caller-home",
        "archive",
        "archive-index",
        "archive-runs",
        "host-tmp-marker",
        "wheelhouse",
        "interpreter",
        "slash",
        "usr",
        "etc",
    ] {
        w.refused("writes", label);
    }

    // The archive's index is not there; no descriptor leads to it.
    let rd = r("reads");
    rd.refused("reads", "read-index.sqlite");
    rd.refused("reads", "read-index.sqlite-wal");
    assert_eq!(rd.result("reads", "through-proc-root"), "0");
    // The fixed layout: the work tree at /testbed, and nothing of the host's paths around it.
    assert_eq!(rd.result("reads", "cwd"), "/testbed");
    assert_eq!(rd.result("reads", "host-paths-seen"), "none");
    for l in rd
        .output
        .lines()
        .filter(|l| l.starts_with("HOSTILE reads fd-"))
    {
        assert!(!l.contains("index.sqlite"), "{l}");
    }

    // rm -rf / ran (and wrecked only its own work tree: the fingerprints say so).
    assert!(r("rm").result("rm", "rm-slash").starts_with("exit"));

    // The fork bomb met the process limit, well before its own bound.
    let f = r("fork-bomb");
    let limit: u64 = f.result("fork-bomb", "nproc-limit").parse().unwrap();
    let forked: u64 = f.result("fork-bomb", "forked").parse().unwrap();
    assert_eq!(
        f.result("fork-bomb", "stopped"),
        "EAGAIN",
        "no process limit"
    );
    assert!(forked < limit, "{forked} processes of at most {limit}");

    // The tmpfs mounts stop at their size; one file stops at RLIMIT_FSIZE (16 GiB), a sparse
    // 10 GiB one is allowed. As root, the instance's /tmp is a tmpfs of its own (for all its
    // commands); replayed by another user it is the archive's disk, as the work tree is: the
    // code wrote its own bound of 128 MiB there without meeting any (docs/SANDBOX.md, "What
    // it is not").
    let d = r("disk");
    let tmp_on_tmpfs = replayer_uid(replayer) == 0;
    assert_eq!(
        d.result("disk", "tmp-fs") == "tmpfs",
        tmp_on_tmpfs,
        "the instance's /tmp is on {}",
        d.result("disk", "tmp-fs")
    );
    let mut filled = vec!["fill-home", "fill-dev-shm"];
    if tmp_on_tmpfs {
        filled.push("fill-tmp");
    } else {
        assert_eq!(d.result("disk", "fill-tmp"), format!("{} cap", 128 << 20));
    }
    for label in filled {
        let got = d.result("disk", label);
        let (bytes, why) = got.split_once(' ').unwrap();
        assert_eq!(why, "ENOSPC", "{label}: {got}");
        assert!(
            bytes.parse::<u64>().unwrap() <= swe_ark::sandbox::DEFAULT_TMPFS_SIZE,
            "{label}: {got}"
        );
    }
    assert_eq!(
        d.result("disk", "fill-work-tree"),
        format!("{} cap", 128 << 20)
    );
    assert_eq!(
        d.result("disk", "file-size-limit"),
        (16u64 << 30).to_string()
    );
    assert_eq!(
        d.result("disk", "sparse-10g"),
        format!("ok {}", 10u64 << 30)
    );
    assert_eq!(d.result("disk", "sparse-17g"), "refused EFBIG");

    // The service log made a link to /etc/passwd: the failure is reported, the file behind
    // the link is not read.
    let l = &r("links").report;
    assert_eq!(l["error"].as_str(), Some("service-failed"), "{l}");
    let detail = l["error_detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("hostile-reason-{token}")),
        "{detail}"
    );
    assert!(
        detail.contains("it printed nothing") && !detail.contains("root:"),
        "{detail}"
    );

    // Mount, namespaces, chroot and ptrace are refused; root's own-file capabilities only,
    // no_new_privs, seccomp.
    let s = r("syscalls");
    // No set-id bit gets onto a file, however asked (what it writes may be root's on disk).
    for label in [
        "suid-chmod-work",
        "suid-chmod-tmp",
        "suid-chmod-env",
        "suid-open",
        "suid-mknod",
    ] {
        assert_eq!(s.result("syscalls", label), "refused EPERM", "{label}");
    }
    assert!(s.result("syscalls", "suid-ran").ends_with("NoNewPrivs: 1"));
    for label in [
        "mount",
        "unshare-user",
        "unshare-mount",
        "unshare-net",
        "chroot",
        "ptrace-attach",
    ] {
        assert_eq!(s.result("syscalls", label), "refused EPERM", "{label}");
    }
    assert!(s.result("syscalls", "suid-ran").ends_with("NoNewPrivs: 1"));
    s.refused("syscalls", "setns");
    assert_ne!(s.result("syscalls", "unshare-command"), "exit 0");
    assert_ne!(s.result("syscalls", "mount-command"), "exit 0");
    // Only root's own-file capabilities (CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER).
    for cap in ["CapEff", "CapPrm", "CapBnd"] {
        assert_eq!(s.result("syscalls", cap), "000000000000000b", "{cap}");
    }
    assert_eq!(s.result("syscalls", "NoNewPrivs"), "1");
    assert_eq!(s.result("syscalls", "Seccomp"), "2");

    // The processes meant to outlive the run were running when it ended (the host shows none
    // now: checked above).
    let alive: u32 = r("outlive").result("outlive", "alive").parse().unwrap();
    assert!(alive >= 4, "{alive}");

    // No way out: the internet dropped, names unresolved, the host's loopback and abstract
    // sockets not the run's.
    let n = r("network");
    for label in [
        "connect-1.1.1.1",
        "resolve-example.com",
        "connect-example.com",
        "connect-host-loopback",
        "connect-host-abstract-socket",
    ] {
        n.refused("network", label);
    }
    if n.output.contains("HOSTILE network connect-host-address") {
        n.refused("network", "connect-host-address");
    }
}

/// The work directories kept (`--keep-workdir`): everything in them is the replaying user's
/// (as root, stored as root's through the idmapped mounts), and nothing is set-uid or set-gid.
fn check_kept_work_dirs(tmp: &Path, me: u32) {
    let mut set_id = Vec::new();
    let mut foreign = Vec::new();
    for p in walk(tmp) {
        let m = std::fs::symlink_metadata(&p).unwrap();
        if m.is_file() && m.mode() & 0o6000 != 0 {
            set_id.push(format!("{} {:o} {}", p.display(), m.mode(), m.uid()));
        }
        if m.uid() != me {
            foreign.push(format!("{} {}", p.display(), m.uid()));
        }
    }
    assert_eq!(set_id, Vec::<String>::new(), "set-id files left behind");
    assert_eq!(
        foreign,
        Vec::<String>::new(),
        "files of another owner left behind"
    );
}

#[test]
fn hostile_predictions_are_contained() {
    if !confinement_or_skip() {
        return;
    }
    hostile_suite(Replayer::Caller);
}

/// Not root: the archive root made, handed to uid 65534, and replayed by it (the command is
/// root of its user namespace, which is that unprivileged user outside).
#[test]
fn hostile_predictions_are_contained_for_an_unprivileged_user() {
    if let Some(why) = common::nobody_with_namespaces_unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    hostile_suite(Replayer::Nobody);
}
