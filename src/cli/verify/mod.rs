//! `verify`: bundles and the whole archive checked (`verify --rebuild`: packed again, in
//! `rebuild.rs`); `migrate` (in `migrate.rs`) packs old bundles again as version 3.

mod migrate;
mod rebuild;

use std::process::ExitCode;

use crate::store::{Ark, check_bundle_file};

use super::Context;
use super::output::print_checks;
use super::unpack::{Located, locate};

pub use migrate::{MigrateArgs, migrate};

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Bundles to check (ids, unique prefixes, instance ids or bundle files); none: the whole
    /// archive, objects, stored pieces and index included.
    pub ids: Vec<String>,
    /// Pack each bundle again from its repository's mirror and the inputs it recorded, and
    /// compare the ids (bit-for-bit reproducibility); exit 1 naming each that differs.
    #[arg(long, conflicts_with = "ids")]
    pub rebuild: bool,
    /// With --rebuild: run each instance's tests again (offline, sandboxed, with the bundle's
    /// own lock) and rebuild the bundle from that run rather than from its recorded validation;
    /// a test whose status changed is named with both statuses. Version 3 bundles only.
    #[arg(long, requires = "rebuild")]
    pub revalidate: bool,
    /// With --revalidate: runs of the tests after the gold patch (a test whose status differs
    /// between them is flaky and left out, as `validate` does).
    #[arg(long, default_value_t = 3, requires = "revalidate")]
    pub runs: u32,
    /// With --revalidate: seconds allowed per test-command run.
    #[arg(long, default_value_t = 1800, requires = "revalidate")]
    pub timeout: u64,
    /// With --rebuild: only the bundles of these instances.
    #[arg(long, value_delimiter = ',', value_name = "ID", requires = "rebuild")]
    pub instance_ids: Vec<String>,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Context, args: VerifyArgs) -> anyhow::Result<ExitCode> {
    if args.rebuild {
        return rebuild::rebuild(ctx, &args);
    }
    let progress = ctx.progress();
    let mut results = Vec::new();
    if args.ids.is_empty() {
        let ark = Ark::open(&ctx.ark)?;
        results = ark.check_all(progress.as_ref())?;
    } else {
        for id in &args.ids {
            results.push(match locate(ctx, id)? {
                Located::File(path, expected) => {
                    check_bundle_file(&ctx.ark, &path, expected, progress.as_ref())?
                }
                Located::Archive(ark, row) => ark.check_bundle(&row, progress.as_ref()),
            });
        }
    }
    let bad = print_checks(&results, args.json)?;
    if !args.json {
        ctx.note(format!("{} checked, {} bad", results.len(), bad));
    }
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
