//! `index.json`: the rows of the index a release needs on the other side (instances, bundles,
//! objects, locks, validations, and with history mirrors and pins), without the times the
//! index keeps (the importing archive stamps its own), sorted, so the same release gives the
//! same bytes.

use serde::{Deserialize, Serialize};

use crate::digest::{GitOid, Sha256Digest};
use crate::store::{BundleRow, LockRow, PinRow, ValidationRow};

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
    pub verdict: String,
    pub reason_kind: String,
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

impl IndexSlice {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).unwrap_or_default();
        out.push(b'\n');
        out
    }
}

impl From<&BundleRow> for SliceBundle {
    fn from(b: &BundleRow) -> Self {
        SliceBundle {
            id: b.id,
            instance_id: b.instance_id.clone(),
            format_version: b.format_version,
            codebase_tree: b.codebase_tree,
            tar_size: b.tar_size,
            file_size: b.file_size,
            member_count: b.member_count,
            codebase_files: b.codebase_files,
        }
    }
}

impl From<&SliceBundle> for BundleRow {
    fn from(b: &SliceBundle) -> Self {
        BundleRow {
            id: b.id,
            instance_id: b.instance_id.clone(),
            format_version: b.format_version,
            codebase_tree: b.codebase_tree,
            tar_size: b.tar_size,
            file_size: b.file_size,
            member_count: b.member_count,
            codebase_files: b.codebase_files,
            packed_at: 0,
            manifest_piece: None,
        }
    }
}

impl From<&LockRow> for SliceLock {
    fn from(l: &LockRow) -> Self {
        SliceLock {
            id: l.id,
            repo: l.repo.clone(),
            version: l.version.clone(),
            commit_id: l.commit_id.clone(),
            python: l.python.clone(),
            packages: l.packages,
            artifacts: l.artifacts,
            bytes: l.bytes,
        }
    }
}

impl From<&SliceLock> for LockRow {
    fn from(l: &SliceLock) -> Self {
        LockRow {
            id: l.id,
            repo: l.repo.clone(),
            version: l.version.clone(),
            commit_id: l.commit_id.clone(),
            python: l.python.clone(),
            packages: l.packages,
            artifacts: l.artifacts,
            bytes: l.bytes,
            created_at: 0,
        }
    }
}

impl From<&ValidationRow> for SliceValidation {
    fn from(v: &ValidationRow) -> Self {
        SliceValidation {
            instance_id: v.instance_id.clone(),
            verdict: v.verdict.clone(),
            reason_kind: v.reason_kind.clone(),
            reason: v.reason.clone(),
            fail_to_pass: v.fail_to_pass,
            pass_to_pass: v.pass_to_pass,
            flaky: v.flaky,
            lock_id: v.lock_id.clone(),
            results: v.results,
            log_pre: v.log_pre,
            log_post: v.log_post,
            seconds: v.seconds,
        }
    }
}

impl From<&SliceValidation> for ValidationRow {
    fn from(v: &SliceValidation) -> Self {
        ValidationRow {
            instance_id: v.instance_id.clone(),
            verdict: v.verdict.clone(),
            reason_kind: v.reason_kind.clone(),
            reason: v.reason.clone(),
            fail_to_pass: v.fail_to_pass,
            pass_to_pass: v.pass_to_pass,
            flaky: v.flaky,
            lock_id: v.lock_id.clone(),
            results: v.results,
            log_pre: v.log_pre,
            log_post: v.log_post,
            seconds: v.seconds,
            validated_at: 0,
        }
    }
}

impl From<&PinRow> for SlicePin {
    fn from(p: &PinRow) -> Self {
        SlicePin {
            mirror: p.mirror.clone(),
            reference: p.reference.clone(),
            commit: p.commit.clone(),
            instance_id: p.instance_id.clone(),
            role: p.role.clone(),
        }
    }
}

impl From<&SlicePin> for PinRow {
    fn from(p: &SlicePin) -> Self {
        PinRow {
            mirror: p.mirror.clone(),
            reference: p.reference.clone(),
            commit: p.commit.clone(),
            instance_id: p.instance_id.clone(),
            role: p.role.clone(),
        }
    }
}
