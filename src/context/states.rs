//! The states of a repository's tree a lock of a non-Python kind must cover: every base commit
//! of the context's instances in the archive, and each instance's patches on its base commit
//! where they change a build file (the kind says which files are: `crate::diff` reads a patch).

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{ContextError, LockOptions};
use crate::manifest::Context;
use crate::mirror::Mirror;
use crate::store::Ark;

/// One state of the tree: a base commit, with an instance's patches on it or not.
pub struct State {
    pub commit: String,
    /// The instance, its test patch and its gold patch, when they change a build file.
    pub patches: Option<(String, String, String)>,
}

impl State {
    pub fn describe(&self) -> String {
        match &self.patches {
            None => format!("base commit {}", &self.commit[..12.min(self.commit.len())]),
            Some((id, _, _)) => format!("{id} with its patches"),
        }
    }
}

/// The base commits (newest first) and the states of the tree.
pub type Covered = (Vec<String>, Vec<State>);

/// The base commits (newest first) and the states of the tree, or None when the archive holds
/// no instance of `ctx`. `touches(patch)` says whether a patch changes a build file.
pub fn states_of(
    ark: &Ark,
    ctx: &Context,
    opts: &LockOptions,
    mirror: &Mirror,
    touches: fn(&str) -> bool,
) -> Result<Option<Covered>, ContextError> {
    let mut commits: BTreeSet<String> = opts.commit.iter().cloned().collect();
    let mut patched = Vec::new();
    for row in ark
        .index()
        .instances_of_repo(&ctx.repo)
        .map_err(crate::env::EnvError::from)?
    {
        if row.version != ctx.version || row.base_commit.is_empty() {
            continue;
        }
        commits.insert(row.base_commit.clone());
        if let Some(inst) = ark
            .index()
            .instance(&row.instance_id)
            .map_err(crate::env::EnvError::from)?
            && (touches(&inst.patch) || touches(&inst.test_patch))
        {
            patched.push(State {
                commit: row.base_commit.clone(),
                patches: Some((inst.instance_id.clone(), inst.test_patch, inst.patch)),
            });
        }
    }
    if commits.is_empty() {
        return Ok(None);
    }
    let mut dated = Vec::new();
    for c in commits {
        dated.push((commit_time(mirror, &c)?, c));
    }
    dated.sort_by(|a, b| b.cmp(a));
    let commits: Vec<String> = dated.into_iter().map(|(_, c)| c).collect();
    let mut states: Vec<State> = commits
        .iter()
        .map(|c| State {
            commit: c.clone(),
            patches: None,
        })
        .collect();
    states.extend(patched);
    Ok(Some((commits, states)))
}

pub fn commit_time(mirror: &Mirror, commit: &str) -> Result<SystemTime, ContextError> {
    let c = mirror
        .repo
        .revparse_single(commit)
        .and_then(|o| o.peel_to_commit())
        .map_err(|_| crate::mirror::MirrorError::MissingCommit {
            name: mirror.name.to_string(),
            commit: commit.to_string(),
            hint: format!(" (run `swe-ark mirror update {}`)", mirror.name),
        })
        .map_err(crate::env::EnvError::from)?;
    Ok(UNIX_EPOCH + Duration::from_secs(c.time().seconds().max(0) as u64))
}
