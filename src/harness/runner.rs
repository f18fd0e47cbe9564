//! An instance's commands, each through the sandbox at the fixed layout: the work tree at
//! [`layout::WORK_TREE`] (the working directory), the environment where its kind puts it, the
//! services' directory at [`layout::SERVICES`], the instance's own `/tmp` (kept across its
//! commands, as a container's is) and a `HOME` of each command's own. Nothing of the host's
//! paths is visible: the archive, the work directory and the machine's own layout stay
//! outside. Exit codes and timings are kept per step.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::installed::EnvChanges;
use super::services::Services;
use super::worktree::ShownTree;
use super::{OUTPUT_CAP, Reason, RunOptions, Stop, tail};
use crate::context::{RunEnvironment, layout};
use crate::manifest::{Context, is_system_command};
use crate::sandbox::{self, Mount, Network, Spec};

/// Layered mounts as the instance's runs can have them: the shared directory under a private
/// layer of the instance's own where confined runs here can have one (`overlay`), else a copy
/// of it in the layer's place, writable (`copy`: unconfined runs, or a kernel or filesystem
/// without overlays in user namespaces). Returns the mounts, the layers, which it was, and
/// where the runs' changes to the (first) layered directory go.
fn settle_layers(mounts: Vec<Mount>, confined: bool, work: &Path) -> Result<Settled, Stop> {
    let mut settled = Vec::new();
    let mut layers = Vec::new();
    let mut how = "";
    let mut changes = None;
    for m in mounts {
        let Some(layer) = m.layer.clone() else {
            settled.push(m);
            continue;
        };
        let available = match confined {
            true => sandbox::layers_available(crate::fsutil::parent_dir(work)),
            false => Err(sandbox::NoLayers("the runs are unconfined".into())),
        };
        if available.is_ok() {
            layers.push(
                sandbox::Layer::prepare(&layer)
                    .map_err(|e| Stop(Reason::Sandbox, e.to_string()))?,
            );
            changes.get_or_insert(EnvChanges::Upper(layer.join("upper")));
            settled.push(m);
            how = "overlay";
        } else {
            let copy = layer.join("copy");
            crate::fsutil::copy_tree(&m.host, &copy).map_err(|e| {
                Stop(
                    Reason::EnvBuildFailed,
                    format!("copying the environment: {e}"),
                )
            })?;
            changes.get_or_insert(EnvChanges::Copy {
                copy: copy.clone(),
                original: m.host.clone(),
            });
            settled.push(Mount::new(copy, m.at, true));
            how = "copy";
        }
    }
    Ok(Settled {
        mounts: settled,
        layers,
        how,
        changes,
    })
}

/// What [`settle_layers`] made of the mounts.
struct Settled {
    mounts: Vec<Mount>,
    layers: Vec<sandbox::Layer>,
    how: &'static str,
    changes: Option<EnvChanges>,
}

/// RLIMIT_FSIZE of a confined command: 16 GiB.
const FILE_SIZE_LIMIT: u64 = 16 << 30;

/// The machine's folders of programs that a search for one looks in: PATH's system part, and
/// the `sbin` folders cmake's `find_program` looks in too.
const SYSTEM_PROGRAM_DIRS: &[&str] = &[
    "/usr/local/bin",
    "/usr/local/sbin",
    "/usr/bin",
    "/usr/sbin",
    "/bin",
    "/sbin",
];

/// The files the machine has for `programs` in its program folders, each once (followed to
/// the file it names: `/bin` is `/usr/bin` on a merged-`/usr` system). A program the machine
/// lacks has none: runs then see what its image had either way.
fn hidden_files(programs: &[String]) -> Vec<PathBuf> {
    let mut files = std::collections::BTreeSet::new();
    for dir in SYSTEM_PROGRAM_DIRS {
        for name in programs {
            let path = Path::new(dir).join(name);
            if let Ok(file) = std::fs::canonicalize(&path)
                && file.is_file()
            {
                files.insert(file);
            }
        }
    }
    if !files.is_empty() {
        tracing::debug!("hidden from the runs: {files:?}");
    }
    files.into_iter().collect()
}

/// Runs an instance's commands in its work tree, through the sandbox.
pub(crate) struct Runner<'a> {
    /// The instance's work directory on the host (`src/`, `logs/`, `tmp/`, `services/`).
    work: &'a Path,
    /// The work tree on the host (`work/src`).
    pub(crate) tree: PathBuf,
    /// Where the commands see the work tree: [`layout::WORK_TREE`], or the dataset's
    /// harness's own place for it.
    work_tree: String,
    env: BTreeMap<String, String>,
    opts: &'a RunOptions,
    /// Per command: the caller's, else the context's, else the default.
    timeout: std::time::Duration,
    pub(crate) exit_codes: BTreeMap<String, i64>,
    pub(crate) timings: BTreeMap<String, f64>,
    pub(crate) network: &'static str,
    /// The context's services, started in each test run ([`Runner::run_tests`]).
    pub(crate) services: Services,
    /// Files the current run sees in place of others (CA bundles of a test run).
    binds: Vec<(PathBuf, PathBuf)>,
    /// What every run sees at the fixed layout's places.
    mounts: Vec<Mount>,
    /// The machine's files of the context's hidden programs.
    hidden: Vec<PathBuf>,
    /// The instance's own /tmp (`work/tmp`).
    tmp: PathBuf,
    /// What every run of a confined instance may do (None: unconfined).
    confine: Option<sandbox::Confine>,
    /// The tmpfs on `tmp` for the instance's lifetime (confined, as root), unmounted when the
    /// runner is dropped.
    _tmpfs: Option<sandbox::InstanceTmp>,
    /// The private layers of the layered mounts, for the instance's lifetime.
    _layers: Vec<sandbox::Layer>,
    /// How a layered mount (the environment) was given: `overlay`, `copy`, or empty.
    pub(crate) env_mount: &'static str,
    /// Where the runs' changes to the environment go (a layered one).
    pub(crate) env_changes: Option<EnvChanges>,
    /// The last whole second a change to the tree was dated with ([`Runner::stamp`]).
    clock: u64,
    /// How the work tree is given, and what lives as long as the instance (its overlay,
    /// detached when the runner is dropped).
    tree_shown: ShownTree,
}

impl<'a> Runner<'a> {
    /// A runner for the work tree `work/src`: the context's variables, the environment's
    /// (first on PATH, installs offline from the lock's artifacts), its services prepared.
    pub(crate) fn new(
        work: &'a Path,
        ctx: &Context,
        run_env: &RunEnvironment,
        opts: &'a RunOptions,
        work_tree: &str,
        tree_shown: ShownTree,
    ) -> Result<Runner<'a>, Stop> {
        let io = |p: &Path, e: std::io::Error| Stop(Reason::Io, format!("{}: {e}", p.display()));
        let tree = work.join("src");
        let mut env = ctx.env.clone();
        env.extend(run_env.vars.clone());
        let mut path = run_env.path.clone();
        path.push("/usr/local/bin:/usr/bin:/bin".into());
        env.insert("PATH".into(), path.join(":"));
        let logs = work.join("logs");
        std::fs::create_dir_all(&logs).map_err(|e| io(&logs, e))?;
        let tmp = work.join("tmp");
        std::fs::create_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
        let services = Services::prepare(&ctx.services, &run_env.service_envs, work)?;
        let mut tree_mount = Mount::new(&tree, work_tree, true);
        tree_mount.runs_own = tree_shown.runs_own();
        let mut mounts = vec![tree_mount];
        mounts.extend(run_env.mounts.iter().cloned());
        if let Some(dir) = &services.dir {
            mounts.push(Mount::new(dir, layout::SERVICES, true));
        }
        let settled = settle_layers(mounts, !opts.unconfined, work)?;
        let confine = (!opts.unconfined).then(|| {
            let mut c = sandbox::Confine::new();
            // A file is bounded (a runaway test writing one endless file stops at SIGXFSZ).
            c.file_size_limit = Some(FILE_SIZE_LIMIT);
            c
        });
        // Confined, the instance's /tmp is a tmpfs of a bounded size where swe-ark can mount
        // one (as root); else the directory on disk, bounded per file.
        let tmpfs = match &confine {
            Some(c) => sandbox::InstanceTmp::mount(&tmp, c.tmpfs_size)
                .map_err(|e| Stop(Reason::Sandbox, e.to_string()))?,
            None => None,
        };
        Ok(Runner {
            work,
            tree,
            work_tree: work_tree.to_string(),
            env,
            opts,
            timeout: match ctx.timeout {
                Some(secs) if !opts.timeout_given => std::time::Duration::from_secs(secs),
                _ => opts.timeout,
            },
            exit_codes: BTreeMap::new(),
            timings: BTreeMap::new(),
            network: "isolated",
            services,
            binds: Vec::new(),
            mounts: settled.mounts,
            hidden: hidden_files(&ctx.hidden_programs),
            tmp,
            confine,
            _tmpfs: tmpfs,
            _layers: settled.layers,
            env_mount: settled.how,
            env_changes: settled.changes,
            clock: unix_seconds(),
            tree_shown,
        })
    }

    /// Dates the files `paths` of the tree (those that are files; links not followed) one
    /// whole second after the last change it dated, and never before now. Python trusts a
    /// `.pyc` whose source has the size and the second it recorded: a patch that changes a
    /// file within the second its old text was compiled in (`a - b` → `a + b`, the same size)
    /// would run the old code. SWE-bench's images are built long before a patch goes in; here
    /// the tests before a patch may end in the same second.
    pub(crate) fn stamp(&mut self, paths: &[String]) {
        let t = unix_seconds().max(self.clock + 1);
        let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(t);
        for p in paths {
            let path = self.tree.join(p);
            if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
                continue;
            }
            // futimens asks for ownership, not write access.
            if let Err(e) = std::fs::File::open(&path).and_then(|f| f.set_modified(when)) {
                tracing::debug!("cannot date {}: {e}", path.display());
            }
        }
        self.clock = t;
    }

    /// How the work tree is given to the runs (`overlay`, `reflink`, `copy`, `built`).
    pub(crate) fn tree_mount(&self) -> &'static str {
        self.tree_shown.how
    }

    /// The instance's work directory on the host.
    pub(crate) fn work(&self) -> &Path {
        self.work
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
        self.binds = self.services.bundles(&self.tree, &self.work_tree)?;
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
        crate::vcs::commit_setup(&self.tree, record)
            .map_err(|e| Stop(Reason::Checkout, e.to_string()))?;
        self.timings
            .insert("setup-commit".into(), t.elapsed().as_secs_f64());
        Ok(())
    }

    /// Runs `script` with bash in the work tree, through the sandbox; returns the log and
    /// whether it exited 0.
    pub(crate) fn run(&mut self, step: &str, script: &str) -> Result<(Vec<u8>, bool), Stop> {
        let log = self.work.join("logs").join(format!("{step}.log"));
        let mut spec = Spec::new("bash", &self.work_tree, &log);
        spec.args = vec!["-c".into(), script.into()];
        spec.env = self.env.clone();
        spec.timeout = Some(self.timeout);
        spec.network = if self.opts.allow_network {
            Network::Allowed
        } else {
            Network::Isolated
        };
        spec.memory_limit = self.opts.memory_limit;
        spec.output_cap = OUTPUT_CAP;
        spec.hosts = self.services.hosts.clone();
        spec.binds = self.binds.clone();
        spec.hidden = self.hidden.clone();
        spec.tmp = Some(self.tmp.clone());
        spec.confine = self.confine.clone();
        spec.mounts = self.mounts.clone();
        let t = Instant::now();
        self.tree_shown.before_run()?;
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
                format!("{step} did not finish within {} s", self.timeout.as_secs()),
            ));
        }
        Ok((bytes, code == 0))
    }

    /// Applies `patch` (the `what`: "gold patch", "test patch") in the work tree with `git
    /// apply`, exactly; `refused` is the reason when it does not apply.
    pub(crate) fn apply(
        &mut self,
        step: &str,
        what: &str,
        patch: &str,
        refused: Reason,
    ) -> Result<(), Stop> {
        let file = self.work.join(format!("{step}.diff"));
        std::fs::write(&file, patch)
            .map_err(|e| Stop(Reason::Io, format!("{}: {e}", file.display())))?;
        let t = Instant::now();
        let out = crate::gitcmd::command()
            .args(["apply", "--verbose"])
            .arg(&file)
            .current_dir(&self.tree)
            .output()
            .map_err(|e| Stop(Reason::Io, format!("git apply: {e}")))?;
        self.timings
            .insert(step.to_string(), t.elapsed().as_secs_f64());
        if out.status.success() {
            self.stamp(&super::paths::touched_paths(patch));
            return Ok(());
        }
        Err(Stop(
            refused,
            format!(
                "the {what} does not apply: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ))
    }
}

/// Now, in whole seconds since the epoch.
fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
