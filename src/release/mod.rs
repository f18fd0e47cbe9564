//! Dataset releases: a named set of instances, each with its bundle and the objects its lock
//! needs, summed up by one root hash (docs/RELEASES.md).
//!
//! [`Snapshot`] is the small JSON file a maintainer publishes (`snapshots/NAME.json`);
//! [`root_of`] is the root hash over its canonical form, which `scripts/release_root.py`
//! recomputes in a few lines of Python. [`create`] makes a snapshot from an archive,
//! [`verify`] checks an archive against one, [`rebuild`] packs bundles again from their
//! mirrors and compares ids, [`diff`] names what makes two releases differ.

mod create;
mod diff;
pub mod ops;
pub mod rebuild;
mod verify;

use serde::{Deserialize, Serialize};

use crate::bundle::BundleError;
use crate::digest::Sha256Digest;
use crate::store::{ArkError, IndexError, ObjectError};

pub use create::{LockReader, Selection, create};
pub use diff::{Change, InstanceChange, MemberChange, NamedObject, ReleaseDiff, Side, diff};
pub use ops::OpsError;
pub use verify::verify;

/// The `format` of every snapshot.
pub const FORMAT: &str = "swe-ark-release";
/// The snapshot format version this swe-ark writes and reads.
pub const VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    #[error("the release snapshot {0}")]
    BadSnapshot(String),
    #[error(
        "release name `{0}` must be 1 to 100 letters, digits, `-`, `_` or `.` (and not `.` or `..`)"
    )]
    BadName(String),
    #[error("{0}")]
    Selection(String),
    #[error("bundle {bundle} of instance {instance}: its lock is unreadable: {detail}")]
    BadLock {
        instance: String,
        bundle: Sha256Digest,
        detail: String,
    },
    #[error(transparent)]
    Ark(#[from] ArkError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Bundle(#[from] BundleError),
    #[error(transparent)]
    Object(#[from] ObjectError),
    #[error("I/O on `{path}`: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// One instance of a release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseInstance {
    pub instance_id: String,
    /// The bundle's id (sha256 of its uncompressed tar).
    pub bundle: Sha256Digest,
    /// Every object the bundle's lock needs (wheels, sdists, built wheels, the packed
    /// interpreter), sorted, each once.
    pub objects: Vec<Sha256Digest>,
}

/// A release snapshot, as `release create` writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    pub format: String,
    pub version: u32,
    pub name: String,
    /// When it was made (RFC 3339, UTC), in snapshots written before swe-ark left it out so
    /// that the same release makes the same file anywhere; read, never written.
    #[serde(default, skip_serializing)]
    pub created_at: Option<String>,
    /// [`root_of`] the instances.
    pub root: Sha256Digest,
    /// Sorted by instance id (bytewise).
    pub instances: Vec<ReleaseInstance>,
}

/// Release names: what a file name and a command line carry safely.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// The instances sorted by id (bytewise), each with its objects sorted and deduplicated.
fn normalized(instances: &[ReleaseInstance]) -> Vec<ReleaseInstance> {
    let mut out: Vec<ReleaseInstance> = instances
        .iter()
        .map(|i| {
            let mut objects = i.objects.clone();
            objects.sort();
            objects.dedup();
            ReleaseInstance {
                instance_id: i.instance_id.clone(),
                bundle: i.bundle,
                objects,
            }
        })
        .collect();
    out.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    out
}

// The canonical form's shapes: fields in bytewise order of their names, so that serde_json's
// compact output is JSON with sorted keys and no whitespace.
#[derive(Serialize)]
struct CanonicalRelease<'a> {
    format: &'a str,
    instances: Vec<CanonicalInstance<'a>>,
    version: u32,
}

#[derive(Serialize)]
struct CanonicalInstance<'a> {
    bundle: &'a Sha256Digest,
    instance_id: &'a str,
    objects: &'a [Sha256Digest],
}

/// The bytes the root hash is taken over: the JSON object
/// `{"format":"swe-ark-release","instances":[…],"version":1}` with every key sorted, no
/// whitespace, strings escaped as JSON requires and nothing more (non-ASCII as UTF-8), each
/// instance `{"bundle":…,"instance_id":…,"objects":[…]}`, instances sorted by id bytewise,
/// objects sorted and each once, hashes as lowercase hex. Python's
/// `json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)` gives the
/// same bytes (docs/RELEASES.md).
pub fn canonical_bytes(instances: &[ReleaseInstance]) -> Vec<u8> {
    let instances = normalized(instances);
    let doc = CanonicalRelease {
        format: FORMAT,
        instances: instances
            .iter()
            .map(|i| CanonicalInstance {
                bundle: &i.bundle,
                instance_id: &i.instance_id,
                objects: &i.objects,
            })
            .collect(),
        version: VERSION,
    };
    // Strings, hashes and an integer always serialize.
    serde_json::to_vec(&doc).unwrap_or_default()
}

/// The root hash of a release: sha256 of [`canonical_bytes`].
pub fn root_of(instances: &[ReleaseInstance]) -> Sha256Digest {
    Sha256Digest::of(&canonical_bytes(instances))
}

impl Snapshot {
    /// A snapshot of `instances` (sorted here) with its root.
    pub fn new(name: &str, instances: &[ReleaseInstance]) -> Result<Snapshot, ReleaseError> {
        Snapshot::make(name, instances, false)
    }

    /// A snapshot of a shard's kept instances, which may be none (a shard file's release).
    pub fn of_shard(name: &str, instances: &[ReleaseInstance]) -> Result<Snapshot, ReleaseError> {
        Snapshot::make(name, instances, true)
    }

    fn make(
        name: &str,
        instances: &[ReleaseInstance],
        may_be_empty: bool,
    ) -> Result<Snapshot, ReleaseError> {
        if !valid_name(name) {
            return Err(ReleaseError::BadName(name.to_string()));
        }
        let instances = normalized(instances);
        if !(may_be_empty && instances.is_empty()) {
            check_instances(&instances)?;
        }
        Ok(Snapshot {
            format: FORMAT.to_string(),
            version: VERSION,
            name: name.to_string(),
            created_at: None,
            root: root_of(&instances),
            instances,
        })
    }

    /// Parses a snapshot file's bytes. The root it states is not checked here:
    /// [`Snapshot::computed_root`] says what it should be.
    pub fn parse(bytes: &[u8]) -> Result<Snapshot, ReleaseError> {
        Snapshot::parse_as(bytes, false)
    }

    /// [`Snapshot::parse`] for a shard file's release, which may hold no instance.
    pub fn parse_of_shard(bytes: &[u8]) -> Result<Snapshot, ReleaseError> {
        Snapshot::parse_as(bytes, true)
    }

    fn parse_as(bytes: &[u8], may_be_empty: bool) -> Result<Snapshot, ReleaseError> {
        let snap: Snapshot = serde_json::from_slice(bytes)
            .map_err(|e| ReleaseError::BadSnapshot(format!("is not valid: {e}")))?;
        if snap.format != FORMAT {
            return Err(ReleaseError::BadSnapshot(format!(
                "has format `{}`, not `{FORMAT}`",
                snap.format
            )));
        }
        if snap.version != VERSION {
            return Err(ReleaseError::BadSnapshot(format!(
                "is version {}; this swe-ark reads version {VERSION}",
                snap.version
            )));
        }
        if !valid_name(&snap.name) {
            return Err(ReleaseError::BadName(snap.name));
        }
        if !(may_be_empty && snap.instances.is_empty()) {
            check_instances(&normalized(&snap.instances))?;
        }
        Ok(snap)
    }

    /// Reads and parses a snapshot file.
    pub fn read(path: &std::path::Path) -> Result<Snapshot, ReleaseError> {
        let bytes = std::fs::read(path).map_err(|source| ReleaseError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Snapshot::parse(&bytes).map_err(|e| match e {
            ReleaseError::BadSnapshot(d) => {
                ReleaseError::BadSnapshot(format!("`{}` {d}", path.display()))
            }
            other => other,
        })
    }

    /// The root hash its instances give.
    pub fn computed_root(&self) -> Sha256Digest {
        root_of(&self.instances)
    }

    /// The file's bytes: fixed field order, two-space indent, a final newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// Every object of the release, sorted, each once.
    pub fn objects(&self) -> Vec<Sha256Digest> {
        let mut out: Vec<Sha256Digest> = self
            .instances
            .iter()
            .flat_map(|i| i.objects.iter().copied())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

fn check_instances(sorted: &[ReleaseInstance]) -> Result<(), ReleaseError> {
    if sorted.is_empty() {
        return Err(ReleaseError::BadSnapshot("holds no instance".into()));
    }
    for w in sorted.windows(2) {
        if w[0].instance_id == w[1].instance_id {
            return Err(ReleaseError::BadSnapshot(format!(
                "lists instance `{}` twice",
                w[0].instance_id
            )));
        }
    }
    if let Some(i) = sorted.iter().find(|i| i.instance_id.trim().is_empty()) {
        return Err(ReleaseError::BadSnapshot(format!(
            "has an instance with an empty id (bundle {})",
            i.bundle
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Sha256Digest {
        Sha256Digest::of(s.as_bytes())
    }

    #[test]
    fn the_canonical_form_is_sorted_compact_json() {
        let a = ReleaseInstance {
            instance_id: "b".into(),
            bundle: d("1"),
            objects: vec![d("y"), d("x"), d("y")],
        };
        let b = ReleaseInstance {
            instance_id: "a\"\n\u{e9}".into(),
            bundle: d("2"),
            objects: vec![],
        };
        let bytes = canonical_bytes(&[a.clone(), b.clone()]);
        let text = String::from_utf8(bytes).unwrap();
        let mut xy = [d("x").hex(), d("y").hex()];
        xy.sort();
        assert_eq!(
            text,
            format!(
                "{{\"format\":\"swe-ark-release\",\"instances\":[\
                 {{\"bundle\":\"{}\",\"instance_id\":\"a\\\"\\n\u{e9}\",\"objects\":[]}},\
                 {{\"bundle\":\"{}\",\"instance_id\":\"b\",\"objects\":[\"{}\",\"{}\"]}}],\
                 \"version\":1}}",
                d("2").hex(),
                d("1").hex(),
                xy[0],
                xy[1]
            )
        );
        // Order in the input does not matter.
        assert_eq!(root_of(&[b.clone(), a.clone()]), root_of(&[a, b]));
    }

    #[test]
    fn snapshots_round_trip_and_refuse_what_is_wrong() {
        let i = ReleaseInstance {
            instance_id: "o__r-1".into(),
            bundle: d("1"),
            objects: vec![d("w")],
        };
        let s = Snapshot::new("v1.0", std::slice::from_ref(&i)).unwrap();
        let back = Snapshot::parse(&s.to_bytes()).unwrap();
        assert_eq!(back, s);
        // No time in the file: the same release is the same bytes anywhere. A snapshot
        // written with one still reads, with the same root.
        let bytes = String::from_utf8(s.to_bytes()).unwrap();
        assert!(!bytes.contains("created_at"), "{bytes}");
        let old = bytes.replacen(
            "\"name\": \"v1.0\",",
            "\"name\": \"v1.0\",\n  \"created_at\": \"2024-01-01T00:00:00Z\",",
            1,
        );
        let old = Snapshot::parse(old.as_bytes()).unwrap();
        assert_eq!(old.created_at.as_deref(), Some("2024-01-01T00:00:00Z"));
        assert_eq!((old.root, old.computed_root()), (s.root, s.root));
        assert_eq!(back.computed_root(), s.root);
        assert!(matches!(
            Snapshot::new("a/b", std::slice::from_ref(&i)),
            Err(ReleaseError::BadName(_))
        ));
        let twice = Snapshot::new("x", &[i.clone(), i.clone()]).unwrap_err();
        assert!(twice.to_string().contains("twice"), "{twice}");
        let text = String::from_utf8(s.to_bytes()).unwrap();
        let upper = text.replace(&d("w").hex(), &d("w").hex().to_uppercase());
        assert!(Snapshot::parse(upper.as_bytes()).is_err());
    }
}
