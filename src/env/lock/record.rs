//! Steps 6 and 8: the lock document, stored as an object, and recorded in the index with every
//! object it needs.

use std::path::Path;

use super::LockOptions;
use super::install::PreInstall;
use super::source::SourceFiles;
use super::target::Target;
use crate::digest::Sha256Digest;
use crate::env::pylock::{self, ContextMeta, LockMeta, Package, PyLock, PythonMeta, Tool};
use crate::env::{EnvError, packed, python};
use crate::manifest::Context;
use crate::store::Ark;

/// Step 6: what the lock says of the interpreter, packed into the store if asked.
pub(super) fn python_meta(
    ark: &Ark,
    opts: &LockOptions,
    interp: &python::Interpreter,
    work: &Path,
    say: &dyn Fn(&str),
) -> Result<PythonMeta, EnvError> {
    let packed_python = if opts.pack_python {
        say(&format!(
            "the lock carries Python {} ({}), packed once per archive",
            interp.version,
            interp.prefix.display()
        ));
        Some(packed::pack_python_once(
            &ark.objects(),
            &ark.layout().packed_pythons(),
            crate::env::shared_cache(crate::env::Shared::PackedPythons).as_deref(),
            work,
            interp,
        )?)
    } else {
        None
    };
    Ok(PythonMeta {
        version: interp.version.clone(),
        implementation: interp.implementation.clone(),
        platform: interp.platform.clone(),
        sha256: interp.sha256.hex(),
        // Where the prefix was is a fact of this machine, not of the
        // interpreter: the lock names it by its content only.
        packed_from: None,
        packed: packed_python,
    })
}

/// The pylock.toml document of `packages`, with `meta` as its `[tool.swe-ark]`.
pub(super) fn lock_document(packages: Vec<Package>, meta: LockMeta) -> PyLock {
    PyLock {
        lock_version: pylock::LOCK_VERSION.into(),
        environments: vec![],
        requires_python: format!("=={}", meta.python.version),
        extras: vec![],
        dependency_groups: vec![],
        default_groups: vec![],
        created_by: "swe-ark".into(),
        packages,
        tool: Tool { swe_ark: meta },
    }
}

/// What the lock says of the context it was made from.
pub(super) fn context_meta(ctx: &Context, files: &SourceFiles, pre: PreInstall) -> ContextMeta {
    ContextMeta {
        python: ctx.python.clone(),
        requirements_file: files.requirements_file.clone(),
        packages: ctx.packages.clone(),
        conda_environment: files.conda_file.clone(),
        conda_mapped: files
            .conda_env
            .as_ref()
            .map(|c| c.requirements.clone())
            .unwrap_or_default(),
        pip_packages: ctx.pip_packages.clone(),
        pre_install: pre.ran,
        skipped_pre_install: pre.skipped,
        install: ctx.install.clone(),
    }
}

/// The lock as stored: its bytes, their id, and the lock read back from them (the lock that
/// is built and proven is the one stored).
pub(super) struct StoredLock {
    bytes: Vec<u8>,
    pub(super) id: Sha256Digest,
    pub(super) lock: PyLock,
}

pub(super) fn store_lock(ark: &Ark, lock: &PyLock) -> Result<StoredLock, EnvError> {
    let bytes = lock.to_bytes().map_err(|e| EnvError::BadLock {
        id: "(new)".into(),
        detail: e.to_string(),
    })?;
    let lock_id = ark.objects().put_bytes(&bytes)?;
    let lock = PyLock::parse(&bytes).map_err(|e| EnvError::BadLock {
        id: lock_id.hex(),
        detail: e.to_string(),
    })?;
    Ok(StoredLock {
        bytes,
        id: lock_id,
        lock,
    })
}

/// Step 8: the index: the lock and every object, in one transaction. Returns how many
/// artifacts the lock has and their bytes.
pub(super) fn record_lock(
    ark: &mut Ark,
    ctx: &Context,
    target: &Target,
    stored: &StoredLock,
) -> Result<(usize, u64), EnvError> {
    let StoredLock {
        bytes,
        id: lock_id,
        lock,
    } = stored;
    let mut objects: Vec<(Sha256Digest, u64, &'static str)> =
        vec![(*lock_id, bytes.len() as u64, "lock")];
    objects.extend(lock.needed_objects().map_err(|e| EnvError::BadLock {
        id: lock_id.hex(),
        detail: e.to_string(),
    })?);
    let artifacts = objects.len() - 1;
    let total: u64 = objects.iter().skip(1).map(|o| o.1).sum();
    ark.index_mut().record_lock(
        &crate::store::LockRow {
            id: *lock_id,
            repo: ctx.repo.clone(),
            version: ctx.version.clone(),
            commit_id: target.commit.clone(),
            python: target.interp.version.clone(),
            packages: lock.packages.len() as u64,
            artifacts: artifacts as u64,
            bytes: total,
            created_at: 0,
        },
        &objects,
    )?;
    Ok((artifacts, total))
}
