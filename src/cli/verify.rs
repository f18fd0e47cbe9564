use std::process::ExitCode;

use crate::bundle::{self, BundleFile, BundleSource, Limits};
use crate::digest::Sha256Digest;
use crate::release::rebuild::Revalidate;
use crate::store::{Ark, BundleRow};

use super::Context;
use super::unpack::{Located, locate};
use crate::dataset::Selection;

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

#[derive(serde::Serialize)]
struct Checked {
    what: String,
    name: String,
    ok: bool,
    problems: Vec<String>,
}

fn check_source(
    source: &dyn BundleSource,
    expected: Option<Sha256Digest>,
    row: Option<&BundleRow>,
    ctx: &Context,
    problems: &mut Vec<String>,
) {
    let progress = ctx.progress();
    match bundle::verify(source, expected, &Limits::default(), progress.as_ref()) {
        Ok(report) => {
            problems.extend(report.problems.iter().map(|p| p.to_string()));
            if let Some(row) = row {
                if report.manifest.instance_id != row.instance_id {
                    problems.push(format!(
                        "bundle.json names instance `{}`, the index `{}`",
                        report.manifest.instance_id, row.instance_id
                    ));
                }
                if report.manifest.codebase_tree != row.codebase_tree {
                    problems.push(format!(
                        "bundle.json has codebase tree {}, the index {}",
                        report.manifest.codebase_tree, row.codebase_tree
                    ));
                }
                if report.tar_size != row.tar_size {
                    problems.push(format!(
                        "the tar is {} bytes, the index says {}",
                        report.tar_size, row.tar_size
                    ));
                }
            }
        }
        Err(e) => problems.push(e.to_string()),
    }
}

/// Checks a bundle of the archive, rebuilt from its pieces or read from its whole file.
fn check_row(ark: &Ark, row: &BundleRow, ctx: &Context) -> Checked {
    let mut problems = Vec::new();
    let whole = (row.manifest_piece.is_none()).then(|| {
        ark.bundles_dir()
            .join(format!("{}{}", row.id.hex(), bundle::FILE_SUFFIX))
    });
    match &whole {
        Some(path) if !path.exists() => {
            problems.push(format!("the bundle file `{}` is missing", path.display()));
        }
        _ => match ark.bundle(row) {
            Ok(b) => check_source(&b, Some(row.id), Some(row), ctx, &mut problems),
            Err(e) => problems.push(e.to_string()),
        },
    }
    Checked {
        what: "bundle".into(),
        name: row.id.hex(),
        ok: problems.is_empty(),
        problems,
    }
}

/// `verify --rebuild`: every bundle (of the given instances) packed again and compared.
fn rebuild(ctx: &Context, args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let rows = Selection::ids(args.instance_ids.clone())
        .pick(ark.index().bundles()?, "with no bundle in the archive")?;
    let manifests = if args.revalidate {
        Some(ctx.manifests()?)
    } else {
        None
    };
    let revalidate = manifests.as_ref().map(|m| Revalidate {
        manifests: m,
        options: crate::validate::ValidateOptions {
            runs: args.runs.max(1),
            run: crate::harness::RunOptions {
                timeout: std::time::Duration::from_secs(args.timeout),
                ..Default::default()
            },
            lock: None,
        },
    });
    let mut results = Vec::new();
    for row in &rows {
        let progress = ctx.progress();
        if revalidate.is_some() {
            ctx.note(format!(
                "running the tests of {} again ({})",
                row.instance_id,
                row.id.short()
            ));
        }
        let r =
            crate::release::rebuild::rebuild(&ark, row, revalidate.as_ref(), progress.as_ref())?;
        if !args.json {
            out!(
                "{} rebuild {} {}",
                if r.ok { "ok " } else { "BAD" },
                r.instance_id,
                r.bundle
            );
            for p in &r.problems {
                out!("    {p}");
            }
        }
        results.push(r);
    }
    let bad = results.iter().filter(|r| !r.ok).count();
    if args.json {
        out!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        ctx.note(format!(
            "{} rebuilt, {bad} different or not rebuilt",
            results.len()
        ));
    }
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub fn run(ctx: &Context, args: VerifyArgs) -> anyhow::Result<ExitCode> {
    if args.rebuild {
        return rebuild(ctx, &args);
    }
    let mut results = Vec::new();
    if args.ids.is_empty() {
        let ark = Ark::open(&ctx.ark)?;
        let integrity = ark.index().integrity_check()?;
        if integrity != ["ok"] {
            results.push(Checked {
                what: "index".into(),
                name: ark.layout().index().display().to_string(),
                ok: false,
                problems: integrity,
            });
        }
        // Every piece first, re-hashed; then every bundle rebuilt from them.
        let progress = ctx.progress();
        for (name, pieces, problems) in ark.check_store(progress.as_ref())? {
            results.push(Checked {
                what: "pack".into(),
                name: format!("{name} ({pieces} pieces)"),
                ok: problems.is_empty(),
                problems,
            });
        }
        for row in ark.index().bundles()? {
            results.push(check_row(&ark, &row, ctx));
        }
        let store = ark.objects();
        for obj in ark.index().objects()? {
            let problems = match store.check(&obj.id) {
                Ok(size) if size == obj.size => Vec::new(),
                Ok(size) => vec![format!("{size} bytes, the index says {}", obj.size)],
                Err(e) => vec![e.to_string()],
            };
            results.push(Checked {
                what: "object".into(),
                name: obj.id.hex(),
                ok: problems.is_empty(),
                problems,
            });
        }
        let (unindexed, temps) = ark.strays()?;
        for p in unindexed {
            let hint = if p.extension().is_some_and(|e| e == "pack") {
                "a pack the index does not name (a pack or gc interrupted after writing it?); \
                 `swe-ark gc` removes it"
            } else {
                "a bundle file the index does not list (a pack interrupted after writing it?); \
                 pack the instance again to index it"
            };
            ctx.note(format!("note: `{}` is {hint}", p.display()));
        }
        for p in temps {
            ctx.note(format!(
                "note: `{}` is a temporary file left by an interrupted write; it is safe to delete",
                p.display()
            ));
        }
    } else {
        for id in &args.ids {
            match locate(ctx, id)? {
                Located::File(path, expected) => {
                    let mut problems = Vec::new();
                    let row = match (Ark::open(&ctx.ark).ok(), expected) {
                        (Some(ark), Some(e)) => ark
                            .index()
                            .bundles_with_prefix(&e.hex())?
                            .into_iter()
                            .next(),
                        _ => None,
                    };
                    check_source(
                        &BundleFile::new(&path),
                        expected,
                        row.as_ref(),
                        ctx,
                        &mut problems,
                    );
                    results.push(Checked {
                        what: "bundle".into(),
                        name: expected.map_or_else(|| path.display().to_string(), |id| id.hex()),
                        ok: problems.is_empty(),
                        problems,
                    });
                }
                Located::Archive(ark, row) => results.push(check_row(&ark, &row, ctx)),
            }
        }
    }
    let bad = results.iter().filter(|r| !r.ok).count();
    if args.json {
        out!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        for r in &results {
            out!("{} {} {}", if r.ok { "ok " } else { "BAD" }, r.what, r.name);
            for p in &r.problems {
                out!("    {p}");
            }
        }
        ctx.note(format!("{} checked, {} bad", results.len(), bad));
    }
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

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
    let rows = ark.index().bundles()?;
    let mut newest: std::collections::BTreeMap<String, BundleRow> = Default::default();
    for r in rows {
        match newest.get(&r.instance_id) {
            Some(n) if n.packed_at >= r.packed_at => {}
            _ => {
                newest.insert(r.instance_id.clone(), r);
            }
        }
    }
    let chosen: Vec<BundleRow> = Selection::ids(args.instance_ids.clone())
        .pick(
            newest.into_values().collect(),
            "with no bundle in the archive",
        )?
        .into_iter()
        .filter(|r| r.format_version < crate::bundle::VERSION_3)
        .collect();
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
