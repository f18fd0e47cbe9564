//! Locking an executable context: install it for real, once, online, and keep what it took.
//!
//! The procedure (docs/ENVIRONMENTS.md tells it for users):
//! 1. the interpreter (exact major.minor), the environment setup commit and its date;
//! 2. a checkout of that commit from the mirror, a fresh virtual environment, and the
//!    [`proxy`](super::proxy) in front of the index with the commit's date as the cutoff;
//! 3. SWE-bench's order: pip/setuptools/wheel of that era, `packages`, the first requirement
//!    file that exists (includes inlined, `-e .` left out, as SWE-bench does), `pip_packages`,
//!    `pre_install` (system package managers skipped and noted), `install`; then the
//!    services' pinned packages, apart ([`services`](super::services)); then the install
//!    again at the instances' base commits, and after the patches of those whose patches
//!    change a build file;
//! 4. sdists built into wheels (from pip's wheel cache, or `pip wheel`);
//! 5. every installed distribution matched to the artifact it came from; files downloaded but
//!    not installed are build dependencies (isolated builds, the repository's build backend);
//! 6. the lock written, and proven: the environment is built from it offline, and the
//!    repository's install run in a copy with no index at all.
//!
//! The parts: `target` (the commit, the interpreter, the cutoff), `source` (the checkout and
//! the files of it SWE-bench reads), `install` (the installs through the proxy),
//! `base_commits` (the install again at the instances' base commits), `packages` (what the
//! installs took, as the lock's packages), `record` (the lock document, its object, its index
//! rows), `proof` (the offline build and install).

mod base_commits;
mod install;
mod packages;
mod proof;
mod record;
mod source;
mod target;

use std::path::PathBuf;
use std::time::SystemTime;

use super::asof::rfc3339;
use super::build::{self, BuiltEnv};
use super::pylock::{LockMeta, Role};
use super::steps::StepRunner;
use super::{EnvError, io_err};
use crate::manifest::Context;
use crate::sandbox::Network;
use crate::store::Ark;
use install::install_through_proxy;
use proof::build_and_prove;
use record::{context_meta, lock_document, python_meta, record_lock, store_lock};
use source::read_source_files;
use target::resolve_target;

pub use crate::manifest::is_system_command;
pub use base_commits::build_files_touched;
pub use source::checkout;
pub use target::resolve_cutoff;

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
    let work = crate::fsutil::work_dir(&tmp_root, ".tmp-lock-").map_err(io_err(&tmp_root))?;
    // The installs see the work directory (checkouts, environments, pip's cache, their
    // `/tmp`), the interpreter and the mirror the checkouts borrow their objects from; the
    // network, for the proxy on loopback. Refused up front if confinement is impossible.
    let steps = StepRunner::new(opts.unconfined, Network::Allowed)?
        .writable(work.path())?
        .tmp(&work.path().join("tmp"))?
        .read_only(&target.interp.prefix)
        .read_only(&target.mirror.path);
    let src = work.path().join("src");
    checkout(&target.mirror, &target.commit, &src)?;
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
            instance_patches: found.instance_patches.clone(),
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
