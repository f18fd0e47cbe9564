//! Step 2b: the install run again at the base commits of the instances, where their build
//! files declare other dependencies than the environment setup commit's.

use std::collections::BTreeSet;
use std::path::Path;

use super::install::Installs;
use super::source::checkout;
use crate::env::EnvError;
use crate::env::venv::{self, Venv};
use crate::manifest::Context;
use crate::manifest::is_system_command;
use crate::mirror::Mirror;
use crate::store::Ark;

/// The distinct base commits of the archive's instances of this repository and version,
/// other than the environment setup commit, sorted.
pub(super) fn instance_base_commits(
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

/// Step 2b: the install at each instance's base commit of this version: dependencies change
/// between commits (sqlfluff 0.6's older base commits need configparser, its environment
/// setup commit does not), and each instance's own install must work offline later.
pub(super) fn install_at_base_commits(
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
        checkout(mirror, c, &src_i)?;
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
