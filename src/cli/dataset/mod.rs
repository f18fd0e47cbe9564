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
    /// lock` resolves as of. Default: a task's first dataset in its repository's sweb.yaml
    /// order; multi-swe-bench when every row is Multi-SWE-bench's; else swe-bench.
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
    // Rows that name no version (Multi-SWE-bench's) take the one their manifest gives them,
    // or `inferred` when no manifest names their repository.
    let assigned = ctx.manifests()?.assign_versions(&mut instances);
    let by_repo = |ids: &[String]| {
        let mut n: std::collections::BTreeMap<&str, usize> = Default::default();
        for i in instances.iter().filter(|i| ids.contains(&i.instance_id)) {
            *n.entry(i.repo.as_str()).or_default() += 1;
        }
        n.iter()
            .map(|(r, n)| format!("{r} ({n})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !assigned.left.is_empty() {
        ctx.note(format!(
            "{} instance(s) name no version and their manifest's `pulls` take none of them; \
             they are kept, and `env lock` needs a manifest version for them: {}",
            assigned.left.len(),
            by_repo(&assigned.left)
        ));
    }
    if !assigned.inferred.is_empty() {
        ctx.note(format!(
            "{} instance(s) name no version and no manifest names their repository: they get \
             version `{v}`, whose context `swe-ark env lock OWNER/NAME {v}` infers from the \
             repository's build files: {}",
            assigned.inferred.len(),
            by_repo(&assigned.inferred),
            v = crate::manifest::infer::VERSION
        ));
    }
    let mut groups: Vec<(dataset::DatasetDate, Vec<dataset::Instance>)> = Vec::new();
    for (name, members) in by_dataset(&args, &read.published, instances) {
        let date = dataset::environments_date(
            &name,
            args.environments_as_of.as_deref(),
            &members,
            std::time::SystemTime::now(),
        )?;
        groups.push((date, members));
    }
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
    let rows: Vec<_> = groups
        .iter()
        .map(|(d, i)| (Some(d), i.as_slice()))
        .collect();
    let new = ark.index_mut().import_by_dataset(&rows)?;
    report(ctx, &args, &groups, new)?;
    Ok(ExitCode::SUCCESS)
}

/// The instances by the dataset each is recorded as, in the order first met: `--dataset`
/// for all; else a task's first dataset in its `sweb.yaml`'s order (`published`); else
/// multi-swe-bench when every row is Multi-SWE-bench's, else swe-bench.
fn by_dataset(
    args: &ImportArgs,
    published: &[String],
    instances: Vec<dataset::Instance>,
) -> Vec<(String, Vec<dataset::Instance>)> {
    let all_msb = !instances.is_empty()
        && instances
            .iter()
            .all(|i| dataset::row_form(i) == RowForm::MultiSweBench);
    let fallback = match all_msb {
        true => "multi-swe-bench",
        false => dataset::DEFAULT_DATASET,
    };
    let mut groups: Vec<(String, Vec<dataset::Instance>)> = Vec::new();
    for inst in instances {
        let own = dataset::TaskRecord::of(&inst)
            .and_then(|r| published.iter().find(|p| r.datasets.contains(p)).cloned());
        let name = args
            .dataset
            .clone()
            .or(own)
            .unwrap_or_else(|| fallback.into());
        match groups.iter_mut().find(|(n, _)| *n == name) {
            Some((_, members)) => members.push(inst),
            None => groups.push((name, vec![inst])),
        }
    }
    groups
}

/// What `import` says it did: the instances, and each dataset with its environments' date.
fn report(
    ctx: &Context,
    args: &ImportArgs,
    groups: &[(dataset::DatasetDate, Vec<dataset::Instance>)],
    new: usize,
) -> std::io::Result<()> {
    let total: usize = groups.iter().map(|(_, i)| i.len()).sum();
    if args.json {
        let datasets: Vec<serde_json::Value> = groups
            .iter()
            .map(|(d, i)| {
                serde_json::json!({
                    "dataset": d.name, "environments_as_of": d.environments_as_of,
                    "rule": d.rule, "instances": i.len(),
                })
            })
            .collect();
        let first = groups.first().map(|(d, _)| d);
        out!(
            "{}",
            serde_json::json!({
                "files": args.files, "instances": total, "new": new,
                "dataset": first.map(|d| &d.name),
                "environments_as_of": first.and_then(|d| d.environments_as_of.as_ref()),
                "rule": first.map(|d| &d.rule),
                "datasets": datasets,
            })
        );
        return Ok(());
    }
    let from = match args.files.as_slice() {
        [one] => one.display().to_string(),
        many => format!("{} paths", many.len()),
    };
    out!(
        "imported {total} instances from {from} ({new} new, {} replaced)",
        total - new
    );
    for (d, members) in groups {
        let of = match groups.len() {
            1 => String::new(),
            _ => format!(" ({} instances)", members.len()),
        };
        ctx.note(match &d.environments_as_of {
            Some(when) => format!(
                "dataset {}{of}: environments resolve as of {when} ({}); --dataset or \
                 --environments-as-of to change",
                d.name, d.rule
            ),
            None => format!(
                "dataset {}{of}: each environment resolves as of its environment setup commit",
                d.name
            ),
        });
    }
    Ok(())
}
