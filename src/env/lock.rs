//! Locking an executable context: install it for real, once, online, and keep what it took.
//!
//! The procedure (docs/ENVIRONMENTS.md tells it for users):
//! 1. the interpreter (exact major.minor), the environment setup commit and its date;
//! 2. a checkout of that commit from the mirror, a fresh virtual environment, and the
//!    [`proxy`](super::proxy) in front of the index with the commit's date as the cutoff;
//! 3. SWE-bench's order: pip/setuptools/wheel of that era, `packages`, the first requirement
//!    file that exists (includes inlined, `-e .` left out, as SWE-bench does), `pip_packages`,
//!    `pre_install` (system package managers skipped and noted), `install`; then the
//!    services' pinned packages, apart ([`services`](super::services));
//! 4. sdists built into wheels (from pip's wheel cache, or `pip wheel`);
//! 5. every installed distribution matched to the artifact it came from; files downloaded but
//!    not installed are build dependencies (isolated builds, the repository's build backend);
//! 6. the lock written, and proven: the environment is built from it offline, and the
//!    repository's install run in a copy with no index at all.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::asof::{self, Cutoff, CutoffRule};
use super::build::{self, BuildOptions, BuiltEnv};
use super::conda;
use super::proxy::{Fetched, LockProxy, ProxyConfig};
use super::pylock::{
    self, Artifact, Bundled, ContextMeta, Hashes, LockMeta, Package, PackageMeta, PackageTool,
    PyLock, PythonMeta, Role, ServiceMeta, Tool, normalize, parse_filename, same_version,
};
use super::services::Locked;
use super::steps::{self, StepRunner};
use super::venv::{self, InstalledDist, Venv};
use super::{EnvError, io_err, packed, python};
use crate::digest::Sha256Digest;
use crate::manifest::Context;
use crate::mirror::Mirror;
use crate::mirror::RepoName;
use crate::sandbox::Network;
use crate::store::Ark;

pub const DEFAULT_INDEX: &str = "https://pypi.org/simple";

#[derive(Debug, Clone)]
pub struct LockOptions {
    pub commit: Option<String>,
    pub python: Option<PathBuf>,
    /// The simple index to resolve from.
    pub index_url: String,
    /// Overrides the cutoff (the dataset's environments date, or the commit's date).
    pub exclude_newer: Option<SystemTime>,
    pub pack_python: bool,
    pub allow_yanked: bool,
    pub installer: build::Installer,
    /// Run the installs with the caller's rights, not confined by the sandbox
    /// (`--unconfined`).
    pub unconfined: bool,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct LockReport {
    pub id: String,
    pub repo: String,
    pub version: String,
    pub commit: String,
    pub exclude_newer: String,
    /// Where the cutoff comes from (a dataset, --exclude-newer, the commit's date).
    pub exclude_newer_rule: String,
    pub python: String,
    pub packages: usize,
    pub runtime: usize,
    pub build: usize,
    /// Installed in services' own environments only.
    pub services: usize,
    pub artifacts: usize,
    pub bytes: u64,
    /// Files the installers downloaded through the proxy in this run (already stored ones
    /// are served from the store).
    pub downloaded: usize,
    pub built_wheels: Vec<String>,
    pub notes: Vec<String>,
    /// `confined`, or `unconfined` (`--unconfined`): how the installs ran.
    pub confinement: String,
    pub env: BuiltEnv,
}

/// Requirements SWE-bench's harness replaces, whatever their version
/// (`swebench/harness/test_spec/python.py`, `REPLACE_REQ_PACKAGES`): every release of
/// types-pkg_resources was yanked.
const REPLACE_REQUIREMENTS: &[(&str, &str)] = &[("types-pkg_resources", "types-setuptools")];

/// SWE-bench's reading of a requirements file (`get_requirements_by_commit` and
/// `clean_requirements` of swebench 4.1.0): `-r` includes inlined (one level) before the
/// file's own lines, lines that start with `-e .`, `#` or `.[test` left out, and
/// [`REPLACE_REQUIREMENTS`] applied.
fn swebench_requirements(src: &Path, req_path: &str) -> Result<String, EnvError> {
    let path = src.join(req_path);
    let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
    let dir = Path::new(req_path).parent().unwrap_or(Path::new(""));
    let excluded = |line: &str| {
        let l = line.trim();
        ["-e .", "#", ".[test"].iter().any(|p| l.starts_with(p))
    };
    let mut original = Vec::new();
    let mut additional = Vec::new();
    for line in text.split('\n') {
        if let Some(rest) = line.trim().strip_prefix("-r") {
            let nested = src.join(dir).join(rest.trim());
            let nested_text = std::fs::read_to_string(&nested).map_err(io_err(&nested))?;
            additional.extend(
                nested_text
                    .split('\n')
                    .filter(|l| !excluded(l))
                    .map(str::to_string),
            );
        } else if !excluded(line) {
            original.push(line.to_string());
        }
    }
    additional.push(original.join("\n"));
    let mut text = additional.join("\n");
    for (from, to) in REPLACE_REQUIREMENTS {
        // An escaped name in a fixed pattern: always a valid regex.
        let re = regex::Regex::new(&format!(r"(?m)^{}([<>=!~]=?.*|$)", regex::escape(from)))
            .expect("a valid regex");
        text = re.replace_all(&text, *to).into_owned();
    }
    Ok(text)
}

pub use crate::manifest::is_system_command;

use asof::rfc3339;

/// The cutoff of a lock: `--exclude-newer`, else the environments date of the dataset the
/// instances of this version came from, else the commit's date. A cutoff before the commit
/// (nothing could have been built then) or in the future is refused, as are instances of
/// several datasets that disagree.
fn resolve_cutoff(
    ark: &Ark,
    ctx: &Context,
    explicit: Option<SystemTime>,
    commit: &str,
    commit_time: SystemTime,
) -> Result<Cutoff, EnvError> {
    let cutoff = if let Some(when) = explicit {
        Cutoff {
            when,
            rule: CutoffRule::Explicit,
        }
    } else {
        let dated: Vec<_> = ark
            .index()
            .datasets_of(&ctx.repo, &ctx.version)?
            .into_iter()
            .filter_map(|d| Some((d.environments_as_of.clone()?, d)))
            .collect();
        let dates: BTreeSet<&str> = dated.iter().map(|(w, _)| w.as_str()).collect();
        match dates.len() {
            0 => Cutoff {
                when: commit_time,
                rule: CutoffRule::Commit,
            },
            1 => {
                let (when, d) = &dated[0];
                Cutoff {
                    when: asof::parse_when(when).ok_or_else(|| EnvError::BadCutoff {
                        detail: format!(
                            "dataset {}'s environments date `{when}` is not a date",
                            d.name
                        ),
                    })?,
                    rule: CutoffRule::Dataset {
                        name: d.name.clone(),
                        rule: d.rule.clone(),
                    },
                }
            }
            _ => {
                return Err(EnvError::BadCutoff {
                    detail: format!(
                        "the instances of {} {} come from datasets with different environments \
                         dates ({}); pass --exclude-newer WHEN to choose one",
                        ctx.repo,
                        ctx.version,
                        dated
                            .iter()
                            .map(|(w, d)| format!("{} as of {w}", d.name))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
        }
    };
    if cutoff.when < commit_time {
        return Err(EnvError::BadCutoff {
            detail: format!(
                "the cutoff {} ({}) is before the environment setup commit {} of {} {} \
                 (committed {}): an environment cannot have been built before its code existed",
                rfc3339(cutoff.when),
                cutoff.describe(),
                &commit[..commit.len().min(12)],
                ctx.repo,
                ctx.version,
                rfc3339(commit_time)
            ),
        });
    }
    let now = SystemTime::now();
    if cutoff.when > now {
        return Err(EnvError::BadCutoff {
            detail: format!(
                "the cutoff {} ({}) is in the future (now {}): a lock resolved as of it would \
                 change as packages are uploaded",
                rfc3339(cutoff.when),
                cutoff.describe(),
                rfc3339(now)
            ),
        });
    }
    Ok(cutoff)
}

/// The environment setup commit: `--commit`, else the one the index's instances agree on.
fn resolve_commit(ark: &Ark, ctx: &Context, given: Option<&str>) -> Result<String, EnvError> {
    if let Some(c) = given {
        return Ok(c.to_string());
    }
    let mut commits = BTreeSet::new();
    for row in ark.index().instances_of_repo(&ctx.repo)? {
        if row.version == ctx.version
            && let Some(inst) = ark.index().instance(&row.instance_id)?
            && !inst.environment_setup_commit.is_empty()
        {
            commits.insert(inst.environment_setup_commit.clone());
        }
    }
    match commits.len() {
        0 => Err(EnvError::NoCommit {
            repo: ctx.repo.clone(),
            version: ctx.version.clone(),
        }),
        1 => Ok(commits.into_iter().next().unwrap_or_default()),
        _ => Err(EnvError::AmbiguousCommit {
            repo: ctx.repo.clone(),
            version: ctx.version.clone(),
            commits: commits.into_iter().collect(),
        }),
    }
}

/// The distinct base commits of the archive's instances of this repository and version,
/// other than the environment setup commit, sorted.
fn instance_base_commits(
    ark: &Ark,
    ctx: &Context,
    env_commit: &str,
) -> Result<Vec<String>, EnvError> {
    let mut out = BTreeSet::new();
    for row in ark.index().instances_of_repo(&ctx.repo)? {
        if row.version == ctx.version
            && row.base_commit != env_commit
            && !row.base_commit.is_empty()
        {
            out.insert(row.base_commit.clone());
        }
    }
    Ok(out.into_iter().collect())
}

/// What decides an install's dependencies at `commit`: the id of each file (or folder) that
/// declares them — `setup.py`, `setup.cfg`, `pyproject.toml`, root `requirements*` files, a
/// `requirements/` folder, and the context's requirement and conda environment files. Two
/// commits with the same key install the same dependencies.
fn build_files_key(
    repo: &git2::Repository,
    commit: &str,
    ctx: &Context,
) -> Option<Vec<(String, String)>> {
    let tree = repo
        .revparse_single(commit)
        .and_then(|o| o.peel_to_tree())
        .ok()?;
    let mut paths: BTreeSet<String> = [
        "setup.py",
        "setup.cfg",
        "pyproject.toml",
        "requirements",
        "ci/requirements",
    ]
    .iter()
    .map(|p| p.to_string())
    .chain(ctx.requirements.iter().cloned())
    .chain(ctx.conda_environment.iter().cloned())
    .collect();
    for e in tree.iter() {
        if let Ok(name) = e.name()
            && name.starts_with("requirements")
        {
            paths.insert(name.to_string());
        }
    }
    Some(
        paths
            .into_iter()
            .map(|p| {
                let id = tree
                    .get_path(Path::new(&p))
                    .map(|e| e.id().to_string())
                    .unwrap_or_default();
                (p, id)
            })
            .collect(),
    )
}

/// A working tree of `commit` (with its `.git`, which setuptools_scm and friends read).
pub fn checkout(mirror: &Path, commit: &str, dest: &Path) -> Result<(), EnvError> {
    let git = |args: &[&str], cwd: Option<&Path>| -> Result<(), EnvError> {
        let mut cmd = crate::gitcmd::command();
        cmd.args(args);
        if let Some(d) = cwd {
            cmd.current_dir(d);
        }
        steps::run(&mut cmd, &format!("checking out {commit}")).map(|_| ())
    };
    let (m, d) = (mirror.to_string_lossy(), dest.to_string_lossy());
    git(
        &["clone", "--quiet", "--shared", "--no-checkout", &m, &d],
        None,
    )?;
    git(&["checkout", "--quiet", "--detach", commit], Some(dest))
}

struct Step<'a> {
    proxy: &'a LockProxy,
    cutoff: &'a Cutoff,
    /// Where the install commands run: confined, seeing the lock's work directory.
    steps: &'a StepRunner,
}

impl Step<'_> {
    /// Runs one install step (`cmd` makes the command, again for each attempt). When pip
    /// found nothing for a requirement of a release the cutoff admitted anyway (a pin), the
    /// earliest release that meets it is admitted and the step runs again. On failure, the
    /// cause worth naming comes before pip's own words: a file the proxy could not hand over
    /// (vanished, tampered), or requirements that only releases after the cutoff satisfy
    /// (each with the rule that excluded it and what would admit it).
    fn run(&self, cmd: &dyn Fn() -> Command, step: &str) -> Result<(), EnvError> {
        // Each attempt admits at least one release; a pin's requirements are finitely many.
        const ATTEMPTS: usize = 50;
        let mut attempt = 0;
        let e = loop {
            let e = match self.steps.run(&mut cmd(), step) {
                Ok(_) => return Ok(()),
                Err(e) => e,
            };
            attempt += 1;
            let admitted = match (&e, self.proxy.failures().is_empty()) {
                (EnvError::Command { output, .. }, true) if attempt < ATTEMPTS => {
                    asof::unmet_requirements(output)
                        .into_iter()
                        .filter(|(req, parent)| {
                            parent
                                .as_deref()
                                .is_some_and(|p| self.proxy.admit_required(req, p))
                        })
                        .count()
                }
                _ => 0,
            };
            if admitted == 0 {
                break e;
            }
        };
        if let Some(f) = self.proxy.failures().first() {
            return Err(EnvError::Fetch {
                step: step.to_string(),
                failure: f.to_string(),
            });
        }
        let EnvError::Command { output, .. } = &e else {
            return Err(e);
        };
        let reasons: Vec<String> = asof::unmet_requirements(output)
            .into_iter()
            .filter_map(|(req, parent)| {
                let x = self.proxy.excluded(&req)?;
                // The first second at which the file is no longer newer than the cutoff.
                let admit_at = x.uploaded + Duration::from_secs(1);
                Some(format!(
                    "{req}{}: no release uploaded before the cutoff {} ({}) satisfies it; the \
                     first that does, {}, was uploaded {}; {}",
                    parent
                        .map(|p| format!(" (required by {p})"))
                        .unwrap_or_default(),
                    rfc3339(self.cutoff.when),
                    self.cutoff.describe(),
                    x.filename,
                    rfc3339(x.uploaded),
                    self.cutoff.what_admits(admit_at)
                ))
            })
            .collect();
        if reasons.is_empty() {
            return Err(e);
        }
        Err(EnvError::Excluded {
            step: step.to_string(),
            reasons,
            output: output.clone(),
        })
    }
}

/// The wheel pip built from `name`/`version`'s sdist during the install, in its cache.
fn cached_built_wheel(cache: &Path, name: &str, version: &str) -> Option<PathBuf> {
    let mut stack = vec![cache.join("wheels")];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Some(f) = p.file_name().and_then(|f| f.to_str())
                && let Some((n, v, true)) = parse_filename(f)
                && n == name
                && same_version(&v, version)
            {
                return Some(p);
            }
        }
    }
    None
}

fn artifact_of(f: &Fetched) -> Artifact {
    Artifact {
        name: f.info.filename.clone(),
        upload_time: f
            .info
            .upload_time
            .as_deref()
            .and_then(|t| t.parse::<toml::value::Datetime>().ok()),
        url: Some(f.info.url.clone()),
        size: f.size,
        hashes: Hashes {
            sha256: f.sha256.hex(),
        },
    }
}

/// What a lock is of: the interpreter, the mirror, the environment setup commit and the cutoff.
struct Target {
    interp: python::Interpreter,
    mirror: Mirror,
    commit: String,
    cutoff: Cutoff,
}

/// The interpreter (exact major.minor), the environment setup commit and its date, and the
/// cutoff they give.
fn resolve_target(
    ark: &Ark,
    ctx: &Context,
    opts: &LockOptions,
    say: &dyn Fn(&str),
) -> Result<Target, EnvError> {
    if ctx.python.starts_with("2.") {
        return Err(EnvError::NoVenv(ctx.python.clone()));
    }
    let interp = python::find(&ctx.python, opts.python.as_deref())?;
    say(&format!(
        "Python {} at {}",
        interp.version,
        interp.path.display()
    ));
    let name = RepoName::parse(&ctx.repo).ok_or_else(|| EnvError::NoCommit {
        repo: ctx.repo.clone(),
        version: ctx.version.clone(),
    })?;
    let mirror = Mirror::open(&ark.mirrors_dir(), &name)?;
    let commit_arg = resolve_commit(ark, ctx, opts.commit.as_deref())?;
    let (commit, commit_time) = {
        let c = mirror
            .repo
            .revparse_single(&commit_arg)
            .and_then(|o| o.peel_to_commit())
            .map_err(|_| crate::mirror::MirrorError::MissingCommit {
                name: ctx.repo.clone(),
                commit: commit_arg.clone(),
                hint: format!(
                    " (run `swe-ark mirror update {}`, or check the id)",
                    ctx.repo
                ),
            })?;
        (c.id().to_string(), c.time().seconds())
    };
    let cutoff = resolve_cutoff(
        ark,
        ctx,
        opts.exclude_newer,
        &commit,
        UNIX_EPOCH + Duration::from_secs(commit_time.max(0) as u64),
    )?;
    say(&format!(
        "{} {} at {}: resolving as of {} ({})",
        ctx.repo,
        ctx.version,
        &commit[..12],
        rfc3339(cutoff.when),
        cutoff.describe()
    ));
    Ok(Target {
        interp,
        mirror,
        commit,
        cutoff,
    })
}

/// The files of the checkout SWE-bench reads: the first requirements file and the first conda
/// environment file that exist.
struct SourceFiles {
    requirements_file: Option<String>,
    requirements_text: Option<String>,
    conda_file: Option<String>,
    conda_env: Option<conda::MappedEnvironment>,
}

fn read_source_files(ctx: &Context, src: &Path) -> Result<SourceFiles, EnvError> {
    let first_existing = |names: &[String]| names.iter().find(|n| src.join(n).is_file()).cloned();
    // The requirements file SWE-bench would read, read now: its pins pass the cutoff too.
    let requirements_file = first_existing(&ctx.requirements);
    let requirements_text = match &requirements_file {
        Some(req) => Some(swebench_requirements(src, req)?),
        None => None,
    };
    // The conda environment file SWE-bench builds from (the first that exists), as pip
    // requirements.
    let conda_file = first_existing(&ctx.conda_environment);
    let conda_env = match &conda_file {
        Some(f) => Some(conda::map_file(&src.join(f), f)?),
        None => None,
    };
    Ok(SourceFiles {
        requirements_file,
        requirements_text,
        conda_file,
        conda_env,
    })
}

/// The context's explicit `==` pins, wherever SWE-bench reads requirements from.
fn context_pins(ctx: &Context, files: &SourceFiles) -> BTreeMap<String, BTreeSet<String>> {
    asof::explicit_pins(
        ctx.packages
            .iter()
            .chain(&ctx.pip_packages)
            .chain(files.conda_env.iter().flat_map(|c| &c.requirements))
            .map(String::as_str)
            .chain(files.requirements_text.iter().flat_map(|t| t.lines())),
    )
}

/// A proxy configuration of this lock (its index, cutoff, floors and objects) with `pins`.
fn proxy_config(
    ark: &Ark,
    opts: &LockOptions,
    interp: &python::Interpreter,
    exclude_newer: SystemTime,
    pins: BTreeMap<String, BTreeSet<String>>,
) -> ProxyConfig {
    ProxyConfig {
        upstream: opts.index_url.clone(),
        exclude_newer: Some(exclude_newer),
        pins,
        installers_as_of: asof::installers_floor(&interp.version)
            .filter(|floor| *floor > exclude_newer),
        tool_floors: asof::tool_floors(&interp.version, exclude_newer),
        allow_yanked: opts.allow_yanked,
        objects: ark.objects(),
    }
}

/// Where the install steps run: the lock's virtual environment with its variables, in the
/// checkout, each step through the proxy.
struct Installs<'a> {
    step: Step<'a>,
    venv: &'a Venv,
    env: &'a BTreeMap<String, String>,
    src: &'a Path,
    work: &'a Path,
    say: &'a dyn Fn(&str),
}

impl Installs<'_> {
    /// `pip install ARGS`, in the checkout.
    fn pip(&self, args: &[&str]) -> Command {
        let mut c = self.venv.command(self.env);
        c.args(["-m", "pip", "install"])
            .args(args)
            .current_dir(self.src);
        c
    }
}

/// Step 1: the installers of the commit's era, where the index has them.
fn install_era_installers(ins: &Installs) -> Result<(), EnvError> {
    let mut era = Vec::new();
    for tool in ["pip", "setuptools", "wheel"] {
        if ins.step.proxy.offers(tool).map_err(|f| EnvError::Fetch {
            step: format!("asking the index for {tool}"),
            failure: f.to_string(),
        })? {
            era.push(tool);
        }
    }
    if !era.is_empty() {
        (ins.say)(&format!("installing {} as of then", era.join(", ")));
        // --force-reinstall: the interpreter's own pip may be newer than the era's, and a
        // plain upgrade never goes down.
        let mut args = vec!["--upgrade", "--force-reinstall"];
        args.extend(&era);
        ins.step.run(
            &|| ins.pip(&args),
            &format!("installing {}", era.join(", ")),
        )?;
    }
    Ok(())
}

/// The context's `pre_install` commands: those run, and those skipped (system ones).
struct PreInstall {
    ran: Vec<String>,
    skipped: Vec<String>,
}

/// Step 2: the context, in SWE-bench's order: packages, the conda environment, the
/// requirements file, pip_packages, pre_install, install.
fn install_context(
    ins: &Installs,
    ctx: &Context,
    files: &SourceFiles,
    commit: &str,
    notes: &mut Vec<String>,
) -> Result<PreInstall, EnvError> {
    let Installs {
        step,
        venv,
        env,
        src,
        work,
        say,
    } = ins;
    let pip = |args: &[&str]| ins.pip(args);
    if !ctx.packages.is_empty() {
        say(&format!("installing packages: {}", ctx.packages.join(" ")));
        let args: Vec<&str> = ctx.packages.iter().map(String::as_str).collect();
        step.run(&|| pip(&args), "installing the context's packages")?;
    }
    if let (Some(file), Some(mapped)) = (&files.conda_file, &files.conda_env) {
        say(&format!(
            "installing the conda environment {file}, mapped to pip: {}",
            mapped.requirements.join(" ")
        ));
        for (dep, why) in &mapped.left_out {
            notes.push(format!("{file}: `{dep}` left out ({why})"));
        }
        if !mapped.requirements.is_empty() {
            let path = work.join("conda-environment.txt");
            std::fs::write(&path, mapped.requirements.join("\n") + "\n").map_err(io_err(&path))?;
            let p = path.display().to_string();
            step.run(
                &|| pip(&["-r", &p]),
                &format!("installing the conda environment {file} (mapped to pip)"),
            )?;
        }
    } else if !ctx.conda_environment.is_empty() {
        say(&format!(
            "note: none of {} exists at {}",
            ctx.conda_environment.join(", "),
            &commit[..12]
        ));
    }
    if let (Some(req), Some(text)) = (&files.requirements_file, &files.requirements_text) {
        let path = work.join("requirements.txt");
        std::fs::write(&path, text).map_err(io_err(&path))?;
        say(&format!("installing the requirements of {req}"));
        let p = path.display().to_string();
        step.run(&|| pip(&["-r", &p]), &format!("installing {req}"))?;
    } else if !ctx.requirements.is_empty() {
        say(&format!(
            "note: none of {} exists at {}",
            ctx.requirements.join(", "),
            &commit[..12]
        ));
    }
    if !ctx.pip_packages.is_empty() {
        say(&format!(
            "installing pip_packages: {}",
            ctx.pip_packages.join(" ")
        ));
        let args: Vec<&str> = ctx.pip_packages.iter().map(String::as_str).collect();
        step.run(&|| pip(&args), "installing the context's pip_packages")?;
    }
    let mut pre = PreInstall {
        ran: Vec::new(),
        skipped: Vec::new(),
    };
    for cmd in &ctx.pre_install {
        if is_system_command(cmd) {
            pre.skipped.push(cmd.clone());
            continue;
        }
        step.run(
            &|| venv.shell(cmd, src, env),
            &format!("pre_install `{cmd}`"),
        )?;
        pre.ran.push(cmd.clone());
    }
    if !ctx.install.is_empty() {
        say(&format!("running the install: {}", ctx.install));
        step.run(
            &|| venv.shell(&ctx.install, src, env),
            &format!("the install `{}`", ctx.install),
        )?;
    }
    Ok(pre)
}

/// Step 2b: the install at each instance's base commit of this version: dependencies change
/// between commits (sqlfluff 0.6's older base commits need configparser, its environment
/// setup commit does not), and each instance's own install must work offline later.
fn install_at_base_commits(
    ins: &Installs,
    ctx: &Context,
    mirror: &Mirror,
    commit: &str,
    instance_commits: &[String],
    notes: &mut Vec<String>,
) -> Result<(), EnvError> {
    let Installs {
        step,
        venv,
        env,
        work,
        say,
        ..
    } = ins;
    // Installs that cannot need anything new are not run: same build files as one installed.
    let mut installed_keys: Vec<(String, Vec<(String, String)>)> =
        build_files_key(&mirror.repo, commit, ctx)
            .map(|k| vec![(commit.to_string(), k)])
            .unwrap_or_default();
    for (i, c) in instance_commits.iter().enumerate() {
        if ctx.install.is_empty() {
            break;
        }
        if mirror.commit(c).is_err() {
            notes.push(format!(
                "base commit {c} is not in the mirror: its install was not run"
            ));
            continue;
        }
        let key = build_files_key(&mirror.repo, c, ctx);
        if let Some(same) = installed_keys
            .iter()
            .find(|(_, k)| Some(k) == key.as_ref())
            .map(|(c, _)| c.clone())
        {
            say(&format!(
                "base commit {} declares its dependencies as {} does: its install needs nothing \
                 more ({}/{})",
                &c[..12.min(c.len())],
                &same[..12.min(same.len())],
                i + 1,
                instance_commits.len()
            ));
            continue;
        }
        if let Some(k) = key {
            installed_keys.push((c.clone(), k));
        }
        say(&format!(
            "running the install at base commit {} ({}/{})",
            &c[..12.min(c.len())],
            i + 1,
            instance_commits.len()
        ));
        let src_i = work.join(format!("src-{i}"));
        let venv_i = Venv {
            dir: work.join(format!("venv-{i}")),
        };
        checkout(&mirror.path, c, &src_i)?;
        venv::copy_venv(&venv.dir, &venv_i.dir, &venv_i.dir)?;
        let mut failed = None;
        for cmd in ctx.pre_install.iter().filter(|c| !is_system_command(c)) {
            if let Err(e) = step.run(
                &|| venv_i.shell(cmd, &src_i, env),
                &format!("pre_install `{cmd}`"),
            ) {
                failed = Some(e);
                break;
            }
        }
        if failed.is_none()
            && let Err(e) = step.run(
                &|| venv_i.shell(&ctx.install, &src_i, env),
                &format!("the install at base commit {c}"),
            )
        {
            failed = Some(e);
        }
        if let Some(e) = failed {
            let text = e.to_string();
            notes.push(format!(
                "the install at base commit {c} failed, online: {}",
                text.lines().last().unwrap_or("").trim_start_matches("  | ")
            ));
        }
        let _ = std::fs::remove_dir_all(&src_i);
        let _ = std::fs::remove_dir_all(&venv_i.dir);
    }
    Ok(())
}

/// Sdist file name → the wheel built from it (an empty path when the name does not parse),
/// its object id and size.
type BuiltWheels = BTreeMap<String, (PathBuf, Sha256Digest, u64)>;

/// Step 3: every sdist becomes a wheel, once (building one may fetch more: repeat).
fn build_sdists(ark: &Ark, ins: &Installs, pip_cache: &Path) -> Result<BuiltWheels, EnvError> {
    let Installs {
        step,
        venv,
        env,
        work,
        say,
        ..
    } = ins;
    let proxy = step.proxy;
    let built_dir = work.join("built");
    let sdist_dir = work.join("sdists");
    let mut built: BuiltWheels = BTreeMap::new();
    loop {
        let pending: Vec<Fetched> = proxy
            .fetched()
            .into_iter()
            .filter(|f| !f.info.filename.ends_with(".whl") && !built.contains_key(&f.info.filename))
            .collect();
        if pending.is_empty() {
            break;
        }
        for f in pending {
            let Some((n, v, _)) = parse_filename(&f.info.filename) else {
                built.insert(f.info.filename.clone(), (PathBuf::new(), f.sha256, 0));
                continue;
            };
            let wheel = match cached_built_wheel(pip_cache, &n, &v) {
                Some(w) => w,
                None => {
                    say(&format!("building a wheel of {}", f.info.filename));
                    std::fs::create_dir_all(&sdist_dir).map_err(io_err(&sdist_dir))?;
                    let sdist = sdist_dir.join(&f.info.filename);
                    let obj = ark.objects().ensure(&f.sha256)?;
                    std::fs::copy(&obj, &sdist).map_err(io_err(&obj))?;
                    let out_dir = built_dir.join(&n);
                    let wheel_cmd = || {
                        let mut c = venv.command(env);
                        c.args(["-m", "pip", "wheel", "--no-deps", "-w"])
                            .arg(&out_dir)
                            .arg(&sdist);
                        c
                    };
                    step.run(
                        &wheel_cmd,
                        &format!("building a wheel of {}", f.info.filename),
                    )?;
                    std::fs::read_dir(&out_dir)
                        .map_err(io_err(&out_dir))?
                        .flatten()
                        .map(|e| e.path())
                        .find(|p| p.extension().is_some_and(|x| x == "whl"))
                        .ok_or_else(|| EnvError::Command {
                            step: format!("building a wheel of {}", f.info.filename),
                            status: "no wheel".into(),
                            output: String::new(),
                        })?
                }
            };
            let mut file = std::fs::File::open(&wheel).map_err(io_err(&wheel))?;
            let (id, size) = ark.objects().put(&mut file)?;
            built.insert(f.info.filename.clone(), (wheel, id, size));
        }
    }
    Ok(built)
}

/// The names of the files fetched so far, by the lock's proxy and the services'.
fn fetched_names(proxy: &LockProxy, services: &Locked) -> BTreeSet<String> {
    proxy
        .fetched()
        .into_iter()
        .chain(services.fetched.iter().cloned())
        .map(|f| f.info.filename)
        .collect()
}

/// Every file the lock's proxy fetched, then those only the services' fetched.
fn all_fetched(proxy: &LockProxy, services: &Locked) -> Vec<Fetched> {
    let mut fetched = proxy.fetched();
    let known: BTreeSet<String> = fetched.iter().map(|f| f.info.filename.clone()).collect();
    fetched.extend(
        services
            .fetched
            .iter()
            .filter(|f| !known.contains(&f.info.filename))
            .cloned(),
    );
    fetched
}

/// A release: `(normalized name, version)`.
type Release = (String, String);

/// A release → the files of it that were fetched.
type ByDist<'f> = BTreeMap<Release, Vec<&'f Fetched>>;

fn by_distribution(fetched: &[Fetched]) -> ByDist<'_> {
    let mut by_dist: ByDist = BTreeMap::new();
    for f in fetched {
        if let Some((n, v, _)) = parse_filename(&f.info.filename) {
            by_dist.entry((n, v)).or_default().push(f);
        }
    }
    by_dist
}

/// What the installed distributions are: releases from the index (runtime), the installers
/// the venv came with (bundled), and the repository itself (project).
struct Matched {
    runtime: BTreeSet<Release>,
    bundled: Vec<Bundled>,
    project: Option<Bundled>,
}

/// Step 4: installed distributions ↔ the artifacts they came from.
fn match_installed(
    installed: &[InstalledDist],
    by_dist: &ByDist,
    src: &Path,
) -> Result<Matched, EnvError> {
    let src_url = format!("file://{}", src.display());
    let mut matched = Matched {
        runtime: BTreeSet::new(),
        bundled: Vec::new(),
        project: None,
    };
    for d in installed {
        let n = normalize(&d.name);
        let key = by_dist
            .keys()
            .find(|(kn, kv)| *kn == n && same_version(kv, &d.version))
            .cloned();
        if let Some(k) = key {
            matched.runtime.insert(k);
            continue;
        }
        let from_src = d
            .direct_url
            .as_deref()
            .is_some_and(|u| u.starts_with(&src_url))
            || d.path.starts_with(&src.display().to_string());
        if from_src {
            matched.project = Some(Bundled {
                name: d.name.clone(),
                version: d.version.clone(),
            });
        } else if ["pip", "setuptools", "wheel", "distribute"].contains(&n.as_str())
            && d.direct_url.is_none()
        {
            matched.bundled.push(Bundled {
                name: d.name.clone(),
                version: d.version.clone(),
            });
        } else {
            return Err(EnvError::NotLockable {
                name: d.name.clone(),
                version: d.version.clone(),
                detail: d
                    .direct_url
                    .clone()
                    .unwrap_or_else(|| "no file of it passed through the index".into()),
            });
        }
    }
    Ok(matched)
}

/// The `[[packages]]` entry of one release, from its fetched files, with the name of the
/// wheel built from its sdist added to `built_wheels`.
fn package_of(
    (n, v): &(String, String),
    files: &[&Fetched],
    role: Role,
    built: &BuiltWheels,
    installed: &[InstalledDist],
    opts: &LockOptions,
    built_wheels: &mut Vec<String>,
) -> Result<Package, EnvError> {
    let mut wheels = Vec::new();
    let mut sdist = None;
    let mut built_wheel = None;
    let mut yanked = None;
    let mut requires_python = None;
    for f in files {
        if let Some(reason) = &f.info.yanked {
            yanked = Some(if reason.is_empty() {
                "no reason given".to_string()
            } else {
                reason.clone()
            });
            if !opts.allow_yanked {
                return Err(EnvError::Yanked {
                    name: n.clone(),
                    version: v.clone(),
                    filename: f.info.filename.clone(),
                    reason: yanked.clone().unwrap_or_default(),
                });
            }
        }
        requires_python = requires_python.or(f.info.requires_python.clone());
        if f.info.filename.ends_with(".whl") {
            wheels.push(artifact_of(f));
        } else {
            sdist = Some(artifact_of(f));
            if let Some((path, id, size)) = built.get(&f.info.filename)
                && !path.as_os_str().is_empty()
            {
                let name = path
                    .file_name()
                    .map(|x| x.to_string_lossy().into_owned())
                    .unwrap_or_default();
                built_wheels.push(name.clone());
                built_wheel = Some(Artifact {
                    name,
                    upload_time: None,
                    url: None,
                    size: *size,
                    hashes: Hashes { sha256: id.hex() },
                });
            }
        }
    }
    // Several wheels of one release (pip tried one, then another): keep them all, the
    // first one sorted is what gets installed.
    wheels.sort_by(|a, b| a.name.cmp(&b.name));
    if matches!(role, Role::Runtime | Role::Service) && wheels.is_empty() && built_wheel.is_none() {
        return Err(EnvError::NotLockable {
            name: n.clone(),
            version: v.clone(),
            detail: "no wheel of it could be built".into(),
        });
    }
    let name = installed
        .iter()
        .find(|d| normalize(&d.name) == *n)
        .map(|d| d.name.clone())
        .unwrap_or_else(|| n.clone());
    Ok(Package {
        name,
        version: v.clone(),
        index: Some(opts.index_url.clone()),
        requires_python,
        sdist,
        wheels,
        tool: PackageTool {
            swe_ark: PackageMeta {
                role: Some(role),
                built_wheel,
                yanked,
            },
        },
    })
}

/// Notes from the proxies (releases admitted, re-uploaded, untimed listings) and on
/// pre_install commands not run.
fn proxy_notes(notes: &mut Vec<String>, proxy: &LockProxy, services: &Locked, skipped: &[String]) {
    notes.extend(proxy.admitted());
    notes.extend(services.notes.iter().cloned());
    notes.extend(proxy.reuploaded());
    for p in proxy.untimed() {
        notes.push(format!(
            "the index gave no upload times for {p}: files of any date were offered"
        ));
    }
    for cmd in skipped {
        notes.push(format!(
            "pre_install not run (system packages are outside the lock): {cmd}"
        ));
    }
}

/// What the lock says of the context it was made from.
fn context_meta(ctx: &Context, files: &SourceFiles, pre: PreInstall) -> ContextMeta {
    ContextMeta {
        python: ctx.python.clone(),
        requirements_file: files.requirements_file.clone(),
        packages: ctx.packages.clone(),
        conda_environment: files.conda_file.clone(),
        conda_mapped: files
            .conda_env
            .as_ref()
            .map(|c| c.requirements.clone())
            .unwrap_or_default(),
        pip_packages: ctx.pip_packages.clone(),
        pre_install: pre.ran,
        skipped_pre_install: pre.skipped,
        install: ctx.install.clone(),
    }
}

/// The lock as stored: its bytes, their id, and the lock read back from them (the lock that
/// is built and proven is the one stored).
struct StoredLock {
    bytes: Vec<u8>,
    id: Sha256Digest,
    lock: PyLock,
}

fn store_lock(ark: &Ark, lock: &PyLock) -> Result<StoredLock, EnvError> {
    let bytes = lock.to_bytes().map_err(|e| EnvError::BadLock {
        id: "(new)".into(),
        detail: e.to_string(),
    })?;
    let lock_id = ark.objects().put_bytes(&bytes)?;
    let lock = PyLock::parse(&bytes).map_err(|e| EnvError::BadLock {
        id: lock_id.hex(),
        detail: e.to_string(),
    })?;
    Ok(StoredLock {
        bytes,
        id: lock_id,
        lock,
    })
}

/// Step 8: the index: the lock and every object, in one transaction. Returns how many
/// artifacts the lock has and their bytes.
fn record_lock(
    ark: &mut Ark,
    ctx: &Context,
    target: &Target,
    stored: &StoredLock,
) -> Result<(usize, u64), EnvError> {
    let StoredLock {
        bytes,
        id: lock_id,
        lock,
    } = stored;
    let mut objects: Vec<(Sha256Digest, u64, &'static str)> =
        vec![(*lock_id, bytes.len() as u64, "lock")];
    objects.extend(lock.needed_objects().map_err(|e| EnvError::BadLock {
        id: lock_id.hex(),
        detail: e.to_string(),
    })?);
    let artifacts = objects.len() - 1;
    let total: u64 = objects.iter().skip(1).map(|o| o.1).sum();
    ark.index_mut().record_lock(
        &crate::store::LockRow {
            id: *lock_id,
            repo: ctx.repo.clone(),
            version: ctx.version.clone(),
            commit_id: target.commit.clone(),
            python: target.interp.version.clone(),
            packages: lock.packages.len() as u64,
            artifacts: artifacts as u64,
            bytes: total,
            created_at: 0,
        },
        &objects,
    )?;
    Ok((artifacts, total))
}

/// The environment of every install step: the context's, built reproducibly, through the
/// proxy, with pip's cache in the work folder.
fn install_env(
    ctx: &Context,
    exclude_newer: SystemTime,
    proxy: &LockProxy,
    pip_cache: &Path,
) -> BTreeMap<String, String> {
    let mut env = ctx.env.clone();
    // Wheels pip builds from sdists here are kept in the lock: built reproducibly, two
    // locks of the same context name the same built wheels.
    env.extend(venv::reproducible_build_env(exclude_newer, &ctx.env));
    env.insert("PIP_INDEX_URL".into(), proxy.url());
    env.insert("PIP_CACHE_DIR".into(), pip_cache.display().to_string());
    env
}

/// A release's role in the lock: installed (runtime), a service's, fetched only by the
/// installs at the instances' base commits (instance), or to build something (build).
fn role_of(
    key: &Release,
    files: &[&Fetched],
    runtime: &BTreeSet<Release>,
    service_dists: &BTreeSet<Release>,
    before_instances: &BTreeSet<String>,
) -> Role {
    if runtime.contains(key) {
        Role::Runtime
    } else if service_dists.contains(key) {
        Role::Service
    } else if files
        .iter()
        .all(|f| !before_instances.contains(&f.info.filename))
    {
        Role::Instance
    } else {
        Role::Build
    }
}

/// Step 5: the packages of the lock, one per release fetched, and the names of the wheels
/// built from sdists.
fn lock_packages(
    by_dist: &ByDist,
    role_of: &dyn Fn(&Release, &[&Fetched]) -> Role,
    built: &BuiltWheels,
    installed: &[InstalledDist],
    opts: &LockOptions,
) -> Result<(Vec<Package>, Vec<String>), EnvError> {
    let mut packages = Vec::new();
    let mut built_wheels = Vec::new();
    for (key, files) in by_dist {
        let role = role_of(key, files);
        let package = package_of(key, files, role, built, installed, opts, &mut built_wheels)?;
        packages.push(package);
    }
    Ok((packages, built_wheels))
}

/// What installing the context through the proxy gave: the lock's packages, and what the lock
/// records of how they were found.
struct Resolution {
    resolver: String,
    packages: Vec<Package>,
    built_wheels: Vec<String>,
    pre: PreInstall,
    matched: Matched,
    services: Vec<ServiceMeta>,
    instance_commits: Vec<String>,
    notes: Vec<String>,
    /// How many files the proxies handed over.
    downloaded: usize,
}

/// Steps 1 to 5: the context installed for real in a fresh virtual environment, online, every
/// file through the proxy; then what it took, as the lock's packages.
#[allow(clippy::too_many_arguments)]
fn install_through_proxy(
    ark: &Ark,
    ctx: &Context,
    opts: &LockOptions,
    target: &Target,
    work: &Path,
    files: &SourceFiles,
    steps: &StepRunner,
    say: &dyn Fn(&str),
) -> Result<Resolution, EnvError> {
    let Target {
        interp,
        mirror,
        commit,
        cutoff,
    } = target;
    let exclude_newer = cutoff.when;
    let src = work.join("src");
    let tmp_root = ark.tmp_dir();
    let pins = context_pins(ctx, files);
    let proxy = LockProxy::start(proxy_config(ark, opts, interp, exclude_newer, pins))
        .map_err(io_err(&tmp_root))?;
    let pip_cache = work.join("pip-cache");
    let env = install_env(ctx, exclude_newer, &proxy, &pip_cache);
    let venv = Venv::create(&interp.path, &work.join("venv"), true)?;
    let ins = Installs {
        step: Step {
            proxy: &proxy,
            cutoff,
            steps,
        },
        venv: &venv,
        env: &env,
        src: &src,
        work,
        say,
    };

    install_era_installers(&ins)?;
    let resolver = venv.pip_version(steps).unwrap_or_else(|| "pip".into());
    let mut notes = Vec::new();
    let pre = install_context(&ins, ctx, files, commit, &mut notes)?;

    // 2a. The services' own environments, apart from the tests' (src/env/services.rs): a
    // proxy of their own, whose pins are theirs.
    let services = super::services::install(
        steps,
        &ctx.services,
        &interp.path,
        work,
        proxy_config(ark, opts, interp, exclude_newer, BTreeMap::new()),
        say,
    )?;

    // Releases only fetched after this are the instances' own (`Role::Instance`).
    let before_instances = fetched_names(&proxy, &services);
    let instance_commits = instance_base_commits(ark, ctx, commit)?;
    install_at_base_commits(&ins, ctx, mirror, commit, &instance_commits, &mut notes)?;

    let mut built = build_sdists(ark, &ins, &pip_cache)?;
    for (sdist, wheel, id, size) in &services.built {
        built.insert(sdist.clone(), (wheel.clone(), *id, *size));
    }

    let installed = venv.installed(steps)?;
    let fetched = all_fetched(&proxy, &services);
    let by_dist = by_distribution(&fetched);
    let matched = match_installed(&installed, &by_dist, &src)?;

    let service_meta = super::services::lock_meta(&services.installed, &|n, v| {
        let n = normalize(n);
        by_dist
            .keys()
            .find(|(kn, kv)| *kn == n && same_version(kv, v))
            .cloned()
    })?;
    let service_dists = super::services::distributions(&service_meta);
    let role = |key: &Release, files: &[&Fetched]| {
        role_of(
            key,
            files,
            &matched.runtime,
            &service_dists,
            &before_instances,
        )
    };
    let (packages, built_wheels) = lock_packages(&by_dist, &role, &built, &installed, opts)?;
    proxy_notes(&mut notes, &proxy, &services, &pre.skipped);
    drop(proxy);
    Ok(Resolution {
        resolver,
        packages,
        built_wheels,
        pre,
        matched,
        services: service_meta,
        instance_commits,
        notes,
        downloaded: fetched.len(),
    })
}

/// Step 6: what the lock says of the interpreter, packed into the store if asked.
fn python_meta(
    ark: &Ark,
    opts: &LockOptions,
    interp: &python::Interpreter,
    work: &Path,
    say: &dyn Fn(&str),
) -> Result<PythonMeta, EnvError> {
    let packed_python = if opts.pack_python {
        say(&format!(
            "the lock carries Python {} ({}), packed once per archive",
            interp.version,
            interp.prefix.display()
        ));
        Some(packed::pack_python_once(
            &ark.objects(),
            &ark.layout().packed_pythons(),
            work,
            interp,
        )?)
    } else {
        None
    };
    Ok(PythonMeta {
        version: interp.version.clone(),
        implementation: interp.implementation.clone(),
        platform: interp.platform.clone(),
        sha256: interp.sha256.hex(),
        // Where the prefix was is a fact of this machine, not of the
        // interpreter: the lock names it by its content only.
        packed_from: None,
        packed: packed_python,
    })
}

/// The pylock.toml document of `packages`, with `meta` as its `[tool.swe-ark]`.
fn lock_document(packages: Vec<Package>, meta: LockMeta) -> PyLock {
    PyLock {
        lock_version: pylock::LOCK_VERSION.into(),
        environments: vec![],
        requires_python: format!("=={}", meta.python.version),
        extras: vec![],
        dependency_groups: vec![],
        default_groups: vec![],
        created_by: "swe-ark".into(),
        packages,
        tool: Tool { swe_ark: meta },
    }
}

/// Step 7: the proof: built from the objects with no index, then the install run offline.
fn build_and_prove(
    ark: &Ark,
    ctx: &Context,
    opts: &LockOptions,
    target: &Target,
    work: &Path,
    stored: &StoredLock,
    say: &dyn Fn(&str),
) -> Result<BuiltEnv, EnvError> {
    say("building the environment from the lock, offline");
    let built_env = build::build(
        &ark.objects(),
        ark.root(),
        &stored.id,
        &stored.lock,
        &BuildOptions {
            installer: opts.installer,
            python: opts.python.clone(),
            packed_python: false,
            force: true,
            unconfined: opts.unconfined,
        },
    )?;
    if let Err(e) = prove_install(
        opts.unconfined,
        ctx,
        &built_env,
        &stored.lock,
        target,
        work,
        say,
    ) {
        // No lock row, so no built environment either.
        let _ = std::fs::remove_dir_all(&built_env.dir);
        return Err(e);
    }
    Ok(built_env)
}

/// Locks `ctx`: see the module's documentation.
pub fn lock(
    ark: &mut Ark,
    ctx: &Context,
    opts: &LockOptions,
    say: &dyn Fn(&str),
) -> Result<LockReport, EnvError> {
    let target = resolve_target(ark, ctx, opts, say)?;
    let exclude_newer = target.cutoff.when;

    let tmp_root = ark.tmp_dir();
    std::fs::create_dir_all(&tmp_root).map_err(io_err(&tmp_root))?;
    let work = tempfile::Builder::new()
        .prefix(".tmp-lock-")
        .tempdir_in(&tmp_root)
        .map_err(io_err(&tmp_root))?;
    // The installs see the work directory (checkouts, environments, pip's cache, their
    // `/tmp`), the interpreter and the mirror the checkouts borrow their objects from; the
    // network, for the proxy on loopback. Refused up front if confinement is impossible.
    let steps = StepRunner::new(opts.unconfined, Network::Allowed)?
        .writable(work.path())?
        .tmp(&work.path().join("tmp"))?
        .read_only(&target.interp.prefix)
        .read_only(&target.mirror.path);
    let src = work.path().join("src");
    checkout(&target.mirror.path, &target.commit, &src)?;
    let files = read_source_files(ctx, &src)?;
    let found = install_through_proxy(ark, ctx, opts, &target, work.path(), &files, &steps, say)?;

    let python = python_meta(ark, opts, &target.interp, work.path(), say)?;
    let lock = lock_document(
        found.packages,
        LockMeta {
            repo: ctx.repo.clone(),
            version: ctx.version.clone(),
            commit: target.commit.clone(),
            exclude_newer: rfc3339(exclude_newer),
            exclude_newer_rule: Some(target.cutoff.describe()),
            index: opts.index_url.clone(),
            resolver: found.resolver,
            python,
            context: context_meta(ctx, &files, found.pre),
            bundled: found.matched.bundled,
            project: found.matched.project.clone(),
            instance_commits: found.instance_commits.clone(),
            notes: found.notes.clone(),
            services: found.services,
        },
    );
    let stored = store_lock(ark, &lock)?;
    let built_env = build_and_prove(ark, ctx, opts, &target, work.path(), &stored, say)?;

    let (artifacts, total) = record_lock(ark, ctx, &target, &stored)?;
    let lock = &stored.lock;
    let count = |role| lock.packages.iter().filter(|p| p.role() == role).count();
    let (runtime_n, services_n) = (count(Role::Runtime), count(Role::Service));
    Ok(LockReport {
        id: stored.id.hex(),
        repo: ctx.repo.clone(),
        version: ctx.version.clone(),
        commit: target.commit.clone(),
        exclude_newer: rfc3339(exclude_newer),
        exclude_newer_rule: target.cutoff.describe(),
        python: target.interp.version.clone(),
        packages: lock.packages.len(),
        runtime: runtime_n,
        build: lock.packages.len() - runtime_n - services_n,
        services: services_n,
        artifacts,
        bytes: total,
        downloaded: found.downloaded,
        built_wheels: found.built_wheels,
        notes: found.notes,
        confinement: steps.confinement().to_string(),
        env: built_env,
    })
}

/// Runs the repository's install in a copy of the built environment with no index at all:
/// the lock must hold everything it needs (build backends included).
fn prove_install(
    unconfined: bool,
    ctx: &Context,
    built_env: &BuiltEnv,
    lock: &PyLock,
    target: &Target,
    work: &Path,
    say: &dyn Fn(&str),
) -> Result<(), EnvError> {
    let (mirror, commit) = (target.mirror.path.as_path(), target.commit.as_str());
    if ctx.install.is_empty() {
        return Ok(());
    }
    say("running the install again, offline, in a copy");
    let proof = work.join("proof-venv");
    let copy = build::instance_copy(built_env, &proof, &proof)?;
    let src = work.join("proof-src");
    checkout(mirror, commit, &src)?;
    // As a replay's install runs: confined, with no network at all.
    let steps = StepRunner::new(unconfined, Network::Isolated)?
        .writable(&copy.dir)?
        .writable(&src)?
        .tmp(&work.join("proof-tmp"))?
        .read_only(&built_env.wheelhouse)
        .read_only(&python::prefix_of(&built_env.interpreter))
        .read_only(mirror);
    let mut env = ctx.env.clone();
    env.extend(build::offline_install_env(&built_env.wheelhouse));
    for cmd in &lock.tool.swe_ark.context.pre_install {
        steps.run(
            &mut copy.shell(cmd, &src, &env),
            &format!("pre_install `{cmd}` offline"),
        )?;
    }
    steps.run(
        &mut copy.shell(&ctx.install, &src, &env),
        &format!(
            "the install `{}` with no index (the lock lacks something it needs)",
            ctx.install
        ),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_are_read_as_swebench_reads_them() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("reqs")).unwrap();
        std::fs::write(
            d.path().join("reqs/dev.txt"),
            "# dev\n-r base.txt\n-e .\npytest>=6\n.[test]\ntypes-pkg_resources==0.1.3\n",
        )
        .unwrap();
        std::fs::write(d.path().join("reqs/base.txt"), "attrs\n# c\nsix\n").unwrap();
        let got = swebench_requirements(d.path(), "reqs/dev.txt").unwrap();
        assert_eq!(got, "attrs\nsix\n\npytest>=6\ntypes-setuptools\n");
        assert!(is_system_command(
            "apt-get update && apt-get install -y gcc"
        ));
        assert!(!is_system_command("sed -i 's/a/b/' setup.py"));
    }
}
