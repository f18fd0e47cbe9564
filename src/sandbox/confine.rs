//! Confinement (docs/SANDBOX.md, "Confinement"): what a confined run sees and may do, prepared
//! before the fork. The command gets a root filesystem of its own (a tmpfs, with the system's
//! directories, a minimal `/etc`, the spec's paths bound in, its own `/proc`, `/dev`, `/tmp`
//! and `HOME`), runs as root of a user namespace whose one id is an unprivileged uid outside,
//! with no capabilities, `no_new_privs`, a seccomp filter, and limits on CPU time and file size.
//!
//! Everything here is ordinary code run before the fork: a [`Confine`] becomes a root
//! (`root.rs`) and a seccomp program, which `child/root.rs` carries out.

use std::fs;
use std::os::unix::fs::{MetadataExt, lchown};
use std::path::{Component, Path, PathBuf};

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

use super::root::SYSTEM_DIRS;
use super::{Mount, SandboxError, prepare};

/// The uid and gid a confined command has outside its user namespace when swe-ark runs as
/// root: `nobody` and `nogroup`'s. (Run by any other user, it is that user's own.)
pub const SANDBOX_ID: u32 = 65534;

/// RLIMIT_NPROC of every confined command, whatever else is asked: the tasks (processes and
/// threads) its one uid may have in its user namespace. Without it, a fork bomb in a run with
/// no `Spec::max_processes` (replay and validate give none) takes every pid of the machine
/// (tests/hostile.rs). Generous for a test suite: pytest-xdist's workers, thread pools.
pub(super) const MAX_TASKS: u64 = 4096;

/// [`Confine::tmpfs_size`] of [`Confine::new`]: 1 GiB.
pub const DEFAULT_TMPFS_SIZE: u64 = 1 << 30;

/// What a confined run may see and do beyond the system's directories.
#[derive(Debug, Clone)]
pub struct Confine {
    /// Directories the command may write, seen at their own paths (a work tree, an
    /// environment copy). As root, swe-ark shows what root owns in them as [`SANDBOX_ID`]'s
    /// through idmapped mounts (or, where a filesystem has none, gives it to that uid for the
    /// run and takes it back after).
    pub writable: Vec<PathBuf>,
    /// Directories or files it may read, at their own paths (an interpreter's installation,
    /// a wheelhouse).
    pub read_only: Vec<PathBuf>,
    /// Entries of the host's `/etc` it sees beyond the minimal set (what a service needs).
    pub etc: Vec<String>,
    /// The size of each of its tmpfs mounts (`/tmp`, `HOME`, `/dev/shm`), in bytes.
    pub tmpfs_size: u64,
    /// RLIMIT_FSIZE: the largest file it may write, in bytes.
    pub file_size_limit: Option<u64>,
    /// RLIMIT_CPU: the CPU seconds each of its processes may use.
    pub cpu_limit: Option<u64>,
    /// As root, show the writable trees through idmapped mounts where the filesystem has
    /// them (true, the default); false gives them to [`SANDBOX_ID`] for the run and back
    /// after it by walking them, as on a filesystem without idmapped mounts.
    pub idmap: bool,
}

impl Confine {
    /// Whether its paths can be given to a run: absolute, existing, the writable ones
    /// directories; and the working directory `cwd` among what the run sees (with `mounts`).
    pub(super) fn check(&self, cwd: &Path, mounts: &[Mount]) -> Result<(), SandboxError> {
        for (path, dir) in self
            .writable
            .iter()
            .map(|p| (p, true))
            .chain(self.read_only.iter().map(|p| (p, false)))
        {
            let ok = path.is_absolute()
                && fs::metadata(path).is_ok_and(|m| !dir || m.is_dir())
                && path
                    .components()
                    .all(|c| !matches!(c, Component::ParentDir));
            if !ok {
                return Err(SandboxError::InvalidSpec(format!(
                    "cannot show {} to a confined run: it is not an existing {}'s absolute path",
                    path.display(),
                    if dir {
                        "directory"
                    } else {
                        "file or directory"
                    }
                )));
            }
        }
        if !self.sees(cwd) && !mounts.iter().any(|m| cwd.starts_with(&m.at)) {
            return Err(SandboxError::InvalidSpec(format!(
                "the working directory {} is not among what the confined run sees",
                cwd.display()
            )));
        }
        Ok(())
    }

    /// Whether a confined run sees `path` (absolute): under a writable or read-only path, or
    /// under one of the system's directories.
    pub fn sees(&self, path: &Path) -> bool {
        self.writable
            .iter()
            .chain(&self.read_only)
            .map(PathBuf::as_path)
            .chain(SYSTEM_DIRS.iter().map(Path::new))
            .any(|p| path.starts_with(p))
    }

    /// Nothing writable or readable beyond the system, [`DEFAULT_TMPFS_SIZE`], no limits.
    pub fn new() -> Confine {
        Confine {
            writable: Vec::new(),
            read_only: Vec::new(),
            etc: Vec::new(),
            tmpfs_size: DEFAULT_TMPFS_SIZE,
            file_size_limit: None,
            cpu_limit: None,
            idmap: true,
        }
    }
}

impl Default for Confine {
    fn default() -> Confine {
        Confine::new()
    }
}

/// The system calls a test never needs, refused with EPERM: mounting and namespaces,
/// tracing other processes, kernel modules and kexec, keyrings, BPF, perf, handles to files by
/// number (`open_by_handle_at`, the classic container escape), the clock, swap, reboot.
const REFUSED: &[i64] = &[
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_syslog,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_vhangup,
    libc::SYS_lookup_dcookie,
    // io_uring's operations (openat among them) bypass seccomp's view of the arguments.
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];

/// The calls that create a file or set its mode, and which argument is the mode: refused
/// when it has a set-uid or set-gid bit.
const SET_ID_MODE_ARGS: &[(i64, u8)] = &[
    (libc::SYS_chmod, 1),
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (libc::SYS_fchmodat2, 2),
    (libc::SYS_open, 2),
    (libc::SYS_openat, 3),
    (libc::SYS_creat, 1),
    (libc::SYS_mknod, 1),
    (libc::SYS_mknodat, 2),
];

/// The seccomp programs of a confined run: the refused calls above, `clone` with any
/// namespace flag, a mode with a set-id bit ([`SET_ID_MODE_ARGS`]), and `clone3` and
/// `openat2` answered ENOSYS (their arguments are structures a filter cannot read; the C
/// library then falls back to `clone` and `openat`, as under Docker's default profile).
pub(super) fn seccomp_filters() -> Result<Vec<BpfProgram>, SandboxError> {
    let arch = std::env::consts::ARCH.try_into().map_err(|e| {
        SandboxError::InvalidSpec(format!("no seccomp filter for this machine: {e}"))
    })?;
    let bad = |e: seccompiler::BackendError| {
        SandboxError::InvalidSpec(format!("cannot build the seccomp filter: {e}"))
    };
    let mut rules: std::collections::BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|nr| (*nr, Vec::new())).collect();
    // `clone` is refused when any namespace flag is set (one rule per flag: any may match).
    let mut ns_rules = Vec::new();
    for bit in [
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWNS,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWCGROUP,
    ] {
        let cond = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(bit as u64),
            bit as u64,
        )
        .map_err(bad)?;
        ns_rules.push(SeccompRule::new(vec![cond]).map_err(bad)?);
    }
    rules.insert(libc::SYS_clone, ns_rules);
    // No set-uid or set-gid bit, on any file it makes or changes: what it writes may be
    // root's on disk (idmapped trees), where a set-uid file would be a host's set-uid root
    // program. One rule per bit and per call (any may match).
    for (nr, mode_arg) in SET_ID_MODE_ARGS {
        let mut mode_rules = Vec::new();
        for bit in [libc::S_ISUID, libc::S_ISGID] {
            let cond = SeccompCondition::new(
                *mode_arg,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(u64::from(bit)),
                u64::from(bit),
            )
            .map_err(bad)?;
            mode_rules.push(SeccompRule::new(vec![cond]).map_err(bad)?);
        }
        rules.insert(*nr, mode_rules);
    }
    let refuse = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(bad)?;
    let clone3 = SeccompFilter::new(
        [
            (libc::SYS_clone3, Vec::new()),
            (libc::SYS_openat2, Vec::new()),
        ]
        .into_iter()
        .collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(bad)?;
    Ok(vec![
        refuse.try_into().map_err(bad)?,
        clone3.try_into().map_err(bad)?,
    ])
}

/// Gives what `from` owns in each of `dirs` to `to` (uid and gid), links not followed: the
/// writable trees of a run as root that cannot be idmapped, before (`0` → [`SANDBOX_ID`]) and
/// after it (back).
pub(super) fn hand_over(dirs: &[PathBuf], from: u32, to: u32) -> Result<(), SandboxError> {
    for dir in dirs {
        let mut stack = vec![dir.clone()];
        while let Some(path) = stack.pop() {
            let m = fs::symlink_metadata(&path)
                .map_err(|e| prepare(&format!("reading {}", path.display()), e))?;
            if m.uid() == from {
                lchown(&path, Some(to), Some(to)).map_err(|e| {
                    prepare(&format!("changing the owner of {}", path.display()), e)
                })?;
            }
            if m.is_dir() {
                for entry in fs::read_dir(&path)
                    .map_err(|e| prepare(&format!("listing {}", path.display()), e))?
                {
                    let entry =
                        entry.map_err(|e| prepare(&format!("listing {}", path.display()), e))?;
                    stack.push(entry.path());
                }
            }
        }
    }
    Ok(())
}
