//! What the archive knows of its mirrors: their state as recorded at each fetch, and what its
//! instances expect of them (`mirror verify`).

use crate::mirror::{self, Mirror, MirrorError, RepoName};

use super::{Ark, IndexError};

#[derive(Debug, thiserror::Error)]
pub enum MirrorStateError {
    #[error(transparent)]
    Git(#[from] git2::Error),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Mirror(Box<MirrorError>),
}

impl From<MirrorError> for MirrorStateError {
    fn from(e: MirrorError) -> Self {
        MirrorStateError::Mirror(Box::new(e))
    }
}

impl Ark {
    /// Records mirror `m`'s current state (URL, refs, their hash, size) in the index.
    pub fn record_mirror(&mut self, m: &Mirror) -> Result<(), MirrorStateError> {
        let refs = mirror::upstream_refs(&m.repo)?;
        let hash = mirror::refs_hash(&refs);
        let size = mirror::disk_size(&m.path);
        self.index_mut()
            .record_mirror(m.name.as_str(), &m.url(), &refs, &hash, size)?;
        Ok(())
    }

    /// What the archive's index expects of mirror `name`: its pins, its instances' base
    /// commits, the refs of its last fetch.
    pub fn mirror_expected(&self, name: &RepoName) -> Result<mirror::Expected, IndexError> {
        let pins = self.index().pins(name.as_str())?;
        Ok(mirror::Expected {
            pins: pins
                .into_iter()
                .map(|p| mirror::ExpectedPin {
                    what: format!("{} of {}", p.role, p.instance_id),
                    reference: p.reference,
                    commit: p.commit,
                })
                .collect(),
            commits: self
                .index()
                .instances_of_repo(name.as_str())?
                .into_iter()
                .map(|i| (i.base_commit, format!("base_commit of {}", i.instance_id)))
                .collect(),
            refs: self.index().mirror_refs(name.as_str())?,
        })
    }
}
