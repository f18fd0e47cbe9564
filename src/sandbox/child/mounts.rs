//! B's mounts in its own mount namespace (runs without a root of their own), and its network
//! namespace where only loopback answers. Between `fork` and `exec`, as all of [`super`]:
//! async-signal-safe system calls on memory prepared before the fork only.

use std::ffi::CStr;

use libc::c_int;

use super::sys::{close, errno, report};
use super::{
    Attempt, NOTE_BIND, NOTE_CGROUP, NOTE_HOSTS, NOTE_PRIVATE_MOUNTS, NOTE_PROC, NOTE_RESOLV,
    NOTE_TMP, Plan, REC_NOTE, STEP_LO_SOCKET, STEP_LO_UP, STEP_ROUTE,
};

/// B's mounts, in its own mount namespace: all made private first (or nothing is mounted),
/// then /proc, the hidden cgroup hierarchy, the name files, the binds and /tmp. Each is best
/// effort: a failure is a note.
pub(super) fn set_up_mounts(plan: &Plan, attempt: Attempt, isolated: bool) {
    let fd = plan.report_fd;
    if !make_private() {
        // Mounting anything now could show on the host: mount nothing.
        report(fd, REC_NOTE, NOTE_PRIVATE_MOUNTS, errno());
        return;
    }
    if attempt.flags & libc::CLONE_NEWPID != 0 {
        // SAFETY: mount with static C strings and a null data pointer.
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
    // SAFETY: mount with static C strings.
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
pub(super) fn make_private() -> bool {
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
pub(super) fn loopback_only() -> Result<(), (i32, i32)> {
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
