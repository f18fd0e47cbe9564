//! `migrate`: the newest bundle of each instance, when it is version 1 or 2, packed again as
//! version 3.

use std::process::ExitCode;

use crate::store::Ark;

use super::super::Context;

#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// Only these instances (default: every instance whose newest bundle is version 1 or 2).
    #[arg(long, value_delimiter = ',', value_name = "ID")]
    pub instance_ids: Vec<String>,
    /// Say which bundles would become which; store nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub json: bool,
}

/// `migrate`: the newest bundle of each instance, when it is version 1 or 2, packed again as
/// version 3.
pub fn migrate(ctx: &Context, args: MigrateArgs) -> anyhow::Result<ExitCode> {
    let mut ark = Ark::open(&ctx.ark)?;
    let chosen = crate::release::ops::migration_candidates(&ark, &args.instance_ids)?;
    let mut results = Vec::new();
    for row in &chosen {
        let progress = ctx.progress();
        let m = crate::release::rebuild::migrate(&mut ark, row, args.dry_run, progress.as_ref())?;
        if !args.json {
            match (&m.migrated, m.problems.is_empty()) {
                (Some(new), true) => out!(
                    "{} {} v{} → {} v3{}",
                    m.instance_id,
                    m.bundle,
                    m.from_version,
                    new,
                    if args.dry_run { " (dry run)" } else { "" }
                ),
                _ => {
                    out!("BAD {} {} v{}", m.instance_id, m.bundle, m.from_version);
                    for p in &m.problems {
                        out!("    {p}");
                    }
                }
            }
        }
        results.push(m);
    }
    let bad = results.iter().filter(|m| !m.problems.is_empty()).count();
    if args.json {
        out!("{}", serde_json::to_string_pretty(&results)?);
    } else if results.is_empty() {
        ctx.note("no instance's newest bundle is version 1 or 2: nothing to migrate");
    } else {
        ctx.note(format!(
            "{} bundle(s) {} version 3, {bad} could not be; releases still name the old \
             bundles: `swe-ark release create` names the new ones, `release rm` and `gc` free \
             the old",
            results.len() - bad,
            if args.dry_run {
                "would become"
            } else {
                "became"
            }
        ));
    }
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
