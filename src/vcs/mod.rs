//! What git says about an instance's base commit, and a git work tree that says the same.
//!
//! SWE-bench's images keep the clone's history and the tags no newer than the base commit, so
//! projects whose version comes from git (setuptools_scm, versioneer, hatch-vcs, pbr, …) see a
//! version such as `4.4.2.dev6+g…`. A bundle holds no history; instead it holds a
//! [`VcsRecord`] (`vcs.json`): the base commit, `git describe --tags --long`, the nearest tags
//! with their distances, the number of commits and the base commit's date.
//!
//! - [`record`]: the record, computed from a repository (a mirror, or a clone);
//! - [`worktree`]: a directory made a git work tree whose history answers `git describe` as
//!   the record says (validation and replay both use it).
//!
//! docs/BUNDLE-FORMAT.md describes `vcs.json`; docs/VALIDATION.md and docs/REPLAY.md the work
//! tree's history.

pub mod record;
pub mod worktree;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::digest::GitOid;

pub use record::record;
pub use worktree::{build_work_tree, commit_setup};

/// The bundle member that holds the record.
pub const MEMBER: &str = "vcs.json";

/// The most tags a record holds: enough that a tool matching tags by a pattern (setuptools_scm
/// takes `*[0-9]*`) still finds its tag when the nearest ones do not match.
pub const MAX_TAGS: usize = 8;

/// The largest `vcs.json` a reader accepts (a record of eight tags is under 2 KiB).
pub const MAX_MEMBER_SIZE: u64 = 64 * 1024;

/// One tag reachable from the base commit.
///
/// Fields in sorted order: the struct's order is the JSON's, and the JSON's keys are sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TagRecord {
    /// An annotated tag (a tag object), rather than a lightweight one (a bare ref).
    pub annotated: bool,
    /// `git rev-list --count TAG..BASE`: commits of the base's history that the tag's lacks.
    pub distance: u64,
    /// The tag's name, without `refs/tags/`.
    pub name: String,
}

/// What git says about a base commit: the content of `vcs.json`.
///
/// Fields in sorted order: the struct's order is the JSON's, and the JSON's keys are sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VcsRecord {
    pub base_commit: GitOid,
    /// `git rev-list --count BASE`: the commits of the base's history, itself included.
    pub commits: u64,
    /// The base commit's committer date as git stores it: unix seconds and the offset
    /// (`1556784672 +0200`).
    pub committer_date: String,
    /// `git describe --tags --long --abbrev=40 BASE` with only the tags that count; `null`
    /// when no tag is reachable.
    pub describe: Option<String>,
    /// The tags that count, nearest first as `git describe` prefers them: the first is the
    /// one `describe` names; at most [`MAX_TAGS`].
    pub tags: Vec<TagRecord>,
}

/// Why a record could not be made, read or turned into a work tree.
#[derive(Debug, thiserror::Error)]
pub enum VcsError {
    #[error("git {args} (in {dir}) failed: {detail}")]
    Git {
        args: String,
        dir: PathBuf,
        detail: String,
    },
    #[error("{dir}: {detail}")]
    History { dir: PathBuf, detail: String },
    #[error("vcs.json is not a valid VCS record: {0}")]
    Malformed(String),
    #[error("cannot write `{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl VcsRecord {
    /// The bytes of `vcs.json`: keys sorted, two-space indent, a final newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).expect("a VCS record always serializes");
        out.push(b'\n');
        out
    }

    /// Reads `vcs.json`: it must be a valid record in exactly the bytes [`to_bytes`] gives.
    ///
    /// [`to_bytes`]: VcsRecord::to_bytes
    pub fn from_bytes(bytes: &[u8]) -> Result<VcsRecord, VcsError> {
        let record: VcsRecord =
            serde_json::from_slice(bytes).map_err(|e| VcsError::Malformed(e.to_string()))?;
        record
            .check()
            .map_err(|e| VcsError::Malformed(e.to_string()))?;
        if record.to_bytes() != bytes {
            return Err(VcsError::Malformed(
                "it is not in canonical form (keys sorted, two-space indent, a final newline)"
                    .into(),
            ));
        }
        Ok(record)
    }

    /// What `git describe --tags --long --abbrev=40` says when `tags` is the tags that count.
    pub fn describe_of(base_commit: &GitOid, tags: &[TagRecord]) -> Option<String> {
        tags.first()
            .map(|t| format!("{}-{}-g{base_commit}", t.name, t.distance))
    }

    /// The committer date as unix seconds and offset (`+0200`).
    pub fn date(&self) -> Result<(u64, &str), RecordError> {
        parse_raw_date(&self.committer_date)
    }

    /// Why the record is not valid, if it is not.
    pub fn check(&self) -> Result<(), RecordError> {
        self.date()?;
        if self.commits == 0 {
            return Err(RecordError::NoCommits);
        }
        if self.tags.len() > MAX_TAGS {
            return Err(RecordError::TooManyTags(self.tags.len()));
        }
        let mut names = std::collections::HashSet::new();
        for t in &self.tags {
            if let Some(why) = bad_tag_name(&t.name) {
                return Err(RecordError::BadTagName {
                    name: t.name.clone(),
                    why,
                });
            }
            if !names.insert(t.name.as_str()) {
                return Err(RecordError::TagTwice(t.name.clone()));
            }
            if t.distance >= self.commits {
                return Err(RecordError::TagTooFar {
                    name: t.name.clone(),
                    distance: t.distance,
                    commits: self.commits,
                });
            }
        }
        let expected = Self::describe_of(&self.base_commit, &self.tags);
        if self.describe != expected {
            return Err(RecordError::WrongDescribe {
                found: self.describe.clone(),
                expected,
            });
        }
        Ok(())
    }
}

/// Why a VCS record is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("`committer_date` `{0}` is not `<unix seconds> <+|-hhmm>`")]
    BadDate(String),
    #[error("`commits` is 0; the base commit counts itself")]
    NoCommits,
    #[error("it lists {0} tags, more than {MAX_TAGS}")]
    TooManyTags(usize),
    #[error("tag `{name}`: {why}")]
    BadTagName { name: String, why: &'static str },
    #[error("tag `{0}` is listed twice")]
    TagTwice(String),
    #[error("tag `{name}` is {distance} commits away, but the history has only {commits}")]
    TagTooFar {
        name: String,
        distance: u64,
        commits: u64,
    },
    #[error("`describe` is {}, but its first tag makes it {}", show(.found), show(.expected))]
    WrongDescribe {
        found: Option<String>,
        expected: Option<String>,
    },
}

fn show(describe: &Option<String>) -> String {
    match describe {
        Some(d) => format!("`{d}`"),
        None => "null".into(),
    }
}

/// `<seconds> <+|-><hhmm>`, as git stores a date.
fn parse_raw_date(date: &str) -> Result<(u64, &str), RecordError> {
    let bad = || RecordError::BadDate(date.to_string());
    let (secs, tz) = date.split_once(' ').ok_or_else(bad)?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(secs) || (secs.len() > 1 && secs.starts_with('0')) {
        return Err(bad());
    }
    let secs: u64 = secs.parse().map_err(|_| bad())?;
    let tz_ok = tz.len() == 5 && matches!(tz.as_bytes()[0], b'+' | b'-') && digits(&tz[1..]);
    if !tz_ok {
        return Err(bad());
    }
    Ok((secs, tz))
}

/// Why `name` cannot be a tag name (git's `check-ref-format` rules for `refs/tags/<name>`).
pub fn bad_tag_name(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("the name is empty");
    }
    if name
        .bytes()
        .any(|b| b < 0x20 || b == 0x7f || b" ~^:?*[\\".contains(&b))
    {
        return Some("the name has a control character, a space or one of ~^:?*[\\");
    }
    if name.contains("..") || name.contains("@{") || name == "@" {
        return Some("the name has `..` or `@{`, or is `@`");
    }
    if name.starts_with('-') {
        return Some("the name starts with `-`");
    }
    if name.ends_with('.') {
        return Some("the name ends with `.`");
    }
    for part in name.split('/') {
        if part.is_empty() {
            return Some("the name has an empty path component");
        }
        if part.starts_with('.') || part.ends_with(".lock") {
            return Some("a component of the name starts with `.` or ends with `.lock`");
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> VcsRecord {
        let base: GitOid = "0123456789abcdef0123456789abcdef01234567".parse().unwrap();
        let tags = vec![
            TagRecord {
                annotated: true,
                distance: 6,
                name: "4.4.2".into(),
            },
            TagRecord {
                annotated: false,
                distance: 40,
                name: "4.4.1".into(),
            },
        ];
        VcsRecord {
            base_commit: base,
            commits: 100,
            committer_date: "1556784672 +0200".into(),
            describe: VcsRecord::describe_of(&base, &tags),
            tags,
        }
    }

    #[test]
    fn canonical_bytes_round_trip_and_keys_are_sorted() {
        let r = sample();
        let bytes = r.to_bytes();
        assert_eq!(VcsRecord::from_bytes(&bytes).unwrap(), r);
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.starts_with("{\n  \"base_commit\": "), "{text}");
        assert!(text.contains("\"describe\": \"4.4.2-6-g0123456789abcdef"));
        // Keys sorted at every level, as a canonicalizer would write them.
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let mut again = serde_json::to_vec_pretty(&v).unwrap();
        again.push(b'\n');
        assert_eq!(again, bytes);
    }

    #[test]
    fn bad_records_are_refused_with_the_reason() {
        let refuse = |r: &VcsRecord| {
            VcsRecord::from_bytes(&r.to_bytes())
                .unwrap_err()
                .to_string()
        };
        let mut r = sample();
        r.describe = Some("4.4.1-40-g0123".into());
        assert!(
            refuse(&r).contains("its first tag makes it"),
            "{}",
            refuse(&r)
        );
        let mut r = sample();
        r.tags[1].name = "bad name".into();
        assert!(refuse(&r).contains("tag `bad name`"));
        let mut r = sample();
        r.tags[1].distance = 100;
        assert!(refuse(&r).contains("only 100"));
        let mut r = sample();
        r.committer_date = "yesterday".into();
        assert!(refuse(&r).contains("committer_date"));
        let mut r = sample();
        r.tags[1].name = r.tags[0].name.clone();
        assert!(refuse(&r).contains("listed twice"));

        // Not canonical, unknown fields, not JSON.
        let compact = serde_json::to_vec(&sample()).unwrap();
        assert!(
            VcsRecord::from_bytes(&compact)
                .unwrap_err()
                .to_string()
                .contains("canonical")
        );
        let mut v = serde_json::to_value(sample()).unwrap();
        v["extra"] = serde_json::json!(1);
        assert!(
            VcsRecord::from_bytes(&serde_json::to_vec_pretty(&v).unwrap())
                .unwrap_err()
                .to_string()
                .contains("unknown field")
        );
        assert!(VcsRecord::from_bytes(b"{").is_err());
    }

    #[test]
    fn tag_names_follow_gits_rules() {
        for good in ["v1.0", "sympy-1.4rc1", "release/2.0", "1.0-beta+x"] {
            assert_eq!(bad_tag_name(good), None, "{good}");
        }
        for bad in [
            "", "a b", "a..b", "a~1", "a^", "x:y", "*", "a[", "a\\b", "-x", "x.", "a//b", "/a",
            "a/", ".a", "a.lock", "@", "a@{b",
        ] {
            assert!(bad_tag_name(bad).is_some(), "{bad:?}");
        }
    }
}
