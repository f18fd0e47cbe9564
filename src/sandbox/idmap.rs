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
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::child;
use super::confine::SANDBOX_ID;
use super::root::{RootOp, RootPlan};
use super::{SandboxError, c_path};

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
/// Shows each of `dirs` (writable trees of a run as root) through an idmapped mount where the
/// kernel and its filesystem allow it, in `plan`'s binds; returns those it could not, whose
/// owner must then be changed for the run ([`super::confine::hand_over`]).
pub(super) fn idmap_writable(
    plan: &mut RootPlan,
    dirs: &[PathBuf],
) -> Result<Vec<PathBuf>, SandboxError> {
    let mut walked = Vec::new();
    for dir in dirs {
        let host = c_path(dir)?;
        let mut done = false;
        for op in &mut plan.ops {
            let RootOp::Bind {
                from,
                read_only: false,
                early: true,
                slot,
                idmapped,
                ..
            } = op
            else {
                continue;
            };
            if *from != host || *idmapped {
                continue;
            }
            let Some(tree) = idmapped_tree(dir) else {
                break;
            };
            if plan.prepared.len() <= *slot {
                plan.prepared.resize(slot.saturating_add(1), -1);
            }
            if let Some(place) = plan.prepared.get_mut(*slot) {
                *place = tree.as_raw_fd();
            }
            plan.held.push(tree);
            *idmapped = true;
            done = true;
        }
        if !done {
            walked.push(dir.clone());
        }
    }
    Ok(walked)
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
    let raw = child::open_tree(&path).map_err(io::Error::from_raw_os_error)?;
    // SAFETY: open_tree returned this descriptor, owned by nothing else.
    let tree = unsafe { OwnedFd::from_raw_fd(raw) };
    child::set_attributes_mapped(
        tree.as_raw_fd(),
        c"",
        (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as libc::c_uint,
        child::MOUNT_ATTR_IDMAP | child::MOUNT_ATTR_NOSUID | child::MOUNT_ATTR_NODEV,
        u64::try_from(ns.as_raw_fd()).unwrap_or(u64::MAX),
    )
    .map_err(io::Error::from_raw_os_error)?;
    Ok(tree)
}
