//! The archive's locks, found by id or prefix, and whether their environments are built.

use crate::digest::Sha256Digest;
use crate::store::Ark;

use super::EnvError;
use super::pylock::PyLock;

/// The lock `query` names (a full id or a unique prefix), with its parsed file.
pub fn find_lock(ark: &Ark, query: &str) -> Result<(Sha256Digest, PyLock), EnvError> {
    let id = find_lock_id(ark, query)?;
    let bytes = ark.objects().get(&id)?;
    let lock = PyLock::parse(&bytes).map_err(|detail| EnvError::BadLock {
        id: id.hex(),
        detail: detail.to_string(),
    })?;
    Ok((id, lock))
}

/// The id of the lock `query` (a unique prefix of its id) names, whatever its kind.
pub fn find_lock_id(ark: &Ark, query: &str) -> Result<Sha256Digest, EnvError> {
    let locks = ark.index().locks()?;
    let matches: Vec<_> = locks
        .iter()
        .filter(|l| !query.is_empty() && l.id.hex().starts_with(&query.to_ascii_lowercase()))
        .collect();
    let row = match matches.as_slice() {
        [one] => *one,
        [] => {
            return Err(EnvError::UnknownLock {
                query: query.to_string(),
                known: locks
                    .iter()
                    .map(|l| format!("{} ({} {})", l.id.short(), l.repo, l.version))
                    .collect(),
            });
        }
        many => {
            return Err(EnvError::AmbiguousLock {
                query: query.to_string(),
                ids: many.iter().map(|l| l.id.hex()).collect(),
            });
        }
    };
    Ok(row.id)
}

/// Whether the environment of lock `id` is built in the archive (`envs/<id>/env.json`) and
/// would be used as it is: one built where the archive was before it was moved or copied, or
/// by an older swe-ark, is built again at its next use.
pub fn is_built(ark: &Ark, id: &Sha256Digest) -> bool {
    let dir = ark.layout().env(id);
    dir.join("env.json").is_file() && super::build::stale(&dir).is_none()
}
