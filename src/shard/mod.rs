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

use std::path::PathBuf;

use crate::digest::Sha256Digest;

pub use merge::{MergeOptions, MergeReport, MergedShard, NotRun, RefusedFile, merge};
pub use replay::{ReplayShard, Replayed};
pub use run::{LockSettings, RunOptions, RunReport, file_name, run};

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
