//! `verify --rebuild`: each bundle packed again from its repository's mirror and the inputs
//! it recorded, and the new id compared with the stored one: bit-for-bit reproducibility of
//! the pack step.
//!
//! Where the inputs come from: the codebase from the mirror, at the base commit that the
//! bundle's `instance.json` names, and `vcs.json` (what git says about that commit) computed
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
use crate::dataset::Instance;
use crate::digest::Sha256Digest;
use crate::manifest::Manifests;
use crate::mirror::{Mirror, RepoName};
use crate::progress::{NoProgress, Progress};
use crate::store::{Ark, BundleRow};
use crate::validate::{self, ValidateOptions, expected::BundleRecord};

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
    let read = ark
        .bundle(row)
        .map_err(|e| e.to_string())
        .and_then(|b| bundle::read_fixed_members(&b, Some(row.id)).map_err(|e| e.to_string()));
    let mut members = match read {
        Ok(m) => m,
        Err(e) => {
            result.problems.push(format!(
                "the stored bundle cannot be read: {e} (`swe-ark verify {}` says more)",
                row.id
            ));
            return Ok(result);
        }
    };
    let mut take = |name: &str| members.files.remove(name);
    let Some(instance_bytes) = take("instance.json") else {
        result
            .problems
            .push("the stored bundle has no instance.json".into());
        return Ok(result);
    };
    let instance = match Instance::from_json(&instance_bytes) {
        Ok(i) => i,
        Err(e) => {
            result
                .problems
                .push(format!("the stored instance.json is not valid: {e}"));
            return Ok(result);
        }
    };
    if instance.to_canonical_json() != instance_bytes {
        result.problems.push(
            "the stored instance.json is not in the canonical form this swe-ark writes".into(),
        );
        return Ok(result);
    }
    let Some(name) = RepoName::parse(&instance.repo) else {
        result.problems.push(format!(
            "instance {} names repository `{}`, which is not OWNER/NAME",
            instance.instance_id, instance.repo
        ));
        return Ok(result);
    };
    let mirror = match Mirror::open(&ark.mirrors_dir(), &name) {
        Ok(m) => m,
        Err(e) => {
            result.problems.push(format!(
                "nothing to rebuild from: {e} (add the mirror, or import the archive's export \
                 made with --with-history)"
            ));
            return Ok(result);
        }
    };
    let codebase = match mirror.codebase_at(&instance.base_commit, progress) {
        Ok(c) => c,
        Err(e) => {
            result.problems.push(e.to_string());
            return Ok(result);
        }
    };
    let (spec, lock) = (take("env/spec.toml"), take("env/pylock.toml"));
    let (mut pre_log, mut post_log) = (take("logs/pre.log"), take("logs/post.log"));
    let mut record = match (
        take(crate::bundle::EXPECTED_MEMBER),
        take(crate::bundle::RESULTS_MEMBER),
    ) {
        (Some(e), _) => Some(ValidationRecord::Expected(e)),
        (None, Some(r)) => Some(ValidationRecord::Results(r)),
        (None, None) => None,
    };
    if let Some(again) = revalidate {
        match revalidated(ark, &instance, lock.as_deref(), &record, again) {
            Ok(r) => {
                record = Some(ValidationRecord::Expected(r.expected));
                (pre_log, post_log) = (r.pre_log, r.post_log);
            }
            Err(problem) => {
                result.problems.push(problem);
                return Ok(result);
            }
        }
    }
    let stored_vcs = take(crate::vcs::MEMBER);
    let vcs = match &stored_vcs {
        None => None,
        Some(_) => match crate::vcs::record(&mirror.path, &instance.base_commit) {
            Ok(r) => Some(r),
            Err(e) => {
                result.problems.push(format!(
                    "vcs.json cannot be made again from the mirror: {e}"
                ));
                return Ok(result);
            }
        },
    };
    let inputs = PackInputs {
        instance: &instance,
        codebase: &codebase,
        spec,
        lock,
        pre_log,
        post_log,
        record,
        vcs: vcs.as_ref(),
    };
    let tmp = ark.tmp_dir();
    std::fs::create_dir_all(&tmp).map_err(|source| ReleaseError::Io {
        path: tmp.clone(),
        source,
    })?;
    let scratch = tempfile::Builder::new()
        .prefix(&format!("{}rebuild-", crate::fsutil::TEMP_PREFIX))
        .tempdir_in(&tmp)
        .map_err(|source| ReleaseError::Io {
            path: tmp.clone(),
            source,
        })?;
    // The level does not change the id; the fastest one will do.
    let options = PackOptions {
        level: 1,
        threads: 0,
    };
    let packed = bundle::pack_to_dir(&inputs, scratch.path(), &options, &NoProgress)?;
    result.rebuilt = Some(packed.id);
    if packed.id == row.id {
        result.ok = true;
    } else {
        result.problems.push(format!(
            "the rebuild from mirror {name} at {} gives bundle {}, not {}",
            instance.base_commit, packed.id, row.id
        ));
        if let (Some(stored), Some(now)) = (&stored_vcs, &vcs)
            && *stored != now.to_bytes()
        {
            let was = crate::vcs::VcsRecord::from_bytes(stored)
                .map(|r| summary(&r))
                .unwrap_or_else(|e| e.to_string());
            result.problems.push(format!(
                "vcs.json: the stored bundle says {was}; the mirror says {} now (tags moved, \
                 or history added under the base commit)",
                summary(now)
            ));
        }
        // pack_to_dir always writes a file; its manifest says what differs, and its members
        // how (a test's two statuses, a log's first differing line).
        if let Some(path) = &packed.path {
            let rebuilt = bundle::read_fixed_members(&BundleFile::new(path), None)?;
            result
                .problems
                .extend(differences(&members.manifest, &rebuilt.manifest));
            let stored = bundle::read_fixed_members(&ark.bundle(row)?, Some(row.id))?;
            for m in super::diff::member_changes(&stored, &rebuilt) {
                if m.member == bundle::CODEBASE_DIR || m.member == bundle::MANIFEST {
                    continue;
                }
                for d in m.details {
                    result.problems.push(format!("{}: {d}", m.member));
                }
            }
        }
    }
    Ok(result)
}

/// The tests of `instance` run again with the bundle's lock, as a version 3 record; a
/// sentence when they cannot be (a version 1 or 2 bundle, no lock, an archive problem).
fn revalidated(
    ark: &Ark,
    instance: &crate::dataset::Instance,
    lock: Option<&[u8]>,
    stored: &Option<ValidationRecord>,
    again: &Revalidate,
) -> Result<BundleRecord, String> {
    match stored {
        Some(ValidationRecord::Expected(_)) => {}
        Some(ValidationRecord::Results(_)) | None => {
            return Err(format!(
                "--revalidate compares what a validation proved (expected.json, bundle format \
                 version 3); this bundle has {}: pack the instance again from the index \
                 (`swe-ark pack --instance-ids {}`) to get one",
                if stored.is_some() {
                    "results.json"
                } else {
                    "no validation record"
                },
                instance.instance_id
            ));
        }
    }
    let Some(lock) = lock else {
        return Err("--revalidate needs the bundle's lock (env/pylock.toml); it has none".into());
    };
    let mut options = again.options.clone();
    options.lock = Some(Sha256Digest::of(lock));
    let v = validate::validate(ark, again.manifests, instance, &options)
        .map_err(|e| format!("the tests could not be run again: {e}"))?;
    if v.results.is_setup_problem() {
        return Err(format!(
            "the tests could not be run again ({}): {}",
            v.results.reason_kind, v.results.reason
        ));
    }
    Ok(BundleRecord::of(
        &v.results,
        v.log_pre.as_deref(),
        v.log_post.as_deref(),
    ))
}
