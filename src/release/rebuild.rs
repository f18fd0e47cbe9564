//! `verify --rebuild`: each bundle packed again from its repository's mirror and the inputs
//! it recorded, and the new id compared with the stored one: bit-for-bit reproducibility of
//! the pack step.
//!
//! Where the inputs come from: the codebase from the mirror, at the base commit that the
//! bundle's `instance.json` names (its submodules from their own mirrors when the bundle
//! carries them), and `vcs.json` (what git says about that commit) computed
//! from the mirror again when the stored bundle has one (a version 1 bundle is rebuilt
//! without); every other member (the instance, the context, the lock,
//! the logs, the results) from the stored bundle itself, each checked against its sha256 in
//! `bundle.json` and the whole stream against the bundle id. The context is not recorded
//! anywhere else (`pack --all-validated` renders it from `manifests/`, which may have changed
//! since), and the bundle holds the exact bytes that went in, so nothing needs a new record.
//!
//! With [`Revalidate`] (`verify --rebuild --revalidate`), the validation record is not taken
//! from the bundle: the tests run again, offline and sandboxed, with the bundle's own lock,
//! and `expected.json` and the normalized logs are made from that run. A third party who
//! reproduces the id has reproduced the tests' outcomes, not only the packing.

use std::collections::BTreeMap;

use crate::bundle::{self, BundleFile, Manifest, PackInputs, PackOptions, ValidationRecord};
use crate::dataset::{Instance, InstanceError};
use crate::digest::Sha256Digest;
use crate::manifest::Manifests;
use crate::mirror::{Mirror, MirrorError, RepoName};
use crate::progress::{NoProgress, Progress};
use crate::store::{Ark, BundleRow};
use crate::validate::{self, ValidateOptions, expected::BundleRecord};
use crate::vcs::VcsError;

use super::ReleaseError;

/// Running the tests again for a rebuild: the manifests that give each context's commands,
/// and the validation's options (its lock is the bundle's own).
pub struct Revalidate<'a> {
    pub manifests: &'a Manifests,
    pub options: ValidateOptions,
}

/// What rebuilding one bundle found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Rebuilt {
    pub instance_id: String,
    pub bundle: Sha256Digest,
    /// The id the rebuild gave (absent when it could not be made).
    pub rebuilt: Option<Sha256Digest>,
    pub ok: bool,
    pub problems: Vec<String>,
}

/// How many differing members a report names before it sums up the rest.
const MAX_NAMED: usize = 20;

/// The members that differ between the stored bundle's manifest and the rebuild's.
fn differences(stored: &Manifest, rebuilt: &Manifest) -> Vec<String> {
    let mut out = Vec::new();
    if stored.codebase_tree != rebuilt.codebase_tree {
        out.push(format!(
            "the codebase's git tree is {} in the stored bundle, {} from the mirror",
            stored.codebase_tree, rebuilt.codebase_tree
        ));
    }
    let index = |m: &Manifest| -> BTreeMap<Vec<u8>, (String, u64, Sha256Digest)> {
        m.members
            .iter()
            .map(|e| (e.path.clone(), (format!("{:?}", e.kind), e.size, e.sha256)))
            .collect()
    };
    let (a, b) = (index(stored), index(rebuilt));
    let mut named = Vec::new();
    for (path, x) in &a {
        let shown = String::from_utf8_lossy(path);
        match b.get(path) {
            None => named.push(format!("member `{shown}` is only in the stored bundle")),
            Some(y) if y != x => named.push(format!(
                "member `{shown}` differs: stored {} {} bytes sha256 {}, rebuilt {} {} bytes \
                 sha256 {}",
                x.0, x.1, x.2, y.0, y.1, y.2
            )),
            Some(_) => {}
        }
    }
    for path in b.keys().filter(|p| !a.contains_key(*p)) {
        named.push(format!(
            "member `{}` is only in the rebuild",
            String::from_utf8_lossy(path)
        ));
    }
    if stored.gitlinks != rebuilt.gitlinks {
        named.push("the submodules (gitlinks) differ".into());
    }
    let extra = named.len().saturating_sub(MAX_NAMED);
    out.extend(named.into_iter().take(MAX_NAMED));
    if extra > 0 {
        out.push(format!("… and {extra} more differing member(s)"));
    }
    if out.is_empty() {
        out.push(
            "every member matches bundle.json, yet the tar differs (the pack step's bytes \
             changed: a new tar layout needs a new bundle format version)"
                .into(),
        );
    }
    out
}

/// A VCS record in a few words, for a message.
fn summary(r: &crate::vcs::VcsRecord) -> String {
    let tags: Vec<String> = r
        .tags
        .iter()
        .map(|t| format!("{} at {}", t.name, t.distance))
        .collect();
    format!(
        "describe {}, {} commits, tags [{}]",
        r.describe.as_deref().unwrap_or("(no tag)"),
        r.commits,
        tags.join(", ")
    )
}

/// A stored bundle's inputs, as a rebuild or a migration packs them again: the members
/// outside `codebase/` from the bundle (each checked against `bundle.json`, the stream
/// against the id), the codebase and `vcs.json` from the mirror.
struct StoredInputs {
    manifest: Manifest,
    instance: Instance,
    mirror_name: RepoName,
    codebase: bundle::Codebase,
    spec: Option<Vec<u8>>,
    lock: Option<(&'static str, Vec<u8>)>,
    pre_log: Option<Vec<u8>>,
    post_log: Option<Vec<u8>>,
    record: Option<ValidationRecord>,
    /// The stored `vcs.json`, and the one the mirror gives now (when the bundle had one).
    stored_vcs: Option<Vec<u8>>,
    vcs: Option<crate::vcs::VcsRecord>,
}

impl StoredInputs {
    fn pack_inputs(&self) -> PackInputs<'_> {
        PackInputs {
            instance: &self.instance,
            codebase: &self.codebase,
            spec: self.spec.clone(),
            lock: self.lock.clone(),
            pre_log: self.pre_log.clone(),
            post_log: self.post_log.clone(),
            record: self.record.clone(),
            vcs: self.vcs.as_ref(),
        }
    }
}

/// Why a bundle cannot be rebuilt or revalidated: the sentence its report gives.
#[derive(Debug, thiserror::Error)]
enum Problem {
    #[error("the stored bundle cannot be read: {detail} (`swe-ark verify {id}` says more)")]
    Unreadable {
        id: Sha256Digest,
        #[source]
        detail: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("the stored bundle has no instance.json")]
    NoInstance,
    #[error("the stored instance.json is not valid: {0}")]
    BadInstance(#[source] InstanceError),
    #[error("the stored instance.json is not in the canonical form this swe-ark writes")]
    NotCanonical,
    #[error("instance {instance} names repository `{repo}`, which is not OWNER/NAME")]
    BadRepo { instance: String, repo: String },
    #[error(
        "nothing to rebuild from: {0} (add the mirror, or import the archive's export made with \
         --with-history)"
    )]
    NoMirror(#[source] Box<MirrorError>),
    #[error("{0}")]
    Codebase(#[source] Box<MirrorError>),
    #[error("vcs.json cannot be made again from the mirror: {0}")]
    Vcs(#[source] VcsError),
    #[error(
        "--revalidate compares what a validation proved (expected.json, bundle format version \
         3); this bundle has {has}: pack the instance again from the index (`swe-ark pack \
         --instance-ids {instance}`) to get one"
    )]
    NotExpected { has: &'static str, instance: String },
    #[error("--revalidate needs the bundle's lock (env/pylock.toml for Python); it has none")]
    NoLock,
    #[error("the tests could not be run again: {0}")]
    NotRun(crate::validate::ValidateError),
    #[error("the tests could not be run again ({kind}): {reason}")]
    Setup { kind: String, reason: String },
}

/// Reads bundle `row`'s inputs; a sentence saying why when they cannot be had.
fn stored_inputs(
    ark: &Ark,
    row: &BundleRow,
    progress: &dyn Progress,
) -> Result<StoredInputs, Problem> {
    let unreadable = |detail: Box<dyn std::error::Error + Send + Sync>| Problem::Unreadable {
        id: row.id,
        detail,
    };
    let source = ark.bundle(row).map_err(|e| unreadable(e.into()))?;
    let mut members =
        bundle::read_fixed_members(&source, Some(row.id)).map_err(|e| unreadable(e.into()))?;
    // The lock member is its kind's (`env/pylock.toml` for Python).
    let lock_member =
        crate::context::kind_of_bundle(|m| members.files.contains_key(m)).map(|k| k.lock_member());
    let mut take = |name: &str| members.files.remove(name);
    let instance_bytes = take("instance.json").ok_or(Problem::NoInstance)?;
    let instance = Instance::from_json(&instance_bytes).map_err(Problem::BadInstance)?;
    if instance.to_canonical_json() != instance_bytes {
        return Err(Problem::NotCanonical);
    }
    let name = RepoName::parse(&instance.repo).ok_or_else(|| Problem::BadRepo {
        instance: instance.instance_id.clone(),
        repo: instance.repo.clone(),
    })?;
    let mirror =
        Mirror::open(&ark.mirrors_dir(), &name).map_err(|e| Problem::NoMirror(Box::new(e)))?;
    // As the bundle was packed: with its submodules' files when it carries them (from their
    // mirrors), else without (bundles from before submodules were carried keep their ids).
    let carried = members.manifest.gitlinks.iter().any(|g| g.tree.is_some());
    let codebase = if carried {
        mirror
            .codebase_with_submodules(&ark.mirrors_dir(), &instance.base_commit, progress)
            .map(|(c, _)| c)
    } else {
        mirror.codebase_at(&instance.base_commit, progress)
    }
    .map_err(|e| Problem::Codebase(Box::new(e)))?;
    let (spec, lock) = (
        take("env/spec.toml"),
        lock_member.and_then(|m| take(m).map(|b| (m, b))),
    );
    let (pre_log, post_log) = (take("logs/pre.log"), take("logs/post.log"));
    let record = match (
        take(crate::bundle::EXPECTED_MEMBER),
        take(crate::bundle::RESULTS_MEMBER),
    ) {
        (Some(e), _) => Some(ValidationRecord::Expected(e)),
        (None, Some(r)) => Some(ValidationRecord::Results(r)),
        (None, None) => None,
    };
    let stored_vcs = take(crate::vcs::MEMBER);
    let vcs = match &stored_vcs {
        None => None,
        Some(_) => {
            Some(crate::vcs::record(&mirror.path, &instance.base_commit).map_err(Problem::Vcs)?)
        }
    };
    Ok(StoredInputs {
        manifest: members.manifest,
        instance,
        mirror_name: name,
        codebase,
        spec,
        lock,
        pre_log,
        post_log,
        record,
        stored_vcs,
        vcs,
    })
}

/// Packs bundle `row` again from its mirror and its own recorded inputs, in a scratch
/// directory under the archive's `tmp/`, and compares the ids. Problems (a bundle that cannot
/// be read, no mirror, a missing commit, a different id) are in the result, not errors.
pub fn rebuild(
    ark: &Ark,
    row: &BundleRow,
    revalidate: Option<&Revalidate>,
    progress: &dyn Progress,
) -> Result<Rebuilt, ReleaseError> {
    let mut result = Rebuilt {
        instance_id: row.instance_id.clone(),
        bundle: row.id,
        rebuilt: None,
        ok: false,
        problems: Vec::new(),
    };
    let mut stored = match stored_inputs(ark, row, progress) {
        Ok(s) => s,
        Err(problem) => {
            result.problems.push(problem.to_string());
            return Ok(result);
        }
    };
    if let Some(again) = revalidate {
        match revalidated(ark, &stored, again) {
            Ok(r) => {
                stored.record = Some(ValidationRecord::Expected(r.expected));
                (stored.pre_log, stored.post_log) = (r.pre_log, r.post_log);
            }
            Err(problem) => {
                result.problems.push(problem.to_string());
                return Ok(result);
            }
        }
    }
    let tmp = ark.tmp_dir();
    std::fs::create_dir_all(&tmp).map_err(|source| ReleaseError::Io {
        path: tmp.clone(),
        source,
    })?;
    let scratch = crate::fsutil::work_dir(&tmp, &format!("{}rebuild-", crate::fsutil::TEMP_PREFIX))
        .map_err(|source| ReleaseError::Io {
            path: tmp.clone(),
            source,
        })?;
    // The level does not change the id; the fastest one will do.
    let options = PackOptions {
        level: 1,
        threads: 0,
    };
    let packed = bundle::pack_to_dir(&stored.pack_inputs(), scratch.path(), &options, &NoProgress)?;
    result.rebuilt = Some(packed.id);
    if packed.id == row.id {
        result.ok = true;
        return Ok(result);
    }
    result.problems.push(format!(
        "the rebuild from mirror {} at {} gives bundle {}, not {}",
        stored.mirror_name, stored.instance.base_commit, packed.id, row.id
    ));
    if let (Some(was), Some(now)) = (&stored.stored_vcs, &stored.vcs)
        && *was != now.to_bytes()
    {
        let was = crate::vcs::VcsRecord::from_bytes(was)
            .map(|r| summary(&r))
            .unwrap_or_else(|e| e.to_string());
        result.problems.push(format!(
            "vcs.json: the stored bundle says {was}; the mirror says {} now (tags moved, or \
             history added under the base commit)",
            summary(now)
        ));
    }
    // pack_to_dir always writes a file; its manifest says what differs, and its members how
    // (a test's two statuses, a log's first differing line).
    if let Some(path) = &packed.path {
        let rebuilt = bundle::read_fixed_members(&BundleFile::new(path), None)?;
        result
            .problems
            .extend(differences(&stored.manifest, &rebuilt.manifest));
        let before = bundle::read_fixed_members(&ark.bundle(row)?, Some(row.id))?;
        for m in super::diff::member_changes(&before, &rebuilt) {
            if m.member == bundle::CODEBASE_DIR || m.member == bundle::MANIFEST {
                continue;
            }
            for d in m.details {
                result.problems.push(format!("{}: {d}", m.member));
            }
        }
    }
    Ok(result)
}

/// What migrating one bundle did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Migrated {
    pub instance_id: String,
    pub bundle: Sha256Digest,
    pub from_version: u32,
    /// The version 3 bundle it became (absent when it could not be made, or with a dry run).
    pub migrated: Option<Sha256Digest>,
    pub problems: Vec<String>,
}

/// Packs a version 1 or 2 bundle again as version 3 (docs/BUNDLE-FORMAT.md): its
/// `results.json` becomes `expected.json` and its raw logs are normalized, by the rules
/// `pack` follows for a new validation; every other input comes from the bundle and the
/// mirror, as [`rebuild`] takes them. The new bundle goes into the archive's store and index
/// beside the old one (which a release may still name); `dry_run` checks without storing.
pub fn migrate(
    ark: &mut Ark,
    row: &BundleRow,
    dry_run: bool,
    progress: &dyn Progress,
) -> Result<Migrated, ReleaseError> {
    let mut result = Migrated {
        instance_id: row.instance_id.clone(),
        bundle: row.id,
        from_version: row.format_version,
        migrated: None,
        problems: Vec::new(),
    };
    let mut stored = match stored_inputs(ark, row, progress) {
        Ok(s) => s,
        Err(problem) => {
            result.problems.push(problem.to_string());
            return Ok(result);
        }
    };
    let results = match &stored.record {
        Some(ValidationRecord::Results(bytes)) => {
            match serde_json::from_slice::<validate::Results>(bytes) {
                Ok(r) => r,
                Err(e) => {
                    result.problems.push(format!(
                        "its results.json is not a validation's results this swe-ark reads: {e}"
                    ));
                    return Ok(result);
                }
            }
        }
        Some(ValidationRecord::Expected(_)) => {
            result
                .problems
                .push("it is version 3 already: nothing to migrate".into());
            return Ok(result);
        }
        None => {
            result.problems.push(
                "it holds no validation record (results.json): version 3 is a validated \
                 bundle; `swe-ark validate` the instance, then `swe-ark pack --instance-ids`"
                    .into(),
            );
            return Ok(result);
        }
    };
    let converted = BundleRecord::of(
        &results,
        stored.pre_log.as_deref(),
        stored.post_log.as_deref(),
    );
    stored.record = Some(ValidationRecord::Expected(converted.expected));
    (stored.pre_log, stored.post_log) = (converted.pre_log, converted.post_log);
    let options = PackOptions {
        level: 3,
        threads: 0,
    };
    if dry_run {
        let inputs = stored.pack_inputs();
        let plan = bundle::plan(&inputs);
        let (_, id, _) = plan.write_tar(std::io::sink(), &NoProgress)?;
        result.migrated = Some(id);
    } else {
        let packed = ark.pack(&stored.pack_inputs(), &options, progress)?;
        result.migrated = Some(packed.id);
    }
    Ok(result)
}

/// The tests of the bundle's instance run again with the bundle's lock, as a version 3
/// record; a sentence when they cannot be (a version 1 or 2 bundle, no lock, an archive
/// problem). The logs of a bundle made before the fixed layout were normalized with the host's
/// paths masked: when the bundle's logs are those of the run normalized that way, and not the
/// other, that is the record.
fn revalidated(
    ark: &Ark,
    stored: &StoredInputs,
    again: &Revalidate,
) -> Result<BundleRecord, Problem> {
    let instance = &stored.instance;
    let lock = stored.lock.as_ref().map(|(_, b)| b.as_slice());
    match &stored.record {
        Some(ValidationRecord::Expected(_)) => {}
        Some(ValidationRecord::Results(_)) | None => {
            return Err(Problem::NotExpected {
                has: if stored.record.is_some() {
                    "results.json"
                } else {
                    "no validation record"
                },
                instance: instance.instance_id.clone(),
            });
        }
    }
    let Some(lock) = lock else {
        return Err(Problem::NoLock);
    };
    let mut options = again.options.clone();
    options.lock = Some(Sha256Digest::of(lock));
    let v =
        validate::validate(ark, again.manifests, instance, &options).map_err(Problem::NotRun)?;
    if v.results.is_setup_problem() {
        return Err(Problem::Setup {
            kind: crate::verdict::reason_word(v.results.reason_kind).to_string(),
            reason: v.results.reason.clone(),
        });
    }
    let record = |host_rules| {
        BundleRecord::with_rules(
            &v.results,
            v.log_pre.as_deref(),
            v.log_post.as_deref(),
            host_rules,
        )
    };
    let fixed = record(false);
    let same_logs = |r: &BundleRecord| r.pre_log == stored.pre_log && r.post_log == stored.post_log;
    if !same_logs(&fixed) {
        let host = record(true);
        if same_logs(&host) {
            return Ok(host);
        }
    }
    Ok(fixed)
}
