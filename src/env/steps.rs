//! Where the environment stage runs the dataset's own code: the installs and builds of
//! `env lock` (a context's `setup.py`, its dependencies' sdists, its `pre_install` and
//! `install`), and the installed environment started by `env build` (a wheel's `.pth` file
//! runs at every interpreter start). By default each such command is confined by the sandbox
//! (docs/SANDBOX.md), as replay's and validation's commands are: a root of its own, an
//! unprivileged uid, the seccomp filter; it sees the directories the step works in,
//! writable, and what it needs to read (the interpreter, the mirror a checkout borrows its
//! objects from, uv), read-only. `env lock` keeps the network (its installs reach swe-ark's
//! index proxy); `env build` and the lock's offline proof run with none. `--unconfined` runs
//! them with the caller's rights, as before.
//!
//! What swe-ark itself runs with a trusted interpreter (`python -m venv`, asking an
//! interpreter where its standard library is) and git's checkouts are not confined: [`run`]
//! runs them directly, and turns a failure into an error that ends with what they printed.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output};

use super::{EnvError, io_err};
use crate::sandbox::{self, Confine, Network, Spec};

/// The caller's variables that `venv::clean_env` passes and a confined command must not
/// get: it has a `HOME` and `/tmp` of its own, and is not the caller.
const NOT_PASSED: &[&str] = &["HOME", "TMPDIR", "USER", "LOGNAME", "SHELL"];

/// RLIMIT_FSIZE of a confined step: 16 GiB (a wheel, a build artifact).
const FILE_SIZE_LIMIT: u64 = 16 << 30;

/// How the environment stage runs the dataset's commands: confined (the default) or not.
#[derive(Debug, Clone)]
pub struct StepRunner {
    /// None: unconfined, with the caller's rights.
    confine: Option<Confine>,
    network: Network,
    /// What the run sees as its `/tmp` (None: a tmpfs of its own).
    tmp: Option<PathBuf>,
}

impl StepRunner {
    /// Commands run with the caller's rights on the host (`--unconfined`).
    pub fn unconfined() -> StepRunner {
        StepRunner {
            confine: None,
            network: Network::Allowed,
            tmp: None,
        }
    }

    /// Commands confined, with `network`; an error naming what the kernel refuses when
    /// confinement is not possible here.
    pub fn confined(network: Network) -> Result<StepRunner, EnvError> {
        sandbox::confinement_available(network).map_err(|e| EnvError::NoConfinement {
            reason: match e {
                sandbox::SandboxError::NoConfinement { reason } => reason,
                other => other.to_string(),
            },
        })?;
        let mut confine = Confine::new();
        confine.file_size_limit = Some(FILE_SIZE_LIMIT);
        Ok(StepRunner {
            confine: Some(confine),
            network,
            tmp: None,
        })
    }

    /// [`StepRunner::unconfined`] when `unconfined`, else [`StepRunner::confined`].
    pub fn new(unconfined: bool, network: Network) -> Result<StepRunner, EnvError> {
        if unconfined {
            Ok(StepRunner::unconfined())
        } else {
            StepRunner::confined(network)
        }
    }

    /// `confined` or `unconfined`, as reports record it.
    pub fn confinement(&self) -> &'static str {
        if self.confine.is_some() {
            "confined"
        } else {
            "unconfined"
        }
    }

    /// The same, with `dir` (a directory, made if missing) writable.
    pub fn writable(&self, dir: &Path) -> Result<StepRunner, EnvError> {
        let mut next = self.clone();
        if let Some(c) = &mut next.confine {
            std::fs::create_dir_all(dir).map_err(io_err(dir))?;
            let dir = std::path::absolute(dir).map_err(io_err(dir))?;
            if !c.writable.contains(&dir) {
                c.writable.push(dir);
            }
        }
        Ok(next)
    }

    /// The same, with `path` (a file or directory) readable; nothing when it is missing or
    /// already seen.
    pub fn read_only(&self, path: &Path) -> StepRunner {
        let mut next = self.clone();
        if let Some(c) = &mut next.confine
            && let Ok(path) = std::path::absolute(path)
            && path.exists()
            && !c.sees(&path)
        {
            c.read_only.push(path);
        }
        next
    }

    /// The same, with `dir` (made if missing) as the run's `/tmp`: kept on disk, for builds
    /// larger than a tmpfs should hold.
    pub fn tmp(&self, dir: &Path) -> Result<StepRunner, EnvError> {
        let mut next = self.clone();
        if next.confine.is_some() {
            std::fs::create_dir_all(dir).map_err(io_err(dir))?;
            next.tmp = Some(std::path::absolute(dir).map_err(io_err(dir))?);
        }
        Ok(next)
    }

    /// Runs `cmd` (made with `venv::clean_env`: every variable it gets is set on it),
    /// confined or not; a failure is [`EnvError::Command`] with the end of what it printed.
    /// Confined, stdout and stderr come back together in [`Output::stdout`].
    pub fn run(&self, cmd: &mut Command, step: &str) -> Result<Output, EnvError> {
        finish(self.output(cmd, step)?, step)
    }

    /// [`StepRunner::run`] that returns what the command printed however it exited: an error
    /// only when it could not be started (not found, not executable, its `#!` interpreter
    /// missing, or no sandbox).
    pub fn output(&self, cmd: &mut Command, step: &str) -> Result<Output, EnvError> {
        let Some(confine) = &self.confine else {
            tracing::debug!("{step}: {cmd:?}");
            return cmd.output().map_err(|e| EnvError::Command {
                step: step.to_string(),
                status: "could not start".into(),
                output: format!("{:?}: {e}", cmd.get_program()),
            });
        };
        let log = tempfile::Builder::new()
            .prefix("swe-ark-step-")
            .suffix(".log")
            .tempfile()
            .map_err(io_err(std::env::temp_dir()))?;
        let spec = self.spec(confine, cmd, log.path());
        tracing::debug!(
            "{step} (confined, network {}): {cmd:?}",
            self.network.as_str()
        );
        let outcome = sandbox::run(&spec).map_err(|e| EnvError::Command {
            step: step.to_string(),
            status: "could not start in the sandbox".into(),
            output: e.to_string(),
        })?;
        for n in &outcome.notes {
            tracing::debug!("{step}: {n}");
        }
        let bytes = std::fs::read(log.path()).map_err(io_err(log.path()))?;
        let status = match (outcome.exit_code, outcome.signal) {
            (Some(code), _) => ExitStatus::from_raw((code & 0xff) << 8),
            (None, Some(signal)) => ExitStatus::from_raw(signal & 0x7f),
            (None, None) => ExitStatus::from_raw(0xff << 8),
        };
        Ok(Output {
            status,
            stdout: bytes,
            stderr: Vec::new(),
        })
    }

    /// The sandbox's spec of `cmd`: its program, arguments, variables (less the caller's
    /// own) and directory (else the first writable one), and whatever its program is, if
    /// the run would not see it otherwise.
    fn spec(&self, confine: &Confine, cmd: &Command, output: &Path) -> Spec {
        let mut confine = confine.clone();
        let program = Path::new(cmd.get_program());
        if program.is_absolute() && program.exists() && !confine.sees(program) {
            confine.read_only.push(program.to_path_buf());
        }
        let cwd = cmd
            .get_current_dir()
            .map(Path::to_path_buf)
            .or_else(|| confine.writable.first().cloned())
            .unwrap_or_else(|| PathBuf::from("/"));
        let mut spec = Spec::new(program, cwd, output);
        spec.args = cmd.get_args().map(OsStr::to_os_string).collect();
        spec.env = cmd
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_str()?.to_string(), v?.to_str()?.to_string())))
            .filter(|(k, _)| !NOT_PASSED.contains(&k.as_str()))
            .collect::<BTreeMap<_, _>>();
        spec.network = self.network;
        spec.tmp = self.tmp.clone();
        spec.confine = Some(confine);
        spec
    }
}

/// Runs `cmd`, capturing its output; a failure becomes [`EnvError::Command`] with the end of
/// what it printed.
pub fn run(cmd: &mut Command, step: &str) -> Result<Output, EnvError> {
    tracing::debug!("{step}: {cmd:?}");
    let out = cmd.output().map_err(|e| EnvError::Command {
        step: step.to_string(),
        status: "could not start".into(),
        output: format!("{:?}: {e}", cmd.get_program()),
    })?;
    finish(out, step)
}

/// `out` when its command exited 0, else [`EnvError::Command`] with the end of what it printed.
fn finish(out: Output, step: &str) -> Result<Output, EnvError> {
    if out.status.success() {
        return Ok(out);
    }
    Err(EnvError::Command {
        step: step.to_string(),
        status: match out.status.code() {
            Some(c) => format!("exit code {c}"),
            None => "killed by a signal".into(),
        },
        output: tail(&out, 40),
    })
}

/// The last `lines` lines of stdout then stderr, without colours (pip and uv colour theirs on
/// a terminal, or when told to).
pub fn tail(out: &Output, lines: usize) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = crate::logparse::uncoloured(&text);
    last_lines(&text, lines)
        .iter()
        .map(|l| format!("  | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The last `n` lines of `text`.
pub fn last_lines(text: &str, n: usize) -> Vec<&str> {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(n)..].to_vec()
}
