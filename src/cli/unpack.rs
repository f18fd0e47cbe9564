use std::path::PathBuf;
use std::process::ExitCode;

use crate::bundle::{self, BundleFile, Limits};
use crate::digest::Sha256Digest;
use crate::store::{Ark, BundleRow};

use super::Context;
use super::output::{human_bytes, parse_size};

#[derive(Debug, clap::Args)]
pub struct UnpackArgs {
    /// A bundle file, or a bundle id / unique prefix / instance id in the archive.
    pub bundle: String,
    /// The directory to unpack into (created; must be empty if it exists).
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// The id the bundle must have (default: the id in its file name or in the index).
    #[arg(long, value_name = "SHA256")]
    pub expect: Option<Sha256Digest>,
    /// Refuse any member larger than this.
    #[arg(long, value_parser = parse_size, default_value = "4GiB")]
    pub max_member_size: u64,
    /// Refuse a bundle that expands to more than this in all.
    #[arg(long, value_parser = parse_size, default_value = "32GiB")]
    pub max_total_size: u64,
}

/// A bundle argument: an existing file, or a bundle the archive resolves.
pub(super) enum Located {
    /// A bundle file and the id its name claims.
    File(PathBuf, Option<Sha256Digest>),
    Archive(Box<Ark>, BundleRow),
}

impl Located {
    /// The id the bundle must have, as far as its name or the index say.
    pub(super) fn named_id(&self) -> Option<Sha256Digest> {
        match self {
            Located::File(_, id) => *id,
            Located::Archive(_, row) => Some(row.id),
        }
    }
}

pub(super) fn locate(ctx: &Context, arg: &str) -> anyhow::Result<Located> {
    let as_path = PathBuf::from(arg);
    if as_path.is_file() {
        let expected = bundle::id_from_file_name(&as_path);
        return Ok(Located::File(as_path, expected));
    }
    let ark = Ark::open(&ctx.ark)?;
    let row = ark.resolve(arg)?;
    Ok(Located::Archive(Box::new(ark), row))
}

pub fn run(ctx: &Context, args: UnpackArgs) -> anyhow::Result<ExitCode> {
    let located = locate(ctx, &args.bundle)?;
    let expected = args.expect.or(located.named_id());
    let limits = Limits {
        max_member_size: args.max_member_size,
        max_total_size: args.max_total_size,
        ..Limits::default()
    };
    let progress = ctx.progress();
    let report = match &located {
        Located::File(path, _) => bundle::unpack_from(
            &BundleFile::new(path),
            &args.output,
            expected,
            &limits,
            progress.as_ref(),
        )?,
        Located::Archive(ark, row) => bundle::unpack_from(
            &ark.bundle(row)?,
            &args.output,
            expected,
            &limits,
            progress.as_ref(),
        )?,
    };
    ctx.note(format!(
        "unpacked {} ({}): {} members, {} into {}",
        report.manifest.instance_id,
        report.id.short(),
        report.manifest.members.len() + 1,
        human_bytes(report.manifest.members.iter().map(|m| m.size).sum()),
        args.output.display()
    ));
    if expected.is_none() {
        ctx.note("note: the bundle's file name carries no id, so only its own bundle.json vouched for it");
    }
    out!("{}", report.id);
    Ok(ExitCode::SUCCESS)
}
