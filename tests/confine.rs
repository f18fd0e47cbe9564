//! Confined runs (`Spec::confine`, docs/SANDBOX.md "Confinement"): the command sees a root of
//! its own, runs as root of a user namespace that is an unprivileged uid outside, with no
//! capabilities, `no_new_privs` and a seccomp filter, and cannot touch what it was not given.
//! Each test checks the host after the run: the directories it must not touch are hashed
//! before and after.

mod common;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use swe_ark::sandbox::{self, Confine, Mount, Outcome, SandboxError, Spec};
use tempfile::TempDir;

/// A work tree the command may write, a secret directory beside it (an archive's stand-in)
/// that it must not see, and the output file outside both.
struct World {
    _top: TempDir,
    work: PathBuf,
    secret: PathBuf,
    output: PathBuf,
}

impl World {
    fn new() -> World {
        let top = tempfile::Builder::new()
            .prefix("swe-ark-confine-test-")
            .tempdir()
            .unwrap();
        let work = top.path().join("work");
        let secret = top.path().join("archive");
        std::fs::create_dir(&work).unwrap();
        std::fs::create_dir(&secret).unwrap();
        std::fs::write(work.join("given.txt"), "given\n").unwrap();
        std::fs::write(secret.join("index.sqlite"), "the archive's index\n").unwrap();
        let output = top.path().join("output.log");
        World {
            work,
            secret,
            output,
            _top: top,
        }
    }

    fn spec(&self, script: &str) -> Spec {
        let mut spec = Spec::new("/bin/bash", &self.work, &self.output);
        spec.args = vec![OsString::from("-c"), OsString::from(script)];
        let mut confine = Confine::new();
        confine.writable.push(self.work.clone());
        confine.tmpfs_size = 64 << 20;
        spec.confine = Some(confine);
        spec.timeout = Some(Duration::from_secs(120));
        spec
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.output).unwrap()).into_owned()
    }
}

/// Confinement needs user namespaces (and, for the tests' checks, a machine where they work).
fn confinement_or_skip() -> bool {
    let w = World::new();
    match sandbox::run(&w.spec("true")) {
        Ok(_) => true,
        Err(SandboxError::NoConfinement { reason }) => {
            eprintln!("skipped: confinement is not possible here: {reason}");
            false
        }
        Err(e) => panic!("{e}"),
    }
}

fn run(w: &World, spec: &Spec) -> Outcome {
    match sandbox::run(spec) {
        Ok(o) => o,
        Err(e) => panic!("sandbox::run failed: {e}\noutput:\n{}", w.text()),
    }
}

/// Every file below `dir` (links not followed) with its bytes' hash, owner and mode; an
/// unreadable directory counts as one entry.
fn fingerprint(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut seen = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        let what = if m.file_type().is_symlink() {
            format!("link {:?}", std::fs::read_link(&p).ok())
        } else if m.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&p) {
                stack.extend(entries.flatten().map(|e| e.path()));
            }
            "dir".to_string()
        } else {
            let bytes = std::fs::read(&p).unwrap_or_default();
            format!("{} bytes {:x}", bytes.len(), md5ish(&bytes))
        };
        seen.insert(p, format!("{what} {}:{} {:o}", m.uid(), m.gid(), m.mode()));
    }
    seen
}

/// A cheap content hash for comparisons within one test.
fn md5ish(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The host's directories a command must never change: checked around each hostile run.
struct Untouched {
    dirs: Vec<PathBuf>,
    before: Vec<BTreeMap<PathBuf, String>>,
}

impl Untouched {
    fn new(w: &World) -> Untouched {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut dirs = vec![w.secret.clone()];
        // The caller's HOME and the host's /tmp: their top level only (other tests of this
        // suite write there at the same time), and a marker file of our own in each.
        dirs.extend(home);
        let before = dirs.iter().map(|d| top_level(d)).collect();
        Untouched { dirs, before }
    }

    fn check(&self) {
        for (dir, before) in self.dirs.iter().zip(&self.before) {
            let after = top_level(dir);
            assert_eq!(&after, before, "{} changed", dir.display());
        }
    }
}

/// The entries of `dir` and, for the secret directory, everything below it.
fn top_level(dir: &Path) -> BTreeMap<PathBuf, String> {
    if dir
        .file_name()
        .is_some_and(|n| n.to_string_lossy() == "archive")
    {
        return fingerprint(dir);
    }
    let mut seen = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            // Other tests' scratch directories come and go.
            if name.starts_with("swe-ark-") || name.starts_with(".tmp") {
                continue;
            }
            if let Ok(m) = std::fs::symlink_metadata(e.path()) {
                seen.insert(e.path(), format!("{} {:o} {}", m.uid(), m.mode(), m.len()));
            }
        }
    }
    seen
}

#[test]
fn confined_command_is_root_of_nothing() {
    if !confinement_or_skip() {
        return;
    }
    let w = World::new();
    let script = r#"
id -u; id -g
grep -E '^(CapEff|CapPrm|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status
echo pid $$
# What a container's root may do with its own files, whatever their modes.
mkdir sealed && echo inside > sealed/f && chmod 000 sealed/f && chmod 244 sealed
cat sealed/f && echo more >> sealed/f && echo own-files-as-root
"#;
    let out = run(&w, &w.spec(script));
    assert!(out.success(), "{out:?}\n{}", w.text());
    let text = w.text();
    assert!(text.starts_with("0\n0\n"), "{text}");
    // Only root's own-file capabilities (CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER), kept
    // across exec as ambient ones.
    for line in [
        "CapPrm:\t000000000000000b",
        "CapEff:\t000000000000000b",
        "CapBnd:\t000000000000000b",
        "CapAmb:\t000000000000000b",
        "inside\nown-files-as-root",
        "NoNewPrivs:\t1",
        "Seccomp:\t2",
        "pid 2",
    ] {
        assert!(text.contains(line), "no `{line}` in:\n{text}");
    }
}

#[test]
fn confined_command_sees_only_what_it_is_given() {
    if !confinement_or_skip() {
        return;
    }
    let w = World::new();
    let marker = tempfile::Builder::new()
        .prefix("swe-ark-host-tmp-marker-")
        .tempfile_in("/tmp")
        .unwrap();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/nonexistent".into());
    let script = format!(
        r#"
ls -a / | tr '\n' ' '; echo
cat given.txt
test -e {secret} && echo SECRET-VISIBLE
test -e {marker} && echo HOST-TMP-VISIBLE
ls -A {home} 2>/dev/null | head -3 | sed 's/^/HOME-ENTRY /'
echo in-work > written.txt && echo work-writable
echo in-tmp > /tmp/t && echo tmp-writable
echo in-home > "$HOME/h" && echo home-writable
touch /usr/x 2>/dev/null || echo usr-read-only
touch /etc/x 2>/dev/null || echo etc-read-only
touch /x 2>/dev/null || echo root-read-only
ls /dev | tr '\n' ' '; echo
"#,
        secret = w.secret.display(),
        marker = marker.path().display(),
    );
    let untouched = Untouched::new(&w);
    let out = run(&w, &w.spec(&script));
    untouched.check();
    let text = w.text();
    assert!(out.success(), "{out:?}\n{text}");
    for absent in ["SECRET-VISIBLE", "HOST-TMP-VISIBLE", "HOME-ENTRY"] {
        assert!(!text.contains(absent), "{absent}:\n{text}");
    }
    for present in [
        "given",
        "work-writable",
        "tmp-writable",
        "home-writable",
        "usr-read-only",
        "etc-read-only",
        "root-read-only",
    ] {
        assert!(text.contains(present), "no {present}:\n{text}");
    }
    let dev = text.lines().last().unwrap_or_default();
    for node in ["null", "zero", "urandom", "shm", "pts"] {
        assert!(dev.split(' ').any(|n| n == node), "no /dev/{node}: {dev}");
    }
    assert!(!dev.contains("sda") && !dev.contains("vda"), "{dev}");
    // What the command wrote in its work tree is the caller's again.
    let written = std::fs::symlink_metadata(w.work.join("written.txt")).unwrap();
    // SAFETY: geteuid cannot fail.
    assert_eq!(written.uid(), unsafe { libc::geteuid() });
}

/// The work tree given as a mount at `/testbed`, confined and not: the command works there,
/// writes land in the host directory, and nothing of the host's path leads to it (no parent
/// directory of it exists inside, not even empty); HOME is `/root` and the user root.
#[test]
fn a_mount_is_seen_only_at_its_own_place() {
    if !confinement_or_skip() {
        return;
    }
    for confined in [true, false] {
        let w = World::new();
        let host_top = w.work.parent().unwrap().to_path_buf();
        let script = format!(
            "pwd; cat given.txt; echo made > made.txt; echo \"$HOME\"; id -u; \
             for p in {top} {work} {parent}; do test -e \"$p\" && echo \"seen $p\"; done; \
             test -d /usr/bin && echo usr; echo end",
            top = host_top.display(),
            work = w.work.display(),
            parent = host_top.parent().unwrap().display(),
        );
        let mut spec = w.spec(&script);
        spec.cwd = PathBuf::from("/testbed");
        spec.mounts = vec![Mount::new(&w.work, "/testbed", true)];
        // Unconfined, /tmp is the host's unless the run has its own (an instance has).
        let own_tmp = tempfile::tempdir().unwrap();
        if confined {
            spec.confine.as_mut().unwrap().writable.clear();
        } else {
            spec.confine = None;
            spec.tmp = Some(own_tmp.path().to_path_buf());
        }
        let out = run(&w, &spec);
        let text = w.text();
        assert!(out.success(), "confined {confined}: {out:?}\n{text}");
        // /tmp's parent is / (seen); the world's own directories are not.
        let seen: Vec<&str> = text.lines().filter(|l| l.starts_with("seen ")).collect();
        assert!(
            seen.iter().all(|l| *l == "seen /tmp"),
            "confined {confined}: host paths inside: {seen:?}\n{text}"
        );
        assert!(
            text.starts_with("/testbed\ngiven\n/root\n0\n") && text.ends_with("usr\nend\n"),
            "confined {confined}: {text}"
        );
        assert_eq!(
            std::fs::read_to_string(w.work.join("made.txt")).unwrap(),
            "made\n"
        );
    }
}

/// A mount must be a directory, seen at an absolute place of its own.
#[test]
fn bad_mounts_are_refused() {
    let w = World::new();
    for (host, at) in [
        (w.work.clone(), "testbed"),
        (w.work.clone(), "/"),
        (w.work.clone(), "/tmp/x"),
        (w.work.clone(), "/proc/x"),
        (w.work.join("given.txt"), "/testbed"),
        (w.work.join("nothing"), "/testbed"),
    ] {
        let mut spec = w.spec("true");
        spec.mounts = vec![Mount::new(&host, at, true)];
        spec.cwd = w.work.clone();
        match sandbox::run(&spec) {
            Err(SandboxError::InvalidSpec(why)) => assert!(why.contains("mount"), "{why}"),
            other => panic!("{} at {at}: {other:?}", host.display()),
        }
    }
}

#[test]
fn hidden_programs_are_passed_by() {
    if !confinement_or_skip() {
        return;
    }
    let w = World::new();
    // `od` (coreutils) through /bin: on a merged-/usr machine that is /usr/bin/od.
    let script = r#"
for d in /usr/bin /bin; do test -f $d/od && test -x $d/od && echo FOUND-IN-$d; done
od </dev/null; echo "od exited $?"
test -r /usr/bin/od || echo unreadable
test -f /usr/bin/cat && test -x /usr/bin/cat && echo others-kept
"#;
    let mut spec = w.spec(script);
    spec.hidden = vec![PathBuf::from("/bin/od")];
    let out = run(&w, &spec);
    assert!(
        out.success(),
        "{out:?}
{}",
        w.text()
    );
    let text = w.text();
    assert!(!text.contains("FOUND-IN"), "{text}");
    // Unreadable too (cmake's find_program takes a readable file): its owner is not the
    // run's when swe-ark is root.
    let unreadable = if unsafe { libc::geteuid() } == 0 {
        "unreadable"
    } else {
        "others-kept"
    };
    for line in ["od exited 126", unreadable, "others-kept"] {
        assert!(text.contains(line), "no `{line}` in:\n{text}");
    }
    // Outside, nothing changed.
    let od = std::fs::metadata("/usr/bin/od").unwrap();
    assert!(od.is_file() && od.mode() & 0o111 != 0);
    for bad in ["od", "/usr/bin", "/usr/bin/no-such-program-here"] {
        let mut spec = w.spec("true");
        spec.hidden = vec![PathBuf::from(bad)];
        match sandbox::run(&spec) {
            Err(SandboxError::InvalidSpec(why)) => assert!(why.contains(bad), "{why}"),
            other => panic!("hiding {bad}: {other:?}"),
        }
    }
}

#[test]
fn confined_command_cannot_mount_unshare_or_trace() {
    if !confinement_or_skip() {
        return;
    }
    let w = World::new();
    let script = r#"
mount -t tmpfs none /tmp 2>/dev/null && echo MOUNTED
unshare --user --map-root-user true 2>/dev/null && echo UNSHARED
unshare --mount true 2>/dev/null && echo UNSHARED-MOUNT
sleep 30 & child=$!
if command -v python3 >/dev/null; then
python3 - "$child" <<'EOF'
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
# PTRACE_ATTACH = 16
r = libc.ptrace(16, int(sys.argv[1]), 0, 0)
print("TRACED" if r == 0 else "ptrace refused %d" % ctypes.get_errno())
EOF
fi
kill $child
echo done
"#;
    let out = run(&w, &w.spec(script));
    let text = w.text();
    assert!(out.success(), "{out:?}\n{text}");
    for bad in ["MOUNTED", "UNSHARED", "TRACED"] {
        assert!(!text.contains(bad), "{bad}:\n{text}");
    }
    assert!(text.contains("done"), "{text}");
}

#[test]
fn confined_limits_hold() {
    if !confinement_or_skip() {
        return;
    }
    let w = World::new();
    let mut spec = w.spec(
        "head -c 8M /dev/zero > big; echo head=$?; head -c 256M /dev/zero > /tmp/big; echo tmp=$?",
    );
    if let Some(c) = spec.confine.as_mut() {
        c.file_size_limit = Some(1 << 20);
    }
    let out = run(&w, &spec);
    let text = w.text();
    assert!(out.success(), "{out:?}\n{text}");
    let big = std::fs::metadata(w.work.join("big")).unwrap().len();
    assert!(big <= 1 << 20, "the file grew to {big} bytes:\n{text}");
    assert!(!text.contains("head=0"), "{text}");
    assert!(!text.contains("tmp=0"), "{text}");
}

#[test]
fn links_left_in_the_work_tree_are_not_followed() {
    if !confinement_or_skip() {
        return;
    }
    let w = World::new();
    let passwd = std::fs::symlink_metadata("/etc/passwd").unwrap();
    let secret_index = w.secret.join("index.sqlite");
    // Set-id bits by chmod, by open's mode (Python's os.open: openat) and by mknod of a
    // regular file: each refused.
    let script = format!(
        "ln -s /etc/passwd to-passwd; ln -s {} to-archive; mkdir d; chmod 2755 d; \
         cp /bin/true suid; chmod 4755 suid || echo chmod-refused; \
         python3 -c 'import os\n\
try: os.close(os.open(\"suid2\", os.O_CREAT | os.O_WRONLY, 0o6755))\n\
except OSError as e: print(\"open-refused\", e.errno)\n\
try: os.mknod(\"suid3\", 0o104755)\n\
except OSError as e: print(\"mknod-refused\", e.errno)'; echo ok",
        secret_index.display()
    );
    let untouched = Untouched::new(&w);
    let out = run(&w, &w.spec(&script));
    untouched.check();
    assert!(out.success(), "{out:?}\n{}", w.text());
    let after = std::fs::symlink_metadata("/etc/passwd").unwrap();
    assert_eq!(
        (after.uid(), after.gid(), after.mode()),
        (passwd.uid(), passwd.gid(), passwd.mode())
    );
    // What the run wrote may be root's on disk (idmapped trees): no set-id bit ever got there.
    let text = w.text();
    for refused in ["chmod-refused", "open-refused 1", "mknod-refused 1"] {
        assert!(text.contains(refused), "{refused}:\n{text}");
    }
    for name in ["d", "suid"] {
        let m = std::fs::symlink_metadata(w.work.join(name)).unwrap();
        assert_eq!(m.mode() & 0o6000, 0, "{name}: {:o}\n{text}", m.mode());
    }
    for name in ["suid2", "suid3"] {
        assert!(!w.work.join(name).exists(), "{name} was made:\n{text}");
    }
}

#[test]
fn bad_confinement_is_refused() {
    let w = World::new();
    let mut spec = w.spec("true");
    if let Some(c) = spec.confine.as_mut() {
        c.writable.push(PathBuf::from("relative/dir"));
    }
    let err = sandbox::run(&spec).unwrap_err().to_string();
    assert!(err.contains("relative/dir"), "{err}");

    let mut spec = w.spec("true");
    spec.cwd = w.secret.clone();
    let err = sandbox::run(&spec).unwrap_err().to_string();
    assert!(
        err.contains("not among what the confined run sees"),
        "{err}"
    );
}

/// As root, on a filesystem without idmapped mounts (NFS, an old kernel), the writable trees
/// are given to the sandbox uid for the run and taken back after it (`Confine::idmap` false
/// forces that path here, where every filesystem has them): the command owns what it finds
/// and makes, links are not followed, and afterwards everything is root's again, set-id bits
/// never kept.
#[test]
fn without_idmapped_mounts_the_trees_are_handed_over_and_back() {
    if !is_root() {
        eprintln!("skipped: the hand-over is what swe-ark does as root");
        return;
    }
    if !confinement_or_skip() {
        return;
    }
    let w = World::new();
    std::fs::create_dir(w.work.join("sub")).unwrap();
    std::fs::write(
        w.work.join("sub/deep.txt"),
        "deep
",
    )
    .unwrap();
    let passwd = std::fs::symlink_metadata("/etc/passwd").unwrap();
    let mut spec = w.spec(
        "until [ -e go ]; do sleep 0.05; done; rm go; \
         echo owner=$(stat -c %u given.txt); echo more >> sub/deep.txt && echo wrote; \
         ln -s /etc/passwd to-passwd; mkdir made; echo new > made/new.txt; \
         chmod 4755 made/new.txt || echo chmod-refused",
    );
    if let Some(c) = spec.confine.as_mut() {
        c.idmap = false;
    }
    let untouched = Untouched::new(&w);
    // While the command runs (it waits for the file `go`), the tree is nobody's on disk.
    let given = w.work.join("given.txt");
    let go = w.work.join("go");
    let out = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let mut seen = None;
            for _ in 0..600 {
                let m = std::fs::symlink_metadata(&given).unwrap();
                if m.uid() != 0 {
                    seen = Some(m.uid());
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            std::fs::write(&go, "").unwrap();
            seen
        });
        let out = run(&w, &spec);
        (out, watcher.join().unwrap())
    });
    let (out, owner_during) = out;
    assert_eq!(
        owner_during,
        Some(sandbox::SANDBOX_ID),
        "the tree was not handed over"
    );
    untouched.check();
    let text = w.text();
    assert!(out.success(), "{out:?}\n{text}");
    for said in ["owner=0", "wrote", "chmod-refused"] {
        assert!(text.contains(said), "{said}:\n{text}");
    }
    let after = std::fs::symlink_metadata("/etc/passwd").unwrap();
    assert_eq!(
        (after.uid(), after.gid(), after.mode()),
        (passwd.uid(), passwd.gid(), passwd.mode())
    );
    for rel in [
        "",
        "given.txt",
        "sub",
        "sub/deep.txt",
        "to-passwd",
        "made",
        "made/new.txt",
    ] {
        let m = std::fs::symlink_metadata(w.work.join(rel)).unwrap();
        assert_eq!((m.uid(), m.gid()), (0, 0), "{rel} was not taken back");
        assert_eq!(m.mode() & 0o6000, 0, "{rel}: {:o}", m.mode());
    }
    assert_eq!(
        std::fs::read_to_string(w.work.join("sub/deep.txt")).unwrap(),
        "deep\nmore\n"
    );
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Not root: the same confinement, from an unprivileged user (the command is root of its
/// user namespace, which is that user outside). Re-runs this binary as `nobody`.
#[test]
fn confined_as_an_unprivileged_user() {
    if let Some(why) = common::nobody_with_namespaces_unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let me = std::env::current_exe().unwrap();
    let out = std::process::Command::new(common::AS_NOBODY[0])
        .args(&common::AS_NOBODY[1..])
        .arg(&me)
        .args([
            "helper_confined_nobody",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("SWE_ARK_CONFINE_HELPER", "1")
        .env("TMPDIR", "/tmp")
        .env("HOME", "/nonexistent")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("helper_confined_nobody: ok"), "{text}");
}

#[test]
#[ignore = "run by confined_as_an_unprivileged_user"]
fn helper_confined_nobody() {
    if std::env::var_os("SWE_ARK_CONFINE_HELPER").is_none() {
        return;
    }
    assert!(!is_root());
    let w = World::new();
    let script = "id -u; grep -E '^(CapEff|NoNewPrivs):' /proc/self/status; \
                  echo x > made.txt; touch /etc/x 2>/dev/null || echo etc-read-only";
    let untouched = Untouched::new(&w);
    let out = run(&w, &w.spec(script));
    untouched.check();
    let text = w.text();
    assert!(out.success(), "{out:?}\n{text}");
    assert_eq!(
        text,
        "0\nCapEff:\t000000000000000b\nNoNewPrivs:\t1\netc-read-only\n"
    );
    let made = std::fs::symlink_metadata(w.work.join("made.txt")).unwrap();
    assert_eq!(made.uid(), 65534);
    // Unconfined with the work tree mounted at /testbed: the host's view, in a user namespace
    // where this user is root.
    let own_tmp = tempfile::tempdir().unwrap();
    let mut spec = w.spec("pwd; id -u; echo \"$HOME\"; echo y > view.txt");
    spec.confine = None;
    spec.cwd = PathBuf::from("/testbed");
    spec.tmp = Some(own_tmp.path().to_path_buf());
    spec.mounts = vec![Mount::new(&w.work, "/testbed", true)];
    let out = run(&w, &spec);
    let text = w.text();
    assert!(out.success(), "{out:?}\n{text}");
    assert_eq!(text, "/testbed\n0\n/root\n");
    let made = std::fs::symlink_metadata(w.work.join("view.txt")).unwrap();
    assert_eq!(made.uid(), 65534);
    eprintln!("helper_confined_nobody: ok");
}

/// A directory shared by every instance (a lock's environment) shown under a private layer:
/// runs given the layer in turn see each other's changes (a file appended, one removed, a
/// directory made), the shared directory never changes, and when the layer is dropped what
/// it holds is the caller's again. Without confinement, or over a directory of another
/// owner, a layer is refused by name.
#[test]
fn a_private_layer_takes_every_change_and_the_shared_directory_none() {
    if !confinement_or_skip() {
        return;
    }
    let w = World::new();
    let top = w.work.parent().unwrap().to_path_buf();
    if let Err(why) = sandbox::layers_available(&top) {
        eprintln!("skipped: no private layers here: {why}");
        return;
    }
    let shared = top.join("shared").join("env");
    std::fs::create_dir_all(shared.join("lib")).unwrap();
    std::fs::write(shared.join("lib/a.py"), "a = 1\n").unwrap();
    std::fs::write(shared.join("lib/gone.py"), "gone\n").unwrap();
    sandbox::give_to_layer_owner(&top.join("shared"), sandbox::layer_owner()).unwrap();
    // Closed to everyone but the caller: a run reaches it all the same.
    assert_eq!(
        std::fs::metadata(top.join("shared")).unwrap().mode() & 0o777,
        0o700
    );
    let before = fingerprint(&shared);
    let layer_dir = top.join("layer");
    let layer = sandbox::Layer::prepare(&layer_dir).unwrap();
    let at = Path::new("/env");
    let with_layer = |script: &str| {
        let mut spec = w.spec(script);
        spec.mounts = vec![Mount::layered(&shared, at, layer.path())];
        spec
    };
    let first = "echo 'b = 2' >> /env/lib/a.py && rm /env/lib/gone.py && mkdir /env/new \
                 && echo made > /env/new/f";
    let out = run(&w, &with_layer(first));
    assert!(out.success(), "{out:?}\n{}", w.text());
    let second = "cat /env/lib/a.py /env/new/f; test -e /env/lib/gone.py || echo gone";
    let out = run(&w, &with_layer(second));
    assert!(out.success(), "{out:?}\n{}", w.text());
    assert_eq!(w.text(), "a = 1\nb = 2\nmade\ngone\n");
    assert_eq!(fingerprint(&shared), before, "the shared directory changed");
    let upper = layer.upper();
    assert_eq!(
        std::fs::read_to_string(upper.join("lib/a.py")).unwrap(),
        "a = 1\nb = 2\n"
    );
    drop(layer);
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    for p in walk_all(&layer_dir) {
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert_eq!(m.uid(), me, "{} is uid {}'s", p.display(), m.uid());
    }

    // Refused: a layer without confinement, and a shared directory of another owner.
    let layer = sandbox::Layer::prepare(&top.join("layer-2")).unwrap();
    let mut spec = w.spec("true");
    spec.confine = None;
    spec.mounts = vec![Mount::layered(&shared, at, layer.path())];
    let err = sandbox::run(&spec).unwrap_err().to_string();
    assert!(err.contains("layers are for confined runs only"), "{err}");
    if me == 0 {
        let foreign = top.join("foreign");
        std::fs::create_dir(&foreign).unwrap();
        let mut spec = w.spec("true");
        spec.mounts = vec![Mount::layered(&foreign, at, layer.path())];
        let err = sandbox::run(&spec).unwrap_err().to_string();
        assert!(
            err.contains(&format!("it is uid 0's, not {}'s", sandbox::layer_owner())),
            "{err}"
        );
    }
}

/// Every path below `dir`, itself included, links not followed.
fn walk_all(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
        out.push(p);
    }
    out
}
