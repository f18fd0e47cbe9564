//! After a collection: the versions of a repository's collected instances read from its
//! mirror (the manifest's rule, when it has one), written to the index with the base commits
//! pinned so that no later fetch can drop them.

use crate::dataset::Instance;
use crate::manifest::Manifests;
use crate::mirror::{Mirror, RepoName};
use crate::store::{Ark, IndexError, PinRow};

/// What became of the collected instances.
#[derive(Debug, Default)]
pub struct Versioned {
    /// The repository's collected instances (this run's and earlier runs').
    pub instances: Vec<Instance>,
    /// Notes for people: versions that could not be read, or no mirror to read them from.
    pub notes: Vec<String>,
}

/// Gives the collected instances of `repo` their versions and environment setup commits from
/// its mirror, when the archive has one, and records them.
pub fn assign_and_record(
    ark: &mut Ark,
    repo: &RepoName,
    manifests: &Manifests,
) -> Result<Versioned, IndexError> {
    let mut all: Vec<Instance> = ark
        .index()
        .all_instances()?
        .into_iter()
        .filter(|i| i.repo == repo.as_str() && i.extra.contains_key("pull_number"))
        .collect();
    let mirror = match Mirror::open(&ark.mirrors_dir(), repo) {
        Ok(m) => m,
        Err(_) if all.is_empty() => return Ok(Versioned::default()),
        Err(_) => {
            return Ok(Versioned {
                instances: all,
                notes: vec![format!(
                    "no mirror of {repo} in the archive, so version and environment_setup_commit \
                     stay empty; run `swe-ark mirror add {repo}`, then collect again (nothing is \
                     fetched twice)"
                )],
            });
        }
    };
    // A repository's manifest may say how to read its version.
    let rule = manifests
        .repo(repo.as_str())
        .ok()
        .and_then(|m| m.version_rule.clone());
    let (pins, notes) = super::assign_versions(&mirror, &mut all, rule.as_ref());
    ark.index_mut().import_instances(&all, None)?;
    for (instance_id, reference, commit) in pins {
        ark.index_mut().record_pin(&PinRow {
            mirror: repo.to_string(),
            reference,
            commit,
            instance_id,
            role: "base_commit".into(),
        })?;
    }
    Ok(Versioned {
        instances: all,
        notes,
    })
}
