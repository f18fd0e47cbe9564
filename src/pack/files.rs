//! `swe-ark pack --instance FILE …`: one bundle from files given on the command line, the
//! codebase from a directory or from the archive's mirror, into the archive's store or a
//! directory.

use std::path::{Path, PathBuf};

use crate::bundle::{Codebase, PackInputs, PackOptions, PackedBundle, ValidationRecord};
use crate::dataset::Instance;
use crate::progress::Progress;
use crate::store::Ark;
use crate::validate::expected::BundleRecord;
use crate::vcs::VcsRecord;

use super::{PackError, VcsSource, read};

/// Where the codebase comes from.
#[derive(Debug, Clone)]
pub enum CodebaseSource {
    /// A directory (a `.git` inside is left out).
    Dir(PathBuf),
    /// The repository's mirror in the archive; `commit`, when given, must be the base commit.
    Mirror {
        repo: String,
        commit: Option<String>,
    },
}

/// The files of one bundle.
#[derive(Debug, Clone)]
pub struct FileInputs {
    /// One SWE-bench instance as JSON.
    pub instance: PathBuf,
    pub codebase: CodebaseSource,
    /// `vcs.json` of a codebase from a directory (from the mirror it is always computed).
    pub vcs: VcsSource,
    pub spec: Option<PathBuf>,
    pub lock: Option<PathBuf>,
    pub pre_log: Option<PathBuf>,
    pub post_log: Option<PathBuf>,
    /// A validation's results.json: kept as expected.json, logs normalized (version 3).
    pub validation: Option<PathBuf>,
    /// Results of one's own, kept as given (version 1 or 2).
    pub results: Option<PathBuf>,
}

/// A bundle packed from files.
#[derive(Debug)]
pub struct PackedOne {
    pub instance: Instance,
    pub packed: PackedBundle,
    pub vcs: Option<VcsRecord>,
}

/// The bundle member a lock goes in: its kind's, as the spec names the kind (Python when it
/// names none, or there is no spec).
fn lock_member(spec: Option<&[u8]>) -> &'static str {
    let kind = spec
        .and_then(|s| std::str::from_utf8(s).ok())
        .and_then(|t| t.parse::<toml::Table>().ok())
        .and_then(|t| t.get("kind").and_then(|k| k.as_str()).map(str::to_string))
        .unwrap_or_default();
    crate::context::kinds()
        .find(|k| k.name() == kind)
        .unwrap_or(&crate::context::python::Python)
        .lock_member()
}

fn read_toml(path: &Option<PathBuf>, what: &'static str) -> Result<Option<Vec<u8>>, PackError> {
    let Some(path) = path else { return Ok(None) };
    let bytes = read(path, what)?;
    let bad = |why: String| PackError::BadFile {
        what,
        path: path.clone(),
        why,
    };
    let text = std::str::from_utf8(&bytes).map_err(|_| bad("is not UTF-8".into()))?;
    if let Err(e) = text.parse::<toml::Table>() {
        return Err(bad(format!("is not valid TOML: {e}")));
    }
    Ok(Some(bytes))
}

/// The validation record and the logs as the bundle keeps them.
type Kept = (Option<ValidationRecord>, Option<Vec<u8>>, Option<Vec<u8>>);

fn validation_record(inputs: &FileInputs, instance: &Instance) -> Result<Kept, PackError> {
    let results = match &inputs.results {
        Some(p) => {
            let bytes = read(p, "--results")?;
            serde_json::from_slice::<serde_json::Value>(&bytes).map_err(|_| {
                PackError::BadFile {
                    what: "--results",
                    path: p.clone(),
                    why: "is not valid JSON".into(),
                }
            })?;
            Some(bytes)
        }
        None => None,
    };
    let log = |p: &Option<PathBuf>, what| p.as_deref().map(|p| read(p, what)).transpose();
    let pre_log = log(&inputs.pre_log, "--pre-log")?;
    let post_log = log(&inputs.post_log, "--post-log")?;
    Ok(match (&inputs.validation, results) {
        (Some(p), _) => {
            let bad = |why: String| PackError::BadFile {
                what: "--validation",
                path: p.clone(),
                why,
            };
            let bytes = read(p, "--validation")?;
            let v: crate::validate::Results = serde_json::from_slice(&bytes)
                .map_err(|e| bad(format!("is not a validation's results.json: {e}")))?;
            if v.instance_id != instance.instance_id {
                return Err(bad(format!(
                    "is the validation of {}, not of {}",
                    v.instance_id, instance.instance_id
                )));
            }
            let kept = BundleRecord::of(&v, pre_log.as_deref(), post_log.as_deref());
            (
                Some(ValidationRecord::Expected(kept.expected)),
                kept.pre_log,
                kept.post_log,
            )
        }
        (None, Some(bytes)) => (Some(ValidationRecord::Results(bytes)), pre_log, post_log),
        (None, None) => (None, pre_log, post_log),
    })
}

/// Packs one bundle from `inputs` into the store of the archive at `ark_root` (made when the
/// codebase is a directory), or with `output`, as a self-contained file `DIR/<id>.tar.zst`
/// that leaves the index as it is.
pub fn one(
    ark_root: &Path,
    inputs: &FileInputs,
    output: Option<&Path>,
    options: &PackOptions,
    progress: &dyn Progress,
) -> Result<PackedOne, PackError> {
    let instance_bytes = read(&inputs.instance, "instance")?;
    let instance = Instance::from_json(&instance_bytes).map_err(|source| PackError::Instance {
        path: inputs.instance.clone(),
        source,
    })?;
    let spec = read_toml(&inputs.spec, "--spec")?;
    let lock = read_toml(&inputs.lock, "--lock")?.map(|b| (lock_member(spec.as_deref()), b));
    let (record, pre_log, post_log) = validation_record(inputs, &instance)?;
    let started = std::time::Instant::now();
    let mut ark = None;
    let (codebase, vcs) = match &inputs.codebase {
        CodebaseSource::Dir(dir) => {
            let codebase = Codebase::from_dir(dir, progress)?;
            let vcs = super::vcs_for_dir(&inputs.vcs, dir, &instance, progress)?;
            if output.is_none() {
                ark = Some(Ark::create(ark_root)?);
            }
            (codebase, vcs)
        }
        CodebaseSource::Mirror { repo, commit } => {
            // Packing to a directory still reads the archive's mirror.
            let opened = ark.insert(Ark::open(ark_root)?);
            // As the context the spec names checks it out.
            let empty_submodules = spec
                .as_deref()
                .and_then(|b| toml::from_slice::<toml::Value>(b).ok())
                .and_then(|v| v.get("empty_submodules").and_then(toml::Value::as_bool))
                .unwrap_or(false);
            let (codebase, vcs) = super::codebase_from_mirror(
                opened,
                &instance,
                repo,
                commit.as_deref(),
                empty_submodules,
                progress,
            )?;
            let keep = !matches!(inputs.vcs, VcsSource::None);
            (codebase, keep.then_some(vcs))
        }
    };
    tracing::debug!(
        "hashed {} codebase files in {:.2?}",
        codebase.entries.len(),
        started.elapsed()
    );
    let bundle_inputs = PackInputs {
        instance: &instance,
        codebase: &codebase,
        spec,
        lock,
        pre_log,
        post_log,
        record,
        vcs: vcs.as_ref(),
    };
    let started = std::time::Instant::now();
    let packed = match (output, &mut ark) {
        (Some(dir), _) => crate::bundle::pack_to_dir(&bundle_inputs, dir, options, progress)?,
        (None, Some(ark)) => ark.pack(&bundle_inputs, options, progress)?,
        (None, None) => Ark::create(ark_root)?.pack(&bundle_inputs, options, progress)?,
    };
    tracing::debug!("wrote the bundle in {:.2?}", started.elapsed());
    Ok(PackedOne {
        instance,
        packed,
        vcs,
    })
}
