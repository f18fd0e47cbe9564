//! The sandbox's helper processes, between `fork` and `exec`.
//!
//! Three processes take part (docs/SANDBOX.md):
//!
//! - **A**, the child `Command::spawn` forks (the leader of its own process group). It joins
//!   the pids cgroup, creates **B** in new namespaces, enforces the timeout (polling a pidfd of
//!   B), kills B when it expires or when swe-ark goes away (the cancel pipe reaches end of file),
//!   and reports what happened;
//! - **B**, the init of the new PID namespace: maps the user, brings `lo` up with a default route
//!   through it and opens every port to unprivileged processes there, mounts `/proc`,
//!   `/etc/resolv.conf`, the run's `/etc/hosts` and its other files in place, forks **C**, reaps
//!   every orphan, and reports C's wait status. When B ends, the kernel kills whatever is left
//!   in the namespace;
//! - **C**, the command: its own session and process group, the resource limits, then back into
//!   `Command::spawn`'s code, which sets the environment and calls `exec`.
//!
//! Everything here runs in a child of a possibly multi-threaded process, so it makes only
//! async-signal-safe calls: raw system calls on memory prepared before the fork. No allocation,
//! no locks, no formatting, no arithmetic that can overflow, nothing that can panic. The helpers
//! fork with the raw `clone` system call, which runs none of the C library's fork handlers.
//!
//! Each helper reports to the parent through the report pipe in fixed 12-byte records (kind, a,
//! b: three native-endian 32-bit integers), written with one `write` each (atomic on a pipe).
//!
//! This file holds the three stages and B's namespace setup; the rest, under the same rules:
//!
//! - `root`: B building and entering a run's own root, and C confining itself;
//! - `mounts`: B's mounts in its own mount namespace, and its loopback-only network;
//! - `sys`: the system calls the stages share (limits, reaping, descriptors, the report pipe).

mod mounts;
mod root;
mod sys;

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;

use libc::{c_int, pid_t};

use super::root::RootPlan;
use mounts::{loopback_only, set_up_mounts};
use root::{confine_command, enter_root};
use sys::{
    clamp_ms, close, close_all_except, errno, exit, kill_children, not_dumpable, now_ms, raw_clone,
    read_pair, report, set_limit, wait_for, write_file, write_pair,
};

// Used outside the helpers: swe-ark idmaps a writable tree with them before the fork.
pub(super) use root::{
    MOUNT_ATTR_IDMAP, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID, open_tree, set_attributes_mapped,
};

/// A helper step failed: a = step (`STEP_*`), b = errno.
pub(super) const REC_FAIL: u32 = 1;
/// A namespace attempt failed and the next one was tried: a = step, b = errno.
pub(super) const REC_ATTEMPT_FAILED: u32 = 2;
/// Every namespace attempt failed and running without is not allowed.
pub(super) const REC_NO_NAMESPACES: u32 = 3;
/// The attempt that worked: a = `MODE_*`.
pub(super) const REC_MODE: u32 = 4;
/// A best-effort step failed: a = note (`NOTE_*`), b = errno.
pub(super) const REC_NOTE: u32 = 5;
/// The command ended: a = its raw wait status.
pub(super) const REC_STATUS: u32 = 6;
/// The timeout expired; the tree was killed.
pub(super) const REC_TIMEOUT: u32 = 7;
/// B ended: a = its raw wait status.
pub(super) const REC_INIT_STATUS: u32 = 8;
/// A step of the new root failed: a = its index in [`RootPlan::ops`], b = errno.
pub(super) const REC_ROOT_OP: u32 = 9;

/// No namespaces: the tree is held together by subreapers only.
pub(super) const MODE_NONE: i32 = 0;
/// New PID, mount (and network) namespaces, created with the caller's own privileges.
pub(super) const MODE_NAMESPACES: i32 = 1;
/// The same, inside a new user namespace.
pub(super) const MODE_USER_NAMESPACES: i32 = 2;

pub(super) const STEP_CGROUP: i32 = 1;
pub(super) const STEP_PIPE: i32 = 2;
pub(super) const STEP_CLONE: i32 = 3;
pub(super) const STEP_INIT_DIED: i32 = 4;
pub(super) const STEP_SETGROUPS: i32 = 5;
pub(super) const STEP_UID_MAP: i32 = 6;
pub(super) const STEP_GID_MAP: i32 = 7;
pub(super) const STEP_LO_SOCKET: i32 = 8;
pub(super) const STEP_LO_UP: i32 = 9;
pub(super) const STEP_ROUTE: i32 = 10;
pub(super) const STEP_FORK_COMMAND: i32 = 11;
pub(super) const STEP_SETSID: i32 = 12;
pub(super) const STEP_RLIMIT_AS: i32 = 13;
pub(super) const STEP_RLIMIT_NPROC: i32 = 14;
pub(super) const STEP_SETGROUPS_PARENT: i32 = 15;
pub(super) const STEP_ROOT_PRIVATE: i32 = 16;
pub(super) const STEP_ROOT_TMPFS: i32 = 17;
/// One of the root's steps ([`REC_ROOT_OP`] says which).
pub(super) const STEP_ROOT_OP: i32 = 18;
pub(super) const STEP_PIVOT_ROOT: i32 = 19;
pub(super) const STEP_OLD_ROOT: i32 = 20;
pub(super) const STEP_ROOT_READ_ONLY: i32 = 21;
pub(super) const STEP_IDS: i32 = 22;
pub(super) const STEP_CAPABILITIES: i32 = 23;
pub(super) const STEP_NO_NEW_PRIVS: i32 = 24;
pub(super) const STEP_CHDIR: i32 = 25;
pub(super) const STEP_SECCOMP: i32 = 26;
pub(super) const STEP_RLIMIT_FSIZE: i32 = 27;
pub(super) const STEP_RLIMIT_CPU: i32 = 28;

pub(super) const NOTE_PRIVATE_MOUNTS: i32 = 1;
pub(super) const NOTE_PROC: i32 = 2;
pub(super) const NOTE_RESOLV: i32 = 3;
pub(super) const NOTE_CHILDREN_UNLISTED: i32 = 4;
pub(super) const NOTE_HOSTS: i32 = 5;
/// The run's own directory could not be mounted over `/tmp`.
pub(super) const NOTE_TMP: i32 = 7;
/// The host's cgroup hierarchy could not be hidden.
pub(super) const NOTE_CGROUP: i32 = 8;
pub(super) const NOTE_LOW_PORTS: i32 = 6;
/// `NOTE_BIND + i`: the i-th of the plan's binds failed.
pub(super) const NOTE_BIND: i32 = 100;
/// The confined run's own `devpts` could not be mounted (no pseudo-terminals).
pub(super) const NOTE_DEVPTS: i32 = 9;

/// The exit code of a helper that failed (the report says why).
const EXIT_SETUP: c_int = 125;

/// One way to create B: clone flags, and whether they include a new user namespace.
#[derive(Debug, Clone, Copy)]
pub(super) struct Attempt {
    pub flags: c_int,
    pub user: bool,
    /// A writes B's id maps (`Plan::parent_maps`) before B goes on: a confined run's maps
    /// name another uid than B's own, which only the parent namespace may write.
    pub maps_from_parent: bool,
}

/// Everything the helpers need, prepared before the fork and only read after it.
pub(super) struct Plan {
    /// Tried in order until one works; flags 0 means no namespaces at all.
    pub attempts: Vec<Attempt>,
    /// `"<uid> <uid> 1\n"`, `"<gid> <gid> 1\n"`: the caller's ids, mapped to themselves.
    pub uid_map: CString,
    pub gid_map: CString,
    /// A file to bind-mount over `/etc/resolv.conf` (network isolated only).
    pub resolv_conf: Option<CString>,
    /// A file to bind-mount over `/etc/hosts` (the run's own host names).
    pub hosts_file: Option<CString>,
    /// (source, target) files to bind-mount.
    pub binds: Vec<(CString, CString)>,
    /// A directory to bind-mount over `/tmp`.
    pub tmp: Option<CString>,
    /// `cgroup.procs` of the run's pids cgroup, which A joins.
    pub cgroup_procs: Option<CString>,
    /// RLIMIT_AS of the command, in bytes.
    pub memory_limit: Option<u64>,
    /// RLIMIT_NPROC of the command, applied in a user namespace only (where it counts the
    /// namespace's processes; outside one it would count every process of the user).
    pub nproc_limit: Option<u64>,
    pub timeout_ms: Option<u64>,
    /// The write end of the report pipe.
    pub report_fd: RawFd,
    /// The read end of the cancel pipe: end of file means swe-ark is gone.
    pub cancel_fd: RawFd,
    /// Set up B, report, and end: no command (isolation_available).
    pub probe: bool,
    /// A confined run's own root, identity and filter (confine.rs).
    pub root: Option<RootPlan>,
    /// The maps A writes for B (`Attempt::maps_from_parent`): uid_map, gid_map, and whether
    /// `setgroups` must be denied first (as an unprivileged writer must).
    pub parent_maps: Option<(CString, CString, bool)>,
    /// Where swe-ark's own environment strings lie in memory (what `/proc/<pid>/environ`
    /// shows): A zeroes its copy, so that neither it nor B shows the command swe-ark's
    /// environment.
    pub environ_area: Option<(usize, usize)>,
}

/// A's code, run by `Command::spawn`'s child before `exec`. Returns only in C, which goes on to
/// `exec` the command; A and B end with `_exit`.
pub(super) fn stage_a(plan: &Plan) -> io::Result<()> {
    let fd = plan.report_fd;
    if let Some((start, end)) = plan.environ_area
        && start < end
    {
        // SAFETY: the range is the process's environment block (from /proc/self/stat), mapped
        // and writable in this copy of the parent's memory; nothing here reads it again (C
        // gets its environment from `Command`'s own array).
        unsafe { std::ptr::write_bytes(start as *mut u8, 0, end - start) };
    }
    if let Some(procs) = &plan.cgroup_procs
        && let Err(e) = write_file(procs, b"0\n")
    {
        report(fd, REC_FAIL, STEP_CGROUP, e);
        exit(EXIT_SETUP);
    }
    // Without a PID namespace (MODE_NONE), the command's orphans come here once B is gone, to
    // be killed.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };

    let mut chosen: Option<(pid_t, Attempt)> = None;
    for attempt in &plan.attempts {
        let mut sync: [c_int; 2] = [-1, -1];
        // SAFETY: pipe2 writes two descriptors into the array.
        if unsafe { libc::pipe2(sync.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            report(fd, REC_ATTEMPT_FAILED, STEP_PIPE, errno());
            continue;
        }
        // With maps from A, B waits on `go` until they are written.
        let mut go: [c_int; 2] = [-1, -1];
        // SAFETY: pipe2 writes two descriptors into the array.
        if attempt.maps_from_parent && unsafe { libc::pipe2(go.as_mut_ptr(), libc::O_CLOEXEC) } != 0
        {
            report(fd, REC_ATTEMPT_FAILED, STEP_PIPE, errno());
            close(sync[0]);
            close(sync[1]);
            continue;
        }
        let pid = raw_clone(attempt.flags);
        if pid == 0 {
            close(sync[0]);
            if attempt.maps_from_parent {
                close(go[1]);
                let mut byte = [0u8; 1];
                // SAFETY: read into a one-byte buffer; end of file means A gave up.
                let n = unsafe { libc::read(go[0], byte.as_mut_ptr().cast(), 1) };
                close(go[0]);
                if n != 1 {
                    exit(EXIT_SETUP);
                }
            }
            return stage_b(plan, *attempt, sync[1]);
        }
        close(sync[1]);
        if attempt.maps_from_parent {
            close(go[0]);
        }
        if pid < 0 {
            report(fd, REC_ATTEMPT_FAILED, STEP_CLONE, errno());
            close(sync[0]);
            if attempt.maps_from_parent {
                close(go[1]);
            }
            continue;
        }
        if attempt.maps_from_parent {
            let written = write_maps(plan, pid);
            if written.is_ok() {
                // SAFETY: write one byte from a static buffer.
                unsafe { libc::write(go[1], [1u8].as_ptr().cast(), 1) };
            }
            close(go[1]);
            if let Err((step, err)) = written {
                close(sync[0]);
                wait_for(pid);
                report(fd, REC_ATTEMPT_FAILED, step, err);
                continue;
            }
        }
        let (step, err) = read_pair(sync[0]);
        close(sync[0]);
        if step == 0 {
            chosen = Some((pid, *attempt));
            break;
        }
        wait_for(pid);
        report(fd, REC_ATTEMPT_FAILED, step, err);
    }
    let Some((pid, attempt)) = chosen else {
        report(fd, REC_NO_NAMESPACES, 0, 0);
        exit(EXIT_SETUP);
    };
    let mode = if attempt.flags == 0 {
        MODE_NONE
    } else if attempt.user {
        MODE_USER_NAMESPACES
    } else {
        MODE_NAMESPACES
    };
    report(fd, REC_MODE, mode, 0);
    if plan.probe {
        wait_for(pid);
        exit(0);
    }
    close_all_except(&[plan.report_fd, plan.cancel_fd]);
    not_dumpable();
    supervise(plan, pid, mode)
}

/// A, once B runs: waits for B, the timeout or the cancel pipe, whichever comes first.
fn supervise(plan: &Plan, init: pid_t, mode: i32) -> ! {
    let fd = plan.report_fd;
    let start = now_ms();
    // SAFETY: pidfd_open with integer arguments; -1 when the kernel is older than 5.3.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, init, 0) } as c_int;
    let mut status: Option<c_int> = None;
    let mut kill_it = false;
    loop {
        let wait_ms: c_int = match plan.timeout_ms {
            None => -1,
            Some(limit) => {
                let elapsed = now_ms().saturating_sub(start);
                if elapsed >= limit {
                    report(fd, REC_TIMEOUT, 0, 0);
                    kill_it = true;
                    break;
                }
                clamp_ms(limit - elapsed)
            }
        };
        if pidfd >= 0 {
            let mut fds = [
                libc::pollfd {
                    fd: pidfd,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: plan.cancel_fd,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: poll on a two-element array.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, wait_ms) };
            if n < 0 && errno() != libc::EINTR {
                // Should not happen; fall back to waiting without the timeout.
                break;
            }
            if fds[0].revents != 0 {
                break;
            }
            if fds[1].revents != 0 {
                kill_it = true;
                break;
            }
        } else {
            let mut st: c_int = 0;
            // SAFETY: waitpid on our own child.
            if unsafe { libc::waitpid(init, &mut st, libc::WNOHANG | libc::__WALL) } == init {
                status = Some(st);
                break;
            }
            let mut cancel = libc::pollfd {
                fd: plan.cancel_fd,
                events: libc::POLLIN,
                revents: 0,
            };
            let slice = if wait_ms < 0 { 20 } else { wait_ms.min(20) };
            // SAFETY: poll on one element.
            unsafe { libc::poll(&mut cancel, 1, slice) };
            if cancel.revents != 0 {
                kill_it = true;
                break;
            }
        }
    }
    if kill_it {
        // B is the namespace's init: its death kills everything in the namespace. Without a
        // namespace, the tree comes back to A (a subreaper), which kills it below.
        // SAFETY: kill with integer arguments; `init` is our unreaped child.
        unsafe { libc::kill(init, libc::SIGKILL) };
    }
    let st = match status {
        Some(st) => st,
        None => wait_for(init),
    };
    report(fd, REC_INIT_STATUS, st, 0);
    if mode == MODE_NONE {
        kill_children(fd);
    }
    exit(0)
}

/// B's code: set up the namespaces, tell A how it went, then fork C and reap until C ends.
fn stage_b(plan: &Plan, attempt: Attempt, sync: RawFd) -> io::Result<()> {
    // SAFETY: prctl with integer arguments. If A dies, so does B (and with it the namespace).
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if let Err((step, err)) = set_up(plan, attempt) {
        write_pair(sync, step, err);
        exit(EXIT_SETUP);
    }
    write_pair(sync, 0, 0);
    close(sync);
    if plan.probe {
        exit(0);
    }
    // Only now: a process that is not dumpable cannot write its own uid_map.
    not_dumpable();
    let pid_namespace = attempt.flags & libc::CLONE_NEWPID != 0;
    if !pid_namespace {
        // SAFETY: prctl with integer arguments.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
    }
    let command = raw_clone(0);
    if command == 0 {
        return stage_c(plan, attempt);
    }
    if command < 0 {
        report(plan.report_fd, REC_FAIL, STEP_FORK_COMMAND, errno());
        exit(EXIT_SETUP);
    }
    close_all_except(&[plan.report_fd]);
    loop {
        let mut st: c_int = 0;
        // SAFETY: waitpid for any child (B reaps every orphan of the namespace).
        let r = unsafe { libc::waitpid(-1, &mut st, libc::__WALL) };
        if r == command {
            report(plan.report_fd, REC_STATUS, st, 0);
            break;
        }
        if r < 0 && errno() != libc::EINTR {
            break;
        }
    }
    if !pid_namespace {
        // SAFETY: kill with integer arguments: the command's process group.
        unsafe { libc::kill(-command, libc::SIGKILL) };
        kill_children(plan.report_fd);
    }
    // With a PID namespace, B's exit kills whatever is left in it.
    exit(0)
}

/// B's namespace setup. Steps that can fail the attempt come first; best-effort ones (notes)
/// last, so that a failed attempt leaves no notes behind.
fn set_up(plan: &Plan, attempt: Attempt) -> Result<(), (i32, i32)> {
    let fd = plan.report_fd;
    if attempt.user && !attempt.maps_from_parent {
        write_file(c"/proc/self/setgroups", b"deny\n").map_err(|e| (STEP_SETGROUPS, e))?;
        write_file(c"/proc/self/uid_map", plan.uid_map.as_bytes())
            .map_err(|e| (STEP_UID_MAP, e))?;
        write_file(c"/proc/self/gid_map", plan.gid_map.as_bytes())
            .map_err(|e| (STEP_GID_MAP, e))?;
    }
    let isolated = attempt.flags & libc::CLONE_NEWNET != 0;
    if isolated {
        loopback_only()?;
        // Every port may be opened in this namespace of the run's own: a service standing in
        // for a host of the internet listens on 80 and 443, and in a user namespace the
        // command is not root. Best effort (the setting is per namespace since Linux 4.11).
        if let Err(e) = write_file(c"/proc/sys/net/ipv4/ip_unprivileged_port_start", b"0\n") {
            report(fd, REC_NOTE, NOTE_LOW_PORTS, e);
        }
    }
    if let Some(root) = &plan.root {
        enter_root(plan, root)?;
    } else if attempt.flags & libc::CLONE_NEWNS != 0 {
        set_up_mounts(plan, attempt, isolated);
    }
    Ok(())
}

/// A (confined runs): B's id maps, written from the parent namespace, which alone may map
/// another uid than B's own. `setgroups` is denied first when the plan says so (an
/// unprivileged writer must).
fn write_maps(plan: &Plan, pid: pid_t) -> Result<(), (i32, i32)> {
    let Some((uid_map, gid_map, deny)) = &plan.parent_maps else {
        return Ok(());
    };
    let mut buf = [0u8; 64];
    if *deny {
        let path = proc_file(&mut buf, pid, b"setgroups").ok_or((STEP_SETGROUPS_PARENT, 0))?;
        write_file(path, b"deny\n").map_err(|e| (STEP_SETGROUPS_PARENT, e))?;
    }
    let path = proc_file(&mut buf, pid, b"uid_map").ok_or((STEP_UID_MAP, 0))?;
    write_file(path, uid_map.as_bytes()).map_err(|e| (STEP_UID_MAP, e))?;
    let path = proc_file(&mut buf, pid, b"gid_map").ok_or((STEP_GID_MAP, 0))?;
    write_file(path, gid_map.as_bytes()).map_err(|e| (STEP_GID_MAP, e))?;
    Ok(())
}

/// `/proc/<pid>/<leaf>` as a C string in `buf`, written without allocating.
fn proc_file<'a>(buf: &'a mut [u8; 64], pid: pid_t, leaf: &[u8]) -> Option<&'a CStr> {
    let mut digits = [0u8; 12];
    let mut n = 0;
    let mut v = u32::try_from(pid).ok()?;
    loop {
        *digits.get_mut(n)? = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut len = 0;
    let mut put = |b: u8| -> Option<()> {
        *buf.get_mut(len)? = b;
        len += 1;
        Some(())
    };
    for b in b"/proc/" {
        put(*b)?;
    }
    for i in (0..n).rev() {
        put(*digits.get(i)?)?;
    }
    put(b'/')?;
    for b in leaf {
        put(*b)?;
    }
    put(0)?;
    CStr::from_bytes_with_nul(buf.get(..len)?).ok()
}

/// C's code: its own session, the limits; then `Command::spawn` goes on to `exec`.
fn stage_c(plan: &Plan, attempt: Attempt) -> io::Result<()> {
    let fd = plan.report_fd;
    // A session of its own, hence a process group of its own, and no controlling terminal.
    // SAFETY: setsid takes no arguments; C is not a process group leader, so it succeeds.
    if unsafe { libc::setsid() } < 0 {
        report(fd, REC_FAIL, STEP_SETSID, errno());
        exit(EXIT_SETUP);
    }
    // No core files in the work tree.
    let _ = set_limit(libc::RLIMIT_CORE, 0);
    if let Some(bytes) = plan.memory_limit
        && let Err(e) = set_limit(libc::RLIMIT_AS, bytes)
    {
        report(fd, REC_FAIL, STEP_RLIMIT_AS, e);
        exit(EXIT_SETUP);
    }
    if attempt.user
        && let Some(n) = plan.nproc_limit
        // B counts too: it is the namespace's other process of this user.
        && let Err(e) = set_limit(libc::RLIMIT_NPROC, n.saturating_add(1))
    {
        report(fd, REC_FAIL, STEP_RLIMIT_NPROC, e);
        exit(EXIT_SETUP);
    }
    if let Some(root) = &plan.root {
        // The host's view (unconfined): only the working directory, inside the new root.
        let entered = if root.confined {
            confine_command(root)
        } else if unsafe { libc::chdir(root.cwd.as_ptr()) } != 0 {
            // SAFETY (above): chdir with a C string made before the fork.
            Err((STEP_CHDIR, errno()))
        } else {
            Ok(())
        };
        if let Err((step, e)) = entered {
            report(fd, REC_FAIL, step, e);
            exit(EXIT_SETUP);
        }
    }
    Ok(())
}
