use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};

use crate::mirror::{self, Mirror, RepoName};
use crate::store::Ark;

use super::Context;
use super::output::{human_bytes, human_time};

#[derive(Debug, clap::Args)]
pub struct MirrorArgs {
    #[command(subcommand)]
    pub command: MirrorCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum MirrorCommand {
    /// Clone bare mirrors with every ref (or update them if present).
    Add(AddArgs),
    /// Fetch what is new; prints the refs that changed.
    Update(UpdateArgs),
    /// The mirrors: URL, refs, last fetch, size.
    Ls(LsArgs),
    /// Read every object, check every ref and every pinned commit; exit 1 naming what is bad.
    Verify(VerifyArgs),
    /// Write a mirror as a git bundle (`git clone FILE.bundle` reads it).
    Export(ExportArgs),
    /// Read a git bundle into a mirror, for the air gap.
    Import(ImportArgs),
    /// The version (major.minor) collect gives an instance at COMMIT, and where it is read.
    Version(VersionArgs),
}

#[derive(Debug, clap::Args)]
pub struct VersionArgs {
    pub name: String,
    pub commit: String,
    /// The instance's creation time: release tags after it are not considered.
    #[arg(long, default_value = "")]
    pub before: String,
}

#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// OWNER/NAME, a git URL (https, ssh, git://, file://) or a local path.
    #[arg(required = true)]
    pub sources: Vec<String>,
    /// What OWNER/NAME is resolved against (GitHub Enterprise, a company mirror); also the
    /// `git_base` key of `<ark>/config.toml`.
    #[arg(long, env = "SWE_ARK_GIT_BASE", value_name = "URL")]
    pub git_base: Option<String>,
    /// The mirror's name, OWNER/NAME, when a URL or path does not give the right one.
    #[arg(long)]
    pub name: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct UpdateArgs {
    /// Mirrors to update (OWNER/NAME); none: all of them.
    pub names: Vec<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct LsArgs {
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Mirrors to verify; none: all of them.
    pub names: Vec<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    pub name: String,
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    pub file: PathBuf,
    /// The mirror's name (default: from the file name, as local/STEM).
    #[arg(long)]
    pub name: Option<String>,
    /// The upstream URL for later `mirror update`s (default: none, or the mirror's own).
    #[arg(long)]
    pub url: Option<String>,
}

fn repo_name(s: &str) -> anyhow::Result<RepoName> {
    RepoName::parse(s).with_context(|| format!("`{s}` is not a mirror name (OWNER/NAME)"))
}

/// The base URL for OWNER/NAME: the flag, then `<ark>/config.toml`, then GitHub.
fn git_base(ctx: &Context, flag: Option<String>) -> anyhow::Result<String> {
    if let Some(f) = flag {
        return Ok(f);
    }
    let config = crate::store::Layout::new(&ctx.ark).config();
    if config.is_file() {
        let text = std::fs::read_to_string(&config)
            .with_context(|| format!("cannot read `{}`", config.display()))?;
        let table: toml::Table = text
            .parse()
            .with_context(|| format!("`{}` is not valid TOML", config.display()))?;
        if let Some(v) = table.get("git_base") {
            return v
                .as_str()
                .map(str::to_string)
                .with_context(|| format!("`git_base` in `{}` must be a string", config.display()));
        }
    }
    Ok(mirror::DEFAULT_GIT_BASE.to_string())
}

/// Records a mirror's current state in the index.
fn record(ark: &mut Ark, m: &Mirror) -> anyhow::Result<()> {
    let refs = mirror::upstream_refs(&m.repo)?;
    let hash = mirror::refs_hash(&refs);
    let size = mirror::disk_size(&m.path);
    ark.index_mut()
        .record_mirror(m.name.as_str(), &m.url(), &refs, &hash, size)?;
    Ok(())
}

fn print_report(r: &mirror::FetchReport) -> anyhow::Result<()> {
    let (mut added, mut moved, mut deleted) = (0, 0, 0);
    for c in &r.changes {
        match c {
            mirror::RefChange::Added { .. } => added += 1,
            mirror::RefChange::Moved { .. } => moved += 1,
            mirror::RefChange::Deleted { .. } => deleted += 1,
        }
        out!("  {c}");
    }
    out!(
        "{} {}: {} refs (+{added} ~{moved} -{deleted}), {} objects, {} received in {:.1} s",
        if r.created { "mirrored" } else { "updated" },
        r.name,
        r.refs,
        r.received_objects,
        human_bytes(r.received_bytes as u64),
        r.seconds
    );
    Ok(())
}

pub fn run(ctx: &Context, args: MirrorArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        MirrorCommand::Add(a) => add(ctx, a),
        MirrorCommand::Update(a) => update(ctx, a),
        MirrorCommand::Ls(a) => ls(ctx, a),
        MirrorCommand::Verify(a) => verify(ctx, a),
        MirrorCommand::Export(a) => export(ctx, a),
        MirrorCommand::Import(a) => import(ctx, a),
        MirrorCommand::Version(a) => version(ctx, a),
    }
}

fn add(ctx: &Context, args: AddArgs) -> anyhow::Result<ExitCode> {
    if args.name.is_some() && args.sources.len() > 1 {
        bail!("--name names one mirror; give one source with it");
    }
    let base = git_base(ctx, args.git_base)?;
    let sources = args
        .sources
        .iter()
        .map(|s| mirror::parse_source(s, &base, args.name.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut ark = Ark::create(&ctx.ark)?;
    let mut reports = Vec::new();
    for source in sources {
        let progress = ctx.progress();
        let (m, report) = Mirror::add(
            &ark.mirrors_dir(),
            &source.name,
            &source.url,
            progress.as_ref(),
        )?;
        record(&mut ark, &m)?;
        if !args.json {
            print_report(&report)?;
        }
        reports.push(report);
    }
    if args.json {
        out!("{}", serde_json::to_string_pretty(&reports)?);
    }
    Ok(ExitCode::SUCCESS)
}

fn update(ctx: &Context, args: UpdateArgs) -> anyhow::Result<ExitCode> {
    let mut ark = Ark::open(&ctx.ark)?;
    let names: Vec<RepoName> = if args.names.is_empty() {
        ark.index()
            .mirrors()?
            .iter()
            .map(|m| repo_name(&m.name))
            .collect::<Result<_, _>>()?
    } else {
        args.names
            .iter()
            .map(|n| repo_name(n))
            .collect::<Result<_, _>>()?
    };
    let mut reports = Vec::new();
    let mut failed = 0;
    for name in names {
        let mut m = Mirror::open(&ark.mirrors_dir(), &name)?;
        if m.url().is_empty() {
            ctx.note(format!(
                "{name}: no upstream URL (imported from a bundle); skipped — set one with \
                 `swe-ark mirror add URL --name {name}`"
            ));
            continue;
        }
        let progress = ctx.progress();
        match m.fetch(None, progress.as_ref()) {
            Ok(report) => {
                record(&mut ark, &m)?;
                if !args.json {
                    print_report(&report)?;
                }
                reports.push(report);
            }
            // One unreachable upstream does not stop the others; the summary says it failed.
            Err(e) => {
                eprintln!("swe-ark: error: {e}");
                failed += 1;
            }
        }
    }
    if args.json {
        out!("{}", serde_json::to_string_pretty(&reports)?);
    }
    if failed > 0 {
        bail!("{failed} mirror(s) could not be updated; their previous state is unchanged");
    }
    Ok(ExitCode::SUCCESS)
}

fn ls(ctx: &Context, args: LsArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let mirrors = ark.index().mirrors()?;
    if args.json {
        out!("{}", serde_json::to_string_pretty(&mirrors)?);
        return Ok(ExitCode::SUCCESS);
    }
    if mirrors.is_empty() {
        ctx.note("no mirrors; add one with `swe-ark mirror add OWNER/NAME`");
        return Ok(ExitCode::SUCCESS);
    }
    let w = mirrors
        .iter()
        .map(|m| m.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    out!(
        "{:<w$}  {:>6}  {:>10}  {:<20}  URL",
        "NAME",
        "REFS",
        "SIZE",
        "LAST FETCH"
    );
    for m in &mirrors {
        out!(
            "{:<w$}  {:>6}  {:>10}  {:<20}  {}",
            m.name,
            m.refs_count,
            human_bytes(m.size),
            m.last_fetch.map_or("-".to_string(), human_time),
            if m.url.is_empty() { "(none)" } else { &m.url }
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(serde::Serialize)]
struct Checked {
    name: String,
    objects: usize,
    pins: usize,
    ok: bool,
    problems: Vec<String>,
}

/// What the archive's index expects of mirror `name`.
fn expected(ark: &Ark, name: &RepoName) -> anyhow::Result<mirror::Expected> {
    let pins = ark.index().pins(name.as_str())?;
    Ok(mirror::Expected {
        pins: pins
            .into_iter()
            .map(|p| mirror::ExpectedPin {
                what: format!("{} of {}", p.role, p.instance_id),
                reference: p.reference,
                commit: p.commit,
            })
            .collect(),
        commits: ark
            .index()
            .instances_of_repo(name.as_str())?
            .into_iter()
            .map(|i| (i.base_commit, format!("base_commit of {}", i.instance_id)))
            .collect(),
        refs: ark.index().mirror_refs(name.as_str())?,
    })
}

fn verify(ctx: &Context, args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let names: Vec<String> = if args.names.is_empty() {
        ark.index().mirrors()?.into_iter().map(|m| m.name).collect()
    } else {
        args.names.clone()
    };
    let mut results = Vec::new();
    for n in names {
        let name = repo_name(&n)?;
        let checked = match Mirror::open(&ark.mirrors_dir(), &name) {
            Err(e) => mirror::Checked {
                objects: 0,
                pins: 0,
                problems: vec![e.to_string()],
            },
            Ok(m) => mirror::verify(&m, &expected(&ark, &name)?, ctx.progress().as_ref())?,
        };
        results.push(Checked {
            name: n,
            objects: checked.objects,
            pins: checked.pins,
            ok: checked.problems.is_empty(),
            problems: checked.problems,
        });
    }
    let bad = results.iter().filter(|r| !r.ok).count();
    if args.json {
        out!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        for r in &results {
            out!(
                "{} mirror {} ({} objects, {} pins)",
                if r.ok { "ok " } else { "BAD" },
                r.name,
                r.objects,
                r.pins
            );
            for p in &r.problems {
                out!("    {p}");
            }
        }
        ctx.note(format!("{} checked, {bad} bad", results.len()));
    }
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn export(ctx: &Context, args: ExportArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let m = Mirror::open(&ark.mirrors_dir(), &repo_name(&args.name)?)?;
    let progress = ctx.progress();
    let stats = m.export_bundle(&args.output, progress.as_ref())?;
    ctx.note(format!(
        "exported {}: {} refs, {} objects, {}",
        args.name,
        stats.refs,
        stats.objects,
        human_bytes(stats.bytes)
    ));
    out!("{}", args.output.display());
    Ok(ExitCode::SUCCESS)
}

fn import(ctx: &Context, args: ImportArgs) -> anyhow::Result<ExitCode> {
    let name = match &args.name {
        Some(n) => repo_name(n)?,
        None => {
            let stem = args
                .file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let cleaned: String = stem
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                        c
                    } else {
                        '-'
                    }
                })
                .collect();
            repo_name(&format!("local/{cleaned}"))?
        }
    };
    let mut ark = Ark::create(&ctx.ark)?;
    let progress = ctx.progress();
    let (m, stats) = mirror::import_bundle(
        &ark.mirrors_dir(),
        &args.file,
        &name,
        args.url.as_deref(),
        progress.as_ref(),
    )?;
    record(&mut ark, &m)?;
    out!(
        "{} {name} from {}: {} refs",
        if stats.created { "imported" } else { "updated" },
        args.file.display(),
        stats.refs
    );
    Ok(ExitCode::SUCCESS)
}

fn version(ctx: &Context, args: VersionArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let m = Mirror::open(&ark.mirrors_dir(), &repo_name(&args.name)?)?;
    let commit = m.commit(&args.commit)?;
    let manifests = ctx.manifests().unwrap_or_default();
    let rule = manifests
        .repo(m.name.as_str())
        .ok()
        .and_then(|r| r.version_rule.clone());
    match crate::collect::version::detect(&m.repo, commit.id(), &args.before, rule.as_ref()) {
        Some(v) => {
            out!("{}\t{}\t{}", v.version, v.full, v.source);
            Ok(ExitCode::SUCCESS)
        }
        None => bail!(
            "no version found at {} (no packaging file, __version__ or version tag)",
            args.commit
        ),
    }
}
