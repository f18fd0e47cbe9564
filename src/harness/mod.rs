//! The harness under validation and replay: one instance's work directory, its environment
//! copy, the context's setup and eval commands, the test patch, its services, the test command
//! through the sandbox, with exit codes and timings per step. [`crate::validate`] and
//! [`crate::replay`] are two policies on top of it: what to run, and how to judge it.
//!
//! - [`directives`]: which tests the test command runs;
//! - `services`: the context's services in the test runs (stand-ins for hosts, TLS).

pub mod directives;
pub mod eval_script;
pub mod paths;
pub(crate) mod services;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::digest::Sha256Digest;
use crate::env::build::{self, BuildOptions, BuiltEnv};
use crate::env::pylock::PyLock;
use crate::env::venv::Venv;
use crate::manifest::{Context, is_system_command};
use crate::sandbox::{self, Network, Spec};
use crate::store::ObjectStore;

pub use crate::verdict::Reason;

/// How each command of an instance runs.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Per command.
    pub timeout: Duration,
    /// Let the tests reach the network (recorded in the results).
    pub allow_network: bool,
    pub memory_limit: Option<u64>,
    /// Keep the work directory (under the archive's `tmp/`) for inspection.
    pub keep_workdir: bool,
    /// Run without confinement ([`sandbox::Confine`]): the commands see the host's
    /// filesystem with the caller's rights.
    pub unconfined: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            timeout: Duration::from_secs(1800),
            allow_network: false,
            memory_limit: None,
            keep_workdir: false,
            unconfined: false,
        }
    }
}

/// Whether the sandbox can give every command what `opts` asks (an isolated network unless
/// allowed, confinement unless `--unconfined`): checked once, before any instance, so that
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
        return Ok(());
    }
    sandbox::confinement_available(network)
}

/// A reason to stop working on an instance, and its sentence.
#[derive(Debug)]
pub(crate) struct Stop(pub(crate) Reason, pub(crate) String);

impl Stop {
    /// The same sentence under another reason (a policy's own word for a harness step).
    pub(crate) fn with_reason(self, reason: Reason) -> Stop {
        Stop(reason, self.1)
    }
}

/// Output kept per command: enough for any real test log, bounded for a runaway one.
const OUTPUT_CAP: u64 = 64 * 1024 * 1024;

/// A fresh work directory under `root` (the archive's `tmp/`), removed when dropped unless
/// kept.
pub(crate) fn work_dir(root: &Path, prefix: &str) -> Result<tempfile::TempDir, Stop> {
    std::fs::create_dir_all(root)
        .map_err(|e| Stop(Reason::Io, format!("{}: {e}", root.display())))?;
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(root)
        .map_err(|e| Stop(Reason::Io, format!("{}: {e}", root.display())))
}

/// The environment of lock `lock_id` built (or found built) under `cache_root` from `objects`
/// alone (its installer confined unless `unconfined`), and the instance's own copy of it in
/// `work/venv`.
pub(crate) fn environment(
    objects: &ObjectStore,
    cache_root: &Path,
    lock_id: &Sha256Digest,
    lock: &PyLock,
    work: &Path,
    unconfined: bool,
) -> Result<(BuiltEnv, Venv), Stop> {
    let fail = |e: &dyn std::fmt::Display| Stop(Reason::EnvBuildFailed, e.to_string());
    let opts = BuildOptions {
        unconfined,
        ..BuildOptions::default()
    };
    let built = build::build(objects, cache_root, lock_id, lock, &opts).map_err(|e| fail(&e))?;
    let venv = build::instance_copy(&built, &work.join("venv")).map_err(|e| fail(&e))?;
    Ok((built, venv))
}

/// What an instance's commands see when confined: its checkout, its environment copy and its
/// services' directory, writable; the lock's wheelhouse (offline installs), the services'
/// environments and the interpreter the environment was made from, read-only. Its logs
/// (`work/logs`) are not among them: swe-ark reads them back, and the command cannot put a
/// link in their place.
fn confinement(work: &Path, src: &Path, built: &BuiltEnv, venv: &Venv) -> sandbox::Confine {
    let mut c = sandbox::Confine::new();
    c.writable = vec![src.to_path_buf(), venv.dir.clone()];
    let services = work.join("services");
    if services.is_dir() {
        c.writable.push(services);
    }
    let interpreter_prefix = built
        .interpreter
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf);
    c.read_only = std::iter::once(built.wheelhouse.clone())
        .chain(built.services.values().cloned())
        .chain(interpreter_prefix)
        .filter(|p| p.is_absolute() && p.exists())
        .collect();
    // A file is bounded (a runaway test writing one endless file stops at SIGXFSZ).
    c.file_size_limit = Some(FILE_SIZE_LIMIT);
    c
}

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

/// RLIMIT_FSIZE of a confined command: 16 GiB.
const FILE_SIZE_LIMIT: u64 = 16 << 30;

/// The test command of an instance: the context's, followed by the test files its test patch
/// touches (SWE-bench's directives), each quoted for the shell.
pub fn test_command(ctx: &Context, test_patch: &str) -> (Vec<String>, String) {
    let directives = directives::test_directives(test_patch, &ctx.test_cmd);
    let quoted: Vec<String> = directives
        .iter()
        .map(|d| directives::shell_quote(d))
        .collect();
    let cmd = format!("{} {}", ctx.test_cmd, quoted.join(" "));
    (directives, cmd)
}

/// Runs an instance's commands in its checkout, through the sandbox, keeping exit codes and
/// timings per step (validation and replay both use it).
pub(crate) struct Runner<'a> {
    pub(crate) work: &'a Path,
    pub(crate) src: PathBuf,
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) opts: &'a RunOptions,
    pub(crate) exit_codes: BTreeMap<String, i64>,
    pub(crate) timings: BTreeMap<String, f64>,
    pub(crate) network: &'static str,
    /// The context's services, started in each test run ([`Runner::run_tests`]).
    pub(crate) services: services::Services,
    /// Files the current run sees in place of others (CA bundles of a test run).
    binds: Vec<(PathBuf, PathBuf)>,
    /// The directory mounted over /tmp in every run (None: TMPDIR names it instead).
    private_tmp: Option<PathBuf>,
    /// What every run of a confined instance sees (None: unconfined).
    confine: Option<sandbox::Confine>,
    /// The tmpfs on `private_tmp` for the instance's lifetime (confined, as root), unmounted
    /// when the runner is dropped.
    _tmpfs: Option<sandbox::InstanceTmp>,
}

impl<'a> Runner<'a> {
    /// A runner for the checkout `src`: the instance's environment copy `venv` first on PATH,
    /// the context's variables, and installs that see the lock's wheelhouse and no index.
    pub(crate) fn new(
        work: &'a Path,
        src: PathBuf,
        ctx: &Context,
        built: &BuiltEnv,
        venv: &Venv,
        opts: &'a RunOptions,
    ) -> Result<Runner<'a>, Stop> {
        let mut env = ctx.env.clone();
        env.extend(build::offline_install_env(built));
        env.insert(
            "PATH".into(),
            format!("{}:/usr/local/bin:/usr/bin:/bin", venv.bin().display()),
        );
        env.insert("PIP_CONFIG_FILE".into(), "/dev/null".into());
        env.insert("PIP_DISABLE_PIP_VERSION_CHECK".into(), "1".into());
        std::fs::create_dir_all(work.join("logs")).map_err(|e| Stop(Reason::Io, e.to_string()))?;
        // The instance's own /tmp, kept across its runs as a container's is: mounted over
        // /tmp, unless what the run needs lives under /tmp itself (an archive there), which the
        // mount would hide; then through TMPDIR, which tempfile and pytest follow.
        let tmp = work.join("tmp");
        std::fs::create_dir_all(&tmp).map_err(|e| Stop(Reason::Io, e.to_string()))?;
        let host_tmp = std::fs::canonicalize("/tmp").unwrap_or_else(|_| PathBuf::from("/tmp"));
        let hidden_by_mount = [work, built.dir.as_path()]
            .iter()
            .any(|p| std::fs::canonicalize(p).is_ok_and(|p| p.starts_with(&host_tmp)));
        // Confined, the run's own root shows its paths after /tmp: nothing is hidden.
        let private_tmp = if hidden_by_mount && opts.unconfined {
            env.insert("TMPDIR".into(), tmp.display().to_string());
            None
        } else {
            Some(tmp)
        };
        let services = services::Services::prepare(&ctx.services, built, work)?;
        let confine = (!opts.unconfined).then(|| confinement(work, &src, built, venv));
        // Confined, the instance's /tmp is a tmpfs of a bounded size where swe-ark can mount
        // one (as root); else the directory on disk, bounded per file.
        let tmpfs = match (&confine, &private_tmp) {
            (Some(c), Some(tmp)) => sandbox::InstanceTmp::mount(tmp, c.tmpfs_size)
                .map_err(|e| Stop(Reason::Sandbox, e.to_string()))?,
            _ => None,
        };
        Ok(Runner {
            work,
            src,
            env,
            opts,
            exit_codes: BTreeMap::new(),
            timings: BTreeMap::new(),
            network: "isolated",
            services,
            binds: Vec::new(),
            private_tmp,
            confine,
            _tmpfs: tmpfs,
        })
    }

    /// `confined` or `unconfined`, as results and reports record it.
    pub(crate) fn confinement(&self) -> &'static str {
        if self.confine.is_some() {
            "confined"
        } else {
            "unconfined"
        }
    }

    /// Runs the test command `test` after `prelude`, with the services started first; a
    /// service that did not start stops the instance (`service-failed`).
    pub(crate) fn run_tests(
        &mut self,
        step: &str,
        prelude: &str,
        test: &str,
    ) -> Result<(Vec<u8>, bool), Stop> {
        let script = format!("{prelude}{}{test}\n", self.services.script);
        self.binds = self.services.bundles(&self.src)?;
        let result = self.run(step, &script);
        self.binds.clear();
        if let Some(why) = self.services.failure() {
            return Err(Stop(Reason::ServiceFailed, format!("{step}: {why}")));
        }
        result
    }

    /// The context's setup, as SWE-bench's image runs it after the clone and before the first
    /// install: its `pre_install` commands in the checkout (`set -e`, as SWE-bench's setup
    /// script; those that call a system package manager are not run), then everything
    /// committed as SWE-bench commits it ([`crate::vcs::commit_setup`]), so that patches
    /// apply to, and test files go back to, what the image's evaluation starts from.
    pub(crate) fn setup(
        &mut self,
        ctx: &Context,
        record: Option<&crate::vcs::VcsRecord>,
    ) -> Result<(), Stop> {
        let commands: Vec<&str> = ctx
            .pre_install
            .iter()
            .filter(|c| !is_system_command(c))
            .map(String::as_str)
            .collect();
        if !commands.is_empty() {
            let (log, ok) =
                self.run("pre-install", &format!("set -e\n{}\n", commands.join("\n")))?;
            if !ok {
                return Err(Stop(
                    Reason::PreInstallFailed,
                    format!("the context's pre_install failed:\n{}", tail(&log, 15)),
                ));
            }
        }
        let t = Instant::now();
        crate::vcs::commit_setup(&self.src, record)
            .map_err(|e| Stop(Reason::Checkout, e.to_string()))?;
        self.timings
            .insert("setup-commit".into(), t.elapsed().as_secs_f64());
        Ok(())
    }

    /// Runs `script` with bash in the checkout, through the sandbox; returns the log and
    /// whether it exited 0.
    pub(crate) fn run(&mut self, step: &str, script: &str) -> Result<(Vec<u8>, bool), Stop> {
        let log = self.work.join("logs").join(format!("{step}.log"));
        let spec = Spec {
            program: PathBuf::from("bash"),
            args: vec!["-c".into(), script.into()],
            cwd: self.src.clone(),
            env: self.env.clone(),
            timeout: Some(self.opts.timeout),
            network: if self.opts.allow_network {
                Network::Allowed
            } else {
                Network::Isolated
            },
            memory_limit: self.opts.memory_limit,
            max_processes: None,
            output: log.clone(),
            output_cap: OUTPUT_CAP,
            hosts: self.services.hosts.clone(),
            binds: self.binds.clone(),
            tmp: self.private_tmp.clone(),
            confine: self.confine.clone(),
            mounts: Vec::new(),
        };
        let t = Instant::now();
        let outcome = sandbox::run(&spec).map_err(|e| Stop(Reason::Sandbox, e.to_string()))?;
        self.timings
            .insert(step.to_string(), t.elapsed().as_secs_f64());
        self.network = outcome.network;
        let code = match (outcome.exit_code, outcome.signal) {
            (Some(c), _) => c as i64,
            (None, Some(s)) => -(s as i64),
            _ => -1,
        };
        self.exit_codes.insert(step.to_string(), code);
        let bytes = std::fs::read(&log).unwrap_or_default();
        if outcome.timed_out {
            return Err(Stop(
                Reason::Timeout,
                format!(
                    "{step} did not finish within {} s",
                    self.opts.timeout.as_secs()
                ),
            ));
        }
        Ok((bytes, code == 0))
    }

    pub(crate) fn apply(&mut self, step: &str, patch: &str) -> Result<(), Stop> {
        let file = self.work.join(format!("{step}.diff"));
        std::fs::write(&file, patch)
            .map_err(|e| Stop(Reason::Io, format!("{}: {e}", file.display())))?;
        let t = Instant::now();
        let out = crate::gitcmd::command()
            .args(["apply", "--verbose"])
            .arg(&file)
            .current_dir(&self.src)
            .output()
            .map_err(|e| Stop(Reason::Io, format!("git apply: {e}")))?;
        self.timings
            .insert(step.to_string(), t.elapsed().as_secs_f64());
        if out.status.success() {
            return Ok(());
        }
        Err(Stop(
            if step == "test-patch" {
                Reason::TestPatchDoesNotApply
            } else {
                Reason::GoldPatchDoesNotApply
            },
            format!(
                "the {} does not apply: {}",
                step.replace('-', " "),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ))
    }
}

/// The context's `eval_commands` that run (system package managers are outside the
/// environment), one per line, to put before an install or a test command.
pub(crate) fn eval_prelude(ctx: &Context) -> String {
    ctx.eval_commands
        .iter()
        .filter(|c| !is_system_command(c))
        .map(|c| format!("{c}\n"))
        .collect()
}

pub(crate) fn tail(bytes: &[u8], lines: usize) -> String {
    crate::env::steps::last_lines(&String::from_utf8_lossy(bytes), lines).join("\n")
}
