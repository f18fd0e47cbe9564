//! `export-dataset`: the archive's instances as a dataset file, or a swebench 5 task
//! repository.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::dataset::{self, ExportFormat, Instance, Selection, TestListForm, ToWrite};
use crate::fsutil;
use crate::store::Ark;

use super::super::Context;

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Where to write: `.parquet` gives Parquet, `.jsonl` JSON Lines, anything else a JSON
    /// list; with `--format task-repo`, the task repository's folder (new, or empty).
    #[arg(short, long, value_name = "PATH")]
    pub output: PathBuf,
    /// Only these instances (default: all, in the order they entered the archive).
    #[arg(long, num_args = 1.., value_name = "ID")]
    pub instance_ids: Vec<String>,
    /// The rows' form: each instance as it came in, SWE-bench records, Multi-SWE-bench rows
    /// (refused for an instance that did not come from one), SWE-bench records in Parquet, or
    /// a swebench 5 task repository (a task imported from one comes back byte for byte).
    #[arg(long, value_enum, default_value_t = ExportFormat::AsImported)]
    pub format: ExportFormat,
    /// How SWE-bench records write FAIL_TO_PASS / PASS_TO_PASS.
    #[arg(long, value_enum, default_value_t = TestListForm::Strings)]
    pub tests_as: TestListForm,
    /// Only the instances that validation kept (proven by running their tests).
    #[arg(long)]
    pub validated_only: bool,
    /// With `--format task-repo`: the split of a task made from a row (a task imported from a
    /// task repository keeps its own).
    #[arg(long, value_name = "NAME", default_value = "test")]
    pub split: String,
    /// With `--format task-repo`: the dataset a task made from a row belongs to (default: the
    /// dataset it was imported as, by its Hugging Face name).
    #[arg(long, value_name = "NAME")]
    pub dataset: Option<String>,
}

pub fn export(ctx: &Context, args: ExportArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let mut instances = Selection::ids(args.instance_ids.clone())
        .pick(ark.index().all_instances()?, "not in the archive")?;
    if args.validated_only {
        let kept: HashSet<String> = ark
            .index()
            .validations()?
            .into_iter()
            .filter(|v| v.verdict == crate::verdict::Verdict::Kept)
            .map(|v| v.instance_id)
            .collect();
        let before = instances.len();
        instances.retain(|i| kept.contains(&i.instance_id));
        if before > instances.len() {
            ctx.note(format!(
                "left out {} instance(s) that validation did not keep (see `swe-ark ls --validated`)",
                before - instances.len()
            ));
        }
    }
    if args.format == ExportFormat::TaskRepo {
        return task_repo(ctx, &ark, &instances, &args);
    }
    let bytes = dataset::export_bytes(&args.output, &instances, args.format, args.tests_as)?;
    fsutil::write_atomic(&args.output, &bytes)
        .map_err(|e| anyhow::anyhow!("cannot write `{}`: {e}", args.output.display()))?;
    ctx.note(format!(
        "exported {} instances to {}",
        instances.len(),
        args.output.display()
    ));
    Ok(ExitCode::SUCCESS)
}

/// `instances` as the task repository `args.output`.
fn task_repo(
    ctx: &Context,
    ark: &Ark,
    instances: &[Instance],
    args: &ExportArgs,
) -> anyhow::Result<ExitCode> {
    let mut to_write = Vec::with_capacity(instances.len());
    for inst in instances {
        let dataset = match &args.dataset {
            Some(d) => Some(dataset::published_name(d)),
            None => ark
                .index()
                .dataset_of(&inst.instance_id)?
                .map(|d| dataset::published_name(&d.name)),
        };
        to_write.push(ToWrite {
            instance: inst,
            dataset,
        });
    }
    let objects = ark.objects();
    let read = |id: &crate::digest::Sha256Digest| objects.get(id).map_err(std::io::Error::other);
    let (files, notes) = dataset::task_repo_files(&to_write, &args.split, &read)?;
    dataset::write_task_repo(&args.output, &files, &read)?;
    for note in notes {
        ctx.note(note);
    }
    ctx.note(format!(
        "exported {} instances as the task repository {} ({} files)",
        instances.len(),
        args.output.display(),
        files.len()
    ));
    Ok(ExitCode::SUCCESS)
}
