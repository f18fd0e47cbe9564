//! Locking a native context (online, once): the manifest's Debian packages and their
//! dependency closure (less what the machine provides) resolved from this machine's apt
//! sources, or from a flat repository's `Packages` file (`--index-url`), each `.deb` fetched,
//! checked against the index's sha256 and kept as an object; then proven: the environment
//! built offline from those objects alone, and every program of the requested packages run
//! from it with the network cut.

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
        "proven offline: built from the lock's objects alone, {} ran with the network cut ({seconds:.1} s)",
        if proven.is_empty() {
            "nothing".to_string()
        } else {
            proven.join(", ")
        }
    ));
    let newest = doc.commits[0].clone();
    record_lock(ark, ctx, &doc, id, bytes.len() as u64, &newest)?;
    Ok(summary(ctx, &doc, id, notes, seconds))
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

/// The proof: every program the requested packages install, run with `--version` from the
/// built environment, confined with the network cut. Returns the programs that ran.
fn prove(
    built: &NativeBuilt,
    doc: &NativeLock,
    unconfined: bool,
    tmp_root: &Path,
) -> Result<Vec<String>, NativeError> {
    let io = |p: &Path, e: std::io::Error| NativeError::Io(format!("{}: {e}", p.display()));
    std::fs::create_dir_all(tmp_root).map_err(|e| io(tmp_root, e))?;
    let work = crate::fsutil::work_dir(tmp_root, ".tmp-prove-").map_err(|e| io(tmp_root, e))?;
    let steps = StepRunner::new(unconfined, Network::Isolated)
        .and_then(|s| s.writable(work.path()))
        .map_err(|e| NativeError::Proof(e.to_string()))?
        .read_only(&built.root);
    let root = built.root.to_string_lossy().to_string();
    let mut ran = Vec::new();
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
        steps
            .run(&mut cmd, &format!("running {name} --version offline"))
            .map_err(|e| NativeError::Proof(e.to_string()))?;
        ran.push(name);
    }
    Ok(ran)
}

fn summary(
    ctx: &Context,
    doc: &NativeLock,
    id: Sha256Digest,
    notes: Vec<String>,
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
    });
    LockSummary {
        id: id.hex(),
        commit: doc.commits[0].clone(),
        notes,
        sentence,
        details,
    }
}
