//! The system calls the helpers share: limits, killing and reaping, cloning, descriptors, the
//! report and sync pipes, errno, clocks. Between `fork` and `exec`, as all of [`super`]:
//! async-signal-safe calls on stack buffers or memory prepared before the fork, no allocation,
//! no formatting, nothing that can panic.

use std::ffi::CStr;
use std::os::fd::RawFd;

use libc::{c_int, pid_t};

use super::{NOTE_CHILDREN_UNLISTED, REC_NOTE, STEP_INIT_DIED};

/// Lowers both the soft and hard limit to `value` (never above the current hard limit, which
/// only a privileged process may raise).
pub(super) fn set_limit(resource: libc::__rlimit_resource_t, value: u64) -> Result<(), i32> {
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
pub(super) fn kill_children(report_fd: RawFd) {
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
pub(super) fn not_dumpable() {
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
pub(super) fn wait_for(pid: pid_t) -> c_int {
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
pub(super) fn raw_clone(flags: c_int) -> pid_t {
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
pub(super) fn close_all_except(keep: &[RawFd]) {
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

pub(super) fn close(fd: c_int) {
    // SAFETY: closing a descriptor this process owns (or a stale number: EBADF, ignored).
    unsafe { libc::close(fd) };
}

/// Writes `data` to an existing file in one `write`, as /proc and cgroup files want.
pub(super) fn write_file(path: &CStr, data: &[u8]) -> Result<(), i32> {
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

pub(super) fn write_pair(fd: RawFd, a: i32, b: i32) {
    let mut pair = [0u8; 8];
    pair[..4].copy_from_slice(&a.to_ne_bytes());
    pair[4..].copy_from_slice(&b.to_ne_bytes());
    // SAFETY: write from a stack buffer.
    unsafe { libc::write(fd, pair.as_ptr().cast(), pair.len()) };
}

/// B's answer on the sync pipe: (0, 0) when set up, (step, errno) when not, and
/// (STEP_INIT_DIED, 0) when B ended without answering.
pub(super) fn read_pair(fd: RawFd) -> (i32, i32) {
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

pub(super) fn errno() -> i32 {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() }
}

pub(super) fn now_ms() -> u64 {
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

pub(super) fn clamp_ms(ms: u64) -> c_int {
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

pub(super) fn exit(code: c_int) -> ! {
    // SAFETY: _exit ends the process without running anything of the parent's.
    unsafe { libc::_exit(code) }
}
