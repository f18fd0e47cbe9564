//! What [`run`](super::run) prepares before the fork: the files the run is shown (its
//! `/etc/resolv.conf`, `/etc/hosts` and binds), its pids cgroup, the ways to create its
//! namespaces, the root it gets, and the [`child::Plan`] the helpers carry out.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use super::{
    DEFAULT_TMPFS_SIZE, Network, SandboxError, Spec, c_path, cgroup, child, confine, egid, euid,
    prepare, root,
};

/// The files the sandbox shows a run: its `/etc/resolv.conf` (isolated runs) and `/etc/hosts`
/// (when the spec names hosts), written in the run's directory, and the spec's binds.
pub(super) struct RunFiles {
    resolv_conf: Option<PathBuf>,
    hosts_file: Option<PathBuf>,
    /// The spec's binds and its hidden files' ([`Spec::shown_binds`]).
    pub(super) shown: Vec<(PathBuf, PathBuf)>,
    binds: Vec<(CString, CString)>,
}

/// The empty file of mode 000 that hidden files are shown as, made in the run's directory
/// (owned by swe-ark's user: as root, an owner no confined run is, so it cannot read it).
fn hiding_file(rundir: &Path) -> Result<PathBuf, SandboxError> {
    use std::os::unix::fs::PermissionsExt;
    let path = rundir.join("hidden");
    fs::write(&path, b"")
        .map_err(|e| prepare("writing the file hidden programs are shown as", e))?;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o000))
        .map_err(|e| prepare("making the hiding file unreadable", e))?;
    Ok(path)
}

pub(super) fn run_files(spec: &Spec, rundir: &Path) -> Result<RunFiles, SandboxError> {
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
    let shown = if spec.hidden.is_empty() {
        spec.binds.clone()
    } else {
        spec.shown_binds(&hiding_file(rundir)?)
    };
    let binds = shown
        .iter()
        .map(|(from, to)| Ok((c_path(from)?, c_path(to)?)))
        .collect::<Result<Vec<_>, SandboxError>>()?;
    Ok(RunFiles {
        resolv_conf,
        hosts_file,
        shown,
        binds,
    })
}

/// The run's pids cgroup when it has a process limit, or why it gets none (the limit then
/// falls back to RLIMIT_NPROC).
pub(super) fn pids_cgroup(
    spec: &Spec,
) -> (Option<cgroup::PidsCgroup>, Option<cgroup::CgroupError>) {
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

/// The ways to create the sandbox's init process, best first. A run with a root of its own
/// needs a mount namespace: it is never tried without namespaces.
pub(super) fn attempts(network: Network, confined: bool, own_root: bool) -> Vec<child::Attempt> {
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

/// What the sandbox's helpers do before the command runs (see child/): its namespaces,
/// mounts, limits, and the pipes they report on.
pub(super) fn child_plan(
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
pub(super) fn root_plan(
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
        binds: &files.shown,
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
            let built = root::confined_ops(&root, confine, &inputs)?;
            plan.ops = built.ops;
            plan.held = built.held;
            plan.filters = confine::seccomp_filters()?;
            plan.file_size_limit = confine.file_size_limit;
            plan.cpu_limit = confine.cpu_limit;
            plan.become_root = sandbox_ids();
        }
        None => {
            let built = root::view_ops(&root, &inputs)?;
            plan.ops = built.ops;
            plan.held = built.held;
        }
    }
    Ok(Some(plan))
}

/// Whether a confined command is [`SANDBOX_ID`](super::SANDBOX_ID) outside: when swe-ark runs
/// as root and that id exists where it runs. Root of a user namespace that maps only itself
/// (`unshare -r`, a rootless container) confines as an unprivileged user does, under its own id.
pub(super) fn sandbox_ids() -> bool {
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

/// `"0 <id> 1\n"`: root of a user namespace is `id` outside, alone.
fn root_map(id: u32) -> CString {
    // Digits, spaces and a newline: never a NUL byte.
    CString::new(format!("0 {id} 1\n")).unwrap_or_default()
}

/// `"<id> <id> 1\n"`: the id mapped to itself, alone, as an unprivileged process may write it.
pub(super) fn id_map(id: u32) -> CString {
    // Digits, spaces and a newline: never a NUL byte.
    CString::new(format!("{id} {id} 1\n")).unwrap_or_default()
}
