//! `index.json`: the rows of the index a release needs on the other side (instances, bundles,
//! objects, locks, validations, with history mirrors and pins, with `--installed-states`
//! installed states), without the times the index keeps (the importing archive stamps its
//! own), sorted, so the same release gives the same bytes.

use serde::{Deserialize, Serialize};

use crate::digest::{GitOid, Sha256Digest};
use crate::store::{BundleRow, InstalledStateRow, LockRow, PinRow, ValidationRow};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexSlice {
    /// Each instance's fields as its `instance.json` holds them, by instance id.
    pub instances: Vec<serde_json::Value>,
    pub bundles: Vec<SliceBundle>,
    pub objects: Vec<SliceObject>,
    pub locks: Vec<SliceLock>,
    pub validations: Vec<SliceValidation>,
    #[serde(default)]
    pub mirrors: Vec<SliceMirror>,
    #[serde(default)]
    pub pins: Vec<SlicePin>,
    /// With `export --installed-states`, by key: absent otherwise, so that a file without
    /// them is what it was before they could travel.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub installed_states: Vec<SliceInstalledState>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SliceBundle {
    pub id: Sha256Digest,
    pub instance_id: String,
    pub format_version: u32,
    pub codebase_tree: GitOid,
    pub tar_size: u64,
    pub file_size: u64,
    pub member_count: u64,
    pub codebase_files: u64,
    /// Version 2: the bundle's `bundle.json` piece (its members' pieces are named in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_piece: Option<Sha256Digest>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SliceObject {
    pub id: Sha256Digest,
    pub size: u64,
    pub kind: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SliceLock {
    pub id: Sha256Digest,
    pub repo: String,
    pub version: String,
    pub commit_id: String,
    pub python: String,
    pub packages: u64,
    pub artifacts: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SliceValidation {
    pub instance_id: String,
    pub verdict: crate::verdict::Verdict,
    #[serde(with = "crate::verdict::reason_or_empty")]
    pub reason_kind: Option<crate::verdict::Reason>,
    pub reason: String,
    pub fail_to_pass: u64,
    pub pass_to_pass: u64,
    pub flaky: u64,
    pub lock_id: String,
    pub results: Sha256Digest,
    pub log_pre: Option<Sha256Digest>,
    pub log_post: Option<Sha256Digest>,
    /// How long the validation took, as the validating archive measured it.
    pub seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SliceMirror {
    pub name: String,
    /// Where it was fetched from ('' for none).
    pub url: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlicePin {
    pub mirror: String,
    pub reference: String,
    pub commit: String,
    pub instance_id: String,
    pub role: String,
}

/// An installed state (docs/REPLAY.md, "The installed state"): made by some machine's run,
/// so not covered by the release's root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SliceInstalledState {
    pub key: Sha256Digest,
    pub object: Sha256Digest,
    pub lock_id: String,
    pub repo: String,
    pub base_commit: String,
    pub instance_id: String,
    pub editable: bool,
    pub env_entries: u64,
    pub tree_entries: u64,
    pub size: u64,
    pub install_seconds: f64,
}

impl IndexSlice {
    pub fn to_bytes(&self) -> Vec<u8> {
        super::json_member(self)
    }
}

/// `From` both ways between a slice's record and the index row it carries: the fields they
/// share are copied; the row's own (times, where it is stored) are set to `own` on the way in,
/// as the importing archive stamps its own.
macro_rules! both_ways {
    ($slice:ident, $row:ident, [$($field:ident),* $(,)?], {$($own:ident: $value:expr),* $(,)?}) => {
        impl From<&$row> for $slice {
            fn from(r: &$row) -> Self {
                $slice { $($field: Clone::clone(&r.$field)),* }
            }
        }

        impl From<&$slice> for $row {
            fn from(s: &$slice) -> Self {
                $row { $($field: Clone::clone(&s.$field),)* $($own: $value),* }
            }
        }
    };
}

both_ways!(
    SliceBundle,
    BundleRow,
    [
        id, instance_id, format_version, codebase_tree, tar_size, file_size, member_count,
        codebase_files, manifest_piece,
    ],
    {packed_at: 0}
);
both_ways!(
    SliceLock,
    LockRow,
    [id, repo, version, commit_id, python, packages, artifacts, bytes],
    {created_at: 0}
);
both_ways!(
    SliceValidation,
    ValidationRow,
    [
        instance_id, verdict, reason_kind, reason, fail_to_pass, pass_to_pass, flaky, lock_id,
        results, log_pre, log_post, seconds,
    ],
    {validated_at: 0}
);
both_ways!(
    SlicePin,
    PinRow,
    [mirror, reference, commit, instance_id, role],
    {}
);
both_ways!(
    SliceInstalledState,
    InstalledStateRow,
    [
        key, object, lock_id, repo, base_commit, instance_id, editable, env_entries,
        tree_entries, size, install_seconds,
    ],
    {made_at: 0}
);
