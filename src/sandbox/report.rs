//! The helpers' report read back after a run (fixed records on a pipe: `child`'s `REC_*`):
//! the error it shows, how the command ended, and what the run went without, in sentences.

use std::fs;
use std::io::{self, PipeReader, Read};
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;

use super::child::{
    self, MODE_NONE, MODE_USER_NAMESPACES, NOTE_BIND, NOTE_CGROUP, NOTE_CHILDREN_UNLISTED,
    NOTE_DEVPTS, NOTE_HOSTS, NOTE_LOW_PORTS, NOTE_PRIVATE_MOUNTS, NOTE_PROC, NOTE_RESOLV, NOTE_TMP,
    REC_ATTEMPT_FAILED, REC_FAIL, REC_INIT_STATUS, REC_MODE, REC_NO_NAMESPACES, REC_NOTE,
    REC_ROOT_OP, REC_STATUS, REC_TIMEOUT,
};
use super::output::Captured;
use super::{Network, SandboxError, Spec, cgroup, euid};

/// The records the helpers wrote.
#[derive(Debug, Default)]
pub(super) struct Report {
    pub(super) fails: Vec<(i32, i32)>,
    pub(super) attempt_failures: Vec<(i32, i32)>,
    no_namespaces: bool,
    pub(super) mode: Option<i32>,
    notes: Vec<(i32, i32)>,
    status: Option<i32>,
    timed_out: bool,
    init_status: Option<i32>,
    /// The step of a confined run's root that failed, and its errno.
    root_op: Option<(i32, i32)>,
}

impl Report {
    /// Everything in the pipe now, without waiting (the writers are gone or done).
    pub(super) fn read(mut pipe: PipeReader) -> Report {
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
    pub(super) fn error(
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

/// The namespace mode the command ran in, once the helpers' report shows no error and the
/// helper process was waited for.
pub(super) fn started_mode(
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

/// How the command ended: exit code, signal, and whether its timeout killed it.
pub(super) fn exit_of(
    spec: &Spec,
    report: &Report,
) -> Result<(Option<i32>, Option<i32>, bool), SandboxError> {
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
pub(super) fn run_notes(
    spec: &Spec,
    shown: &[(PathBuf, PathBuf)],
    report: &Report,
    mode: i32,
    attempts: &[child::Attempt],
    captured: &Captured,
    cgroup_problem: Option<cgroup::CgroupError>,
) -> Vec<String> {
    let mut notes = report.notes(
        mode,
        attempts,
        !spec.hosts.is_empty()
            || !spec.binds.is_empty()
            || !spec.hidden.is_empty()
            || spec.tmp.is_some(),
        shown,
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

/// Why no namespaces could be made, from the failures of each attempt, with what may cause it.
pub(super) fn diagnose(attempts: &[child::Attempt], failures: &[(i32, i32)]) -> String {
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

fn attempt_label(attempt: &child::Attempt) -> &'static str {
    if attempt.flags == 0 {
        "without namespaces"
    } else if attempt.user {
        "in a new user namespace"
    } else {
        "directly"
    }
}

pub(super) fn step_text(step: i32) -> &'static str {
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
        child::STEP_CAPABILITIES => "dropping every capability but root's own-file ones",
        child::STEP_NO_NEW_PRIVS => "setting no_new_privs",
        child::STEP_CHDIR => "entering the working directory inside the run's root",
        child::STEP_SECCOMP => "installing the seccomp filter",
        child::STEP_RLIMIT_FSIZE => "setting the file size limit (RLIMIT_FSIZE)",
        child::STEP_RLIMIT_CPU => "setting the CPU time limit (RLIMIT_CPU)",
        _ => "an unknown step",
    }
}

pub(super) fn os_error(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => status.to_string(),
    }
}
