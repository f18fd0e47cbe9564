//! `release create`: a snapshot of the archive's bundles, registered and written.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::release::{self, Selection};
use crate::store::Ark;

use super::super::Context;
use super::CreateArgs;

pub(super) fn create(ctx: &Context, args: CreateArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let selection = if args.all_validated {
        Selection::AllValidated
    } else if !args.instance_ids.is_empty() {
        Selection::Ids(args.instance_ids.clone())
    } else {
        Selection::Bundled
    };
    let snap = release::create(&ark, &args.name, &selection)?;
    let path = args
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from("snapshots").join(format!("{}.json", args.name)));
    // Registered in the archive: from now on gc and `rm` keep every bundle it names.
    let kept = release::ops::publish(&ark, &snap, &path, args.force)?;
    let objects = snap.objects().len();
    if args.json {
        let v = serde_json::json!({
            "name": snap.name,
            "root": snap.root,
            "path": path,
            "instances": snap.instances.len(),
            "objects": objects,
            "unchanged": kept,
        });
        out!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        ctx.note(format!(
            "release {}: {} instance(s), {} object(s){} `{}`",
            snap.name,
            snap.instances.len(),
            objects,
            if kept {
                ", the same as in"
            } else {
                ", written to"
            },
            path.display()
        ));
        out!("{}", snap.root);
    }
    Ok(ExitCode::SUCCESS)
}
