//! Execution-based validation (the SWE-bench paper's appendix A.3, made exact and offline):
//! per instance, the codebase at base_commit from the mirror, the environment from its lock
//! (no network), the install, the test patch and a run (`log_pre`), the gold patch, the install
//! again and K runs (`log_post`), both parsed, and a verdict kept with its evidence.
//!
//! - [`directives`]: which tests the test command runs;
//! - [`outcome`]: FAIL_TO_PASS / PASS_TO_PASS / XFAIL / flaky and the verdict rules;
//! - `services`: the context's services in the test runs (stand-ins for hosts, TLS).
//!
//! docs/VALIDATION.md tells the procedure for users.

pub mod directives;
pub mod expected;
pub mod outcome;
pub(crate) mod services;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::dataset::Instance;
use crate::digest::Sha256Digest;
use crate::env::build::{self, BuildOptions, BuiltEnv};
use crate::env::lock::is_system_command;
use crate::env::pylock::PyLock;
use crate::logparse::{self, StatusMap};
use crate::manifest::{Context, Manifests};
use crate::mirror::{Mirror, RepoName};
use crate::sandbox::{self, Network, Spec};
use crate::store::{Ark, ValidationRow};

use outcome::{Differences, Lists};

/// What became of an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Proven: at least one test goes from fail to pass, and (for a published instance) the
    /// lists are the published ones.
    Kept,
    /// Not a valid task instance, or it could not be run: see the reason.
    Discarded,
    /// A published instance whose lists did not come out as published.
    NotReproducible,
}

impl Verdict {
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Kept => "kept",
            Verdict::Discarded => "discarded",
            Verdict::NotReproducible => "not-reproducible",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ValidateOptions {
    /// Runs after the gold patch (flakiness).
    pub runs: u32,
    /// Per test-command run.
    pub timeout: Duration,
    /// Let the tests reach the network (recorded in the results).
    pub allow_network: bool,
    pub memory_limit: Option<u64>,
    pub keep_workdir: bool,
    /// Run with this lock (an object of the archive) rather than the newest lock of the
    /// instance's context: what `verify --rebuild --revalidate` does with a bundle's own lock.
    pub lock: Option<Sha256Digest>,
}

impl Default for ValidateOptions {
    fn default() -> Self {
        ValidateOptions {
            runs: 3,
            timeout: Duration::from_secs(1800),
            allow_network: false,
            memory_limit: None,
            keep_workdir: false,
            lock: None,
        }
    }
}

/// Everything a validation saw, as `results.json` keeps it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Results {
    pub instance_id: String,
    pub verdict: Verdict,
    /// A short kind (`no-fail-to-pass`, `install-failed`, …) for counting, empty when kept.
    pub reason_kind: String,
    pub reason: String,
    #[serde(rename = "FAIL_TO_PASS")]
    pub fail_to_pass: Vec<String>,
    #[serde(rename = "PASS_TO_PASS")]
    pub pass_to_pass: Vec<String>,
    #[serde(rename = "XFAIL")]
    pub xfail: Vec<String>,
    pub flaky: BTreeMap<String, Vec<Option<logparse::TestStatus>>>,
    /// For a published instance: how the computed lists differ from its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_differences: Option<Differences>,
    pub test_directives: Vec<String>,
    pub log_parser: String,
    pub pre: StatusMap,
    pub post: Vec<StatusMap>,
    /// Exit code (or -signal) of each command run, by step.
    pub exit_codes: BTreeMap<String, i64>,
    /// Seconds per step.
    pub timings: BTreeMap<String, f64>,
    pub network: String,
    /// The services the tests ran with (stand-ins for hosts of the internet among them), one
    /// sentence each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<String>,
    pub lock: String,
    pub python: String,
    pub tool: String,
    /// `git describe --tags --long` of the base commit as the work tree answered it (absent:
    /// no tag reachable, or a validation from before swe-ark recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub describe: Option<String>,
    /// Where the run happened, which its logs may name (absent: a validation from before
    /// swe-ark recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<expected::RunPaths>,
}

/// Reasons that are the archive's, not the instance's (no lock, no mirror, no manifest, an
/// environment that does not build, no sandbox): such a run is reported, not recorded, so the
/// next `validate` tries the instance again once the archive is fixed.
pub const SETUP_REASONS: &[&str] = &[
    "no-context",
    "no-mirror",
    "no-lock",
    "environment",
    "sandbox",
    "unknown-log-parser",
    // A service that does not start: the context's manifest or lock, not the instance.
    "service-failed",
    "io",
];

impl Results {
    pub fn is_setup_problem(&self) -> bool {
        SETUP_REASONS.contains(&self.reason_kind.as_str())
    }
}

/// The outcome of one instance, with its logs.
pub struct Validation {
    pub results: Results,
    pub log_pre: Option<Vec<u8>>,
    pub log_post: Option<Vec<u8>>,
}

/// A reason to stop working on an instance: its kind and sentence.
pub(crate) struct Stop(pub(crate) &'static str, pub(crate) String);

/// Output kept per command: enough for any real test log, bounded for a runaway one.
const OUTPUT_CAP: u64 = 64 * 1024 * 1024;

/// The newest lock of `repo` `version` in the archive.
pub fn lock_for(
    ark: &Ark,
    repo: &str,
    version: &str,
) -> Result<Option<(Sha256Digest, PyLock)>, String> {
    let locks = ark.index().locks().map_err(|e| e.to_string())?;
    let Some(row) = locks
        .into_iter()
        .filter(|l| l.repo == repo && l.version == version)
        .max_by_key(|l| l.created_at)
    else {
        return Ok(None);
    };
    let bytes = ark.objects().get(&row.id).map_err(|e| e.to_string())?;
    let lock = PyLock::parse(&bytes).map_err(|e| format!("lock {}: {e}", row.id))?;
    Ok(Some((row.id, lock)))
}

/// The lock object `id` of the archive.
fn lock_object(ark: &Ark, id: &Sha256Digest) -> Result<(Sha256Digest, PyLock), String> {
    let bytes = ark
        .objects()
        .get(id)
        .map_err(|e| format!("lock {id} is not in the archive's objects: {e}"))?;
    let lock = PyLock::parse(&bytes).map_err(|e| format!("lock {id}: {e}"))?;
    Ok((*id, lock))
}

/// Runs an instance's commands in its checkout, through the sandbox, keeping exit codes and
/// timings per step (validation and replay both use it).
pub(crate) struct Runner<'a> {
    pub(crate) work: &'a Path,
    pub(crate) src: PathBuf,
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) opts: &'a ValidateOptions,
    pub(crate) exit_codes: BTreeMap<String, i64>,
    pub(crate) timings: BTreeMap<String, f64>,
    pub(crate) network: &'static str,
    /// The context's services, started in each test run ([`Runner::run_tests`]).
    pub(crate) services: services::Services,
    /// Files the current run sees in place of others (CA bundles of a test run).
    binds: Vec<(PathBuf, PathBuf)>,
    /// The directory mounted over /tmp in every run (None: TMPDIR names it instead).
    private_tmp: Option<PathBuf>,
}

impl<'a> Runner<'a> {
    /// A runner for the checkout `src`: the instance's environment copy `venv` first on PATH,
    /// the context's variables, and installs that see the lock's wheelhouse and no index.
    pub(crate) fn new(
        work: &'a Path,
        src: PathBuf,
        ctx: &Context,
        built: &BuiltEnv,
        venv: &crate::env::venv::Venv,
        opts: &'a ValidateOptions,
    ) -> Result<Runner<'a>, Stop> {
        let mut env = ctx.env.clone();
        env.extend(build::offline_install_env(built));
        env.insert(
            "PATH".into(),
            format!("{}:/usr/local/bin:/usr/bin:/bin", venv.bin().display()),
        );
        env.insert("PIP_CONFIG_FILE".into(), "/dev/null".into());
        env.insert("PIP_DISABLE_PIP_VERSION_CHECK".into(), "1".into());
        std::fs::create_dir_all(work.join("logs")).map_err(|e| Stop("io", e.to_string()))?;
        // The instance's own /tmp, kept across its runs as a container's is: mounted over
        // /tmp, unless what the run needs lives under /tmp itself (an archive there), which the
        // mount would hide; then through TMPDIR, which tempfile and pytest follow.
        let tmp = work.join("tmp");
        std::fs::create_dir_all(&tmp).map_err(|e| Stop("io", e.to_string()))?;
        let host_tmp = std::fs::canonicalize("/tmp").unwrap_or_else(|_| PathBuf::from("/tmp"));
        let hidden_by_mount = [work, built.dir.as_path()]
            .iter()
            .any(|p| std::fs::canonicalize(p).is_ok_and(|p| p.starts_with(&host_tmp)));
        let private_tmp = if hidden_by_mount {
            env.insert("TMPDIR".into(), tmp.display().to_string());
            None
        } else {
            Some(tmp)
        };
        let services = services::Services::prepare(&ctx.services, built, work)?;
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
        })
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
            return Err(Stop("service-failed", format!("{step}: {why}")));
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
                    "pre-install-failed",
                    format!("the context's pre_install failed:\n{}", tail(&log, 15)),
                ));
            }
        }
        let t = Instant::now();
        crate::vcs::commit_setup(&self.src, record).map_err(|e| Stop("checkout", e.to_string()))?;
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
        };
        let t = Instant::now();
        let outcome = sandbox::run(&spec).map_err(|e| Stop("sandbox", e.to_string()))?;
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
                "timeout",
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
        std::fs::write(&file, patch).map_err(|e| Stop("io", format!("{}: {e}", file.display())))?;
        let t = Instant::now();
        let out = crate::gitcmd::command()
            .args(["apply", "--verbose"])
            .arg(&file)
            .current_dir(&self.src)
            .output()
            .map_err(|e| Stop("io", format!("git apply: {e}")))?;
        self.timings
            .insert(step.to_string(), t.elapsed().as_secs_f64());
        if out.status.success() {
            return Ok(());
        }
        Err(Stop(
            if step == "test-patch" {
                "test-patch-does-not-apply"
            } else {
                "gold-patch-does-not-apply"
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
    crate::env::venv::last_lines(&String::from_utf8_lossy(bytes), lines).join("\n")
}

/// Validates one instance. Errors of swe-ark itself (the archive unreadable) are `Err`; every
/// reason the instance cannot be proven is a verdict in the results.
pub fn validate(
    ark: &Ark,
    manifests: &Manifests,
    instance: &Instance,
    opts: &ValidateOptions,
) -> Result<Validation, String> {
    let started = Instant::now();
    let mut results = Results {
        instance_id: instance.instance_id.clone(),
        verdict: Verdict::Discarded,
        reason_kind: String::new(),
        reason: String::new(),
        fail_to_pass: vec![],
        pass_to_pass: vec![],
        xfail: vec![],
        flaky: BTreeMap::new(),
        published_differences: None,
        test_directives: vec![],
        log_parser: String::new(),
        pre: StatusMap::new(),
        post: vec![],
        exit_codes: BTreeMap::new(),
        timings: BTreeMap::new(),
        network: String::new(),
        services: vec![],
        lock: String::new(),
        python: String::new(),
        tool: format!("swe-ark {}", env!("CARGO_PKG_VERSION")),
        describe: None,
        paths: None,
    };
    let mut logs = (None, None);
    let tmp = ark.root().join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let work = tempfile::Builder::new()
        .prefix(".tmp-validate-")
        .tempdir_in(&tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    let outcome = run_steps(
        ark,
        manifests,
        instance,
        opts,
        work.path(),
        &mut results,
        &mut logs,
    );
    if let Err(Stop(kind, reason)) = outcome {
        results.verdict = Verdict::Discarded;
        results.reason_kind = kind.to_string();
        results.reason = reason;
    }
    results
        .timings
        .insert("total".into(), started.elapsed().as_secs_f64());
    if opts.keep_workdir {
        let kept = work.keep();
        tracing::info!("work directory kept: {}", kept.display());
    }
    Ok(Validation {
        results,
        log_pre: logs.0,
        log_post: logs.1,
    })
}

#[allow(clippy::too_many_arguments)]
fn run_steps(
    ark: &Ark,
    manifests: &Manifests,
    instance: &Instance,
    opts: &ValidateOptions,
    work: &Path,
    results: &mut Results,
    logs: &mut (Option<Vec<u8>>, Option<Vec<u8>>),
) -> Result<(), Stop> {
    let ctx: Context = manifests
        .context(&instance.repo, &instance.version)
        .map_err(|e| Stop("no-context", e.to_string()))?;
    results.log_parser = ctx.log_parser.clone();
    if !logparse::known_parsers().contains(&ctx.log_parser.as_str()) {
        return Err(Stop(
            "unknown-log-parser",
            format!(
                "the manifest of {} names log parser `{}`; known: {}",
                ctx.repo,
                ctx.log_parser,
                logparse::known_parsers().join(", ")
            ),
        ));
    }

    // 1. The codebase, from the mirror.
    let t = Instant::now();
    let name = RepoName::parse(&instance.repo).ok_or_else(|| {
        Stop(
            "bad-instance",
            format!("repo `{}` is not OWNER/NAME", instance.repo),
        )
    })?;
    let mirror =
        Mirror::open(&ark.mirrors_dir(), &name).map_err(|e| Stop("no-mirror", e.to_string()))?;
    mirror
        .commit(&instance.base_commit)
        .map_err(|e| Stop("base-commit-missing", e.to_string()))?;
    let missing = mirror
        .check_tree(&instance.base_commit)
        .map_err(|e| Stop("missing-object", e.to_string()))?;
    if !missing.is_empty() {
        return Err(Stop("missing-object", missing.join("; ")));
    }
    // What replay will see: the tree as its bundle holds it, in a work tree made by the same
    // builder from the same record of the history.
    let codebase = mirror
        .codebase_at(&instance.base_commit, &crate::progress::NoProgress)
        .map_err(|e| Stop("missing-object", e.to_string()))?;
    let record = crate::vcs::record(&mirror.path, &instance.base_commit)
        .map_err(|e| Stop("history", e.to_string()))?;
    let src = work.join("src");
    codebase
        .write_to(&src)
        .map_err(|e| Stop("checkout", e.to_string()))?;
    drop(codebase);
    crate::vcs::build_work_tree(&src, Some(&record))
        .map_err(|e| Stop("checkout", e.to_string()))?;
    results.describe = record.describe.clone();
    results
        .timings
        .insert("materialize".into(), t.elapsed().as_secs_f64());

    // 2. The environment, from its lock, offline.
    let t = Instant::now();
    let chosen = match &opts.lock {
        Some(id) => Some(lock_object(ark, id).map_err(|e| Stop("no-lock", e))?),
        None => lock_for(ark, &ctx.repo, &ctx.version).map_err(|e| Stop("no-lock", e))?,
    };
    let (lock_id, lock) = chosen.ok_or_else(|| {
        Stop(
            "no-lock",
            format!(
                "no environment lock for {} {}; run `swe-ark env lock {} {}` (online) first",
                ctx.repo, ctx.version, ctx.repo, ctx.version
            ),
        )
    })?;
    results.lock = lock_id.hex();
    results.python = lock.tool.swe_ark.python.version.clone();
    let built: BuiltEnv = build::build(
        &ark.objects(),
        ark.root(),
        &lock_id,
        &lock,
        &BuildOptions::default(),
    )
    .map_err(|e| Stop("environment", e.to_string()))?;
    let venv = build::instance_copy(&built, &work.join("venv"))
        .map_err(|e| Stop("environment", e.to_string()))?;
    // As the run's own getcwd() names them: absolute, symlinks resolved.
    let real = |p: &Path| {
        std::fs::canonicalize(p)
            .or_else(|_| std::path::absolute(p))
            .unwrap_or_else(|_| p.to_path_buf())
            .display()
            .to_string()
    };
    results.paths = Some(expected::RunPaths {
        work_tree: real(&src),
        environment: real(&venv.dir),
        tmp: format!("{}/tmp", real(work)),
        work: real(work),
        ark: real(ark.root()),
    });
    results
        .timings
        .insert("environment".into(), t.elapsed().as_secs_f64());

    let mut runner = Runner::new(work, src.clone(), &ctx, &built, &venv, opts)?;
    let prelude = eval_prelude(&ctx);
    let directives = directives::test_directives(&instance.test_patch, &ctx.test_cmd);
    results.test_directives = directives.clone();
    let test_cmd = format!(
        "{} {}",
        ctx.test_cmd,
        directives
            .iter()
            .map(|d| directives::shell_quote(d))
            .collect::<Vec<_>>()
            .join(" ")
    );
    results.services = runner.services.described.clone();
    let install = |runner: &mut Runner, step: &str| -> Result<(), Stop> {
        if ctx.install.is_empty() {
            return Ok(());
        }
        let (log, ok) = runner.run(step, &format!("{prelude}{}\n", ctx.install))?;
        if ok {
            Ok(())
        } else {
            Err(Stop(
                "install-failed",
                format!("`{}` failed ({step}):\n{}", ctx.install, tail(&log, 15)),
            ))
        }
    };
    let outcome = (|| -> Result<(), Stop> {
        // 3. Before the gold patch: the context's setup, as SWE-bench's image has it.
        runner.setup(&ctx, Some(&record))?;
        install(&mut runner, "install")?;
        runner.apply("test-patch", &instance.test_patch)?;
        let (pre_log, _) = runner.run_tests("pre", &prelude, &test_cmd)?;
        let pre_text = String::from_utf8_lossy(&pre_log).into_owned();
        logs.0 = Some(pre_log);
        let t = Instant::now();
        let pre = logparse::parse(&ctx.log_parser, &pre_text)
            .map_err(|e| Stop("unknown-log-parser", e.to_string()))?;
        let mut parse_seconds = t.elapsed().as_secs_f64();
        results.pre = pre.clone();
        if let Some(line) = outcome::stopped_by_import_error(&pre_text, &pre, &directives) {
            return Err(Stop(
                "tests-did-not-run",
                format!("the tests before the gold patch did not run: {line}"),
            ));
        }
        // 4. After it: install again (a non-editable install would test stale code), K runs.
        runner.apply("gold-patch", &instance.patch)?;
        install(&mut runner, "reinstall")?;
        let mut posts = Vec::new();
        for k in 1..=opts.runs.max(1) {
            let (log, _) = runner.run_tests(&format!("post-{k}"), &prelude, &test_cmd)?;
            let t = Instant::now();
            let text = String::from_utf8_lossy(&log).into_owned();
            posts.push(
                logparse::parse(&ctx.log_parser, &text)
                    .map_err(|e| Stop("unknown-log-parser", e.to_string()))?,
            );
            parse_seconds += t.elapsed().as_secs_f64();
            if k == 1 {
                logs.1 = Some(log);
            }
        }
        results.post = posts.clone();
        runner.timings.insert("parse".into(), parse_seconds);
        let lists: Lists = outcome::lists(&pre, &posts);
        results.fail_to_pass = lists.fail_to_pass.clone();
        results.pass_to_pass = lists.pass_to_pass.clone();
        results.xfail = lists.xfail.clone();
        results.flaky = lists.flaky.clone();
        // A published instance is judged against its lists first: one whose FAIL_TO_PASS does
        // not come out at all is not reproducible, with the tests named, not just discarded.
        let published = !instance.fail_to_pass.is_empty() || !instance.pass_to_pass.is_empty();
        if published {
            let mut d = outcome::compare(&lists, &instance.fail_to_pass, &instance.pass_to_pass);
            let post_text = logs
                .1
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            d.needs_network = outcome::needing_network(&d, &[&post_text, &pre_text]);
            if d.covers_published() {
                results.reason_kind = "covers-published".into();
                results.reason = format!(
                    "{}: the published lists come out as published and are what evaluation judges",
                    d.describe()
                );
            } else if !d.is_empty() {
                results.verdict = Verdict::NotReproducible;
                results.reason_kind = "differs-from-published".into();
                results.reason = outcome::difference_reason(&d, &results.services);
                results.published_differences = Some(d);
                return Ok(());
            }
            results.published_differences = Some(d);
        }
        if lists.fail_to_pass.is_empty() {
            return Err(Stop(
                "no-fail-to-pass",
                "no test goes from fail to pass".to_string(),
            ));
        }
        results.verdict = Verdict::Kept;
        Ok(())
    })();
    results.exit_codes = std::mem::take(&mut runner.exit_codes);
    results.timings.extend(std::mem::take(&mut runner.timings));
    results.network = runner.network.to_string();
    outcome
}

/// Records a validation: its logs and results as objects, the row, and for a collected
/// (unpublished) instance that was kept, its FAIL_TO_PASS / PASS_TO_PASS — one transaction.
pub fn record(ark: &mut Ark, instance: &Instance, v: &Validation) -> Result<ValidationRow, String> {
    let objects = ark.objects();
    let put = |bytes: &[u8]| objects.put_bytes(bytes).map_err(|e| e.to_string());
    let results_json = serde_json::to_vec_pretty(&v.results).map_err(|e| e.to_string())?;
    let results_id = put(&results_json)?;
    let log_pre = v.log_pre.as_deref().map(put).transpose()?;
    let log_post = v.log_post.as_deref().map(put).transpose()?;
    let r = &v.results;
    let row = ValidationRow {
        instance_id: r.instance_id.clone(),
        verdict: r.verdict.as_str().to_string(),
        reason_kind: r.reason_kind.clone(),
        reason: r.reason.clone(),
        fail_to_pass: r.fail_to_pass.len() as u64,
        pass_to_pass: r.pass_to_pass.len() as u64,
        flaky: r.flaky.len() as u64,
        lock_id: r.lock.clone(),
        results: results_id,
        log_pre,
        log_post,
        seconds: r.timings.get("total").copied().unwrap_or(0.0),
        validated_at: 0,
    };
    let mut objects_rows = vec![(results_id, results_json.len() as u64, "results")];
    if let (Some(id), Some(b)) = (log_pre, &v.log_pre) {
        objects_rows.push((id, b.len() as u64, "log"));
    }
    if let (Some(id), Some(b)) = (log_post, &v.log_post) {
        objects_rows.push((id, b.len() as u64, "log"));
    }
    let updated = (r.verdict == Verdict::Kept
        && instance.fail_to_pass.is_empty()
        && instance.pass_to_pass.is_empty())
    .then(|| {
        let mut i = instance.clone();
        i.fail_to_pass = r.fail_to_pass.clone();
        i.pass_to_pass = r.pass_to_pass.clone();
        i
    });
    ark.index_mut()
        .record_validation(&row, &objects_rows, updated.as_ref())
        .map_err(|e| e.to_string())?;
    Ok(row)
}
