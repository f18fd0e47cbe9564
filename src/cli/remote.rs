//! `swe-ark remote put|get`: a file copied to or from S3-compatible storage, checked by its
//! sha256 as shard files are (docs/DISTRIBUTED.md): to stage a plan or a release file for
//! workers that read the bucket, or to fetch one. `swe-ark remote push`: the archive's objects
//! and packs uploaded to its bucket (`--store`, `store_url`).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::remote::Remote;
use crate::store::Ark;

use super::Context;
use super::output::human_bytes;

#[derive(Debug, clap::Args)]
pub struct RemoteArgs {
    #[command(subcommand)]
    pub command: RemoteCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum RemoteCommand {
    /// Upload FILE as s3://BUCKET/PREFIX/NAME (NAME: the file's own name when the URL ends
    /// with `/`), then NAME.sha256 beside it.
    Put { file: PathBuf, url: String },
    /// Download s3://BUCKET/PREFIX/NAME to FILE, refused unless it hashes to NAME.sha256.
    Get { url: String, file: PathBuf },
    /// Upload the archive's objects and packs its bucket (--store, or `store_url` in
    /// <ark>/config.toml) lacks; commands that write to the archive do it when they end.
    Push {
        /// Then remove the local copies the bucket holds: the archive keeps its index, and
        /// reads fetch what they need again.
        #[arg(long)]
        drop_local: bool,
    },
}

/// `s3://B/P/NAME` → (`s3://B/P/`, NAME); a URL ending with `/` names no file.
fn split(url: &str) -> (String, String) {
    match url.rsplit_once('/') {
        Some((base, name)) => (format!("{base}/"), name.to_string()),
        None => (url.to_string(), String::new()),
    }
}

pub fn run(ctx: &Context, args: RemoteArgs) -> anyhow::Result<ExitCode> {
    let start = std::time::Instant::now();
    match args.command {
        RemoteCommand::Put { file, url } => {
            let (base, mut name) = split(&url);
            if name.is_empty() {
                name = file
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .ok_or_else(|| anyhow::anyhow!("`{}` names no file", file.display()))?;
            }
            let remote = Remote::open(&base)?;
            let (sha, size) = remote.upload(&file, &name)?;
            ctx.note(format!(
                "uploaded {} ({}) in {:.1} s, sha256 {sha}",
                remote.url(&name),
                human_bytes(size),
                start.elapsed().as_secs_f64()
            ));
            out!("{}", remote.url(&name));
        }
        RemoteCommand::Get { url, file } => {
            let (base, name) = split(&url);
            if name.is_empty() {
                anyhow::bail!("`{url}` names no file (s3://BUCKET/PREFIX/NAME)");
            }
            let remote = Remote::open(&base)?;
            // Into a temporary file beside FILE, renamed once it is checked.
            let dir = crate::fsutil::parent_dir(&file);
            let tmp = crate::fsutil::temp_file_in(dir)
                .map_err(|e| anyhow::anyhow!("cannot write in `{}`: {e}", dir.display()))?;
            let sha = remote.download(&name, tmp.path())?;
            crate::fsutil::persist(tmp, &file)
                .map_err(|e| anyhow::anyhow!("cannot write `{}`: {e}", file.display()))?;
            ctx.note(format!(
                "downloaded {} in {:.1} s, sha256 {sha}",
                remote.url(&name),
                start.elapsed().as_secs_f64()
            ));
            out!("{}", file.display());
        }
        RemoteCommand::Push { drop_local } => {
            let ark = Ark::open(&ctx.ark)?;
            let Some(bucket) = ark.bucket() else {
                anyhow::bail!(
                    "the archive `{}` has no bucket: give --store s3://BUCKET/PREFIX, or set \
                     store_url in `{}`",
                    ctx.ark.display(),
                    ark.layout().config().display()
                );
            };
            let url = bucket.url().to_string();
            let progress = ctx.progress();
            let report = ark.push_store(drop_local, progress.as_ref())?;
            ctx.note(format!(
                "{url}: {} uploaded ({}), {} already there{} in {:.1} s",
                report.sent,
                human_bytes(report.sent_bytes),
                report.held,
                if drop_local {
                    format!(
                        "; {} local copies removed ({})",
                        report.dropped,
                        human_bytes(report.dropped_bytes)
                    )
                } else {
                    String::new()
                },
                start.elapsed().as_secs_f64()
            ));
            out!("{}", serde_json::to_string(&report)?);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// After a command that wrote to the archive: what it wrote, uploaded to the archive's bucket
/// (if it has one).
pub fn push_after(ctx: &Context) -> anyhow::Result<()> {
    if !crate::store::Layout::new(&ctx.ark).index().is_file() {
        return Ok(());
    }
    let ark = Ark::open(&ctx.ark)?;
    let Some(bucket) = ark.bucket() else {
        return Ok(());
    };
    let url = bucket.url().to_string();
    let report = ark
        .push_store(false, &crate::progress::NoProgress)
        .map_err(|e| {
            anyhow::Error::new(e).context(format!(
                "the command's work is in the archive, but uploading it to {url} failed; run \
                 `swe-ark remote push` when the bucket is reachable"
            ))
        })?;
    if report.sent > 0 {
        ctx.note(format!(
            "uploaded {} object(s) and pack(s) ({}) to {}",
            report.sent,
            human_bytes(report.sent_bytes),
            bucket.url()
        ));
    }
    Ok(())
}
