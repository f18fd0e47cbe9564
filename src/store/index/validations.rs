//! Validations: one per instance, the last.

use rusqlite::{Connection, params};

use crate::dataset::Instance;
use crate::digest::Sha256Digest;

use super::instances::upsert_instance;
use super::objects::insert_object;
use super::{Index, IndexError};

/// The outcome of validating an instance.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ValidationRow {
    pub instance_id: String,
    pub verdict: crate::verdict::Verdict,
    /// None (`''` in the index) when kept plainly.
    #[serde(serialize_with = "crate::verdict::reason_or_empty::serialize")]
    pub reason_kind: Option<crate::verdict::Reason>,
    pub reason: String,
    pub fail_to_pass: u64,
    pub pass_to_pass: u64,
    pub flaky: u64,
    pub lock_id: String,
    pub results: Sha256Digest,
    pub log_pre: Option<Sha256Digest>,
    pub log_post: Option<Sha256Digest>,
    pub seconds: f64,
    pub validated_at: i64,
}

/// An instance's validation; a new one replaces the last.
pub(super) fn upsert_validation(
    conn: &Connection,
    v: &ValidationRow,
    t: i64,
) -> rusqlite::Result<()> {
    let hex = |d: &Option<Sha256Digest>| d.map(|d| d.hex()).unwrap_or_default();
    conn.execute(
        "INSERT INTO validations (instance_id, verdict, reason_kind, reason, fail_to_pass,
             pass_to_pass, flaky, lock_id, results, log_pre, log_post, seconds, validated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
         ON CONFLICT(instance_id) DO UPDATE SET verdict = ?2, reason_kind = ?3, reason = ?4,
             fail_to_pass = ?5, pass_to_pass = ?6, flaky = ?7, lock_id = ?8, results = ?9,
             log_pre = ?10, log_post = ?11, seconds = ?12, validated_at = ?13",
        params![
            v.instance_id,
            v.verdict,
            crate::verdict::ReasonColumn(v.reason_kind),
            v.reason,
            v.fail_to_pass as i64,
            v.pass_to_pass as i64,
            v.flaky as i64,
            v.lock_id,
            v.results.hex(),
            hex(&v.log_pre),
            hex(&v.log_post),
            v.seconds,
            t
        ],
    )
    .map(|_| ())
}

impl Index {
    /// Records a validation, the objects it made and (for a collected instance that was
    /// kept) the instance with its lists, in one transaction.
    pub fn record_validation(
        &mut self,
        v: &ValidationRow,
        objects: &[(Sha256Digest, u64, &str)],
        instance: Option<&Instance>,
    ) -> Result<(), IndexError> {
        self.write(|tx, t| {
            for (id, size, kind) in objects {
                insert_object(tx, id, *size, kind, t)?;
            }
            if let Some(inst) = instance {
                upsert_instance(tx, inst, t)?;
            }
            Ok(upsert_validation(tx, v, t)?)
        })
    }

    /// Every validation, by instance id.
    pub fn validations(&self) -> Result<Vec<ValidationRow>, IndexError> {
        self.rows(
            "SELECT instance_id, verdict, reason_kind, reason, fail_to_pass, pass_to_pass,
                    flaky, lock_id, results, log_pre, log_post, seconds, validated_at
             FROM validations ORDER BY instance_id",
            [],
            |c| {
                Ok(ValidationRow {
                    instance_id: c.get(0)?,
                    verdict: c.get(1)?,
                    reason_kind: c.get::<crate::verdict::ReasonColumn>(2)?.0,
                    reason: c.get(3)?,
                    fail_to_pass: c.count(4)?,
                    pass_to_pass: c.count(5)?,
                    flaky: c.count(6)?,
                    lock_id: c.get(7)?,
                    results: c.hex(8)?,
                    log_pre: c.hex_or_empty(9)?,
                    log_post: c.hex_or_empty(10)?,
                    seconds: c.get(11)?,
                    validated_at: c.get(12)?,
                })
            },
        )
    }
}
