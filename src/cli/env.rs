use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::Context as _;

use crate::digest::Sha256Digest;
use crate::env::EnvError;
use crate::env::build::{self, BuildOptions, Installer};
use crate::env::lock::{self, DEFAULT_INDEX, LockOptions};
use crate::env::pylock::PyLock;
use crate::manifest::Manifests;
use crate::store::Ark;

use super::Context;
use super::output::{human_bytes, human_time};

#[derive(Debug, clap::Args)]
pub struct EnvArgs {
    #[command(subcommand)]
    pub command: EnvCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum EnvCommand {
    /// Install a context for real (online, as of its environment setup commit), write its
    /// PEP 751 lock and keep every artifact as an object; prints the lock id last.
    Lock(LockArgs),
    /// Build a lock's environment from the objects alone, into `envs/<lock id>/`; prints the
    /// environment's directory last.
    Build(BuildArgs),
    /// The locks: repository, version, Python, packages, artifacts, bytes, built or not.
    Ls(LsArgs),
    /// Print a lock's pylock.toml.
    Show(ShowArgs),
}

#[derive(Debug, clap::Args)]
pub struct LockArgs {
    /// OWNER/NAME, as in manifests/.
    pub repo: String,
    /// The release version, as SWE-bench writes it (e.g. 3.0).
    pub version: String,
    /// The environment setup commit (default: the one the archive's instances of this
    /// version name).
    #[arg(long)]
    pub commit: Option<String>,
    /// The interpreter to use (it must be the context's major.minor).
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// The simple index to resolve from.
    #[arg(long, env = "SWE_ARK_INDEX_URL", default_value = DEFAULT_INDEX, value_name = "URL")]
    pub index_url: String,
    /// Resolve as of this instant (RFC 3339, or YYYY-MM-DD) instead of the commit's date.
    #[arg(long, value_name = "WHEN")]
    pub exclude_newer: Option<String>,
    /// Keep the interpreter's prefix as an object too, for machines without this Python.
    #[arg(long)]
    pub pack_python: bool,
    /// Offer and lock releases the index marks as yanked, instead of refusing them (the index
    /// says what is yanked today, not what was yanked as of the commit).
    #[arg(long)]
    pub allow_yanked: bool,
    /// The installer of the offline proof build.
    #[arg(long, value_enum, default_value_t = Installer::Auto)]
    pub installer: Installer,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// A lock id, or a unique prefix of one.
    pub lock: String,
    /// Accepted for clarity: building never uses the network.
    #[arg(long)]
    pub offline: bool,
    #[arg(long, value_enum, default_value_t = Installer::Auto)]
    pub installer: Installer,
    /// Use this interpreter instead of the exact version the lock names.
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// Use the interpreter packed in the lock even if this machine has the version.
    #[arg(long)]
    pub packed_python: bool,
    /// Rebuild even if the cache has it.
    #[arg(long)]
    pub force: bool,
    /// Also make a per-instance copy of the environment at DIR (a new directory).
    #[arg(long, value_name = "DIR")]
    pub copy_to: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct LsArgs {
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    pub lock: String,
}

pub fn run(ctx: &Context, args: EnvArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        EnvCommand::Lock(a) => lock_cmd(ctx, a),
        EnvCommand::Build(a) => build_cmd(ctx, a),
        EnvCommand::Ls(a) => ls(ctx, a),
        EnvCommand::Show(a) => show(ctx, a),
    }
}

fn parse_when(s: &str) -> anyhow::Result<SystemTime> {
    let full = if s.len() == 10 {
        format!("{s}T00:00:00Z")
    } else {
        s.to_string()
    };
    humantime::parse_rfc3339_weak(full.trim_end_matches('Z')).with_context(|| {
        format!("--exclude-newer `{s}` is not a date (YYYY-MM-DD) or an RFC 3339 time")
    })
}

fn lock_cmd(ctx: &Context, a: LockArgs) -> anyhow::Result<ExitCode> {
    let manifests = Manifests::load_default()?;
    let context = manifests.context(&a.repo, &a.version)?;
    let exclude_newer = a.exclude_newer.as_deref().map(parse_when).transpose()?;
    let mut ark = Ark::create(&ctx.ark)?;
    if !context.notes.is_empty() {
        ctx.note(format!(
            "note: this context differs from SWE-bench's: {}",
            context.notes
        ));
    }
    let opts = LockOptions {
        commit: a.commit,
        python: a.python,
        index_url: a.index_url,
        exclude_newer,
        pack_python: a.pack_python,
        allow_yanked: a.allow_yanked,
        installer: a.installer,
    };
    let report = lock::lock(&mut ark, &context, &opts, &|m| ctx.note(m)).map_err(|e| {
        // A conda-only context that fails to install: say why it may.
        if !context.notes.is_empty()
            && matches!(e, EnvError::Command { .. } | EnvError::Fetch { .. })
        {
            anyhow::Error::new(e).context(format!(
                "locking {} {} failed; its manifest notes: {}",
                context.repo, context.version, context.notes
            ))
        } else {
            e.into()
        }
    })?;
    for n in &report.notes {
        ctx.note(format!("note: {n}"));
    }
    if a.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        ctx.note(format!(
            "locked {} {} at {} with Python {}: {} packages ({} installed, {}{} in the wheelhouse only), \
             {} artifacts, {}; {} wheels built from sdists; proven offline in {:.1} s",
            report.repo,
            report.version,
            &report.commit[..12],
            report.python,
            report.packages,
            report.runtime,
            if report.services > 0 {
                format!("{} in services' own environments, ", report.services)
            } else {
                String::new()
            },
            report.build,
            report.artifacts,
            human_bytes(report.bytes),
            report.built_wheels.len(),
            report.env.seconds
        ));
        out!("{}", report.id);
    }
    Ok(ExitCode::SUCCESS)
}

/// The lock `query` names (a full id or a unique prefix), with its parsed file.
fn find_lock(ark: &Ark, query: &str) -> anyhow::Result<(Sha256Digest, PyLock)> {
    let locks = ark.index().locks()?;
    let matches: Vec<_> = locks
        .iter()
        .filter(|l| !query.is_empty() && l.id.hex().starts_with(&query.to_ascii_lowercase()))
        .collect();
    let row = match matches.as_slice() {
        [one] => *one,
        [] => {
            return Err(EnvError::UnknownLock {
                query: query.to_string(),
                known: locks
                    .iter()
                    .map(|l| format!("{} ({} {})", l.id.short(), l.repo, l.version))
                    .collect(),
            }
            .into());
        }
        many => {
            return Err(EnvError::AmbiguousLock {
                query: query.to_string(),
                ids: many.iter().map(|l| l.id.hex()).collect(),
            }
            .into());
        }
    };
    let bytes = ark.objects().get(&row.id)?;
    let lock = PyLock::parse(&bytes).map_err(|detail| EnvError::BadLock {
        id: row.id.hex(),
        detail: detail.to_string(),
    })?;
    Ok((row.id, lock))
}

fn build_cmd(ctx: &Context, a: BuildArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let (id, lock) = find_lock(&ark, &a.lock)?;
    let opts = BuildOptions {
        installer: a.installer,
        python: a.python,
        packed_python: a.packed_python,
        force: a.force,
    };
    let built = build::build(&ark.objects(), ark.root(), &id, &lock, &opts)?;
    let copy = match &a.copy_to {
        Some(dest) => {
            let t = std::time::Instant::now();
            let v = build::instance_copy(&built, dest)?;
            ctx.note(format!(
                "copied to {} in {:.2} s",
                v.dir.display(),
                t.elapsed().as_secs_f64()
            ));
            Some(v.dir)
        }
        None => None,
    };
    if a.json {
        let mut v = serde_json::to_value(&built)?;
        v["copy"] = serde_json::json!(copy);
        out!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        ctx.note(format!(
            "{} {} (Python {}): {} distributions, {} in {:.2} s, with {}",
            lock.tool.swe_ark.repo,
            lock.tool.swe_ark.version,
            built.python,
            built.installed,
            if built.cached {
                "from the cache"
            } else {
                "built"
            },
            built.seconds,
            built.installer
        ));
        out!("{}", copy.unwrap_or(built.venv).display());
    }
    Ok(ExitCode::SUCCESS)
}

fn ls(ctx: &Context, a: LsArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let locks = ark.index().locks()?;
    let built = |id: &Sha256Digest| {
        ark.root()
            .join("envs")
            .join(id.hex())
            .join("env.json")
            .is_file()
    };
    if a.json {
        let rows: Vec<serde_json::Value> = locks
            .iter()
            .map(|l| {
                let mut v = serde_json::to_value(l).unwrap_or_default();
                v["id"] = serde_json::json!(l.id.hex());
                v["built"] = serde_json::json!(built(&l.id));
                v
            })
            .collect();
        out!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    if locks.is_empty() {
        ctx.note("no locks (make one with `swe-ark env lock OWNER/NAME VERSION`)");
        return Ok(ExitCode::SUCCESS);
    }
    out!(
        "{:<12}  {:<32}  {:<8}  {:<8}  {:>8}  {:>9}  {:>10}  {:<5}  created",
        "lock",
        "repo",
        "version",
        "python",
        "packages",
        "artifacts",
        "bytes",
        "built"
    );
    for l in &locks {
        out!(
            "{:<12}  {:<32}  {:<8}  {:<8}  {:>8}  {:>9}  {:>10}  {:<5}  {}",
            l.id.short(),
            l.repo,
            l.version,
            l.python,
            l.packages,
            l.artifacts,
            human_bytes(l.bytes),
            if built(&l.id) { "yes" } else { "no" },
            human_time(l.created_at)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn show(ctx: &Context, a: ShowArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let (id, _) = find_lock(&ark, &a.lock)?;
    let bytes = ark.objects().get(&id)?;
    use std::io::Write as _;
    std::io::stdout().lock().write_all(&bytes)?;
    Ok(ExitCode::SUCCESS)
}
