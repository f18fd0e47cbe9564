mod export;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::dataset::{self, RowForm};
use crate::store::Ark;

use super::Context;

pub use export::{ExportArgs, export};

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// SWE-bench or Multi-SWE-bench datasets as published: JSON lists, JSON Lines or Parquet
    /// files (each file's form told by its content, each row's by its fields), folders of
    /// them (a Hugging Face download: every `*.parquet`, `*.json`, `*.jsonl` under it), or
    /// swebench 5 task repositories (a folder with a `sweb.yaml`). All are imported together,
    /// or none.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// In a folder, only the files of this split (`test-00000-of-00001.parquet`,
    /// `dev.jsonl`, or any file in a folder named `test`); in a task repository, only its
    /// tasks of this split (published or not: `deprecated`).
    #[arg(long, value_name = "NAME")]
    pub split: Option<String>,
    /// The dataset the file is (swe-bench, swe-bench-lite, swe-bench-verified,
    /// multi-swe-bench, their aliases such as `verified` or `SWE-bench/SWE-bench_Verified`, or
    /// a name of your own with --environments-as-of): its environments' date is what `env
    /// lock` resolves as of. Default: multi-swe-bench when every row is Multi-SWE-bench's, the
    /// first dataset a task repository's sweb.yaml publishes, else swe-bench.
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

pub fn import(ctx: &Context, args: ImportArgs) -> anyhow::Result<ExitCode> {
    let read = dataset::read_datasets(&args.files, args.split.as_deref())?;
    for note in &read.notes {
        ctx.note(note.clone());
    }
    let mut instances: Vec<_> = read.instances.into_iter().map(|(_, i)| i).collect();
    let all_msb = !instances.is_empty()
        && instances
            .iter()
            .all(|i| dataset::row_form(i) == RowForm::MultiSweBench);
    let name = args.dataset.clone().unwrap_or_else(|| {
        match read.published.first() {
            _ if all_msb => "multi-swe-bench",
            Some(first) => first,
            None => dataset::DEFAULT_DATASET,
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
    // A task repository's files first, as objects: what the instances name is there before
    // they are; an import that stops later leaves only objects nothing names.
    let objects = ark.objects();
    for f in &read.files {
        let mut file = std::fs::File::open(&f.path)
            .map_err(|e| anyhow::anyhow!("cannot read `{}`: {e}", f.path.display()))?;
        objects
            .put_checked(&mut file, Some(&f.sha256))
            .map_err(|e| anyhow::anyhow!("cannot keep `{}` as an object: {e}", f.path.display()))?;
    }
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
