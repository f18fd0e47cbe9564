//! A context for a repository no manifest names, inferred from its build files at one commit:
//! `Cargo.toml` → `rust`, `package.json` → `node` with the runner its test script names,
//! `CMakeLists.txt` → `native` with ctest, autotools → `native` with `make check`. The result
//! is the text of a manifest, read back like any other (so it is exactly what a user would
//! save and edit to change it), with where it came from ([`Inferred`]). Reading the files
//! (a mirror at a commit) is the caller's: this module sees them through a function.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::{ManifestError, RepoManifest};

/// The version name of an inferred context when a row names none: its repository has no
/// manifest whose versions could give it one.
pub const VERSION: &str = "inferred";

/// The build files looked for at the repository's root, in the order they are tried.
pub const BUILD_FILES: [&str; 6] = [
    "Cargo.toml",
    "package.json",
    "CMakeLists.txt",
    "configure.ac",
    "configure",
    "meson.build",
];

/// How a context was inferred, as the lock (and a bundle's `env/spec.toml`) records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inferred {
    /// The build file it was inferred from (`Cargo.toml`).
    pub from: String,
    /// The commit whose files were read.
    pub commit: String,
    /// What to write to change it.
    pub note: String,
    /// The manifest that gives this context: what to save as `manifests/OWNER__NAME.toml`
    /// and edit.
    pub manifest: String,
}

/// Why no context can be inferred.
#[derive(Debug, thiserror::Error)]
pub enum InferError {
    #[error(
        "no manifest describes repository {repo}, and its tree at commit {commit} has none of \
         the build files swe-ark infers a context from ({}); {}",
        BUILD_FILES.join(", "),
        what_to_write(repo)
    )]
    NoBuildFile { repo: String, commit: String },
    #[error(
        "no manifest describes repository {repo}, and swe-ark cannot infer a context from its \
         build files at commit {commit}: {}; {}",
        .reasons.iter().map(Unfit::to_string).collect::<Vec<_>>().join("; "),
        what_to_write(repo)
    )]
    Unusable {
        repo: String,
        commit: String,
        reasons: Vec<Unfit>,
    },
    /// The text made does not read back as a manifest: a fault of swe-ark's, named.
    #[error("the context inferred for {repo} does not read back as a manifest: {source}")]
    Unreadable {
        repo: String,
        #[source]
        source: Box<ManifestError>,
    },
}

/// Why a build file that is there gives no context.
#[derive(Debug, thiserror::Error)]
pub enum Unfit {
    #[error("package.json is not JSON: {0}")]
    NotJson(String),
    #[error("package.json has no test script (`scripts.test`)")]
    NoTestScript,
    #[error(
        "package.json's test script `{0}` runs no test runner swe-ark reads ({RUNNER_NAMES}); \
         write a manifest whose test_cmd prints the output of one of them and whose log_parser \
         names it (jest, mocha, vitest or tap)"
    )]
    NoRunner(String),
    #[error(
        "meson.build: swe-ark has no parser of `meson test`'s output (the runners it reads: \
         {0}); write a manifest (kind native, debian = [\"meson\", \"ninja-build\"]) whose \
         test_cmd prints output one of them reads"
    )]
    NoMesonParser(String),
}

/// The manifest file of `repo` (`OWNER__NAME.toml`).
pub fn file_name(repo: &str) -> String {
    format!("{}.toml", repo.replacen('/', "__", 1))
}

/// What a user does to give `repo` a context of their own, as the end of a sentence.
pub fn what_to_write(repo: &str) -> String {
    format!(
        "to give it one, write {} (manifests/README.md says how) into manifests/ and build \
         swe-ark again, or into a folder you pass as --manifests DIR",
        file_name(repo)
    )
}

/// The context of `repo` as its build files at `commit` (read by `file`, a path from the
/// root → its bytes) give it, as a manifest with one version, `version`.
pub fn infer(
    repo: &str,
    version: &str,
    commit: &str,
    file: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Result<RepoManifest, InferError> {
    let mut reasons = Vec::new();
    let mut found = false;
    let mut draft = None;
    for (name, try_it) in RULES {
        let Some(bytes) = file(name) else { continue };
        found = true;
        match try_it(&bytes, file) {
            Ok(d) => {
                draft = Some(d);
                break;
            }
            Err(why) => reasons.push(why),
        }
    }
    let Some(draft) = draft else {
        return Err(match found {
            false => InferError::NoBuildFile {
                repo: repo.into(),
                commit: commit.into(),
            },
            true => InferError::Unusable {
                repo: repo.into(),
                commit: commit.into(),
                reasons,
            },
        });
    };
    let inferred = Inferred {
        from: draft.from.to_string(),
        commit: commit.to_string(),
        note: format!(
            "no manifest names {repo}: this context was inferred from its {} at commit {commit}. \
             To change it, start from `manifest` here (it gives this very context): edit it, \
             save it as {} in manifests/ (then build swe-ark again) or in a folder you pass as \
             --manifests DIR, and lock again (manifests/README.md says how)",
            draft.from,
            file_name(repo)
        ),
        manifest: String::new(),
    };
    let text = draft.render(repo, version, &inferred);
    read_back(
        repo,
        Inferred {
            manifest: text,
            ..inferred
        },
    )
}

/// The manifest an [`Inferred`] holds, read as a manifest (from a lock, or just made).
pub fn read_back(repo: &str, inferred: Inferred) -> Result<RepoManifest, InferError> {
    let path = Path::new(&format!("<inferred from {}>", inferred.from)).join(file_name(repo));
    let mut manifest =
        super::parse(&path, &inferred.manifest).map_err(|e| InferError::Unreadable {
            repo: repo.to_string(),
            source: Box::new(e),
        })?;
    manifest.inferred = Some(inferred);
    Ok(manifest)
}

/// A build file's name and what it gives: a draft, or why not.
type Rule = (
    &'static str,
    fn(&[u8], &dyn Fn(&str) -> Option<Vec<u8>>) -> Result<Draft, Unfit>,
);

/// In [`BUILD_FILES`]' order; a `configure` beside its `configure.ac` is read by the latter's.
const RULES: [Rule; 6] = [
    ("Cargo.toml", rust),
    ("package.json", node),
    ("CMakeLists.txt", cmake),
    ("configure.ac", autotools),
    ("configure", configure),
    ("meson.build", meson),
];

/// A context before it is written as a manifest.
struct Draft {
    from: &'static str,
    kind: &'static str,
    log_parser: &'static str,
    node: Option<String>,
    debian: Vec<&'static str>,
    install: Option<String>,
    test_cmd: String,
    env: BTreeMap<String, String>,
    notes: Vec<String>,
}

/// The manifest file's form, as far as an inferred context uses it.
#[derive(Serialize)]
struct Text<'a> {
    repo: &'a str,
    kind: &'a str,
    source: String,
    log_parser: &'a str,
    versions: BTreeMap<&'a str, Version<'a>>,
}

#[derive(Serialize)]
struct Version<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    node: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    debian: &'a [&'static str],
    #[serde(skip_serializing_if = "Option::is_none")]
    install: Option<&'a str>,
    test_cmd: &'a str,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    env: &'a BTreeMap<String, String>,
    notes: String,
}

impl Draft {
    fn render(&self, repo: &str, version: &str, inferred: &Inferred) -> String {
        let text = Text {
            repo,
            kind: self.kind,
            source: format!(
                "inferred by swe-ark {} from {} at commit {}",
                env!("CARGO_PKG_VERSION"),
                self.from,
                inferred.commit
            ),
            log_parser: self.log_parser,
            versions: BTreeMap::from([(
                version,
                Version {
                    node: self.node.as_deref(),
                    debian: &self.debian,
                    install: self.install.as_deref(),
                    test_cmd: &self.test_cmd,
                    env: &self.env,
                    notes: self.notes.join(" "),
                },
            )]),
        };
        let body = toml::to_string(&text).unwrap_or_else(|e| format!("# cannot write: {e}\n"));
        format!(
            "# No manifest names {repo}: swe-ark inferred this context from {} at commit {}.\n\
             # To change it, save this file as manifests/{}, edit it, and lock again\n\
             # (manifests/README.md, \"A repository no manifest names\").\n{body}",
            self.from,
            inferred.commit,
            file_name(repo)
        )
    }
}

fn rust(_: &[u8], _: &dyn Fn(&str) -> Option<Vec<u8>>) -> Result<Draft, Unfit> {
    Ok(Draft {
        from: "Cargo.toml",
        kind: "rust",
        log_parser: "cargo",
        node: None,
        debian: Vec::new(),
        // Offline, from the lock's registry: a crate the lock lacks is named before the tests.
        install: Some("cargo fetch".into()),
        test_cmd: "cargo test".into(),
        env: BTreeMap::new(),
        notes: vec![
            "Inferred from Cargo.toml: `cargo test` (libtest's lines, read by `cargo`), with the \
             machine's toolchain and the crates of each base commit's Cargo.lock (one generated \
             as of the cutoff where it has none)."
                .into(),
        ],
    })
}

/// The test runners a `package.json`'s test script may name, with the parser that reads each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runner {
    Jest,
    Mocha,
    Vitest,
    NodeTest,
    NodeTap,
}

impl Runner {
    fn parser(self) -> &'static str {
        match self {
            Runner::Jest => "jest",
            Runner::Mocha => "mocha",
            Runner::Vitest => "vitest",
            Runner::NodeTest | Runner::NodeTap => "tap",
        }
    }

    /// What `npm test -- …` adds when the runner's command ends the script: the output its
    /// parser reads (docs/LANGUAGES.md, "Log parsers for a repository of your own").
    fn arguments(self) -> Option<&'static str> {
        match self {
            Runner::Jest => Some("--verbose"),
            Runner::Vitest => Some("--reporter=verbose"),
            Runner::NodeTap => Some("--reporter=tap"),
            // mocha's default reporter is the one read; node's test runner writes TAP when
            // its output is not a terminal (18.15 to 22), and takes no option after its files.
            Runner::Mocha | Runner::NodeTest => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Runner::Jest => "jest",
            Runner::Mocha => "mocha",
            Runner::Vitest => "vitest",
            Runner::NodeTest => "node --test",
            Runner::NodeTap => "tap",
        }
    }
}

/// The runners swe-ark reads, as a test script would name them.
const RUNNER_NAMES: &str = "jest, mocha, vitest, `node --test`, tap";

/// npm's test script when `npm init` wrote it and nobody changed it.
const NPM_INIT_TEST: &str = "echo \"Error: no test specified\" && exit 1";

fn node(bytes: &[u8], file: &dyn Fn(&str) -> Option<Vec<u8>>) -> Result<Draft, Unfit> {
    let json: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| Unfit::NotJson(e.to_string()))?;
    let scripts = json.get("scripts").and_then(|s| s.as_object());
    let test = scripts
        .and_then(|s| s.get("test"))
        .and_then(|t| t.as_str())
        .map(str::trim)
        .filter(|t| !t.is_empty() && *t != NPM_INIT_TEST)
        .ok_or(Unfit::NoTestScript)?;
    let empty = serde_json::Map::new();
    let (runner, last) = runner_of(scripts.unwrap_or(&empty), test, 0)
        .ok_or_else(|| Unfit::NoRunner(test.to_string()))?;
    let mut notes = vec![format!(
        "Inferred from package.json: its test script `{test}` runs {}, read by `{}`.",
        runner.name(),
        runner.parser()
    )];
    let scripts = scripts.unwrap_or(&empty);
    let test_cmd = match (through_npm(scripts, test, runner), runner.arguments(), last) {
        (Some(cmd), _, _) => {
            notes.push(format!(
                "The test script runs its scripts with pnpm or yarn, which the context has not \
                 (npm only): here each is `npm run`, as `{cmd}`."
            ));
            cmd
        }
        (None, Some(args), true) => format!("npm test -- {args}"),
        (None, Some(args), false) => {
            notes.push(format!(
                "{} is not the script's last command, so `{args}` cannot be passed to it: its \
                 parser may read less of its output.",
                runner.name()
            ));
            "npm test".to_string()
        }
        (None, None, _) => "npm test".to_string(),
    };
    let mut env = BTreeMap::new();
    if runner == Runner::Vitest {
        // vitest colours even a pipe; its parser reads no colour codes.
        env.insert("NO_COLOR".to_string(), "1".to_string());
    }
    let engines = json
        .get("engines")
        .and_then(|e| e.get("node"))
        .and_then(|n| n.as_str());
    let node = engines.and_then(node_major);
    match (engines, &node) {
        (Some(e), Some(major)) => notes.push(format!("node {major}, as engines.node `{e}` says.")),
        (Some(e), None) => notes.push(format!(
            "engines.node `{e}` names no one major release: node is the machine's."
        )),
        (None, _) => {
            notes.push("package.json names no node release: node is the machine's.".into())
        }
    }
    if file("package-lock.json").is_none() {
        let other = ["yarn.lock", "pnpm-lock.yaml"]
            .into_iter()
            .filter(|f| file(f).is_some())
            .map(|f| format!(" (its {f} is not read: npm only)"))
            .collect::<String>();
        notes.push(format!(
            "No package-lock.json at this commit{other}: the lock generates one as of the \
             cutoff and puts it in place before `npm ci`."
        ));
    }
    Ok(Draft {
        from: "package.json",
        kind: "node",
        log_parser: runner.parser(),
        node,
        debian: Vec::new(),
        // A tree without package-lock.json gets the one the lock generated before the
        // install, so `npm ci` serves both; offline, from the lock's tarballs.
        install: Some("npm ci --offline".into()),
        test_cmd,
        env,
        notes,
    })
}

/// The runner `script` runs (following `npm run NAME` into `scripts`), and whether its
/// command is the script's last one (at the top level only).
fn runner_of(
    scripts: &serde_json::Map<String, serde_json::Value>,
    script: &str,
    depth: usize,
) -> Option<(Runner, bool)> {
    static SEPARATORS: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"&&|\|\||;|\|").expect("a fixed pattern"));
    let commands: Vec<&str> = SEPARATORS
        .split(script)
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    for (i, command) in commands.iter().enumerate() {
        let last = depth == 0 && i + 1 == commands.len();
        let words = program_words(command);
        let Some(program) = words.first() else {
            continue;
        };
        let program = program.rsplit('/').next().unwrap_or(program);
        let found = match program {
            "jest" | "jest.js" => Some(Runner::Jest),
            "mocha" | "_mocha" => Some(Runner::Mocha),
            "vitest" | "vitest.mjs" => Some(Runner::Vitest),
            "tap" => Some(Runner::NodeTap),
            "node" if words.contains(&"--test") => Some(Runner::NodeTest),
            "npm" | "yarn" | "pnpm" if depth < 4 => {
                let name = match words.get(1).copied() {
                    Some("run" | "run-script") => words.get(2).copied(),
                    Some(n) if program != "npm" => Some(n),
                    _ => None,
                };
                name.and_then(|n| scripts.get(n))
                    .and_then(|s| s.as_str())
                    .and_then(|s| runner_of(scripts, s, depth + 1))
                    .map(|(r, _)| r)
            }
            _ => None,
        };
        if let Some(runner) = found {
            return Some((runner, last));
        }
    }
    None
}

/// The test script with each `pnpm`/`yarn` run of one of `scripts` made `npm run` (with the
/// runner's output arguments where that script ends with the runner), and the other commands
/// given `node_modules/.bin` as npm gives it; None when it runs no script with pnpm or yarn.
fn through_npm(
    scripts: &serde_json::Map<String, serde_json::Value>,
    test: &str,
    runner: Runner,
) -> Option<String> {
    static SEPARATOR: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\s*(?:&&|\|\||;)\s*").expect("a fixed pattern"));
    let (mut out, mut from, mut changed, mut bare) = (String::new(), 0, false, false);
    let pieces = SEPARATOR
        .find_iter(test)
        .map(|m| (m.start(), m.as_str()))
        .chain([(test.len(), "")]);
    for (end, separator) in pieces {
        let command = test[from..end].trim();
        from = end + separator.len();
        let words: Vec<&str> = command.split_whitespace().collect();
        let name = match words.as_slice() {
            ["pnpm" | "yarn", "run", name, ..] => Some(*name),
            ["pnpm" | "yarn", name, ..] if !name.starts_with('-') => Some(*name),
            _ => None,
        };
        let script = name.and_then(|n| Some((n, scripts.get(n)?.as_str()?)));
        let Some((name, script)) = script else {
            bare |= !command.starts_with("npm ");
            out.push_str(command);
            out.push_str(separator);
            continue;
        };
        changed = true;
        let at = words
            .iter()
            .position(|w| w == &name)
            .map_or(words.len(), |i| i + 1);
        let mut args: Vec<&str> = words[at..].to_vec();
        if let Some((r, true)) = runner_of(scripts, script, 0)
            && r == runner
            && let Some(a) = r.arguments()
        {
            args.push(a);
        }
        out.push_str(&format!("npm run {name}"));
        if !args.is_empty() {
            out.push_str(&format!(" -- {}", args.join(" ")));
        }
        out.push_str(separator);
    }
    let path = r#"export PATH="$PWD/node_modules/.bin:$PATH" && "#;
    changed.then(|| if bare { format!("{path}{out}") } else { out })
}

/// A command's words from the program it runs on: variable assignments, and wrappers that run
/// another program (`npx`, `cross-env`, coverage tools) with their options, left out.
fn program_words(command: &str) -> Vec<&str> {
    let mut words: Vec<&str> = command.split_whitespace().collect();
    loop {
        let Some(first) = words.first() else {
            return words;
        };
        let wrapper = matches!(
            *first,
            "npx" | "cross-env" | "nyc" | "c8" | "env" | "time" | "dotenv"
        );
        if first.contains('=') && !first.starts_with('-') || wrapper {
            words.remove(0);
            if wrapper {
                while words.first().is_some_and(|w| w.starts_with('-')) {
                    words.remove(0);
                }
            }
        } else {
            return words;
        }
    }
}

/// The one major release `engines.node` allows (`18`, `18.x`, `^18.1`, `~18`, `>=18 <19`),
/// else None (`>=14`, `^16 || ^18`).
fn node_major(engines: &str) -> Option<String> {
    static ONE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^[v=^~]*\s*([1-9][0-9]*)(?:\.(?:[0-9]+|[xX*])){0,2}$")
            .expect("a fixed pattern")
    });
    static RANGE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^>=\s*v?([1-9][0-9]*)(?:\.[0-9]+){0,2}\s+<\s*v?([1-9][0-9]*)(?:\.0){0,2}$")
            .expect("a fixed pattern")
    });
    let e = engines.trim();
    if let Some(c) = ONE.captures(e) {
        return Some(c[1].to_string());
    }
    let c = RANGE.captures(e)?;
    let (low, high): (u64, u64) = (c[1].parse().ok()?, c[2].parse().ok()?);
    (high == low + 1).then(|| low.to_string())
}

fn cmake(_: &[u8], _: &dyn Fn(&str) -> Option<Vec<u8>>) -> Result<Draft, Unfit> {
    Ok(Draft {
        from: "CMakeLists.txt",
        kind: "native",
        log_parser: "ctest",
        node: None,
        debian: vec!["cmake"],
        install: None,
        // Configured and built in every run: each starts from the tree as committed.
        test_cmd: "cmake -B build && cmake --build build && cd build && ctest".into(),
        env: BTreeMap::new(),
        notes: vec![
            "Inferred from CMakeLists.txt: configured with CMake's defaults, built, and the tests \
             CMake registers run by ctest (read by `ctest`); cmake from Debian's packages, the \
             machine's compiler."
                .into(),
        ],
    })
}

fn autotools(bytes: &[u8], file: &dyn Fn(&str) -> Option<Vec<u8>>) -> Result<Draft, Unfit> {
    let configured = file("configure").is_some();
    let mut debian = Vec::new();
    let mut test_cmd = String::new();
    if !configured {
        debian.extend(["autoconf", "automake", "libtool"]);
        // pkg.m4 must be there when autoreconf reads PKG_CHECK_MODULES.
        if String::from_utf8_lossy(bytes).contains("PKG_") {
            debian.push("pkg-config");
        }
        test_cmd.push_str("autoreconf -i && ");
    }
    test_cmd.push_str(CONFIGURE_AND_CHECK);
    Ok(Draft {
        from: "configure.ac",
        kind: "native",
        log_parser: "automake",
        node: None,
        debian,
        install: None,
        test_cmd,
        env: BTreeMap::new(),
        notes: vec![format!(
            "Inferred from configure.ac: {}configured with its defaults, built, and `make check` \
             run (automake's test harness lines, read by `automake`); the machine's compiler.",
            if configured {
                ""
            } else {
                "no configure is committed, so `autoreconf -i` makes one (autotools from \
                 Debian's packages); "
            }
        )],
    })
}

/// A committed `configure` without its `configure.ac`.
fn configure(_: &[u8], _: &dyn Fn(&str) -> Option<Vec<u8>>) -> Result<Draft, Unfit> {
    Ok(Draft {
        from: "configure",
        kind: "native",
        log_parser: "automake",
        node: None,
        debian: Vec::new(),
        install: None,
        test_cmd: CONFIGURE_AND_CHECK.into(),
        env: BTreeMap::new(),
        notes: vec![
            "Inferred from configure: configured with its defaults, built, and `make check` run \
             (automake's test harness lines, read by `automake`); the machine's compiler."
                .into(),
        ],
    })
}

/// Configured and built in every run, as each starts from the tree as committed.
const CONFIGURE_AND_CHECK: &str = "./configure && make && make check";

fn meson(_: &[u8], _: &dyn Fn(&str) -> Option<Vec<u8>>) -> Result<Draft, Unfit> {
    if crate::logparse::canonical_parser("meson").is_none() {
        return Err(Unfit::NoMesonParser(
            crate::logparse::msb::runner_names()
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    Ok(Draft {
        from: "meson.build",
        kind: "native",
        log_parser: "meson",
        node: None,
        debian: vec!["meson", "ninja-build"],
        install: None,
        test_cmd: "meson setup build && meson test -C build".into(),
        env: BTreeMap::new(),
        notes: vec![
            "Inferred from meson.build: `meson setup` with its defaults, and `meson test`; meson \
             and ninja from Debian's packages, the machine's compiler."
                .into(),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

    /// The context inferred for `acme/thing` from these files.
    fn inferred(files: &[(&str, &str)]) -> Result<crate::manifest::Context, InferError> {
        let files: BTreeMap<String, Vec<u8>> = files
            .iter()
            .map(|(p, t)| (p.to_string(), t.as_bytes().to_vec()))
            .collect();
        let m = infer("acme/thing", VERSION, COMMIT, &|p| files.get(p).cloned())?;
        Ok(m.context(VERSION).unwrap())
    }

    #[test]
    fn cargo_toml_gives_a_rust_context_that_reads_back_as_its_manifest() {
        let c = inferred(&[("Cargo.toml", "[package]\nname = \"thing\"\n")]).unwrap();
        assert_eq!((c.kind.as_str(), c.log_parser.as_str()), ("rust", "cargo"));
        assert_eq!(
            (c.install.as_str(), c.test_cmd.as_str()),
            ("cargo fetch", "cargo test")
        );
        let i = c.inferred.clone().unwrap();
        assert_eq!((i.from.as_str(), i.commit.as_str()), ("Cargo.toml", COMMIT));
        assert!(
            i.note.contains("acme__thing.toml") && i.note.contains("--manifests DIR"),
            "{}",
            i.note
        );
        // The manifest it holds is a manifest like any other, and gives this very context.
        let again = read_back("acme/thing", i.clone()).unwrap();
        assert_eq!(again.context(VERSION).unwrap(), c);
        assert!(
            i.manifest.starts_with("# No manifest names acme/thing"),
            "{}",
            i.manifest
        );
        assert_eq!(
            again.path,
            Path::new("<inferred from Cargo.toml>/acme__thing.toml")
        );
    }

    #[test]
    fn package_json_gives_node_with_the_runner_its_test_script_names() {
        let lock = ("package-lock.json", "{}");
        let cases = [
            (
                r#"{"scripts":{"test":"jest --coverage"}}"#,
                "jest",
                "npm test -- --verbose",
            ),
            (
                r#"{"scripts":{"test":"npm run lint && npm run unit","unit":"nyc --reporter=lcov mocha test/"}}"#,
                "mocha",
                "npm test",
            ),
            (
                r#"{"scripts":{"test":"NODE_ENV=test npx vitest"}}"#,
                "vitest",
                "npm test -- --reporter=verbose",
            ),
            (
                r#"{"scripts":{"test":"node --test test/"}}"#,
                "tap",
                "npm test",
            ),
            (
                r#"{"scripts":{"test":"tap test/*.js"}}"#,
                "tap",
                "npm test -- --reporter=tap",
            ),
            (
                r#"{"scripts":{"test":"./node_modules/.bin/jest && eslint ."}}"#,
                "jest",
                "npm test",
            ),
            (
                r#"{"scripts":{"test":"pnpm run unit && pnpm e2e","unit":"jest --env node","e2e":"jest && true"}}"#,
                "jest",
                "npm run unit -- --verbose && npm run e2e",
            ),
            (
                r#"{"scripts":{"test":"eslint . && yarn unit --ci","unit":"vitest"}}"#,
                "vitest",
                r#"export PATH="$PWD/node_modules/.bin:$PATH" && eslint . && npm run unit -- --ci --reporter=verbose"#,
            ),
        ];
        for (json, parser, test_cmd) in cases {
            let c = inferred(&[("package.json", json), lock]).unwrap();
            assert_eq!(c.kind, "node", "{json}");
            assert_eq!(c.log_parser, parser, "{json}");
            assert_eq!(c.test_cmd, test_cmd, "{json}");
            assert_eq!(c.install, "npm ci --offline", "{json}");
        }
        let c = inferred(&[("package.json", cases[2].0), lock]).unwrap();
        assert_eq!(c.env.get("NO_COLOR").map(String::as_str), Some("1"));
        let c = inferred(&[("package.json", cases[5].0), lock]).unwrap();
        assert!(
            c.notes.contains("not the script's last command"),
            "{}",
            c.notes
        );
    }

    #[test]
    fn node_comes_from_engines_when_it_names_one_major() {
        let json = |engines: &str| {
            format!(r#"{{"scripts":{{"test":"jest"}},"engines":{{"node":"{engines}"}}}}"#)
        };
        for (engines, node) in [
            ("18", "18"),
            ("18.x", "18"),
            ("^20.1.0", "20"),
            ("~16", "16"),
            (">=18.0.0 <19.0.0", "18"),
            (">=14", ""),
            ("^16 || ^18", ""),
            (">=18 <20", ""),
        ] {
            let c = inferred(&[("package.json", &json(engines))]).unwrap();
            assert_eq!(c.node, node, "{engines}");
        }
        // No lockfile: the lock generates one, and `npm ci` finds it in place.
        let c = inferred(&[("package.json", &json("18")), ("yarn.lock", "")]).unwrap();
        assert!(
            c.notes.contains("No package-lock.json") && c.notes.contains("yarn.lock is not read"),
            "{}",
            c.notes
        );
    }

    #[test]
    fn a_test_script_of_no_runner_swe_ark_reads_says_so_and_what_to_write() {
        let e = inferred(&[("package.json", r#"{"scripts":{"test":"ava --verbose"}}"#)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`ava --verbose` runs no test runner swe-ark reads")
                && e.contains("log_parser")
                && e.contains("acme__thing.toml")
                && e.contains(COMMIT),
            "{e}"
        );
        // npm init's test script is no test suite: the next build file is tried.
        let c = inferred(&[
            (
                "package.json",
                &format!(r#"{{"scripts":{{"test":{NPM_INIT_TEST:?}}}}}"#),
            ),
            ("CMakeLists.txt", "project(thing)\n"),
        ])
        .unwrap();
        assert_eq!(
            (c.kind.as_str(), c.log_parser.as_str()),
            ("native", "ctest")
        );
    }

    #[test]
    fn cmake_gives_a_native_context_run_by_ctest() {
        let c = inferred(&[("CMakeLists.txt", "project(thing)\n"), ("configure.ac", "")]).unwrap();
        assert_eq!(c.kind, "native");
        assert_eq!(c.debian, vec!["cmake"]);
        assert_eq!(c.log_parser, "ctest");
        assert_eq!(
            c.test_cmd,
            "cmake -B build && cmake --build build && cd build && ctest"
        );
        assert_eq!(c.inferred.unwrap().from, "CMakeLists.txt");
    }

    #[test]
    fn autotools_give_make_check_with_autoreconf_when_no_configure_is_committed() {
        let c = inferred(&[(
            "configure.ac",
            "AC_INIT([thing], [1])\nPKG_CHECK_MODULES([X], [x])\n",
        )])
        .unwrap();
        assert_eq!(
            (c.kind.as_str(), c.log_parser.as_str()),
            ("native", "automake")
        );
        assert_eq!(
            c.debian,
            vec!["autoconf", "automake", "libtool", "pkg-config"]
        );
        assert_eq!(
            c.test_cmd,
            "autoreconf -i && ./configure && make && make check"
        );
        let c = inferred(&[("configure.ac", "AC_INIT"), ("configure", "#!/bin/sh")]).unwrap();
        assert!(c.debian.is_empty());
        assert_eq!(c.test_cmd, "./configure && make && make check");
        let c = inferred(&[("configure", "#!/bin/sh")]).unwrap();
        assert_eq!(c.inferred.unwrap().from, "configure");
    }

    #[test]
    fn meson_without_a_parser_of_its_output_is_said() {
        let got = inferred(&[("meson.build", "project('thing', 'c')\n")]);
        match crate::logparse::canonical_parser("meson") {
            None => {
                let e = got.unwrap_err().to_string();
                assert!(
                    e.contains("no parser of `meson test`'s output") && e.contains("ctest"),
                    "{e}"
                );
            }
            Some(_) => assert_eq!(
                got.unwrap().test_cmd,
                "meson setup build && meson test -C build"
            ),
        }
    }

    #[test]
    fn a_tree_with_no_build_file_names_the_files_looked_for_and_what_to_do() {
        let e = inferred(&[("README.md", "hello")]).unwrap_err().to_string();
        for needle in [
            "no manifest describes repository acme/thing",
            COMMIT,
            "Cargo.toml, package.json, CMakeLists.txt, configure.ac, configure, meson.build",
            "acme__thing.toml",
            "manifests/README.md",
            "--manifests DIR",
        ] {
            assert!(e.contains(needle), "{needle}: {e}");
        }
    }
}
