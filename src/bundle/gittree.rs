//! The git tree id of a set of files, computed as git computes it, so that a bundle's codebase
//! can be checked against `git rev-parse <commit>^{tree}` without git.

use std::collections::BTreeMap;

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
