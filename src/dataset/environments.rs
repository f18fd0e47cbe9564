//! When a dataset's environments were built: `import` records it per dataset, and `env lock`
//! resolves as of it (docs/ENVIRONMENTS.md, "As of when"). A published dataset's
//! FAIL_TO_PASS / PASS_TO_PASS were proven in environments its maintainers built when they
//! validated it, with the packages of then, not of each commit's own era.

use std::time::SystemTime;

use super::Instance;

/// A published dataset whose environments were built at a known time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatasetProfile {
    pub name: &'static str,
    /// Other names it goes by (any case): swebench 5.0's short ones and the Hugging Face
    /// repositories it is published as.
    pub aliases: &'static [&'static str],
    /// RFC 3339, UTC.
    pub environments_as_of: &'static str,
    /// Where the date comes from, in a sentence.
    pub provenance: &'static str,
}

/// The dataset `import` assumes unless told otherwise: SWE-bench's own files.
pub const DEFAULT_DATASET: &str = "swe-bench";

/// Known datasets. The contexts in manifests/ are SWE-bench's containerized harness's
/// (swebench 4.1.0's specifications); the dates say when the environments the dataset's lists
/// were proven in were built, as far as the evidence goes (docs/RESULTS.md, "The date").
pub const DATASET_PROFILES: &[DatasetProfile] = &[
    DatasetProfile {
        name: "swe-bench",
        aliases: &["full", "SWE-bench/SWE-bench", "princeton-nlp/SWE-bench"],
        environments_as_of: "2024-01-26T00:00:00Z",
        provenance: "SWE-bench's published lists, proven by its validation before SWE-bench \
                     Lite was cut from it (2024-03-19): the day before pytest 8.0 \
                     (2024-01-27), which no longer runs nose-style tests; measured, sphinx's \
                     lists hold only before docutils 0.21 (2024-04-09). Newer releases that \
                     the specifications pin (tox 4.16.0, setuptools 70.0.0) pass as pins",
    },
    DatasetProfile {
        name: "swe-bench-lite",
        aliases: &[
            "lite",
            "SWE-bench/SWE-bench_Lite",
            "princeton-nlp/SWE-bench_Lite",
        ],
        environments_as_of: "2024-01-26T00:00:00Z",
        provenance: "SWE-bench Lite, a subset of SWE-bench whose lists it keeps: the same \
                     date as swe-bench's",
    },
    DatasetProfile {
        name: "swe-bench-verified",
        aliases: &[
            "verified",
            "SWE-bench/SWE-bench_Verified",
            "princeton-nlp/SWE-bench_Verified",
        ],
        environments_as_of: "2024-08-13T00:00:00Z",
        provenance: "SWE-bench Verified, released on 2024-08-13 after its 500 instances were \
                     validated with SWE-bench's containerized harness (swebench 2.0.x)",
    },
    DatasetProfile {
        name: "multi-swe-bench",
        aliases: &["ByteDance-Seed/Multi-SWE-bench"],
        environments_as_of: "2025-04-01T00:00:00Z",
        provenance: "Multi-SWE-bench, released with its harness on 2025-04-01 (its first \
                     commit, `Init mswebench`); its per-PR images were built from floating \
                     tags (rust:latest, node, gcc:latest) and resolved crates and npm packages \
                     on the day they were built, after the newest base commit (2025-01-26) \
                     and before the release",
    },
];

/// The known dataset `name` names: by its name or an alias, in any case.
pub fn dataset_profile(name: &str) -> Option<&'static DatasetProfile> {
    let name = name.trim();
    DATASET_PROFILES.iter().find(|p| {
        p.name.eq_ignore_ascii_case(name) || p.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    })
}

/// The name swebench gives a dataset swe-ark knows (its Hugging Face repository,
/// `SWE-bench/SWE-bench_Lite`); any other name as it is.
pub fn published_name(name: &str) -> String {
    dataset_profile(name)
        .and_then(|p| p.aliases.iter().find(|a| a.contains('/')))
        .map_or_else(|| name.to_string(), |a| a.to_string())
}

/// The names of [`DATASET_PROFILES`], for messages.
pub fn dataset_names() -> Vec<&'static str> {
    DATASET_PROFILES.iter().map(|p| p.name).collect()
}

/// A dataset as the index records it: its name and when its environments were built.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DatasetDate {
    pub name: String,
    /// RFC 3339 UTC; None: each environment setup commit's own date.
    pub environments_as_of: Option<String>,
    /// Where the date comes from, in a sentence.
    pub rule: String,
}

/// Why a dataset's environments date is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DatasetDateError {
    #[error(
        "unknown dataset `{name}`: known datasets are {}; for another dataset, say when its \
         environments were built with --environments-as-of YYYY-MM-DD (or `commit`, to resolve \
         each environment as of its environment setup commit)",
        .known.join(", ")
    )]
    Unknown { name: String, known: Vec<String> },
    #[error("--environments-as-of `{0}` is not a date (YYYY-MM-DD), an RFC 3339 time, or `commit`")]
    NotADate(String),
    #[error(
        "the environments date {when} of dataset `{name}` is in the future (now {now}): a \
         lock resolved as of it would change as packages are uploaded"
    )]
    Future {
        name: String,
        when: String,
        now: String,
    },
    #[error(
        "the environments date {when} of dataset `{name}` is before {} of its instance(s) were \
         created ({}): their environments cannot have been built before their pull requests \
         existed. If the file is another dataset, name it and say when its environments were \
         built (--dataset NAME --environments-as-of YYYY-MM-DD), or resolve each environment as \
         of its setup commit (--environments-as-of commit)",
        .instances.len(), .instances.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
    )]
    BeforeInstances {
        name: String,
        when: String,
        instances: Vec<String>,
    },
}

pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Parses `YYYY-MM-DD` (midnight UTC) or an RFC 3339 time.
pub fn parse_when(s: &str) -> Option<SystemTime> {
    let s = s.trim();
    let full = if s.len() == 10 {
        format!("{s}T00:00:00Z")
    } else {
        s.to_string()
    };
    humantime::parse_rfc3339_weak(full.trim_end_matches('Z')).ok()
}

/// The environments date of `instances`, imported as dataset `name`: the known dataset's date,
/// or `--environments-as-of` (`commit`: none). Refused when unknown, in the future (after
/// `now`), or before an instance was created.
pub fn environments_date(
    name: &str,
    environments_as_of: Option<&str>,
    instances: &[Instance],
    now: SystemTime,
) -> Result<DatasetDate, DatasetDateError> {
    // A known dataset is recorded by its own name, however it was called.
    let name = dataset_profile(name).map_or(name, |p| p.name);
    let (when, rule) = match environments_as_of.map(str::trim) {
        Some("commit") => {
            return Ok(DatasetDate {
                name: name.to_string(),
                environments_as_of: None,
                rule: "each environment setup commit's date (--environments-as-of commit)".into(),
            });
        }
        Some(text) => (
            parse_when(text).ok_or_else(|| DatasetDateError::NotADate(text.to_string()))?,
            "given with --environments-as-of".to_string(),
        ),
        None => {
            let p = dataset_profile(name).ok_or_else(|| DatasetDateError::Unknown {
                name: name.to_string(),
                known: dataset_names().iter().map(|n| n.to_string()).collect(),
            })?;
            let when = parse_when(p.environments_as_of)
                .ok_or_else(|| DatasetDateError::NotADate(p.environments_as_of.to_string()))?;
            (when, p.provenance.to_string())
        }
    };
    if when > now {
        return Err(DatasetDateError::Future {
            name: name.to_string(),
            when: rfc3339(when),
            now: rfc3339(now),
        });
    }
    let before: Vec<String> = instances
        .iter()
        .filter(|i| parse_when(&i.created_at).is_some_and(|c| c > when))
        .map(|i| format!("{} at {}", i.instance_id, i.created_at))
        .collect();
    if !before.is_empty() {
        return Err(DatasetDateError::BeforeInstances {
            name: name.to_string(),
            when: rfc3339(when),
            instances: before,
        });
    }
    Ok(DatasetDate {
        name: name.to_string(),
        environments_as_of: Some(rfc3339(when)),
        rule,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swebench_5s_names_and_hugging_faces_name_the_same_dataset() {
        for name in [
            "swe-bench-verified",
            "verified",
            "Verified",
            "SWE-bench/SWE-bench_Verified",
            "princeton-nlp/swe-bench_verified",
        ] {
            assert_eq!(
                dataset_profile(name).map(|p| p.name),
                Some("swe-bench-verified")
            );
        }
        assert_eq!(dataset_profile("full").map(|p| p.name), Some("swe-bench"));
        assert_eq!(
            dataset_profile("lite").map(|p| p.name),
            Some("swe-bench-lite")
        );
        assert_eq!(dataset_profile("SWE-bench/SWE-bench_Multimodal"), None);
        let now = parse_when("2026-01-01").unwrap();
        let d = environments_date("SWE-bench/SWE-bench_Lite", None, &[], now).unwrap();
        assert_eq!(d.name, "swe-bench-lite", "recorded by its own name");
        assert_eq!(
            d.environments_as_of.as_deref(),
            Some("2024-01-26T00:00:00Z")
        );
    }
}
