//! Confinement (docs/SANDBOX.md, "Confinement"): what a confined run sees and may do, prepared
//! before the fork. The command gets a root filesystem of its own (a tmpfs, with the system's
//! directories, a minimal `/etc`, the spec's paths bound in, its own `/proc`, `/dev`, `/tmp`
//! and `HOME`), runs as root of a user namespace whose one id is an unprivileged uid outside,
//! with no capabilities, `no_new_privs`, a seccomp filter, and limits on CPU time and file size.
//!
//! Everything here is ordinary code run before the fork: it turns a [`Confine`] into a list of
//! [`RootOp`]s (C strings only) and a seccomp program, which `child.rs` carries out.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::fs;
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::fs::{MetadataExt, lchown};
use std::path::{Component, Path, PathBuf};

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

use super::{SandboxError, c_path, prepare};

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

/// The system directories every confined run sees, read-only (or as the symbolic links they are
/// on a merged-`/usr` system).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// The host's `/etc` entries a confined run sees, read-only: users and groups, name lookup,
/// certificates, time zone, the dynamic linker's cache, Debian's alternatives (where
/// `/usr/bin/python3` and friends may point), fonts (matplotlib), MIME types and services.
const ETC: &[&str] = &[
    "passwd",
    "group",
    "hosts",
    "resolv.conf",
    "nsswitch.conf",
    "host.conf",
    "gai.conf",
    "services",
    "protocols",
    "hostname",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    "localtime",
    "timezone",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "mime.types",
    "fonts",
    "os-release",
    "debian_version",
    "locale.alias",
    "inputrc",
];

/// The device nodes of a confined run's `/dev`, bound from the host's.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

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
    /// directories; and the working directory `cwd` among what the run sees.
    pub(super) fn check(&self, cwd: &Path) -> Result<(), SandboxError> {
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
        if !self.sees(cwd) {
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

/// One step of building the new root, carried out in order by the namespace's init (B).
/// Paths are inside the new root (the prefix included), sources are the host's.
#[derive(Debug)]
pub(super) enum RootOp {
    /// A directory (mode 0755), or nothing if it exists.
    Dir(CString),
    /// An empty file to mount a file on.
    File(CString),
    /// A symbolic link: (target, path).
    Symlink(CString, CString),
    /// A bind mount (recursive); read-only when `read_only`, never set-uid or device files
    /// unless `devices`. A host source (`early`) is opened (`open_tree`) before B takes the
    /// namespace's own uid, which may not reach it, into slot `slot`; a source inside the new
    /// root is opened when the step comes. An `idmapped` source was opened (and its
    /// attributes set) by swe-ark before the fork: [`RootPlan::prepared`] holds it.
    Bind {
        from: CString,
        to: CString,
        read_only: bool,
        devices: bool,
        early: bool,
        slot: usize,
        idmapped: bool,
    },
    /// A tmpfs with these options.
    Tmpfs { to: CString, options: CString },
    /// `proc` of the run's PID namespace.
    Proc(CString),
    /// A `devpts` instance of the run's own (best effort: a failure is a note).
    Devpts(CString),
}

impl RootOp {
    /// The step in words, for an error that names the one that failed.
    pub(super) fn describe(&self) -> String {
        let p = |c: &CString| c.to_string_lossy().into_owned();
        match self {
            RootOp::Dir(path) => format!("making the directory {}", p(path)),
            RootOp::File(path) => format!("making the mount point {}", p(path)),
            RootOp::Symlink(target, path) => format!("linking {} to {}", p(path), p(target)),
            RootOp::Bind {
                from,
                to,
                read_only,
                ..
            } => format!(
                "mounting {} at {}{}",
                p(from),
                p(to),
                if *read_only { " read-only" } else { "" }
            ),
            RootOp::Tmpfs { to, .. } => format!("mounting a tmpfs at {}", p(to)),
            RootOp::Proc(path) => format!("mounting /proc at {}", p(path)),
            RootOp::Devpts(path) => format!("mounting devpts at {}", p(path)),
        }
    }
}

/// What B needs to build and enter the new root.
#[derive(Debug)]
pub(super) struct RootPlan {
    /// The directory the new root's tmpfs is mounted on.
    pub root: CString,
    /// `<root>/.oldroot`, where `pivot_root` puts the old root before it is detached.
    pub old_root: CString,
    pub ops: Vec<RootOp>,
    /// The command's working directory, entered again inside the new root.
    pub cwd: CString,
    /// The seccomp programs, installed in order.
    pub filters: Vec<BpfProgram>,
    pub file_size_limit: Option<u64>,
    pub cpu_limit: Option<u64>,
    /// Whether C must switch to root of its user namespace (when swe-ark runs as root, B's
    /// own uid is not mapped there).
    pub become_root: bool,
    /// The idmapped trees swe-ark prepared, by slot (-1: none); their descriptors are held
    /// open by `held` until the fork has copied them.
    pub prepared: Vec<RawFd>,
    pub held: Vec<OwnedFd>,
}

/// The files the run's name lookups use, when it has its own.
pub(super) struct NameFiles<'a> {
    pub resolv_conf: Option<&'a Path>,
    pub hosts: Option<&'a Path>,
}

/// What a confined run's root is made of, in the order B makes it.
pub(super) struct RootBuilder {
    root: PathBuf,
    ops: Vec<RootOp>,
    /// Directories made so far.
    made: BTreeSet<PathBuf>,
    /// Directories bound so far, inside and on the host: what lies below them exists when
    /// it exists on the host.
    bound: Vec<(PathBuf, PathBuf)>,
    /// Host sources opened early so far.
    slots: usize,
}

impl RootBuilder {
    fn new(root: &Path) -> RootBuilder {
        RootBuilder {
            root: root.to_path_buf(),
            ops: Vec::new(),
            made: BTreeSet::new(),
            bound: Vec::new(),
            slots: 0,
        }
    }

    fn inside(&self, path: &Path) -> Result<CString, SandboxError> {
        c_path(&self.inside_path(path))
    }

    fn inside_path(&self, path: &Path) -> PathBuf {
        let rel: PathBuf = path
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        self.root.join(rel)
    }

    /// Whether `path` exists inside already, shown by a bind of a host directory.
    fn covered(&self, path: &Path) -> bool {
        self.bound.iter().rev().any(|(inside, host)| {
            path.strip_prefix(inside)
                .is_ok_and(|rest| fs::symlink_metadata(host.join(rest)).is_ok())
        })
    }

    /// The directories down to `dir` (itself included), unless a bind already shows them.
    fn dirs(&mut self, dir: &Path) -> Result<(), SandboxError> {
        let mut at = PathBuf::from("/");
        for c in dir.components() {
            if let Component::Normal(name) = c {
                at.push(name);
                if self.covered(&at) || !self.made.insert(at.clone()) {
                    continue;
                }
                let inside = self.inside(&at)?;
                self.ops.push(RootOp::Dir(inside));
            }
        }
        Ok(())
    }

    /// The mount point for `path` (a directory or an empty file), then the bind of `from` on it.
    fn bind(
        &mut self,
        from: &Path,
        path: &Path,
        read_only: bool,
        devices: bool,
    ) -> Result<(), SandboxError> {
        let is_dir = fs::metadata(from).map(|m| m.is_dir()).unwrap_or(false);
        if !self.covered(path) {
            if is_dir {
                self.dirs(path)?;
            } else {
                if let Some(parent) = path.parent() {
                    self.dirs(parent)?;
                }
                let inside = self.inside(path)?;
                self.ops.push(RootOp::File(inside));
            }
        }
        let to = self.inside(path)?;
        self.push_bind(c_path(from)?, to, read_only, devices);
        if is_dir {
            self.bound.push((path.to_path_buf(), from.to_path_buf()));
        }
        Ok(())
    }

    fn push_bind(&mut self, from: CString, to: CString, read_only: bool, devices: bool) {
        self.ops.push(RootOp::Bind {
            from,
            to,
            read_only,
            devices,
            early: true,
            slot: self.slots,
            idmapped: false,
        });
        self.slots = self.slots.saturating_add(1);
    }

    fn symlink(&mut self, target: &Path, path: &Path) -> Result<(), SandboxError> {
        if let Some(parent) = path.parent() {
            self.dirs(parent)?;
        }
        let link = self.inside(path)?;
        self.ops.push(RootOp::Symlink(c_path(target)?, link));
        self.made.insert(path.to_path_buf());
        Ok(())
    }

    fn tmpfs(&mut self, path: &Path, options: String) -> Result<(), SandboxError> {
        self.dirs(path)?;
        let to = self.inside(path)?;
        let options = CString::new(options)
            .map_err(|_| SandboxError::InvalidSpec("tmpfs options with a NUL byte".into()))?;
        self.ops.push(RootOp::Tmpfs { to, options });
        Ok(())
    }
}

/// The steps that make the new root at `root` for a run with these paths and files.
/// At most this many host paths are bound into a confined run (B keeps their descriptors on
/// its stack).
pub(super) const MAX_BINDS: usize = 256;

pub(super) fn root_ops(
    root: &Path,
    confine: &Confine,
    names: NameFiles<'_>,
    binds: &[(PathBuf, PathBuf)],
    tmp: Option<&Path>,
    home: &Path,
) -> Result<Vec<RootOp>, SandboxError> {
    let mut b = RootBuilder::new(root);
    let size = confine.tmpfs_size;
    for dir in SYSTEM_DIRS {
        let path = Path::new(dir);
        match fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(path).map_err(|e| prepare("reading a link", e))?;
                b.symlink(&target, path)?;
            }
            Ok(m) if m.is_dir() => b.bind(path, path, true, false)?,
            _ => {}
        }
    }
    b.dirs(Path::new("/etc"))?;
    let own: [(&str, Option<&Path>); 2] =
        [("resolv.conf", names.resolv_conf), ("hosts", names.hosts)];
    let extra = confine.etc.iter().map(String::as_str);
    let mut seen = BTreeSet::new();
    for name in ETC.iter().copied().chain(extra) {
        if name.is_empty() || name.contains('/') || !seen.insert(name) {
            continue;
        }
        let path = Path::new("/etc").join(name);
        if let Some((_, Some(file))) = own.iter().find(|(n, _)| *n == name) {
            b.bind(file, &path, true, false)?;
            continue;
        }
        // Followed on the host: a link into /run (systemd-resolved's resolv.conf) would
        // dangle inside.
        if let Ok(real) = fs::canonicalize(&path) {
            b.bind(&real, &path, true, false)?;
        }
    }
    // /proc of the run's PID namespace; what in it configures the machine, read-only.
    b.dirs(Path::new("/proc"))?;
    let proc_inside = b.inside(Path::new("/proc"))?;
    b.ops.push(RootOp::Proc(proc_inside));
    for sub in ["sys", "sysrq-trigger", "irq", "bus"] {
        if !Path::new("/proc").join(sub).exists() {
            continue;
        }
        let inside = b.inside(&Path::new("/proc").join(sub))?;
        b.ops.push(RootOp::Bind {
            from: inside.clone(),
            to: inside,
            read_only: true,
            devices: false,
            early: false,
            slot: 0,
            idmapped: false,
        });
    }
    // /sys read-only, the host's cgroups hidden (see docs/SANDBOX.md).
    if Path::new("/sys").is_dir() {
        b.bind(Path::new("/sys"), Path::new("/sys"), true, false)?;
        if Path::new("/sys/fs/cgroup").is_dir() {
            let to = b.inside(Path::new("/sys/fs/cgroup"))?;
            b.ops.push(RootOp::Tmpfs {
                to,
                options: c"size=4k,mode=0555".to_owned(),
            });
        }
    }
    // A minimal /dev.
    b.tmpfs(Path::new("/dev"), "mode=0755,size=64k".into())?;
    for dev in DEVICES {
        let path = Path::new("/dev").join(dev);
        if path.exists() {
            // Under /dev, which is bound (a tmpfs): the mount point is made here.
            let inside = b.inside(&path)?;
            b.ops.push(RootOp::File(inside));
            let to = b.inside(&path)?;
            b.push_bind(c_path(&path)?, to, false, true);
        }
    }
    for (target, link) in [
        ("/proc/self/fd", "/dev/fd"),
        ("/proc/self/fd/0", "/dev/stdin"),
        ("/proc/self/fd/1", "/dev/stdout"),
        ("/proc/self/fd/2", "/dev/stderr"),
        ("pts/ptmx", "/dev/ptmx"),
    ] {
        let inside = b.inside(Path::new(link))?;
        b.ops
            .push(RootOp::Symlink(c_path(Path::new(target))?, inside));
    }
    b.tmpfs(Path::new("/dev/shm"), format!("mode=1777,size={size}"))?;
    b.dirs(Path::new("/dev/pts"))?;
    let pts = b.inside(Path::new("/dev/pts"))?;
    b.ops.push(RootOp::Devpts(pts));
    match tmp {
        Some(dir) => b.bind(dir, Path::new("/tmp"), false, false)?,
        None => b.tmpfs(Path::new("/tmp"), format!("mode=1777,size={size}"))?,
    }
    // The caller's paths, parents before children.
    let mut paths: Vec<(&PathBuf, bool)> = confine
        .read_only
        .iter()
        .map(|p| (p, true))
        .chain(confine.writable.iter().map(|p| (p, false)))
        .collect();
    paths.sort_by(|a, b| a.0.cmp(b.0));
    for (path, read_only) in paths {
        b.bind(path, path, read_only, false)?;
    }
    b.tmpfs(home, format!("mode=0700,uid=0,gid=0,size={size}"))?;
    for (from, to) in binds {
        b.bind(from, to, true, false)?;
    }
    if b.slots > MAX_BINDS {
        return Err(SandboxError::InvalidSpec(format!(
            "a confined run may be given at most {MAX_BINDS} paths; this one has {}",
            b.slots
        )));
    }
    Ok(b.ops)
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
