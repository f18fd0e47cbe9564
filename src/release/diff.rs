//! `release diff A.json B.json`: why two releases have different roots, named instance by
//! instance, member by member and object by object. Two builders who started from the same
//! inputs get the same root; where an input differed (a byte of a test patch, a wheel the index
//! served on another day, another interpreter build, a test that ran otherwise), this says which
//! one, reading both bundles from the archives that hold them.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::bundle::{self, CODEBASE_DIR, EXPECTED_MEMBER, Expected, FixedMembers, Manifest};
use crate::digest::Sha256Digest;
use crate::store::Ark;

use super::{ReleaseInstance, Snapshot};

/// At most this many items (files, tests, packages) are named in one detail list.
const SHOWN: usize = 12;

/// One side of a diff: the snapshot it was read from.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    pub name: String,
    pub root: Sha256Digest,
    pub instances: usize,
}

/// What differs between two releases.
#[derive(Debug, Clone, Serialize)]
pub struct ReleaseDiff {
    pub a: Side,
    pub b: Side,
    pub same_root: bool,
    /// Instances with the same bundle and objects in both.
    pub same: usize,
    pub only_in_a: Vec<String>,
    pub only_in_b: Vec<String>,
    pub changed: Vec<InstanceChange>,
}

impl ReleaseDiff {
    /// No difference at all: the same root (and so the same instances, bundles and objects).
    pub fn is_empty(&self) -> bool {
        self.same_root && self.only_in_a.is_empty() && self.only_in_b.is_empty()
    }
}

/// An object of one release's instance and not of the other's, named by the lock when it
/// names it (`pytest-7.4.4-py3-none-any.whl`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct NamedObject {
    pub sha256: Sha256Digest,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// How a member differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    /// In B's bundle only.
    Added,
    /// In A's bundle only.
    Removed,
    Changed,
}

/// One member (or, for `codebase/`, the whole codebase) that differs, and how.
#[derive(Debug, Clone, Serialize)]
pub struct MemberChange {
    pub member: String,
    pub change: Change,
    /// What differs inside it, one sentence each: fields, packages, tests, lines.
    pub details: Vec<String>,
}

/// An instance whose bundle or objects differ.
#[derive(Debug, Clone, Serialize)]
pub struct InstanceChange {
    pub instance_id: String,
    pub bundle_a: Sha256Digest,
    pub bundle_b: Sha256Digest,
    pub objects_only_in_a: Vec<NamedObject>,
    pub objects_only_in_b: Vec<NamedObject>,
    /// Member by member, when both bundles were found in the archives given.
    pub members: Vec<MemberChange>,
    /// Why the members could not be compared (a bundle in none of the archives, unreadable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unread: Option<String>,
}

/// Compares two snapshots; the bundles of instances that differ are looked up in `arks`, in
/// order (the first that holds a bundle is read).
pub fn diff(a: &Snapshot, b: &Snapshot, arks: &[&Ark]) -> ReleaseDiff {
    let by_id = |s: &Snapshot| -> BTreeMap<String, ReleaseInstance> {
        s.instances
            .iter()
            .map(|i| (i.instance_id.clone(), i.clone()))
            .collect()
    };
    let (ia, ib) = (by_id(a), by_id(b));
    let only_in_a = keys_only_in(&ia, &ib);
    let only_in_b = keys_only_in(&ib, &ia);
    let mut same = 0;
    let mut changed = Vec::new();
    for (id, x) in &ia {
        let Some(y) = ib.get(id) else { continue };
        let mut ox = x.objects.clone();
        let mut oy = y.objects.clone();
        ox.sort();
        ox.dedup();
        oy.sort();
        oy.dedup();
        if x.bundle == y.bundle && ox == oy {
            same += 1;
            continue;
        }
        changed.push(instance_change(id, x, y, arks));
    }
    ReleaseDiff {
        a: side(a),
        b: side(b),
        same_root: a.computed_root() == b.computed_root(),
        same,
        only_in_a,
        only_in_b,
        changed,
    }
}

fn side(s: &Snapshot) -> Side {
    Side {
        name: s.name.clone(),
        root: s.computed_root(),
        instances: s.instances.len(),
    }
}

/// Why a bundle of a release cannot be read for the diff.
#[derive(Debug, thiserror::Error)]
enum Unread {
    #[error("bundle {} is unreadable: {source}", .id.short())]
    Unreadable {
        id: Sha256Digest,
        #[source]
        source: Box<bundle::BundleError>,
    },
    #[error("bundle {} is in none of the archives given (--ark, --other-ark)", .0.short())]
    Nowhere(Sha256Digest),
    /// What each archive that could not say said.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Archives(Vec<crate::store::ArkError>),
}

/// The bundle `id` from the first archive that holds it, read and checked against its id.
fn read_bundle(id: &Sha256Digest, arks: &[&Ark]) -> Result<FixedMembers, Unread> {
    let mut errors = Vec::new();
    for ark in arks {
        match ark.bundle_by_id(id) {
            Ok(source) => {
                return bundle::read_fixed_members(&source, Some(*id)).map_err(|e| {
                    Unread::Unreadable {
                        id: *id,
                        source: Box::new(e),
                    }
                });
            }
            Err(crate::store::ArkError::NoSuchBundle(_)) => {}
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Err(Unread::Nowhere(*id))
    } else {
        Err(Unread::Archives(errors))
    }
}

fn instance_change(
    id: &str,
    x: &ReleaseInstance,
    y: &ReleaseInstance,
    arks: &[&Ark],
) -> InstanceChange {
    // The same bundle with other objects (a snapshot edited by hand) is read once, for the
    // names of its lock's artifacts.
    let fa = read_bundle(&x.bundle, arks);
    let fb = (x.bundle != y.bundle).then(|| read_bundle(&y.bundle, arks));
    // Objects are named by whichever lock names them.
    let mut names: BTreeMap<Sha256Digest, String> = BTreeMap::new();
    for f in [fa.as_ref().ok(), fb.as_ref().and_then(|b| b.as_ref().ok())]
        .into_iter()
        .flatten()
    {
        if let Some(lock) = f.files.get("env/pylock.toml") {
            names.extend(artifact_names(lock));
        }
    }
    let only = |from: &[Sha256Digest], other: &[Sha256Digest]| -> Vec<NamedObject> {
        let other: BTreeSet<&Sha256Digest> = other.iter().collect();
        let mut out: Vec<NamedObject> = from
            .iter()
            .filter(|o| !other.contains(o))
            .map(|o| NamedObject {
                sha256: *o,
                name: names.get(o).cloned(),
            })
            .collect();
        out.sort();
        out.dedup();
        out
    };
    let (members, unread) = match (&fa, &fb) {
        (_, None) => (Vec::new(), None),
        (Ok(a), Some(Ok(b))) => (member_changes(a, b), None),
        (Err(e), _) | (_, Some(Err(e))) => (Vec::new(), Some(e.to_string())),
    };
    InstanceChange {
        instance_id: id.to_string(),
        bundle_a: x.bundle,
        bundle_b: y.bundle,
        objects_only_in_a: only(&x.objects, &y.objects),
        objects_only_in_b: only(&y.objects, &x.objects),
        members,
        unread,
    }
}

/// Every artifact a lock names, by sha256 → file name.
fn artifact_names(lock: &[u8]) -> BTreeMap<Sha256Digest, String> {
    let mut out = BTreeMap::new();
    let Ok(doc) = std::str::from_utf8(lock)
        .map_err(|e| e.to_string())
        .and_then(|t| toml::from_str::<toml::Value>(t).map_err(|e| e.to_string()))
    else {
        return out;
    };
    let mut add = |a: &toml::Value| {
        if let (Some(name), Some(sha)) = (
            a.get("name").and_then(|n| n.as_str()),
            a.get("hashes")
                .and_then(|h| h.get("sha256"))
                .and_then(|s| s.as_str()),
        ) && let Ok(d) = sha.parse::<Sha256Digest>()
        {
            out.insert(d, name.to_string());
        }
    };
    for p in packages(&doc) {
        p.get("sdist").into_iter().for_each(&mut add);
        p.get("wheels")
            .and_then(|w| w.as_array())
            .into_iter()
            .flatten()
            .for_each(&mut add);
        p.get("tool")
            .and_then(|t| t.get("swe-ark"))
            .and_then(|t| t.get("built-wheel"))
            .into_iter()
            .for_each(&mut add);
    }
    if let Some(packed) = swe_ark(&doc)
        .and_then(|t| t.get("python"))
        .and_then(|p| p.get("packed"))
    {
        add(packed);
    }
    out
}

fn packages(doc: &toml::Value) -> impl Iterator<Item = &toml::Value> {
    doc.get("packages")
        .and_then(|p| p.as_array())
        .into_iter()
        .flatten()
}

fn swe_ark(doc: &toml::Value) -> Option<&toml::Value> {
    doc.get("tool").and_then(|t| t.get("swe-ark"))
}

/// The keys of `a` that `b` lacks, in order.
fn keys_only_in<V, W>(a: &BTreeMap<String, V>, b: &BTreeMap<String, W>) -> Vec<String> {
    a.keys().filter(|k| !b.contains_key(*k)).cloned().collect()
}

/// `items`, at most [`SHOWN`] of them, and how many more.
fn listed(items: &[String]) -> String {
    let mut text = items
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > SHOWN {
        text.push_str(&format!(" … and {} more", items.len() - SHOWN));
    }
    text
}

/// Member by member, what differs between two bundles read whole (`codebase/` as one).
pub(crate) fn member_changes(a: &FixedMembers, b: &FixedMembers) -> Vec<MemberChange> {
    let mut out = Vec::new();
    if a.manifest.version != b.manifest.version {
        out.push(MemberChange {
            member: bundle::MANIFEST.to_string(),
            change: Change::Changed,
            details: vec![format!(
                "format version {} → {}",
                a.manifest.version, b.manifest.version
            )],
        });
    }
    if let Some(c) = codebase_change(&a.manifest, &b.manifest) {
        out.push(c);
    }
    let names: BTreeSet<&String> = a.files.keys().chain(b.files.keys()).collect();
    for name in names {
        if name == bundle::MANIFEST {
            continue;
        }
        let change = match (a.files.get(name), b.files.get(name)) {
            (Some(x), Some(y)) if x == y => continue,
            (Some(x), Some(y)) => MemberChange {
                member: name.clone(),
                change: Change::Changed,
                details: details_of(name, x, y),
            },
            (Some(_), None) => MemberChange {
                member: name.clone(),
                change: Change::Removed,
                details: Vec::new(),
            },
            (None, Some(_)) => MemberChange {
                member: name.clone(),
                change: Change::Added,
                details: Vec::new(),
            },
            (None, None) => continue,
        };
        out.push(change);
    }
    out
}

fn codebase_change(a: &Manifest, b: &Manifest) -> Option<MemberChange> {
    if a.codebase_tree == b.codebase_tree && a.gitlinks == b.gitlinks {
        return None;
    }
    let files = |m: &Manifest| -> BTreeMap<String, Sha256Digest> {
        m.codebase_members()
            .map(|x| {
                let p = String::from_utf8_lossy(&x.path);
                (
                    p.strip_prefix(CODEBASE_DIR).unwrap_or(&p).to_string(),
                    x.sha256,
                )
            })
            .collect()
    };
    let (fa, fb) = (files(a), files(b));
    let differ: Vec<String> = fa
        .iter()
        .filter(|(p, h)| fb.get(*p).is_some_and(|o| o != *h))
        .map(|(p, _)| p.clone())
        .collect();
    let gone = keys_only_in(&fa, &fb);
    let new = keys_only_in(&fb, &fa);
    let mut details = vec![format!(
        "git tree {} → {}",
        a.codebase_tree, b.codebase_tree
    )];
    if !differ.is_empty() {
        details.push(format!(
            "{} file(s) differ: {}",
            differ.len(),
            listed(&differ)
        ));
    }
    if !gone.is_empty() {
        details.push(format!(
            "{} file(s) only in A: {}",
            gone.len(),
            listed(&gone)
        ));
    }
    if !new.is_empty() {
        details.push(format!("{} file(s) only in B: {}", new.len(), listed(&new)));
    }
    if a.gitlinks != b.gitlinks {
        details.push("the submodules differ".into());
    }
    Some(MemberChange {
        member: CODEBASE_DIR.to_string(),
        change: Change::Changed,
        details,
    })
}

/// What differs inside member `name`, read as what it is.
fn details_of(name: &str, a: &[u8], b: &[u8]) -> Vec<String> {
    let parsed = match name {
        "env/pylock.toml" => lock_details(a, b),
        EXPECTED_MEMBER => expected_details(a, b),
        n if n.ends_with(".json") => json_details(a, b),
        _ => None,
    };
    parsed.unwrap_or_else(|| text_details(a, b))
}

/// The first line that differs, and how many lines each side has.
fn text_details(a: &[u8], b: &[u8]) -> Vec<String> {
    let (ta, tb) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    let (la, lb): (Vec<&str>, Vec<&str>) = (ta.lines().collect(), tb.lines().collect());
    let first = la
        .iter()
        .zip(&lb)
        .position(|(x, y)| x != y)
        .unwrap_or(la.len().min(lb.len()));
    let clip = |s: Option<&&str>| match s {
        Some(s) if s.chars().count() > 100 => {
            format!("`{}…`", s.chars().take(100).collect::<String>())
        }
        Some(s) => format!("`{s}`"),
        None => "(end)".into(),
    };
    vec![format!(
        "line {}: {} → {} ({} and {} lines, {} and {} bytes)",
        first + 1,
        clip(la.get(first)),
        clip(lb.get(first)),
        la.len(),
        lb.len(),
        a.len(),
        b.len()
    )]
}

/// Top-level fields that differ.
fn json_details(a: &[u8], b: &[u8]) -> Option<Vec<String>> {
    let va: serde_json::Value = serde_json::from_slice(a).ok()?;
    let vb: serde_json::Value = serde_json::from_slice(b).ok()?;
    let (oa, ob) = (va.as_object()?, vb.as_object()?);
    let keys: BTreeSet<&String> = oa.keys().chain(ob.keys()).collect();
    let fields: Vec<String> = keys
        .into_iter()
        .filter(|k| oa.get(*k) != ob.get(*k))
        .cloned()
        .collect();
    Some(vec![format!("field(s) differ: {}", listed(&fields))])
}

fn expected_details(a: &[u8], b: &[u8]) -> Option<Vec<String>> {
    let ea = Expected::from_bytes(a).ok()?;
    let eb = Expected::from_bytes(b).ok()?;
    let mut out = Vec::new();
    if ea.verdict != eb.verdict || ea.reason_kind != eb.reason_kind {
        out.push(format!(
            "verdict {} ({}) → {} ({})",
            ea.verdict, ea.reason_kind, eb.verdict, eb.reason_kind
        ));
    }
    for (label, x, y) in [
        ("FAIL_TO_PASS", &ea.fail_to_pass, &eb.fail_to_pass),
        ("PASS_TO_PASS", &ea.pass_to_pass, &eb.pass_to_pass),
        ("XFAIL", &ea.xfail, &eb.xfail),
        ("flaky", &ea.flaky, &eb.flaky),
    ] {
        let (sx, sy): (BTreeSet<&String>, BTreeSet<&String>) =
            (x.iter().collect(), y.iter().collect());
        let gone: Vec<String> = sx.difference(&sy).map(|s| s.to_string()).collect();
        let new: Vec<String> = sy.difference(&sx).map(|s| s.to_string()).collect();
        if !gone.is_empty() {
            out.push(format!("{label}: only in A: {}", listed(&gone)));
        }
        if !new.is_empty() {
            out.push(format!("{label}: only in B: {}", listed(&new)));
        }
    }
    for (label, x, y) in [("before", &ea.pre, &eb.pre), ("after", &ea.post, &eb.post)] {
        let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
        let status = |m: &crate::logparse::StatusMap, k: &String| {
            m.get(k)
                .and_then(|s| serde_json::to_value(s).ok())
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| "not run".into())
        };
        let moved: Vec<String> = keys
            .into_iter()
            .filter(|k| x.get(*k) != y.get(*k))
            .map(|k| format!("{k} {} → {}", status(x, k), status(y, k)))
            .collect();
        if !moved.is_empty() {
            out.push(format!(
                "{} test status(es) {label} the gold patch differ: {}",
                moved.len(),
                listed(&moved)
            ));
        }
    }
    if ea.exit_codes != eb.exit_codes {
        out.push(format!(
            "exit codes {:?} → {:?}",
            ea.exit_codes, eb.exit_codes
        ));
    }
    for (label, differ) in [
        ("test directives", ea.test_directives != eb.test_directives),
        ("log parser", ea.log_parser != eb.log_parser),
        ("network", ea.network != eb.network),
        ("services", ea.services != eb.services),
        ("git describe", ea.describe != eb.describe),
    ] {
        if differ {
            out.push(format!("the {label} differ"));
        }
    }
    Some(out)
}

fn lock_details(a: &[u8], b: &[u8]) -> Option<Vec<String>> {
    let parse =
        |x: &[u8]| -> Option<toml::Value> { toml::from_str(std::str::from_utf8(x).ok()?).ok() };
    let (la, lb) = (parse(a)?, parse(b)?);
    let mut out = made_with_details(&la, &lb);
    let moved = package_moves(&la, &lb);
    if !moved.is_empty() {
        out.push(format!(
            "{} package(s) differ: {}",
            moved.len(),
            listed(&moved)
        ));
    }
    if out.is_empty() {
        out.extend(text_details(a, b));
    }
    Some(out)
}

/// What the locks were made with, where it differs: the interpreter, the cutoff, the index, the
/// resolver.
fn made_with_details(la: &toml::Value, lb: &toml::Value) -> Vec<String> {
    let mut out = Vec::new();
    let (ma, mb) = (swe_ark(la), swe_ark(lb));
    let scalar = |m: Option<&toml::Value>, k: &str| m.and_then(|m| m.get(k)).map(|v| v.to_string());
    for key in [
        "repo",
        "version",
        "commit",
        "exclude-newer",
        "index",
        "resolver",
    ] {
        let (x, y) = (scalar(ma, key), scalar(mb, key));
        if x != y {
            out.push(format!(
                "{key} {} → {}",
                x.unwrap_or_else(|| "(none)".into()),
                y.unwrap_or_else(|| "(none)".into())
            ));
        }
    }
    let python = |m: Option<&toml::Value>| m.and_then(|m| m.get("python")).cloned();
    let (pa, pb) = (python(ma), python(mb));
    if pa != pb {
        let field = |p: &Option<toml::Value>, k: &str| {
            p.as_ref()
                .and_then(|p| p.get(k))
                .map(|v| v.to_string())
                .unwrap_or_else(|| "(none)".into())
        };
        let keys = ["version", "implementation", "platform", "sha256", "packed"];
        let moved: Vec<String> = keys
            .iter()
            .filter(|k| field(&pa, k) != field(&pb, k))
            .map(|k| format!("{k} {} → {}", field(&pa, k), field(&pb, k)))
            .collect();
        out.push(format!("another interpreter: {}", moved.join("; ")));
    }
    out
}

/// Package by package, where the locks differ: versions, and the artifacts each is installed
/// from.
fn package_moves(la: &toml::Value, lb: &toml::Value) -> Vec<String> {
    let pkgs = |l: &toml::Value| -> BTreeMap<String, toml::Value> {
        packages(l)
            .filter_map(|p| Some((p.get("name")?.as_str()?.to_lowercase(), p.clone())))
            .collect()
    };
    let (ka, kb) = (pkgs(la), pkgs(lb));
    let version = |p: &toml::Value| {
        p.get("version")
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_string()
    };
    let mut moved = Vec::new();
    for (name, p) in &ka {
        match kb.get(name) {
            None => moved.push(format!("{name} {} only in A", version(p))),
            Some(q) if p == q => {}
            Some(q) if version(p) != version(q) => {
                moved.push(format!("{name} {} → {}", version(p), version(q)))
            }
            Some(q) => {
                let (na, nb) = (
                    artifact_names(&toml_bytes(p)),
                    artifact_names(&toml_bytes(q)),
                );
                let files: Vec<String> = na
                    .iter()
                    .filter(|(h, _)| !nb.contains_key(*h))
                    .map(|(h, n)| match nb.iter().find(|(_, m)| *m == n) {
                        Some((h2, _)) => format!("{n} sha256 {} → {}", h.short(), h2.short()),
                        None => format!("{n} only in A"),
                    })
                    .chain(
                        nb.iter()
                            .filter(|(h, n)| !na.contains_key(*h) && !na.values().any(|m| m == *n))
                            .map(|(_, n)| format!("{n} only in B")),
                    )
                    .collect();
                if files.is_empty() {
                    moved.push(format!("{name} {}: its entry differs", version(p)));
                } else {
                    moved.push(format!("{name} {}: {}", version(p), files.join(", ")));
                }
            }
        }
    }
    for (name, q) in &kb {
        if !ka.contains_key(name) {
            moved.push(format!("{name} {} only in B", version(q)));
        }
    }
    moved
}

/// One `[[packages]]` entry as a lock of its own, for [`artifact_names`].
fn toml_bytes(package: &toml::Value) -> Vec<u8> {
    let mut doc = toml::map::Map::new();
    doc.insert("packages".into(), toml::Value::Array(vec![package.clone()]));
    toml::to_string(&toml::Value::Table(doc))
        .unwrap_or_default()
        .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_details_name_the_first_line_that_differs() {
        let d = text_details(b"a\nb\nc\n", b"a\nB\nc\n");
        assert_eq!(d, ["line 2: `b` → `B` (3 and 3 lines, 6 and 6 bytes)"]);
        let d = text_details(b"a\n", b"a\nb\n");
        assert_eq!(d, ["line 2: (end) → `b` (1 and 2 lines, 2 and 4 bytes)"]);
    }

    #[test]
    fn lock_details_name_packages_artifacts_and_the_interpreter() {
        let lock = |pytest_sha: &str, py_sha: &str, iniconfig: bool| {
            let mut s = format!(
                "lock-version = \"1.0\"\n\n[[packages]]\nname = \"pytest\"\nversion = \"7.4.4\"\n\
                 wheels = [{{ name = \"pytest-7.4.4-py3-none-any.whl\", size = 1, hashes = {{ \
                 sha256 = \"{pytest_sha}\" }} }}]\n"
            );
            if iniconfig {
                s.push_str("\n[[packages]]\nname = \"iniconfig\"\nversion = \"2.0.0\"\n");
            }
            s.push_str(&format!(
                "\n[tool.swe-ark]\nexclude-newer = \"2024-01-26T00:00:00Z\"\n\n\
                 [tool.swe-ark.python]\nversion = \"3.11.7\"\nsha256 = \"{py_sha}\"\n"
            ));
            s.into_bytes()
        };
        let (h1, h2) = (Sha256Digest::of(b"1").hex(), Sha256Digest::of(b"2").hex());
        let d = lock_details(&lock(&h1, &h1, true), &lock(&h2, &h2, false)).unwrap();
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].starts_with("another interpreter: sha256 "), "{d:?}");
        assert!(
            d[1].contains("2 package(s) differ")
                && d[1].contains("iniconfig 2.0.0 only in A")
                && d[1].contains(&format!(
                    "pytest 7.4.4: pytest-7.4.4-py3-none-any.whl sha256 {} → {}",
                    Sha256Digest::of(b"1").short(),
                    Sha256Digest::of(b"2").short()
                )),
            "{d:?}"
        );
    }
}
