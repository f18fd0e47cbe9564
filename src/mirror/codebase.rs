//! A commit's tree, read straight from a mirror's object database into a bundle codebase: no
//! working tree, modes and symlinks as git records them, submodules as gitlinks, LFS pointer
//! files as the pointers they are.

use rayon::prelude::*;

use crate::bundle::{self, Codebase, CodebaseEntry, EntrySource, Gitlink, MemberKind};
use crate::digest::{GitOid, Sha256Digest};
use crate::progress::Progress;

use super::{Mirror, MirrorError};

/// A file of the tree, before its content is read.
struct TreeFile {
    path: Vec<u8>,
    kind: MemberKind,
    oid: git2::Oid,
}

fn git_oid(oid: git2::Oid) -> GitOid {
    let mut out = [0u8; 20];
    out.copy_from_slice(oid.as_bytes());
    GitOid(out)
}

/// The error for an object that cannot be read: missing (named as such) or damaged.
fn unreadable(
    name: &str,
    commit: &str,
    path: &str,
    oid: git2::Oid,
    kind: &'static str,
    e: git2::Error,
) -> MirrorError {
    if e.code() == git2::ErrorCode::NotFound {
        MirrorError::MissingObject {
            name: name.to_string(),
            commit: commit.to_string(),
            path: path.to_string(),
            oid: oid.to_string(),
            kind,
        }
    } else {
        MirrorError::Unpackable {
            name: name.to_string(),
            commit: commit.to_string(),
            path: path.to_string(),
            reason: format!("the {kind} {oid} cannot be read: {}", e.message()),
        }
    }
}

/// Reads and hashes `files` with a repository handle of its own (libgit2 handles are not
/// shared between threads).
fn read_files(
    repo_path: &std::path::Path,
    name: &str,
    commit: &str,
    files: &[TreeFile],
    progress: &dyn Progress,
) -> Result<Vec<CodebaseEntry>, MirrorError> {
    let repo = git2::Repository::open_bare(repo_path).map_err(|source| MirrorError::Git {
        name: name.to_string(),
        source,
    })?;
    files
        .iter()
        .map(|f| {
            let shown = String::from_utf8_lossy(&f.path);
            let blob = repo
                .find_blob(f.oid)
                .map_err(|e| unreadable(name, commit, &shown, f.oid, "blob", e))?;
            let content = blob.content().to_vec();
            if f.kind == MemberKind::Symlink {
                let member = [bundle::CODEBASE_DIR.as_bytes(), &f.path].concat();
                if !bundle::link_stays_inside(bundle::CODEBASE_DIR.as_bytes(), &member, &content) {
                    return Err(MirrorError::Unpackable {
                        name: name.to_string(),
                        commit: commit.to_string(),
                        path: shown.into_owned(),
                        reason: format!(
                            "the symlink points outside the codebase (to `{}`), which bundles \
                             refuse",
                            String::from_utf8_lossy(&content)
                        ),
                    });
                }
            }
            progress.advance(content.len() as u64);
            Ok(CodebaseEntry {
                sha256: Sha256Digest::of(&content),
                blob: git_oid(f.oid),
                size: content.len() as u64,
                kind: f.kind,
                path: f.path.clone(),
                source: EntrySource::Bytes(content),
            })
        })
        .collect()
}

impl Mirror {
    /// The codebase of `commit`: its trees walked, then every blob read from the object
    /// database (which checks each object's hash as it reads it) and sha256-hashed, in
    /// parallel. Fails, naming the path, when an object is missing.
    pub fn codebase_at(
        &self,
        commit: &str,
        progress: &dyn Progress,
    ) -> Result<Codebase, MirrorError> {
        let c = self.commit(commit)?;
        let name = self.name.to_string();
        let tree = c
            .tree()
            .map_err(|e| unreadable(&name, commit, "", c.tree_id(), "tree", e))?;
        let mut files = Vec::new();
        let mut gitlinks = Vec::new();
        self.walk(commit, &tree, Vec::new(), &mut files, &mut gitlinks)?;
        progress.start("reading blobs", None);
        // Chunks large enough that opening a handle per chunk costs nothing.
        let chunk = (files.len() / (4 * rayon::current_num_threads()).max(1)).max(256);
        let path = self.path.clone();
        let entries: Vec<CodebaseEntry> = files
            .par_chunks(chunk)
            .map(|part| read_files(&path, &name, commit, part, progress))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .flatten()
            .collect();
        progress.finish();
        let codebase =
            Codebase::from_entries(entries, gitlinks).map_err(|e| MirrorError::Unpackable {
                name: name.clone(),
                commit: commit.to_string(),
                path: String::new(),
                reason: e.to_string(),
            })?;
        // The tree rebuilt from the blobs must be the commit's own: proof that nothing was
        // lost or changed on the way (a legacy mode such as 100664 would show here).
        if codebase.tree != git_oid(c.tree_id()) {
            return Err(MirrorError::Unpackable {
                name,
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

    /// Collects the files and submodules under `tree`, reading trees only.
    fn walk(
        &self,
        commit: &str,
        tree: &git2::Tree<'_>,
        prefix: Vec<u8>,
        files: &mut Vec<TreeFile>,
        gitlinks: &mut Vec<Gitlink>,
    ) -> Result<(), MirrorError> {
        for entry in tree.iter() {
            let mut path = prefix.clone();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(entry.name_bytes());
            let oid = entry.id();
            let kind = match entry.filemode() {
                0o040000 => {
                    let sub = self.repo.find_tree(oid).map_err(|e| {
                        let shown = String::from_utf8_lossy(&path);
                        unreadable(self.name.as_str(), commit, &shown, oid, "tree", e)
                    })?;
                    self.walk(commit, &sub, path, files, gitlinks)?;
                    continue;
                }
                0o160000 => {
                    gitlinks.push(Gitlink {
                        path,
                        commit: git_oid(oid),
                        tree: None,
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
                        path: String::from_utf8_lossy(&path).into_owned(),
                        reason: format!("git file mode {other:o} is not one a bundle holds"),
                    });
                }
            };
            files.push(TreeFile { path, kind, oid });
        }
        Ok(())
    }
}
