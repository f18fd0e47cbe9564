//! One shard of a plan run on a machine of its own, and shards merged back (docs/DISTRIBUTED.md).
//!
//! `run` does a shard's steps in a local archive (instances and mirrors from a seed archive,
//! each context locked once, every instance validated, the kept ones packed) and writes one
//! **shard file**: the archive file format, stamped with the plan and what became of each
//! instance (`archive::ShardStamp`). `merge` checks shard files against the plan and each
//! other and imports each, all or nothing.

mod merge;
mod replay;
mod run;
mod setup;

use std::path::{Path, PathBuf};

use crate::digest::Sha256Digest;
use crate::manifest::Manifests;
use crate::plan::{Plan, PlanError};
use crate::progress::Progress;
use crate::remote::RemoteError;

pub use merge::{MergeOptions, MergeReport, MergedShard, NotRun, RefusedFile, merge};
pub use replay::{ReplayShard, Replayed};
pub use run::{LockSettings, RunOptions, RunReport, file_name, run};

/// A plan file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PlanFileError {
    #[error("cannot read `{path}`")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The scratch file a plan in a bucket is downloaded to.
    #[error(transparent)]
    Scratch(std::io::Error),
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error(transparent)]
    Plan(#[from] PlanError),
}

/// The plan at `path`, a file or an s3:// URL (checked against its sha256).
pub fn read_plan(path: &str) -> Result<Plan, PlanFileError> {
    let bytes = if crate::remote::is_remote(path) {
        let (base, name) = path.rsplit_once('/').unwrap_or((path, ""));
        let remote = crate::remote::Remote::open(&format!("{base}/"))?;
        let tmp = tempfile::NamedTempFile::new().map_err(PlanFileError::Scratch)?;
        remote.download(name, tmp.path())?;
        std::fs::read(tmp.path()).map_err(PlanFileError::Scratch)?
    } else {
        std::fs::read(path).map_err(|source| PlanFileError::Read {
            path: path.to_string(),
            source,
        })?
    };
    Ok(Plan::parse(path, &bytes)?)
}

/// Which shard of which plan: every error of its steps names it, and so does its file.
#[derive(Debug, Clone, Copy)]
struct ShardOf {
    plan: Sha256Digest,
    index: usize,
    shards: usize,
}

impl ShardOf {
    /// The error of this shard's step `step` failing.
    fn step(
        self,
        step: &'static str,
    ) -> impl Fn(Box<dyn std::error::Error + Send + Sync>) -> ShardError {
        move |source| ShardError::Step {
            plan: self.plan,
            index: self.index,
            step,
            source,
        }
    }
}

/// What every step of a shard's run reads.
struct Job<'a> {
    root: &'a Path,
    manifests: &'a Manifests,
    opts: &'a RunOptions,
    shard: &'a crate::plan::Shard,
    which: ShardOf,
    say: &'a dyn Fn(&str),
    progress: &'a dyn Progress,
}

#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// Bad input: the plan, the index, the instances given.
    #[error("{0}")]
    Input(String),
    #[error("shard {index} of plan {plan}: {step}: {source}")]
    Step {
        plan: Sha256Digest,
        index: usize,
        step: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("{step}: {source}")]
    Merge {
        step: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("cannot write the shard file into `{dir}`: {source}")]
    Destination {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
