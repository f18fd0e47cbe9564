//! Step 7: the proof that the lock holds everything: the environment built from the objects
//! with no index, then the repository's install run in a copy of it with no network.

use std::path::Path;

use super::LockOptions;
use super::record::StoredLock;
use super::source::checkout;
use super::target::Target;
use crate::env::build::{self, BuildOptions, BuiltEnv};
use crate::env::pylock::PyLock;
use crate::env::steps::StepRunner;
use crate::env::{EnvError, python};
use crate::manifest::Context;
use crate::sandbox::Network;
use crate::store::Ark;

/// Step 7: the proof: built from the objects with no index, then the install run offline.
pub(super) fn build_and_prove(
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
    checkout(&target.mirror, commit, &src)?;
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
