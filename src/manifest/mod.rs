//! Executable contexts: per repository and release version, the Python, packages, install and
//! test commands that make its tests run. One TOML file per repository in `manifests/`; the
//! schema is documented in `manifests/README.md`. A repository no manifest names gets a context
//! inferred from its build files ([`infer`]).

pub mod infer;
mod service;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::dataset::is_repo;
pub use service::Service;
use service::check_services;
pub(crate) use service::is_plain_service_name;

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("cannot read manifests in `{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("manifest `{path}` is not valid: {detail}")]
    Invalid { path: PathBuf, detail: String },
    #[error("`{path}` and `{other}` both describe {repo}")]
    Duplicate {
        repo: String,
        path: PathBuf,
        other: PathBuf,
    },
    #[error(
        "no manifest describes repository {repo}; {} (known: {})",
        infer::what_to_write(repo),
        .known.join(", ")
    )]
    UnknownRepo { repo: String, known: Vec<String> },
    #[error(
        "the manifest of {repo} has no version {version}; known: {}{how}",
        .known.join(", ")
    )]
    UnknownVersion {
        repo: String,
        version: String,
        known: Vec<String>,
        /// How a row that names no version gets one (` (…)`), or empty.
        how: String,
    },
    #[error(
        "the context of {repo} {version} has no `{field}` (set it in the version or in [defaults])"
    )]
    Incomplete {
        repo: String,
        version: String,
        field: &'static str,
    },
}

/// How `collect` reads the version of this repository, instead of its default rule: the first
/// capture group of `pattern` in `file` at the base commit.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct VersionRule {
    pub file: String,
    pub pattern: String,
}

/// The fields a version (or `[defaults]`) may set; unset fields fall back to the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Fields {
    python: Option<String>,
    node: Option<String>,
    requirements: Option<Vec<String>>,
    packages: Option<Vec<String>>,
    pip_packages: Option<Vec<String>>,
    conda_environment: Option<Vec<String>>,
    /// Debian packages a native (C/C++) context carries (`crate::context::native`).
    debian: Option<Vec<String>>,
    /// Programs of the machine the context's runs do not see (its image had none).
    hidden_programs: Option<Vec<String>>,
    /// The dataset's image never checked its submodules out: they stay empty directories.
    empty_submodules: Option<bool>,
    pre_install: Option<Vec<String>>,
    install: Option<String>,
    test_cmd: Option<String>,
    eval_commands: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    notes: Option<String>,
    services: Option<Vec<Service>>,
    /// The pull requests (first and last number, inclusive) whose instances this version
    /// takes, for datasets whose rows name no version (Multi-SWE-bench's): how the dataset's
    /// own harness chose their image, as data.
    pulls: Option<[u64; 2]>,
    /// The version's own log parser, where it differs from the file's (a dataset whose
    /// harness reads some pull requests' logs otherwise).
    log_parser: Option<String>,
    /// Seconds each command of the context may run when the command line names none.
    timeout: Option<u64>,
    /// The rows whose `number_interval` is this take the version (Multi-SWE-bench's handlers
    /// registered by it, `<repo>_<N>_to_<M>.py`, serve only such rows); [`RepoManifest::
    /// version_for_pull`] never gives it to a row without one.
    number_interval: Option<String>,
}

/// A Multi-SWE-bench handler's own `parse_log`, carried as data (`crate::logparse::handler`):
/// the code defining the class named by the table's key, and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct HandlerParser {
    source: String,
    code: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    repo: String,
    source: String,
    /// The kind of context (`python` when absent): what `crate::context` builds it with.
    #[serde(default)]
    kind: String,
    log_parser: String,
    /// Handler parsers by class name, which `log_parser` (the file's or a version's) may name.
    #[serde(default)]
    handler_parsers: BTreeMap<String, HandlerParser>,
    #[serde(default)]
    version_rule: Option<VersionRule>,
    #[serde(default)]
    defaults: Fields,
    versions: BTreeMap<String, Fields>,
}

/// A program's file name, as a search of PATH takes it: not empty, no `/`, no NUL, not `.`
/// or `..`.
pub(crate) fn is_program_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0'])
}

/// A command that needs the system's package manager: outside a Python lock, and not run.
pub fn is_system_command(cmd: &str) -> bool {
    cmd.split(['&', ';', '|']).map(str::trim).any(|c| {
        let first = c.split_whitespace().next().unwrap_or("");
        matches!(
            first,
            "apt-get" | "apt" | "yum" | "dnf" | "apk" | "conda" | "sudo"
        )
    })
}

/// One repository's manifest.
#[derive(Debug, Clone)]
pub struct RepoManifest {
    pub repo: String,
    pub source: String,
    /// The kind of its contexts (empty: Python).
    pub kind: String,
    pub log_parser: String,
    handler_parsers: BTreeMap<String, HandlerParser>,
    pub version_rule: Option<VersionRule>,
    pub path: PathBuf,
    /// The file as it was read: an archive keeps it with what was made from it.
    pub text: String,
    /// Where it came from when no file gave it: inferred from the repository's build files.
    pub inferred: Option<infer::Inferred>,
    defaults: Fields,
    versions: BTreeMap<String, Fields>,
}

/// The executable context of one repository version, defaults applied.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Context {
    /// The kind of context (`crate::context`); empty for Python, the kind every context was
    /// before there were others (and so left out of `env/spec.toml`: bundles keep their ids).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    pub repo: String,
    pub version: String,
    /// major.minor.
    pub python: String,
    /// The node release a `node` context runs with (`18`: the newest 18.x as of the cutoff);
    /// empty: the machine's. Left out of `env/spec.toml` when empty, so that other kinds'
    /// bundles keep their ids.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node: String,
    /// Requirement files in the repository at the commit (`pip install -r`).
    pub requirements: Vec<String>,
    pub packages: Vec<String>,
    pub pip_packages: Vec<String>,
    /// Conda environment files in the repository at the commit, in order of preference:
    /// SWE-bench builds the environment from the first that exists; swe-ark maps it to pip
    /// (`env::conda`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conda_environment: Vec<String>,
    /// Debian packages (with their dependencies) a native context carries; empty elsewhere
    /// (and so left out of `env/spec.toml`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub debian: Vec<String>,
    /// Programs of the machine that the context's runs do not see, because the image its
    /// dataset ran in had none (valgrind, which some builds use when they find it): each file
    /// of that name in the system's program folders is hidden ([`crate::sandbox::Spec::hidden`]).
    /// Left out of `env/spec.toml` when empty, so that other contexts' bundles keep their ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden_programs: Vec<String>,
    /// The image its dataset ran in was a `git clone` and a checkout, with no `git submodule
    /// update`: every submodule of the codebase stays an empty directory, as there, and none
    /// is mirrored, carried or pinned for it. False (submodules filled from their mirrors,
    /// as jq's image's `git submodule update --init` filled them) is left out of
    /// `env/spec.toml`, so that other contexts' bundles keep their ids.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub empty_submodules: bool,
    pub pre_install: Vec<String>,
    pub install: String,
    pub test_cmd: String,
    pub eval_commands: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub log_parser: String,
    pub services: Vec<Service>,
    /// What is not faithful to SWE-bench's own context (conda-only parts), if anything.
    pub notes: String,
    /// No manifest named the repository: the context was inferred from its build files. Left
    /// out of `env/spec.toml` when absent, so that other contexts' bundles keep their ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inferred: Option<infer::Inferred>,
    /// Seconds each command may run, where the context needs other than the default (a test
    /// suite that takes longer on 2 cores); a `--timeout` given wins. Left out of
    /// `env/spec.toml` when unset, so that other contexts' bundles keep their ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
}

/// Orders versions as numbers (`0.9` before `0.12`), text after.
fn version_key(v: &str) -> (Vec<u64>, String) {
    let nums = v.split('.').map_while(|p| p.parse().ok()).collect();
    (nums, v.to_string())
}

fn is_major_minor(s: &str) -> bool {
    matches!(s.split_once('.'), Some((a, b)) if !a.is_empty() && !b.is_empty()
        && a.bytes().all(|c| c.is_ascii_digit()) && b.bytes().all(|c| c.is_ascii_digit()))
}

/// A version's own value of a field, else the defaults'.
fn either<T: Clone>(own: &Option<T>, default: &Option<T>) -> Option<T> {
    own.as_ref().or(default.as_ref()).cloned()
}

impl RepoManifest {
    /// The version whose instances include pull request `number`, for a row that names none:
    /// the first version (in [`RepoManifest::versions`]' order) whose `pulls` hold it, else
    /// the one version that names no `pulls`. Versions of a `number_interval` are not
    /// candidates: only rows naming it take them.
    pub fn version_for_pull(&self, number: u64) -> Option<String> {
        let versions: Vec<String> = self
            .versions()
            .into_iter()
            .filter(|v| self.versions[v].number_interval.is_none())
            .collect();
        let ranged = versions.iter().find(|v| {
            self.versions[*v]
                .pulls
                .is_some_and(|[lo, hi]| lo <= number && number <= hi)
        });
        if let Some(v) = ranged {
            return Some(v.clone());
        }
        let open: Vec<&String> = versions
            .iter()
            .filter(|v| self.versions[*v].pulls.is_none())
            .collect();
        (open.len() == 1).then(|| open[0].clone())
    }

    /// The version that serves rows whose `number_interval` is `interval`, if one does.
    pub fn version_for_interval(&self, interval: &str) -> Option<String> {
        self.versions()
            .into_iter()
            .find(|v| self.versions[v].number_interval.as_deref() == Some(interval))
    }

    /// The known versions, in numeric order.
    pub fn versions(&self) -> Vec<String> {
        let mut v: Vec<String> = self.versions.keys().cloned().collect();
        v.sort_by_key(|s| version_key(s));
        v
    }

    /// The parser `name` stands for in a context: a handler parser of this file is its whole
    /// definition ([`crate::logparse::handler::name`]); any other name is itself.
    fn parser_named(&self, name: &str) -> String {
        match self.handler_parsers.get(name) {
            Some(h) => crate::logparse::handler::name(name, &h.code),
            None => name.to_string(),
        }
    }

    pub fn context(&self, version: &str) -> Result<Context, ManifestError> {
        let v = self
            .versions
            .get(version)
            .ok_or_else(|| ManifestError::UnknownVersion {
                repo: self.repo.clone(),
                version: version.to_string(),
                known: self.versions(),
                how: self.how_rows_get_versions(),
            })?;
        let d = &self.defaults;
        let incomplete = |field| ManifestError::Incomplete {
            repo: self.repo.clone(),
            version: version.to_string(),
            field,
        };
        let pick =
            |a: &Option<Vec<String>>, b: &Option<Vec<String>>| either(a, b).unwrap_or_default();
        let mut env = d.env.clone().unwrap_or_default();
        env.extend(v.env.clone().unwrap_or_default());
        let notes = [d.notes.as_deref(), v.notes.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("\n");
        Ok(Context {
            kind: self.kind.clone(),
            repo: self.repo.clone(),
            version: version.to_string(),
            python: match either(&v.python, &d.python) {
                Some(p) => p,
                // Only Python contexts name an interpreter.
                None if !self.kind.is_empty() => String::new(),
                None => return Err(incomplete("python")),
            },
            node: either(&v.node, &d.node).unwrap_or_default(),
            requirements: pick(&v.requirements, &d.requirements),
            packages: pick(&v.packages, &d.packages),
            pip_packages: pick(&v.pip_packages, &d.pip_packages),
            conda_environment: pick(&v.conda_environment, &d.conda_environment),
            debian: pick(&v.debian, &d.debian),
            hidden_programs: pick(&v.hidden_programs, &d.hidden_programs),
            empty_submodules: either(&v.empty_submodules, &d.empty_submodules).unwrap_or(false),
            pre_install: pick(&v.pre_install, &d.pre_install),
            install: either(&v.install, &d.install).unwrap_or_default(),
            test_cmd: either(&v.test_cmd, &d.test_cmd).ok_or_else(|| incomplete("test_cmd"))?,
            eval_commands: pick(&v.eval_commands, &d.eval_commands),
            env,
            log_parser: self.parser_named(v.log_parser.as_deref().unwrap_or(&self.log_parser)),
            services: either(&v.services, &d.services).unwrap_or_default(),
            notes,
            inferred: self.inferred.clone(),
            timeout: either(&v.timeout, &d.timeout),
        })
    }

    /// How a row that names no version gets one of these ([`RepoManifest::version_for_pull`]),
    /// as ` (…)`; empty when no version names `pulls` (and the one version, if one, takes all).
    fn how_rows_get_versions(&self) -> String {
        let versions = self.versions();
        let ranged: Vec<String> = versions
            .iter()
            .filter_map(|v| {
                let [lo, hi] = self.versions[v].pulls?;
                Some(format!("{v} pulls {lo}–{hi}"))
            })
            .collect();
        let open: Vec<&String> = versions
            .iter()
            .filter(|v| self.versions[*v].pulls.is_none())
            .collect();
        let rest = match open.as_slice() {
            [one] => format!(", {one} the rest"),
            _ => String::new(),
        };
        match (ranged.is_empty(), open.len()) {
            (true, 1) => format!(
                " (a row that names no version gets {}: the manifest's only one)",
                open[0]
            ),
            (true, _) => String::new(),
            (false, _) => format!(
                " (a row that names no version gets one by its pull-request number: {}{rest})",
                ranged.join(", ")
            ),
        }
    }
}

fn parse(path: &Path, text: &str) -> Result<RepoManifest, ManifestError> {
    let invalid = |detail: String| ManifestError::Invalid {
        path: path.to_path_buf(),
        detail,
    };
    let file: File = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
    if !is_repo(&file.repo) {
        return Err(invalid(format!(
            "`repo = \"{}\"` is not OWNER/NAME",
            file.repo
        )));
    }
    let expected = format!("{}.toml", file.repo.replacen('/', "__", 1));
    if path.file_name().and_then(|n| n.to_str()) != Some(expected.as_str()) {
        return Err(invalid(format!(
            "a manifest of {} must be named {expected}",
            file.repo
        )));
    }
    if file.versions.is_empty() {
        return Err(invalid("it lists no version".into()));
    }
    for (version, fields) in std::iter::once(("[defaults]", &file.defaults))
        .chain(file.versions.iter().map(|(k, v)| (k.as_str(), v)))
    {
        if let Some(p) = &fields.python
            && !is_major_minor(p)
        {
            return Err(invalid(format!(
                "{version}: python = \"{p}\" is not major.minor (e.g. \"3.9\")"
            )));
        }
        if let Some(services) = &fields.services {
            check_services(services).map_err(|e| invalid(format!("{version}: {e}")))?;
        }
        if let Some(bad) = fields
            .hidden_programs
            .iter()
            .flatten()
            .find(|p| !is_program_name(p))
        {
            return Err(invalid(format!(
                "{version}: hidden_programs: \"{bad}\" is not a program's file name (no `/`, not empty, not `.` or `..`)"
            )));
        }
    }
    for (class, h) in &file.handler_parsers {
        if crate::logparse::handler::split(&crate::logparse::handler::name(class, &h.code))
            .is_none()
        {
            return Err(invalid(format!(
                "handler_parsers.{class}: the key must be the class's name (letters, digits, \
                 `_`) and the code not empty"
            )));
        }
        if crate::logparse::is_known(class) {
            return Err(invalid(format!(
                "handler_parsers.{class}: `{class}` is the name of a parser swe-ark has"
            )));
        }
    }
    if let Some(rule) = &file.version_rule {
        regex::Regex::new(&rule.pattern)
            .map_err(|e| invalid(format!("version_rule.pattern: {e}")))?;
    }
    let manifest = RepoManifest {
        repo: file.repo,
        source: file.source,
        kind: if file.kind == "python" {
            String::new()
        } else {
            file.kind
        },
        log_parser: file.log_parser,
        handler_parsers: file.handler_parsers,
        version_rule: file.version_rule,
        path: path.to_path_buf(),
        text: text.to_string(),
        inferred: None,
        defaults: file.defaults,
        versions: file.versions,
    };
    // Every version must resolve to a whole context.
    for v in manifest.versions() {
        manifest.context(&v)?;
    }
    Ok(manifest)
}

/// Every repository's manifest.
#[derive(Debug, Clone, Default)]
pub struct Manifests {
    by_repo: BTreeMap<String, RepoManifest>,
}

/// The folder the built-in manifests are said to be in.
pub const BUILT_IN: &str = "<built in>";

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_manifests.rs"));
}

impl Manifests {
    /// The manifests swe-ark uses: the folder `SWE_ARK_MANIFESTS` names when it is set, else
    /// the ones built into the binary (the `manifests/` folder of the source tree it was built
    /// from, so a binary copied to another machine needs no checkout).
    pub fn load_default() -> Result<Manifests, ManifestError> {
        match std::env::var_os("SWE_ARK_MANIFESTS") {
            Some(dir) => Manifests::load_dir(Path::new(&dir)),
            None => Manifests::builtin(),
        }
    }

    /// The manifests built into the binary; each is named `<built in>/FILE` in errors.
    pub fn builtin() -> Result<Manifests, ManifestError> {
        Manifests::from_texts(
            builtin::BUILTIN
                .iter()
                .map(|(name, text)| (Path::new(BUILT_IN).join(name), text.to_string())),
        )
    }

    /// Reads every `*.toml` in `dir`; one bad file is an error naming it.
    pub fn load_dir(dir: &Path) -> Result<Manifests, ManifestError> {
        let io = |source| ManifestError::Io {
            path: dir.to_path_buf(),
            source,
        };
        let mut paths: Vec<PathBuf> = fs::read_dir(dir)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        paths.sort();
        let mut texts = Vec::with_capacity(paths.len());
        for path in paths {
            let text = fs::read_to_string(&path).map_err(|source| ManifestError::Io {
                path: path.clone(),
                source,
            })?;
            texts.push((path, text));
        }
        Manifests::from_texts(texts)
    }

    /// Manifests from (path, text) pairs; two for one repository are an error naming both.
    fn from_texts(
        texts: impl IntoIterator<Item = (PathBuf, String)>,
    ) -> Result<Manifests, ManifestError> {
        let mut out = Manifests::default();
        for (path, text) in texts {
            let m = parse(&path, &text)?;
            if let Some(other) = out.by_repo.get(&m.repo) {
                return Err(ManifestError::Duplicate {
                    repo: m.repo.clone(),
                    path,
                    other: other.path.clone(),
                });
            }
            out.by_repo.insert(m.repo.clone(), m);
        }
        Ok(out)
    }

    pub fn repos(&self) -> impl Iterator<Item = &RepoManifest> {
        self.by_repo.values()
    }

    pub fn repo(&self, repo: &str) -> Result<&RepoManifest, ManifestError> {
        self.by_repo
            .get(repo)
            .ok_or_else(|| ManifestError::UnknownRepo {
                repo: repo.to_string(),
                known: self.by_repo.keys().cloned().collect(),
            })
    }

    /// Whether `instance`'s context leaves its submodules empty (`empty_submodules`); an
    /// instance with no context here is taken to need them.
    pub fn leaves_submodules_empty(&self, instance: &crate::dataset::Instance) -> bool {
        self.context(&instance.repo, &instance.version)
            .is_ok_and(|c| c.empty_submodules)
    }

    /// The context of `repo` at `version`.
    pub fn context(&self, repo: &str, version: &str) -> Result<Context, ManifestError> {
        self.repo(repo)?.context(version)
    }

    /// Gives each instance that names no version (Multi-SWE-bench's rows) the version its
    /// repository's manifest takes its pull request into ([`RepoManifest::version_for_pull`]).
    /// The pull request is the row's `number`, else the number that ends its id
    /// (`org__repo-123`). A row of a repository no manifest names gets [`infer::VERSION`]: its
    /// context is inferred from the repository's build files when it is locked.
    pub fn assign_versions(&self, instances: &mut [crate::dataset::Instance]) -> Assigned {
        let mut out = Assigned::default();
        for inst in instances.iter_mut().filter(|i| i.version.is_empty()) {
            if !self.by_repo.contains_key(&inst.repo) {
                inst.version = infer::VERSION.to_string();
                out.inferred.push(inst.instance_id.clone());
                continue;
            }
            let number = inst
                .extra
                .get("number")
                .and_then(|n| n.as_u64())
                .or_else(|| inst.instance_id.rsplit_once('-')?.1.parse().ok());
            let interval = inst
                .extra
                .get("number_interval")
                .and_then(|n| n.as_str())
                .filter(|n| !n.is_empty());
            let manifest = self.by_repo.get(&inst.repo);
            let version = match interval {
                // Multi-SWE-bench gives such a row the handler registered by it, or none.
                Some(interval) => manifest.and_then(|m| m.version_for_interval(interval)),
                None => manifest
                    .zip(number)
                    .and_then(|(m, n)| m.version_for_pull(n)),
            };
            match version {
                Some(v) => inst.version = v,
                None => out.left.push(inst.instance_id.clone()),
            }
        }
        out
    }
}

/// What [`Manifests::assign_versions`] did with the rows that name no version, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assigned {
    /// Of a repository whose manifest takes none of them into a version: left without one.
    pub left: Vec<String>,
    /// Of a repository no manifest names: given [`infer::VERSION`].
    pub inferred: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
repo = "acme/widgets"
source = "written by hand"
log_parser = "pytest"

[defaults]
test_cmd = "pytest -rA"
install = "python -m pip install -e ."
env = { LANG = "C.UTF-8" }

[versions."0.9"]
python = "3.8"
pip_packages = ["pytest==6.2.5"]

[versions."0.12"]
python = "3.11"
test_cmd = "pytest -rA -p no:cacheprovider"
env = { TZ = "UTC" }
notes = "gxx is conda-only: not mapped"
"#;

    fn write(dir: &Path, name: &str, text: &str) {
        fs::write(dir.join(name), text).unwrap();
    }

    #[test]
    fn an_interval_version_serves_only_rows_naming_it_and_a_context_may_set_its_timeout() {
        let text = r#"
repo = "acme/gadgets"
kind = "rust"
source = "by hand"
log_parser = "cargo"

[defaults]
test_cmd = "cargo test"
timeout = 3600

[versions."rust-latest"]

[versions."rust-latest-pr-5-90"]
number_interval = "gadgets_90_to_5"
timeout = 60
"#;
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "acme__gadgets.toml", text);
        let m = Manifests::load_dir(d.path()).unwrap();
        let r = m.repo("acme/gadgets").unwrap();
        // A row without `number_interval` never takes the interval's version, whatever its
        // number: the one open version is still the only candidate.
        assert_eq!(r.version_for_pull(50).as_deref(), Some("rust-latest"));
        assert_eq!(
            r.version_for_interval("gadgets_90_to_5").as_deref(),
            Some("rust-latest-pr-5-90")
        );
        assert_eq!(r.version_for_interval("gadgets_4_to_1"), None);
        assert_eq!(r.context("rust-latest").unwrap().timeout, Some(3600));
        assert_eq!(r.context("rust-latest-pr-5-90").unwrap().timeout, Some(60));
        // Unset, it stays out of env/spec.toml: other contexts' bundles keep their ids.
        let plain = Manifests::load_dir(d.path()).unwrap();
        let mut ctx = plain.context("acme/gadgets", "rust-latest").unwrap();
        ctx.timeout = None;
        assert!(!toml::to_string(&ctx).unwrap().contains("timeout"));
    }

    #[test]
    fn a_row_without_version_takes_the_version_whose_pulls_hold_its_number() {
        let text = r#"
repo = "acme/gadgets"
kind = "rust"
source = "by hand"
log_parser = "cargo"

[defaults]
test_cmd = "cargo test"

[versions."old"]
pulls = [1, 99]

[versions."new"]
"#;
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "acme__gadgets.toml", text);
        let m = Manifests::load_dir(d.path()).unwrap();
        let r = m.repo("acme/gadgets").unwrap();
        assert_eq!(r.version_for_pull(50).as_deref(), Some("old"));
        assert_eq!(r.version_for_pull(100).as_deref(), Some("new"));
        assert_eq!(r.context("new").unwrap().python, "");
        // A version it does not have: the error says how rows without one get theirs.
        let e = r.context("rust-latest").unwrap_err().to_string();
        assert!(
            e.contains("known: new, old")
                && e.contains("by its pull-request number: old pulls 1–99, new the rest"),
            "{e}"
        );
        // Rows of a repository no manifest names get `inferred`; the others, by number.
        let row = |id: &str, repo: &str| {
            let row = serde_json::json!({"instance_id": id, "repo": repo,
                "base_commit": "a".repeat(40), "patch": "", "test_patch": "",
                "problem_statement": ""});
            crate::dataset::Instance::from_json(row.to_string().as_bytes()).unwrap()
        };
        let mut rows = vec![row("acme__gadgets-5", "acme/gadgets"), row("o__r-1", "o/r")];
        let assigned = m.assign_versions(&mut rows);
        assert_eq!(assigned.inferred, vec!["o__r-1"]);
        assert!(assigned.left.is_empty());
        assert_eq!(
            (rows[0].version.as_str(), rows[1].version.as_str()),
            ("old", "inferred")
        );
    }

    #[test]
    fn defaults_apply_and_versions_sort_as_numbers() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "acme__widgets.toml", GOOD);
        let m = Manifests::load_dir(dir.path()).unwrap();
        let repo = m.repo("acme/widgets").unwrap();
        assert_eq!(repo.versions(), vec!["0.9", "0.12"]);
        let c = m.context("acme/widgets", "0.9").unwrap();
        assert_eq!(c.python, "3.8");
        assert_eq!(c.test_cmd, "pytest -rA");
        assert_eq!(c.install, "python -m pip install -e .");
        assert_eq!(c.pip_packages, vec!["pytest==6.2.5"]);
        let c = m.context("acme/widgets", "0.12").unwrap();
        assert_eq!(c.test_cmd, "pytest -rA -p no:cacheprovider");
        assert_eq!(c.env.len(), 2, "defaults' env and the version's merge");
        assert!(c.notes.contains("conda-only"));
    }

    #[test]
    fn unknown_repo_and_version_list_the_known_ones() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "acme__widgets.toml", GOOD);
        let m = Manifests::load_dir(dir.path()).unwrap();
        let e = m.context("acme/gadgets", "1.0").unwrap_err().to_string();
        assert!(
            e.contains("acme/gadgets")
                && e.contains("known: acme/widgets")
                && e.contains("acme__gadgets.toml (manifests/README.md says how)")
                && e.contains("--manifests DIR"),
            "{e}"
        );
        let e = m.context("acme/widgets", "1.0").unwrap_err().to_string();
        assert!(
            e.contains("no version 1.0") && e.contains("0.9, 0.12"),
            "{e}"
        );
    }

    #[test]
    fn bad_manifests_are_named() {
        let cases = [
            (
                GOOD.replace("python = \"3.8\"", "python = \"3\""),
                "major.minor",
            ),
            (GOOD.replace("source =", "sauce ="), "sauce"),
            (
                GOOD.replace("[defaults]\ntest_cmd = \"pytest -rA\"", "[defaults]"),
                "test_cmd",
            ),
            (
                GOOD.replace("acme/widgets", "acme/other"),
                "must be named acme__other.toml",
            ),
            (
                GOOD.replace(
                    "[defaults]\n",
                    "[defaults]\nhidden_programs = [\"/usr/bin/valgrind\"]\n",
                ),
                "hidden_programs: \"/usr/bin/valgrind\" is not a program's file name",
            ),
        ];
        for (text, expected) in cases {
            let dir = tempfile::tempdir().unwrap();
            write(dir.path(), "acme__widgets.toml", &text);
            let e = Manifests::load_dir(dir.path()).unwrap_err().to_string();
            assert!(e.contains(expected), "{expected}: {e}");
        }
    }

    #[test]
    fn services_are_checked_at_load() {
        let service = r#"
[[versions."0.9".services]]
name = "httpbin"
packages = ["httpbin==0.10.2", "flask[async]==3.0.3"]
command = ["gunicorn", "--bind", "127.0.0.1:{port}", "httpbin:app"]
ports = [80]
tls_ports = [443]
tls_command = ["gunicorn", "--bind", "127.0.0.1:{port}", "--certfile", "{certfile}", "--keyfile", "{keyfile}", "httpbin:app"]
hosts = ["httpbin.org"]
ca_env = ["REQUESTS_CA_BUNDLE"]
ca_files = ["requests/cacert.pem"]
"#;
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "acme__widgets.toml",
            &format!("{GOOD}{service}"),
        );
        let m = Manifests::load_dir(dir.path()).unwrap();
        let c = m.context("acme/widgets", "0.9").unwrap();
        assert_eq!(c.services[0].hosts, vec!["httpbin.org"]);
        assert_eq!(c.services[0].ca_env(), vec!["REQUESTS_CA_BUNDLE"]);
        assert_eq!(c.services[0].start_timeout(), 60);
        // A context without services serializes as before (bundles' env/spec.toml).
        let plain = toml::to_string(&m.context("acme/widgets", "0.12").unwrap()).unwrap();
        assert!(plain.contains("services = []"), "{plain}");
        let cases = [
            (
                "\"httpbin.org\"",
                "\"httpbin_org\"",
                "`httpbin_org` is not a valid host name",
            ),
            (
                "\"httpbin.org\"",
                "\"-bad.org\"",
                "`-bad.org` is not a valid host name",
            ),
            (
                "\"httpbin.org\"",
                "\"10.0.0.1\"",
                "`10.0.0.1` is not a valid host name",
            ),
            (
                "\"httpbin.org\"",
                "\"a b.org\"",
                "`a b.org` is not a valid host name",
            ),
            (
                "httpbin==0.10.2",
                "httpbin>=0.10",
                "`httpbin>=0.10` is not pinned",
            ),
            (
                "tls_ports = [443]\n",
                "",
                "has a tls_command but no tls_ports",
            ),
            ("ports = [80]", "ports = [443]", "port 443 is taken"),
            (
                "\"REQUESTS_CA_BUNDLE\"",
                "\"A-B\"",
                "`A-B` is not an environment variable",
            ),
            (
                "name = \"httpbin\"",
                "name = \"../x\"",
                "a service name is letters",
            ),
            (
                "\"requests/cacert.pem\"",
                "\"../cacert.pem\"",
                "`../cacert.pem` is not a plain path inside the checkout",
            ),
        ];
        for (from, to, expected) in cases {
            let text = format!("{GOOD}{}", service.replacen(from, to, 1));
            let dir = tempfile::tempdir().unwrap();
            write(dir.path(), "acme__widgets.toml", &text);
            let e = Manifests::load_dir(dir.path()).unwrap_err().to_string();
            assert!(e.contains(expected) && e.contains("0.9"), "{expected}: {e}");
        }
    }
}
