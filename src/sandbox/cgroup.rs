//! A pids cgroup per run: the process limit (`pids.max`) that holds for root too, and a list of
//! every process of the run (`cgroup.procs`) to kill at the end.
//!
//! cgroup v1 (a hierarchy with the `pids` controller): the run's cgroup goes under the one
//! swe-ark is in. cgroup v2: under the root of the mount, when its `cgroup.subtree_control`
//! already enables `pids` (swe-ark never changes which controllers are enabled). Anything else,
//! or no permission to create a cgroup, and there is none: the caller notes it.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The prefix of the cgroups swe-ark creates: `swe-ark-<pid>-<n>`.
const PREFIX: &str = "swe-ark-";

static NEXT: AtomicU64 = AtomicU64::new(0);

/// Why the run gets no pids cgroup.
#[derive(Debug, thiserror::Error)]
pub(super) enum CgroupError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("the pids cgroup hierarchy is not mounted")]
    NotMounted,
    #[error("this process's pids cgroup {0} is outside the mount")]
    Outside(String),
    #[error("the pids controller is not enabled in {}/cgroup.subtree_control", .0.display())]
    NotEnabled(PathBuf),
    #[error("no cgroup hierarchy has the pids controller")]
    NoPids,
    #[error("cannot create {}: {source}", .dir.display())]
    Create {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}/pids.max: {source}", .dir.display())]
    WriteMax {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub(super) struct PidsCgroup {
    dir: PathBuf,
}

impl PidsCgroup {
    /// A new cgroup allowing `max` tasks (processes and threads).
    pub(super) fn create(max: u64) -> Result<PidsCgroup, CgroupError> {
        let parent = locate()?;
        remove_stale(&parent);
        let name = format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = parent.join(name);
        if let Err(source) = fs::create_dir(&dir) {
            return Err(CgroupError::Create { dir, source });
        }
        if let Err(source) = fs::write(dir.join("pids.max"), format!("{max}\n")) {
            let _ = fs::remove_dir(&dir);
            return Err(CgroupError::WriteMax { dir, source });
        }
        Ok(PidsCgroup { dir })
    }

    pub(super) fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// Kills whatever is still in the cgroup (nothing, when the run had a PID namespace) and
    /// removes it.
    pub(super) fn remove(self) {
        let procs = self.procs();
        for _ in 0..500 {
            let Ok(text) = fs::read_to_string(&procs) else {
                break;
            };
            let pids: Vec<i32> = text
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            if pids.is_empty() {
                break;
            }
            for pid in pids {
                // SAFETY: kill with integer arguments; the pid is in the run's cgroup.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // A killed task leaves the cgroup a moment after its parent reaps it.
        let mut last = None;
        for _ in 0..100 {
            match fs::remove_dir(&self.dir) {
                Ok(()) => return,
                Err(e) => last = Some(e),
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Some(e) = last {
            tracing::warn!("cannot remove the cgroup {}: {e}", self.dir.display());
        }
    }
}

/// The directory to create the run's cgroup in.
fn locate() -> Result<PathBuf, CgroupError> {
    let read = |path: &'static str| {
        fs::read_to_string(path).map_err(|source| CgroupError::Read { path, source })
    };
    let cgroups = read("/proc/self/cgroup")?;
    let mountinfo = read("/proc/self/mountinfo")?;
    let mounts: Vec<Mount> = mountinfo.lines().filter_map(Mount::parse).collect();

    // cgroup v1: "<id>:<controllers>:<path>" with `pids` among the controllers.
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if !controllers.split(',').any(|c| c == "pids") {
            continue;
        }
        let Some(mount) = mounts
            .iter()
            .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == "pids"))
        else {
            return Err(CgroupError::NotMounted);
        };
        let relative = Path::new(path)
            .strip_prefix(&mount.root)
            .map_err(|_| CgroupError::Outside(path.to_string()))?;
        return Ok(mount.point.join(relative));
    }

    // cgroup v2: the root of the mount, if it hands `pids` down.
    if let Some(mount) = mounts.iter().find(|m| m.fstype == "cgroup2") {
        let control =
            fs::read_to_string(mount.point.join("cgroup.subtree_control")).unwrap_or_default();
        if control.split_whitespace().any(|c| c == "pids") {
            return Ok(mount.point.clone());
        }
        return Err(CgroupError::NotEnabled(mount.point.clone()));
    }
    Err(CgroupError::NoPids)
}

/// Removes empty cgroups that earlier swe-ark processes, now gone, left behind.
fn remove_stale(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next() else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            // Fails, harmlessly, if anything is still in it.
            let _ = fs::remove_dir(entry.path());
        }
    }
}

/// One line of /proc/self/mountinfo: the mount's root within its filesystem, its mount point,
/// filesystem type and superblock options.
struct Mount {
    root: PathBuf,
    point: PathBuf,
    fstype: String,
    options: String,
}

impl Mount {
    fn parse(line: &str) -> Option<Mount> {
        let (before, after) = line.split_once(" - ")?;
        let fields: Vec<&str> = before.split(' ').collect();
        let mut rest = after.split(' ');
        let fstype = rest.next()?;
        let _source = rest.next()?;
        let options = rest.next().unwrap_or("");
        Some(Mount {
            root: PathBuf::from(unescape(fields.get(3)?)),
            point: PathBuf::from(unescape(fields.get(4)?)),
            fstype: fstype.to_string(),
            options: options.to_string(),
        })
    }
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let digits: String = chars.clone().take(3).collect();
            if digits.len() == 3
                && let Ok(code) = u8::from_str_radix(&digits, 8)
            {
                out.push(char::from(code));
                for _ in 0..3 {
                    chars.next();
                }
                continue;
            }
        }
        out.push(c);
    }
    out
}
