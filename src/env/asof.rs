//! "As of when" a lock resolves, and the two exceptions to that date.
//!
//! 1. **The cutoff** ([`Cutoff`]): `--exclude-newer`, else the date the instances' dataset built
//!    its environments ([`crate::dataset::DatasetProfile`]; recorded by `import`), else the environment setup
//!    commit's date (newly collected instances, which no dataset dates). A published dataset's
//!    FAIL_TO_PASS / PASS_TO_PASS come from environments built when the dataset was validated,
//!    not in each commit's own era; reproducing them means resolving as of then.
//! 2. **Explicit pins** ([`explicit_pins`]): a context's `name==version` requirements are
//!    honoured whatever their date. SWE-bench's specifications pin releases newer than the
//!    commits they serve (`setuptools==70.0.0` for a 2023 commit), and were revised after its
//!    images were first built (`tox==4.16.0`, July 2024).
//! 3. **Installers that run on the interpreter** ([`installers_floor`]): pip, setuptools and wheel
//!    resolve as of the later of the cutoff and the interpreter's first release, so that pip of
//!    2014 is never asked to run on Python 3.9 (`platform.linux_distribution` is gone there).
//! 4. **Build tools of a broken window** ([`tool_floors`]): a build tool whose releases of a
//!    window cannot run where the tests run today resolves as of its fixing release when the
//!    cutoff falls in that window (setuptools-scm 8.0 and today's git: [`TOOL_FLOORS`]).
//!
//! docs/ENVIRONMENTS.md tells the rules for users; each exception applied is a note in the lock.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;
use std::time::SystemTime;

use pep508_rs::pep440_rs::{Operator, Version};

use super::pylock::normalize;
pub use crate::dataset::{parse_when, rfc3339};

/// The installers whose floor is the interpreter's release ([`installers_floor`]).
pub const INSTALLERS: [&str; 3] = ["pip", "setuptools", "wheel"];

/// Where a lock's cutoff comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CutoffRule {
    /// `--exclude-newer`.
    Explicit,
    /// The instances' dataset: its name and why its date is what it is.
    Dataset { name: String, rule: String },
    /// The environment setup commit's committer date.
    Commit,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cutoff {
    pub when: SystemTime,
    pub rule: CutoffRule,
}

impl Cutoff {
    /// The rule in a few words, as the lock records it (`exclude-newer-rule`).
    pub fn describe(&self) -> String {
        match &self.rule {
            CutoffRule::Explicit => "--exclude-newer".to_string(),
            CutoffRule::Dataset { name, rule } => format!("dataset {name}: {rule}"),
            CutoffRule::Commit => "the environment setup commit's date".to_string(),
        }
    }

    /// What would admit a file uploaded at `uploaded`, for error messages.
    pub fn what_admits(&self, uploaded: SystemTime) -> String {
        let day = rfc3339(uploaded);
        match &self.rule {
            CutoffRule::Explicit => format!("an --exclude-newer of {day} or later would admit it"),
            CutoffRule::Dataset { name, .. } => format!(
                "the dataset {name}'s environments date excludes it; `env lock --exclude-newer \
                 {day}` (or `import --environments-as-of {day}`) would admit it"
            ),
            CutoffRule::Commit => format!(
                "`env lock --exclude-newer {day}`, or importing the instances with a dataset \
                 date (`import --dataset NAME` / `--environments-as-of`) of then or later, \
                 would admit it"
            ),
        }
    }
}

/// CPython `major.minor` → the day its `.0` was released.
const PYTHON_RELEASES: &[(&str, &str)] = &[
    ("3.6", "2016-12-23"),
    ("3.7", "2018-06-27"),
    ("3.8", "2019-10-14"),
    ("3.9", "2020-10-05"),
    ("3.10", "2021-10-04"),
    ("3.11", "2022-10-24"),
    ("3.12", "2023-10-02"),
    ("3.13", "2024-10-07"),
    ("3.14", "2025-10-07"),
];

/// The earliest instant pip, setuptools and wheel are resolved as of for an interpreter
/// `major.minor` (its first release), or None when unknown (then the cutoff alone applies).
pub fn installers_floor(python: &str) -> Option<SystemTime> {
    let mm: String = python.split('.').take(2).collect::<Vec<_>>().join(".");
    PYTHON_RELEASES
        .iter()
        .find(|(v, _)| *v == mm)
        .and_then(|(_, d)| parse_when(d))
}

/// A build tool whose releases between `broken_from` and `fixed_at` cannot run here, on
/// interpreters older than `below_python`; `fixed_at` is when its fixing release came out.
pub struct ToolFloor {
    /// Normalized project name.
    pub project: &'static str,
    pub broken_from: &'static str,
    pub fixed_at: &'static str,
    pub below_python: (u32, u32),
    pub why: &'static str,
}

/// Data, for every context alike (docs/ENVIRONMENTS.md, "As of when").
pub const TOOL_FLOORS: &[ToolFloor] = &[ToolFloor {
    project: "setuptools-scm",
    // 8.0.0 .. 8.0.4; 8.1.0 reads the dates. Its files were uploaded at 15:07:55 and a
    // fraction: the floor is a few seconds later.
    broken_from: "2023-09-20T10:40:40Z",
    fixed_at: "2024-05-06T15:08:00Z",
    below_python: (3, 11),
    why: "setuptools-scm 8.0 reads git's commit dates with `datetime.fromisoformat`, which \
          before Python 3.11 cannot read the `Z` that git 2.45 and later print for a UTC \
          date (`--format=%cI`); 8.1.0 reads them",
}];

/// The build tools that resolve as of a later instant than `cutoff` for an interpreter
/// `python` (major.minor…): normalized project name → (that instant, why).
pub fn tool_floors(
    python: &str,
    cutoff: SystemTime,
) -> BTreeMap<String, (SystemTime, &'static str)> {
    let mut parts = python.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let mm = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    TOOL_FLOORS
        .iter()
        .filter(|t| mm < t.below_python)
        .filter_map(|t| {
            let (from, fixed) = (parse_when(t.broken_from)?, parse_when(t.fixed_at)?);
            (from <= cutoff && cutoff < fixed).then(|| (t.project.to_string(), (fixed, t.why)))
        })
        .collect()
}

/// The explicit pins among requirement lines: normalized name → the exact versions named with
/// `==` (no wildcard) or `===`. Lines that are not requirements (options, comments, paths,
/// URLs) are skipped.
pub fn explicit_pins<'a>(
    lines: impl IntoIterator<Item = &'a str>,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in lines {
        let line = line.split(" #").next().unwrap_or("").trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('-') {
            continue;
        }
        let Ok(req) = pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(line) else {
            continue;
        };
        let Some(pep508_rs::VersionOrUrl::VersionSpecifier(specs)) = &req.version_or_url else {
            continue;
        };
        for s in specs.iter() {
            if matches!(s.operator(), Operator::Equal | Operator::ExactEqual) {
                out.entry(normalize(req.name.as_ref()))
                    .or_default()
                    .insert(s.version().to_string());
            }
        }
    }
    out
}

/// A requirement string as pip prints it (`filelock>=3.15.4`, `setuptools==70.0.0`): its
/// normalized name and whether `version` satisfies it. None when it does not parse.
pub struct Requirement {
    pub name: String,
    inner: pep508_rs::Requirement<pep508_rs::VerbatimUrl>,
}

impl Requirement {
    pub fn parse(text: &str) -> Option<Requirement> {
        let inner = pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(text.trim()).ok()?;
        Some(Requirement {
            name: normalize(inner.name.as_ref()),
            inner,
        })
    }

    /// Whether `version` satisfies the version part (a requirement with none takes any).
    pub fn admits(&self, version: &str) -> bool {
        let Ok(v) = Version::from_str(version) else {
            return false;
        };
        match &self.inner.version_or_url {
            Some(pep508_rs::VersionOrUrl::VersionSpecifier(s)) => s.contains(&v),
            _ => true,
        }
    }
}

/// The requirements pip could not satisfy, from its output: `(requirement, parent)` where
/// pip said what asked for it (`… the requirement X (from Y)`).
pub fn unmet_requirements(pip_output: &str) -> Vec<(String, Option<String>)> {
    static FOUND: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    static SATISFIES: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let found = FOUND.get_or_init(|| {
        regex::Regex::new(r"No matching distribution found for ([^\s(][^\n]*?)\s*$")
            .expect("a valid regex")
    });
    let satisfies = SATISFIES.get_or_init(|| {
        regex::Regex::new(
            r"Could not find a version that satisfies the requirement (.+?) \(from (?:versions: |([^)]*)\))",
        )
        .expect("a valid regex")
    });
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    for line in pip_output.lines() {
        let line = line.trim_start_matches("  | ");
        if let Some(c) = satisfies.captures(line) {
            let req = c[1].trim().to_string();
            let parent = c.get(2).map(|p| p.as_str().trim().to_string());
            if let Some(e) = out.iter_mut().find(|(r, _)| *r == req) {
                e.1 = e.1.take().or(parent);
            } else {
                out.push((req, parent));
            }
        } else if let Some(c) = found.captures(line) {
            let req = c[1].trim().to_string();
            if !out.iter().any(|(r, _)| *r == req) {
                out.push((req, None));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_floor_applies_in_its_window_below_its_python_only() {
        let at = |d: &str| parse_when(d).unwrap();
        let fixed = at("2024-05-06T15:08:00Z");
        let f = tool_floors("3.9.18", at("2024-01-26T00:00:00Z"));
        assert_eq!(f.get("setuptools-scm").map(|x| x.0), Some(fixed));
        assert!(tool_floors("3.11.7", at("2024-01-26T00:00:00Z")).is_empty());
        assert!(tool_floors("3.9", at("2023-06-01T00:00:00Z")).is_empty());
        assert!(tool_floors("3.9", at("2024-06-27T18:19:00Z")).is_empty());
        assert!(tool_floors("3.10", at("2023-09-20T10:40:40Z")).contains_key("setuptools-scm"));
    }

    #[test]
    fn pins_are_exact_equalities_only() {
        let pins = explicit_pins([
            "setuptools==70.0.0",
            "Jinja2 == 3.0.3",
            "numpy==1.21.*",
            "pandas<2.0.0",
            "tox==4.16.0 ; python_version < '3.11'",
            "# a comment",
            "-r other.txt",
            "foo===1.0.post1",
            "not a requirement ==",
        ]);
        let got: Vec<(&str, Vec<&str>)> = pins
            .iter()
            .map(|(k, v)| (k.as_str(), v.iter().map(String::as_str).collect()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("foo", vec!["1.0.post1"]),
                ("jinja2", vec!["3.0.3"]),
                ("setuptools", vec!["70.0.0"]),
                ("tox", vec!["4.16.0"]),
            ]
        );
    }

    #[test]
    fn pip_failures_name_the_requirement_and_its_parent() {
        let out = "  | ERROR: Could not find a version that satisfies the requirement filelock>=3.15.4 (from tox) (from versions: 3.0, 3.1)\n\
                   ERROR: No matching distribution found for filelock>=3.15.4\n\
                   ERROR: Could not find a version that satisfies the requirement setuptools==70.0.0 (from versions: 0.6b1)\n\
                   ERROR: No matching distribution found for setuptools==70.0.0";
        assert_eq!(
            unmet_requirements(out),
            vec![
                ("filelock>=3.15.4".to_string(), Some("tox".to_string())),
                ("setuptools==70.0.0".to_string(), None),
            ]
        );
        let r = Requirement::parse("filelock>=3.15.4").unwrap();
        assert!(r.admits("3.16.0") && !r.admits("3.15.3"));
        assert_eq!(r.name, "filelock");
    }

    #[test]
    fn floors_and_dates() {
        assert_eq!(
            installers_floor("3.9").map(rfc3339).as_deref(),
            Some("2020-10-05T00:00:00Z")
        );
        assert_eq!(installers_floor("3.9.18"), installers_floor("3.9"));
        assert!(installers_floor("2.7").is_none());
        assert!(parse_when("2024-06-27T18:19:00Z").is_some());
        assert!(parse_when("last week").is_none());
    }
}
