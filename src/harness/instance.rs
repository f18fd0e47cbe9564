//! The one procedure that runs an instance, from "a work tree, a context, a lock and patches"
//! to "test logs and what to grade them with", with its stages, logs, timings and
//! confinement in one place. Validation and replay are policies over it (which patches, how
//! many runs, how a result is judged); neither sequences its steps.
//!
//! ```text
//! Instance::start   the work tree made a git work tree (its history as the record says)
//!                   ‖ the environment built from the lock, offline, and the instance's copy
//!                   → the runner (fixed layout, sandbox)
//! Instance::evaluate  (the first: the context's setup, committed) → the patch (a gold patch
//!                   exactly, a prediction the harness's ways) → the test patch's files put
//!                   back → install → test patch → K test runs (or the dataset row's own
//!                   eval_script, K times)
//! Instance::finish  exit codes, timings, network, confinement, services: the record
//! ```

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::runner::Runner;
use super::{
    Reason, RunOptions, Stop, assets, eval_script, fresh, installed, patch, paths, tail, worktree,
};
use crate::context::{self, Lock, TestCommand};
use crate::dataset::Instance as Row;
use crate::logparse::{self, Grading, StatusMap};
use crate::manifest::{Context, is_system_command};
use crate::store::ObjectStore;
use crate::vcs::VcsRecord;

/// What an instance's run starts from, whichever its source (a mirror and the archive, a
/// bundle): the work tree's files are in the work directory's `src/` already.
pub struct Prepared {
    pub instance: Row,
    pub ctx: Context,
    /// The context's lock, read ([`context::Kind::read_lock`]).
    pub lock: Box<dyn Lock>,
    /// What git says about the base commit (None: a bundle from before there was a record).
    pub record: Option<VcsRecord>,
    /// Where the lock's environment is built from (objects only) and cached.
    pub objects: ObjectStore,
    pub cache_root: PathBuf,
    /// Where the work tree comes from: `work/src`'s files, or a bundle's kept tree.
    pub tree: worktree::WorkTreeFrom,
}

/// A patch to evaluate with.
#[derive(Debug, Clone, Copy)]
pub enum PatchIn<'p> {
    /// The gold patch: trusted, applied exactly (`git apply`).
    Gold(&'p str),
    /// A model's patch: untrusted. Its paths are checked first; it is applied the ways the
    /// harness of `grading` tries; what decides how tests are collected or reported is put
    /// back afterwards.
    Prediction { text: &'p str, grading: Grading },
}

/// One evaluation: a patch (or none), then the tests, `runs` times.
#[derive(Debug, Clone, Copy)]
pub struct Evaluation<'p> {
    /// Names its test steps: `NAME`, or `NAME-1` … `NAME-K` when `numbered`.
    pub name: &'static str,
    pub numbered: bool,
    pub patch: Option<PatchIn<'p>>,
    pub runs: u32,
    /// Stop the instance when the install fails (validation); otherwise the tests say what
    /// it cost (replay, as SWE-bench's evaluation script goes on).
    pub install_must_succeed: bool,
}

/// What an evaluation produced.
#[derive(Debug, Default)]
pub struct Evaluated {
    /// Each test run, in order.
    pub runs: Vec<TestRun>,
    /// How a prediction went in (`git apply --verbose`, …).
    pub applied_with: Option<&'static str>,
    /// What was put back after a prediction, each with why.
    pub reset_paths: Vec<String>,
}

/// One run of the tests.
#[derive(Debug)]
pub struct TestRun {
    /// Its step's name.
    pub step: String,
    pub log: Vec<u8>,
    /// The test command's own exit code (an eval_script's, as it recorded it).
    pub exit_code: Option<i64>,
}

/// What the run did, as results and reports record it.
#[derive(Debug, Default)]
pub struct RunRecord {
    pub exit_codes: std::collections::BTreeMap<String, i64>,
    pub timings: std::collections::BTreeMap<String, f64>,
    pub network: String,
    pub confinement: String,
    /// How the environment was given to the runs: `overlay` (a private layer over the
    /// lock's shared copy), `copy`, or empty (a kind with nothing to layer).
    pub environment_mount: String,
    /// How the work tree was given to the runs: `overlay` (a private layer over the bundle's
    /// kept tree), `reflink` or `copy` (of it), `built` (made for this run).
    pub worktree_mount: String,
    pub services: Vec<String>,
    /// The installed state the run started from or made (None: none was used).
    pub installed_state: Option<InstalledUse>,
}

/// How a run used an installed state (docs/REPLAY.md, "The installed state"), as results and
/// reports record it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct InstalledUse {
    /// `kept`: the archive had it and the run started from it; `made`: the run installed at
    /// the base commit and kept what that did.
    pub how: String,
    /// Its object.
    pub object: String,
    /// Why the install ran again after the patch; empty when the state was what it would
    /// make.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reinstalled: String,
}

/// What ran the tests: the dataset row's own script, or the context's commands.
pub const EVAL_SCRIPT: &str = "eval_script";
pub const CONTEXT: &str = "context";

/// An instance being run.
pub struct Instance<'a> {
    row: Row,
    ctx: Context,
    parser: String,
    test: TestCommand,
    /// The row's own evaluation script, adapted (a version-5 dataset).
    eval_script: Option<String>,
    runner: Runner<'a>,
    evaluations: u32,
    /// What git says about the base commit: the setup commits with its date.
    record: Option<VcsRecord>,
    /// The environment's own preparation of the tree, run before the context's install.
    prepare: String,
    /// What of the tree survives from one evaluation or run to the next (the kind's).
    kept: Option<&'static [&'static str]>,
    /// The tree after the context's setup, when `kept` is some: each later evaluation starts
    /// from it.
    after_setup: Option<fresh::TreeState>,
    /// The installed state: where it is kept, whether the run is at it (None: the kind or
    /// the run has none, the install runs after the patch).
    installed: Option<installed::Plan>,
}

impl<'a> Instance<'a> {
    /// The log parser `row` and `ctx` name (the row's first), checked to be one swe-ark
    /// knows.
    pub fn parser_of(row: &Row, ctx: &Context) -> Result<String, Stop> {
        let parser = row.harness().log_parser.unwrap_or(&ctx.log_parser);
        if logparse::is_known(parser) {
            return Ok(parser.to_string());
        }
        Err(Stop(
            Reason::UnknownLogParser,
            format!(
                "{} names log parser `{parser}`; known: {}",
                if row.harness().log_parser.is_some() {
                    format!("the dataset row of {}", row.instance_id)
                } else {
                    format!("the manifest of {}", ctx.repo)
                },
                logparse::parser_names().collect::<Vec<_>>().join(", ")
            ),
        ))
    }

    /// Starts the instance in `work` (its files in `work/src`): the work tree and the
    /// environment side by side, and the runner. The context's setup runs with the first
    /// evaluation, so that what it did is in the run's record whatever became of it.
    pub fn start(
        work: &'a Path,
        prepared: Prepared,
        opts: &'a RunOptions,
    ) -> Result<Instance<'a>, Stop> {
        let Prepared {
            instance: row,
            ctx,
            lock,
            record,
            objects,
            cache_root,
            tree: tree_from,
        } = prepared;
        let kind = context::kind_of(&ctx).map_err(|e| Stop(Reason::NoContext, e.to_string()))?;
        let parser = Self::parser_of(&row, &ctx)?;
        let tree = work.join("src");
        let both = Instant::now();
        let (made, tree_seconds, env_seconds, run_env) = std::thread::scope(|s| {
            let git = s.spawn(|| {
                let t = Instant::now();
                let made = worktree::make(tree_from, &tree, record.as_ref());
                (made, t.elapsed().as_secs_f64())
            });
            let t = Instant::now();
            let env = lock
                .build(&objects, &cache_root, opts.unconfined)
                .and_then(|built| built.for_run(work, &row.base_commit))
                .map_err(|e| Stop(Reason::EnvBuildFailed, e.to_string()));
            let env_seconds = t.elapsed().as_secs_f64();
            let (made, tree_seconds) = git.join().unwrap_or_else(|_| {
                let panicked = Stop(Reason::Io, "the git work tree thread panicked".into());
                (Err(panicked), 0.0)
            });
            made.map(|made| (made, tree_seconds, env_seconds, env))
        })?;
        let mut run_env = run_env?;
        // Shown here: an overlay is the thread's that runs the instance.
        let t = Instant::now();
        let shown = worktree::show(made, work, opts.keep_workdir)?;
        let tree_seconds = tree_seconds + t.elapsed().as_secs_f64();
        let both = both.elapsed().as_secs_f64();
        // The tree where the dataset's own harness has it: SWE-bench's /testbed, or
        // Multi-SWE-bench's /home/NAME.
        let work_tree = crate::dataset::harness_work_tree(&row)
            .unwrap_or_else(|| context::layout::WORK_TREE.to_string());
        let t = Instant::now();
        let installed = opts
            .installed_states
            .then(|| {
                installed_plan(
                    &row,
                    &ctx,
                    lock.id(),
                    &work_tree,
                    &objects,
                    &cache_root,
                    &mut run_env,
                )
            })
            .flatten();
        let installed_seconds = t.elapsed().as_secs_f64();
        let mut runner = Runner::new(work, &ctx, &run_env, opts, &work_tree, shown)?;
        if installed.is_some() {
            runner
                .timings
                .insert("installed-environment".into(), installed_seconds);
        }
        runner.timings.insert("worktree".into(), tree_seconds);
        runner.timings.insert("environment".into(), env_seconds);
        // Side by side: their wall time.
        runner.timings.insert("worktree+environment".into(), both);
        let eval_script = row.harness().eval_script.map(|s| {
            let adapted = eval_script::adapt(s, &row.base_commit);
            // The binary files the row's `image_assets` names, written where swebench's
            // harness puts them.
            let staged = assets::stage(&row, &objects);
            for (path, why) in &staged.missing {
                tracing::warn!(
                    "{}: image asset `{path}` not staged: {why}",
                    row.instance_id
                );
            }
            assets::inject(&adapted, &staged.lines)
        });
        Ok(Instance {
            test: kind.test_command(&ctx, &row.test_patch),
            parser,
            eval_script,
            runner,
            evaluations: 0,
            record,
            row,
            ctx,
            prepare: run_env.prepare.clone(),
            kept: kind.kept_between_runs(),
            after_setup: None,
            installed,
        })
    }

    /// The log parser its logs are read with.
    pub fn parser(&self) -> &str {
        &self.parser
    }

    /// The test command (and the tests it names).
    pub fn test_command(&self) -> &TestCommand {
        &self.test
    }

    /// What ran the tests: [`EVAL_SCRIPT`] or [`CONTEXT`].
    pub fn evaluated_with(&self) -> &'static str {
        if self.eval_script.is_some() {
            EVAL_SCRIPT
        } else {
            CONTEXT
        }
    }

    /// The services the tests run with, one sentence each.
    pub fn services(&self) -> &[String] {
        &self.runner.services.described
    }

    /// Records `seconds` under `step` in the run's timings.
    pub fn time(&mut self, step: &str, seconds: f64) {
        self.runner.timings.insert(step.to_string(), seconds);
    }

    /// Parses a test log with the instance's parser, by `grading`'s readings.
    pub fn parse(&self, log: &[u8], grading: Grading) -> Result<StatusMap, Stop> {
        logparse::parse_for(
            &self.parser,
            &String::from_utf8_lossy(log),
            grading,
            &self.row.instance_id,
        )
        .map_err(|e| {
            let reason = match e {
                logparse::LogParseError::Handler { .. } => Reason::LogParseFailed,
                _ => Reason::UnknownLogParser,
            };
            Stop(reason, e.to_string())
        })
    }

    /// Runs one evaluation (see the module's comment), recording into `out` as it goes: a
    /// stage that stops the instance leaves what the earlier ones did there.
    pub fn evaluate(&mut self, e: &Evaluation<'_>, out: &mut Evaluated) -> Result<(), Stop> {
        self.evaluations += 1;
        let again = self.evaluations > 1;
        if !again {
            // The context's setup, as SWE-bench's image has it before any patch.
            let t = Instant::now();
            self.runner.setup(&self.ctx, self.record.as_ref())?;
            self.time("setup", t.elapsed().as_secs_f64());
            if self.eval_script.is_none() {
                self.installed_at_base(e.install_must_succeed)?;
            }
            self.after_setup = self.tree_state("after-setup")?;
        } else if let Some(state) = &self.after_setup {
            // As a new container from the image: nothing of the earlier evaluations' runs.
            let state = state.clone();
            self.restore_tree(&state, "restore-tree")?;
        }
        let touched = match e.patch {
            None => Vec::new(),
            Some(PatchIn::Gold(text) | PatchIn::Prediction { text, .. }) => {
                paths::touched_paths(text)
            }
        };
        match e.patch {
            None => {}
            Some(PatchIn::Gold(text)) => self.runner.apply(
                "gold-patch",
                "gold patch",
                text,
                Reason::GoldPatchDoesNotApply,
            )?,
            Some(PatchIn::Prediction { text, grading }) => {
                self.apply_prediction(text, grading, out)?
            }
        }
        // The test patch's files as the base commit has them (a file it creates removed): a
        // prediction may have edited them, and the test patch goes on them next.
        self.restore_test_files();
        if self.eval_script.is_none() {
            let test_patch = if again {
                "test-patch-again"
            } else {
                "test-patch"
            };
            self.install_after_patch(&touched, again, e.install_must_succeed)?;
            let test_patch_text = self.row.test_patch.clone();
            self.runner.apply(
                test_patch,
                "test patch",
                &test_patch_text,
                Reason::TestPatchDoesNotApply,
            )?;
        }
        let before_runs = if e.runs > 1 {
            self.tree_state("before-runs")?
        } else {
            None
        };
        for k in 1..=e.runs.max(1) {
            let step = if e.numbered {
                format!("{}-{k}", e.name)
            } else {
                e.name.to_string()
            };
            if k > 1
                && let Some(state) = &before_runs
            {
                self.restore_tree(state, &format!("restore-tree-{k}"))?;
            }
            let run = self.run_tests(&step)?;
            out.runs.push(run);
        }
        Ok(())
    }

    /// The work tree now (its index in the work directory's `NAME.index`), when the kind
    /// keeps only some of what runs leave.
    fn tree_state(&self, name: &str) -> Result<Option<fresh::TreeState>, Stop> {
        let Some(kept) = self.kept else {
            return Ok(None);
        };
        let index = self.runner.work().join(format!("{name}.index"));
        fresh::TreeState::of(&self.runner.tree, kept, &index)
            .map(Some)
            .map_err(|e| Stop(Reason::Io, format!("cannot record the work tree: {e}")))
    }

    /// Puts the tree back as it was at `state` (but the kind's kept paths), timed as `step`.
    fn restore_tree(&mut self, state: &fresh::TreeState, step: &str) -> Result<(), Stop> {
        let kept = self.kept.unwrap_or_default();
        let t = Instant::now();
        let restored = state.restore(&self.runner.tree, kept).map_err(|e| {
            Stop(
                Reason::Io,
                format!("cannot put the work tree back as it was before the last run: {e}"),
            )
        })?;
        tracing::debug!(
            "{step}: {} paths removed, {} files put back",
            restored.removed,
            restored.put_back
        );
        self.time(step, t.elapsed().as_secs_f64());
        Ok(())
    }

    /// A prediction's patch: its paths checked, applied the harness's ways, then what decides
    /// how tests are collected or reported put back (a conftest.py hook could report any test
    /// passed).
    fn apply_prediction(
        &mut self,
        text: &str,
        grading: Grading,
        out: &mut Evaluated,
    ) -> Result<(), Stop> {
        let tree = self.runner.tree.clone();
        if let Some(why) = patch::unsafe_path(text, &tree) {
            return Err(Stop(Reason::PatchUnsafe, why));
        }
        let t = Instant::now();
        let file = tree.with_file_name("model.diff");
        std::fs::write(&file, text).map_err(|e| Stop(Reason::Io, e.to_string()))?;
        let (way, transcript) = patch::apply(&tree, &file, grading);
        self.time("patch", t.elapsed().as_secs_f64());
        let Some(way) = way else {
            return Err(Stop(Reason::PatchApplyFailed, transcript));
        };
        out.applied_with = Some(way);
        let runner_scripts = runner_scripts(&self.ctx.test_cmd, &tree);
        let config =
            patch::test_config_changes(&tree, &paths::touched_paths(text), &runner_scripts);
        let config_paths: Vec<String> = config.iter().map(|(p, _)| p.clone()).collect();
        out.reset_paths = paths::restore(&tree, &config_paths)
            .into_iter()
            .zip(&config)
            .map(|(done, (_, why))| format!("{done} ({why})"))
            .collect();
        let mut changed = paths::touched_paths(text);
        changed.extend(config_paths);
        self.runner.stamp(&changed);
        Ok(())
    }

    /// The test patch's files as the base commit has them (a file it creates removed), dated
    /// as a change ([`Runner::stamp`]).
    fn restore_test_files(&mut self) {
        let files = paths::touched_paths(&self.row.test_patch);
        paths::restore(&self.runner.tree, &files);
        self.runner.stamp(&files);
    }

    /// The install at the base commit, before any patch, when the run keeps an installed
    /// state: the kept one's work tree files written (its environment is mounted already), or
    /// the install run and what it did kept. An install that fails leaves the run without a
    /// state: it installs again after the patch, as without one.
    fn installed_at_base(&mut self, must_succeed: bool) -> Result<(), Stop> {
        let Some(plan) = &mut self.installed else {
            return Ok(());
        };
        let t = Instant::now();
        match plan.apply_tree(&self.runner.tree) {
            Ok(true) => {
                self.time("installed-tree", t.elapsed().as_secs_f64());
                return Ok(());
            }
            Ok(false) => {}
            Err(e) => return Err(Stop(Reason::Io, e.to_string())),
        }
        let t = Instant::now();
        if !self.install("install", must_succeed)? {
            return Ok(());
        }
        let seconds = t.elapsed().as_secs_f64();
        let (Some(plan), Some(changes)) = (&mut self.installed, &self.runner.env_changes) else {
            return Ok(());
        };
        let t = Instant::now();
        match plan.make(changes, &self.runner.tree, self.runner.work(), seconds) {
            Ok(id) => tracing::debug!(
                "{}: installed state {} kept",
                self.row.instance_id,
                id.short()
            ),
            Err(e) => tracing::warn!("{}: {e}", self.row.instance_id),
        }
        self.time("installed-state", t.elapsed().as_secs_f64());
        Ok(())
    }

    /// The install after the patch: skipped when the run is at its installed state and the
    /// patch touched nothing the install reads ([`installed::reinstall_reason`]).
    fn install_after_patch(
        &mut self,
        touched: &[String],
        again: bool,
        must_succeed: bool,
    ) -> Result<(), Stop> {
        let step = match &mut self.installed {
            Some(plan) if plan.at_base => {
                let Some(why) = installed::reinstall_reason(touched, plan.editable) else {
                    return Ok(());
                };
                tracing::debug!("{}: the install runs again: {why}", self.row.instance_id);
                if plan.outcome.reinstalled.is_empty() {
                    plan.outcome.reinstalled = why;
                }
                if again {
                    "reinstall-again"
                } else {
                    "reinstall"
                }
            }
            _ if again => "reinstall",
            _ => "install",
        };
        self.install(step, must_succeed).map(|_| ())
    }

    /// The context's install, when it has one (after the environment's preparation); whether
    /// it succeeded (or there was none).
    fn install(&mut self, step: &str, must_succeed: bool) -> Result<bool, Stop> {
        if self.ctx.install.is_empty() && self.prepare.is_empty() {
            return Ok(true);
        }
        let script = format!(
            "{}{}{}\n",
            eval_prelude(&self.ctx),
            self.prepare,
            self.ctx.install
        );
        let (log, ok) = self.runner.run(step, &script)?;
        if ok || !must_succeed {
            return Ok(ok);
        }
        Err(Stop(
            Reason::InstallFailed,
            format!(
                "`{}` failed ({step}):\n{}",
                self.ctx.install,
                tail(&log, 15)
            ),
        ))
    }

    /// One run of the tests: the context's test command after its eval commands, or the row's
    /// own script (the test patch's files put back first, as it expects to find them).
    fn run_tests(&mut self, step: &str) -> Result<TestRun, Stop> {
        match self.eval_script.clone() {
            Some(script) => {
                self.restore_test_files();
                let (log, _) = self.runner.run_tests(step, "", &script)?;
                eval_script::require_markers(step, &log)?;
                let exit_code = eval_script::recorded_exit_code(&String::from_utf8_lossy(&log));
                Ok(TestRun {
                    step: step.to_string(),
                    log,
                    exit_code,
                })
            }
            None => {
                let prelude = eval_prelude(&self.ctx);
                let command = self.test.command.clone();
                let (log, _) = self.runner.run_tests(step, &prelude, &command)?;
                Ok(TestRun {
                    step: step.to_string(),
                    exit_code: self.runner.exit_codes.get(step).copied(),
                    log,
                })
            }
        }
    }

    /// The run's record; the work directory stays until the caller drops it.
    pub fn finish(self) -> RunRecord {
        let confinement = self.runner.confinement().to_string();
        let worktree_mount = self.runner.tree_mount().to_string();
        RunRecord {
            exit_codes: self.runner.exit_codes,
            timings: self.runner.timings,
            network: self.runner.network.to_string(),
            confinement,
            environment_mount: self.runner.env_mount.to_string(),
            worktree_mount,
            services: self.runner.services.described,
            installed_state: self.installed.and_then(|p| {
                let object = p.outcome.object?;
                Some(InstalledUse {
                    how: p.outcome.how.to_string(),
                    object: object.hex(),
                    reinstalled: p.outcome.reinstalled,
                })
            }),
        }
    }
}

/// The context's `eval_commands` that run (system package managers are outside the
/// environment), one per line, to put before an install or a test command.
fn eval_prelude(ctx: &Context) -> String {
    ctx.eval_commands
        .iter()
        .filter(|c| !is_system_command(c))
        .map(|c| format!("{c}\n"))
        .collect()
}

/// The files in the checkout that the test command runs itself (`./tests/runtests.py`,
/// `bin/test`): the runner, which a prediction may not change.
fn runner_scripts(test_cmd: &str, src: &Path) -> Vec<String> {
    test_cmd
        .split_whitespace()
        .map(|w| w.trim_start_matches("./"))
        .filter(|w| !w.starts_with('-') && !w.contains('=') && !w.split('/').any(|c| c == ".."))
        .filter(|w| !w.is_empty() && !w.starts_with('/'))
        .filter(|w| std::fs::symlink_metadata(src.join(w)).is_ok_and(|m| m.file_type().is_file()))
        .map(str::to_string)
        .collect()
}

/// The installed-state plan of an instance (None when it has none: no install, a row's own
/// evaluation script, no layered environment, no archive index), with the environment's
/// layered mount put on the kept state's environment when the archive has one.
fn installed_plan(
    row: &Row,
    ctx: &Context,
    lock: crate::digest::Sha256Digest,
    work_tree: &str,
    objects: &ObjectStore,
    cache_root: &Path,
    run_env: &mut context::RunEnvironment,
) -> Option<installed::Plan> {
    if ctx.install.trim().is_empty() || row.harness().eval_script.is_some() {
        return None;
    }
    let mut layered = run_env.mounts.iter_mut().filter(|m| m.layer.is_some());
    let env = layered.next()?;
    let id = installed::Identity {
        lock,
        repo: &row.repo,
        instance_id: &row.instance_id,
        base_commit: &row.base_commit,
        work_tree,
        env_at: &env.at,
    };
    let mut vars = ctx.env.clone();
    vars.extend(run_env.vars.clone());
    vars.insert("PATH".into(), run_env.path.join(":"));
    let key = installed::key(&id, ctx, &run_env.prepare, &vars);
    let mut plan = installed::Plan::new(cache_root, objects, &id, key)?;
    match plan.kept_environment(cache_root, &env.host) {
        Ok(Some(kept)) => env.host = kept,
        Ok(None) => {}
        Err(e) => tracing::warn!("{}: {e}", row.instance_id),
    }
    Some(plan)
}
