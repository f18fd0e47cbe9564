//! The files of `text`: which bundle each instance's text comes from, and `--count-tokens` on
//! a file (the dataset file's bytes are [`crate::dataset::records_bytes`]).

use std::path::{Path, PathBuf};

use crate::dataset::{Selection, SelectionError};
use crate::store::{Ark, BundleRow, IndexError};

#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Selection(#[from] SelectionError),
    #[error("cannot read `{}`: {source}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{}` is not UTF-8 text: {source}", .path.display())]
    NotUtf8 {
        path: PathBuf,
        #[source]
        source: std::string::FromUtf8Error,
    },
}

/// The instances (of `ids`; none: all, in the order they entered the archive) with the
/// newest of their bundles, and the ids of those with none.
#[allow(clippy::type_complexity)]
pub fn newest_bundles(
    ark: &Ark,
    ids: &[String],
) -> Result<(Vec<(String, BundleRow)>, Vec<String>), FilesError> {
    let instances =
        Selection::ids(ids.to_vec()).pick(ark.index().all_instances()?, "not in the archive")?;
    let mut bundles = Vec::new();
    let mut unpacked = Vec::new();
    for inst in instances {
        let rows = ark.index().bundles_of_instance(&inst.instance_id)?;
        match rows.into_iter().max_by_key(|b| b.packed_at) {
            Some(row) => bundles.push((inst.instance_id, row)),
            None => unpacked.push(inst.instance_id),
        }
    }
    Ok((bundles, unpacked))
}

/// The cl100k_base tokens of a UTF-8 file, with its bytes and the seconds encoding took.
#[derive(Debug, Clone, Copy)]
pub struct TokenCount {
    pub bytes: usize,
    pub tokens: usize,
    pub seconds: f64,
}

/// Counts the tokens of the file at `path`; only encoding is timed.
pub fn count_file(path: &Path) -> Result<TokenCount, FilesError> {
    let bytes = std::fs::read(path).map_err(|source| FilesError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8(bytes).map_err(|source| FilesError::NotUtf8 {
        path: path.to_path_buf(),
        source,
    })?;
    // Load the encoding before the clock starts: only encoding is timed.
    super::tokenizer::count("");
    let started = std::time::Instant::now();
    let tokens = super::tokenizer::count(&text);
    Ok(TokenCount {
        bytes: text.len(),
        tokens,
        seconds: started.elapsed().as_secs_f64(),
    })
}
