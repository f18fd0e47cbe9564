//! The reader refuses every kind of bad bundle. Each test crafts one bundle by hand (raw ustar
//! headers, so names like `/etc/x` or `a/../b` and odd entry types can be written at all) that
//! is valid but for exactly one thing, runs `swe-ark unpack` on it, and checks the exit code,
//! that the message names the member and the reason, and that nothing was written outside the
//! target (nor left inside it).

mod common;
use common::*;

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use swe_ark::bundle::{MemberKind, tree_id};
use swe_ark::digest::{Sha256Digest, git_object_id};

// ---------------------------------------------------------------------------------------------
// A raw tar builder.

const REGULAR: u8 = b'0';
const HARD_LINK: u8 = b'1';
const SYMLINK: u8 = b'2';
const CHAR_DEVICE: u8 = b'3';
const BLOCK_DEVICE: u8 = b'4';
const DIRECTORY: u8 = b'5';
const FIFO: u8 = b'6';
const PAX_HEADER: u8 = b'x';

const BLOCK: usize = 512;

/// One tar entry, written exactly as given.
#[derive(Clone, Debug)]
struct Entry {
    name: Vec<u8>,
    typeflag: u8,
    link: Vec<u8>,
    mode: u32,
    data: Vec<u8>,
    /// The size the header claims; `None`: the length of `data`.
    claimed_size: Option<u64>,
}

impl Entry {
    fn new(name: impl AsRef<[u8]>, typeflag: u8) -> Self {
        Entry {
            name: name.as_ref().to_vec(),
            typeflag,
            link: Vec::new(),
            mode: 0o644,
            data: Vec::new(),
            claimed_size: None,
        }
    }

    fn file(name: impl AsRef<[u8]>, data: impl AsRef<[u8]>) -> Self {
        Entry {
            data: data.as_ref().to_vec(),
            ..Entry::new(name, REGULAR)
        }
    }

    fn executable(name: impl AsRef<[u8]>, data: impl AsRef<[u8]>) -> Self {
        Entry {
            mode: 0o755,
            ..Entry::file(name, data)
        }
    }

    fn symlink(name: impl AsRef<[u8]>, target: impl AsRef<[u8]>) -> Self {
        Entry {
            mode: 0o777,
            ..Entry::new(name, SYMLINK).link_to(target)
        }
    }

    /// An entry of any type, e.g. a device, FIFO or directory.
    fn special(name: impl AsRef<[u8]>, typeflag: u8) -> Self {
        Entry::new(name, typeflag)
    }

    fn link_to(mut self, target: impl AsRef<[u8]>) -> Self {
        self.link = target.as_ref().to_vec();
        self
    }

    fn with_type(mut self, typeflag: u8) -> Self {
        self.typeflag = typeflag;
        self
    }

    fn with_mode(mut self, mode: u32) -> Self {
        self.mode = mode;
        self
    }

    /// Makes the header claim `size` bytes, whatever `data` holds.
    fn claiming(mut self, size: u64) -> Self {
        self.claimed_size = Some(size);
        self
    }

    fn size(&self) -> u64 {
        self.claimed_size.unwrap_or(self.data.len() as u64)
    }

    fn kind(&self) -> MemberKind {
        match self.typeflag {
            SYMLINK => MemberKind::Symlink,
            _ if self.mode & 0o100 != 0 => MemberKind::Executable,
            _ => MemberKind::File,
        }
    }

    /// What bundle.json hashes: the data, or a symlink's target.
    fn content(&self) -> &[u8] {
        if self.typeflag == SYMLINK {
            &self.link
        } else {
            &self.data
        }
    }

    /// The 512-byte ustar header: any name and link bytes up to 100 each, any type, any size.
    fn header(&self) -> [u8; BLOCK] {
        assert!(self.name.len() <= 100 && self.link.len() <= 100);
        let mut h = tar::Header::new_ustar();
        {
            let u = h.as_ustar_mut().unwrap();
            u.name[..self.name.len()].copy_from_slice(&self.name);
            u.linkname[..self.link.len()].copy_from_slice(&self.link);
        }
        h.set_mode(self.mode);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        h.set_size(self.size());
        h.set_entry_type(tar::EntryType::new(self.typeflag));
        h.set_cksum();
        let mut out = [0u8; BLOCK];
        out.copy_from_slice(h.as_bytes());
        // The header is ustar, with the size in octal (the reader must parse our bytes, not
        // the tar crate's idea of them).
        assert_eq!(&out[257..265], b"ustar\x0000");
        out
    }
}

/// One pax record, `<len> <key>=<value>\n`, where `<len>` counts the whole record.
fn pax_record(key: &str, value: &[u8]) -> Vec<u8> {
    let base = key.len() + value.len() + 3;
    let mut len = base + 1;
    while base + len.to_string().len() != len {
        len = base + len.to_string().len();
    }
    let mut rec = format!("{len} {key}=").into_bytes();
    rec.extend_from_slice(value);
    rec.push(b'\n');
    assert_eq!(rec.len(), len);
    rec
}

/// A pax extended header entry holding `records`, for the entry after it.
fn pax_header(records: &[u8]) -> Entry {
    Entry::file("././@PaxHeader", records).with_type(PAX_HEADER)
}

/// A pax extended header entry that carries `path` for the entry after it.
fn pax_path(path: &[u8]) -> Entry {
    pax_header(&pax_record("path", path))
}

/// The tar stream of `entries`, in this order: header, data padded to 512 bytes, and two zero
/// blocks at the end.
fn tar_of(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        out.extend_from_slice(&e.header());
        out.extend_from_slice(&e.data);
        let pad = (BLOCK - e.data.len() % BLOCK) % BLOCK;
        out.resize(out.len() + pad, 0);
    }
    out.resize(out.len() + 2 * BLOCK, 0);
    out
}

// ---------------------------------------------------------------------------------------------
// bundle.json, written from the format description (not with the library's serializer).

#[derive(serde::Serialize, Clone, Debug)]
struct ManifestJson {
    format: String,
    version: u64,
    instance_id: String,
    codebase_tree: String,
    members: Vec<MemberJson>,
}

#[derive(serde::Serialize, Clone, Debug)]
struct MemberJson {
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path_hex: Option<String>,
    kind: &'static str,
    size: u64,
    sha256: String,
}

fn kind_str(kind: MemberKind) -> &'static str {
    match kind {
        MemberKind::File => "file",
        MemberKind::Executable => "executable",
        MemberKind::Symlink => "symlink",
    }
}

/// The git tree id of the `codebase/` members among `entries`.
fn tree_of(entries: &[Entry]) -> String {
    let items: Vec<(&[u8], &str, _)> = entries
        .iter()
        .filter_map(|e| {
            let rel = e.name.strip_prefix(b"codebase/")?;
            Some((rel, e.kind().git_mode(), git_object_id("blob", e.content())))
        })
        .collect();
    tree_id(items).unwrap().hex()
}

impl ManifestJson {
    /// A valid manifest listing exactly `listed`.
    fn listing(listed: &[Entry]) -> Self {
        let mut sorted: Vec<&Entry> = listed.iter().collect();
        sorted.sort_by(|a, b| a.name.cmp(&b.name));
        let members = sorted
            .iter()
            .map(|e| {
                let (path, path_hex) = match std::str::from_utf8(&e.name) {
                    Ok(s) => (Some(s.to_string()), None),
                    Err(_) => (None, Some(hex::encode(&e.name))),
                };
                MemberJson {
                    path,
                    path_hex,
                    kind: kind_str(e.kind()),
                    size: e.content().len() as u64,
                    sha256: Sha256Digest::of(e.content()).hex(),
                }
            })
            .collect();
        ManifestJson {
            format: "swe-ark-bundle".into(),
            version: 1,
            instance_id: "acme__widgets-42".into(),
            codebase_tree: tree_of(listed),
            members,
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).unwrap();
        out.push(b'\n');
        out
    }

    fn entry(&self) -> Entry {
        Entry::file("bundle.json", self.bytes())
    }

    fn unlist(&mut self, path: &str) {
        let before = self.members.len();
        self.members.retain(|m| m.path.as_deref() != Some(path));
        assert_eq!(self.members.len(), before - 1, "{path} was listed");
    }
}

/// The members of a small valid bundle (everything but bundle.json), sorted by path.
fn valid_members() -> Vec<Entry> {
    vec![
        Entry::symlink("codebase/docs/core-link.py", "../widgets/core.py"),
        Entry::executable(
            "codebase/scripts/run-tests",
            "#!/bin/sh\nexec python -m pytest \"$@\"\n",
        ),
        Entry::file(
            "codebase/setup.py",
            "from setuptools import setup\nsetup(name='widgets')\n",
        ),
        Entry::file("codebase/widgets/__init__.py", ""),
        Entry::file("codebase/widgets/core.py", "def f(): return 1\n"),
        Entry::file("instance.json", fixture_instance_json()),
        Entry::file(
            "patches/gold.diff",
            "--- a/widgets/core.py\n+++ b/widgets/core.py\n@@ -1 +1 @@\n-def f(): return 1\n+def f(): return 2\n",
        ),
        Entry::file(
            "patches/test.diff",
            "--- /dev/null\n+++ b/tests/test_core.py\n@@ -0,0 +1 @@\n+def test_f(): pass\n",
        ),
    ]
}

/// `members` with `extra` put in path order.
fn with(mut members: Vec<Entry>, extra: Entry) -> Vec<Entry> {
    let at = members.partition_point(|m| m.name < extra.name);
    members.insert(at, extra);
    members
}

/// The tar of a bundle: a manifest listing `listed`, then `entries` as given.
fn bundle_tar(listed: &[Entry], entries: &[Entry]) -> Vec<u8> {
    let mut all = vec![ManifestJson::listing(listed).entry()];
    all.extend_from_slice(entries);
    tar_of(&all)
}

/// A bundle whose manifest lists exactly its members.
fn honest_tar(entries: &[Entry]) -> Vec<u8> {
    bundle_tar(entries, entries)
}

/// Writes `tar` as `<sha256 of tar>.tar.zst` (so the whole-bundle hash check passes) under
/// `bundles/`, outside any unpack target.
fn save(t: &TestContext, tar: &[u8]) -> PathBuf {
    save_as(t, &format!("{}.tar.zst", sha256_hex(tar)), &compress(tar))
}

fn save_as(t: &TestContext, name: &str, bytes: &[u8]) -> PathBuf {
    let dir = t.path("bundles");
    fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    fs::write(&p, bytes).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

// ---------------------------------------------------------------------------------------------
// Running unpack and verify, and checking that nothing was written.

/// A target directory inside a fresh parent, which holds nothing else.
struct Dest {
    parent: PathBuf,
    target: PathBuf,
    existed: bool,
}

impl Dest {
    /// A fresh `parentN` in the test's directory, with `out` in it if `existing`.
    fn new(t: &TestContext, existing: bool) -> Self {
        let parent = (0..)
            .map(|i| t.path(&format!("parent{i}")))
            .find(|p| !p.exists())
            .unwrap();
        fs::create_dir(&parent).unwrap();
        let target = parent.join("out");
        if existing {
            fs::create_dir(&target).unwrap();
        }
        Dest {
            parent,
            target,
            existed: existing,
        }
    }

    /// The parent holds nothing but (when it existed before) the still empty target.
    fn assert_untouched(&self) {
        let mut names: Vec<OsString> = fs::read_dir(&self.parent)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        if self.existed {
            assert_eq!(names, vec![OsString::from("out")], "{:?}", self.parent);
            assert!(fs::symlink_metadata(&self.target).unwrap().is_dir());
            let left: Vec<_> = fs::read_dir(&self.target)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            assert!(left.is_empty(), "the target holds {left:?}");
        } else {
            assert!(
                names.is_empty(),
                "the parent of a target that did not exist holds {names:?}"
            );
        }
    }
}

/// Runs `swe-ark unpack bundle -o target extra…`, once into a target that does not exist and
/// once into an existing empty one. Each run must exit 2 with every one of `words` in stderr,
/// leave the parent as it was, and create nothing at `escapes` (where a malicious path or link
/// would have written). Returns the first run's stderr.
fn refused(
    t: &TestContext,
    bundle: &Path,
    extra: &[&str],
    words: &[&str],
    escapes: &[PathBuf],
) -> String {
    let mut first = None;
    for existing in [false, true] {
        let dest = Dest::new(t, existing);
        let mut args = vec!["unpack", s(bundle), "-o", s(&dest.target)];
        args.extend_from_slice(extra);
        let err = stderr(&t.run_expect(&args, 2));
        for w in words {
            assert!(err.contains(w), "stderr lacks {w:?}:\n{err}");
        }
        dest.assert_untouched();
        for p in escapes {
            assert!(
                fs::symlink_metadata(p).is_err(),
                "something was written at {p:?}"
            );
        }
        first.get_or_insert(err);
    }
    first.unwrap()
}

/// `swe-ark verify bundle` exits 1 and names the bad bundle with `words` on stdout; `--json`
/// says the same in JSON.
fn verify_finds(t: &TestContext, bundle: &Path, words: &[&str]) {
    let text = stdout(&t.run_expect(&["verify", s(bundle)], 1));
    assert!(text.contains("BAD bundle"), "{text}");
    for w in words {
        assert!(text.contains(w), "verify stdout lacks {w:?}:\n{text}");
    }
    let out = t.run_expect(&["verify", "--json", s(bundle)], 1);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = v.as_array().unwrap();
    assert_eq!(results.len(), 1, "{v}");
    assert_eq!(results[0]["what"], "bundle");
    assert_eq!(results[0]["ok"], false);
    let problems: Vec<&str> = results[0]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    let all = problems.join("\n");
    for w in words {
        assert!(all.contains(w), "verify --json lacks {w:?}: {v}");
    }
}

/// Unpacks a bundle that must be good, into a fresh target; returns the target.
fn unpacks(t: &TestContext, bundle: &Path, label: &str) -> PathBuf {
    let target = t.path(label);
    let out = t.run_expect(&["unpack", s(bundle), "-o", s(&target)], 0);
    assert_eq!(
        last_line(&out.stdout),
        bundle
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .trim_end_matches(".tar.zst")
    );
    target
}

// ---------------------------------------------------------------------------------------------
// The baseline: the crafting is right.

#[test]
fn crafted_valid_bundle_unpacks_and_verifies() {
    let t = TestContext::new();
    let members = valid_members();
    let tar = honest_tar(&members);
    let bundle = save(&t, &tar);
    let target = unpacks(&t, &bundle, "out");

    // Exactly the members, with their kinds and contents.
    let mut expected: Vec<(Vec<u8>, &str, Vec<u8>)> = members
        .iter()
        .map(|e| {
            let kind = match e.kind() {
                MemberKind::File => "file",
                MemberKind::Executable => "exe",
                MemberKind::Symlink => "symlink",
            };
            (e.name.clone(), kind, e.content().to_vec())
        })
        .collect();
    let manifest = ManifestJson::listing(&members);
    expected.push((b"bundle.json".to_vec(), "file", manifest.bytes()));
    expected.sort();
    assert_eq!(tree_listing(&target), expected);

    // The hand-written bundle.json is byte for byte what the library writes.
    let parsed: swe_ark::bundle::Manifest = serde_json::from_slice(&manifest.bytes()).unwrap();
    assert_eq!(parsed.to_bytes(), manifest.bytes());

    // And its codebase_tree is what git says for the unpacked codebase.
    let cb = target.join("codebase");
    git(&cb, &["init", "-q"]);
    git(&cb, &["add", "-A"]);
    assert_eq!(git(&cb, &["write-tree"]), manifest.codebase_tree);

    let out = t.run_expect(&["verify", "--json", s(&bundle)], 0);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["ok"], true, "{v}");
}

// ---------------------------------------------------------------------------------------------
// The zstd stream.

/// A real packed bundle: its path in the archive and its bytes.
fn packed_bundle(t: &TestContext) -> (String, Vec<u8>) {
    make_fixture_codebase(&t.path("cb"));
    let id = t.pack(&t.path("cb"));
    let bytes = fs::read(t.bundle_path(&id)).unwrap();
    (id, bytes)
}

#[test]
fn truncated_zstd_is_refused() {
    let t = TestContext::new();
    let (id, bytes) = packed_bundle(&t);
    let bundle = save_as(&t, &format!("{id}.tar.zst"), &bytes[..bytes.len() / 2]);
    refused(&t, &bundle, &[], &["zstd", "truncated"], &[]);
}

#[test]
fn corrupt_zstd_is_refused() {
    let t = TestContext::new();
    let (id, mut bytes) = packed_bundle(&t);
    // Flip bytes in the middle of the compressed data (past the frame header).
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 8] {
        *b ^= 0x55;
    }
    // (Some flips land on bits the decoder ignores; these do not.)
    assert!(zstd::decode_all(&bytes[..]).is_err());
    let bundle = save_as(&t, &format!("{id}.tar.zst"), &bytes);
    refused(&t, &bundle, &[], &["zstd", "corrupt"], &[]);
}

// ---------------------------------------------------------------------------------------------
// Content and listing against bundle.json.

#[test]
fn flipped_content_byte_is_refused_naming_the_member() {
    let t = TestContext::new();
    let members = valid_members();
    let mut entries = members.clone();
    let core = entries
        .iter_mut()
        .find(|e| e.name == b"codebase/widgets/core.py")
        .unwrap();
    core.data[13] ^= 0x01; // "return 1" -> "return 0"
    let bundle = save(&t, &bundle_tar(&members, &entries));
    let err = refused(
        &t,
        &bundle,
        &[],
        &["codebase/widgets/core.py", "does not match bundle.json"],
        &[],
    );
    // No other member is blamed.
    assert!(!err.contains("codebase/setup.py"), "{err}");
    verify_finds(
        &t,
        &bundle,
        &["codebase/widgets/core.py", "does not match bundle.json"],
    );
}

#[test]
fn member_not_listed_in_bundle_json_is_refused() {
    let t = TestContext::new();
    let entries = with(valid_members(), Entry::file("codebase/extra.py", "x = 1\n"));
    // Listed: everything but the extra member; the tree id still covers it, so the listing is
    // the only thing wrong.
    let mut manifest = ManifestJson::listing(&entries);
    manifest.unlist("codebase/extra.py");
    let mut all = vec![manifest.entry()];
    all.extend(entries);
    let bundle = save(&t, &tar_of(&all));
    let err = refused(
        &t,
        &bundle,
        &[],
        &["codebase/extra.py", "not listed in bundle.json"],
        &[],
    );
    assert!(!err.contains("tree id"), "{err}");
    verify_finds(&t, &bundle, &["codebase/extra.py", "not listed"]);
}

#[test]
fn listed_member_missing_from_the_bundle_is_refused() {
    let t = TestContext::new();
    let listed = valid_members();
    let entries: Vec<Entry> = listed
        .iter()
        .filter(|e| e.name != b"codebase/setup.py")
        .cloned()
        .collect();
    // The tree id is that of the members present, so the absence is the only thing wrong.
    let mut manifest = ManifestJson::listing(&listed);
    manifest.codebase_tree = tree_of(&entries);
    let mut all = vec![manifest.entry()];
    all.extend(entries);
    let bundle = save(&t, &tar_of(&all));
    let err = refused(
        &t,
        &bundle,
        &[],
        &["codebase/setup.py", "missing from the bundle"],
        &[],
    );
    assert!(!err.contains("tree id"), "{err}");
}

#[test]
fn wrong_codebase_tree_is_refused() {
    let t = TestContext::new();
    let members = valid_members();
    let mut manifest = ManifestJson::listing(&members);
    manifest.codebase_tree = "0".repeat(40);
    let mut all = vec![manifest.entry()];
    all.extend(members);
    let bundle = save(&t, &tar_of(&all));
    refused(
        &t,
        &bundle,
        &[],
        &["codebase/", "tree id", &"0".repeat(40)],
        &[],
    );
}

#[test]
fn wrong_id_in_file_name_is_refused_naming_both_ids() {
    let t = TestContext::new();
    let tar = honest_tar(&valid_members());
    let actual = sha256_hex(&tar);
    let claimed = sha256_hex(b"some other bundle");
    let bundle = save_as(&t, &format!("{claimed}.tar.zst"), &compress(&tar));
    refused(&t, &bundle, &[], &[&actual, &claimed, "hashes to"], &[]);
    // The same content under a neutral name with a wrong --expect: the reason alone names
    // both ids.
    let plain = save_as(&t, "plain.tar.zst", &compress(&tar));
    refused(
        &t,
        &plain,
        &["--expect", &claimed],
        &[&actual, &claimed, "hashes to"],
        &[],
    );
    // The right id is accepted.
    let dest = t.path("good");
    t.run_expect(
        &["unpack", s(&plain), "-o", s(&dest), "--expect", &actual],
        0,
    );
}

#[test]
fn data_after_the_end_of_the_archive_is_refused() {
    let t = TestContext::new();
    let mut tar = honest_tar(&valid_members());
    tar.extend_from_slice(b"smuggled bytes after the end-of-archive marker");
    let bundle = save(&t, &tar);
    refused(&t, &bundle, &[], &["data follows the end"], &[]);
}

// ---------------------------------------------------------------------------------------------
// bundle.json itself.

#[test]
fn unknown_format_version_is_refused() {
    let t = TestContext::new();
    let members = valid_members();
    let mut manifest = ManifestJson::listing(&members);
    manifest.version = 4;
    let mut all = vec![manifest.entry()];
    all.extend(members);
    let bundle = save(&t, &tar_of(&all));
    refused(
        &t,
        &bundle,
        &[],
        &["version 4", "reads versions 1, 2 and 3"],
        &[],
    );
    verify_finds(&t, &bundle, &["version 4"]);
}

// ---------------------------------------------------------------------------------------------
// vcs.json (format version 2).

/// A `vcs.json` as the format describes it, about the fixture's base commit.
fn vcs_json() -> String {
    format!(
        "{{\n  \"base_commit\": \"{BASE_COMMIT}\",\n  \"commits\": 12,\n  \
         \"committer_date\": \"1556784672 +0200\",\n  \
         \"describe\": \"4.4.2-6-g{BASE_COMMIT}\",\n  \"tags\": [\n    {{\n      \
         \"annotated\": true,\n      \"distance\": 6,\n      \"name\": \"4.4.2\"\n    }}\n  ]\n}}\n"
    )
}

/// A bundle of `version` holding `vcs` as vcs.json (or none).
fn bundle_with_vcs(t: &TestContext, version: u64, vcs: Option<&str>) -> PathBuf {
    match vcs {
        Some(v) => bundle_with(t, version, &[("vcs.json", v)]),
        None => bundle_with(t, version, &[]),
    }
}

#[test]
fn a_version_2_bundle_with_its_vcs_json_is_read() {
    let t = TestContext::new();
    let bundle = bundle_with_vcs(&t, 2, Some(&vcs_json()));
    let target = unpacks(&t, &bundle, "v2");
    assert_eq!(
        fs::read_to_string(target.join("vcs.json")).unwrap(),
        vcs_json()
    );
    t.run_expect(&["verify", s(&bundle)], 0);
}

#[test]
fn a_malformed_vcs_json_is_refused() {
    let t = TestContext::new();
    for (bad, words) in [
        (
            "{not json\n".to_string(),
            vec!["vcs.json", "not a valid VCS record"],
        ),
        // Valid JSON, but its describe is not what its first tag says.
        (
            vcs_json().replace("4.4.2-6-g", "4.4.2-7-g"),
            vec!["vcs.json", "its first tag makes it"],
        ),
        (
            vcs_json().replace("\"commits\": 12", "\"commits\": 12, \"extra\": 1"),
            vec!["vcs.json", "unknown field"],
        ),
        (
            vcs_json().replace("\n  ", "\n    "),
            vec!["vcs.json", "canonical form"],
        ),
    ] {
        let bundle = bundle_with_vcs(&t, 2, Some(&bad));
        refused(&t, &bundle, &[], &words, &[]);
        verify_finds(&t, &bundle, &words);
    }
}

#[test]
fn vcs_json_and_the_version_must_agree() {
    let t = TestContext::new();
    let bundle = bundle_with_vcs(&t, 1, Some(&vcs_json()));
    refused(
        &t,
        &bundle,
        &[],
        &[
            "lists vcs.json, a member of format version 2",
            "says version 1",
        ],
        &[],
    );
    let bundle = bundle_with_vcs(&t, 2, None);
    refused(&t, &bundle, &[], &["does not list vcs.json"], &[]);
}

/// A canonical expected.json (bundle format version 3).
fn expected_json() -> String {
    let e = swe_ark::bundle::Expected {
        instance_id: "acme__widgets-1".into(),
        verdict: "kept".into(),
        reason_kind: String::new(),
        fail_to_pass: vec!["tests/test_core.py::test_f".into()],
        pass_to_pass: vec![],
        xfail: vec![],
        flaky: vec![],
        test_directives: vec!["tests/test_core.py".into()],
        log_parser: "pytest".into(),
        pre: [(
            "tests/test_core.py::test_f".to_string(),
            swe_ark::logparse::TestStatus::Failed,
        )]
        .into(),
        post: [(
            "tests/test_core.py::test_f".to_string(),
            swe_ark::logparse::TestStatus::Passed,
        )]
        .into(),
        exit_codes: [("pre".to_string(), 1), ("post".to_string(), 0)].into(),
        network: "isolated".into(),
        services: vec![],
        describe: None,
    };
    String::from_utf8(e.to_bytes()).unwrap()
}

/// A bundle of `version` with `extra` members besides the valid ones.
fn bundle_with(t: &TestContext, version: u64, extra: &[(&str, &str)]) -> PathBuf {
    let mut members = valid_members();
    for (name, content) in extra {
        members = with(members, Entry::file(name, content));
    }
    let mut manifest = ManifestJson::listing(&members);
    manifest.version = version;
    let mut all = vec![manifest.entry()];
    all.extend(members);
    save(t, &tar_of(&all))
}

#[test]
fn a_version_3_bundle_with_its_expected_json_is_read() {
    let t = TestContext::new();
    let bundle = bundle_with(
        &t,
        3,
        &[
            ("expected.json", &expected_json()),
            ("vcs.json", &vcs_json()),
        ],
    );
    let target = unpacks(&t, &bundle, "v3");
    assert_eq!(
        fs::read_to_string(target.join("expected.json")).unwrap(),
        expected_json()
    );
    t.run_expect(&["verify", s(&bundle)], 0);
    // vcs.json is optional in version 3.
    let bundle = bundle_with(&t, 3, &[("expected.json", &expected_json())]);
    t.run_expect(&["verify", s(&bundle)], 0);
}

#[test]
fn expected_json_and_the_version_must_agree_and_it_must_be_canonical() {
    let t = TestContext::new();
    let e = expected_json();
    for (version, extra, words) in [
        (
            1,
            vec![("expected.json", e.as_str())],
            vec!["lists expected.json", "says version 1"],
        ),
        (
            2,
            vec![("expected.json", e.as_str()), ("vcs.json", &vcs_json())],
            vec!["lists expected.json", "says version 2"],
        ),
        (3, vec![], vec!["says version 3", "does not list it"]),
        (
            3,
            vec![("expected.json", e.as_str()), ("results.json", "{}\n")],
            vec!["lists results.json", "replaces with expected.json"],
        ),
    ] {
        let bundle = bundle_with(&t, version, &extra);
        refused(&t, &bundle, &[], &words, &[]);
    }
    for (bad, words) in [
        (
            e.replace("\n  ", "\n    "),
            vec!["expected.json", "canonical form"],
        ),
        (
            e.replace("\"flaky\": [],", "\"flaky\": [],\n  \"timings\": {},"),
            vec!["expected.json", "unknown field `timings`"],
        ),
        (
            e.replace("  \"log_parser\": \"pytest\",\n", ""),
            vec!["expected.json", "missing field `log_parser`"],
        ),
    ] {
        let bundle = bundle_with(&t, 3, &[("expected.json", &bad)]);
        refused(&t, &bundle, &[], &words, &[]);
        verify_finds(&t, &bundle, &words);
    }
}

#[test]
fn unknown_format_name_is_refused() {
    let t = TestContext::new();
    let members = valid_members();
    let mut manifest = ManifestJson::listing(&members);
    manifest.format = "some-other-bundle".into();
    let mut all = vec![manifest.entry()];
    all.extend(members);
    let bundle = save(&t, &tar_of(&all));
    refused(
        &t,
        &bundle,
        &[],
        &["not a swe-ark bundle", "some-other-bundle"],
        &[],
    );
}

#[test]
fn first_member_not_bundle_json_is_refused() {
    let t = TestContext::new();
    let members = valid_members();
    let manifest = ManifestJson::listing(&members).entry();
    let (instance, rest): (Vec<Entry>, Vec<Entry>) = members
        .into_iter()
        .partition(|e| e.name == b"instance.json");
    let mut all = instance;
    all.push(manifest);
    all.extend(rest);
    let bundle = save(&t, &tar_of(&all));
    refused(
        &t,
        &bundle,
        &[],
        &["instance.json", "first member", "not bundle.json"],
        &[],
    );
}

#[test]
fn oversized_bundle_json_is_refused_from_its_header() {
    let t = TestContext::new();
    // The header claims 300 MiB; a few bytes follow.
    let manifest = ManifestJson::listing(&valid_members())
        .entry()
        .claiming(300 << 20);
    let bundle = save(&t, &tar_of(&[manifest]));
    let err = refused(&t, &bundle, &[], &["bundle.json", "over the limit"], &[]);
    assert!(!err.contains("truncated"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Paths.

#[test]
fn absolute_path_is_refused() {
    let t = TestContext::new();
    // Where the member would land if the path were followed: beside the targets.
    let escape = t.path("escaped-absolute");
    let name = escape.to_str().unwrap().to_string();
    let members = valid_members();
    let entries = {
        let mut v = vec![Entry::file(&name, "pwned\n")];
        v.extend(members.clone());
        v
    };
    // bundle.json cannot even list such a path, so it lists the rest.
    let bundle = save(&t, &bundle_tar(&members, &entries));
    refused(&t, &bundle, &[], &[&name, "absolute"], &[escape]);
    verify_finds(&t, &bundle, &[&name, "absolute"]);
}

#[test]
fn dotdot_component_is_refused() {
    let t = TestContext::new();
    // From the staging directory inside the target, three levels up is the target's parent;
    // from the target itself, it is the test's directory.
    let name = "codebase/../../../escaped-dotdot";
    let members = valid_members();
    let entries = with(members.clone(), Entry::file(name, "pwned\n"));
    let bundle = save(&t, &bundle_tar(&members, &entries));
    refused(
        &t,
        &bundle,
        &[],
        &[name, "`..` component"],
        &[t.path("escaped-dotdot")],
    );
}

#[test]
fn dotdot_in_a_pax_path_is_refused() {
    let t = TestContext::new();
    // A path over 100 bytes travels in a pax header; the header's own name field holds a
    // harmless prefix of it.
    let long = format!("codebase/{}/../../../../escaped-pax", "d".repeat(100));
    let members = valid_members();
    let mut entries = members.clone();
    entries.insert(0, pax_path(long.as_bytes()));
    entries.insert(1, Entry::file(&long.as_bytes()[..100], "pwned\n"));
    let bundle = save(&t, &bundle_tar(&members, &entries));
    refused(
        &t,
        &bundle,
        &[],
        &["escaped-pax", "`..` component"],
        &[t.path("escaped-pax")],
    );
}

#[test]
fn dot_and_empty_components_are_refused() {
    let t = TestContext::new();
    for (name, reason) in [
        ("codebase/./x.py", "`.` component"),
        ("codebase//x.py", "empty component"),
    ] {
        let members = valid_members();
        let entries = with(members.clone(), Entry::file(name, "x\n"));
        let bundle = save(&t, &bundle_tar(&members, &entries));
        refused(&t, &bundle, &[], &[name, reason], &[]);
    }
}

#[test]
fn path_outside_codebase_and_fixed_members_is_refused() {
    let t = TestContext::new();
    let entries = with(valid_members(), Entry::executable("evil.sh", "rm -rf ~\n"));
    let bundle = save(&t, &honest_tar(&entries));
    refused(
        &t,
        &bundle,
        &[],
        &["evil.sh", "not a member of the bundle format"],
        &[],
    );
}

#[test]
fn duplicate_member_is_refused() {
    let t = TestContext::new();
    let members = valid_members();
    let entries = with(
        members.clone(),
        Entry::file("codebase/widgets/core.py", "def f(): return 666\n"),
    );
    let bundle = save(&t, &bundle_tar(&members, &entries));
    refused(
        &t,
        &bundle,
        &[],
        &["codebase/widgets/core.py", "appears twice"],
        &[],
    );
}

#[test]
fn path_through_a_symlink_member_is_refused() {
    let t = TestContext::new();
    let link = Entry::symlink("codebase/link", "widgets");
    // On its own the link is fine.
    let good = with(valid_members(), link.clone());
    unpacks(&t, &save(&t, &honest_tar(&good)), "control");
    let entries = with(
        good.clone(),
        Entry::file("codebase/link/x", "through the link\n"),
    );
    // No git tree can hold both, so bundle.json lists the rest.
    let bundle = save(&t, &bundle_tar(&good, &entries));
    refused(
        &t,
        &bundle,
        &[],
        &[
            "codebase/link/x",
            "goes through the symlink",
            "codebase/link",
        ],
        &[t.path("control/codebase/widgets/x")],
    );
}

#[test]
fn path_below_a_file_member_is_refused() {
    let t = TestContext::new();
    let members = valid_members();
    let entries = with(members.clone(), Entry::file("codebase/setup.py/x", "x\n"));
    let bundle = save(&t, &bundle_tar(&members, &entries));
    refused(
        &t,
        &bundle,
        &[],
        &["codebase/setup.py/x", "goes through the file"],
        &[],
    );
}

// ---------------------------------------------------------------------------------------------
// Links.

#[test]
fn symlink_pointing_outside_the_tree_is_refused() {
    let t = TestContext::new();
    let entries = with(
        valid_members(),
        Entry::symlink("codebase/passwd", "../../etc/passwd"),
    );
    let bundle = save(&t, &honest_tar(&entries));
    refused(
        &t,
        &bundle,
        &[],
        &[
            "codebase/passwd",
            "points outside the tree",
            "../../etc/passwd",
        ],
        &[],
    );
}

#[test]
fn absolute_symlink_is_refused() {
    let t = TestContext::new();
    let entries = with(
        valid_members(),
        Entry::symlink("codebase/passwd", "/etc/passwd"),
    );
    let bundle = save(&t, &honest_tar(&entries));
    refused(
        &t,
        &bundle,
        &[],
        &["codebase/passwd", "points outside the tree"],
        &[],
    );
}

#[test]
fn symlink_climbing_through_another_symlink_is_refused() {
    let t = TestContext::new();
    // `s` points at codebase/ itself, which is fine; `t` = `s/../../x` looks like
    // codebase/a/x when read as text, but through `s` it is <target>/../x: a sibling of the
    // target.
    let s_link = Entry::symlink("codebase/a/b/s", "../..");
    let good = with(valid_members(), s_link);
    unpacks(&t, &save(&t, &honest_tar(&good)), "control");
    let entries = with(
        good,
        Entry::symlink("codebase/a/b/t", "s/../../escaped-via-link"),
    );
    let bundle = save(&t, &honest_tar(&entries));
    refused(
        &t,
        &bundle,
        &[],
        &["codebase/a/b/t", "points outside the tree"],
        &[t.path("escaped-via-link")],
    );
}

#[test]
fn symlink_outside_codebase_is_refused() {
    let t = TestContext::new();
    let mut entries = valid_members();
    for e in &mut entries {
        if e.name == b"instance.json" {
            *e = Entry::symlink("instance.json", "codebase/setup.py");
        }
    }
    let bundle = save(&t, &honest_tar(&entries));
    refused(
        &t,
        &bundle,
        &[],
        &["instance.json", "only codebase/ may hold symlinks"],
        &[],
    );
}

#[test]
fn hard_link_pointing_outside_the_tree_is_refused() {
    let t = TestContext::new();
    // A file the link would reach from the target (`out/../../victim.txt`).
    let victim = t.path("victim.txt");
    fs::write(&victim, "precious\n").unwrap();
    let entries = with(
        valid_members(),
        Entry::special("codebase/hl", HARD_LINK).link_to("../../victim.txt"),
    );
    let bundle = save(&t, &honest_tar(&entries));
    refused(
        &t,
        &bundle,
        &[],
        &["codebase/hl", "hard link", "outside the tree"],
        &[],
    );
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(
        fs::metadata(&victim).unwrap().nlink(),
        1,
        "a hard link to the victim was made"
    );
}

// ---------------------------------------------------------------------------------------------
// Entry types.

#[test]
fn char_device_is_refused() {
    let t = TestContext::new();
    let entries = with(
        valid_members(),
        Entry::special("codebase/null", CHAR_DEVICE),
    );
    let bundle = save(&t, &honest_tar(&entries));
    refused(&t, &bundle, &[], &["codebase/null", "device file"], &[]);
}

#[test]
fn block_device_is_refused() {
    let t = TestContext::new();
    let entries = with(
        valid_members(),
        Entry::special("codebase/sda", BLOCK_DEVICE),
    );
    let bundle = save(&t, &honest_tar(&entries));
    refused(&t, &bundle, &[], &["codebase/sda", "device file"], &[]);
}

#[test]
fn fifo_is_refused() {
    let t = TestContext::new();
    let entries = with(valid_members(), Entry::special("codebase/pipe", FIFO));
    let bundle = save(&t, &honest_tar(&entries));
    refused(&t, &bundle, &[], &["codebase/pipe", "FIFO"], &[]);
}

#[test]
fn directory_entry_is_refused() {
    let t = TestContext::new();
    // Without the usual trailing slash, so that the type is what is refused, not the path.
    let entries = with(
        valid_members(),
        Entry::special("codebase/widgets", DIRECTORY).with_mode(0o755),
    );
    let bundle = save(&t, &bundle_tar(&valid_members(), &entries));
    refused(
        &t,
        &bundle,
        &[],
        &["codebase/widgets", "directory entry"],
        &[],
    );
}

#[test]
fn unknown_entry_type_is_refused() {
    let t = TestContext::new();
    let members = valid_members();
    let entries = with(members.clone(), Entry::special("codebase/odd", b'Z'));
    let bundle = save(&t, &bundle_tar(&members, &entries));
    refused(&t, &bundle, &[], &["codebase/odd", "tar type `Z`"], &[]);
}

#[test]
fn contiguous_file_entry_is_refused() {
    let t = TestContext::new();
    // Type `7` reads like a regular file, but bundle format v1 has type `0` only.
    let entries = with(
        valid_members(),
        Entry::file("codebase/contiguous.py", "x = 1\n").with_type(b'7'),
    );
    let bundle = save(&t, &honest_tar(&entries));
    refused(
        &t,
        &bundle,
        &[],
        &["codebase/contiguous.py", "tar type `7`"],
        &[],
    );
}

// ---------------------------------------------------------------------------------------------
// Size limits: refused from the header, before the data is read.

#[test]
fn member_over_max_member_size_is_refused_from_its_header() {
    let t = TestContext::new();
    let members = valid_members();
    // The header claims 5 GiB; 4 KiB of data and the end of the archive follow. Reading the
    // data would find it truncated, so a refusal that names the limit came from the header.
    let huge = Entry::file("codebase/huge.bin", vec![7u8; 4096]).claiming(5 << 30);
    let entries = with(members.clone(), huge);
    let bundle = save(&t, &bundle_tar(&members, &entries));
    let err = refused(
        &t,
        &bundle,
        &["--max-member-size", "4GiB"],
        &["codebase/huge.bin", "member size limit", "5368709120"],
        &[],
    );
    assert!(!err.contains("truncated"), "{err}");
    // The default limit is 4 GiB too.
    refused(
        &t,
        &bundle,
        &[],
        &["codebase/huge.bin", "member size limit"],
        &[],
    );
}

#[test]
fn bundle_over_max_total_size_is_refused() {
    let t = TestContext::new();
    let mut entries = valid_members();
    for i in 1..=3 {
        entries = with(
            entries,
            Entry::file(format!("codebase/big{i}.bin"), vec![i as u8; 6 << 10]),
        );
    }
    let bundle = save(&t, &honest_tar(&entries));
    // Each member is under the member limit; the third takes the sum past the total limit.
    refused(
        &t,
        &bundle,
        &["--max-member-size", "8KiB", "--max-total-size", "16KiB"],
        &["codebase/big3.bin", "total size limit"],
        &[],
    );
    // Under roomier limits the same bundle is fine.
    let target = t.path("roomy");
    t.run_expect(
        &[
            "unpack",
            s(&bundle),
            "-o",
            s(&target),
            "--max-total-size",
            "32KiB",
        ],
        0,
    );
}

// ---------------------------------------------------------------------------------------------
// Pax extended headers: held to the limits like members, and only `path` / `linkpath`.

#[test]
fn pax_header_over_the_limit_is_refused_from_its_header() {
    let t = TestContext::new();
    let members = valid_members();
    // The header claims 5 GiB; 4 KiB of records follow.
    let mut pax = pax_header(&pax_record("comment", &[b'z'; 4000])).claiming(5 << 30);
    pax.data.resize(4096, b'\n');
    let mut entries = members.clone();
    entries.insert(0, pax);
    let bundle = save(&t, &bundle_tar(&members, &entries));
    let err = refused(
        &t,
        &bundle,
        &[],
        &[
            "././@PaxHeader",
            "5368709120",
            "over the limit",
            "pax header",
        ],
        &[],
    );
    assert!(!err.contains("truncated"), "{err}");
}

#[test]
fn large_pax_header_counts_against_the_limits() {
    let t = TestContext::new();
    // 4 MiB of real pax data (a few KiB compressed) under 1 MiB member and total limits: the
    // tar library on its own would read all of it into memory and accept the bundle.
    let members = valid_members();
    let mut entries = members.clone();
    entries.insert(0, pax_header(&pax_record("comment", &vec![b'z'; 4 << 20])));
    let bundle = save(&t, &bundle_tar(&members, &entries));
    refused(
        &t,
        &bundle,
        &["--max-member-size", "1MiB", "--max-total-size", "1MiB"],
        &["././@PaxHeader", "over the limit", "pax header"],
        &[],
    );
}

#[test]
fn pax_size_record_is_refused() {
    let t = TestContext::new();
    // A `size` record would make this reader see 20 bytes where a plain ustar reader sees an
    // empty file: two readers, two bundles.
    let hidden = b"hidden from ustar!!\n";
    let members = with(valid_members(), Entry::file("codebase/sized.py", hidden));
    let mut entries = valid_members();
    let at = entries.partition_point(|e| e.name < b"codebase/sized.py".to_vec());
    entries.insert(
        at,
        pax_header(&pax_record("size", hidden.len().to_string().as_bytes())),
    );
    entries.insert(at + 1, Entry::file("codebase/sized.py", hidden).claiming(0));
    let bundle = save(&t, &bundle_tar(&members, &entries));
    refused(
        &t,
        &bundle,
        &[],
        &["././@PaxHeader", "pax `size` record"],
        &[],
    );
}

#[test]
fn pax_header_with_no_member_after_it_is_refused() {
    let t = TestContext::new();
    let members = valid_members();
    let mut entries = members.clone();
    entries.push(pax_path(b"codebase/never.py"));
    let bundle = save(&t, &bundle_tar(&members, &entries));
    refused(&t, &bundle, &[], &["ends after a pax header"], &[]);
}

#[test]
fn two_pax_headers_in_a_row_are_refused() {
    let t = TestContext::new();
    let members = valid_members();
    let mut entries = members.clone();
    entries.insert(0, pax_path(b"codebase/setup.py"));
    entries.insert(0, pax_path(b"codebase/../../../escaped-pax2"));
    let bundle = save(&t, &bundle_tar(&members, &entries));
    refused(
        &t,
        &bundle,
        &[],
        &["././@PaxHeader", "two pax headers"],
        &[t.path("escaped-pax2")],
    );
}

#[test]
fn pax_path_with_a_newline_is_read_whole() {
    // Not a refusal: a path over 100 bytes with a newline in it is a legal git path, and its
    // pax record must be split by its length, not at the newline. Crafted, then packed.
    let t = TestContext::new();
    let long = format!("codebase/{}\nx.py", "d".repeat(100));
    let file = Entry::file(long.as_bytes(), "hello\n");
    let members = with(valid_members(), file.clone());
    let mut entries = valid_members();
    entries.insert(0, pax_path(long.as_bytes()));
    entries.insert(
        1,
        Entry {
            name: long.as_bytes()[..100].to_vec(),
            ..file
        },
    );
    let bundle = save(&t, &bundle_tar(&members, &entries));
    let target = unpacks(&t, &bundle, "crafted");
    assert_eq!(fs::read_to_string(target.join(&long)).unwrap(), "hello\n");

    let cb = t.path("cb");
    fs::create_dir_all(&cb).unwrap();
    let rel = format!("{}\nx.py", "d".repeat(100));
    fs::write(cb.join(&rel), "hi\n").unwrap();
    let id = t.pack(&cb);
    let target = t.path("packed");
    t.run_expect(&["unpack", &id, "-o", s(&target)], 0);
    assert_eq!(
        fs::read_to_string(target.join("codebase").join(&rel)).unwrap(),
        "hi\n"
    );
}

#[test]
fn bundle_without_a_required_member_is_refused() {
    let t = TestContext::new();
    let entries: Vec<Entry> = valid_members()
        .into_iter()
        .filter(|e| e.name != b"instance.json")
        .collect();
    let bundle = save(&t, &honest_tar(&entries));
    refused(
        &t,
        &bundle,
        &[],
        &["instance.json", "every bundle holds"],
        &[],
    );
}

#[test]
fn symlink_entry_carrying_data_is_refused() {
    let t = TestContext::new();
    let mut link = Entry::symlink("codebase/link", "setup.py");
    link.data = b"hidden payload".to_vec();
    let entries = with(valid_members(), link);
    let bundle = save(&t, &honest_tar(&entries));
    refused(&t, &bundle, &[], &["codebase/link", "carries data"], &[]);
}
