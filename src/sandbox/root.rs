//! A run's own root filesystem (docs/SANDBOX.md, "A root of its own"), prepared before the
//! fork as a list of [`RootOp`]s (C strings only) that B carries out (`child/root.rs`).
//!
//! A confined run's root holds the system's directories read-only, a minimal `/etc`, its own
//! `/proc`, `/dev`, `/tmp` and `HOME`, and the paths the spec gives it. An unconfined run
//! that is given [`Mount`]s gets the host's view instead: every top-level directory of the
//! host bound as it is, with the same `/proc`, `/tmp`, `HOME` and mounts on top. Either way
//! a [`Mount`] is seen only at its own path inside (the work tree at `/testbed`), and nothing
//! is made on the host to show it.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::fs;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use seccompiler::BpfProgram;

use super::confine::Confine;
use super::{Mount, SandboxError, c_path, prepare};

/// `HOME` of a run with a root of its own: a tmpfs of its own at root's home, as in
/// SWE-bench's containers.
pub const RUN_HOME: &str = "/root";

/// The system directories every confined run sees, read-only (or as the symbolic links they are
/// on a merged-`/usr` system).
pub(super) const SYSTEM_DIRS: &[&str] = &[
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
    /// An overlay of a [`Mount`] with a layer ([`Mount::layer`]): its options name the layers
    /// by descriptor (`/proc/self/fd/N`). swe-ark holds each number open (in [`RootPlan::held`])
    /// for B, which opens the layer's path again in its own mount namespace (overlayfs takes
    /// layers of the mounter's namespace only) on that number, before it takes the
    /// namespace's uid, which may not reach the path.
    Overlay {
        to: CString,
        options: CString,
        layers: Vec<(CString, libc::c_int)>,
    },
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
            RootOp::Overlay { to, options, .. } => {
                format!("mounting an overlay at {} ({})", p(to), p(options))
            }
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
    /// Confined (the uid, capabilities, seccomp and limits of [`super::Confine`] applied to
    /// the command), or the host's view with the caller's rights (`--unconfined`).
    pub confined: bool,
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
    /// The layers of overlays, opened here (B names them by descriptor).
    held: Vec<OwnedFd>,
}

impl RootBuilder {
    fn new(root: &Path) -> RootBuilder {
        RootBuilder {
            root: root.to_path_buf(),
            ops: Vec::new(),
            made: BTreeSet::new(),
            bound: Vec::new(),
            slots: 0,
            held: Vec::new(),
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

    /// `lower` (read-only) under the private writable layer `layer` (its `upper/` and
    /// `work/`), an overlay at `path`.
    fn overlay(&mut self, lower: &Path, layer: &Path, path: &Path) -> Result<(), SandboxError> {
        self.dirs(path)?;
        let mut layers = Vec::new();
        for dir in [lower.to_path_buf(), layer.join("upper"), layer.join("work")] {
            let opened = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
                .open(&dir)
                .map_err(|e| prepare(&format!("opening {}", dir.display()), e))?;
            let fd = OwnedFd::from(opened);
            layers.push((c_path(&dir)?, fd.as_raw_fd()));
            self.held.push(fd);
        }
        let name = |i: usize| format!("/proc/self/fd/{}", layers[i].1);
        let options = format!(
            "userxattr,lowerdir={},upperdir={},workdir={}",
            name(0),
            name(1),
            name(2)
        );
        let to = self.inside(path)?;
        let options = CString::new(options)
            .map_err(|_| SandboxError::InvalidSpec("overlay options with a NUL byte".into()))?;
        self.ops.push(RootOp::Overlay {
            to,
            options,
            layers,
        });
        self.bound.push((path.to_path_buf(), lower.to_path_buf()));
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

/// At most this many host paths are bound into a run's root (B keeps their descriptors on
/// its stack).
pub(super) const MAX_BINDS: usize = 256;

/// What both kinds of root get besides their base: the name files, the file binds, `/tmp`,
/// the mounts and the size of each tmpfs.
pub(super) struct RootInputs<'a> {
    pub names: NameFiles<'a>,
    pub binds: &'a [(PathBuf, PathBuf)],
    pub tmp: Option<&'a Path>,
    pub mounts: &'a [Mount],
    pub tmpfs_size: u64,
}

/// The steps that make a run's root, and the descriptors they name (held open until the fork
/// has copied them).
pub(super) struct BuiltRoot {
    pub ops: Vec<RootOp>,
    pub held: Vec<OwnedFd>,
}

/// The steps that make a confined run's root at `root`.
pub(super) fn confined_ops(
    root: &Path,
    confine: &Confine,
    inputs: &RootInputs<'_>,
) -> Result<BuiltRoot, SandboxError> {
    let mut b = RootBuilder::new(root);
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
    confined_etc(&mut b, confine, &inputs.names)?;
    confined_proc_and_sys(&mut b)?;
    confined_dev(&mut b, inputs.tmpfs_size)?;
    b.own_tmp_and_home(inputs.tmp, inputs.tmpfs_size)?;
    // The caller's paths at their own place, parents before children.
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
    b.finish(inputs)
}

/// A minimal `/etc`: [`ETC`] and the confinement's own entries, read-only, the run's name
/// files in place of the host's.
fn confined_etc(
    b: &mut RootBuilder,
    confine: &Confine,
    names: &NameFiles<'_>,
) -> Result<(), SandboxError> {
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
    Ok(())
}

/// `/proc` of the run's PID namespace, what in it configures the machine read-only; `/sys`
/// read-only with the host's cgroups hidden (see docs/SANDBOX.md).
fn confined_proc_and_sys(b: &mut RootBuilder) -> Result<(), SandboxError> {
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
    if Path::new("/sys").is_dir() {
        b.bind(Path::new("/sys"), Path::new("/sys"), true, false)?;
        b.hide_cgroups()?;
    }
    Ok(())
}

/// A minimal `/dev`: a few device nodes bound from the host's, the usual links, its own
/// `/dev/shm` and `devpts`.
fn confined_dev(b: &mut RootBuilder, size: u64) -> Result<(), SandboxError> {
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
    Ok(())
}

/// The steps that make an unconfined run's root at `root`: the host's view (each top-level
/// entry of `/` bound writable as it is, links as links), its own `/proc`, the host's `/dev`
/// and `/sys` (cgroups hidden), then `/tmp`, `HOME`, the mounts and the files as a confined
/// run gets them. Top-level names that a mount or `HOME` takes are not the host's.
pub(super) fn view_ops(root: &Path, inputs: &RootInputs<'_>) -> Result<BuiltRoot, SandboxError> {
    let mut b = RootBuilder::new(root);
    let mut taken: BTreeSet<PathBuf> = ["proc", "sys", "dev", "tmp"]
        .iter()
        .map(|n| Path::new("/").join(n))
        .collect();
    taken.insert(top_level(Path::new(RUN_HOME)));
    taken.extend(inputs.mounts.iter().map(|m| top_level(&m.at)));
    let mut entries: Vec<PathBuf> = fs::read_dir("/")
        .map_err(|e| prepare("listing /", e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| !taken.contains(p))
        .collect();
    entries.sort();
    for path in entries {
        match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(&path).map_err(|e| prepare("reading a link", e))?;
                b.symlink(&target, &path)?;
            }
            Ok(m) if m.is_dir() || m.is_file() => b.bind(&path, &path, false, true)?,
            _ => {}
        }
    }
    b.dirs(Path::new("/proc"))?;
    let proc_inside = b.inside(Path::new("/proc"))?;
    b.ops.push(RootOp::Proc(proc_inside));
    if Path::new("/sys").is_dir() {
        b.bind(Path::new("/sys"), Path::new("/sys"), false, false)?;
        b.hide_cgroups()?;
    }
    b.bind(Path::new("/dev"), Path::new("/dev"), false, true)?;
    for (name, file) in [
        ("resolv.conf", inputs.names.resolv_conf),
        ("hosts", inputs.names.hosts),
    ] {
        if let Some(file) = file {
            b.bind(file, &Path::new("/etc").join(name), true, false)?;
        }
    }
    match inputs.tmp {
        Some(_) => b.own_tmp_and_home(inputs.tmp, inputs.tmpfs_size)?,
        None => {
            b.bind(Path::new("/tmp"), Path::new("/tmp"), false, false)?;
            b.home(inputs.tmpfs_size)?;
        }
    }
    b.finish(inputs)
}

/// `/a` of `/a/b/c`.
fn top_level(path: &Path) -> PathBuf {
    path.components()
        .find_map(|c| match c {
            Component::Normal(n) => Some(Path::new("/").join(n)),
            _ => None,
        })
        .unwrap_or_else(|| PathBuf::from("/"))
}

impl RootBuilder {
    /// `/tmp` (the spec's directory, or a tmpfs of the run's own) and `HOME`.
    fn own_tmp_and_home(&mut self, tmp: Option<&Path>, size: u64) -> Result<(), SandboxError> {
        match tmp {
            Some(dir) => self.bind(dir, Path::new("/tmp"), false, false)?,
            None => self.tmpfs(Path::new("/tmp"), format!("mode=1777,size={size}"))?,
        }
        self.home(size)
    }

    /// [`RUN_HOME`], a tmpfs owned by the run's root.
    fn home(&mut self, size: u64) -> Result<(), SandboxError> {
        self.tmpfs(
            Path::new(RUN_HOME),
            format!("mode=0700,uid=0,gid=0,size={size}"),
        )
    }

    /// The host's cgroup hierarchy under an empty read-only tmpfs.
    fn hide_cgroups(&mut self) -> Result<(), SandboxError> {
        if Path::new("/sys/fs/cgroup").is_dir() {
            let to = self.inside(Path::new("/sys/fs/cgroup"))?;
            self.ops.push(RootOp::Tmpfs {
                to,
                options: c"size=4k,mode=0555".to_owned(),
            });
        }
        Ok(())
    }

    /// The mounts (parents before children), the file binds, and the check on their number.
    fn finish(mut self, inputs: &RootInputs<'_>) -> Result<BuiltRoot, SandboxError> {
        let mut mounts: Vec<&Mount> = inputs.mounts.iter().collect();
        mounts.sort_by(|a, b| a.at.cmp(&b.at));
        for m in mounts {
            match &m.layer {
                Some(layer) => self.overlay(&m.host, layer, &m.at)?,
                None => self.bind(&m.host, &m.at, !m.writable, false)?,
            }
        }
        for (from, to) in inputs.binds {
            self.bind(from, to, true, false)?;
        }
        if self.slots > MAX_BINDS {
            return Err(SandboxError::InvalidSpec(format!(
                "a run's root may be given at most {MAX_BINDS} paths; this one has {}",
                self.slots
            )));
        }
        Ok(BuiltRoot {
            ops: self.ops,
            held: self.held,
        })
    }
}
