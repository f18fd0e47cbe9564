//! `pack --instance FILE`: one instance packed from files, a directory or a mirror.

use std::process::ExitCode;

use anyhow::bail;

use crate::bundle::PackOptions;
use crate::pack::{self, CodebaseSource, FileInputs, VcsSource};
use crate::progress::Progress;

use super::super::Context;
use super::super::output::human_bytes;
use super::PackArgs;

pub(super) fn run(
    ctx: &Context,
    args: PackArgs,
    options: &PackOptions,
    progress: &dyn Progress,
) -> anyhow::Result<ExitCode> {
    let Some(instance) = args.instance.clone() else {
        bail!(
            "give --instance FILE with --codebase or --repo, or --instance-ids / --all-validated"
        );
    };
    let codebase = match (args.codebase, args.repo) {
        (Some(dir), _) => CodebaseSource::Dir(dir),
        (None, Some(repo)) => CodebaseSource::Mirror {
            repo,
            commit: args.commit,
        },
        (None, None) => bail!("give --codebase DIR or --repo OWNER/NAME"),
    };
    let inputs = FileInputs {
        instance,
        codebase,
        vcs: match (args.no_vcs, args.vcs) {
            (true, _) => VcsSource::None,
            (false, Some(file)) => VcsSource::File(file),
            (false, None) => VcsSource::FromDir,
        },
        spec: args.spec,
        lock: args.lock,
        pre_log: args.pre_log,
        post_log: args.post_log,
        validation: args.validation,
        results: args.results,
    };
    let one = pack::one(&ctx.ark, &inputs, args.output.as_deref(), options, progress)?;
    let (packed, vcs) = (&one.packed, one.vcs.as_ref());
    if args.json {
        let v = serde_json::json!({
            "id": packed.id,
            "instance_id": one.instance.instance_id,
            "path": packed.path,
            "codebase_tree": packed.codebase_tree,
            "codebase_files": packed.codebase_files,
            "members": packed.member_count,
            "tar_size": packed.tar_size,
            "file_size": packed.file_size,
            "describe": vcs.and_then(|v| v.describe.clone()),
        });
        out!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let stored = match &packed.path {
        Some(p) => format!(
            "{} ({:.1}x) in {}",
            human_bytes(packed.file_size),
            packed.tar_size as f64 / packed.file_size.max(1) as f64,
            p.display()
        ),
        None => format!("{} added to the store", human_bytes(packed.file_size)),
    };
    ctx.note(format!(
        "packed {}: {} codebase files, tree {}, {}tar {}, {stored}",
        one.instance.instance_id,
        packed.codebase_files,
        packed.codebase_tree,
        pack::describe_note(vcs),
        human_bytes(packed.tar_size),
    ));
    out!("{}", packed.id);
    Ok(ExitCode::SUCCESS)
}
