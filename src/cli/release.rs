use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};

use crate::release::{self, Selection, Snapshot};
use crate::store::Ark;

use super::Context;

#[derive(Debug, clap::Args)]
pub struct ReleaseArgs {
    #[command(subcommand)]
    pub command: ReleaseCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum ReleaseCommand {
    /// Snapshot a release: each instance's bundle and the objects its lock needs, and one
    /// root hash over them; prints the root on stdout's last line.
    Create(CreateArgs),
    /// Check the archive against a release snapshot; exit 1 naming each missing or
    /// different bundle or object.
    Verify(VerifyArgs),
    /// Forget a release registered in the archive, and remove from the index the bundles
    /// that only it kept (not the newest bundle of their instance, named by no other
    /// release); `swe-ark gc` then frees their pieces.
    Rm(RmArgs),
    /// The releases registered in the archive (`ark/releases/`): gc and `rm` keep their bundles.
    Ls(LsArgs),
    /// Why two releases differ: instances, bundles, members (files, lock packages, test
    /// statuses, lines) and objects; exit 0 when they are the same release, 1 when not.
    Diff(DiffArgs),
}

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The first snapshot (A).
    pub a: PathBuf,
    /// The second snapshot (B).
    pub b: PathBuf,
    /// Another archive to read bundles from (B's, when it was built elsewhere); repeatable.
    /// The archive of `--ark` is read first, when it exists.
    #[arg(long, value_name = "DIR")]
    pub other_ark: Vec<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct RmArgs {
    /// The release's name.
    pub name: String,
    /// Only forget the release; remove no bundle.
    #[arg(long)]
    pub keep_bundles: bool,
}

#[derive(Debug, clap::Args)]
pub struct LsArgs {
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// The release's name (letters, digits, `-`, `_`, `.`).
    pub name: String,
    /// Only these instances (default: every instance with a bundle).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "ID",
        conflicts_with = "all_validated"
    )]
    pub instance_ids: Vec<String>,
    /// Every instance that validation kept.
    #[arg(long)]
    pub all_validated: bool,
    /// Where to write the snapshot (default: snapshots/NAME.json).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace a snapshot file, or a release registered in the archive under this name, that
    /// holds another release.
    #[arg(long)]
    pub force: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// The snapshot file (`release create` wrote it).
    pub snapshot: PathBuf,
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Context, args: ReleaseArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ReleaseCommand::Create(a) => create(ctx, a),
        ReleaseCommand::Verify(a) => verify(ctx, a),
        ReleaseCommand::Rm(a) => rm(ctx, a),
        ReleaseCommand::Ls(a) => ls(ctx, a),
        ReleaseCommand::Diff(a) => diff(ctx, a),
    }
}

fn create(ctx: &Context, args: CreateArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let selection = if args.all_validated {
        Selection::AllValidated
    } else if !args.instance_ids.is_empty() {
        Selection::Ids(args.instance_ids.clone())
    } else {
        Selection::Bundled
    };
    let snap = release::create(&ark, &args.name, &selection)?;
    // Registered in the archive: from now on gc and `rm` keep every bundle it names.
    let registered = ark.releases_dir().join(format!("{}.json", snap.name));
    let same_registered = match Snapshot::read(&registered) {
        Ok(old) if old.root == snap.root => true,
        Ok(old) if !args.force => bail!(
            "the archive holds release {} with root {}, not this one ({}); give --force to \
             replace it, or choose another name",
            old.name,
            old.root,
            snap.root
        ),
        _ => false,
    };
    if !same_registered {
        ark.register_release(&snap.name, &snap.to_bytes())?;
    }
    let path = args
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from("snapshots").join(format!("{}.json", args.name)));
    let mut kept = false;
    if path.exists() {
        let old = Snapshot::read(&path);
        match old {
            Ok(old) if old.root == snap.root && old.name == snap.name => kept = true,
            Ok(old) if !args.force => bail!(
                "`{}` holds release {} with root {}, not this one ({}); give --force to replace it",
                path.display(),
                old.name,
                old.root,
                snap.root
            ),
            Err(e) if !args.force => {
                bail!(
                    "`{}` exists and is not a release snapshot ({e}); give --force to replace it",
                    path.display()
                )
            }
            _ => {}
        }
    }
    if !kept {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create `{}`", dir.display()))?;
        }
        crate::fsutil::write_atomic(&path, &snap.to_bytes())
            .with_context(|| format!("cannot write `{}`", path.display()))?;
    }
    let objects = snap.objects().len();
    if args.json {
        let v = serde_json::json!({
            "name": snap.name,
            "root": snap.root,
            "path": path,
            "instances": snap.instances.len(),
            "objects": objects,
            "unchanged": kept,
        });
        out!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        ctx.note(format!(
            "release {}: {} instance(s), {} object(s){} `{}`",
            snap.name,
            snap.instances.len(),
            objects,
            if kept {
                ", the same as in"
            } else {
                ", written to"
            },
            path.display()
        ));
        out!("{}", snap.root);
    }
    Ok(ExitCode::SUCCESS)
}

fn verify(ctx: &Context, args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let snap = Snapshot::read(&args.snapshot)?;
    let ark = Ark::open(&ctx.ark)?;
    let progress = ctx.progress();
    let checks = release::verify(&ark, &snap, progress.as_ref())?;
    let bad = checks.iter().filter(|c| !c.ok).count();
    if args.json {
        out!("{}", serde_json::to_string_pretty(&checks)?);
    } else {
        for c in &checks {
            out!("{} {} {}", if c.ok { "ok " } else { "BAD" }, c.what, c.name);
            for p in &c.problems {
                out!("    {p}");
            }
        }
        ctx.note(format!(
            "release {} (root {}): {} checked, {bad} bad",
            snap.name,
            snap.root,
            checks.len()
        ));
    }
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn rm(ctx: &Context, args: RmArgs) -> anyhow::Result<ExitCode> {
    let mut ark = Ark::open(&ctx.ark)?;
    let removed = ark.remove_release(&args.name, !args.keep_bundles)?;
    for id in &removed {
        out!("{id}");
    }
    ctx.note(format!(
        "forgot release {}; removed {} bundle(s) only it kept from the index; `swe-ark gc` \
         frees what nothing else uses",
        args.name,
        removed.len()
    ));
    Ok(ExitCode::SUCCESS)
}

fn ls(ctx: &Context, args: LsArgs) -> anyhow::Result<ExitCode> {
    let ark = Ark::open(&ctx.ark)?;
    let mut rows = Vec::new();
    for name in ark.releases()? {
        let path = ark.releases_dir().join(format!("{name}.json"));
        let snap = Snapshot::read(&path)?;
        rows.push(serde_json::json!({
            "name": snap.name,
            "root": snap.root,
            "instances": snap.instances.len(),
            "objects": snap.objects().len(),
            "path": path,
        }));
        if !args.json {
            out!(
                "{}  {}  {} instance(s), {} object(s)",
                snap.name,
                snap.root,
                snap.instances.len(),
                snap.objects().len()
            );
        }
    }
    if args.json {
        out!("{}", serde_json::to_string_pretty(&rows)?);
    } else if rows.is_empty() {
        ctx.note("no release is registered in this archive");
    }
    Ok(ExitCode::SUCCESS)
}

fn diff(ctx: &Context, args: DiffArgs) -> anyhow::Result<ExitCode> {
    let a = Snapshot::read(&args.a)?;
    let b = Snapshot::read(&args.b)?;
    let mut arks = Vec::new();
    if crate::store::Layout::new(&ctx.ark).index().is_file() {
        arks.push(Ark::open(&ctx.ark)?);
    }
    for dir in &args.other_ark {
        arks.push(Ark::open(dir).with_context(|| format!("cannot open `{}`", dir.display()))?);
    }
    let refs: Vec<&Ark> = arks.iter().collect();
    let d = release::diff(&a, &b, &refs);
    if args.json {
        out!("{}", serde_json::to_string_pretty(&d)?);
    } else {
        for id in &d.only_in_a {
            out!("only in A  {id}");
        }
        for id in &d.only_in_b {
            out!("only in B  {id}");
        }
        for c in &d.changed {
            if c.bundle_a == c.bundle_b {
                out!(
                    "differs    {}: the same bundle {}",
                    c.instance_id,
                    c.bundle_a.short()
                );
            } else {
                out!(
                    "differs    {}: bundle {} → {}",
                    c.instance_id,
                    c.bundle_a.short(),
                    c.bundle_b.short()
                );
            }
            for m in &c.members {
                let how = match m.change {
                    release::Change::Added => "only in B",
                    release::Change::Removed => "only in A",
                    release::Change::Changed => "differs",
                };
                out!("    {} {how}", m.member);
                for detail in &m.details {
                    out!("        {detail}");
                }
            }
            if let Some(why) = &c.unread {
                out!("    members not compared: {why}");
            }
            for (label, objects) in [
                ("object only in A", &c.objects_only_in_a),
                ("object only in B", &c.objects_only_in_b),
            ] {
                for o in objects {
                    out!(
                        "    {label}: {} {}",
                        o.sha256.short(),
                        o.name.as_deref().unwrap_or("(named by neither lock)")
                    );
                }
            }
        }
        ctx.note(format!(
            "release {} (root {}) and {} (root {}): {}; {} instance(s) the same, {} differ, {} \
             only in A, {} only in B",
            d.a.name,
            d.a.root.short(),
            d.b.name,
            d.b.root.short(),
            if d.is_empty() {
                "the same release"
            } else {
                "they differ"
            },
            d.same,
            d.changed.len(),
            d.only_in_a.len(),
            d.only_in_b.len()
        ));
    }
    Ok(if d.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
