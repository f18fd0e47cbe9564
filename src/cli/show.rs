use std::process::ExitCode;

use crate::bundle::{self, CODEBASE_DIR};
use crate::store::Ark;

use super::Context;
use super::output::{human_bytes, human_time};

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// A bundle id, a unique prefix of one, or an instance id.
    pub id: String,
    /// Print everything as JSON (bundle row, bundle.json, instance).
    #[arg(long)]
    pub json: bool,
    /// Print test lists and the problem statement in full.
    #[arg(long)]
    pub full: bool,
}

fn field(name: &str, value: &str) -> anyhow::Result<()> {
    let mut lines = value.lines();
    out!("{:<26}{}", name, lines.next().unwrap_or(""));
    for l in lines {
        out!("{:<26}{}", "", l);
    }
    Ok(())
}

fn list(name: &str, items: &[String], full: bool) -> anyhow::Result<()> {
    let shown = if full {
        items.len()
    } else {
        items.len().min(10)
    };
    let mut text = items[..shown].join("\n");
    if shown < items.len() {
        text.push_str(&format!("\n… and {} more (--full)", items.len() - shown));
    }
    field(&format!("{name} ({})", items.len()), &text)
}

pub fn run(ctx: &Context, args: ShowArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let row = ark.resolve(&args.id)?;
    let manifest = bundle::read_manifest_from(&ark.bundle(&row)?)?;
    let path = row.manifest_piece.is_none().then(|| {
        ark.bundles_dir()
            .join(format!("{}{}", row.id.hex(), bundle::FILE_SUFFIX))
    });
    let instance = ark.index().instance(&row.instance_id)?;
    if args.json {
        let v = serde_json::json!({
            "bundle": row,
            "path": path,
            "manifest": manifest,
            "instance": instance.map(|i| i.to_value()),
        });
        out!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let codebase_size: u64 = manifest.codebase_members().map(|m| m.size).sum();
    field("bundle", &row.id.hex())?;
    let stored = match (&path, row.manifest_piece) {
        (Some(p), _) => format!(
            "{} ({}; tar {})",
            p.display(),
            human_bytes(row.file_size),
            human_bytes(row.tar_size)
        ),
        (None, Some(m)) => format!(
            "deduplicated: bundle.json is piece {}; packing it added {}; tar {}",
            m.short(),
            human_bytes(row.file_size),
            human_bytes(row.tar_size)
        ),
        (None, None) => String::new(),
    };
    field("stored", &stored)?;
    field(
        "format",
        &format!("{} v{}", manifest.format, manifest.version),
    )?;
    field("packed", &human_time(row.packed_at))?;
    field(
        "codebase",
        &format!(
            "git tree {}, {} files, {}",
            manifest.codebase_tree,
            manifest.codebase_members().count(),
            human_bytes(codebase_size)
        ),
    )?;
    let others: Vec<String> = manifest
        .members
        .iter()
        .filter(|m| !m.path.starts_with(CODEBASE_DIR.as_bytes()))
        .map(|m| {
            format!(
                "{:<20} {:>10}  sha256 {}",
                String::from_utf8_lossy(&m.path),
                human_bytes(m.size),
                m.sha256.short()
            )
        })
        .collect();
    field("members", &others.join("\n"))?;
    out!();
    field("instance_id", &manifest.instance_id)?;
    if let Some(i) = instance {
        field("repo", &i.repo)?;
        field("base_commit", &i.base_commit)?;
        field("version", &i.version)?;
        field("created_at", &i.created_at)?;
        field("environment_setup_commit", &i.environment_setup_commit)?;
        list("FAIL_TO_PASS", &i.fail_to_pass, args.full)?;
        list("PASS_TO_PASS", &i.pass_to_pass, args.full)?;
        field("patch", &format!("{} lines", i.patch.lines().count()))?;
        field(
            "test_patch",
            &format!("{} lines", i.test_patch.lines().count()),
        )?;
        let ps: Vec<&str> = i.problem_statement.lines().collect();
        let shown = if args.full { ps.len() } else { ps.len().min(8) };
        let mut text = ps[..shown].join("\n");
        if shown < ps.len() {
            text.push_str(&format!("\n… {} more lines (--full)", ps.len() - shown));
        }
        field("problem_statement", &text)?;
        for (k, v) in &i.extra {
            field(k, &v.to_string())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
