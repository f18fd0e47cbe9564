//! Locking a Rust context (online, once): the toolchain found and named, every base commit of
//! the context's instances checked out, each one's `Cargo.lock` read (or, where it has none,
//! generated as of the cutoff, as the dataset's images resolved it on the day they were
//! built), the same again after each instance's patches where they change a build file, every
//! registry crate kept as an object by the checksum `Cargo.lock` gives it, and the lock proven:
//! every state fetched again with no network from the local registry made of those objects.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use super::RustError;
use super::document::{self, Crate, GeneratedLock, LockedCrate, RustLock};
use super::registry::{CRATES_IO, Online};
use super::toolchain::{self, Found};
use crate::context::lockdoc::record_lock;
use crate::context::states::{self, State, commit_time, states_of};
use crate::context::{ContextError, LockOptions, LockSummary};
use crate::diff::{apply_test_and_gold, touched_paths};
use crate::digest::Sha256Digest;
use crate::env::asof::rfc3339;
use crate::env::steps::StepRunner;
use crate::manifest::Context;
use crate::mirror::{Mirror, RepoName};
use crate::sandbox::Network;
use crate::store::Ark;

/// How instances group into one Rust context, as the lock records it.
pub const GROUPING: &str = "one context per repository and manifest version: the instances \
    share the toolchain and a registry holding every crate each base commit's Cargo.lock (or \
    one generated as of the cutoff) and each instance's patched build files name";

/// Locks `ctx` (see the module's comment).
pub fn lock(
    ark: &mut Ark,
    ctx: &Context,
    opts: &LockOptions,
    say: &dyn Fn(&str),
) -> Result<LockSummary, ContextError> {
    let found = toolchain::find(opts.runtime.as_deref())?;
    say(&format!(
        "Rust toolchain {} ({}) at {}",
        found.identity.rustc,
        found.identity.host,
        found.root.display()
    ));
    let name = RepoName::parse(&ctx.repo).ok_or_else(|| RustError::NoInstances {
        repo: ctx.repo.clone(),
        version: ctx.version.clone(),
    })?;
    let mirror = Mirror::open(&ark.mirrors_dir(), &name).map_err(crate::env::EnvError::from)?;
    let (commits, states) = covered(ark, ctx, opts, &mirror)?;
    let newest = &commits[0];
    let newest_time = commit_time(&mirror, newest)?;
    let cutoff =
        crate::env::lock::resolve_cutoff(ark, ctx, opts.exclude_newer, newest, newest_time)?;
    let index = if opts.index_url == crate::env::lock::DEFAULT_INDEX {
        CRATES_IO.to_string()
    } else {
        opts.index_url.clone()
    };
    say(&format!(
        "{} {}: {} base commits, {} states; crates as of {} ({})",
        ctx.repo,
        ctx.version,
        commits.len(),
        states.len(),
        rfc3339(cutoff.when),
        cutoff.describe()
    ));

    let (work, cargo_home) = work_dir(ark, &index)?;
    let steps = StepRunner::new(opts.unconfined, Network::Allowed)?
        .writable(work.path())?
        .tmp(&work.path().join("tmp"))?
        .read_only(&found.root)
        .read_only(&mirror.path);
    let cargo = Cargo {
        found: &found,
        home: &cargo_home,
        steps: &steps,
        publish_time: rfc3339(cutoff.when),
    };

    let mut wanted: BTreeSet<LockedCrate> = BTreeSet::new();
    let mut generated = Vec::new();
    let mut notes = Vec::new();
    let src = work.path().join("src");
    for (i, state) in states.iter().enumerate() {
        let lock_text = cargo.state_lock(&mirror, state, &src, &mut generated, ark, &mut notes)?;
        let what = format!("Cargo.lock of {}", state.describe());
        wanted.extend(document::registry_crates(&lock_text, &what)?);
        say(&format!(
            "state {}/{}: {} ({} crates in all so far)",
            i + 1,
            states.len(),
            state.describe(),
            wanted.len()
        ));
    }
    let objects = ark.objects();
    let crates = keep_crates(&index, &wanted, &objects, say)?;
    generated.sort_by(|a: &GeneratedLock, b| a.commit.cmp(&b.commit));
    generated.dedup_by(|a, b| a.commit == b.commit);

    let mut identity = found.identity.clone();
    if opts.pack_runtime {
        say("packing the toolchain (once per archive: its object is shared by hash)");
        let cache = ark.layout().packed_toolchains();
        identity.packed = Some(toolchain::pack_once(&found, &objects, &cache, work.path())?);
    }
    let doc = RustLock {
        lock_version: document::LOCK_VERSION.into(),
        created_by: "swe-ark".into(),
        repo: ctx.repo.clone(),
        version: ctx.version.clone(),
        commits: commits.clone(),
        exclude_newer: rfc3339(cutoff.when),
        exclude_newer_rule: cutoff.describe(),
        index,
        grouping: GROUPING.into(),
        toolchain: identity,
        inferred: ctx.inferred.clone(),
        generated,
        crates,
        notes: notes.clone(),
    };
    let bytes = doc.to_bytes()?;
    let id = objects
        .put_bytes(&bytes)
        .map_err(crate::env::EnvError::from)?;
    let started = std::time::Instant::now();
    let built = super::building::build(&doc, &id, &objects, ark.root())?;
    prove(
        &cargo,
        &mirror,
        &states,
        &built,
        work.path(),
        opts.unconfined,
    )?;
    let seconds = started.elapsed().as_secs_f64();
    say(&format!(
        "proven offline: every state's crates fetched from the lock's registry alone ({seconds:.1} s)"
    ));
    record_lock(ark, ctx, &doc, id, bytes.len() as u64, newest)?;
    Ok(summary(ctx, &doc, id, notes, seconds))
}

/// Every crate of `wanted`, fetched from the registry at `index` and kept as an object.
fn keep_crates(
    index: &str,
    wanted: &BTreeSet<LockedCrate>,
    objects: &crate::store::ObjectStore,
    say: &dyn Fn(&str),
) -> Result<Vec<Crate>, RustError> {
    let mut online = Online::new(index)?;
    let mut crates: Vec<Crate> = Vec::new();
    for (i, c) in wanted.iter().enumerate() {
        crates.push(online.fetch(&c.name, &c.version, c.checksum.as_deref(), objects)?);
        if (i + 1) % 50 == 0 {
            say(&format!("{} of {} crates kept", i + 1, wanted.len()));
        }
    }
    // Two locks may give one crate version different checksums only if the registry lied.
    crates.sort_by(|a, b| (&a.name, &a.version).cmp(&(&b.name, &b.version)));
    crates.dedup_by(|a, b| a.name == b.name && a.version == b.version);
    Ok(crates)
}

/// The base commits (newest first) and the states of the tree the lock covers.
fn covered(
    ark: &Ark,
    ctx: &Context,
    opts: &LockOptions,
    mirror: &Mirror,
) -> Result<states::Covered, ContextError> {
    let found = states_of(ark, ctx, opts, mirror, touches_build_files)?;
    found.ok_or_else(|| {
        RustError::NoInstances {
            repo: ctx.repo.clone(),
            version: ctx.version.clone(),
        }
        .into()
    })
}

/// The lock's work directory under the archive's `tmp/`, with a `CARGO_HOME` that resolves
/// from `index`.
fn work_dir(
    ark: &Ark,
    index: &str,
) -> Result<(crate::fsutil::WorkDir, std::path::PathBuf), RustError> {
    let tmp_root = ark.tmp_dir();
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |e: std::io::Error| RustError::Io(format!("{}: {e}", p.display()))
    };
    std::fs::create_dir_all(&tmp_root).map_err(io(&tmp_root))?;
    let work = crate::fsutil::work_dir(&tmp_root, ".tmp-lock-").map_err(io(&tmp_root))?;
    let cargo_home = work.path().join("cargo-home");
    std::fs::create_dir_all(&cargo_home).map_err(io(&cargo_home))?;
    std::fs::write(cargo_home.join("config.toml"), online_config(index))
        .map_err(io(&cargo_home))?;
    Ok((work, cargo_home))
}

/// Whether a patch changes what cargo resolves: a `Cargo.toml` or `Cargo.lock`.
fn touches_build_files(patch: &str) -> bool {
    touched_paths(patch)
        .iter()
        .any(|p| p == "Cargo.toml" || p == "Cargo.lock" || p.ends_with("/Cargo.toml"))
}

/// `$CARGO_HOME/config.toml` for resolving online: crates.io, or the index `--index-url`
/// names in its place (the lock still says crates.io, as cargo writes replaced sources).
fn online_config(index: &str) -> String {
    if index == CRATES_IO {
        return String::new();
    }
    format!(
        "[source.crates-io]\nreplace-with = \"swe-ark-index\"\n\n[source.swe-ark-index]\n\
         registry = \"{index}\"\n"
    )
}

/// `$CARGO_HOME/config.toml` for running offline from the local registry at `registry`.
pub fn offline_config(registry: &str) -> String {
    format!(
        "[source.crates-io]\nreplace-with = \"swe-ark\"\n\n[source.swe-ark]\n\
         local-registry = \"{registry}\"\n\n[net]\noffline = true\n"
    )
}

/// cargo, run as the lock runs it.
struct Cargo<'a> {
    found: &'a Found,
    home: &'a Path,
    steps: &'a StepRunner,
    /// RFC 3339: what resolution admits.
    publish_time: String,
}

impl Cargo<'_> {
    fn run(&self, dir: &Path, args: &[&str], what: &str) -> Result<(), ContextError> {
        let mut cmd = Command::new(self.found.root.join("bin/cargo"));
        cmd.args(args)
            .current_dir(dir)
            .env("CARGO_HOME", self.home)
            .env("PATH", path_with(&self.found.root))
            // `--publish-time` is unstable in cargo 1.95: the toolchain's own bootstrap switch
            // admits it (docs/LANGUAGES.md says why this is the as-of resolver here).
            .env("RUSTC_BOOTSTRAP", "1")
            .env_remove("RUSTUP_TOOLCHAIN")
            .env_remove("CARGO_TARGET_DIR");
        self.steps
            .run(&mut cmd, what)
            .map(|_| ())
            .map_err(|e| RustError::Cargo(e.to_string()).into())
    }

    /// The `Cargo.lock` of `state`: the commit's own, or one generated as of the cutoff (kept
    /// as an object), then, with an instance's patches, updated for what they change.
    fn state_lock(
        &self,
        mirror: &Mirror,
        state: &State,
        src: &Path,
        generated: &mut Vec<GeneratedLock>,
        ark: &Ark,
        notes: &mut Vec<String>,
    ) -> Result<String, ContextError> {
        if src.exists() {
            std::fs::remove_dir_all(src)
                .map_err(|e| RustError::Io(format!("{}: {e}", src.display())))?;
        }
        crate::env::lock::checkout(mirror, &state.commit, src)?;
        let short = &state.commit[..12];
        if !src.join("Cargo.toml").is_file() {
            return Err(RustError::NoCargoToml {
                commit: state.commit.clone(),
            }
            .into());
        }
        for f in ["rust-toolchain", "rust-toolchain.toml"] {
            if state.patches.is_none()
                && let Ok(text) = std::fs::read_to_string(src.join(f))
            {
                notes.push(format!(
                    "base commit {short} asks for toolchain `{}` ({f}); it runs with {}",
                    text.trim().replace('\n', " "),
                    self.found.identity.rustc
                ));
            }
        }
        let lock_path = src.join("Cargo.lock");
        let publish = format!("--publish-time={}", self.publish_time);
        let generate = |what: String| {
            self.run(
                src,
                &["generate-lockfile", "-Zunstable-options", &publish],
                &what,
            )
        };
        if let Some((id, test_patch, gold)) = &state.patches {
            apply_patches(src, id, [test_patch, gold])?;
            // A patch that brings its own Cargo.lock says what it needs; otherwise what its
            // build files ask for, resolved as of the cutoff (what cargo resolves offline from
            // the registry later, when the patched tree's lock lacks it).
            let brings_lock = [test_patch, gold]
                .iter()
                .any(|p| p.lines().any(|l| l.trim_end() == "+++ b/Cargo.lock"));
            if !brings_lock {
                generate(format!(
                    "resolving what {id}'s patches ask for, as of {}",
                    self.publish_time
                ))?;
            }
        } else if !lock_path.is_file() {
            generate(format!(
                "resolving {short}'s crates as of {}",
                self.publish_time
            ))?;
            let bytes = read(&lock_path)?;
            let id = ark
                .objects()
                .put_bytes(&bytes)
                .map_err(crate::env::EnvError::from)?;
            generated.push(GeneratedLock {
                commit: state.commit.clone(),
                sha256: id.hex(),
                size: bytes.len() as u64,
            });
        }
        String::from_utf8(read(&lock_path)?)
            .map_err(|e| RustError::Io(format!("{}: {e}", lock_path.display())).into())
    }
}

fn read(path: &Path) -> Result<Vec<u8>, RustError> {
    std::fs::read(path).map_err(|e| RustError::Io(format!("{}: {e}", path.display())))
}

/// An instance's test patch, then its gold patch, applied to the tree at `src`.
fn apply_patches(src: &Path, instance: &str, patches: [&str; 2]) -> Result<(), RustError> {
    apply_test_and_gold(src, patches).map_err(|(what, detail)| RustError::Patch {
        instance: instance.to_string(),
        what,
        detail,
    })
}

fn path_with(root: &Path) -> String {
    let system = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
    // rustup's proxies must not stand before the toolchain's own binaries.
    let rest: Vec<&str> = system
        .split(':')
        .filter(|d| !d.ends_with(".cargo/bin"))
        .collect();
    format!("{}:{}", root.join("bin").display(), rest.join(":"))
}

/// The proof: each state fetched again from the built registry with the network cut.
fn prove(
    online: &Cargo<'_>,
    mirror: &Mirror,
    states: &[State],
    built: &super::building::RustBuilt,
    work: &Path,
    unconfined: bool,
) -> Result<(), ContextError> {
    let home = work.join("cargo-home-offline");
    std::fs::create_dir_all(&home)
        .map_err(|e| RustError::Io(format!("{}: {e}", home.display())))?;
    std::fs::write(
        home.join("config.toml"),
        offline_config(&built.registry.to_string_lossy()),
    )
    .map_err(|e| RustError::Io(format!("{}: {e}", home.display())))?;
    let steps = StepRunner::new(unconfined, Network::Isolated)?
        .writable(work)?
        .tmp(&work.join("tmp"))?
        .read_only(&online.found.root)
        .read_only(&mirror.path)
        .read_only(&built.dir);
    let offline = Cargo {
        found: online.found,
        home: &home,
        steps: &steps,
        publish_time: online.publish_time.clone(),
    };
    let src = work.join("proof");
    for state in states {
        if src.exists() {
            std::fs::remove_dir_all(&src)
                .map_err(|e| RustError::Io(format!("{}: {e}", src.display())))?;
        }
        crate::env::lock::checkout(mirror, &state.commit, &src)?;
        if let Some(lock) = built.generated.get(&state.commit)
            && !src.join("Cargo.lock").exists()
        {
            std::fs::copy(lock, src.join("Cargo.lock"))
                .map_err(|e| RustError::Io(format!("{}: {e}", lock.display())))?;
        }
        if let Some((id, test_patch, gold)) = &state.patches {
            apply_patches(&src, id, [test_patch, gold])?;
        }
        offline
            .run(
                &src,
                &["fetch"],
                &format!("fetching {} offline", state.describe()),
            )
            .map_err(|e| RustError::NotCovered {
                state: state.describe(),
                detail: e.to_string(),
            })?;
    }
    Ok(())
}

fn summary(
    ctx: &Context,
    doc: &RustLock,
    id: Sha256Digest,
    notes: Vec<String>,
    seconds: f64,
) -> LockSummary {
    let bytes: u64 = doc.objects().iter().map(|o| o.1).sum();
    let sentence = format!(
        "locked {} {} ({} base commits) with rustc {} ({}): {} crates, {} generated Cargo.lock, \
         toolchain {}, {}; proven offline in {seconds:.1} s",
        ctx.repo,
        ctx.version,
        doc.commits.len(),
        doc.toolchain.rustc,
        doc.toolchain.host,
        doc.crates.len(),
        doc.generated.len(),
        if doc.toolchain.packed.is_some() {
            "carried"
        } else {
            "named by hash"
        },
        crate::units::human_bytes(bytes),
    );
    let details = serde_json::json!({
        "id": id.hex(),
        "kind": "rust",
        "repo": ctx.repo,
        "version": ctx.version,
        "commits": doc.commits,
        "exclude_newer": doc.exclude_newer,
        "exclude_newer_rule": doc.exclude_newer_rule,
        "toolchain": doc.toolchain,
        "crates": doc.crates.len(),
        "generated_locks": doc.generated.len(),
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
