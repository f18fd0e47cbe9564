use std::collections::HashSet;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::dataset::{self, ExportFormat, RowForm, Selection, TestListForm};
use crate::fsutil;
use crate::store::Ark;

use super::Context;

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// SWE-bench or Multi-SWE-bench datasets as published: JSON lists, JSON Lines or Parquet
    /// files (each file's form told by its content, each row's by its fields), or folders of
    /// them (a Hugging Face download: every `*.parquet`, `*.json`, `*.jsonl` under it). All are
    /// imported together, or none.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// In a folder, only the files of this split (`test-00000-of-00001.parquet`,
    /// `dev.jsonl`, or any file in a folder named `test`).
    #[arg(long, value_name = "NAME")]
    pub split: Option<String>,
    /// The dataset the file is (swe-bench, swe-bench-lite, swe-bench-verified,
    /// multi-swe-bench, or a name of your own with --environments-as-of): its environments'
    /// date is what `env lock` resolves as of. Default: multi-swe-bench when every row is
    /// Multi-SWE-bench's, else swe-bench.
    #[arg(long, value_name = "NAME")]
    pub dataset: Option<String>,
    /// When the dataset's environments were built (YYYY-MM-DD or RFC 3339), overriding the
    /// known dataset's date; `commit` resolves each environment as of its environment setup
    /// commit instead.
    #[arg(long, value_name = "WHEN")]
    pub environments_as_of: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Where to write: `.parquet` gives Parquet, `.jsonl` JSON Lines, anything else a JSON list.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Only these instances (default: all, in the order they entered the archive).
    #[arg(long, num_args = 1.., value_name = "ID")]
    pub instance_ids: Vec<String>,
    /// The rows' form: each instance as it came in, SWE-bench records, Multi-SWE-bench rows
    /// (refused for an instance that did not come from one), or SWE-bench records in Parquet.
    #[arg(long, value_enum, default_value_t = ExportFormat::AsImported)]
    pub format: ExportFormat,
    /// How SWE-bench records write FAIL_TO_PASS / PASS_TO_PASS.
    #[arg(long, value_enum, default_value_t = TestListForm::Strings)]
    pub tests_as: TestListForm,
    /// Only the instances that validation kept (proven by running their tests).
    #[arg(long)]
    pub validated_only: bool,
}

pub fn import(ctx: &Context, args: ImportArgs) -> anyhow::Result<ExitCode> {
    let records = dataset::read_datasets(&args.files, args.split.as_deref())?;
    let mut instances: Vec<_> = records.into_iter().map(|(_, i)| i).collect();
    let all_msb = !instances.is_empty()
        && instances
            .iter()
            .all(|i| dataset::row_form(i) == RowForm::MultiSweBench);
    let name = args.dataset.clone().unwrap_or_else(|| {
        if all_msb {
            "multi-swe-bench"
        } else {
            dataset::DEFAULT_DATASET
        }
        .to_string()
    });
    // Rows that name no version (Multi-SWE-bench's) take the one their manifest gives them.
    let unversioned = ctx.manifests()?.assign_versions(&mut instances);
    if !unversioned.is_empty() {
        let mut by_repo: std::collections::BTreeMap<&str, usize> = Default::default();
        for i in instances
            .iter()
            .filter(|i| unversioned.contains(&i.instance_id))
        {
            *by_repo.entry(i.repo.as_str()).or_default() += 1;
        }
        let repos: Vec<String> = by_repo.iter().map(|(r, n)| format!("{r} ({n})")).collect();
        ctx.note(format!(
            "{} instance(s) name no version and no manifest gives them one; they are kept, and \
             `env lock` needs a manifest of their repository: {}",
            unversioned.len(),
            repos.join(", ")
        ));
    }
    let dataset = dataset::environments_date(
        &name,
        args.environments_as_of.as_deref(),
        &instances,
        std::time::SystemTime::now(),
    )?;
    let mut ark = Ark::create(&ctx.ark)?;
    let new = ark
        .index_mut()
        .import_instances(&instances, Some(&dataset))?;
    if args.json {
        out!(
            "{}",
            serde_json::json!({
                "files": args.files, "instances": instances.len(), "new": new,
                "dataset": dataset.name, "environments_as_of": dataset.environments_as_of,
                "rule": dataset.rule,
            })
        );
    } else {
        let from = match args.files.as_slice() {
            [one] => one.display().to_string(),
            many => format!("{} paths", many.len()),
        };
        out!(
            "imported {} instances from {from} ({new} new, {} replaced)",
            instances.len(),
            instances.len() - new
        );
        ctx.note(match &dataset.environments_as_of {
            Some(when) => format!(
                "dataset {}: environments resolve as of {when} ({}); --dataset or \
                 --environments-as-of to change",
                dataset.name, dataset.rule
            ),
            None => format!(
                "dataset {}: each environment resolves as of its environment setup commit",
                dataset.name
            ),
        });
    }
    Ok(ExitCode::SUCCESS)
}

pub fn export(ctx: &Context, args: ExportArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let mut instances = Selection::ids(args.instance_ids)
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
