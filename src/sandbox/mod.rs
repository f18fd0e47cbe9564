//! The one place that runs test and install commands (docs/SANDBOX.md).
//!
//! [`run`] starts a command in its own process group, in new PID and mount namespaces and, unless
//! the network is [`Network::Allowed`], a network namespace where only loopback answers and
//! packets to anything else are dropped; with a clean environment, a fresh `HOME`, limits on
//! memory and processes, a timeout that kills the whole tree, and stdout and stderr captured
//! together into one file with a size cap. As root the namespaces are made directly; otherwise
//! inside a new user namespace. When network isolation is impossible, [`run`] refuses unless
//! the caller allows the network; [`Outcome::network`] records which it was. A run may be
//! given host names of its own ([`Spec::hosts`]): a private `/etc/hosts`, the caller's intact.
//!
//! - `check`: what a [`Spec`] must be, and the clean environment the command gets;
//! - `plan`: what is prepared before the fork (the run's files, its namespace attempts, its
//!   root, the helpers' plan);
//! - `child`: what runs between `fork` and `exec` (async-signal-safe system calls only);
//! - `report`: the helpers' records read back, and what they say of the run;
//! - `output`: the command's output, captured up to its cap;
//! - `cgroup`: the run's pids cgroup, where one can be made.

mod cgroup;
mod check;
mod child;
mod confine;
mod idmap;
mod layer;
mod output;
mod plan;
mod report;
mod root;
mod tmpfs;
mod tree_overlay;

pub use confine::{Confine, DEFAULT_TMPFS_SIZE, SANDBOX_ID};
pub use layer::{Layer, NoLayers, give_to_layer_owner, layer_owner, layers_available};
pub use root::RUN_HOME;
pub use tmpfs::InstanceTmp;
pub use tree_overlay::TreeOverlay;

use std::collections::BTreeMap;
use std::ffi::{CString, OsString};
use std::fs::{self, File};
use std::io::{self, PipeWriter};
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use check::{check, environment};
use output::capture;
use plan::{
    RunFiles, attempts, child_plan, id_map, pids_cgroup, root_plan, run_files, sandbox_ids,
};
use report::{Report, diagnose, exit_of, os_error, run_notes, started_mode, step_text};

/// PATH when the caller's [`Spec::env`] sets none.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// [`Spec::output_cap`] of [`Spec::new`]: 64 MiB.
pub const DEFAULT_OUTPUT_CAP: u64 = 64 << 20;

/// What a run may reach over the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// A network namespace of its own: loopback works, everything else is silently dropped.
    #[default]
    Isolated,
    /// The host's network (`--allow-network`).
    Allowed,
}

impl Network {
    /// `"isolated"` or `"allowed"`, as [`Outcome::network`] records it.
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Isolated => "isolated",
            Network::Allowed => "allowed",
        }
    }
}

/// A host directory a run sees at a path of its own (an instance's work tree at `/testbed`):
/// bound there in the run's root, confined or not; nothing is made on the host to show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The directory on the host.
    pub host: PathBuf,
    /// Where the run sees it: absolute, not `/`, not under `/proc`, `/dev`, `/sys` or `/tmp`.
    pub at: PathBuf,
    pub writable: bool,
    /// A private writable layer over `host` (confined runs only): the run sees `host`
    /// through an overlay whose changes go to `layer/upper` (`layer/work` is the overlay's
    /// own), and `host` itself is never written. Made by [`Layer::prepare`]; several runs
    /// given one layer in turn see what the earlier ones changed (an instance's install,
    /// then its tests).
    pub layer: Option<PathBuf>,
    /// Its files are the runs' uid's on disk already ([`layer_owner`]: a work tree under a
    /// [`TreeOverlay`], which cannot be idmapped): bound as it is, as root neither idmapped
    /// nor given to the runs' uid and back.
    pub runs_own: bool,
}

impl Mount {
    pub fn new(host: impl Into<PathBuf>, at: impl Into<PathBuf>, writable: bool) -> Mount {
        Mount {
            host: host.into(),
            at: at.into(),
            writable,
            layer: None,
            runs_own: false,
        }
    }

    /// `host`, read-only, under the private writable layer `layer` ([`Mount::layer`]).
    pub fn layered(
        host: impl Into<PathBuf>,
        at: impl Into<PathBuf>,
        layer: impl Into<PathBuf>,
    ) -> Mount {
        Mount {
            host: host.into(),
            at: at.into(),
            writable: true,
            layer: Some(layer.into()),
            runs_own: false,
        }
    }
}

/// A command to run.
#[derive(Debug, Clone)]
pub struct Spec {
    /// A path, or a name looked up in the sandbox's PATH.
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// The working directory; it must exist. For a run with a root of its own (confined, or
    /// given [`Spec::mounts`]) it is a path inside that root, such as a mount's.
    pub cwd: PathBuf,
    /// Set on top of the clean base environment (`PATH`, `HOME`, `TZ=UTC`, `PYTHONHASHSEED=0`,
    /// `LANG` and `LC_ALL` = `C.UTF-8`), replacing base variables of the same name. Nothing of
    /// swe-ark's own environment is passed, PATH included: without one here, the command gets
    /// [`DEFAULT_PATH`].
    pub env: BTreeMap<String, String>,
    /// Past it, the whole process tree is killed ([`Outcome::timed_out`]).
    pub timeout: Option<Duration>,
    pub network: Network,
    /// The command's address space, in bytes (RLIMIT_AS, per process).
    pub memory_limit: Option<u64>,
    /// Tasks (processes and threads) of the command at once: a pids cgroup where one can be
    /// made, else RLIMIT_NPROC inside a user namespace; neither, and it is not enforced (noted).
    pub max_processes: Option<u64>,
    /// stdout and stderr, interleaved as written (one pipe for both); created or truncated.
    pub output: PathBuf,
    /// Bytes of output kept; the rest is read and dropped, and a line says so.
    pub output_cap: u64,
    /// Names the run resolves to these addresses (e.g. a service on loopback standing in for
    /// a host of the internet): the run gets a private `/etc/hosts` (a bind mount in its own
    /// mount namespace) listing them before the host's own entries. The caller's file does not
    /// change. Each name must be a valid DNS name ([`is_host_name`]).
    pub hosts: BTreeMap<String, IpAddr>,
    /// Files the run sees in place of others, as (source, target): bind mounts in its own mount
    /// namespace, so the targets do not change outside (e.g. a CA bundle with a CA of the run's
    /// added). Both must exist.
    pub binds: Vec<(PathBuf, PathBuf)>,
    /// Files of the machine the run does not see as they are: each is shown as an empty file
    /// of mode 000 (a bind in its own mount namespace), neither executable nor, to a confined
    /// run of swe-ark as root, readable (its owner is not the run's), so that searches for a
    /// program pass it by (a program the run's image lacked, such as valgrind). Each must
    /// exist and not be a directory; a link is followed to the file it names.
    pub hidden: Vec<PathBuf>,
    /// A directory the run sees as its `/tmp` (a bind mount in its own mount namespace), so
    /// that runs side by side do not share, or clean up, each other's temporary files (pytest's
    /// `/tmp/pytest-of-USER`), as each SWE-bench container has its own `/tmp`. None: the
    /// host's `/tmp`. A confined run without one gets a tmpfs.
    pub tmp: Option<PathBuf>,
    /// Confinement ([`Confine`]): a root filesystem of the run's own, an unprivileged uid, no
    /// capabilities, a seccomp filter. None: the command sees the host's filesystem with the
    /// caller's rights (docs/SANDBOX.md says what each gives).
    pub confine: Option<Confine>,
    /// Directories the run sees at paths of their own ([`Mount`]). A run given any gets a root
    /// of its own even unconfined (the host's view, with these on top) and needs a mount
    /// namespace; its `HOME` is then [`RUN_HOME`].
    pub mounts: Vec<Mount>,
}

impl Spec {
    /// `program` with no arguments, an isolated network, no timeout or limits, and
    /// [`DEFAULT_OUTPUT_CAP`].
    pub fn new(
        program: impl Into<PathBuf>,
        cwd: impl Into<PathBuf>,
        output: impl Into<PathBuf>,
    ) -> Spec {
        Spec {
            program: program.into(),
            args: Vec::new(),
            cwd: cwd.into(),
            env: BTreeMap::new(),
            timeout: None,
            network: Network::Isolated,
            memory_limit: None,
            max_processes: None,
            output: output.into(),
            output_cap: DEFAULT_OUTPUT_CAP,
            hosts: BTreeMap::new(),
            binds: Vec::new(),
            hidden: Vec::new(),
            tmp: None,
            confine: None,
            mounts: Vec::new(),
        }
    }

    /// What the run sees in place of what: [`Spec::binds`], then `hiding` (the run's empty
    /// file of mode 000) in place of each of [`Spec::hidden`] (followed to the file it names).
    pub(crate) fn shown_binds(&self, hiding: &Path) -> Vec<(PathBuf, PathBuf)> {
        let hidden = self.hidden.iter().map(|path| {
            let file = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
            (hiding.to_path_buf(), file)
        });
        self.binds.iter().cloned().chain(hidden).collect()
    }

    /// Whether the run gets a root filesystem of its own: confined, or given mounts.
    pub fn has_own_root(&self) -> bool {
        self.confine.is_some() || !self.mounts.is_empty()
    }

    /// The host directory behind `path` as this run sees it: under a mount, the mount's
    /// host directory; otherwise `path` itself.
    pub fn host_path(&self, path: &Path) -> PathBuf {
        self.mounts
            .iter()
            .filter_map(|m| path.strip_prefix(&m.at).ok().map(|rest| (m, rest)))
            .max_by_key(|(m, _)| m.at.components().count())
            .map(|(m, rest)| {
                if rest.as_os_str().is_empty() {
                    m.host.clone()
                } else {
                    m.host.join(rest)
                }
            })
            .unwrap_or_else(|| path.to_path_buf())
    }
}

/// A host name as DNS has them (RFC 1123): dot-separated labels of ASCII letters, digits and
/// `-`, each 1-63 long and neither starting nor ending with `-`, 253 characters at most, one
/// trailing dot allowed; not an IPv4 address (the last label is not all digits).
pub fn is_host_name(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() || name.len() > 253 {
        return false;
    }
    let labels: Vec<&str> = name.split('.').collect();
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    labels.iter().all(label_ok)
        && labels
            .last()
            .is_some_and(|l| !l.bytes().all(|b| b.is_ascii_digit()))
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Outcome {
    /// The command's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed it (SIGKILL, 9, when it timed out).
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// Wall-clock seconds, start to end.
    pub seconds: f64,
    /// Bytes the command wrote to stdout and stderr, kept or not.
    pub output_bytes: u64,
    /// More than [`Spec::output_cap`] bytes came, and the rest was dropped.
    pub truncated: bool,
    /// `"isolated"` or `"allowed"`: what the run had, to be recorded with its results.
    pub network: &'static str,
    /// What the run could not have of what it asked for (each a sentence); empty when it had
    /// everything.
    pub notes: Vec<String>,
}

impl Outcome {
    /// Exit code 0, in time.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "confinement is not possible here ({reason}); pass --unconfined to run without it, \
         which the report records for every instance"
    )]
    NoConfinement { reason: String },
    #[error(
        "network isolation is not possible here ({reason}); pass --allow-network to run with \
         the network, which the results will record"
    )]
    NoIsolation { reason: String },
    #[error(
        "the fixed layout (the work tree at /testbed) needs a mount namespace, which is not \
         possible here ({reason})"
    )]
    NoMountNamespace { reason: String },
    #[error("cannot run this command in the sandbox: {0}")]
    InvalidSpec(String),
    #[error("the working directory `{}` cannot be used: {source}", .path.display())]
    Cwd { path: PathBuf, source: io::Error },
    #[error("cannot write the output file `{}`: {source}", .path.display())]
    Output { path: PathBuf, source: io::Error },
    #[error("cannot prepare the sandbox: {what}: {source}")]
    Prepare { what: String, source: io::Error },
    #[error("cannot start `{}`: {source}", .program.display())]
    Start { program: PathBuf, source: io::Error },
    #[error("the sandbox could not be set up: {step} failed: {source}")]
    Setup {
        step: &'static str,
        source: io::Error,
    },
    #[error("the sandbox lost track of `{}`: {detail}", .program.display())]
    Lost { program: PathBuf, detail: String },
}

/// Whether runs can have [`Network::Isolated`] here: `Err` says why not. Checked once per
/// process, by setting up (and throwing away) the namespaces a run would get.
pub fn isolation_available() -> Result<(), IsolationError> {
    namespaces_available(Network::Isolated)
}

/// Whether runs with `network` can have their own PID and mount namespaces here (what a run
/// given [`Spec::mounts`] needs, confined or not): `Err` says why not. Checked once per
/// process and network.
pub fn namespaces_available(network: Network) -> Result<(), IsolationError> {
    static PROBES: [OnceLock<Result<(), IsolationError>>; 2] = [OnceLock::new(), OnceLock::new()];
    let slot = match network {
        Network::Isolated => &PROBES[0],
        Network::Allowed => &PROBES[1],
    };
    slot.get_or_init(|| probe(network)).clone()
}

/// Whether confined runs ([`Spec::confine`]) with `network` can be made here: `Err` is
/// [`SandboxError::NoConfinement`] naming what failed. Checked once per process and network
/// by confining a real `/bin/sh -c :` (the same root, ids, seccomp filter and limits a run
/// gets), so that a caller refuses untrusted code up front rather than instance by instance.
pub fn confinement_available(network: Network) -> Result<(), SandboxError> {
    static PROBES: [OnceLock<Result<(), ConfinementFailure>>; 2] =
        [OnceLock::new(), OnceLock::new()];
    let slot = match network {
        Network::Isolated => &PROBES[0],
        Network::Allowed => &PROBES[1],
    };
    slot.get_or_init(|| probe_confinement(network))
        .clone()
        .map_err(|e| SandboxError::NoConfinement {
            reason: e.to_string(),
        })
}

/// Why the probe could not confine a command (cloneable: the answer is kept per process).
#[derive(Debug, Clone, thiserror::Error)]
enum ConfinementFailure {
    #[error("cannot make a directory for the probe: {0}")]
    ProbeDir(#[source] Arc<io::Error>),
    #[error("a confined `/bin/sh -c :` ended with exit code {code:?}, signal {signal:?}: {output}")]
    Ended {
        code: Option<i32>,
        signal: Option<i32>,
        output: String,
    },
    /// What the sandbox said when it refused.
    #[error("{0}")]
    Refused(String),
}

fn probe_confinement(network: Network) -> Result<(), ConfinementFailure> {
    let dir = tempfile::Builder::new()
        .prefix("swe-ark-confine-probe-")
        .tempdir()
        .map_err(|e| ConfinementFailure::ProbeDir(Arc::new(e)))?;
    let output = dir.path().join("output.log");
    let mut spec = Spec::new("/bin/sh", dir.path(), &output);
    spec.args = vec![OsString::from("-c"), OsString::from(":")];
    spec.network = network;
    spec.timeout = Some(Duration::from_secs(60));
    let mut confine = Confine::new();
    confine.writable.push(dir.path().to_path_buf());
    spec.confine = Some(confine);
    match run(&spec) {
        Ok(o) if o.success() => Ok(()),
        Ok(o) => Err(ConfinementFailure::Ended {
            code: o.exit_code,
            signal: o.signal,
            output: String::from_utf8_lossy(&fs::read(&output).unwrap_or_default())
                .trim()
                .to_string(),
        }),
        Err(SandboxError::NoConfinement { reason }) => Err(ConfinementFailure::Refused(reason)),
        Err(e) => Err(ConfinementFailure::Refused(e.to_string())),
    }
}

/// Why runs cannot have their own namespaces here (cloneable: the probe's answer is kept).
#[derive(Debug, Clone, thiserror::Error)]
pub enum IsolationError {
    #[error("cannot create a pipe: {0}")]
    Pipe(#[source] Arc<io::Error>),
    #[error("cannot fork: {0}")]
    Fork(#[source] Arc<io::Error>),
    #[error("{step} failed: {error}")]
    Step { step: String, error: String },
    /// What the attempts to unshare found, as [`diagnose`] tells it.
    #[error("{0}")]
    Namespaces(String),
}

/// Runs `spec` to its end (or its timeout) and says how it went.
pub fn run(spec: &Spec) -> Result<Outcome, SandboxError> {
    check(spec)?;
    let rundir = tempfile::Builder::new()
        .prefix("swe-ark-sandbox-")
        .tempdir()
        .map_err(|e| prepare("creating a temporary directory", e))?;
    // Its HOME: with a root of its own, a tmpfs at RUN_HOME there. Otherwise in the run's
    // directory; but an unconfined run with a /tmp of its own no longer sees the host's /tmp:
    // its HOME is a hidden directory of its own /tmp, named by the path it has there (removed
    // with the guard).
    let (home, _own_tmp_home) = match (spec.has_own_root(), &spec.tmp) {
        (true, _) => (PathBuf::from(RUN_HOME), None),
        (false, Some(tmp)) => {
            let dir = tempfile::Builder::new()
                .prefix(".swe-ark-home-")
                .tempdir_in(tmp)
                .map_err(|e| prepare("creating the temporary HOME", e))?;
            let name = dir.path().file_name().unwrap_or_default().to_owned();
            (Path::new("/tmp").join(name), Some(dir))
        }
        _ => {
            let home = rundir.path().join("home");
            fs::create_dir(&home).map_err(|e| prepare("creating the temporary HOME", e))?;
            (home, None)
        }
    };
    let files = run_files(spec, rundir.path())?;
    let mut root = root_plan(spec, &files, rundir.path())?;
    let root_ops: Vec<String> = root
        .as_ref()
        .map(|r| r.ops.iter().map(root::RootOp::describe).collect())
        .unwrap_or_default();
    // As root, what root owns in the writable trees is the sandbox uid's for the run: shown
    // so by idmapped mounts, or, where a filesystem has none, given to it and taken back.
    let handed_over = match (&spec.confine, root.as_mut()) {
        (Some(c), Some(plan)) if sandbox_ids() => {
            let mut dirs = c.writable.clone();
            dirs.extend(
                spec.mounts
                    .iter()
                    .filter(|m| m.writable && m.layer.is_none() && !m.runs_own)
                    .map(|m| m.host.clone()),
            );
            dirs.extend(spec.tmp.clone());
            let walked = if c.idmap {
                idmap::idmap_writable(plan, &dirs)?
            } else {
                dirs
            };
            confine::hand_over(&walked, 0, confine::SANDBOX_ID)?;
            walked
        }
        _ => Vec::new(),
    };
    let result = run_prepared(spec, rundir, &home, files, root, &root_ops);
    let returned = confine::hand_over(&handed_over, confine::SANDBOX_ID, 0);
    let outcome = result?;
    returned?;
    Ok(outcome)
}

/// [`run`] once the run's directory, mounts and root are prepared.
fn run_prepared(
    spec: &Spec,
    rundir: tempfile::TempDir,
    home: &Path,
    files: RunFiles,
    root: Option<root::RootPlan>,
    root_ops: &[String],
) -> Result<Outcome, SandboxError> {
    let env = environment(spec, home);
    let output = File::create(&spec.output).map_err(|source| SandboxError::Output {
        path: spec.output.clone(),
        source,
    })?;
    let (out_r, out_w) = io::pipe().map_err(|e| prepare("creating the output pipe", e))?;
    let out_w2 = out_w
        .try_clone()
        .map_err(|e| prepare("creating the output pipe", e))?;
    let (report_r, report_w) = io::pipe().map_err(|e| prepare("creating a pipe", e))?;
    let (cancel_r, cancel_w) = io::pipe().map_err(|e| prepare("creating a pipe", e))?;

    let (cgroup, cgroup_problem) = pids_cgroup(spec);
    let attempts = attempts(spec.network, spec.confine.is_some(), spec.has_own_root());
    let shown = files.shown.clone();
    let plan = child_plan(
        spec,
        attempts.clone(),
        files,
        root,
        cgroup.as_ref(),
        report_w.as_raw_fd(),
        cancel_r.as_raw_fd(),
    )?;

    let mut cmd = command(spec, &env, (out_w, out_w2), plan);
    tracing::debug!(
        "sandbox: {:?} {:?} in {}",
        spec.program,
        spec.args,
        spec.cwd.display()
    );
    let start = Instant::now();
    let spawned = cmd.spawn();
    // Our copies of the pipes' child ends: the output pipe must reach end of file when the
    // command's tree is gone, the report pipe when the helpers are.
    drop(cmd);
    drop(report_w);
    drop(cancel_r);
    let mut child = match spawned {
        Ok(child) => child,
        Err(source) => {
            // Spawn waited for A: every record is in the pipe.
            let report = Report::read(report_r);
            if let Some(c) = cgroup {
                c.remove();
            }
            return Err(report.error(spec, &attempts, root_ops).unwrap_or_else(|| {
                SandboxError::Start {
                    program: spec.program.clone(),
                    source,
                }
            }));
        }
    };

    let captured = capture(out_r, output, spec.output_cap, &mut child);
    let status = child.wait();
    let seconds = start.elapsed().as_secs_f64();
    drop(cancel_w);
    let report = Report::read(report_r);
    if let Some(c) = cgroup {
        c.remove();
    }
    if let Err(e) = rundir.close() {
        tracing::warn!("cannot remove the sandbox's temporary directory: {e}");
    }

    let mode = started_mode(spec, &report, &attempts, root_ops, status)?;
    let (exit_code, signal, timed_out) = exit_of(spec, &report)?;
    let captured = captured.map_err(|source| SandboxError::Output {
        path: spec.output.clone(),
        source,
    })?;

    let notes = run_notes(
        spec,
        &shown,
        &report,
        mode,
        &attempts,
        &captured,
        cgroup_problem,
    );
    Ok(Outcome {
        exit_code,
        signal,
        timed_out,
        seconds,
        output_bytes: captured.total,
        truncated: captured.truncated,
        network: spec.network.as_str(),
        notes,
    })
}

/// The command as `Command::spawn` starts it: in a process group of its own, with stdout and
/// stderr on the output pipe, and A ([`child::stage_a`]) run in the child before `exec`.
fn command(
    spec: &Spec,
    env: &BTreeMap<OsString, OsString>,
    (out_w, out_w2): (PipeWriter, PipeWriter),
    plan: child::Plan,
) -> Command {
    // With a root of its own, the command enters its working directory there (C).
    let start_dir = if spec.has_own_root() {
        Path::new("/")
    } else {
        spec.cwd.as_path()
    };
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .current_dir(start_dir)
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out_w))
        .stderr(Stdio::from(out_w2))
        .process_group(0);
    // SAFETY: stage_a makes only async-signal-safe calls on memory prepared before the fork
    // (see child/mod.rs), as pre_exec requires.
    unsafe {
        cmd.pre_exec(move || child::stage_a(&plan));
    }
    cmd
}

/// Sets up (and throws away) the namespaces a run with `network` and a root of its own gets.
fn probe(network: Network) -> Result<(), IsolationError> {
    let pipes = io::pipe().and_then(|report| io::pipe().map(|cancel| (report, cancel)));
    let ((report_r, report_w), (cancel_r, _cancel_w)) =
        pipes.map_err(|e| IsolationError::Pipe(Arc::new(e)))?;
    let attempts = attempts(network, false, true);
    let plan = child::Plan {
        attempts: attempts.clone(),
        uid_map: id_map(euid()),
        gid_map: id_map(egid()),
        resolv_conf: None,
        hosts_file: None,
        binds: Vec::new(),
        tmp: None,
        cgroup_procs: None,
        memory_limit: None,
        nproc_limit: None,
        timeout_ms: None,
        report_fd: report_w.as_raw_fd(),
        cancel_fd: cancel_r.as_raw_fd(),
        probe: true,
        environ_area: None,
        root: None,
        parent_maps: None,
    };
    // SAFETY: the child runs stage_a, which makes only async-signal-safe calls and, with
    // `probe` set, always ends with _exit; the _exit after it is a safety net.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let _ = child::stage_a(&plan);
        // SAFETY: ends the forked child without running anything of the parent's.
        unsafe { libc::_exit(125) };
    }
    drop(report_w);
    if pid < 0 {
        return Err(IsolationError::Fork(Arc::new(io::Error::last_os_error())));
    }
    loop {
        let mut status = 0;
        // SAFETY: waitpid on our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid || (r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted) {
            break;
        }
    }
    let report = Report::read(report_r);
    if report.mode.is_some() {
        return Ok(());
    }
    if let Some((step, errno)) = report.fails.first() {
        return Err(IsolationError::Step {
            step: step_text(*step).to_string(),
            error: os_error(*errno).to_string(),
        });
    }
    Err(IsolationError::Namespaces(diagnose(
        &attempts,
        &report.attempt_failures,
    )))
}

fn prepare(what: &str, source: io::Error) -> SandboxError {
    SandboxError::Prepare {
        what: what.to_string(),
        source,
    }
}

fn c_path(path: &Path) -> Result<CString, SandboxError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        SandboxError::InvalidSpec(format!("the path {} contains a NUL byte", path.display()))
    })
}

fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

fn egid() -> u32 {
    // SAFETY: getegid cannot fail.
    unsafe { libc::getegid() }
}
