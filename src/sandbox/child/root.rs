//! B (runs with a root of their own) building the run's root from the plan's steps and
//! entering it, and C (confined runs) confining itself: ids, capabilities, `no_new_privs`,
//! seccomp. Between `fork` and `exec`, as all of [`super`]: async-signal-safe system calls
//! on memory prepared before the fork only, no allocation, no formatting.
//!
//! `open_tree` and `mount_setattr` also serve swe-ark itself, before the fork (`idmap.rs`).

use std::ffi::CStr;

use libc::c_int;

use super::mounts::make_private;
use super::sys::{close, errno, report, set_limit};
use super::{
    NOTE_DEVPTS, Plan, REC_NOTE, REC_ROOT_OP, STEP_CAPABILITIES, STEP_CHDIR, STEP_IDS,
    STEP_NO_NEW_PRIVS, STEP_OLD_ROOT, STEP_PIVOT_ROOT, STEP_RLIMIT_CPU, STEP_RLIMIT_FSIZE,
    STEP_RLIMIT_NPROC, STEP_ROOT_OP, STEP_ROOT_PRIVATE, STEP_ROOT_READ_ONLY, STEP_ROOT_TMPFS,
    STEP_SECCOMP,
};
use crate::sandbox::confine::MAX_TASKS;
use crate::sandbox::root::{MAX_BINDS, RootOp, RootPlan};

/// B (confined runs): builds the run's root on a tmpfs from the plan's steps, enters it with
/// `pivot_root`, detaches the old root, and makes the new one read-only. Any failure fails
/// the run: a confined command never runs half-confined.
pub(super) fn enter_root(plan: &Plan, root: &RootPlan) -> Result<(), (i32, i32)> {
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
        if let RootOp::Overlay { layers, .. } = op {
            for (path, number) in layers {
                if let Err(e) = reopen_on(path, *number) {
                    report(fd, REC_ROOT_OP, index, e);
                    return Err((STEP_ROOT_OP, e));
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
    // SAFETY: mount with static C strings and the root's path, made before the fork.
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
pub(in crate::sandbox) const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub(in crate::sandbox) const MOUNT_ATTR_NODEV: u64 = 0x4;
pub(in crate::sandbox) const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

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
pub(in crate::sandbox) fn open_tree(path: &CStr) -> Result<c_int, i32> {
    let flags =
        OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_RECURSIVE as libc::c_uint;
    // SAFETY: open_tree with a C string and integer flags.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags) };
    if fd < 0 {
        return Err(errno());
    }
    c_int::try_from(fd).map_err(|_| libc::EBADF)
}

/// Opens the directory `path` (`O_PATH`) in this mount namespace on descriptor `number`.
fn reopen_on(path: &CStr, number: c_int) -> Result<(), i32> {
    // SAFETY: open, dup3 and close with a C string made before the fork and integers.
    unsafe {
        let opened = libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if opened < 0 {
            return Err(errno());
        }
        let moved = libc::dup3(opened, number, libc::O_CLOEXEC);
        let e = errno();
        close(opened);
        if moved < 0 {
            return Err(e);
        }
    }
    Ok(())
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
        // The layers are named by descriptor (reopen_on).
        RootOp::Overlay { to, options, .. } => ok(unsafe {
            libc::mount(
                c"overlay".as_ptr(),
                to.as_ptr(),
                c"overlay".as_ptr(),
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
pub(in crate::sandbox) fn set_attributes_mapped(
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

/// The capabilities a confined command keeps: those by which a container's root (Docker's
/// default set) reads, writes and changes the files it owns whatever their mode bits
/// (`CAP_CHOWN`, `CAP_DAC_OVERRIDE`, `CAP_FOWNER`). Tests are written for that root: one that
/// makes a directory unreadable and expects a permission error fails there, as the published
/// results record. In the run's user namespace they reach only files whose owner and group
/// are its one mapped id, which it owns anyway; the host's files are not its own, read-only
/// mounts stay read-only, and no set-id bit can be set (`CAP_FSETID` is not kept).
pub(crate) const KEPT_CAPABILITIES: [u32; 3] = [0, 1, 3];

/// [`KEPT_CAPABILITIES`] as a mask, as `/proc/PID/status` shows it.
pub(crate) fn kept_capability_mask() -> u64 {
    KEPT_CAPABILITIES.iter().fold(0, |m, c| m | (1u64 << c))
}

/// C (confined runs): limits on file size and CPU time; root of its user namespace (one
/// unprivileged uid outside); only the [`KEPT_CAPABILITIES`], now and after `exec` (as
/// ambient ones: root there gets no others, `SECBIT_NOROOT`); `no_new_privs`; its working
/// directory again, inside the new root; and last the seccomp filters.
pub(super) fn confine_command(root: &RootPlan) -> Result<(), (i32, i32)> {
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
        for cap in (0..64).filter(|c| !KEPT_CAPABILITIES.contains(c)) {
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
        // The kept ones are all below 32: the first word.
        let kept = kept_capability_mask() as u32;
        let data = [
            CapData {
                effective: kept,
                permitted: kept,
                inheritable: kept,
            },
            CapData {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
        ];
        if libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) != 0 {
            return Err((STEP_CAPABILITIES, errno()));
        }
        // Ambient, so that they survive `exec` of a program with no file capabilities.
        for cap in KEPT_CAPABILITIES {
            if libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong,
                cap as libc::c_ulong,
                0,
                0,
            ) != 0
            {
                return Err((STEP_CAPABILITIES, errno()));
            }
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
