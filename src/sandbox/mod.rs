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
//! - `child`: what runs between `fork` and `exec` (async-signal-safe system calls only);
//! - `cgroup`: the run's pids cgroup, where one can be made.

mod cgroup;
mod child;
mod confine;
mod idmap;
mod root;
mod tmpfs;

pub use confine::{Confine, DEFAULT_TMPFS_SIZE, SANDBOX_ID};
pub use root::RUN_HOME;
pub use tmpfs::InstanceTmp;

use std::collections::BTreeMap;
use std::ffi::{CString, OsString};
use std::fs::{self, File};
use std::io::{self, BufWriter, PipeReader, Read, Write};
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use child::{
    MODE_NONE, MODE_USER_NAMESPACES, NOTE_BIND, NOTE_CGROUP, NOTE_CHILDREN_UNLISTED, NOTE_DEVPTS,
    NOTE_HOSTS, NOTE_LOW_PORTS, NOTE_PRIVATE_MOUNTS, NOTE_PROC, NOTE_RESOLV, NOTE_TMP,
    REC_ATTEMPT_FAILED, REC_FAIL, REC_INIT_STATUS, REC_MODE, REC_NO_NAMESPACES, REC_NOTE,
    REC_ROOT_OP, REC_STATUS, REC_TIMEOUT,
};

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
}

impl Mount {
    pub fn new(host: impl Into<PathBuf>, at: impl Into<PathBuf>, writable: bool) -> Mount {
        Mount {
            host: host.into(),
            at: at.into(),
            writable,
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
            tmp: None,
            confine: None,
            mounts: Vec::new(),
        }
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
    static PROBE: OnceLock<Result<(), IsolationError>> = OnceLock::new();
    PROBE.get_or_init(probe).clone()
}

/// Whether confined runs ([`Spec::confine`]) with `network` can be made here: `Err` is
/// [`SandboxError::NoConfinement`] naming what failed. Checked once per process and network
/// by confining a real `/bin/sh -c :` (the same root, ids, seccomp filter and limits a run
/// gets), so that a caller refuses untrusted code up front rather than instance by instance.
pub fn confinement_available(network: Network) -> Result<(), SandboxError> {
    static PROBES: [OnceLock<Result<(), String>>; 2] = [OnceLock::new(), OnceLock::new()];
    let slot = match network {
        Network::Isolated => &PROBES[0],
        Network::Allowed => &PROBES[1],
    };
    slot.get_or_init(|| probe_confinement(network))
        .clone()
        .map_err(|reason| SandboxError::NoConfinement { reason })
}

fn probe_confinement(network: Network) -> Result<(), String> {
    let dir = tempfile::Builder::new()
        .prefix("swe-ark-confine-probe-")
        .tempdir()
        .map_err(|e| format!("cannot make a directory for the probe: {e}"))?;
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
        Ok(o) => Err(format!(
            "a confined `/bin/sh -c :` ended with exit code {:?}, signal {:?}: {}",
            o.exit_code,
            o.signal,
            String::from_utf8_lossy(&fs::read(&output).unwrap_or_default()).trim()
        )),
        Err(SandboxError::NoConfinement { reason }) => Err(reason),
        Err(e) => Err(e.to_string()),
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

/// The files the sandbox shows a run: its `/etc/resolv.conf` (isolated runs) and `/etc/hosts`
/// (when the spec names hosts), written in the run's directory, and the spec's binds.
struct RunFiles {
    resolv_conf: Option<PathBuf>,
    hosts_file: Option<PathBuf>,
    binds: Vec<(CString, CString)>,
}

fn run_files(spec: &Spec, rundir: &Path) -> Result<RunFiles, SandboxError> {
    let resolv_conf = if spec.network == Network::Isolated {
        let path = rundir.join("resolv.conf");
        fs::write(&path, RESOLV_CONF).map_err(|e| prepare("writing resolv.conf", e))?;
        Some(path)
    } else {
        None
    };
    let hosts_file = if spec.hosts.is_empty() {
        None
    } else {
        let path = rundir.join("hosts");
        fs::write(&path, hosts_text(&spec.hosts)).map_err(|e| prepare("writing hosts", e))?;
        Some(path)
    };
    let binds = spec
        .binds
        .iter()
        .map(|(from, to)| Ok((c_path(from)?, c_path(to)?)))
        .collect::<Result<Vec<_>, SandboxError>>()?;
    Ok(RunFiles {
        resolv_conf,
        hosts_file,
        binds,
    })
}

/// The run's pids cgroup when it has a process limit, or why it gets none (the limit then
/// falls back to RLIMIT_NPROC).
fn pids_cgroup(spec: &Spec) -> (Option<cgroup::PidsCgroup>, Option<cgroup::CgroupError>) {
    match spec.max_processes {
        // A and B are in the cgroup too.
        Some(n) => match cgroup::PidsCgroup::create(n.saturating_add(2)) {
            Ok(c) => (Some(c), None),
            Err(why) => {
                tracing::debug!("no pids cgroup: {why}");
                (None, Some(why))
            }
        },
        None => (None, None),
    }
}

/// How the command ended: exit code, signal, and whether its timeout killed it.
fn exit_of(spec: &Spec, report: &Report) -> Result<(Option<i32>, Option<i32>, bool), SandboxError> {
    Ok(match report.status {
        Some(raw) => {
            let st = ExitStatus::from_raw(raw);
            (st.code(), st.signal(), false)
        }
        None if report.timed_out => (None, Some(libc::SIGKILL), true),
        None => {
            let init = report
                .init_status
                .map(|raw| describe(ExitStatus::from_raw(raw)))
                .unwrap_or_else(|| "unknown".into());
            return Err(SandboxError::Lost {
                program: spec.program.clone(),
                detail: format!(
                    "the sandbox's init process ended ({init}) without reporting its status"
                ),
            });
        }
    })
}

/// The outcome's notes: the report's, the output's, and an unenforced process limit.
fn run_notes(
    spec: &Spec,
    report: &Report,
    mode: i32,
    attempts: &[child::Attempt],
    captured: &Captured,
    cgroup_problem: Option<cgroup::CgroupError>,
) -> Vec<String> {
    let mut notes = report.notes(
        mode,
        attempts,
        !spec.hosts.is_empty() || !spec.binds.is_empty() || spec.tmp.is_some(),
        &spec.binds,
    );
    if let Some(why) = &captured.unfinished {
        notes.push(why.clone());
    }
    if let Some(why) = &cgroup_problem
        && mode != MODE_USER_NAMESPACES
    {
        notes.push(if euid() == 0 {
            format!(
                "max_processes is not enforced: there is no pids cgroup ({why}), and \
                 RLIMIT_NPROC does not hold for root"
            )
        } else {
            format!(
                "max_processes is not enforced: there is no pids cgroup ({why}), and without a \
                 user namespace RLIMIT_NPROC would count every process of the user"
            )
        });
    }
    notes
}

/// What the sandbox's helpers do before the command runs (see child.rs): its namespaces,
/// mounts, limits, and the pipes they report on.
fn child_plan(
    spec: &Spec,
    attempts: Vec<child::Attempt>,
    mounts: RunFiles,
    root: Option<root::RootPlan>,
    cgroup: Option<&cgroup::PidsCgroup>,
    report_fd: i32,
    cancel_fd: i32,
) -> Result<child::Plan, SandboxError> {
    let cgroup_procs = match cgroup {
        Some(c) => Some(c_path(&c.procs())?),
        None => None,
    };
    // A confined run is root of its user namespace, whose one id is SANDBOX_ID outside when
    // swe-ark runs as root, else the caller's own (who must then deny setgroups).
    let parent_maps = root.as_ref().map(|_| {
        if sandbox_ids() {
            (
                root_map(confine::SANDBOX_ID),
                root_map(confine::SANDBOX_ID),
                false,
            )
        } else {
            (root_map(euid()), root_map(egid()), true)
        }
    });
    // An unconfined run with a root of its own is root of its user namespace (where it has
    // one), as a confined run is: the same `HOME` and the same user name in what it prints.
    let (uid_map, gid_map) = if spec.confine.is_none() && spec.has_own_root() {
        (root_map(euid()), root_map(egid()))
    } else {
        (id_map(euid()), id_map(egid()))
    };
    Ok(child::Plan {
        attempts,
        uid_map,
        gid_map,
        resolv_conf: mounts.resolv_conf.as_deref().map(c_path).transpose()?,
        hosts_file: mounts.hosts_file.as_deref().map(c_path).transpose()?,
        binds: mounts.binds,
        tmp: spec.tmp.as_deref().map(c_path).transpose()?,
        cgroup_procs,
        memory_limit: spec.memory_limit,
        nproc_limit: if cgroup.is_some() {
            None
        } else {
            spec.max_processes
        },
        timeout_ms: spec
            .timeout
            .map(|t| u64::try_from(t.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)),
        report_fd,
        cancel_fd,
        probe: false,
        environ_area: environ_area(),
        root,
        parent_maps,
    })
}

/// What B must build and enter for a run with a root of its own (its directory is
/// `<rundir>/root`): a confined one's, or the host's view for an unconfined one given mounts.
fn root_plan(
    spec: &Spec,
    files: &RunFiles,
    rundir: &Path,
) -> Result<Option<root::RootPlan>, SandboxError> {
    if !spec.has_own_root() {
        return Ok(None);
    }
    let root = rundir.join("root");
    fs::create_dir(&root).map_err(|e| prepare("creating the run's root", e))?;
    let inputs = root::RootInputs {
        names: root::NameFiles {
            resolv_conf: files.resolv_conf.as_deref(),
            hosts: files.hosts_file.as_deref(),
        },
        binds: &spec.binds,
        tmp: spec.tmp.as_deref(),
        mounts: &spec.mounts,
        tmpfs_size: spec
            .confine
            .as_ref()
            .map_or(DEFAULT_TMPFS_SIZE, |c| c.tmpfs_size),
    };
    let mut plan = root::RootPlan {
        old_root: c_path(&root.join(".oldroot"))?,
        root: c_path(&root)?,
        ops: Vec::new(),
        cwd: c_path(&spec.cwd)?,
        filters: Vec::new(),
        file_size_limit: None,
        cpu_limit: None,
        become_root: false,
        prepared: Vec::new(),
        held: Vec::new(),
        confined: spec.confine.is_some(),
    };
    match &spec.confine {
        Some(confine) => {
            plan.ops = root::confined_ops(&root, confine, &inputs)?;
            plan.filters = confine::seccomp_filters()?;
            plan.file_size_limit = confine.file_size_limit;
            plan.cpu_limit = confine.cpu_limit;
            plan.become_root = sandbox_ids();
        }
        None => plan.ops = root::view_ops(&root, &inputs)?,
    }
    Ok(Some(plan))
}

/// Whether a confined command is [`SANDBOX_ID`] outside: when swe-ark runs as root and that
/// id exists where it runs. Root of a user namespace that maps only itself (`unshare -r`, a
/// rootless container) confines as an unprivileged user does, under its own id.
fn sandbox_ids() -> bool {
    let mapped = |file: &str| {
        fs::read_to_string(file).is_ok_and(|text| {
            text.lines().any(|line| {
                let v: Vec<u64> = line
                    .split_whitespace()
                    .filter_map(|w| w.parse().ok())
                    .collect();
                let id = u64::from(confine::SANDBOX_ID);
                v.len() == 3 && v[0] <= id && id < v[0].saturating_add(v[2])
            })
        })
    };
    euid() == 0 && mapped("/proc/self/uid_map") && mapped("/proc/self/gid_map")
}

/// The namespace mode the command ran in, once the helpers' report shows no error and the
/// helper process was waited for.
fn started_mode(
    spec: &Spec,
    report: &Report,
    attempts: &[child::Attempt],
    root_ops: &[String],
    status: io::Result<ExitStatus>,
) -> Result<i32, SandboxError> {
    if let Some(err) = report.error(spec, attempts, root_ops) {
        return Err(err);
    }
    let status = status.map_err(|e| SandboxError::Lost {
        program: spec.program.clone(),
        detail: format!("cannot wait for its helper process: {e}"),
    })?;
    let Some(mode) = report.mode else {
        return Err(SandboxError::Lost {
            program: spec.program.clone(),
            detail: format!(
                "its helper process ended ({}) before starting it",
                describe(status)
            ),
        });
    };
    Ok(mode)
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
                    .filter(|m| m.writable)
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
    let plan = child_plan(
        spec,
        attempts.clone(),
        files,
        root,
        cgroup.as_ref(),
        report_w.as_raw_fd(),
        cancel_r.as_raw_fd(),
    )?;

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
        .envs(&env)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out_w))
        .stderr(Stdio::from(out_w2))
        .process_group(0);
    // SAFETY: stage_a makes only async-signal-safe calls on memory prepared before the fork
    // (see child.rs), as pre_exec requires.
    unsafe {
        cmd.pre_exec(move || child::stage_a(&plan));
    }
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

    let notes = run_notes(spec, &report, mode, &attempts, &captured, cgroup_problem);
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

/// What the sandbox's `/etc/resolv.conf` says: nothing answers on 127.0.0.1:53, so a lookup
/// fails at once instead of timing out against an unreachable name server.
const RESOLV_CONF: &str = "# swe-ark sandbox: no network. Name lookups go to 127.0.0.1, where \
                           nothing answers, and fail at once.\nnameserver 127.0.0.1\n";

/// The run's `/etc/hosts`: its own names first (the first match wins), then the host's file,
/// so that `localhost` and the machine's own name resolve as outside.
fn hosts_text(hosts: &BTreeMap<String, IpAddr>) -> String {
    let mut text = String::from("# swe-ark sandbox: names this run resolves itself\n");
    for (name, addr) in hosts {
        text.push_str(&format!("{addr} {name}\n"));
    }
    if let Ok(host) = fs::read_to_string("/etc/hosts") {
        text.push_str("# the host's /etc/hosts\n");
        text.push_str(&host);
        if !host.ends_with('\n') {
            text.push('\n');
        }
    } else {
        text.push_str("127.0.0.1 localhost\n::1 localhost\n");
    }
    text
}

fn check(spec: &Spec) -> Result<(), SandboxError> {
    if let Some(c) = &spec.confine {
        c.check(&spec.cwd, &spec.mounts)?;
    }
    for m in &spec.mounts {
        check_mount(m)?;
    }
    if let Some(tmp) = &spec.tmp
        && (!tmp.is_absolute() || !tmp.is_dir())
    {
        return Err(SandboxError::InvalidSpec(format!(
            "cannot show {} as /tmp: it is not an existing directory's absolute path",
            tmp.display()
        )));
    }
    for (from, to) in &spec.binds {
        // The target as the run sees it: a file under a mount is the mount's.
        for path in [from.clone(), spec.host_path(to)] {
            if !path.is_absolute() || !path.is_file() {
                return Err(SandboxError::InvalidSpec(format!(
                    "cannot show {} in place of {}: {} is not an existing file's absolute path",
                    from.display(),
                    to.display(),
                    path.display()
                )));
            }
        }
    }
    for name in spec.hosts.keys() {
        if !is_host_name(name) {
            return Err(SandboxError::InvalidSpec(format!(
                "`{name}` is not a valid host name for /etc/hosts"
            )));
        }
    }
    for (key, value) in &spec.env {
        if key.is_empty() || key.contains('=') || key.contains('\0') {
            return Err(SandboxError::InvalidSpec(format!(
                "`{key}` is not a valid environment variable name"
            )));
        }
        if value.contains('\0') {
            return Err(SandboxError::InvalidSpec(format!(
                "the value of {key} contains a NUL byte"
            )));
        }
    }
    match fs::metadata(spec.host_path(&spec.cwd)) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(SandboxError::Cwd {
            path: spec.cwd.clone(),
            source: io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
        }),
        Err(source) => Err(SandboxError::Cwd {
            path: spec.cwd.clone(),
            source,
        }),
    }
}

/// A mount's host side must be an existing directory's absolute path; its place inside an
/// absolute path of its own, not the root and not where the sandbox puts its own.
fn check_mount(m: &Mount) -> Result<(), SandboxError> {
    let plain = |p: &Path| {
        p.is_absolute()
            && p.components()
                .all(|c| !matches!(c, std::path::Component::ParentDir))
    };
    if !plain(&m.host) || !m.host.is_dir() {
        return Err(SandboxError::InvalidSpec(format!(
            "cannot mount {} in a run: it is not an existing directory's absolute path",
            m.host.display()
        )));
    }
    let reserved = ["/proc", "/dev", "/sys", "/tmp", RUN_HOME];
    if !plain(&m.at) || m.at == Path::new("/") || reserved.iter().any(|r| m.at.starts_with(r)) {
        return Err(SandboxError::InvalidSpec(format!(
            "cannot mount {} at {} in a run: the place must be an absolute path of its own, \
             not / or under {}",
            m.host.display(),
            m.at.display(),
            reserved.join(", ")
        )));
    }
    Ok(())
}

/// The clean base environment, then the caller's variables.
fn environment(spec: &Spec, home: &Path) -> BTreeMap<OsString, OsString> {
    let mut env: BTreeMap<OsString, OsString> = [
        ("PATH", OsString::from(DEFAULT_PATH)),
        ("HOME", home.as_os_str().to_owned()),
        ("TZ", "UTC".into()),
        ("PYTHONHASHSEED", "0".into()),
        ("LANG", "C.UTF-8".into()),
        ("LC_ALL", "C.UTF-8".into()),
    ]
    .into_iter()
    .map(|(k, v)| (OsString::from(k), v))
    .collect();
    for (key, value) in &spec.env {
        env.insert(key.into(), value.into());
    }
    env
}

/// The ways to create the sandbox's init process, best first. A run with a root of its own
/// needs a mount namespace: it is never tried without namespaces.
fn attempts(network: Network, confined: bool, own_root: bool) -> Vec<child::Attempt> {
    let mut flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS;
    if network == Network::Isolated {
        flags |= libc::CLONE_NEWNET;
    }
    if confined {
        // Only a user namespace gives the command a uid of its own: no other way is tried.
        return vec![child::Attempt {
            flags: flags | libc::CLONE_NEWUSER,
            user: true,
            maps_from_parent: true,
        }];
    }
    let mut attempts = Vec::new();
    if euid() == 0 {
        attempts.push(child::Attempt {
            flags,
            user: false,
            maps_from_parent: false,
        });
    }
    attempts.push(child::Attempt {
        flags: flags | libc::CLONE_NEWUSER,
        user: true,
        maps_from_parent: false,
    });
    if network == Network::Allowed && !own_root {
        attempts.push(child::Attempt {
            flags: 0,
            user: false,
            maps_from_parent: false,
        });
    }
    attempts
}

fn attempt_label(attempt: &child::Attempt) -> &'static str {
    if attempt.flags == 0 {
        "without namespaces"
    } else if attempt.user {
        "in a new user namespace"
    } else {
        "directly"
    }
}

fn step_text(step: i32) -> &'static str {
    match step {
        child::STEP_CGROUP => "joining the run's pids cgroup",
        child::STEP_PIPE => "creating a pipe",
        child::STEP_CLONE => "creating the namespaces (clone)",
        child::STEP_INIT_DIED => "starting the sandbox's init process",
        child::STEP_SETGROUPS => "writing /proc/self/setgroups",
        child::STEP_UID_MAP => "writing /proc/self/uid_map",
        child::STEP_GID_MAP => "writing /proc/self/gid_map",
        child::STEP_LO_SOCKET => "opening a socket to configure lo",
        child::STEP_LO_UP => "bringing the loopback interface up",
        child::STEP_ROUTE => "adding the default route through lo",
        child::STEP_FORK_COMMAND => "forking the command's process",
        child::STEP_SETSID => "giving the command its own session (setsid)",
        child::STEP_RLIMIT_AS => "setting the memory limit (RLIMIT_AS)",
        child::STEP_RLIMIT_NPROC => "setting the process limit (RLIMIT_NPROC)",
        child::STEP_SETGROUPS_PARENT => "denying setgroups in the run's user namespace",
        child::STEP_ROOT_PRIVATE => "making the mount namespace private",
        child::STEP_ROOT_TMPFS => "mounting the tmpfs of the run's root",
        child::STEP_ROOT_OP => "building the run's root",
        child::STEP_PIVOT_ROOT => "entering the run's root (pivot_root)",
        child::STEP_OLD_ROOT => "detaching the host's root",
        child::STEP_ROOT_READ_ONLY => "making the run's root read-only",
        child::STEP_IDS => "becoming root of the run's user namespace",
        child::STEP_CAPABILITIES => "dropping every capability",
        child::STEP_NO_NEW_PRIVS => "setting no_new_privs",
        child::STEP_CHDIR => "entering the working directory inside the run's root",
        child::STEP_SECCOMP => "installing the seccomp filter",
        child::STEP_RLIMIT_FSIZE => "setting the file size limit (RLIMIT_FSIZE)",
        child::STEP_RLIMIT_CPU => "setting the CPU time limit (RLIMIT_CPU)",
        _ => "an unknown step",
    }
}

fn os_error(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

/// Why no namespaces could be made, from the failures of each attempt, with what may cause it.
fn diagnose(attempts: &[child::Attempt], failures: &[(i32, i32)]) -> String {
    let tried = tried(attempts, failures);
    if euid() == 0 {
        return format!(
            "running as root, but {tried}; a container without CAP_SYS_ADMIN or with a \
             seccomp profile that forbids unshare does this"
        );
    }
    let mut hints = Vec::new();
    for (file, value, setting) in [
        (
            "/proc/sys/kernel/unprivileged_userns_clone",
            "0",
            "kernel.unprivileged_userns_clone = 0",
        ),
        (
            "/proc/sys/user/max_user_namespaces",
            "0",
            "user.max_user_namespaces = 0",
        ),
        (
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            "1",
            "kernel.apparmor_restrict_unprivileged_userns = 1",
        ),
    ] {
        if fs::read_to_string(file).is_ok_and(|v| v.trim() == value) {
            hints.push(setting);
        }
    }
    let hints = if hints.is_empty() {
        String::new()
    } else {
        format!(" ({})", hints.join(", "))
    };
    format!("not root, and user namespaces are not available{hints}: {tried}")
}

/// How each namespace attempt failed: "directly: creating the namespaces (clone) failed: …".
fn tried(attempts: &[child::Attempt], failures: &[(i32, i32)]) -> String {
    let tried: Vec<String> = attempts
        .iter()
        .filter(|a| a.flags != 0)
        .zip(failures)
        .map(|(a, (step, errno))| {
            let what = if *step == child::STEP_INIT_DIED {
                format!("{} (it died)", step_text(*step))
            } else {
                format!("{} failed: {}", step_text(*step), os_error(*errno))
            };
            format!("{}: {what}", attempt_label(a))
        })
        .collect();
    if tried.is_empty() {
        "no namespace could be created".to_string()
    } else {
        tried.join("; ")
    }
}

/// The records the helpers wrote.
#[derive(Debug, Default)]
struct Report {
    fails: Vec<(i32, i32)>,
    attempt_failures: Vec<(i32, i32)>,
    no_namespaces: bool,
    mode: Option<i32>,
    notes: Vec<(i32, i32)>,
    status: Option<i32>,
    timed_out: bool,
    init_status: Option<i32>,
    /// The step of a confined run's root that failed, and its errno.
    root_op: Option<(i32, i32)>,
}

impl Report {
    /// Everything in the pipe now, without waiting (the writers are gone or done).
    fn read(mut pipe: PipeReader) -> Report {
        let fd = pipe.as_raw_fd();
        // SAFETY: fcntl on a descriptor we own.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
            }
        }
        let mut bytes = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let mut report = Report::default();
        for record in bytes.chunks_exact(12) {
            let word = |i: usize| [record[i], record[i + 1], record[i + 2], record[i + 3]];
            let kind = u32::from_ne_bytes(word(0));
            let a = i32::from_ne_bytes(word(4));
            let b = i32::from_ne_bytes(word(8));
            match kind {
                REC_FAIL => report.fails.push((a, b)),
                REC_ATTEMPT_FAILED => report.attempt_failures.push((a, b)),
                REC_NO_NAMESPACES => report.no_namespaces = true,
                REC_MODE => report.mode = Some(a),
                REC_NOTE => report.notes.push((a, b)),
                REC_STATUS => report.status = Some(a),
                REC_TIMEOUT => report.timed_out = true,
                REC_INIT_STATUS => report.init_status = Some(a),
                REC_ROOT_OP => report.root_op = Some((a, b)),
                _ => {}
            }
        }
        report
    }

    /// The error the records show, if any.
    fn error(
        &self,
        spec: &Spec,
        attempts: &[child::Attempt],
        root_ops: &[String],
    ) -> Option<SandboxError> {
        if self.no_namespaces {
            // A step of a confined run's root names itself; anything else is diagnosed.
            let reason = match self.root_op {
                Some((index, errno)) => {
                    let op = usize::try_from(index)
                        .ok()
                        .and_then(|i| root_ops.get(i))
                        .map_or("a step of the run's root", String::as_str);
                    format!("{op} failed: {}", os_error(errno))
                }
                None => diagnose(attempts, &self.attempt_failures),
            };
            if spec.confine.is_some() {
                return Some(SandboxError::NoConfinement { reason });
            }
            if spec.network == Network::Isolated {
                return Some(SandboxError::NoIsolation { reason });
            }
            return Some(SandboxError::Lost {
                program: spec.program.clone(),
                detail: format!("no process could be started for it: {reason}"),
            });
        }
        let (step, errno) = self.fails.first()?;
        Some(SandboxError::Setup {
            step: step_text(*step),
            source: os_error(*errno),
        })
    }

    /// What the run went without, in sentences.
    fn notes(
        &self,
        mode: i32,
        attempts: &[child::Attempt],
        mounts: bool,
        binds: &[(PathBuf, PathBuf)],
    ) -> Vec<String> {
        let mut notes = Vec::new();
        if mode == MODE_NONE {
            notes.push(format!(
                "no PID namespace ({}): the command's processes are found through subreapers \
                 to be killed, and /proc shows the host's processes",
                tried(attempts, &self.attempt_failures)
            ));
            if mounts {
                notes.push(
                    "no mount namespace: the run's own host names, files and /tmp could not be \
                     given it (its /etc/hosts, /tmp and the files it was to see replaced are the \
                     host's)"
                        .to_string(),
                );
            }
        }
        for (note, errno) in &self.notes {
            let err = os_error(*errno);
            notes.push(match *note {
                NOTE_PRIVATE_MOUNTS => format!(
                    "the mount namespace could not be made private ({err}): /proc, \
                     /etc/resolv.conf and /etc/hosts are the host's"
                ),
                NOTE_PROC => format!(
                    "/proc could not be mounted for the PID namespace ({err}): it shows the \
                     host's processes"
                ),
                NOTE_RESOLV => format!(
                    "/etc/resolv.conf could not be replaced ({err}): name lookups time out \
                     instead of failing at once"
                ),
                NOTE_HOSTS => format!(
                    "/etc/hosts could not be replaced ({err}): the run's own host names do not \
                     resolve"
                ),
                NOTE_TMP => {
                    format!("the run's own /tmp could not be mounted ({err}): it shares the host's")
                }
                NOTE_CGROUP => format!(
                    "the host's cgroup hierarchy could not be hidden ({err}): the run sees it \
                     under /sys/fs/cgroup"
                ),
                n if n >= NOTE_BIND => format!(
                    "{} could not be shown in place of {} ({err})",
                    usize::try_from(n - NOTE_BIND)
                        .ok()
                        .and_then(|i| binds.get(i))
                        .map_or_else(|| "a file".into(), |b| b.0.display().to_string()),
                    usize::try_from(n - NOTE_BIND)
                        .ok()
                        .and_then(|i| binds.get(i))
                        .map_or_else(|| "another".into(), |b| b.1.display().to_string()),
                ),
                NOTE_DEVPTS => format!(
                    "the run's own /dev/pts could not be mounted ({err}): it has no \
                     pseudo-terminals"
                ),
                NOTE_LOW_PORTS => format!(
                    "ports below 1024 could not be opened to the command in its network \
                     namespace ({err}): a service there cannot listen on them unless it runs \
                     as root"
                ),
                NOTE_CHILDREN_UNLISTED => format!(
                    "/proc/thread-self/children cannot be read ({err}): processes that left \
                     the command's process group may have outlived the run"
                ),
                _ => format!("unknown note {note} ({err})"),
            });
        }
        notes
    }
}

/// What [`capture`] saw.
struct Captured {
    total: u64,
    truncated: bool,
    /// Set when the output pipe stayed open after the helpers ended.
    unfinished: Option<String>,
}

/// Copies the output pipe into `file`, keeping the first `cap` bytes, until every writer is
/// gone. Should anything keep the pipe open after the helpers have ended (nothing should: the
/// tree is dead by then), it stops 5 s later.
fn capture(pipe: PipeReader, file: File, cap: u64, child: &mut Child) -> io::Result<Captured> {
    let mut pipe = pipe;
    let mut out = BufWriter::new(file);
    let mut write_error: Option<io::Error> = None;
    let mut kept: u64 = 0;
    let mut total: u64 = 0;
    let mut last: Option<u8> = None;
    let mut buf = vec![0u8; 64 * 1024];
    let mut helpers_done: Option<Instant> = None;
    let mut unfinished = None;
    loop {
        let mut pfd = libc::pollfd {
            fd: pipe.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one element.
        let ready = unsafe { libc::poll(&mut pfd, 1, 250) };
        if ready > 0 {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let chunk = &buf[..n];
                    total = total.saturating_add(n as u64);
                    let room = usize::try_from(cap.saturating_sub(kept)).unwrap_or(usize::MAX);
                    let keep = &chunk[..chunk.len().min(room)];
                    if !keep.is_empty() && write_error.is_none() {
                        if let Err(e) = out.write_all(keep) {
                            write_error = Some(e);
                        }
                        kept = kept.saturating_add(keep.len() as u64);
                        last = keep.last().copied();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        } else if ready < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        match helpers_done {
            None => {
                if matches!(child.try_wait(), Ok(Some(_)) | Err(_)) {
                    helpers_done = Some(Instant::now());
                }
            }
            Some(at) if at.elapsed() > Duration::from_secs(5) => {
                unfinished = Some(
                    "the output pipe stayed open after the command's processes ended (a \
                     descriptor passed outside the sandbox?); the output may be incomplete"
                        .to_string(),
                );
                break;
            }
            Some(_) => {}
        }
    }
    if let Some(e) = write_error {
        return Err(e);
    }
    let truncated = total > kept;
    if truncated {
        if last.is_some_and(|b| b != b'\n') {
            out.write_all(b"\n")?;
        }
        writeln!(out, "[swe-ark: output truncated after {kept} bytes]")?;
    }
    out.flush()?;
    Ok(Captured {
        total,
        truncated,
        unfinished,
    })
}

/// Sets up (and throws away) the namespaces an isolated run gets.
fn probe() -> Result<(), IsolationError> {
    let pipes = io::pipe().and_then(|report| io::pipe().map(|cancel| (report, cancel)));
    let ((report_r, report_w), (cancel_r, _cancel_w)) =
        pipes.map_err(|e| IsolationError::Pipe(Arc::new(e)))?;
    let attempts = attempts(Network::Isolated, false, false);
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

/// The bounds of this process's environment block: fields 50 and 51 of /proc/self/stat.
fn environ_area() -> Option<(usize, usize)> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    // Fields from the third on follow the command name's closing parenthesis.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let start: usize = fields.get(47)?.parse().ok()?;
    let end: usize = fields.get(48)?.parse().ok()?;
    (start < end && end - start < 16 << 20).then_some((start, end))
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => status.to_string(),
    }
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

/// `"0 <id> 1\n"`: root of a user namespace is `id` outside, alone.
fn root_map(id: u32) -> CString {
    // Digits, spaces and a newline: never a NUL byte.
    CString::new(format!("0 {id} 1\n")).unwrap_or_default()
}

/// `"<id> <id> 1\n"`: the id mapped to itself, alone, as an unprivileged process may write it.
fn id_map(id: u32) -> CString {
    // Digits, spaces and a newline: never a NUL byte.
    CString::new(format!("{id} {id} 1\n")).unwrap_or_default()
}

fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

fn egid() -> u32 {
    // SAFETY: getegid cannot fail.
    unsafe { libc::getegid() }
}
