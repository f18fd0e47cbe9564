//! `swe-ark plan`: the work cut into shards for many machines (docs/DISTRIBUTED.md).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::dataset::Selection;
use crate::plan::{self, CostUnit, Planned};
use crate::store::Ark;

use super::Context;

#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["instance_ids", "all"]))]
pub struct PlanArgs {
    /// How many shards (machines, or tasks of a job array).
    #[arg(long, value_name = "N")]
    pub shards: usize,
    /// Plan these instances.
    #[arg(long, num_args = 1.., value_delimiter = ',', value_name = "ID")]
    pub instance_ids: Vec<String>,
    /// Plan every instance of the archive.
    #[arg(long)]
    pub all: bool,
    /// The plan file to write.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Print the plan as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Context, args: PlanArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let instances = Selection::ids(args.instance_ids)
        .pick(ark.index().all_instances()?, "not in the archive")?;
    // Recorded durations: how long each instance's last validation took.
    let seconds: BTreeMap<String, f64> = ark
        .index()
        .validations()?
        .into_iter()
        .map(|v| (v.instance_id, v.seconds))
        .collect();
    let planned: Vec<Planned> = instances
        .into_iter()
        .map(|instance| Planned {
            seconds: seconds.get(&instance.instance_id).copied(),
            instance,
        })
        .collect();
    let plan = plan::make(&planned, args.shards)?;
    let bytes = plan.to_bytes();
    crate::fsutil::write_atomic(&args.output, &bytes)
        .map_err(|e| anyhow::anyhow!("cannot write `{}`: {e}", args.output.display()))?;
    if args.json {
        out!("{}", String::from_utf8_lossy(&bytes).trim_end());
        return Ok(ExitCode::SUCCESS);
    }
    let unit = match plan.cost_unit {
        CostUnit::Milliseconds => "s of recorded test runs",
        CostUnit::Instances => "instances (no recorded durations)",
    };
    for s in &plan.shards {
        let cost = match plan.cost_unit {
            CostUnit::Milliseconds => format!("{:.1}", s.cost as f64 / 1000.0),
            CostUnit::Instances => s.cost.to_string(),
        };
        ctx.note(format!(
            "shard {:>3}: {:>4} instance(s) in {:>3} context(s), cost {cost}",
            s.index,
            s.instance_ids().count(),
            s.contexts.len(),
        ));
    }
    let empty = plan.shards.iter().filter(|s| s.contexts.is_empty()).count();
    if empty > 0 {
        ctx.note(format!(
            "note: {empty} shard(s) have nothing to do: there are fewer (repository, version) \
             contexts than shards, and a context is never split"
        ));
    }
    ctx.note(format!(
        "planned {} instance(s) over {} shard(s), cost in {unit}{}; the costliest shard is \
         {:.2}x the mean; plan {}",
        plan.instances,
        plan.shards.len(),
        if plan.estimated > 0 {
            format!(" ({} estimated at the median)", plan.estimated)
        } else {
            String::new()
        },
        plan.imbalance(),
        plan.id()
    ));
    out!("{}", args.output.display());
    Ok(ExitCode::SUCCESS)
}
