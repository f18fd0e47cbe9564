//! A commit's tree, read straight from a mirror's object database into a bundle codebase: no
//! working tree, modes and symlinks as git records them, submodules as gitlinks, LFS pointer
//! files as the pointers they are.

use rayon::prelude::*;

use crate::bundle::{self, Codebase, CodebaseEntry, EntrySource, Gitlink, MemberKind};
use crate::digest::{GitOid, Sha256Digest};
use crate::progress::Progress;

use super::{Mirror, MirrorError};

struct Blob {
    path: Vec<u8>,
    kind: MemberKind,
    oid: git2::Oid,
    content: Vec<u8>,
}

fn git_oid(oid: git2::Oid) -> GitOid {
    let mut out = [0u8; 20];
    out.copy_from_slice(oid.as_bytes());
    GitOid(out)
}

impl Mirror {
    /// The codebase of `commit`: every blob of its tree read from the object database (which
    /// checks each object's hash as it reads it), then sha256-hashed in parallel. Fails, naming
    /// the path, when an object is missing.
    pub fn codebase_at(
        &self,
        commit: &str,
        progress: &dyn Progress,
    ) -> Result<Codebase, MirrorError> {
        let c = self.commit(commit)?;
        let tree = c
            .tree()
            .map_err(|e| self.missing(commit, "", c.tree_id(), "tree", e))?;
        let mut blobs = Vec::new();
        let mut gitlinks = Vec::new();
        progress.start("reading the tree", None);
        self.walk(
            commit,
            &tree,
            Vec::new(),
            &mut blobs,
            &mut gitlinks,
            progress,
        )?;
        progress.finish();
        let entries = blobs
            .into_par_iter()
            .map(|b| CodebaseEntry {
                sha256: Sha256Digest::of(&b.content),
                blob: git_oid(b.oid),
                size: b.content.len() as u64,
                kind: b.kind,
                path: b.path,
                source: EntrySource::Bytes(b.content),
            })
            .collect();
        let codebase = Codebase::from_entries(entries, gitlinks).map_err(|reason| {
            MirrorError::Unpackable {
                name: self.name.to_string(),
                commit: commit.to_string(),
                path: String::new(),
                reason,
            }
        })?;
        // The tree rebuilt from the blobs must be the commit's own: proof that nothing was
        // lost or changed on the way (a legacy mode such as 100664 would show here).
        if codebase.tree != git_oid(c.tree_id()) {
            return Err(MirrorError::Unpackable {
                name: self.name.to_string(),
                commit: commit.to_string(),
                path: String::new(),
                reason: format!(
                    "the tree rebuilt from its files is {}, not the commit's tree {} (does it \
                     use file modes other than 100644, 100755, 120000?)",
                    codebase.tree,
                    c.tree_id()
                ),
            });
        }
        Ok(codebase)
    }

    /// Problems with the tree of `commit`: every tree and blob it names must be in the object
    /// database (submodules are not followed). Reading checks hashes elsewhere; this checks
    /// that nothing an instance needs is absent.
    pub fn check_tree(&self, commit: &str) -> Result<Vec<String>, MirrorError> {
        let c = self.commit(commit)?;
        let odb = self.repo.odb().map_err(self.git())?;
        let mut problems = Vec::new();
        let mut stack = vec![(String::new(), c.tree_id())];
        while let Some((prefix, tree_id)) = stack.pop() {
            let tree = match self.repo.find_tree(tree_id) {
                Ok(t) => t,
                Err(e) => {
                    problems.push(format!(
                        "tree {tree_id} at `{prefix}` of commit {commit} cannot be read: {}",
                        e.message()
                    ));
                    continue;
                }
            };
            for entry in tree.iter() {
                let path = format!("{prefix}{}", String::from_utf8_lossy(entry.name_bytes()));
                match entry.filemode() {
                    0o040000 => stack.push((format!("{path}/"), entry.id())),
                    0o160000 => {}
                    _ if !odb.exists(entry.id()) => problems.push(format!(
                        "blob {} at `{path}` of commit {commit} is missing",
                        entry.id()
                    )),
                    _ => {}
                }
            }
        }
        Ok(problems)
    }

    fn missing(
        &self,
        commit: &str,
        path: &str,
        oid: git2::Oid,
        kind: &'static str,
        e: git2::Error,
    ) -> MirrorError {
        if e.code() == git2::ErrorCode::NotFound {
            MirrorError::MissingObject {
                name: self.name.to_string(),
                commit: commit.to_string(),
                path: path.to_string(),
                oid: oid.to_string(),
                kind,
            }
        } else {
            MirrorError::Unpackable {
                name: self.name.to_string(),
                commit: commit.to_string(),
                path: path.to_string(),
                reason: format!("the {kind} {oid} cannot be read: {}", e.message()),
            }
        }
    }

    fn walk(
        &self,
        commit: &str,
        tree: &git2::Tree<'_>,
        prefix: Vec<u8>,
        blobs: &mut Vec<Blob>,
        gitlinks: &mut Vec<Gitlink>,
        progress: &dyn Progress,
    ) -> Result<(), MirrorError> {
        for entry in tree.iter() {
            let mut path = prefix.clone();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(entry.name_bytes());
            let shown = String::from_utf8_lossy(&path).into_owned();
            let oid = entry.id();
            let kind = match entry.filemode() {
                0o040000 => {
                    let sub = self
                        .repo
                        .find_tree(oid)
                        .map_err(|e| self.missing(commit, &shown, oid, "tree", e))?;
                    self.walk(commit, &sub, path, blobs, gitlinks, progress)?;
                    continue;
                }
                0o160000 => {
                    gitlinks.push(Gitlink {
                        path,
                        commit: git_oid(oid),
                    });
                    continue;
                }
                0o120000 => MemberKind::Symlink,
                0o100755 => MemberKind::Executable,
                0o100644 | 0o100664 => MemberKind::File,
                other => {
                    return Err(MirrorError::Unpackable {
                        name: self.name.to_string(),
                        commit: commit.to_string(),
                        path: shown,
                        reason: format!("git file mode {other:o} is not one a bundle holds"),
                    });
                }
            };
            let blob = self
                .repo
                .find_blob(oid)
                .map_err(|e| self.missing(commit, &shown, oid, "blob", e))?;
            let content = blob.content().to_vec();
            if kind == MemberKind::Symlink {
                let mut member = bundle::CODEBASE_DIR.as_bytes().to_vec();
                member.extend_from_slice(&path);
                if !bundle::link_stays_inside(bundle::CODEBASE_DIR.as_bytes(), &member, &content) {
                    return Err(MirrorError::Unpackable {
                        name: self.name.to_string(),
                        commit: commit.to_string(),
                        path: shown,
                        reason: format!(
                            "the symlink points outside the codebase (to `{}`), which bundles refuse",
                            String::from_utf8_lossy(&content)
                        ),
                    });
                }
            }
            progress.advance(content.len() as u64);
            blobs.push(Blob {
                path,
                kind,
                oid,
                content,
            });
        }
        Ok(())
    }
}
