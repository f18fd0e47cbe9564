//! `verify`: bundles checked against their ids and the index, and the whole archive (index,
//! packs, bundles, objects) with them. Each result is a [`Checked`]; notes on stray files go
//! through [`Progress::line`].

use std::path::Path;

use crate::bundle::{self, BundleFile, BundleSource, Limits};
use crate::digest::Sha256Digest;
use crate::progress::Progress;

use super::{Ark, ArkError, BundleRow, IndexError};

/// One thing checked: an index, a pack, a bundle or an object; for a release, also its
/// snapshot file and its root.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Checked {
    pub what: String,
    pub name: String,
    pub ok: bool,
    /// One sentence per problem; none: it is as it should be.
    pub problems: Vec<String>,
}

impl Checked {
    pub(crate) fn new(what: &str, name: String, problems: Vec<String>) -> Checked {
        Checked {
            what: what.into(),
            name,
            ok: problems.is_empty(),
            problems,
        }
    }
}

/// The problems of bundle `source`: against the id it must have, and against its index row.
fn check_source(
    source: &dyn BundleSource,
    expected: Option<Sha256Digest>,
    row: Option<&BundleRow>,
    progress: &dyn Progress,
) -> Vec<String> {
    let mut problems = Vec::new();
    match bundle::verify(source, expected, &Limits::default(), progress) {
        Ok(report) => {
            problems.extend(report.problems.iter().map(|p| p.to_string()));
            if let Some(row) = row {
                if report.manifest.instance_id != row.instance_id {
                    problems.push(format!(
                        "bundle.json names instance `{}`, the index `{}`",
                        report.manifest.instance_id, row.instance_id
                    ));
                }
                if report.manifest.codebase_tree != row.codebase_tree {
                    problems.push(format!(
                        "bundle.json has codebase tree {}, the index {}",
                        report.manifest.codebase_tree, row.codebase_tree
                    ));
                }
                if report.tar_size != row.tar_size {
                    problems.push(format!(
                        "the tar is {} bytes, the index says {}",
                        report.tar_size, row.tar_size
                    ));
                }
            }
        }
        Err(e) => problems.push(e.to_string()),
    }
    problems
}

/// Checks the bundle file at `path` against the id `expected` its name claims, and against the
/// index row of that id when the archive at `ark` has one.
pub fn check_bundle_file(
    ark: &Path,
    path: &Path,
    expected: Option<Sha256Digest>,
    progress: &dyn Progress,
) -> Result<Checked, IndexError> {
    let row = match (Ark::open(ark).ok(), expected) {
        (Some(ark), Some(e)) => ark
            .index()
            .bundles_with_prefix(&e.hex())?
            .into_iter()
            .next(),
        _ => None,
    };
    let problems = check_source(&BundleFile::new(path), expected, row.as_ref(), progress);
    let name = expected.map_or_else(|| path.display().to_string(), |id| id.hex());
    Ok(Checked::new("bundle", name, problems))
}

impl Ark {
    /// Checks a bundle of the archive, rebuilt from its pieces or read from its whole file.
    pub fn check_bundle(&self, row: &BundleRow, progress: &dyn Progress) -> Checked {
        let mut problems = Vec::new();
        let whole = (row.manifest_piece.is_none()).then(|| {
            self.bundles_dir()
                .join(format!("{}{}", row.id.hex(), bundle::FILE_SUFFIX))
        });
        match &whole {
            Some(path) if !path.exists() => {
                problems.push(format!("the bundle file `{}` is missing", path.display()));
            }
            _ => match self.bundle(row) {
                Ok(b) => problems = check_source(&b, Some(row.id), Some(row), progress),
                Err(e) => problems.push(e.to_string()),
            },
        }
        Checked::new("bundle", row.id.hex(), problems)
    }

    /// Checks the whole archive: the index's integrity, every piece re-hashed, every bundle
    /// rebuilt from them, every object; files the index does not know are noted.
    pub fn check_all(&self, progress: &dyn Progress) -> Result<Vec<Checked>, ArkError> {
        let mut results = Vec::new();
        let integrity = self.index().integrity_check()?;
        if integrity != ["ok"] {
            let name = self.layout().index().display().to_string();
            results.push(Checked::new("index", name, integrity));
        }
        // Every piece first, re-hashed; then every bundle rebuilt from them.
        for (name, pieces, problems) in self.check_store(progress)? {
            results.push(Checked::new(
                "pack",
                format!("{name} ({pieces} pieces)"),
                problems,
            ));
        }
        for row in self.index().bundles()? {
            results.push(self.check_bundle(&row, progress));
        }
        let store = self.objects();
        for obj in self.index().objects()? {
            let problems = match store.check(&obj.id) {
                Ok(size) if size == obj.size => Vec::new(),
                Ok(size) => vec![format!("{size} bytes, the index says {}", obj.size)],
                Err(e) => vec![e.to_string()],
            };
            results.push(Checked::new("object", obj.id.hex(), problems));
        }
        let (unindexed, temps) = self.strays()?;
        for p in unindexed {
            let hint = if p.extension().is_some_and(|e| e == "pack") {
                "a pack the index does not name (a pack or gc interrupted after writing it?); \
                 `swe-ark gc` removes it"
            } else {
                "a bundle file the index does not list (a pack interrupted after writing it?); \
                 pack the instance again to index it"
            };
            progress.line(&format!("note: `{}` is {hint}", p.display()));
        }
        for p in temps {
            progress.line(&format!(
                "note: `{}` is a temporary file left by an interrupted write; it is safe to delete",
                p.display()
            ));
        }
        Ok(results)
    }
}
