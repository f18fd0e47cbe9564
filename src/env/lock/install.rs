//! The installs through the lock's proxy: `install_through_proxy` runs steps 1 to 5 (the era's
//! installers, the context in SWE-bench's order, the services', the base commits', then what
//! they took as packages); each install step runs again when a pin's requirement is admitted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use super::LockOptions;
use super::base_commits::{install_at_base_commits, instance_base_commits, instance_patched_trees};
use super::packages::{
    Matched, Release, all_fetched, build_sdists, by_distribution, fetched_names, lock_packages,
    match_installed, role_of,
};
use super::source::{SourceFiles, context_pins};
use super::target::Target;
use crate::env::asof::{self, Cutoff, rfc3339};
use crate::env::pipseed::PipSeeds;
use crate::env::proxy::{Fetched, LockProxy, ProxyConfig};
use crate::env::pylock::{Package, ServiceMeta, normalize, same_version};
use crate::env::services::Locked;
use crate::env::steps::StepRunner;
use crate::env::venv::{self, Venv};
use crate::env::{EnvError, io_err, python};
use crate::manifest::Context;
use crate::manifest::is_system_command;
use crate::store::Ark;

/// What installing the context through the proxy gave: the lock's packages, and what the lock
/// records of how they were found.
pub(super) struct Resolution {
    pub(super) resolver: String,
    pub(super) packages: Vec<Package>,
    pub(super) built_wheels: Vec<String>,
    pub(super) pre: PreInstall,
    pub(super) matched: Matched,
    pub(super) services: Vec<ServiceMeta>,
    pub(super) instance_commits: Vec<String>,
    /// The instances whose trees after their patches were installed too.
    pub(super) instance_patches: Vec<String>,
    pub(super) notes: Vec<String>,
    /// How many files the proxies handed over.
    pub(super) downloaded: usize,
}

/// Steps 1 to 5: the context installed for real in a fresh virtual environment, online, every
/// file through the proxy; then what it took, as the lock's packages.
#[allow(clippy::too_many_arguments)]
pub(super) fn install_through_proxy(
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
    let seeds = PipSeeds::for_ark(ark.root());
    let venv = Venv::create(&interp.path, &work.join("venv"), Some(&seeds))?;
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
    let services = crate::env::services::install(
        steps,
        &ctx.services,
        &interp.path,
        work,
        &seeds,
        proxy_config(ark, opts, interp, exclude_newer, BTreeMap::new()),
        say,
    )?;

    // Releases only fetched after this are the instances' own (`Role::Instance`).
    let before_instances = fetched_names(&proxy, &services);
    let instance_commits = instance_base_commits(ark, ctx, commit)?;
    let patched = instance_patched_trees(ark, ctx)?;
    let instance_patches = install_at_base_commits(
        &ins,
        ctx,
        mirror,
        commit,
        &instance_commits,
        &patched,
        &mut notes,
    )?;

    let mut built = build_sdists(ark, &ins, &pip_cache)?;
    for (sdist, wheel, id, size) in &services.built {
        built.insert(sdist.clone(), (wheel.clone(), *id, *size));
    }

    let installed = venv.installed(steps)?;
    let fetched = all_fetched(&proxy, &services);
    let by_dist = by_distribution(&fetched);
    let matched = match_installed(&installed, &by_dist, &src)?;

    let service_meta = crate::env::services::lock_meta(&services.installed, &|n, v| {
        let n = normalize(n);
        by_dist
            .keys()
            .find(|(kn, kv)| *kn == n && same_version(kv, v))
            .cloned()
    })?;
    let service_dists = crate::env::services::distributions(&service_meta);
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
        instance_patches,
        notes,
        downloaded: fetched.len(),
    })
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

pub(super) struct Step<'a> {
    pub(super) proxy: &'a LockProxy,
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
    pub(super) fn run(&self, cmd: &dyn Fn() -> Command, step: &str) -> Result<(), EnvError> {
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

/// Where the install steps run: the lock's virtual environment with its variables, in the
/// checkout, each step through the proxy.
pub(super) struct Installs<'a> {
    pub(super) step: Step<'a>,
    pub(super) venv: &'a Venv,
    pub(super) env: &'a BTreeMap<String, String>,
    src: &'a Path,
    pub(super) work: &'a Path,
    pub(super) say: &'a dyn Fn(&str),
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
pub(super) struct PreInstall {
    pub(super) ran: Vec<String>,
    pub(super) skipped: Vec<String>,
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
