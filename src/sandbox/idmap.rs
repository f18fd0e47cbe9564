//! Idmapped mounts (docs/SANDBOX.md, "Writable trees as root"): when swe-ark runs as root, a
//! confined command is [`SANDBOX_ID`] outside, and the trees it may write (work tree,
//! environment copy, `/tmp`) are root's. Rather than giving every file to that uid before the
//! run and back after it (a walk over each tree, twice per command), the trees are shown to the
//! command through idmapped mounts: a detached copy of each tree (`open_tree`) whose files
//! owned by 0 appear owned by [`SANDBOX_ID`] (`mount_setattr` with `MOUNT_ATTR_IDMAP` and a
//! user namespace mapping 0 to it). On disk nothing changes: what the command creates is
//! stored as root's. B then moves the prepared tree into the run's root (`move_mount`).
//!
//! Only the initial user namespace's root may idmap a filesystem mounted there, so this runs
//! in swe-ark itself, before the fork. A filesystem without idmapped mounts (NFS, old kernels)
//! falls back to the walk ([`super::confine::hand_over`]).

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::confine::SANDBOX_ID;

const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// A user namespace whose only uid and gid, 0, is [`SANDBOX_ID`] outside: the mapping of every
/// idmapped tree. Made once per process (a short-lived `/bin/sh` unshares it; its descriptor
/// keeps it alive); `None` where it cannot be made.
fn mapping_namespace() -> Option<&'static OwnedFd> {
    static NS: OnceLock<Option<OwnedFd>> = OnceLock::new();
    NS.get_or_init(|| match make_mapping_namespace() {
        Ok(fd) => Some(fd),
        Err(e) => {
            tracing::debug!("sandbox: no user namespace for idmapped mounts: {e}");
            None
        }
    })
    .as_ref()
}

fn make_mapping_namespace() -> io::Result<OwnedFd> {
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", "read _"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: unshare is async-signal-safe; the forked child is single-threaded.
    unsafe {
        cmd.pre_exec(|| {
            if libc::unshare(libc::CLONE_NEWUSER) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let pid = child.id();
    let map = format!("0 {SANDBOX_ID} 1\n");
    let opened = fs::write(format!("/proc/{pid}/uid_map"), &map)
        .and_then(|()| fs::write(format!("/proc/{pid}/setgroups"), "deny"))
        .and_then(|()| fs::write(format!("/proc/{pid}/gid_map"), &map))
        .and_then(|()| File::open(format!("/proc/{pid}/ns/user")));
    // The shell reads its line, or end of file, and goes.
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(b"\n");
    }
    let _ = child.wait();
    Ok(OwnedFd::from(opened?))
}

/// A detached copy of the tree at `dir` (its mounts below included) in which what root owns
/// is [`SANDBOX_ID`]'s, never set-uid or device files: ready for B's `move_mount`. `None`
/// (with the reason logged) when the kernel or the filesystem cannot idmap it.
pub(super) fn idmapped_tree(dir: &Path) -> Option<OwnedFd> {
    let ns = mapping_namespace()?;
    match idmap(dir, ns) {
        Ok(fd) => Some(fd),
        Err(e) => {
            tracing::debug!(
                "sandbox: cannot idmap {} ({e}); its owner is changed for the run instead",
                dir.display()
            );
            None
        }
    }
}

fn idmap(dir: &Path, ns: &OwnedFd) -> io::Result<OwnedFd> {
    let path = super::c_path(dir).map_err(|e| io::Error::other(e.to_string()))?;
    let flags =
        OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_RECURSIVE as libc::c_uint;
    // SAFETY: open_tree with a C string and integer flags.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let raw = i32::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: open_tree returned this descriptor, owned by nothing else.
    let tree = unsafe { OwnedFd::from_raw_fd(raw) };
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        attr_clr: 0,
        propagation: 0,
        userns_fd: u64::try_from(ns.as_raw_fd()).unwrap_or(u64::MAX),
    };
    // SAFETY: mount_setattr with an empty C string and a struct of its documented layout.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(tree)
}
