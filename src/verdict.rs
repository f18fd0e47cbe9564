//! What became of an instance and why: the [`Verdict`] of a validation and the [`Reason`] a run
//! stopped or an instance was judged as it was. One spelling (kebab-case) for both, in
//! results.json, the index, replay's reports and the screen; the words of older replay reports
//! (`bundle_corrupt`) are still read.
//!
//! A leaf module: the index stores these, validation and replay produce them.

use std::fmt;
use std::str::FromStr;

/// What became of an instance.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Proven: at least one test goes from fail to pass, and (for a published instance) the
    /// lists are the published ones.
    Kept,
    /// Not a valid task instance, or it could not be run: see the reason.
    Discarded,
    /// A published instance whose lists did not come out as published.
    NotReproducible,
}

impl Verdict {
    pub const ALL: [Verdict; 3] = [Verdict::Kept, Verdict::Discarded, Verdict::NotReproducible];

    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Kept => "kept",
            Verdict::Discarded => "discarded",
            Verdict::NotReproducible => "not-reproducible",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A word that names no verdict or reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{word}` is not a known {what}")]
pub struct UnknownWord {
    pub word: String,
    pub what: &'static str,
}

impl FromStr for Verdict {
    type Err = UnknownWord;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Verdict::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownWord {
                word: s.to_string(),
                what: "verdict",
            })
    }
}

/// Declares [`Reason`] with its spelling, its older spelling in replay reports (if any), and
/// whether it is the archive's problem rather than the instance's.
macro_rules! reasons {
    ($($(#[$doc:meta])* $variant:ident = $word:literal $(/ $old:literal)? $(, $setup:ident)?;)*) => {
        /// Why an instance stopped, or why it was judged as it was.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Reason {
            $($(#[$doc])* $variant,)*
        }

        impl Reason {
            pub const ALL: &'static [Reason] = &[$(Reason::$variant,)*];

            pub fn as_str(&self) -> &'static str {
                match self {
                    $(Reason::$variant => $word,)*
                }
            }

            /// The spelling replay reports used before there was one.
            fn old_spelling(&self) -> Option<&'static str> {
                match self {
                    $(Reason::$variant => reasons!(@old $($old)?),)*
                }
            }

            /// A problem of the archive's, not the instance's (no lock, no mirror, no manifest,
            /// an environment that does not build, no sandbox): such a validation is reported,
            /// not recorded, so the next `validate` tries the instance again once the archive
            /// is fixed.
            pub fn is_setup_problem(&self) -> bool {
                match self {
                    $(Reason::$variant => reasons!(@setup $($setup)?),)*
                }
            }
        }
    };
    (@old) => { None };
    (@old $old:literal) => { Some($old) };
    (@setup) => { false };
    (@setup setup) => { true };
}

reasons! {
    // The archive's problems.
    /// No manifest context for the instance's repository and version.
    NoContext = "no-context", setup;
    NoMirror = "no-mirror", setup;
    NoLock = "no-lock", setup;
    /// The instance's own install failed offline at a base commit the context's lock was not
    /// made from (the instance came into the archive after it): lock the context again.
    LockDoesNotCover = "lock-does-not-cover", setup;
    /// The environment did not build from its lock.
    EnvBuildFailed = "env-build-failed" / "env_build_failed", setup;
    Sandbox = "sandbox", setup;
    UnknownLogParser = "unknown-log-parser", setup;
    /// A service of the context that did not start: its manifest or lock, not the instance.
    ServiceFailed = "service-failed" / "service_failed", setup;
    Io = "io", setup;
    // The instance's.
    BadInstance = "bad-instance";
    BaseCommitMissing = "base-commit-missing";
    MissingObject = "missing-object";
    History = "history";
    Checkout = "checkout";
    PreInstallFailed = "pre-install-failed" / "pre_install_failed";
    InstallFailed = "install-failed";
    TestPatchDoesNotApply = "test-patch-does-not-apply" / "test_patch_apply_failed";
    GoldPatchDoesNotApply = "gold-patch-does-not-apply";
    Timeout = "timeout";
    TestsDidNotRun = "tests-did-not-run";
    NoFailToPass = "no-fail-to-pass";
    DiffersFromPublished = "differs-from-published";
    /// Kept: the computed lists hold the published ones and more.
    CoversPublished = "covers-published";
    /// Kept: the published lists come out but for tests that cannot run here (they need the
    /// network, or a package only conda provides); replay grades with and without them.
    CannotRunHere = "cannot-run-here";
    // A replayed prediction's.
    UnknownInstance = "unknown-instance" / "unknown_instance";
    EmptyPatch = "empty-patch" / "empty_patch";
    PatchUnsafe = "patch-unsafe" / "patch_unsafe";
    PatchApplyFailed = "patch-apply-failed" / "patch_apply_failed";
    BundleCorrupt = "bundle-corrupt" / "bundle_corrupt";
    BundleIncomplete = "bundle-incomplete" / "bundle_incomplete";
    BundleMismatch = "bundle-mismatch" / "bundle_mismatch";
    LogParseFailed = "log-parse-failed" / "log_parse_failed";
    /// The test command exited non-zero while its log names no failed or errored test
    /// (swebench 5's check of a log against the exit code).
    LogContradictsExitCode = "log-contradicts-exit-code";
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for Reason {
    type Err = UnknownWord;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Reason::ALL
            .iter()
            .find(|r| r.as_str() == s || r.old_spelling() == Some(s))
            .copied()
            .ok_or_else(|| UnknownWord {
                word: s.to_string(),
                what: "reason",
            })
    }
}

impl serde::Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Reason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <String as serde::Deserialize>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// `Option<Reason>` as results.json and replay reports have always written it: the word, or
/// `""` for none.
pub mod reason_or_empty {
    use super::Reason;

    pub fn serialize<S: serde::Serializer>(r: &Option<Reason>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(r.map_or("", |r| r.as_str()))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Reason>, D::Error> {
        let s = <String as serde::Deserialize>::deserialize(d)?;
        if s.is_empty() {
            return Ok(None);
        }
        s.parse().map(Some).map_err(serde::de::Error::custom)
    }
}

/// The word of a reason, `""` for none.
pub fn reason_word(r: Option<Reason>) -> &'static str {
    r.map_or("", |r| r.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_and_reasons_fill_a_table_column() {
        // `ls --validated` lines its columns up with `{:<16}`.
        assert_eq!(format!("{:<6}|", Verdict::Kept), "kept  |");
        assert_eq!(format!("{:>9}|", Reason::Timeout), "  timeout|");
    }

    #[test]
    fn every_word_reads_back_and_old_words_still_read() {
        for r in Reason::ALL {
            assert_eq!(r.as_str().parse::<Reason>(), Ok(*r));
            assert!(!r.as_str().contains('_'), "{r}: one spelling, kebab-case");
        }
        assert_eq!(
            "bundle_corrupt".parse::<Reason>(),
            Ok(Reason::BundleCorrupt)
        );
        assert_eq!(
            "test_patch_apply_failed".parse::<Reason>(),
            Ok(Reason::TestPatchDoesNotApply)
        );
        assert!("no-such-reason".parse::<Reason>().is_err());
        for v in Verdict::ALL {
            assert_eq!(v.as_str().parse::<Verdict>(), Ok(v));
        }
    }

    #[test]
    fn none_is_written_empty() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct R {
            #[serde(with = "reason_or_empty")]
            k: Option<Reason>,
        }
        let none = serde_json::to_string(&R { k: None }).unwrap();
        assert_eq!(none, r#"{"k":""}"#);
        let some = serde_json::to_string(&R {
            k: Some(Reason::NoFailToPass),
        })
        .unwrap();
        assert_eq!(some, r#"{"k":"no-fail-to-pass"}"#);
        assert_eq!(
            serde_json::from_str::<R>(&some).unwrap().k,
            Some(Reason::NoFailToPass)
        );
        assert_eq!(serde_json::from_str::<R>(&none).unwrap().k, None);
    }
}

/// The index stores verdicts and reasons as their words (`reason_kind` is `''` when none).
mod sql {
    use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

    use super::{Reason, Verdict};

    impl ToSql for Verdict {
        fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
            Ok(ToSqlOutput::from(self.as_str()))
        }
    }

    impl FromSql for Verdict {
        fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
            value
                .as_str()?
                .parse()
                .map_err(|e| FromSqlError::Other(Box::new(e)))
        }
    }

    impl ToSql for Reason {
        fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
            Ok(ToSqlOutput::from(self.as_str()))
        }
    }

    /// A reason column: `''` is none.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ReasonColumn(pub Option<Reason>);

    impl ToSql for ReasonColumn {
        fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
            Ok(ToSqlOutput::from(super::reason_word(self.0)))
        }
    }

    impl FromSql for ReasonColumn {
        fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
            match value.as_str()? {
                "" => Ok(ReasonColumn(None)),
                word => word
                    .parse()
                    .map(|r| ReasonColumn(Some(r)))
                    .map_err(|e| FromSqlError::Other(Box::new(e))),
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn verdicts_and_reasons_round_trip_through_sqlite() {
            let db = rusqlite::Connection::open_in_memory().unwrap();
            db.execute_batch("CREATE TABLE t (v TEXT NOT NULL, r TEXT NOT NULL)")
                .unwrap();
            for (v, r) in [
                (Verdict::Kept, None),
                (Verdict::Discarded, Some(Reason::NoFailToPass)),
            ] {
                db.execute("DELETE FROM t", []).unwrap();
                db.execute("INSERT INTO t VALUES (?1, ?2)", (v, ReasonColumn(r)))
                    .unwrap();
                let (v2, r2): (Verdict, ReasonColumn) = db
                    .query_row("SELECT v, r FROM t", [], |row| {
                        Ok((row.get(0)?, row.get(1)?))
                    })
                    .unwrap();
                assert_eq!((v2, r2.0), (v, r));
            }
            db.execute("UPDATE t SET v = 'maybe'", []).unwrap();
            let bad = db.query_row("SELECT v FROM t", [], |row| row.get::<_, Verdict>(0));
            assert!(
                bad.unwrap_err()
                    .to_string()
                    .contains("`maybe` is not a known verdict")
            );
        }
    }
}

pub use sql::ReasonColumn;
