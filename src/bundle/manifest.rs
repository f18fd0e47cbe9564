//! `bundle.json`: the first member of every bundle, listing every other member with its size
//! and sha256, and the git tree id of `codebase/`.

use serde::{Deserialize, Serialize};

use crate::digest::{GitOid, Sha256Digest};

use super::path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemberKind {
    /// A regular file, mode 0644 (git 100644).
    File,
    /// A regular file with the executable bit, mode 0755 (git 100755).
    Executable,
    /// A symbolic link (git 120000); its content is the target path.
    Symlink,
}

impl MemberKind {
    /// The mode git records for this kind in a tree.
    pub fn git_mode(self) -> &'static str {
        match self {
            MemberKind::File => "100644",
            MemberKind::Executable => "100755",
            MemberKind::Symlink => "120000",
        }
    }
    /// The mode written into the tar header.
    pub fn tar_mode(self) -> u32 {
        match self {
            MemberKind::File => 0o644,
            MemberKind::Executable => 0o755,
            MemberKind::Symlink => 0o777,
        }
    }
}

/// One member of a bundle. `size` and `sha256` are those of the content; for a symlink, the
/// content is its target path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawMember", into = "RawMember")]
pub struct ManifestMember {
    pub path: Vec<u8>,
    pub kind: MemberKind,
    pub size: u64,
    pub sha256: Sha256Digest,
}

/// The JSON shape of a member: `path` when the path is UTF-8, `path_hex` (the bytes in hex)
/// when it is not, since JSON strings cannot carry arbitrary bytes.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMember {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    path_hex: Option<String>,
    kind: MemberKind,
    size: u64,
    sha256: Sha256Digest,
}

/// Why an entry's path in bundle.json cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum EntryPathError {
    #[error("bad path_hex `{hex}`: {source}")]
    BadHex {
        hex: String,
        #[source]
        source: hex::FromHexError,
    },
    #[error("an entry needs exactly one of `path` and `path_hex`")]
    NotOne,
    #[error("path `{path}`: {reason}")]
    Invalid { path: String, reason: &'static str },
}

fn decode_path(path: Option<String>, path_hex: Option<String>) -> Result<Vec<u8>, EntryPathError> {
    let path = match (path, path_hex) {
        (Some(p), None) => p.into_bytes(),
        (None, Some(h)) => {
            hex::decode(&h).map_err(|source| EntryPathError::BadHex { hex: h, source })?
        }
        _ => return Err(EntryPathError::NotOne),
    };
    if let Some(reason) = path::invalid_reason(&path) {
        return Err(EntryPathError::Invalid {
            path: path::display(&path),
            reason,
        });
    }
    Ok(path)
}

fn encode_path(path: Vec<u8>) -> (Option<String>, Option<String>) {
    match String::from_utf8(path) {
        Ok(s) => (Some(s), None),
        Err(e) => (None, Some(hex::encode(e.into_bytes()))),
    }
}

impl TryFrom<RawMember> for ManifestMember {
    type Error = EntryPathError;
    fn try_from(raw: RawMember) -> Result<Self, EntryPathError> {
        Ok(ManifestMember {
            path: decode_path(raw.path, raw.path_hex)?,
            kind: raw.kind,
            size: raw.size,
            sha256: raw.sha256,
        })
    }
}

impl From<ManifestMember> for RawMember {
    fn from(m: ManifestMember) -> Self {
        let (path, path_hex) = encode_path(m.path);
        RawMember {
            path,
            path_hex,
            kind: m.kind,
            size: m.size,
            sha256: m.sha256,
        }
    }
}

/// A submodule in the codebase: git records the commit of another repository at this path.
/// It is listed in bundle.json and counted in the tree id as a gitlink. With `tree`, the
/// submodule's files are carried under its path and must make that tree (the commit's); without,
/// its content is not in the bundle (unpack makes an empty directory there, as `git checkout`
/// does).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawGitlink", into = "RawGitlink")]
pub struct Gitlink {
    pub path: Vec<u8>,
    pub commit: GitOid,
    /// The git tree id of the submodule commit, when its files are carried.
    pub tree: Option<GitOid>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGitlink {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    path_hex: Option<String>,
    commit: GitOid,
    // Absent unless carried, so a bundle without submodule content is written as before.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    tree: Option<GitOid>,
}

impl TryFrom<RawGitlink> for Gitlink {
    type Error = EntryPathError;
    fn try_from(raw: RawGitlink) -> Result<Self, EntryPathError> {
        Ok(Gitlink {
            path: decode_path(raw.path, raw.path_hex)?,
            commit: raw.commit,
            tree: raw.tree,
        })
    }
}

impl From<Gitlink> for RawGitlink {
    fn from(g: Gitlink) -> Self {
        let (path, path_hex) = encode_path(g.path);
        RawGitlink {
            path,
            path_hex,
            commit: g.commit,
            tree: g.tree,
        }
    }
}

/// The content of `bundle.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: String,
    pub version: u32,
    pub instance_id: String,
    /// The git tree id of `codebase/`, as `git write-tree` would give it.
    pub codebase_tree: GitOid,
    /// Every member but `bundle.json`, sorted by path bytes.
    pub members: Vec<ManifestMember>,
    /// Submodules of the codebase (full paths, `codebase/…`), sorted; absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gitlinks: Vec<Gitlink>,
}

impl Manifest {
    /// The bytes of `bundle.json`: fixed field order, two-space indent, a final newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).expect("a manifest always serializes");
        out.push(b'\n');
        out
    }

    /// Files in `codebase/`.
    pub fn codebase_members(&self) -> impl Iterator<Item = &ManifestMember> {
        self.members
            .iter()
            .filter(|m| m.path.starts_with(super::CODEBASE_DIR.as_bytes()))
    }

    pub fn member(&self, path: &str) -> Option<&ManifestMember> {
        self.members.iter().find(|m| m.path == path.as_bytes())
    }

    /// Why the version does not fit the members, if it does not: version 2 is version 1 with
    /// `vcs.json`, version 3 holds `expected.json` (and never `results.json`), so each version
    /// names exactly one set of members (the same members never make two bundle ids). A
    /// version this swe-ark does not read is not checked here.
    pub fn version_mismatch(&self) -> Option<String> {
        use super::{EXPECTED_MEMBER, RESULTS_MEMBER, VERSION_1, VERSION_2, VERSION_3};
        let vcs = crate::vcs::MEMBER;
        let has_vcs = self.member(vcs).is_some();
        let has_expected = self.member(EXPECTED_MEMBER).is_some();
        let has_results = self.member(RESULTS_MEMBER).is_some();
        match self.version {
            VERSION_1 | VERSION_2 if has_expected => Some(format!(
                "it lists {EXPECTED_MEMBER}, a member of format version {VERSION_3}, but says \
                 version {}",
                self.version
            )),
            VERSION_1 if has_vcs => Some(format!(
                "it lists {vcs}, a member of format version {VERSION_2}, but says version \
                 {VERSION_1}"
            )),
            VERSION_2 if !has_vcs => Some(format!(
                "it says version {VERSION_2}, which is version {VERSION_1} with {vcs}, but does \
                 not list {vcs}"
            )),
            VERSION_3 if !has_expected => Some(format!(
                "it says version {VERSION_3}, whose validation record is {EXPECTED_MEMBER}, but \
                 does not list it"
            )),
            VERSION_3 if has_results => Some(format!(
                "it says version {VERSION_3} but lists {RESULTS_MEMBER}, which version \
                 {VERSION_3} replaces with {EXPECTED_MEMBER}"
            )),
            _ => None,
        }
    }
}
