//! Step 2b: the install run again at the base commits of the instances, where their build
//! files declare other dependencies than the environment setup commit's, and on an instance's
//! base commit with its test patch and gold patch applied, where they change a build file
//! (the gold patch of a fix that needs a new dependency adds it to `setup.cfg`): the lock
//! holds the union, resolved together as of one date, and the offline install after the gold
//! patch finds it.

use std::collections::BTreeSet;
use std::path::Path;

use super::install::Installs;
use super::source::checkout;
use crate::diff::{apply_test_and_gold, touched_paths};
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

/// An instance of the context whose test patch or gold patch changes a file the install reads
/// its dependencies from ([`build_files_touched`]).
pub(super) struct PatchedTree {
    instance: String,
    base_commit: String,
    test_patch: String,
    gold_patch: String,
    /// The build files the patches change.
    files: Vec<String>,
}

/// The archive's instances of this repository and version whose patches change a build file,
/// by instance id.
pub(super) fn instance_patched_trees(
    ark: &Ark,
    ctx: &Context,
) -> Result<Vec<PatchedTree>, EnvError> {
    let mut out = Vec::new();
    for row in ark.index().instances_of_repo(&ctx.repo)? {
        if row.version != ctx.version || row.base_commit.is_empty() {
            continue;
        }
        let Some(inst) = ark.index().instance(&row.instance_id)? else {
            continue;
        };
        let mut files = build_files_touched(&inst.test_patch, ctx);
        files.extend(build_files_touched(&inst.patch, ctx));
        files.sort();
        files.dedup();
        if !files.is_empty() {
            out.push(PatchedTree {
                instance: inst.instance_id,
                base_commit: inst.base_commit,
                test_patch: inst.test_patch,
                gold_patch: inst.patch,
                files,
            });
        }
    }
    out.sort_by(|a, b| a.instance.cmp(&b.instance));
    Ok(out)
}

/// The files of `patch` that an install of `ctx` reads its dependencies from: `setup.py`,
/// `setup.cfg`, `pyproject.toml`, root `requirements*` files and the `requirements/` folder,
/// `ci/requirements/`, and the context's requirement and conda environment files (what
/// [`build_files_key`] compares between commits).
pub fn build_files_touched(patch: &str, ctx: &Context) -> Vec<String> {
    touched_paths(patch)
        .into_iter()
        .filter(|p| {
            matches!(p.as_str(), "setup.py" | "setup.cfg" | "pyproject.toml")
                || (p.starts_with("requirements") && !p.contains('/'))
                || p.starts_with("requirements/")
                || p.starts_with("ci/requirements/")
                || ctx.requirements.contains(p)
                || ctx.conda_environment.contains(p)
        })
        .collect()
}

/// Step 2b: the install at each instance's base commit of this version: dependencies change
/// between commits (sqlfluff 0.6's older base commits need configparser, its environment
/// setup commit does not), and each instance's own install must work offline later. Then the
/// install on each tree of `patched` (its base commit, the context's `pre_install`, its test
/// patch and gold patch: the tree SWE-bench's evaluation installs again after the gold patch).
/// Returns the instances whose patched trees were installed.
pub(super) fn install_at_base_commits(
    ins: &Installs,
    ctx: &Context,
    mirror: &Mirror,
    commit: &str,
    instance_commits: &[String],
    patched: &[PatchedTree],
    notes: &mut Vec<String>,
) -> Result<Vec<String>, EnvError> {
    let say = ins.say;
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
        install_on_tree(ins, ctx, mirror, c, None, &i.to_string(), notes)?;
    }
    let mut covered = Vec::new();
    for (i, p) in patched.iter().enumerate() {
        if ctx.install.is_empty() {
            break;
        }
        if mirror.commit(&p.base_commit).is_err() {
            notes.push(format!(
                "base commit {} of {} is not in the mirror: the install after its patches was \
                 not run",
                p.base_commit, p.instance
            ));
            continue;
        }
        say(&format!(
            "running the install after {}'s patches, which change {} ({}/{})",
            p.instance,
            p.files.join(", "),
            i + 1,
            patched.len()
        ));
        install_on_tree(
            ins,
            ctx,
            mirror,
            &p.base_commit,
            Some(p),
            &format!("patched-{i}"),
            notes,
        )?;
        covered.push(p.instance.clone());
    }
    Ok(covered)
}

/// The install in a copy of the lock's environment, on a checkout of `commit` after the
/// context's `pre_install` (and `patched`'s test patch and gold patch, when given): what it
/// fetches through the proxy is the tree's own need. A failure online is noted, not fatal:
/// the instance's own run will say what it costs.
fn install_on_tree(
    ins: &Installs,
    ctx: &Context,
    mirror: &Mirror,
    commit: &str,
    patched: Option<&PatchedTree>,
    name: &str,
    notes: &mut Vec<String>,
) -> Result<(), EnvError> {
    let Installs {
        step,
        venv,
        env,
        work,
        ..
    } = ins;
    let src_i = work.join(format!("src-{name}"));
    let venv_i = Venv {
        dir: work.join(format!("venv-{name}")),
    };
    let what = match patched {
        None => format!("the install at base commit {commit}"),
        Some(p) => format!(
            "the install after {}'s patches (base commit {commit})",
            p.instance
        ),
    };
    checkout(mirror, commit, &src_i)?;
    venv::copy_venv(&venv.dir, &venv_i.dir, &venv_i.dir)?;
    let mut failed = None;
    for cmd in ctx.pre_install.iter().filter(|c| !is_system_command(c)) {
        if let Err(e) = step.run(
            &|| venv_i.shell(cmd, &src_i, env),
            &format!("pre_install `{cmd}`"),
        ) {
            failed = Some(e.to_string());
            break;
        }
    }
    if failed.is_none()
        && let Some(p) = patched
        && let Err((which, detail)) =
            apply_test_and_gold(&src_i, [p.test_patch.as_str(), p.gold_patch.as_str()])
    {
        failed = Some(format!("its {which} does not apply: {detail}"));
    }
    if failed.is_none()
        && let Err(e) = step.run(&|| venv_i.shell(&ctx.install, &src_i, env), &what)
    {
        failed = Some(e.to_string());
    }
    if let Some(text) = failed {
        notes.push(format!(
            "{what} failed, online: {}",
            text.lines().last().unwrap_or("").trim_start_matches("  | ")
        ));
    }
    let _ = std::fs::remove_dir_all(&src_i);
    let _ = std::fs::remove_dir_all(&venv_i.dir);
    let _ = std::fs::remove_file(src_i.with_extension("diff"));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_files_are_what_the_install_reads_dependencies_from() {
        let mut ctx = crate::manifest::Manifests::load_default()
            .and_then(|m| m.context("psf/requests", "2.0"))
            .unwrap();
        ctx.requirements = vec!["tests/requirements.txt".into()];
        ctx.conda_environment = vec!["ci/env.yml".into()];
        let patch = |paths: &[&str]| -> String {
            paths
                .iter()
                .map(|p| {
                    format!("diff --git a/{p} b/{p}\n--- a/{p}\n+++ b/{p}\n@@ -1 +1 @@\n-a\n+b\n")
                })
                .collect()
        };
        let touched = build_files_touched(
            &patch(&[
                "setup.cfg",
                "requirements-dev.txt",
                "requirements/test.txt",
                "ci/requirements/py37.yml",
                "tests/requirements.txt",
                "ci/env.yml",
                "src/setup.py",
                "docs/requirements.txt",
                "pkg/core.py",
            ]),
            &ctx,
        );
        assert_eq!(
            touched,
            [
                "ci/env.yml",
                "ci/requirements/py37.yml",
                "requirements-dev.txt",
                "requirements/test.txt",
                "setup.cfg",
                "tests/requirements.txt"
            ]
        );
        assert!(build_files_touched(&patch(&["pkg/core.py"]), &ctx).is_empty());
    }
}
