//! The git tree id of a set of files, computed as git computes it, so that a bundle's codebase
//! can be checked against `git rev-parse <commit>^{tree}` without git.

use std::collections::{BTreeMap, HashMap};

use crate::digest::{GitOid, git_object_id};

/// The git mode of a submodule entry (a gitlink): the entry names a commit of another repository.
pub const GITLINK_MODE: &str = "160000";

enum Node<'a> {
    Blob(&'static str, GitOid),
    Tree(BTreeMap<&'a [u8], Node<'a>>),
}

/// Why a set of paths makes no git tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    #[error("`{0}` appears twice or is also a directory")]
    Twice(String),
    #[error("`{0}` is inside a path that is a file")]
    UnderFile(String),
    #[error("`{path}` lies inside the submodule `{submodule}`, whose content is not carried")]
    InsideSubmodule { path: String, submodule: String },
    #[error(
        "the files of the submodule `{path}` make the tree {computed}, not its commit's tree {claimed}"
    )]
    SubmoduleTree {
        path: String,
        computed: GitOid,
        claimed: GitOid,
    },
}

/// A submodule as tree ids see it: its path from the root, the commit its gitlink names, and
/// whether its files are among the files given.
#[derive(Debug, Clone, Copy)]
pub struct Submodule<'a> {
    pub path: &'a [u8],
    pub commit: GitOid,
    pub carried: bool,
}

/// The tree ids of a codebase whose carried submodules hold files of their own: each file
/// belongs to the innermost submodule around it, or to the root; each submodule is a gitlink
/// (mode 160000) in the tree around it. Returns the root's tree id and, in the order of
/// `submodules`, the tree id of each carried one (`None` for the others). Fails on a file or a
/// submodule inside a submodule that is not carried.
pub fn tree_ids<'a>(
    files: impl IntoIterator<Item = (&'a [u8], &'static str, GitOid)>,
    submodules: &[Submodule<'a>],
) -> Result<(GitOid, Vec<Option<GitOid>>), TreeError> {
    if submodules.is_empty() {
        return Ok((tree_id(files)?, Vec::new()));
    }
    let at: HashMap<&[u8], usize> = submodules
        .iter()
        .enumerate()
        .map(|(i, s)| (s.path, i))
        .collect();
    // Bucket 0 is the root, bucket i + 1 submodule i.
    let mut buckets: Vec<Vec<(&'a [u8], &'static str, GitOid)>> =
        vec![Vec::new(); submodules.len() + 1];
    let mut place = |path: &'a [u8], mode: &'static str, oid: GitOid| {
        let owner = super::path::ancestors(path)
            .filter_map(|a| at.get(a).copied())
            .last();
        match owner {
            None => buckets[0].push((path, mode, oid)),
            Some(i) if submodules[i].carried => {
                let rel = &path[submodules[i].path.len() + 1..];
                buckets[i + 1].push((rel, mode, oid));
            }
            Some(i) => {
                return Err(TreeError::InsideSubmodule {
                    path: String::from_utf8_lossy(path).into_owned(),
                    submodule: String::from_utf8_lossy(submodules[i].path).into_owned(),
                });
            }
        }
        Ok(())
    };
    for (path, mode, oid) in files {
        place(path, mode, oid)?;
    }
    for s in submodules {
        place(s.path, GITLINK_MODE, s.commit)?;
    }
    let root = tree_id(buckets[0].iter().copied())?;
    let mut trees = Vec::with_capacity(submodules.len());
    for (s, bucket) in submodules.iter().zip(&buckets[1..]) {
        trees.push(match s.carried {
            true => Some(tree_id(bucket.iter().copied())?),
            false => None,
        });
    }
    Ok((root, trees))
}

/// The tree id of `entries` (path relative to the tree root, git mode such as `100644` or
/// [`GITLINK_MODE`], object id). Fails, naming the path, when one path is both a file and a
/// directory, or appears twice.
pub fn tree_id<'a>(
    entries: impl IntoIterator<Item = (&'a [u8], &'static str, GitOid)>,
) -> Result<GitOid, TreeError> {
    let mut root: BTreeMap<&[u8], Node> = BTreeMap::new();
    for (path, mode, oid) in entries {
        let mut dir = &mut root;
        let mut comps = path.split(|&b| b == b'/').peekable();
        while let Some(comp) = comps.next() {
            if comps.peek().is_none() {
                if dir.insert(comp, Node::Blob(mode, oid)).is_some() {
                    return Err(TreeError::Twice(String::from_utf8_lossy(path).into_owned()));
                }
            } else {
                let node = dir
                    .entry(comp)
                    .or_insert_with(|| Node::Tree(BTreeMap::new()));
                match node {
                    Node::Tree(sub) => dir = sub,
                    Node::Blob(..) => {
                        return Err(TreeError::UnderFile(
                            String::from_utf8_lossy(path).into_owned(),
                        ));
                    }
                }
            }
        }
    }
    Ok(write_tree(&root))
}

fn write_tree(dir: &BTreeMap<&[u8], Node>) -> GitOid {
    // Git sorts tree entries by name, comparing a directory's name as if it ended in `/`.
    let mut items: Vec<(Vec<u8>, &'static str, GitOid, &[u8])> = dir
        .iter()
        .map(|(name, node)| match node {
            Node::Blob(mode, oid) => (name.to_vec(), *mode, *oid, *name),
            Node::Tree(sub) => {
                let mut key = name.to_vec();
                key.push(b'/');
                (key, "40000", write_tree(sub), *name)
            }
        })
        .collect();
    items.sort_by(|a, b| a.0.cmp(&b.0));
    let mut content = Vec::new();
    for (_, mode, oid, name) in items {
        content.extend_from_slice(mode.as_bytes());
        content.push(b' ');
        content.extend_from_slice(name);
        content.push(0);
        content.extend_from_slice(&oid.0);
    }
    git_object_id("tree", &content)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oid(b: u8) -> GitOid {
        GitOid([b; 20])
    }

    #[test]
    fn carried_submodules_are_trees_of_their_own() {
        let files = [
            (&b"README"[..], "100644", oid(1)),
            (&b"vendor/lib/a.c"[..], "100644", oid(2)),
            (&b"vendor/lib/deep/x.h"[..], "100644", oid(3)),
            (&b"vendor/lib/deep/x.h.in"[..], "100755", oid(4)),
        ];
        let lib = Submodule {
            path: b"vendor/lib",
            commit: oid(9),
            carried: true,
        };
        let nested = Submodule {
            path: b"vendor/lib/deep",
            commit: oid(8),
            carried: true,
        };
        let (root, trees) = tree_ids(files, &[lib, nested]).unwrap();
        // The root sees a gitlink where the submodule is, the submodule one where its own is.
        let alone = tree_id([
            (&b"README"[..], "100644", oid(1)),
            (&b"vendor/lib"[..], GITLINK_MODE, oid(9)),
        ])
        .unwrap();
        assert_eq!(root, alone);
        let lib_tree = tree_id([
            (&b"a.c"[..], "100644", oid(2)),
            (&b"deep"[..], GITLINK_MODE, oid(8)),
        ])
        .unwrap();
        let deep_tree = tree_id([
            (&b"x.h"[..], "100644", oid(3)),
            (&b"x.h.in"[..], "100755", oid(4)),
        ])
        .unwrap();
        assert_eq!(trees, vec![Some(lib_tree), Some(deep_tree)]);

        // Not carried: nothing may lie inside it, not even another submodule.
        let empty = Submodule {
            carried: false,
            ..lib
        };
        assert!(matches!(
            tree_ids(files, &[empty]),
            Err(TreeError::InsideSubmodule { .. })
        ));
        assert!(matches!(
            tree_ids(files[..1].iter().copied(), &[empty, nested]),
            Err(TreeError::InsideSubmodule { .. })
        ));
        let (root2, trees2) = tree_ids(files[..1].iter().copied(), &[empty]).unwrap();
        assert_eq!((root2, trees2), (alone, vec![None]));
    }
}
