use std::path::PathBuf;
use std::process::ExitCode;

use crate::bundle::{self, Limits};
use crate::digest::Sha256Digest;
use crate::store::Ark;

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

/// A bundle argument: an existing file, or something the archive resolves.
pub(super) fn locate(ctx: &Context, arg: &str) -> anyhow::Result<(PathBuf, Option<Sha256Digest>)> {
    let as_path = PathBuf::from(arg);
    if as_path.is_file() {
        let expected = bundle::id_from_file_name(&as_path);
        return Ok((as_path, expected));
    }
    let ark = Ark::open(&ctx.ark)?;
    let row = ark.resolve(arg)?;
    Ok((ark.bundle_path(&row.id), Some(row.id)))
}

pub fn run(ctx: &Context, args: UnpackArgs) -> anyhow::Result<ExitCode> {
    let (path, named) = locate(ctx, &args.bundle)?;
    let expected = args.expect.or(named);
    let limits = Limits {
        max_member_size: args.max_member_size,
        max_total_size: args.max_total_size,
        ..Limits::default()
    };
    let progress = ctx.progress();
    let report = bundle::unpack(&path, &args.output, expected, &limits, progress.as_ref())?;
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
