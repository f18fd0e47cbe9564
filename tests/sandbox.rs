//! The sandbox (`swe_ark::sandbox`, docs/SANDBOX.md): process tree, network, environment,
//! output, limits. Most tests need root or user namespaces; two re-run this binary in a
//! narrower world (as `nobody`, and with namespaces forbidden) through `helper_*` tests that do
//! nothing unless SWE_ARK_SANDBOX_HELPER names them.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use swe_ark::sandbox::{self, Network, Outcome, SandboxError, Spec};
use tempfile::TempDir;

/// A scratch directory (the working directory) and the output file beside it.
struct Scratch {
    dir: TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::Builder::new()
            .prefix("swe-ark-sandbox-test-")
            .tempdir()
            .unwrap();
        Scratch { dir }
    }

    fn spec(&self, program: impl Into<PathBuf>, args: &[&str]) -> Spec {
        let mut spec = Spec::new(program, self.dir.path(), self.output());
        spec.args = args.iter().map(OsString::from).collect();
        spec
    }

    fn output(&self) -> PathBuf {
        self.dir.path().join("output.log")
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(self.output()).unwrap()).into_owned()
    }
}

fn run(spec: &Spec) -> Outcome {
    match sandbox::run(spec) {
        Ok(outcome) => outcome,
        Err(e) => panic!("sandbox::run failed: {e}"),
    }
}

fn sh(scratch: &Scratch, script: &str) -> Spec {
    scratch.spec("/bin/sh", &["-c", script])
}

fn bash(scratch: &Scratch, script: &str) -> Spec {
    scratch.spec("/bin/bash", &["-c", script])
}

/// The real interpreter behind `python3` (not a pyenv shim, which needs the caller's HOME).
fn python() -> Option<PathBuf> {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if out.status.success() && path.is_file() {
        return Some(path);
    }
    let fallback = PathBuf::from("/usr/bin/python3");
    fallback.is_file().then_some(fallback)
}

fn py(scratch: &Scratch, python: &Path, code: &str) -> Spec {
    scratch.spec(python, &["-c", code])
}

/// Runs `python -c code`, which must succeed.
fn python_ok(scratch: &Scratch, python: &Path, code: &str) -> Outcome {
    let out = run(&py(scratch, python, code));
    assert!(out.success(), "{out:?}: {}", scratch.text());
    out
}

/// [`python`], saying so when there is none.
fn python_or_skip() -> Option<PathBuf> {
    let found = python();
    if found.is_none() {
        eprintln!("skipped: no python3");
    }
    found
}

/// A string no other process has in its command line.
fn marker() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "swe-ark-marker-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Every process (by /proc/*/cmdline) whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.chars().all(|c| c.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(marker) {
            found.push(format!("{pid}: {cmdline}"));
        }
    }
    found
}

/// A bash script that leaves sleepers behind every way a test suite might: a background job,
/// one in a new session (setsid), one double-forked (an orphan), and waits until all three
/// run. With `then_exit`, the script then ends; otherwise it becomes a fourth sleeper itself.
fn sleepers_script(marker: &str, then_exit: bool) -> String {
    sleepers_script_with(marker, then_exit, "")
}

/// The same, with `notify` (a shell command) run after "started".
fn sleepers_script_with(marker: &str, then_exit: bool, notify: &str) -> String {
    let end = if then_exit {
        "exit 0".to_string()
    } else {
        format!("exec -a '{marker}-fg' sleep 600")
    };
    format!(
        r#"m='{marker}'
(exec -a "$m-bg" sleep 600) &
setsid bash -c "exec -a '$m-setsid' sleep 600" &
bash -c "(exec -a '$m-orphan' sleep 600 &)"
while [ "$(grep -las "^$m" /proc/[0-9]*/cmdline | wc -l)" -lt 3 ]; do sleep 0.05; done
echo started
{notify}
{end}
"#
    )
}

#[test]
fn isolation_is_available_here() {
    // The CI machine and this one run the suite as root.
    if let Err(e) = sandbox::isolation_available() {
        panic!("{e}");
    }
}

#[test]
fn exit_code_and_signal_are_reported() {
    let s = Scratch::new();
    let out = run(&sh(&s, "exit 3"));
    assert_eq!(
        (out.exit_code, out.signal, out.timed_out),
        (Some(3), None, false)
    );
    assert!(!out.success());

    let out = run(&sh(&s, "kill -TERM $$"));
    // SIGTERM is 15.
    assert_eq!((out.exit_code, out.signal), (None, Some(15)));

    let out = run(&sh(&s, "true"));
    assert!(out.success(), "{out:?}");
    assert_eq!(out.network, "isolated");
    assert!(out.notes.is_empty(), "{:?}", out.notes);
}

#[test]
fn environment_is_clean() {
    let s = Scratch::new();
    let mut spec = s.spec("env", &[]);
    spec.env.insert("EXTRA".into(), "yes".into());
    let out = run(&spec);
    assert!(out.success(), "{out:?}");
    let vars: BTreeMap<String, String> = s
        .text()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let keys: BTreeSet<&str> = vars.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from([
            "EXTRA",
            "HOME",
            "LANG",
            "LC_ALL",
            "PATH",
            "PYTHONHASHSEED",
            "TZ"
        ]),
        "{vars:?}"
    );
    assert_eq!(vars["TZ"], "UTC");
    assert_eq!(vars["PYTHONHASHSEED"], "0");
    assert_eq!(vars["LANG"], "C.UTF-8");
    assert_eq!(vars["LC_ALL"], "C.UTF-8");
    assert_eq!(vars["PATH"], sandbox::DEFAULT_PATH);
    assert_eq!(vars["EXTRA"], "yes");
    // HOME was a fresh directory, and is gone.
    let home = PathBuf::from(&vars["HOME"]);
    assert!(home.is_absolute());
    assert!(!home.exists(), "{} is left", home.display());

    // Writable while the command runs; each run gets its own.
    let out = run(&sh(
        &s,
        "test -z \"$(ls -A \"$HOME\")\" && touch \"$HOME/x\" && echo home-ok \"$HOME\"",
    ));
    assert!(out.success(), "{out:?}: {}", s.text());
    let text = s.text();
    let second = text.trim().strip_prefix("home-ok ").unwrap();
    assert_ne!(second, vars["HOME"]);
    assert!(!Path::new(second).exists());

    // The caller's PATH replaces the default one, for the command and for finding it.
    let bin = s.dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let tool = bin.join("sandbox-test-tool");
    std::fs::write(&tool, "#!/bin/sh\necho \"tool: $PATH\"\n").unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let mut spec = s.spec("sandbox-test-tool", &[]);
    spec.env.insert("PATH".into(), path.clone());
    let out = run(&spec);
    assert!(out.success(), "{out:?}: {}", s.text());
    assert_eq!(s.text(), format!("tool: {path}\n"));
}

#[test]
fn timeout_kills_the_whole_tree() {
    let s = Scratch::new();
    let m = marker();
    let mut spec = bash(&s, &sleepers_script(&m, false));
    spec.timeout = Some(Duration::from_secs(3));
    let out = run(&spec);
    assert!(s.text().contains("started"), "{out:?}: {}", s.text());
    assert!(out.timed_out, "{out:?}");
    assert_eq!((out.exit_code, out.signal), (None, Some(9)));
    assert!(!out.success());
    let left = processes_with(&m);
    assert!(left.is_empty(), "left behind: {left:#?}");
}

#[test]
fn nothing_outlives_the_command() {
    let s = Scratch::new();
    let m = marker();
    let out = run(&bash(&s, &sleepers_script(&m, true)));
    assert!(out.success(), "{out:?}: {}", s.text());
    assert!(!out.timed_out);
    let left = processes_with(&m);
    assert!(left.is_empty(), "left behind: {left:#?}");
}

#[test]
fn own_pid_namespace_and_process_group() {
    let s = Scratch::new();
    // The command is process 2 (the sandbox's init is 1), leads its own process group, and
    // /proc shows the namespace's processes only.
    let out = run(&sh(
        &s,
        "echo pid=$$; echo pgid=$(cut -d' ' -f5 /proc/self/stat); ls /proc | grep -c '^[0-9]'",
    ));
    assert!(out.success(), "{out:?}: {}", s.text());
    let text = s.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "pid=2");
    // `cut` is the shell's child in the shell's group, whose id is the shell's pid.
    assert_eq!(lines[1], "pgid=2");
    let count: u32 = lines[2].parse().unwrap();
    assert!(count < 10, "{count} processes in the namespace");
}

#[test]
fn loopback_works_inside() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let s = Scratch::new();
    let code = r#"
import socket
for family, host in ((socket.AF_INET, '127.0.0.1'), (socket.AF_INET6, '::1')):
    server = socket.socket(family)
    server.bind((host, 0))
    server.listen(1)
    client = socket.create_connection(server.getsockname()[:2], timeout=5)
    conn, _ = server.accept()
    client.sendall(b'ping')
    print(host, conn.recv(4).decode())
print('localhost', socket.getaddrinfo('localhost', 80, socket.AF_INET)[0][4][0])
"#;
    let out = python_ok(&s, &python, code);
    assert_eq!(
        s.text(),
        "127.0.0.1 ping\n::1 ping\nlocalhost 127.0.0.1\n",
        "{out:?}"
    );
}

#[test]
fn outside_addresses_time_out() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let s = Scratch::new();
    // As on a firewalled network: the SYN goes nowhere and the client's own timeout ends the
    // attempt, rather than "[Errno 101] Network is unreachable" at once.
    let code = r#"
import socket
for host in ('10.255.255.1', '1.1.1.1'):
    try:
        socket.create_connection((host, 80), timeout=2)
        print(host, 'connected')
    except socket.timeout as e:
        print(host, 'timeout', type(e).__name__)
    except OSError as e:
        print(host, 'error', e.errno, e)
"#;
    python_ok(&s, &python, code);
    assert_eq!(
        s.text(),
        "10.255.255.1 timeout TimeoutError\n1.1.1.1 timeout TimeoutError\n"
    );
}

#[test]
fn name_lookups_fail() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let s = Scratch::new();
    let code = r#"
import socket
for name in ('example.com', 'pypi.org'):
    try:
        socket.getaddrinfo(name, 443)
        print(name, 'resolved')
    except socket.gaierror as e:
        print(name, 'gaierror')
"#;
    python_ok(&s, &python, code);
    assert_eq!(s.text(), "example.com gaierror\npypi.org gaierror\n");
}

#[test]
fn allowed_network_is_the_hosts() {
    let s = Scratch::new();
    let host = std::fs::read_link("/proc/self/ns/net").unwrap();
    let host = host.to_string_lossy().into_owned();

    let out = run(&s.spec("readlink", &["/proc/self/ns/net"]));
    assert_eq!(out.network, "isolated");
    assert_ne!(s.text().trim(), host);

    let mut spec = s.spec("readlink", &["/proc/self/ns/net"]);
    spec.network = Network::Allowed;
    let out = run(&spec);
    assert!(out.success(), "{out:?}");
    assert_eq!(out.network, "allowed");
    assert_eq!(s.text().trim(), host);
    // Still its own PID namespace.
    run(&{
        let mut spec = sh(&s, "echo $$");
        spec.network = Network::Allowed;
        spec
    });
    assert_eq!(s.text(), "2\n");
}

/// A server on port 80 (privileged outside the run's network namespace), reached by a name
/// that only the run's own /etc/hosts knows; `localhost` still resolves.
const STAND_IN: &str = r#"
import http.server, socket, threading, urllib.request
class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'hello from ' + self.headers['Host'].encode())
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(('127.0.0.1', 80), Hello)
threading.Thread(target=server.serve_forever, daemon=True).start()
print('stand-in.example', socket.gethostbyname('stand-in.example'))
print('localhost', socket.gethostbyname('localhost'))
print(urllib.request.urlopen('http://stand-in.example/', timeout=30).read().decode())
print(open('bundle.pem').read(), end='')
"#;

/// The run's own host names: a private /etc/hosts, while the caller's stays as it was.
fn check_stand_in(python: &Path) {
    let before = std::fs::read("/etc/hosts").unwrap();
    let s = Scratch::new();
    // A file of the working directory seen with other content, in the run only.
    let bundle = s.dir.path().join("bundle.pem");
    let replacement = s.dir.path().join("replacement.pem");
    std::fs::write(&bundle, "outside\n").unwrap();
    std::fs::write(&replacement, "inside\n").unwrap();
    let mut spec = py(&s, python, STAND_IN);
    spec.hosts
        .insert("stand-in.example".into(), "127.0.0.1".parse().unwrap());
    spec.binds.push((replacement, bundle.clone()));
    let out = run(&spec);
    assert!(out.success(), "{out:?}: {}", s.text());
    assert!(out.notes.is_empty(), "{:?}", out.notes);
    assert_eq!(
        s.text(),
        "stand-in.example 127.0.0.1\nlocalhost 127.0.0.1\nhello from stand-in.example\ninside\n"
    );
    assert_eq!(std::fs::read_to_string(&bundle).unwrap(), "outside\n");
    assert_eq!(std::fs::read("/etc/hosts").unwrap(), before);
    assert!(
        !String::from_utf8_lossy(&before).contains("stand-in.example"),
        "the caller's /etc/hosts names the stand-in"
    );
    // Without hosts of its own, a run sees the caller's file.
    let out = run(&sh(&s, "cat /etc/hosts"));
    assert!(out.success(), "{out:?}");
    assert_eq!(s.text().as_bytes(), before.as_slice());
}

#[test]
fn own_host_names_and_port_80() {
    let Some(python) = python_or_skip() else {
        return;
    };
    check_stand_in(&python);
}

#[test]
fn stdout_and_stderr_interleave_in_one_file() {
    let s = Scratch::new();
    let out = run(&sh(
        &s,
        "echo out1; echo err1 >&2; echo out2; echo err2 >&2; printf end",
    ));
    assert!(out.success());
    assert_eq!(s.text(), "out1\nerr1\nout2\nerr2\nend");
    assert_eq!(out.output_bytes, 23);
    assert!(!out.truncated);
}

#[test]
fn output_is_capped() {
    let s = Scratch::new();
    // 3 MB through the pipe with 10,000 bytes kept: the command is never blocked by the cap.
    let mut spec = sh(&s, "head -c 3000000 /dev/zero | tr '\\0' a; echo done >&2");
    spec.output_cap = 10_000;
    let out = run(&spec);
    assert!(out.success(), "{out:?}");
    assert!(out.truncated);
    assert_eq!(out.output_bytes, 3_000_005);
    let expected = format!(
        "{}\n[swe-ark: output truncated after 10000 bytes]\n",
        "a".repeat(10_000)
    );
    assert!(s.text() == expected, "{} bytes kept", s.text().len());

    // Exactly at the cap: nothing dropped, no note.
    let mut spec = sh(&s, "printf 12345");
    spec.output_cap = 5;
    let out = run(&spec);
    assert!(!out.truncated);
    assert_eq!(s.text(), "12345");
}

#[test]
fn memory_limit_holds() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let s = Scratch::new();
    let mut spec = py(
        &s,
        &python,
        "x = bytearray(2 * 1024**3)\nprint('allocated')",
    );
    spec.memory_limit = Some(512 << 20);
    let out = run(&spec);
    assert_ne!(out.exit_code, Some(0), "{out:?}: {}", s.text());
    assert!(s.text().contains("MemoryError"), "{}", s.text());
    assert!(!s.text().contains("allocated"));
}

const FORK_50: &str = r#"
import os, time
pids = []
try:
    for _ in range(50):
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        pids.append(pid)
except OSError as e:
    print('fork failed', e.errno)
print('forked', len(pids))
"#;

fn forked(text: &str) -> usize {
    text.lines()
        .find_map(|l| l.strip_prefix("forked "))
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX)
}

#[test]
fn process_limit_holds() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let s = Scratch::new();
    let mut spec = py(&s, &python, FORK_50);
    spec.max_processes = Some(10);
    let out = run(&spec);
    assert!(out.success(), "{out:?}: {}", s.text());
    // As root that takes a pids cgroup; where there is none the run says so.
    if out
        .notes
        .iter()
        .any(|n| n.contains("max_processes is not enforced"))
    {
        eprintln!("skipped: {:?}", out.notes);
        return;
    }
    assert!(s.text().contains("fork failed"), "{}", s.text());
    // Python itself is one of the 10.
    assert_eq!(forked(&s.text()), 9, "{}", s.text());
    // The sleepers it forked died with the run.
}

#[test]
fn errors_name_the_problem() {
    let s = Scratch::new();
    let err = sandbox::run(&s.spec("/nonexistent/program", &[])).unwrap_err();
    assert!(matches!(err, SandboxError::Start { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("cannot start `/nonexistent/program`: No such file or directory"),
        "{err}"
    );

    let err = sandbox::run(&s.spec("no-such-program-anywhere", &[])).unwrap_err();
    assert!(matches!(err, SandboxError::Start { .. }), "{err:?}");

    let mut spec = s.spec("true", &[]);
    spec.cwd = s.dir.path().join("missing");
    let err = sandbox::run(&spec).unwrap_err();
    assert!(matches!(err, SandboxError::Cwd { .. }), "{err:?}");

    let mut spec = s.spec("true", &[]);
    spec.env.insert("A=B".into(), "x".into());
    let err = sandbox::run(&spec).unwrap_err();
    assert!(matches!(err, SandboxError::InvalidSpec(_)), "{err:?}");

    let mut spec = s.spec("true", &[]);
    spec.hosts
        .insert("bad name.example".into(), "127.0.0.1".parse().unwrap());
    let err = sandbox::run(&spec).unwrap_err();
    assert!(
        err.to_string()
            .contains("`bad name.example` is not a valid host name"),
        "{err}"
    );

    let mut spec = s.spec("true", &[]);
    spec.binds.push((
        s.dir.path().join("nothing"),
        s.dir.path().join("output.log"),
    ));
    let err = sandbox::run(&spec).unwrap_err();
    assert!(err.to_string().contains("is not an existing file"), "{err}");

    let mut spec = s.spec("true", &[]);
    spec.output = s.dir.path().join("missing/output.log");
    let err = sandbox::run(&spec).unwrap_err();
    assert!(matches!(err, SandboxError::Output { .. }), "{err:?}");
}

/// swe-ark killed (SIGKILL) in the middle of a run: the sandbox notices (the cancel pipe ends)
/// and kills the tree. The sleepers hold a FIFO open, so its end of file is the proof that
/// every one of them is gone; no clock is involved.
#[test]
fn killing_swe_ark_kills_the_tree() {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;

    let s = Scratch::new();
    let fifo = s.dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    // Non-blocking, so that opening does not wait for a writer; reads wait in poll.
    let mut reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let m = marker();
    let mut helper = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "helper_killed",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SWE_ARK_SANDBOX_HELPER", "helper_killed")
        .env("SWE_ARK_SANDBOX_FIFO", &fifo)
        .env("SWE_ARK_SANDBOX_MARKER", &m)
        // What the killed helper cannot clean up (its scratch directory, the sandbox's
        // temporary directory) goes into ours.
        .env("TMPDIR", s.dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();

    // Blocks until the sandboxed script says its sleepers run, then until every writer is gone.
    let mut read_fifo = |until_eof: bool| -> Vec<u8> {
        let mut got = Vec::new();
        loop {
            let mut pfd = libc::pollfd {
                fd: std::os::fd::AsRawFd::as_raw_fd(&reader),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: poll on one element, no timeout.
            unsafe { libc::poll(&mut pfd, 1, -1) };
            let mut buf = [0u8; 256];
            match reader.read(&mut buf) {
                Ok(0) => return got,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
            if !until_eof && got.ends_with(b"started\n") {
                return got;
            }
        }
    };
    assert_eq!(read_fifo(false), b"started\n");
    assert!(!processes_with(&m).is_empty());
    helper.kill().unwrap();
    helper.wait().unwrap();
    assert_eq!(read_fifo(true), b"");
    let left = processes_with(&m);
    assert!(left.is_empty(), "left behind: {left:#?}");
}

#[test]
#[ignore = "run by killing_swe_ark_kills_the_tree"]
fn helper_killed() {
    if !helper_wanted("helper_killed") {
        return;
    }
    let fifo = std::env::var("SWE_ARK_SANDBOX_FIFO").unwrap();
    let m = std::env::var("SWE_ARK_SANDBOX_MARKER").unwrap();
    let s = Scratch::new();
    let script = format!(
        "exec 3>'{fifo}'\n{}",
        sleepers_script_with(&m, false, "echo started >&3")
    );
    // Runs until the test kills this process.
    run(&bash(&s, &script));
    unreachable!("the sandboxed script never ends by itself");
}

// ---- the narrower worlds -------------------------------------------------------------------

/// Runs `helper` of this test binary through `wrapper` (a command line ending just before the
/// binary), and checks it ran and passed.
fn run_helper(wrapper: &[&str], helper: &str) {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(wrapper[0])
        .args(&wrapper[1..])
        .arg(&exe)
        .args([
            "--exact",
            helper,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SWE_ARK_SANDBOX_HELPER", helper)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{helper} failed:\n{text}");
    assert!(
        text.contains(&format!("{helper}: ok")),
        "{helper} did not run:\n{text}"
    );
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

fn helper_wanted(name: &str) -> bool {
    std::env::var("SWE_ARK_SANDBOX_HELPER").as_deref() == Ok(name)
}

/// Not root: the namespaces come from a user namespace.
#[test]
fn as_nobody_through_a_user_namespace() {
    if !is_root() || !Path::new("/usr/bin/setpriv").exists() {
        eprintln!("skipped: needs root and setpriv");
        return;
    }
    let as_nobody = [
        "/usr/bin/setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--",
    ];
    // The kernel must let unprivileged users have user namespaces (most do; some forbid it).
    let allowed = Command::new(as_nobody[0])
        .args(&as_nobody[1..])
        .args([
            "/usr/bin/unshare",
            "--user",
            "--map-current-user",
            "--net",
            "true",
        ])
        .status()
        .is_ok_and(|s| s.success());
    if !allowed {
        eprintln!("skipped: unprivileged user namespaces are not allowed here");
        return;
    }
    run_helper(&as_nobody, "helper_nobody");
}

#[test]
#[ignore = "run by as_nobody_through_a_user_namespace"]
fn helper_nobody() {
    if !helper_wanted("helper_nobody") {
        return;
    }
    assert!(!is_root());
    if let Err(e) = sandbox::isolation_available() {
        panic!("{e}");
    }
    let s = Scratch::new();

    let out = run(&sh(&s, "id -u; echo $$"));
    assert!(out.success(), "{out:?}: {}", s.text());
    assert_eq!(s.text(), "65534\n2\n");
    assert_eq!(out.network, "isolated");
    assert!(out.notes.is_empty(), "{:?}", out.notes);

    let m = marker();
    let mut spec = bash(&s, &sleepers_script(&m, false));
    spec.timeout = Some(Duration::from_secs(3));
    let out = run(&spec);
    assert!(out.timed_out && s.text().contains("started"), "{out:?}");
    assert!(processes_with(&m).is_empty(), "{:#?}", processes_with(&m));

    if let Some(python) = python() {
        let code = r#"
import socket
server = socket.socket()
server.bind(('127.0.0.1', 0))
server.listen(1)
socket.create_connection(server.getsockname(), timeout=5)
print('loopback ok')
try:
    socket.create_connection(('10.255.255.1', 80), timeout=1)
except socket.timeout:
    print('outside timeout')
"#;
        python_ok(&s, &python, code);
        assert_eq!(s.text(), "loopback ok\noutside timeout\n");

        // RLIMIT_NPROC, counted inside the user namespace only.
        let mut spec = py(&s, &python, FORK_50);
        spec.max_processes = Some(10);
        let out = run(&spec);
        assert!(out.success(), "{out:?}: {}", s.text());
        assert!(s.text().contains("fork failed"), "{}", s.text());
        assert!(forked(&s.text()) < 10, "{}", s.text());

        // Port 80 and the run's own host names, as a user that is not root.
        check_stand_in(&python);
    }
    println!("helper_nobody: ok");
}

/// No namespace at all (as in a container that forbids them): isolated runs are refused with
/// the reason; allowed runs go ahead, say so, and still leave no process behind.
#[test]
fn without_namespaces() {
    if !Path::new("/usr/bin/unshare").exists() {
        eprintln!("skipped: needs unshare");
        return;
    }
    // A user namespace of its own whose limits allow no further namespace of any kind.
    let forbid = "for f in user pid net mnt; do echo 0 > /proc/sys/user/max_${f}_namespaces \
                  || exit 1; done; exec \"$@\"";
    run_helper(
        &[
            "/usr/bin/unshare",
            "--user",
            "--map-root-user",
            "/bin/sh",
            "-c",
            forbid,
            "sh",
        ],
        "helper_without_namespaces",
    );
}

#[test]
#[ignore = "run by without_namespaces"]
fn helper_without_namespaces() {
    if !helper_wanted("helper_without_namespaces") {
        return;
    }
    let why = sandbox::isolation_available().unwrap_err().to_string();
    assert!(why.contains("No space left on device"), "{why}");

    let s = Scratch::new();
    let err = sandbox::run(&sh(&s, "true")).unwrap_err();
    assert!(matches!(err, SandboxError::NoIsolation { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.starts_with("network isolation is not possible here (")
            && msg.ends_with(
                "; pass --allow-network to run with the network, which the results will record"
            ),
        "{msg}"
    );

    let allowed = |spec: Spec| Spec {
        network: Network::Allowed,
        ..spec
    };
    let out = run(&allowed(sh(&s, "echo hello")));
    assert!(out.success(), "{out:?}");
    assert_eq!(s.text(), "hello\n");
    assert_eq!(out.network, "allowed");
    assert!(
        out.notes.iter().any(|n| n.starts_with("no PID namespace")),
        "{:?}",
        out.notes
    );

    // Killed through the subreapers: the timeout, and leftovers of a command that ended.
    let m = marker();
    let mut spec = allowed(bash(&s, &sleepers_script(&m, false)));
    spec.timeout = Some(Duration::from_secs(3));
    let out = run(&spec);
    assert!(out.timed_out && s.text().contains("started"), "{out:?}");
    assert!(processes_with(&m).is_empty(), "{:#?}", processes_with(&m));

    let m = marker();
    let out = run(&allowed(bash(&s, &sleepers_script(&m, true))));
    assert!(out.success(), "{out:?}: {}", s.text());
    assert!(processes_with(&m).is_empty(), "{:#?}", processes_with(&m));

    // RLIMIT_NPROC would not hold (it counts every process of the user, and not at all for
    // root): the limit comes from a pids cgroup, or the run says it was not enforced.
    if let Some(python) = python() {
        let mut spec = allowed(py(&s, &python, FORK_50));
        spec.max_processes = Some(10);
        let out = run(&spec);
        assert!(out.success(), "{out:?}: {}", s.text());
        let unenforced = out
            .notes
            .iter()
            .any(|n| n.starts_with("max_processes is not enforced"));
        assert!(
            unenforced || forked(&s.text()) == 9,
            "{out:?}: {}",
            s.text()
        );
    }
    println!("helper_without_namespaces: ok");
}

#[test]
fn swe_arks_environment_is_not_visible_inside() {
    // The sandbox's init (pid 1) is a copy of this process, whose environment block
    // /proc/1/environ would show: it is wiped.
    let ours = std::fs::read("/proc/self/environ").unwrap();
    assert!(ours.split(|b| *b == 0).any(|v| !v.is_empty()));
    let s = Scratch::new();
    let out = run(&sh(
        &s,
        "tr '\\0' '\\n' < /proc/1/environ | grep -c .; true",
    ));
    assert!(out.success(), "{out:?}");
    assert_eq!(s.text(), "0\n");
}

/// Each run may see a directory of its own as /tmp: what it writes there lands in that
/// directory, the host's /tmp and another run's /tmp see none of it, and a second run with the
/// same directory finds it (a container's /tmp lasts as long as the container).
#[test]
fn a_run_can_have_its_own_tmp() {
    let s = Scratch::new();
    let name = format!("swe-ark-private-tmp-{}", marker());
    let (one, two) = (s.dir.path().join("tmp-one"), s.dir.path().join("tmp-two"));
    std::fs::create_dir(&one).unwrap();
    std::fs::create_dir(&two).unwrap();
    let with_tmp = |script: &str, tmp: &Path| {
        let mut spec = sh(&s, script);
        spec.tmp = Some(tmp.to_path_buf());
        spec
    };
    let out = run(&with_tmp(
        &format!("echo private > /tmp/{name} && ls /tmp"),
        &one,
    ));
    assert!(out.success(), "{out:?} {}", s.text());
    assert!(
        out.notes.iter().all(|n| !n.contains("/tmp")),
        "{:?}",
        out.notes
    );
    assert_eq!(s.text(), format!("{name}\n"));
    assert_eq!(
        std::fs::read_to_string(one.join(&name)).unwrap(),
        "private\n"
    );
    assert!(!Path::new("/tmp").join(&name).exists());
    run(&with_tmp(
        &format!("cat /tmp/{name} 2>/dev/null || echo absent"),
        &two,
    ));
    assert_eq!(s.text(), "absent\n");
    run(&with_tmp(&format!("cat /tmp/{name}"), &one));
    assert_eq!(s.text(), "private\n");
    // Its HOME is not in the host's /tmp, which it no longer sees (sqlfluff lists HOME's
    // parent): it is in its own, and gone after it.
    let out = run(&with_tmp(
        "test -d \"$HOME\" && ls \"$HOME/..\" >/dev/null && touch \"$HOME/x\" && echo \"$HOME\"",
        &one,
    ));
    assert!(out.success(), "{out:?} {}", s.text());
    assert!(s.text().starts_with("/tmp/.swe-ark-home-"), "{}", s.text());
    let left: Vec<_> = std::fs::read_dir(&one)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from(&name)]);

    // Not a directory: refused before anything runs.
    let e = sandbox::run(&with_tmp("true", &s.output())).unwrap_err();
    assert!(
        e.to_string().contains("is not an existing directory"),
        "{e}"
    );
}

/// The host's cgroup hierarchy is not the run's: /sys/fs/cgroup is empty and read-only inside
/// (a test that reads the CPUs it may use from a cgroup v1 `cpu.shares` would otherwise see
/// the host's, as pylint's `_cpu_count` does).
#[test]
fn the_hosts_cgroups_are_hidden() {
    let s = Scratch::new();
    let out = run(&sh(
        &s,
        "ls -A /sys/fs/cgroup | wc -l; touch /sys/fs/cgroup/x 2>/dev/null && echo writable || echo read-only",
    ));
    assert!(out.success(), "{out:?} {}", s.text());
    if out.notes.iter().any(|n| n.contains("cgroup hierarchy")) {
        eprintln!("note: {:?}", out.notes);
        return;
    }
    assert_eq!(s.text(), "0\nread-only\n");
}
