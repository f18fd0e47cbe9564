//! Locking a native context (online, once): the manifest's Debian packages and their
//! dependency closure (less what the machine provides) resolved from this machine's apt
//! sources, or from a flat repository's `Packages` file (`--index-url`), each `.deb` fetched,
//! checked against the index's sha256 and kept as an object; then proven: the environment
//! built offline from those objects alone, and every program of the requested packages
//! started from it with the network cut ([`prove`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use super::NativeError;
use super::building::{self, NativeBuilt};
use super::debian::{self, Stanza};
use super::document::{self, Compiler, Deb, NativeLock};
use crate::context::lockdoc::record_lock;
use crate::context::{ContextError, LockOptions, LockSummary};
use crate::digest::Sha256Digest;
use crate::env::steps::StepRunner;
use crate::manifest::Context;
use crate::sandbox::Network;
use crate::store::{Ark, ObjectStore};

/// Where the packages' paragraphs and files come from.
enum Source {
    /// This machine's apt: `apt-cache show`, `apt-get download --print-uris`.
    Apt(BTreeMap<String, Option<Stanza>>),
    /// A flat repository: `BASE/Packages`, files at `BASE/Filename`.
    Flat {
        base: String,
        index: BTreeMap<String, Stanza>,
    },
}

impl Source {
    fn open(opts: &LockOptions) -> Result<Source, NativeError> {
        if opts.index_url == crate::context::DEFAULT_INDEX {
            return Ok(Source::Apt(BTreeMap::new()));
        }
        let base = opts.index_url.trim_end_matches('/').to_string();
        let bytes = http_get(&format!("{base}/Packages"))?;
        let index = debian::parse(&String::from_utf8_lossy(&bytes))
            .into_iter()
            .map(|s| (s.package.clone(), s))
            .collect();
        Ok(Source::Flat { base, index })
    }

    fn name(&self) -> String {
        match self {
            Source::Apt(_) => "apt".into(),
            Source::Flat { base, .. } => format!("{base}/Packages"),
        }
    }

    fn lookup(&mut self, name: &str) -> Option<Stanza> {
        match self {
            Source::Flat { index, .. } => index.get(name).cloned(),
            Source::Apt(cache) => cache
                .entry(name.to_string())
                .or_insert_with(|| {
                    let out = Command::new("apt-cache")
                        .args(["show", "--no-all-versions", name])
                        .output()
                        .ok()?;
                    let text = String::from_utf8_lossy(&out.stdout);
                    debian::parse(&text).into_iter().next()
                })
                .clone(),
        }
    }

    /// Each package's URL, by name.
    fn urls(&self, names: &[&str]) -> Result<BTreeMap<String, String>, NativeError> {
        match self {
            Source::Flat { base, index } => Ok(names
                .iter()
                .filter_map(|n| {
                    Some((n.to_string(), format!("{base}/{}", index.get(*n)?.filename)))
                })
                .collect()),
            Source::Apt(cache) => {
                let out = Command::new("apt-get")
                    .args(["download", "--print-uris"])
                    .args(names)
                    .output()
                    .map_err(|e| NativeError::Apt(format!("apt-get download: {e}")))?;
                if !out.status.success() {
                    return Err(NativeError::Apt(
                        String::from_utf8_lossy(&out.stderr).trim().to_string(),
                    ));
                }
                // `'URL' FILE SIZE SHA256:HEX`; the file name starts with the package's name.
                let mut urls = BTreeMap::new();
                for line in String::from_utf8_lossy(&out.stdout).lines() {
                    let mut f = line.split_whitespace();
                    let (Some(url), Some(file)) = (f.next(), f.next()) else {
                        continue;
                    };
                    let name = file.split('_').next().unwrap_or(file);
                    if cache.contains_key(name) {
                        urls.insert(name.to_string(), url.trim_matches('\'').to_string());
                    }
                }
                Ok(urls)
            }
        }
    }
}

fn http_get(url: &str) -> Result<Vec<u8>, NativeError> {
    let fail = |detail: String| NativeError::Fetch {
        url: url.to_string(),
        detail,
    };
    let resp = reqwest::blocking::Client::builder()
        .timeout(std::time::Duration::from_secs(600))
        .build()
        .and_then(|c| c.get(url).send())
        .map_err(|e| fail(e.to_string()))?;
    if !resp.status().is_success() {
        return Err(fail(format!("HTTP {}", resp.status())));
    }
    resp.bytes()
        .map(|b| b.to_vec())
        .map_err(|e| fail(e.to_string()))
}

/// Locks `ctx` (see the module's comment).
pub fn lock(
    ark: &mut Ark,
    ctx: &Context,
    opts: &LockOptions,
    say: &dyn Fn(&str),
) -> Result<LockSummary, ContextError> {
    let commits = base_commits(ark, ctx)?;
    let compiler = compiler()?;
    let mut source = Source::open(opts)?;
    say(&format!(
        "{} {}: {} base commits; Debian packages {:?} from {}; gcc {} ({}) from the machine",
        ctx.repo,
        ctx.version,
        commits.len(),
        ctx.debian,
        source.name(),
        compiler.gcc,
        compiler.target
    ));
    let index = source.name();
    let found = debian::closure(&ctx.debian, &index, |n| source.lookup(n))?;
    let names: Vec<&str> = found.carried.keys().map(String::as_str).collect();
    let urls = source.urls(&names)?;
    let objects = ark.objects();
    let mut packages = Vec::new();
    for (i, s) in found.carried.values().enumerate() {
        let url = urls.get(&s.package).ok_or_else(|| NativeError::Fetch {
            url: format!("(no URL for {} {})", s.package, s.version),
            detail: format!("{} did not say where it is", source.name()),
        })?;
        packages.push(keep(s, url, &objects)?);
        if (i + 1) % 20 == 0 {
            say(&format!("{} of {} packages kept", i + 1, names.len()));
        }
    }
    let mut notes: Vec<String> = found
        .unresolved
        .iter()
        .map(|n| {
            format!("dependency `{n}` is a virtual package no alternative provides here: left out")
        })
        .collect();
    if matches!(source, Source::Apt(_)) {
        notes.push(
            "packages as this machine's apt sources served them on the day of the lock (not \
             as of the dataset's environments date: Debian's stable archive changes only by \
             point releases)"
                .into(),
        );
    }
    let doc = NativeLock {
        lock_version: document::LOCK_VERSION.into(),
        created_by: "swe-ark".into(),
        repo: ctx.repo.clone(),
        version: ctx.version.clone(),
        commits: commits.clone(),
        source: source.name(),
        requested: ctx.debian.clone(),
        compiler,
        inferred: ctx.inferred.clone(),
        from_machine: found.from_machine.iter().map(|n| installed(n)).collect(),
        packages,
        notes: notes.clone(),
    };
    let bytes = doc.to_bytes()?;
    let id = objects
        .put_bytes(&bytes)
        .map_err(crate::env::EnvError::from)?;
    let started = std::time::Instant::now();
    let built = building::build(&doc, &id, &objects, ark.root())?;
    let proven = prove(&built, &doc, opts.unconfined, &ark.tmp_dir())?;
    let seconds = started.elapsed().as_secs_f64();
    say(&format!(
        "proven offline: built from the lock's objects alone; with the network cut, {} \
         ({seconds:.1} s)",
        proven.sentence()
    ));
    let newest = doc.commits[0].clone();
    record_lock(ark, ctx, &doc, id, bytes.len() as u64, &newest)?;
    Ok(summary(ctx, &doc, id, notes, &proven, seconds))
}

/// The base commits of the context's instances, the newest first (by the index's order).
fn base_commits(ark: &Ark, ctx: &Context) -> Result<Vec<String>, ContextError> {
    let mut commits = BTreeSet::new();
    for row in ark
        .index()
        .instances_of_repo(&ctx.repo)
        .map_err(crate::env::EnvError::from)?
    {
        if row.version == ctx.version && !row.base_commit.is_empty() {
            commits.insert(row.base_commit);
        }
    }
    if commits.is_empty() {
        return Err(NativeError::NoInstances {
            repo: ctx.repo.clone(),
            version: ctx.version.clone(),
        }
        .into());
    }
    Ok(commits.into_iter().collect())
}

/// What the machine's `gcc` and `g++` say of themselves.
fn compiler() -> Result<Compiler, NativeError> {
    let ask = |program: &str, arg: &str| -> Result<String, NativeError> {
        let out = Command::new(program)
            .arg(arg)
            .output()
            .map_err(|e| NativeError::Compiler(format!("`{program} {arg}`: {e}")))?;
        if !out.status.success() {
            return Err(NativeError::Compiler(format!(
                "`{program} {arg}` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    Ok(Compiler {
        gcc: ask("gcc", "-dumpfullversion")?,
        gxx: ask("g++", "-dumpfullversion")?,
        target: ask("gcc", "-dumpmachine")?,
    })
}

/// `NAME VERSION` as this machine has it installed, or `NAME (not installed here)`.
fn installed(name: &str) -> String {
    let version = Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", name])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|v| !v.is_empty());
    match version {
        Some(v) => format!("{name} {v}"),
        None => format!("{name} (not installed here)"),
    }
}

/// One `.deb` fetched, checked against the index's sha256 and size, kept as an object.
fn keep(s: &Stanza, url: &str, objects: &ObjectStore) -> Result<Deb, NativeError> {
    let id = document::digest(&s.sha256)?;
    if objects.locate(&id).is_none() {
        let bytes = http_get(url)?;
        let got = Sha256Digest::of(&bytes);
        if got != id || bytes.len() as u64 != s.size {
            return Err(NativeError::Mismatch {
                url: url.to_string(),
                got: got.hex(),
                size: bytes.len() as u64,
                expected: s.sha256.clone(),
                expected_size: s.size,
            });
        }
        objects
            .put_bytes(&bytes)
            .map_err(|e| NativeError::Io(format!("keeping {url}: {e}")))?;
    }
    Ok(Deb {
        name: s.package.clone(),
        version: s.version.clone(),
        arch: s.arch.clone(),
        sha256: s.sha256.clone(),
        size: s.size,
        url: url.to_string(),
    })
}

/// What the proof found of the programs of the requested packages, all of which started.
#[derive(Debug, Default)]
struct Proven {
    /// Those that answered `--version` (exit 0).
    answered: Vec<String>,
    /// Those that started and exited otherwise (a program with no `--version` that wants
    /// other arguments, as python3's `pdb3` and python3-minimal's `py3versions`), with the
    /// exit code.
    without_version: Vec<(String, i32)>,
}

/// The proof: every program the requested packages install is started from the built
/// environment, confined with the network cut, as `PROG --version` with no input. It proves
/// that each program *starts*: it can be executed (its `#!` interpreter is found), the loader
/// finds its libraries, and an interpreted one finds the modules it imports first. Whether it
/// knows `--version` is not asked of it: many programs do not (`pdb3` exits 1 with getopt's
/// error, `py3versions` 1 with its usage), so any exit counts as started unless it is one of
/// [`did_not_start`]'s. What a program needs past its start is the tests' to show.
fn prove(
    built: &NativeBuilt,
    doc: &NativeLock,
    unconfined: bool,
    tmp_root: &Path,
) -> Result<Proven, NativeError> {
    let io = |p: &Path, e: std::io::Error| NativeError::Io(format!("{}: {e}", p.display()));
    std::fs::create_dir_all(tmp_root).map_err(|e| io(tmp_root, e))?;
    let work = crate::fsutil::work_dir(tmp_root, ".tmp-prove-").map_err(|e| io(tmp_root, e))?;
    let steps = StepRunner::new(unconfined, Network::Isolated)
        .and_then(|s| s.writable(work.path()))
        .map_err(|e| NativeError::Proof(e.to_string()))?
        .read_only(&built.root);
    let root = built.root.to_string_lossy().to_string();
    let mut proven = Proven::default();
    let mut failed = Vec::new();
    for program in building::programs_of(built, &doc.requested) {
        let mut cmd = Command::new(&program);
        cmd.arg("--version")
            .current_dir(work.path())
            .env_clear()
            .env("HOME", work.path())
            .env(
                "PATH",
                format!("{root}/usr/bin:{}", crate::sandbox::DEFAULT_PATH),
            );
        for (k, v) in building::vars(&root) {
            cmd.env(k, v);
        }
        let name = program
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        // Every program is tried, so that one failure names all that do not start.
        match steps.output(&mut cmd, &format!("starting {name} offline")) {
            Err(e) => match missing_interpreter(&program) {
                // The kernel says only ENOENT, as if the program itself were missing.
                Some(interpreter) => failed.push(format!(
                    "{name}: its `#!` interpreter {interpreter} is not on this machine (a `#!` \
                     path is the machine's, not the lock's)"
                )),
                None => failed.push(format!("{name}: {e}")),
            },
            Ok(out) => match did_not_start(&out) {
                Some(why) => failed.push(format!(
                    "{name}: {why}\n{}",
                    crate::env::steps::tail(&out, 8)
                )),
                None => match out.status.code() {
                    Some(0) => proven.answered.push(name),
                    code => proven.without_version.push((name, code.unwrap_or(-1))),
                },
            },
        }
    }
    if !failed.is_empty() {
        return Err(NativeError::Proof(format!(
            "{} of the programs of {:?} did not start from the lock's environment:\n{}",
            failed.len(),
            doc.requested,
            failed.join("\n")
        )));
    }
    Ok(proven)
}

/// The interpreter a script's `#!` line names, when it is not on this machine: the kernel
/// runs it by that path, which the run sees as the machine's (`#!/usr/bin/python3` is not the
/// lock's python3).
fn missing_interpreter(program: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(program)
        .and_then(|mut f| f.read(&mut head))
        .ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = String::from_utf8_lossy(line.split(|b| *b == b'\n').next()?).into_owned();
    let interpreter = line.split_whitespace().next()?.to_string();
    (!Path::new(&interpreter).exists()).then_some(interpreter)
}

/// Why a program run by [`prove`] did not start, from how it exited and what it printed; None
/// when it started (exit 0 always is). Not starting is: the loader's `error while loading shared libraries` (a
/// library missing; the loader exits 127), exit 126 or 127 (the shell's and `env`'s codes for
/// a program or interpreter not executable or not found), a signal (it crashed before it
/// could answer), or, for a failing run, an interpreter's missing module (Python's
/// `ModuleNotFoundError`/`ImportError`, perl's `Can't locate … in @INC`). Any other exit is a
/// program that ran, whatever it made of `--version`.
fn did_not_start(out: &std::process::Output) -> Option<String> {
    use std::os::unix::process::ExitStatusExt;
    if out.status.success() {
        return None;
    }
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if text.contains("error while loading shared libraries") {
        return Some("a library it needs is not found".into());
    }
    let code = match out.status.code() {
        Some(code @ (126 | 127)) => {
            return Some(format!(
                "exit code {code}: not executable, or a program or interpreter it runs not found"
            ));
        }
        Some(code) => code,
        None => {
            return Some(format!(
                "killed by signal {}",
                out.status.signal().unwrap_or_default()
            ));
        }
    };
    let missing_module = text.lines().any(|l| {
        l.starts_with("ModuleNotFoundError: ")
            || l.starts_with("ImportError: ")
            || (l.starts_with("Can't locate ") && l.contains(" in @INC"))
    });
    missing_module.then(|| format!("exit code {code}: a module it imports is not found"))
}

impl Proven {
    /// What started, for the lock's progress line.
    fn sentence(&self) -> String {
        let mut parts = Vec::new();
        if !self.answered.is_empty() {
            parts.push(format!("{} answered --version", self.answered.join(", ")));
        }
        if !self.without_version.is_empty() {
            let started: Vec<String> = self
                .without_version
                .iter()
                .map(|(name, code)| format!("{name} (exit {code})"))
                .collect();
            parts.push(format!("{} started, without one", started.join(", ")));
        }
        if parts.is_empty() {
            "no program to start".to_string()
        } else {
            parts.join("; ")
        }
    }
}

fn summary(
    ctx: &Context,
    doc: &NativeLock,
    id: Sha256Digest,
    notes: Vec<String>,
    proven: &Proven,
    seconds: f64,
) -> LockSummary {
    let bytes: u64 = doc.objects().iter().map(|o| o.1).sum();
    let sentence = format!(
        "locked {} {} ({} base commits): {} Debian packages for {:?}, {}; gcc {} from the \
         machine with {} of the dependencies; proven offline in {seconds:.1} s",
        ctx.repo,
        ctx.version,
        doc.commits.len(),
        doc.packages.len(),
        doc.requested,
        crate::units::human_bytes(bytes),
        doc.compiler.gcc,
        doc.from_machine.len(),
    );
    let details = serde_json::json!({
        "id": id.hex(),
        "kind": "native",
        "repo": ctx.repo,
        "version": ctx.version,
        "commits": doc.commits,
        "source": doc.source,
        "requested": doc.requested,
        "packages": doc.packages.len(),
        "from_machine": doc.from_machine,
        "compiler": doc.compiler,
        "bytes": bytes,
        "notes": notes,
        "proof_seconds": seconds,
        "proof": {
            "answered_version": proven.answered,
            "started_without_version": proven
                .without_version
                .iter()
                .map(|(program, code)| serde_json::json!({"program": program, "exit": code}))
                .collect::<Vec<_>>(),
        },
    });
    LockSummary {
        id: id.hex(),
        commit: doc.commits[0].clone(),
        notes,
        sentence,
        details,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::{ExitStatus, Output};

    use super::did_not_start;

    fn out(code: Option<i32>, text: &str) -> Output {
        Output {
            status: match code {
                Some(c) => ExitStatus::from_raw(c << 8),
                None => ExitStatus::from_raw(11),
            },
            stdout: text.as_bytes().to_vec(),
            stderr: Vec::new(),
        }
    }

    #[test]
    fn a_program_without_version_started_one_that_could_not_load_did_not() {
        // python3's pdb3 and py3versions, as they answer `--version`: they ran.
        let pdb3 = "Traceback (most recent call last):\n  File \"/usr/bin/pdb3\", line 1801\n\
                    getopt.GetoptError: option --version not recognized\n";
        assert_eq!(did_not_start(&out(Some(1), pdb3)), None);
        assert_eq!(
            did_not_start(&out(Some(1), "usage: py3versions [-v]\n")),
            None
        );
        assert_eq!(did_not_start(&out(Some(0), "cmake version 3.25.1\n")), None);
        // The loader, a missing interpreter, a crash, a missing module: they did not.
        let loader = "x: error while loading shared libraries: libz.so.1: cannot open shared \
                      object file: No such file or directory\n";
        assert!(did_not_start(&out(Some(127), loader)).is_some());
        let env = "/usr/bin/env: 'python9': No such file or directory\n";
        assert!(did_not_start(&out(Some(127), env)).is_some());
        assert!(did_not_start(&out(None, "")).is_some());
        let module =
            "Traceback (most recent call last):\nModuleNotFoundError: No module named 'x'\n";
        assert!(did_not_start(&out(Some(1), module)).is_some());
        let perl = "Can't locate Autom4te/C4che.pm in @INC (you may need to install it)\n";
        assert!(did_not_start(&out(Some(2), perl)).is_some());
        // A module's name printed by a program that answered is no failure.
        assert_eq!(did_not_start(&out(Some(0), module)), None);
    }
}
