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
//!   `/etc/resolv.conf`, the run's `/etc/hosts` and its other files in place, forks **C**, reaps every orphan, and
//!   reports C's wait status. When B ends, the kernel kills whatever is left in the namespace;
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

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;

use libc::{c_int, pid_t};

use super::confine::MAX_TASKS;
use super::root::{MAX_BINDS, RootOp, RootPlan};

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

/// B (confined runs): builds the run's root on a tmpfs from the plan's steps, enters it with
/// `pivot_root`, detaches the old root, and makes the new one read-only. Any failure fails
/// the run: a confined command never runs half-confined.
fn enter_root(plan: &Plan, root: &RootPlan) -> Result<(), (i32, i32)> {
    let fd = plan.report_fd;
    if !make_private() {
        return Err((STEP_ROOT_PRIVATE, errno()));
    }
    // The host's sources first, while B still has the caller's identity (as root, its uid 0
    // is not mapped in the namespace, but it reaches every host path).
    let mut fds: [c_int; MAX_BINDS] = [-1; MAX_BINDS];
    let mut index: i32 = 0;
    for op in &root.ops {
        if let RootOp::Bind {
            from,
            early: true,
            slot,
            ..
        } = op
        {
            // A tree swe-ark idmapped before the fork is this process's copy of its descriptor.
            let opened = match root.prepared.get(*slot) {
                Some(&prepared) if prepared >= 0 => Ok(prepared),
                _ => open_tree(from),
            };
            match (opened, fds.get_mut(*slot)) {
                (Ok(fd), Some(place)) => *place = fd,
                (Err(e), _) => {
                    report(fd, REC_ROOT_OP, index, e);
                    return Err((STEP_ROOT_OP, e));
                }
                (Ok(fd), None) => {
                    close(fd);
                    return Err((STEP_ROOT_OP, libc::E2BIG));
                }
            }
        }
        index = index.saturating_add(1);
    }
    // Then the namespace's own root (as root, SANDBOX_ID outside) owns what is made: an inode
    // of an owner the namespace cannot name cannot be created (EOVERFLOW).
    // SAFETY: setfsuid and setfsgid with integer arguments, the system calls themselves.
    unsafe {
        libc::syscall(libc::SYS_setfsuid, 0);
        libc::syscall(libc::SYS_setfsgid, 0);
    }
    // SAFETY: as above.
    if unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            root.root.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            c"mode=0755,uid=0,gid=0,size=1m".as_ptr().cast(),
        )
    } != 0
    {
        return Err((STEP_ROOT_TMPFS, errno()));
    }
    let mut index: i32 = 0;
    for op in &root.ops {
        if let Err(e) = root_op(op, &mut fds) {
            if matches!(op, RootOp::Devpts(_)) {
                report(fd, REC_NOTE, NOTE_DEVPTS, e);
            } else {
                report(fd, REC_ROOT_OP, index, e);
                return Err((STEP_ROOT_OP, e));
            }
        }
        index = index.saturating_add(1);
    }
    // SAFETY: mkdir with a C string.
    if unsafe { libc::mkdir(root.old_root.as_ptr(), 0o700) } != 0 && errno() != libc::EEXIST {
        return Err((STEP_OLD_ROOT, errno()));
    }
    // SAFETY: pivot_root with two C strings (the system call: the C library has no wrapper).
    if unsafe {
        libc::syscall(
            libc::SYS_pivot_root,
            root.root.as_ptr(),
            root.old_root.as_ptr(),
        )
    } != 0
    {
        return Err((STEP_PIVOT_ROOT, errno()));
    }
    // SAFETY: chdir, umount2 and rmdir with static C strings.
    unsafe {
        if libc::chdir(c"/".as_ptr()) != 0
            || libc::umount2(c"/.oldroot".as_ptr(), libc::MNT_DETACH) != 0
        {
            return Err((STEP_OLD_ROOT, errno()));
        }
        libc::rmdir(c"/.oldroot".as_ptr());
    }
    set_attributes(
        libc::AT_FDCWD,
        c"/",
        0,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
    )
    .map_err(|e| (STEP_ROOT_READ_ONLY, e))
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub(super) const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub(super) const MOUNT_ATTR_NODEV: u64 = 0x4;
pub(super) const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;

/// A detached copy of the mount tree at `path` (`open_tree(OPEN_TREE_CLONE | AT_RECURSIVE)`).
pub(super) fn open_tree(path: &CStr) -> Result<c_int, i32> {
    let flags =
        OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_RECURSIVE as libc::c_uint;
    // SAFETY: open_tree with a C string and integer flags.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags) };
    if fd < 0 {
        return Err(errno());
    }
    c_int::try_from(fd).map_err(|_| libc::EBADF)
}

/// One step of the new root; the errno when it failed.
fn root_op(op: &RootOp, fds: &mut [c_int; MAX_BINDS]) -> Result<(), i32> {
    let ok = |r: c_int| if r == 0 { Ok(()) } else { Err(errno()) };
    // SAFETY (each call below): system calls on C strings made before the fork.
    match op {
        RootOp::Dir(path) => {
            if unsafe { libc::mkdir(path.as_ptr(), 0o755) } != 0 && errno() != libc::EEXIST {
                return Err(errno());
            }
            Ok(())
        }
        RootOp::File(path) => {
            let f = unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
                    0o644,
                )
            };
            if f < 0 {
                return Err(errno());
            }
            close(f);
            Ok(())
        }
        RootOp::Symlink(target, path) => {
            if unsafe { libc::symlink(target.as_ptr(), path.as_ptr()) } != 0
                && errno() != libc::EEXIST
            {
                return Err(errno());
            }
            Ok(())
        }
        RootOp::Bind {
            from,
            to,
            read_only,
            devices,
            early,
            slot,
            idmapped,
        } => {
            let tree = if *early {
                let place = fds.get_mut(*slot).ok_or(libc::E2BIG)?;
                std::mem::replace(place, -1)
            } else {
                open_tree(from)?
            };
            let mut attrs = MOUNT_ATTR_NOSUID;
            if !devices {
                attrs |= MOUNT_ATTR_NODEV;
            }
            if *read_only {
                attrs |= MOUNT_ATTR_RDONLY;
            }
            let empty = c"";
            // An idmapped tree's attributes were set with its mapping, by swe-ark.
            let set = if *idmapped {
                Ok(())
            } else {
                set_attributes(
                    tree,
                    empty,
                    (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as libc::c_uint,
                    attrs,
                )
            };
            let moved = set.is_ok()
                && unsafe {
                    libc::syscall(
                        libc::SYS_move_mount,
                        tree,
                        empty.as_ptr(),
                        libc::AT_FDCWD,
                        to.as_ptr(),
                        MOVE_MOUNT_F_EMPTY_PATH,
                    )
                } == 0;
            let e = errno();
            close(tree);
            if moved { Ok(()) } else { Err(e) }
        }
        RootOp::Tmpfs { to, options } => ok(unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                to.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                options.as_ptr().cast(),
            )
        }),
        RootOp::Proc(path) => ok(unsafe {
            libc::mount(
                c"proc".as_ptr(),
                path.as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            )
        }),
        RootOp::Devpts(path) => ok(unsafe {
            libc::mount(
                c"devpts".as_ptr(),
                path.as_ptr(),
                c"devpts".as_ptr(),
                libc::MS_NOSUID | libc::MS_NOEXEC,
                c"newinstance,ptmxmode=0666,mode=0620".as_ptr().cast(),
            )
        }),
    }
}

/// Sets mount attributes on `path` (and, when `recursive`, every mount below it) with
/// `mount_setattr`, which only adds them: the flags a mount inherited from the host (locked
/// in a user namespace) stay as they are. `dirfd` and `path` name the mount as `openat`'s do
/// (with `AT_EMPTY_PATH` in `flags`, a detached tree's descriptor).
fn set_attributes(dirfd: c_int, path: &CStr, flags: libc::c_uint, attrs: u64) -> Result<(), i32> {
    set_attributes_mapped(dirfd, path, flags, attrs, 0)
}

/// [`set_attributes`] with the user namespace `userns_fd` names, which `MOUNT_ATTR_IDMAP` in
/// `attrs` maps the mount's owners through (ignored without it).
pub(super) fn set_attributes_mapped(
    dirfd: c_int,
    path: &CStr,
    flags: libc::c_uint,
    attrs: u64,
    userns_fd: u64,
) -> Result<(), i32> {
    let attr = MountAttr {
        attr_set: attrs,
        attr_clr: 0,
        propagation: 0,
        userns_fd,
    };
    // SAFETY: mount_setattr with a C string and a struct of its documented layout and size.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r != 0 {
        return Err(errno());
    }
    Ok(())
}

/// B's mounts, in its own mount namespace: all made private first (or nothing is mounted),
/// then /proc, the hidden cgroup hierarchy, the name files, the binds and /tmp. Each is best
/// effort: a failure is a note.
fn set_up_mounts(plan: &Plan, attempt: Attempt, isolated: bool) {
    let fd = plan.report_fd;
    if !make_private() {
        // Mounting anything now could show on the host: mount nothing.
        report(fd, REC_NOTE, NOTE_PRIVATE_MOUNTS, errno());
        return;
    }
    if attempt.flags & libc::CLONE_NEWPID != 0 {
        // SAFETY: as above.
        let proc = unsafe {
            libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            )
        };
        if proc != 0 {
            report(fd, REC_NOTE, NOTE_PROC, errno());
        }
    }
    // The host's cgroup hierarchy, hidden under an empty read-only tmpfs: what a test reads
    // there describes the host, not the run (pylint takes a cgroup v1 `cpu.shares` of 1024
    // for one CPU and skips its multi-core tests), and SWE-bench's containers on cgroup
    // v2 hosts show no such file.
    // SAFETY: as above.
    let cgroup = unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            c"/sys/fs/cgroup".as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_RDONLY,
            c"size=4k".as_ptr().cast(),
        )
    };
    if cgroup != 0 {
        report(fd, REC_NOTE, NOTE_CGROUP, errno());
    }
    if isolated
        && let Some(resolv) = &plan.resolv_conf
        && !bind_mount(resolv, c"/etc/resolv.conf")
    {
        report(fd, REC_NOTE, NOTE_RESOLV, errno());
    }
    if let Some(hosts) = &plan.hosts_file
        && !bind_mount(hosts, c"/etc/hosts")
    {
        report(fd, REC_NOTE, NOTE_HOSTS, errno());
    }
    let mut i: i32 = 0;
    for (from, to) in &plan.binds {
        if !bind_mount(from, to) {
            report(fd, REC_NOTE, NOTE_BIND.saturating_add(i), errno());
        }
        i = i.saturating_add(1);
    }
    if let Some(tmp) = &plan.tmp
        && !bind_mount(tmp, c"/tmp")
    {
        report(fd, REC_NOTE, NOTE_TMP, errno());
    }
}

/// Makes every mount of the namespace private, so that nothing mounted here shows on the
/// host; whether it worked (errno says why not).
fn make_private() -> bool {
    // SAFETY: mount with a static C string and null pointers where the call allows them.
    unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) == 0
    }
}

/// Bind-mounts `from` on `to` (C strings made before the fork); whether it worked.
fn bind_mount(from: &CStr, to: &CStr) -> bool {
    // SAFETY: mount with C strings and null pointers where the call allows them.
    let bind = unsafe {
        libc::mount(
            from.as_ptr(),
            to.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    };
    bind == 0
}

/// In the new network namespace: `lo` up, and a default route through it, so that packets to
/// any other address are looped back, found not to be for this host, and dropped (forwarding is
/// off in a new namespace) without an ICMP error: connections time out, as behind a firewall.
fn loopback_only() -> Result<(), (i32, i32)> {
    // SAFETY: socket with integer arguments.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err((STEP_LO_SOCKET, errno()));
    }
    let result = configure_lo(sock);
    close(sock);
    result
}

fn configure_lo(sock: c_int) -> Result<(), (i32, i32)> {
    // SAFETY: all-zero is a valid ifreq and rtentry (integers, arrays, a null pointer).
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    ifr.ifr_name[0] = b'l' as libc::c_char;
    ifr.ifr_name[1] = b'o' as libc::c_char;
    // SAFETY: SIOCGIFFLAGS fills the flags of the named interface.
    if unsafe { libc::ioctl(sock, libc::SIOCGIFFLAGS as _, &mut ifr as *mut libc::ifreq) } != 0 {
        return Err((STEP_LO_UP, errno()));
    }
    // SAFETY: the union's flags member, which SIOCGIFFLAGS just wrote.
    unsafe {
        ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    }
    // SAFETY: SIOCSIFFLAGS reads the ifreq.
    if unsafe { libc::ioctl(sock, libc::SIOCSIFFLAGS as _, &ifr as *const libc::ifreq) } != 0 {
        return Err((STEP_LO_UP, errno()));
    }
    // SAFETY: as above.
    let mut route: libc::rtentry = unsafe { std::mem::zeroed() };
    set_any_inet(&mut route.rt_dst);
    set_any_inet(&mut route.rt_genmask);
    set_any_inet(&mut route.rt_gateway);
    route.rt_flags = libc::RTF_UP;
    // The kernel copies the name; it never writes through the pointer.
    route.rt_dev = c"lo".as_ptr() as *mut libc::c_char;
    // SAFETY: SIOCADDRT reads the rtentry and the device name it points to.
    if unsafe { libc::ioctl(sock, libc::SIOCADDRT as _, &route as *const libc::rtentry) } != 0 {
        return Err((STEP_ROUTE, errno()));
    }
    Ok(())
}

/// 0.0.0.0 as an IPv4 `sockaddr`.
fn set_any_inet(addr: &mut libc::sockaddr) {
    // SAFETY: sockaddr_in is no larger than sockaddr, and both are plain integers.
    let inet = unsafe { &mut *(addr as *mut libc::sockaddr as *mut libc::sockaddr_in) };
    inet.sin_family = libc::AF_INET as libc::sa_family_t;
    inet.sin_port = 0;
    inet.sin_addr = libc::in_addr { s_addr: 0 };
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

const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
const SECBIT_KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// C (confined runs): limits on file size and CPU time; root of its user namespace (one
/// unprivileged uid outside); no capabilities, now or after `exec` (root there gets none:
/// `SECBIT_NOROOT`); `no_new_privs`; its working directory again, inside the new root; and
/// last the seccomp filters.
fn confine_command(root: &RootPlan) -> Result<(), (i32, i32)> {
    // Never above MAX_TASKS (a lower limit set before stays: `set_limit` only lowers). It
    // counts the tasks of this uid in the run's own user namespace: this run's alone.
    set_limit(libc::RLIMIT_NPROC, MAX_TASKS).map_err(|e| (STEP_RLIMIT_NPROC, e))?;
    if let Some(n) = root.file_size_limit {
        set_limit(libc::RLIMIT_FSIZE, n).map_err(|e| (STEP_RLIMIT_FSIZE, e))?;
    }
    if let Some(n) = root.cpu_limit {
        set_limit(libc::RLIMIT_CPU, n).map_err(|e| (STEP_RLIMIT_CPU, e))?;
    }
    // SAFETY (each call below): system calls with integer arguments, or pointers to
    // structs on this stack and to programs made before the fork.
    unsafe {
        // The system calls, not the C library's wrappers: these would signal every thread
        // the parent had (glibc's set*id broadcast), and after a raw clone there is one.
        if root.become_root
            && (libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) != 0
                || libc::syscall(libc::SYS_setresgid, 0, 0, 0) != 0
                || libc::syscall(libc::SYS_setresuid, 0, 0, 0) != 0)
        {
            return Err((STEP_IDS, errno()));
        }
        if libc::prctl(
            libc::PR_SET_SECUREBITS,
            SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_KEEP_CAPS_LOCKED,
            0,
            0,
            0,
        ) != 0
        {
            return Err((STEP_CAPABILITIES, errno()));
        }
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0
                && errno() != libc::EINVAL
            {
                return Err((STEP_CAPABILITIES, errno()));
            }
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        );
        let header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) != 0 {
            return Err((STEP_CAPABILITIES, errno()));
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) != 0 {
            return Err((STEP_NO_NEW_PRIVS, errno()));
        }
        if libc::chdir(root.cwd.as_ptr()) != 0 {
            return Err((STEP_CHDIR, errno()));
        }
        for filter in &root.filters {
            let prog = libc::sock_fprog {
                len: filter.len() as libc::c_ushort,
                filter: filter.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                &prog as *const libc::sock_fprog,
                0,
                0,
            ) != 0
            {
                return Err((STEP_SECCOMP, errno()));
            }
        }
    }
    Ok(())
}

/// Lowers both the soft and hard limit to `value` (never above the current hard limit, which
/// only a privileged process may raise).
fn set_limit(resource: libc::__rlimit_resource_t, value: u64) -> Result<(), i32> {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct.
    if unsafe { libc::getrlimit(resource, &mut current) } != 0 {
        return Err(errno());
    }
    let value = value.min(current.rlim_max);
    let new = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: setrlimit reads the struct.
    if unsafe { libc::setrlimit(resource, &new) } != 0 {
        return Err(errno());
    }
    Ok(())
}

/// SIGKILLs every child of this (single-threaded) process and reaps them, until none is left.
/// A subreaper inherits the children of each process it kills, so this takes the tree down
/// level by level.
fn kill_children(report_fd: RawFd) {
    let mut buf = [0u8; 512];
    loop {
        // SAFETY: open with a static C string.
        let list = unsafe {
            libc::open(
                c"/proc/thread-self/children".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        if list < 0 {
            report(report_fd, REC_NOTE, NOTE_CHILDREN_UNLISTED, errno());
            reap_ended();
            return;
        }
        let mut pid: pid_t = 0;
        loop {
            // SAFETY: read into a stack buffer of the given length.
            let n = unsafe { libc::read(list, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            for &byte in buf.iter().take(n as usize) {
                if byte.is_ascii_digit() {
                    pid = pid
                        .saturating_mul(10)
                        .saturating_add(pid_t::from(byte - b'0'));
                } else {
                    kill_pid(pid);
                    pid = 0;
                }
            }
        }
        kill_pid(pid);
        close(list);
        if !reap_ended() {
            return;
        }
        sleep_ms(5);
    }
}

/// The command may not read or trace A and B (C's `exec` makes C dumpable again).
fn not_dumpable() {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0) };
}

fn kill_pid(pid: pid_t) {
    if pid > 0 {
        // SAFETY: kill with integer arguments; `pid` is our child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Reaps every child that has ended; false when no child is left.
fn reap_ended() -> bool {
    loop {
        let mut st: c_int = 0;
        // SAFETY: waitpid for any child, without blocking.
        let r = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG | libc::__WALL) };
        if r > 0 {
            continue;
        }
        if r == 0 {
            return true;
        }
        if errno() == libc::EINTR {
            continue;
        }
        return false;
    }
}

/// Blocks until `pid` (a child) ends; its raw wait status.
fn wait_for(pid: pid_t) -> c_int {
    loop {
        let mut st: c_int = 0;
        // SAFETY: waitpid on our own child.
        let r = unsafe { libc::waitpid(pid, &mut st, libc::__WALL) };
        if r == pid {
            return st;
        }
        if r < 0 && errno() != libc::EINTR {
            return 0;
        }
    }
}

/// `fork` as a raw system call, with extra clone flags (namespaces). The child runs on a copy
/// of the stack, like after `fork`.
fn raw_clone(flags: c_int) -> pid_t {
    let flags = (flags | libc::SIGCHLD) as libc::c_ulong;
    // SAFETY: clone without CLONE_VM and with a null stack behaves as fork; the arguments after
    // the stack (parent tid, child tid, tls) are unused without the flags that read them.
    unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        ) as pid_t
    }
}

/// Closes every descriptor but `keep` (at most a few, any order).
fn close_all_except(keep: &[RawFd]) {
    let mut sorted = [-1 as RawFd; 4];
    let mut count = 0;
    for &fd in keep {
        if fd >= 0 && count < sorted.len() {
            sorted[count] = fd;
            count += 1;
        }
    }
    let sorted = &mut sorted[..count];
    sorted.sort_unstable();
    let mut next: u32 = 0;
    for &fd in sorted.iter() {
        let fd = fd as u32;
        if fd > next {
            close_range(next, fd - 1);
        }
        next = fd.saturating_add(1);
    }
    close_range(next, u32::MAX);
}

fn close_range(first: u32, last: u32) {
    // SAFETY: close_range with integer arguments (Linux 5.9).
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            last as libc::c_uint,
            0 as libc::c_uint,
        )
    };
    if r != 0 {
        let end = last.min(65_535);
        let mut fd = first;
        while fd <= end {
            close(fd as c_int);
            fd += 1;
        }
    }
}

fn close(fd: c_int) {
    // SAFETY: closing a descriptor this process owns (or a stale number: EBADF, ignored).
    unsafe { libc::close(fd) };
}

/// Writes `data` to an existing file in one `write`, as /proc and cgroup files want.
fn write_file(path: &CStr, data: &[u8]) -> Result<(), i32> {
    // SAFETY: open with a C string made before the fork.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: write from a live slice.
    let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    let result = if n < 0 {
        Err(errno())
    } else if n as usize != data.len() {
        Err(libc::EIO)
    } else {
        Ok(())
    };
    close(fd);
    result
}

/// One report record; errors are ignored (the parent is gone, or the pipe is full: neither
/// can be helped here).
pub(super) fn report(fd: RawFd, kind: u32, a: i32, b: i32) {
    let mut record = [0u8; 12];
    record[..4].copy_from_slice(&kind.to_ne_bytes());
    record[4..8].copy_from_slice(&a.to_ne_bytes());
    record[8..].copy_from_slice(&b.to_ne_bytes());
    // SAFETY: write from a stack buffer.
    unsafe { libc::write(fd, record.as_ptr().cast(), record.len()) };
}

fn write_pair(fd: RawFd, a: i32, b: i32) {
    let mut pair = [0u8; 8];
    pair[..4].copy_from_slice(&a.to_ne_bytes());
    pair[4..].copy_from_slice(&b.to_ne_bytes());
    // SAFETY: write from a stack buffer.
    unsafe { libc::write(fd, pair.as_ptr().cast(), pair.len()) };
}

/// B's answer on the sync pipe: (0, 0) when set up, (step, errno) when not, and
/// (STEP_INIT_DIED, 0) when B ended without answering.
fn read_pair(fd: RawFd) -> (i32, i32) {
    let mut pair = [0u8; 8];
    let mut got = 0usize;
    while got < pair.len() {
        let rest = &mut pair[got..];
        // SAFETY: read into the rest of a stack buffer.
        let n = unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) };
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            return (STEP_INIT_DIED, 0);
        }
        got += n as usize;
    }
    let a = i32::from_ne_bytes([pair[0], pair[1], pair[2], pair[3]]);
    let b = i32::from_ne_bytes([pair[4], pair[5], pair[6], pair[7]]);
    (a, b)
}

fn errno() -> i32 {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() }
}

fn now_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the struct.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1000)
        .saturating_add(ts.tv_nsec as u64 / 1_000_000)
}

fn clamp_ms(ms: u64) -> c_int {
    // At least 1 ms (0 would spin), at most what poll takes.
    ms.clamp(1, c_int::MAX as u64) as c_int
}

fn sleep_ms(ms: u64) {
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: (ms.min(999) * 1_000_000) as libc::c_long,
    };
    // SAFETY: nanosleep reads the struct; the remainder pointer may be null.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

fn exit(code: c_int) -> ! {
    // SAFETY: _exit ends the process without running anything of the parent's.
    unsafe { libc::_exit(code) }
}
