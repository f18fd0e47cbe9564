//! The harness under validation and replay: the one procedure that runs an instance
//! ([`Instance`]: its work tree, its environment, the context's setup, patches, the test patch,
//! the tests, through the sandbox at the fixed layout), with exit codes and timings per step.
//! [`crate::validate`] and [`crate::replay`] are two policies over it: which patches, how
//! many runs, and how a result is judged.
//!
//! - [`instance`]: the procedure's stages;
//! - `runner`: each command through the sandbox, at the fixed layout
//!   ([`crate::context::layout`]);
//! - [`patch`]: applying a model's patch the harness's ways, and what it may not change;
//! - [`paths`]: the files a patch names, put back as the commit has them;
//! - [`eval_script`]: a version-5 row's own evaluation script, made to run here;
//! - `services`: the context's services in the test runs (stand-ins for hosts, TLS);
//! - `installed`: the installed state, kept (made once, then every run starts from it);
//! - [`worktree`]: the work tree, made once per bundle and shown to each run under a layer.

mod assets;
pub mod eval_script;
mod fresh;
mod installed;
pub mod instance;
pub mod patch;
pub mod paths;
mod runner;
pub(crate) mod services;
pub mod worktree;

use std::path::Path;
use std::time::Duration;

use crate::sandbox::{self, Network};

pub use crate::verdict::Reason;
pub use installed::{FarmSweep, sweep_farms};
pub use instance::{
    CONTEXT, EVAL_SCRIPT, Evaluated, Evaluation, InstalledUse, Instance, PatchIn, Prepared,
    RunRecord, TestRun,
};

/// How each command of an instance runs.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Per command.
    pub timeout: Duration,
    /// Whether the caller named `timeout` (`--timeout`): else a context's own `timeout`, where
    /// its manifest gives one, replaces it.
    pub timeout_given: bool,
    /// Let the tests reach the network (recorded in the results).
    pub allow_network: bool,
    pub memory_limit: Option<u64>,
    /// Keep the work directory (under the archive's `tmp/`) for inspection.
    pub keep_workdir: bool,
    /// Run without confinement ([`sandbox::Confine`]): the commands see the host's
    /// filesystem with the caller's rights (the instance's own places still at the fixed
    /// layout).
    pub unconfined: bool,
    /// Start from the archive's installed states and keep new ones (docs/REPLAY.md, "The
    /// installed state"); off, the install runs after the patch at every run.
    pub installed_states: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            timeout: Duration::from_secs(1800),
            timeout_given: false,
            allow_network: false,
            memory_limit: None,
            keep_workdir: false,
            unconfined: false,
            installed_states: true,
        }
    }
}

/// Whether the sandbox can give every command what `opts` asks (an isolated network unless
/// allowed, confinement unless `--unconfined`, a root of its own at the fixed layout either
/// way): checked once, before any instance, so that
/// untrusted code is refused up front with what is missing, not instance by instance.
pub fn sandbox_ready(opts: &RunOptions) -> Result<(), sandbox::SandboxError> {
    let network = if opts.allow_network {
        Network::Allowed
    } else {
        sandbox::isolation_available().map_err(|e| sandbox::SandboxError::NoIsolation {
            reason: e.to_string(),
        })?;
        Network::Isolated
    };
    if opts.unconfined {
        // Unconfined, the fixed layout still needs a root of the run's own.
        return sandbox::namespaces_available(network).map_err(|e| {
            sandbox::SandboxError::NoMountNamespace {
                reason: e.to_string(),
            }
        });
    }
    sandbox::confinement_available(network)
}

/// A reason to stop working on an instance, and its sentence.
#[derive(Debug)]
pub struct Stop(pub Reason, pub String);

/// Output kept per command: enough for any real test log, bounded for a runaway one.
const OUTPUT_CAP: u64 = 64 * 1024 * 1024;

/// The first `limit` bytes of a file a run wrote, opened without following a link (a link
/// there is the run's, not ours); None when it is missing, a link or not a regular file.
pub(crate) fn read_written(path: &Path, limit: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The last `lines` lines of a log, without colours (a reason is read as plain text).
pub(crate) fn tail(bytes: &[u8], lines: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = crate::logparse::uncoloured(&text);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
