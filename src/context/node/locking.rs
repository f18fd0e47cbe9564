//! Locking a node context (online, once): the runtime found or fetched, every base commit of
//! the context's instances checked out, each one's `package-lock.json` read (or, where it has
//! none, generated as of the cutoff with `npm install --package-lock-only --before`, as the
//! dataset's images resolved it on the day they were built), the same after each instance's
//! patches where they change `package.json`, every tarball kept as an object and checked
//! against its integrity, and the lock proven: every state installed again by `npm ci
//! --offline` from npm's cache made of those objects, with the network cut.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use rayon::prelude::*;

use super::NodeError;
use super::building::{NodeBuilt, link_tree, offline_vars, prepare_script};
use super::document::{self, Generated, GeneratedLock, LockedPackage, NodeLock, Tarball};
use super::registry::{NPMJS, Online};
use super::runtime::{self, Found};
use crate::context::lockdoc::record_lock;
use crate::context::states::{State, commit_time, states_of};
use crate::context::{ContextError, LockOptions, LockSummary};
use crate::diff::{apply_test_and_gold, touched_paths};
use crate::digest::Sha256Digest;
use crate::env::asof::rfc3339;
use crate::env::steps::StepRunner;
use crate::manifest::Context;
use crate::mirror::{Mirror, RepoName};
use crate::sandbox::Network;
use crate::store::{Ark, ObjectStore};

/// How instances group into one node context, as the lock records it.
pub const GROUPING: &str = "one context per repository and manifest version: the instances \
    share node and npm and a cache holding every tarball each base commit's package-lock.json \
    (or one generated as of the cutoff) and each instance's patched package.json name";

/// How a lockfile is resolved where a state has none: `npm install` without installing,
/// scripts or audit (and with `--legacy-peer-deps` when the context installs so).
const RESOLVE: [&str; 5] = [
    "install",
    "--package-lock-only",
    "--ignore-scripts",
    "--no-audit",
    "--no-fund",
];

/// npm's switch that leaves peer dependencies out of a resolution: a lockfile resolved with
/// it installs only with it (`npm ci` re-resolves, online, what it finds missing), so the lock
/// resolves and proves with it exactly when the context's install uses it (dayjs's, as its
/// image's `npm install --legacy-peer-deps` did).
const LEGACY_PEERS: &str = "--legacy-peer-deps";

/// Locks `ctx` (see the module's comment).
pub fn lock(
    ark: &mut Ark,
    ctx: &Context,
    opts: &LockOptions,
    say: &dyn Fn(&str),
) -> Result<LockSummary, ContextError> {
    let started = std::time::Instant::now();
    let no_instances = || NodeError::NoInstances {
        repo: ctx.repo.clone(),
        version: ctx.version.clone(),
    };
    let name = RepoName::parse(&ctx.repo).ok_or_else(no_instances)?;
    let mirror = Mirror::open(&ark.mirrors_dir(), &name).map_err(crate::env::EnvError::from)?;
    let (commits, states) =
        states_of(ark, ctx, opts, &mirror, touches_package_files)?.ok_or_else(no_instances)?;
    let newest = &commits[0];
    let newest_time = commit_time(&mirror, newest)?;
    let cutoff =
        crate::env::lock::resolve_cutoff(ark, ctx, opts.exclude_newer, newest, newest_time)?;
    let registry = if opts.index_url == crate::env::lock::DEFAULT_INDEX {
        NPMJS.to_string()
    } else {
        opts.index_url.clone()
    };
    let online = Online::new(&registry)?;
    say(&format!(
        "{} {}: {} base commits, {} states; packages as of {} ({})",
        ctx.repo,
        ctx.version,
        commits.len(),
        states.len(),
        rfc3339(cutoff.when),
        cutoff.describe()
    ));
    let tmp_root = ark.tmp_dir();
    std::fs::create_dir_all(&tmp_root).map_err(io(&tmp_root))?;
    let work = crate::fsutil::work_dir(&tmp_root, ".tmp-lock-").map_err(io(&tmp_root))?;
    let objects = ark.objects();
    let mut notes = Vec::new();
    let found = find_runtime(
        ctx,
        opts,
        &online,
        cutoff.when,
        &objects,
        work.path(),
        &mut notes,
    )?;
    say(&format!(
        "node {} with npm {} ({})",
        found.identity.node,
        found.identity.npm,
        if found.identity.packed.is_some() {
            "carried: the registry's tarballs"
        } else {
            "the machine's, named by hash"
        }
    ));
    let mut steps = StepRunner::new(opts.unconfined, Network::Allowed)?
        .writable(work.path())?
        .tmp(&work.path().join("tmp"))?
        .read_only(&mirror.path);
    let extra_ca = extra_ca();
    if let Some(ca) = &extra_ca {
        steps = steps.read_only(ca);
    }
    let npm = Npm {
        runtime: &found.root,
        cache: work.path().join("npm-cache"),
        steps: &steps,
        extra_ca,
        registry: online.base.clone(),
        before: rfc3339(cutoff.when),
        legacy_peers: ctx.install.contains(LEGACY_PEERS),
    };
    let mut resolver = Resolver {
        npm: &npm,
        mirror: &mirror,
        objects: &objects,
        src: work.path().join("src"),
        generated: Vec::new(),
        by_package_json: BTreeMap::new(),
    };
    let wanted = resolver.every_state(&states, &mut notes, say)?;
    let tarballs = keep_tarballs(&online, &wanted, &objects, say)?;
    let generated = resolver.finish();
    let doc = NodeLock {
        lock_version: document::LOCK_VERSION.into(),
        created_by: "swe-ark".into(),
        repo: ctx.repo.clone(),
        version: ctx.version.clone(),
        commits: commits.clone(),
        exclude_newer: rfc3339(cutoff.when),
        exclude_newer_rule: cutoff.describe(),
        registry: online.base.clone(),
        grouping: GROUPING.into(),
        runtime: found.identity.clone(),
        inferred: ctx.inferred.clone(),
        generated,
        tarballs,
        notes: notes.clone(),
    };
    let bytes = doc.to_bytes()?;
    let id = objects
        .put_bytes(&bytes)
        .map_err(crate::env::EnvError::from)?;
    let lock_seconds = started.elapsed().as_secs_f64();
    let proof = std::time::Instant::now();
    let built = super::building::build(&doc, &id, &objects, ark.root())?;
    let proven = prove(&npm, &mirror, &states, &built, work.path(), opts.unconfined)?;
    let seconds = proof.elapsed().as_secs_f64();
    say(&format!(
        "proven offline: {proven} distinct installs by `npm ci --offline` from the lock's objects \
         alone ({seconds:.1} s)"
    ));
    record_lock(ark, ctx, &doc, id, bytes.len() as u64, newest)?;
    Ok(summary(ctx, &doc, id, notes, lock_seconds, seconds))
}

/// The machine's `NODE_EXTRA_CA_CERTS`, when it names a file.
fn extra_ca() -> Option<PathBuf> {
    std::env::var_os("NODE_EXTRA_CA_CERTS")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
}

fn io(p: &Path) -> impl Fn(std::io::Error) -> NodeError + '_ {
    move |e| NodeError::Io(format!("{}: {e}", p.display()))
}

/// Whether a patch changes what npm installs: a `package.json` or `package-lock.json` at the
/// root.
fn touches_package_files(patch: &str) -> bool {
    touched_paths(patch)
        .iter()
        .any(|p| p == "package.json" || p == "package-lock.json")
}

/// One download for each URL; the integrity strings two lockfiles give it are all checked.
fn merge(wanted: &mut BTreeMap<String, LockedPackage>, p: LockedPackage) {
    match wanted.get_mut(&p.resolved) {
        None => {
            wanted.insert(p.resolved.clone(), p);
        }
        Some(have) => {
            if let Some(i) = p.integrity {
                let known = have.integrity.get_or_insert_with(String::new);
                if !known.split_whitespace().any(|k| k == i) {
                    *known = format!("{known} {i}").trim().to_string();
                }
            }
        }
    }
}

/// The runtime: the registry's node (`ctx.node`, else the machine's node's major release) and npm
/// as of the cutoff, carried; or, with `--no-pack-runtime`, the machine's own.
fn find_runtime(
    ctx: &Context,
    opts: &LockOptions,
    online: &Online,
    cutoff: std::time::SystemTime,
    objects: &ObjectStore,
    work: &Path,
    notes: &mut Vec<String>,
) -> Result<Found, NodeError> {
    let dest = work.join("runtime");
    if opts.pack_runtime {
        let spec = if ctx.node.is_empty() {
            // The machine's major line, as of the cutoff: its exact release is often newer.
            let version = runtime::machine(opts.runtime.as_deref())?.2.node;
            version.split('.').next().unwrap_or(&version).to_string()
        } else {
            ctx.node.clone()
        };
        return runtime::from_registry(online, &spec, cutoff, objects, &dest);
    }
    let (node, npm, identity) = runtime::machine(opts.runtime.as_deref())?;
    let wants = &ctx.node;
    if !wants.is_empty()
        && identity.node != *wants
        && !identity.node.starts_with(&format!("{wants}."))
    {
        notes.push(format!(
            "the manifest asks for node {wants}; this lock runs with the machine's node {} \
             (--no-pack-runtime)",
            identity.node
        ));
    }
    runtime::assemble(&dest, &node, &npm)?;
    Ok(Found {
        root: dest,
        identity,
    })
}

/// Every package of `wanted` downloaded (eight at a time), checked and kept as an object.
fn keep_tarballs(
    online: &Online,
    wanted: &BTreeMap<String, LockedPackage>,
    objects: &ObjectStore,
    say: &dyn Fn(&str),
) -> Result<Vec<Tarball>, NodeError> {
    say(&format!("downloading {} tarballs", wanted.len()));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(8)
        .build()
        .map_err(|e| NodeError::Registry(format!("a download pool: {e}")))?;
    let list: Vec<&LockedPackage> = wanted.values().collect();
    let mut got: Vec<Tarball> = pool.install(|| {
        list.par_iter()
            .map(|p| online.fetch(p, objects))
            .collect::<Result<Vec<_>, _>>()
    })?;
    got.sort_by(|a, b| (&a.name, &a.version, &a.resolved).cmp(&(&b.name, &b.version, &b.resolved)));
    Ok(got)
}

/// npm, run as the lock runs it: the runtime's, with a cache and configuration of the lock's
/// own.
struct Npm<'a> {
    runtime: &'a Path,
    cache: PathBuf,
    steps: &'a StepRunner,
    /// The certificates the machine adds to node's (`NODE_EXTRA_CA_CERTS`: a proxy's), which
    /// npm's own resolution needs to reach the registry.
    extra_ca: Option<PathBuf>,
    registry: String,
    /// RFC 3339: what resolution admits (`--before`).
    before: String,
    /// Whether to resolve and install with [`LEGACY_PEERS`].
    legacy_peers: bool,
}

impl Npm<'_> {
    fn command(&self, dir: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(self.runtime.join("bin/npm"));
        let system = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
        cmd.args(args)
            .current_dir(dir)
            .env(
                "PATH",
                format!("{}:{system}", self.runtime.join("bin").display()),
            )
            .env("npm_config_cache", &self.cache)
            .env("npm_config_userconfig", "/dev/null")
            .env("npm_config_update_notifier", "false")
            .env("npm_config_registry", &self.registry);
        if let Some(ca) = &self.extra_ca {
            cmd.env("NODE_EXTRA_CA_CERTS", ca);
        }
        cmd
    }

    fn run(&self, dir: &Path, args: &[&str], what: &str) -> Result<(), NodeError> {
        self.steps
            .run(&mut self.command(dir, args), what)
            .map(|_| ())
            .map_err(|e| NodeError::Npm(e.to_string()))
    }

    /// A `package-lock.json` for the tree at `dir`, resolved as of the cutoff (from the tree's
    /// own lock where it has one: npm keeps what it can).
    fn resolve(&self, dir: &Path, what: &str) -> Result<(), NodeError> {
        let before = format!("--before={}", self.before);
        let mut args: Vec<&str> = RESOLVE.to_vec();
        args.push(&before);
        if self.legacy_peers {
            args.push(LEGACY_PEERS);
        }
        self.run(dir, &args, what)
    }
}

/// The lockfile of each state, generated where there is none.
struct Resolver<'a> {
    npm: &'a Npm<'a>,
    mirror: &'a Mirror,
    objects: &'a ObjectStore,
    src: PathBuf,
    generated: Vec<GeneratedLock>,
    /// Lockfiles generated for a base commit's `package.json` (or upgraded from its version-1
    /// lockfile), by that file's sha256: the same file at another commit resolves the same as
    /// of the same cutoff.
    by_package_json: BTreeMap<String, Vec<u8>>,
}

impl Resolver<'_> {
    /// The lockfiles it generated, each once, in the order of their commits.
    fn finish(self) -> Vec<GeneratedLock> {
        let mut generated = self.generated;
        generated.sort_by(|a, b| (&a.commit, a.key()).cmp(&(&b.commit, b.key())));
        generated.dedup_by(|a, b| a.key() == b.key() && a.when == b.when);
        generated
    }

    /// The packages every state's lockfile names, one per URL.
    fn every_state(
        &mut self,
        states: &[State],
        notes: &mut Vec<String>,
        say: &dyn Fn(&str),
    ) -> Result<BTreeMap<String, LockedPackage>, ContextError> {
        let mut wanted: BTreeMap<String, LockedPackage> = BTreeMap::new();
        for (i, state) in states.iter().enumerate() {
            let text = self.state_lock(state)?;
            let what = format!("package-lock.json of {}", state.describe());
            for p in document::locked_packages(&text, &what)? {
                merge(&mut wanted, p);
            }
            say(&format!(
                "state {}/{}: {} ({} tarballs in all so far)",
                i + 1,
                states.len(),
                state.describe(),
                wanted.len()
            ));
        }
        let lacking = wanted.values().filter(|p| p.integrity.is_none()).count();
        if lacking > 0 {
            notes.push(format!(
                "{lacking} packages have no integrity in their lockfile: npm cannot find them \
                 in its cache offline"
            ));
        }
        Ok(wanted)
    }

    /// The `package-lock.json` of `state`: the commit's own, or one generated as of the cutoff
    /// (kept as an object), then, with an instance's patches, updated for what they change.
    fn state_lock(&mut self, state: &State) -> Result<String, ContextError> {
        let src = self.src.clone();
        if src.exists() {
            std::fs::remove_dir_all(&src).map_err(io(&src))?;
        }
        crate::env::lock::checkout(self.mirror, &state.commit, &src)?;
        if !src.join("package.json").is_file() {
            return Err(NodeError::NoPackageJson {
                commit: state.commit.clone(),
            }
            .into());
        }
        let lock_path = src.join("package-lock.json");
        if !lock_path.is_file() {
            let text = self.lockless(state, &src)?;
            std::fs::write(&lock_path, text).map_err(io(&lock_path))?;
        } else {
            self.upgrade_old(&state.commit, &src)?;
        }
        if let Some((id, test_patch, gold)) = &state.patches {
            apply_test_and_gold(&src, [test_patch, gold]).map_err(|(what, detail)| {
                NodeError::Patch {
                    instance: id.clone(),
                    what,
                    detail,
                }
            })?;
            let brings_lock = [test_patch, gold]
                .iter()
                .any(|p| touched_paths(p).iter().any(|f| f == "package-lock.json"));
            if brings_lock {
                self.upgrade_old(&state.commit, &src)?;
            } else {
                self.npm.resolve(
                    &src,
                    &format!(
                        "resolving what {id}'s patches ask for, as of {}",
                        self.npm.before
                    ),
                )?;
                let bytes = read(&lock_path)?;
                self.keep(state, Generated::Patched, Some(id.clone()), &src, &bytes)?;
            }
        }
        String::from_utf8(read(&lock_path)?)
            .map_err(|e| NodeError::Io(format!("{}: {e}", lock_path.display())).into())
    }

    /// The lockfile generated for a base commit that has none.
    fn lockless(&mut self, state: &State, src: &Path) -> Result<Vec<u8>, NodeError> {
        let key = sha256_of(&src.join("package.json"))?;
        let bytes = match self.by_package_json.get(&key) {
            Some(b) => b.clone(),
            None => {
                self.npm.resolve(
                    src,
                    &format!(
                        "resolving {}'s packages as of {}",
                        &state.commit[..12],
                        self.npm.before
                    ),
                )?;
                let b = read(&src.join("package-lock.json"))?;
                self.by_package_json.insert(key, b.clone());
                b
            }
        };
        let base = State {
            commit: state.commit.clone(),
            patches: None,
        };
        self.keep(&base, Generated::Lockless, None, src, &bytes)?;
        Ok(bytes)
    }

    /// The tree's `package-lock.json` at `src` upgraded in place when it is of version 1 (see
    /// [`Generated::Upgraded`]), each such file once.
    fn upgrade_old(&mut self, commit: &str, src: &Path) -> Result<(), NodeError> {
        let lock_path = src.join("package-lock.json");
        let old = read(&lock_path)?;
        if !document::is_version_one(&String::from_utf8_lossy(&old)) {
            return Ok(());
        }
        let key = crate::digest::Sha256Digest::of(&old).hex();
        let bytes = match self.by_package_json.get(&key) {
            Some(b) => b.clone(),
            None => {
                self.npm.resolve(
                    src,
                    &format!(
                        "upgrading {}'s version-1 package-lock.json (its versions kept)",
                        &commit[..12.min(commit.len())]
                    ),
                )?;
                let b = read(&lock_path)?;
                self.by_package_json.insert(key.clone(), b.clone());
                b
            }
        };
        std::fs::write(&lock_path, &bytes).map_err(io(&lock_path))?;
        let state = State {
            commit: commit.to_string(),
            patches: None,
        };
        self.keep(&state, Generated::Upgraded, None, src, &bytes)?;
        if let Some(g) = self.generated.last_mut() {
            g.upgrades_sha256 = Some(key);
        }
        Ok(())
    }

    fn keep(
        &mut self,
        state: &State,
        when: Generated,
        instance: Option<String>,
        src: &Path,
        bytes: &[u8],
    ) -> Result<(), NodeError> {
        let id = self
            .objects
            .put_bytes(bytes)
            .map_err(|e| NodeError::Io(format!("a generated package-lock.json: {e}")))?;
        self.generated.push(GeneratedLock {
            commit: state.commit.clone(),
            when,
            instance,
            package_json_sha256: sha256_of(&src.join("package.json"))?,
            upgrades_sha256: None,
            sha256: id.hex(),
            size: bytes.len() as u64,
        });
        Ok(())
    }
}

fn read(path: &Path) -> Result<Vec<u8>, NodeError> {
    std::fs::read(path).map_err(io(path))
}

fn sha256_of(path: &Path) -> Result<String, NodeError> {
    Ok(Sha256Digest::of(&read(path)?).hex())
}

/// The proof: each distinct state (its `package.json` and lockfile) installed again by `npm
/// ci --offline --ignore-scripts` (with `--legacy-peer-deps` as the context installs) from a
/// cache made of the built environment alone, with the network cut. Returns how many distinct
/// installs it ran.
fn prove(
    online: &Npm<'_>,
    mirror: &Mirror,
    states: &[State],
    built: &NodeBuilt,
    work: &Path,
    unconfined: bool,
) -> Result<usize, ContextError> {
    let cache = work.join("proof-cache");
    link_tree(&built.content, &cache.join("_cacache/content-v2"))?;
    let mut steps = StepRunner::new(unconfined, Network::Isolated)?
        .writable(work)?
        .tmp(&work.join("tmp"))?
        .read_only(&mirror.path)
        .read_only(&built.dir);
    if let Some(locks) = &built.locks {
        steps = steps.read_only(locks);
    }
    let npm = Npm {
        runtime: &built.runtime,
        cache: cache.clone(),
        steps: &steps,
        extra_ca: None,
        registry: online.registry.clone(),
        before: online.before.clone(),
        legacy_peers: online.legacy_peers,
    };
    let src = work.join("proof");
    let mut seen = BTreeSet::new();
    for state in states {
        if src.exists() {
            std::fs::remove_dir_all(&src).map_err(io(&src))?;
        }
        crate::env::lock::checkout(mirror, &state.commit, &src)?;
        let not_covered = |detail: String| NodeError::NotCovered {
            state: state.describe(),
            detail,
        };
        if let Some((id, test_patch, gold)) = &state.patches {
            apply_test_and_gold(&src, [test_patch, gold]).map_err(|(what, detail)| {
                NodeError::Patch {
                    instance: id.clone(),
                    what,
                    detail,
                }
            })?;
        }
        if let Some(locks) = &built.locks {
            let script = prepare_script(&locks.to_string_lossy());
            let out = Command::new("sh")
                .args(["-c", &script])
                .current_dir(&src)
                .output()
                .map_err(|e| not_covered(e.to_string()))?;
            if !out.status.success() {
                return Err(not_covered(String::from_utf8_lossy(&out.stderr).into_owned()).into());
            }
        }
        let key = (
            sha256_of(&src.join("package.json"))?,
            sha256_of(&src.join("package-lock.json")).unwrap_or_default(),
        );
        if !seen.insert(key) {
            continue;
        }
        let mut args = vec!["ci", "--offline", "--ignore-scripts"];
        if npm.legacy_peers {
            args.push(LEGACY_PEERS);
        }
        let mut cmd = npm.command(&src, &args);
        for (k, v) in offline_vars(&cache.to_string_lossy()) {
            cmd.env(k, v);
        }
        npm.steps
            .run(
                &mut cmd,
                &format!("installing {} offline", state.describe()),
            )
            .map_err(|e| not_covered(e.to_string()))?;
    }
    Ok(seen.len())
}

fn summary(
    ctx: &Context,
    doc: &NodeLock,
    id: Sha256Digest,
    notes: Vec<String>,
    lock_seconds: f64,
    seconds: f64,
) -> LockSummary {
    let bytes: u64 = doc.objects().iter().map(|o| o.1).sum();
    let sentence = format!(
        "locked {} {} ({} base commits) with node {} and npm {}: {} tarballs, {} generated \
         package-lock.json, runtime {}, {}; resolved in {lock_seconds:.1} s, proven offline in \
         {seconds:.1} s",
        ctx.repo,
        ctx.version,
        doc.commits.len(),
        doc.runtime.node,
        doc.runtime.npm,
        doc.tarballs.len(),
        doc.generated.len(),
        if doc.runtime.packed.is_some() {
            "carried"
        } else {
            "named by hash"
        },
        crate::units::human_bytes(bytes),
    );
    let details = serde_json::json!({
        "id": id.hex(),
        "kind": "node",
        "repo": ctx.repo,
        "version": ctx.version,
        "commits": doc.commits,
        "exclude_newer": doc.exclude_newer,
        "exclude_newer_rule": doc.exclude_newer_rule,
        "runtime": doc.runtime,
        "tarballs": doc.tarballs.len(),
        "generated_locks": doc.generated.len(),
        "bytes": bytes,
        "notes": notes,
        "lock_seconds": lock_seconds,
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
