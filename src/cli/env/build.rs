//! `env build`: a lock's environment built from the objects alone.

use std::process::ExitCode;

use crate::env::build::{self, BuildOptions};
use crate::env::listing::{find_lock, find_lock_id};
use crate::store::Ark;

use super::super::Context;
use super::BuildArgs;

pub(super) fn build_cmd(ctx: &Context, a: BuildArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let id = find_lock_id(&ark, &a.lock)?;
    let bytes = ark.objects().get(&id)?;
    // Another kind's lock: built by its kind, which says where.
    if let Some(kind) = crate::context::kinds()
        .filter(|k| k.name() != "python")
        .find(|k| k.read_lock(id, &bytes).is_ok())
    {
        let t = std::time::Instant::now();
        kind.read_lock(id, &bytes)?
            .build(&ark.objects(), ark.root(), a.unconfined)?;
        ctx.note(format!(
            "{} lock {} built (or found built) in {:.2} s",
            kind.name(),
            id.short(),
            t.elapsed().as_secs_f64()
        ));
        out!("{}", ark.layout().env(&id).display());
        return Ok(ExitCode::SUCCESS);
    }
    let (id, lock) = find_lock(&ark, &a.lock)?;
    let opts = BuildOptions {
        installer: a.installer,
        python: a.python,
        packed_python: a.packed_python,
        force: a.force,
        unconfined: a.unconfined,
    };
    let built = build::build(&ark.objects(), ark.root(), &id, &lock, &opts)?;
    let copy = match &a.copy_to {
        Some(dest) => {
            let t = std::time::Instant::now();
            let v = build::instance_copy(&built, dest, dest)?;
            ctx.note(format!(
                "copied to {} in {:.2} s",
                v.dir.display(),
                t.elapsed().as_secs_f64()
            ));
            Some(v.dir)
        }
        None => None,
    };
    if a.json {
        let mut v = serde_json::to_value(&built)?;
        v["copy"] = serde_json::json!(copy);
        out!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        ctx.note(format!(
            "{} {} (Python {}): {} distributions, {} in {:.2} s, with {}",
            lock.tool.swe_ark.repo,
            lock.tool.swe_ark.version,
            built.python,
            built.installed,
            if built.cached {
                "from the cache"
            } else {
                "built"
            },
            built.seconds,
            built.installer
        ));
        out!("{}", copy.unwrap_or(built.venv).display());
    }
    Ok(ExitCode::SUCCESS)
}
