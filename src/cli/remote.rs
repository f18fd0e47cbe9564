//! `swe-ark remote put|get`: a file copied to or from S3-compatible storage, checked by its
//! sha256 as shard files are (docs/DISTRIBUTED.md): to stage a plan or a release file for
//! workers that read the bucket, or to fetch one.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::remote::Remote;

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
    }
    Ok(ExitCode::SUCCESS)
}
