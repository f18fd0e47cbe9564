//! The reader refuses every kind of bad bundle. Each case of one table crafts one bundle by
//! hand (raw ustar headers, so names like `/etc/x` or `a/../b` and odd entry types can be
//! written at all) that is valid but for exactly one thing, runs `swe-ark unpack` on it, and
//! checks the exit code, that the message names the member and the reason, and that nothing
//! was written outside the target (nor left inside it).

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
// Bundles that must be read: the later format versions, a pax path with a newline.

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
        cannot_run: Default::default(),
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

// ---------------------------------------------------------------------------------------------
// The refusals: one table. Each case crafts one bundle in a fresh directory; the loop checks
// them all and names every case that failed.

/// One bad bundle: how it is crafted and what the refusal must say.
struct Case {
    name: &'static str,
    craft: fn(&TestContext) -> Crafted,
    /// What stderr must hold (the crafting may add words only it knows).
    words: &'static [&'static str],
}

/// A crafted bundle and the checks its case adds to the refusal.
struct Crafted {
    bundle: PathBuf,
    /// Arguments after `unpack <bundle> -o <target>`.
    args: Vec<String>,
    /// Words known only once crafted: a temporary path, a hash.
    words: Vec<String>,
    /// Where a malicious path or link would have written.
    escapes: Vec<PathBuf>,
    /// What stderr must not hold: the refusal has this reason, not another.
    lacks: Vec<&'static str>,
    /// `verify` must find the bundle bad, with the same words.
    verify: bool,
    then: Option<Check>,
}

/// A check run after a case's refusals.
type Check = Box<dyn FnOnce(&TestContext)>;

impl Crafted {
    fn new(bundle: PathBuf) -> Self {
        Crafted {
            bundle,
            args: Vec::new(),
            words: Vec::new(),
            escapes: Vec::new(),
            lacks: Vec::new(),
            verify: false,
            then: None,
        }
    }

    fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    fn word(mut self, word: impl Into<String>) -> Self {
        self.words.push(word.into());
        self
    }

    fn escape(mut self, path: PathBuf) -> Self {
        self.escapes.push(path);
        self
    }

    fn lacks(mut self, word: &'static str) -> Self {
        self.lacks.push(word);
        self
    }

    fn verified(mut self) -> Self {
        self.verify = true;
        self
    }

    fn then(mut self, check: impl FnOnce(&TestContext) + 'static) -> Self {
        self.then = Some(Box::new(check));
        self
    }
}

/// Crafts the case's bundle in a fresh directory and checks every refusal it promises.
fn check(case: &Case) {
    let t = TestContext::new();
    let c = (case.craft)(&t);
    let mut words: Vec<&str> = case.words.to_vec();
    words.extend(c.words.iter().map(String::as_str));
    let args: Vec<&str> = c.args.iter().map(String::as_str).collect();
    let err = refused(&t, &c.bundle, &args, &words, &c.escapes);
    for w in &c.lacks {
        assert!(!err.contains(w), "stderr holds {w:?}:\n{err}");
    }
    if c.verify {
        verify_finds(&t, &c.bundle, &words);
    }
    if let Some(then) = c.then {
        then(&t);
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".into())
}

#[test]
fn every_crafted_bad_bundle_is_refused() {
    let mut names: Vec<&str> = CASES.iter().map(|c| c.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), CASES.len(), "two cases share a name");
    // A failing case panics; it is caught so that the others still run.
    let failures: Vec<String> = CASES
        .iter()
        .filter_map(|case| {
            let outcome = std::panic::catch_unwind(|| check(case));
            outcome
                .err()
                .map(|p| format!("{}: {}", case.name, panic_text(&*p)))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n\n")
    );
}

// Crafting helpers.

/// The valid members with `extra` too, all listed in bundle.json.
fn honest_with(t: &TestContext, extra: Entry) -> PathBuf {
    save(t, &honest_tar(&with(valid_members(), extra)))
}

/// The valid members with `extra` too, which bundle.json does not list (it cannot, or no git
/// tree could hold it).
fn unlisted(t: &TestContext, extra: Entry) -> PathBuf {
    let members = valid_members();
    save(t, &bundle_tar(&members, &with(members.clone(), extra)))
}

/// The valid members after the unlisted entries `lead`.
fn led_by(t: &TestContext, lead: Vec<Entry>) -> PathBuf {
    let members = valid_members();
    let mut entries = lead;
    entries.extend(members.clone());
    save(t, &bundle_tar(&members, &entries))
}

/// `entries`, listed in a bundle.json that `edit` then changes.
fn edited(t: &TestContext, entries: Vec<Entry>, edit: impl FnOnce(&mut ManifestJson)) -> PathBuf {
    let mut manifest = ManifestJson::listing(&entries);
    edit(&mut manifest);
    let mut all = vec![manifest.entry()];
    all.extend(entries);
    save(t, &tar_of(&all))
}

/// A version 2 bundle whose vcs.json is the canonical one with `from` replaced by `to`.
fn bad_vcs_json(t: &TestContext, from: &str, to: &str) -> Crafted {
    Crafted::new(bundle_with_vcs(t, 2, Some(&vcs_json().replace(from, to)))).verified()
}

/// A version 3 bundle whose expected.json is the canonical one with `from` replaced by `to`.
fn bad_expected_json(t: &TestContext, from: &str, to: &str) -> Crafted {
    let bad = expected_json().replace(from, to);
    Crafted::new(bundle_with(t, 3, &[("expected.json", &bad)])).verified()
}

/// A member whose header claims 5 GiB; 4 KiB of data and the end of the archive follow.
/// Reading the data would find it truncated, so a refusal that names the limit came from the
/// header.
fn huge_member(t: &TestContext) -> PathBuf {
    unlisted(
        t,
        Entry::file("codebase/huge.bin", vec![7u8; 4096]).claiming(5 << 30),
    )
}

/// A bundle under a name that is not its hash: (bundle, actual id, claimed id).
fn misnamed(t: &TestContext, name: Option<&str>) -> (PathBuf, String, String) {
    let tar = honest_tar(&valid_members());
    let actual = sha256_hex(&tar);
    let claimed = sha256_hex(b"some other bundle");
    let name = name.map_or_else(|| format!("{claimed}.tar.zst"), str::to_string);
    (save_as(t, &name, &compress(&tar)), actual, claimed)
}

/// A real packed bundle: its path in the archive and its bytes.
fn packed_bundle(t: &TestContext) -> (String, Vec<u8>) {
    let (_, id) = t.packed_fixture();
    let bytes = fs::read(t.bundle_path(&id)).unwrap();
    (id, bytes)
}

fn corrupt_zstd(t: &TestContext) -> Crafted {
    let (id, mut bytes) = packed_bundle(t);
    // Flip bytes in the middle of the compressed data (past the frame header).
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 8] {
        *b ^= 0x55;
    }
    // (Some flips land on bits the decoder ignores; these do not.)
    assert!(zstd::decode_all(&bytes[..]).is_err());
    Crafted::new(save_as(t, &format!("{id}.tar.zst"), &bytes))
}

fn flipped_content_byte(t: &TestContext) -> Crafted {
    let members = valid_members();
    let mut entries = members.clone();
    let core = entries
        .iter_mut()
        .find(|e| e.name == b"codebase/widgets/core.py")
        .unwrap();
    core.data[13] ^= 0x01; // "return 1" -> "return 0"
    // No other member is blamed.
    Crafted::new(save(t, &bundle_tar(&members, &entries)))
        .lacks("codebase/setup.py")
        .verified()
}

fn first_member_not_bundle_json(t: &TestContext) -> Crafted {
    let members = valid_members();
    let manifest = ManifestJson::listing(&members).entry();
    let (instance, rest): (Vec<Entry>, Vec<Entry>) = members
        .into_iter()
        .partition(|e| e.name == b"instance.json");
    let mut all = instance;
    all.push(manifest);
    all.extend(rest);
    Crafted::new(save(t, &tar_of(&all)))
}

fn absolute_path(t: &TestContext) -> Crafted {
    // Where the member would land if the path were followed: beside the targets.
    let escape = t.path("escaped-absolute");
    let name = escape.to_str().unwrap().to_string();
    // bundle.json cannot even list such a path, so it lists the rest.
    let bundle = led_by(t, vec![Entry::file(&name, "pwned\n")]);
    Crafted::new(bundle).word(name).escape(escape).verified()
}

fn dotdot_in_a_pax_path(t: &TestContext) -> Crafted {
    // A path over 100 bytes travels in a pax header; the header's own name field holds a
    // harmless prefix of it.
    let long = format!("codebase/{}/../../../../escaped-pax", "d".repeat(100));
    let lead = vec![
        pax_path(long.as_bytes()),
        Entry::file(&long.as_bytes()[..100], "pwned\n"),
    ];
    Crafted::new(led_by(t, lead)).escape(t.path("escaped-pax"))
}

fn path_through_a_symlink_member(t: &TestContext) -> Crafted {
    let link = Entry::symlink("codebase/link", "widgets");
    // On its own the link is fine.
    let good = with(valid_members(), link);
    unpacks(t, &save(t, &honest_tar(&good)), "control");
    let entries = with(
        good.clone(),
        Entry::file("codebase/link/x", "through the link\n"),
    );
    // No git tree can hold both, so bundle.json lists the rest.
    Crafted::new(save(t, &bundle_tar(&good, &entries))).escape(t.path("control/codebase/widgets/x"))
}

fn symlink_climbing_through_another_symlink(t: &TestContext) -> Crafted {
    // `s` points at codebase/ itself, which is fine; `t` = `s/../../x` looks like
    // codebase/a/x when read as text, but through `s` it is <target>/../x: a sibling of the
    // target.
    let good = with(valid_members(), Entry::symlink("codebase/a/b/s", "../.."));
    unpacks(t, &save(t, &honest_tar(&good)), "control");
    let entries = with(
        good,
        Entry::symlink("codebase/a/b/t", "s/../../escaped-via-link"),
    );
    Crafted::new(save(t, &honest_tar(&entries))).escape(t.path("escaped-via-link"))
}

fn hard_link_pointing_outside_the_tree(t: &TestContext) -> Crafted {
    // A file the link would reach from the target (`out/../../victim.txt`).
    let victim = t.path("victim.txt");
    fs::write(&victim, "precious\n").unwrap();
    let link = Entry::special("codebase/hl", HARD_LINK).link_to("../../victim.txt");
    Crafted::new(honest_with(t, link)).then(move |_| {
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
        assert_eq!(
            fs::metadata(&victim).unwrap().nlink(),
            1,
            "a hard link to the victim was made"
        );
    })
}

fn bundle_over_max_total_size(t: &TestContext) -> Crafted {
    let mut entries = valid_members();
    for i in 1..=3 {
        entries = with(
            entries,
            Entry::file(format!("codebase/big{i}.bin"), vec![i as u8; 6 << 10]),
        );
    }
    let bundle = save(t, &honest_tar(&entries));
    // Each member is under the member limit; the third takes the sum past the total limit.
    Crafted::new(bundle.clone())
        .args(&["--max-member-size", "8KiB", "--max-total-size", "16KiB"])
        .then(move |t| {
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
        })
}

fn pax_header_over_the_limit(t: &TestContext) -> Crafted {
    // The header claims 5 GiB; 4 KiB of records follow.
    let mut pax = pax_header(&pax_record("comment", &[b'z'; 4000])).claiming(5 << 30);
    pax.data.resize(4096, b'\n');
    Crafted::new(led_by(t, vec![pax])).lacks("truncated")
}

fn pax_size_record(t: &TestContext) -> Crafted {
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
    Crafted::new(save(t, &bundle_tar(&members, &entries)))
}

const CASES: &[Case] = &[
    // The zstd stream.
    Case {
        name: "truncated zstd",
        craft: |t| {
            let (id, bytes) = packed_bundle(t);
            Crafted::new(save_as(
                t,
                &format!("{id}.tar.zst"),
                &bytes[..bytes.len() / 2],
            ))
        },
        words: &["zstd", "truncated"],
    },
    Case {
        name: "corrupt zstd",
        craft: corrupt_zstd,
        words: &["zstd", "corrupt"],
    },
    // Content and listing against bundle.json.
    Case {
        name: "flipped content byte",
        craft: flipped_content_byte,
        words: &["codebase/widgets/core.py", "does not match bundle.json"],
    },
    Case {
        name: "member not listed in bundle.json",
        craft: |t| {
            // The tree id still covers the extra member, so the listing is the only thing
            // wrong.
            let entries = with(valid_members(), Entry::file("codebase/extra.py", "x = 1\n"));
            let bundle = edited(t, entries, |m| m.unlist("codebase/extra.py"));
            Crafted::new(bundle).lacks("tree id").verified()
        },
        words: &["codebase/extra.py", "not listed in bundle.json"],
    },
    Case {
        name: "listed member missing from the bundle",
        craft: |t| {
            let present = valid_members()
                .into_iter()
                .filter(|e| e.name != b"codebase/setup.py")
                .collect();
            // bundle.json lists it, but the tree id is that of the members present, so the
            // absence is the only thing wrong.
            let bundle = edited(t, present, |m| {
                m.members = ManifestJson::listing(&valid_members()).members
            });
            Crafted::new(bundle).lacks("tree id")
        },
        words: &["codebase/setup.py", "missing from the bundle"],
    },
    Case {
        name: "wrong codebase tree",
        craft: |t| {
            let bundle = edited(t, valid_members(), |m| m.codebase_tree = "0".repeat(40));
            Crafted::new(bundle).word("0".repeat(40))
        },
        words: &["codebase/", "tree id"],
    },
    Case {
        name: "wrong id in the file name",
        craft: |t| {
            let (bundle, actual, claimed) = misnamed(t, None);
            Crafted::new(bundle).word(actual).word(claimed)
        },
        words: &["hashes to"],
    },
    Case {
        name: "wrong id in --expect",
        craft: |t| {
            // The same content under a neutral name: the reason alone names both ids.
            let (bundle, actual, claimed) = misnamed(t, Some("plain.tar.zst"));
            Crafted::new(bundle.clone())
                .args(&["--expect", &claimed])
                .word(actual.clone())
                .word(claimed)
                .then(move |t| {
                    // The right id is accepted.
                    let dest = t.path("good");
                    t.run_expect(
                        &["unpack", s(&bundle), "-o", s(&dest), "--expect", &actual],
                        0,
                    );
                })
        },
        words: &["hashes to"],
    },
    Case {
        name: "data after the end of the archive",
        craft: |t| {
            let mut tar = honest_tar(&valid_members());
            tar.extend_from_slice(b"smuggled bytes after the end-of-archive marker");
            Crafted::new(save(t, &tar))
        },
        words: &["data follows the end"],
    },
    // bundle.json itself.
    Case {
        name: "unknown format version",
        craft: |t| Crafted::new(edited(t, valid_members(), |m| m.version = 4)).verified(),
        words: &["version 4", "reads versions 1, 2 and 3"],
    },
    Case {
        name: "unknown format name",
        craft: |t| {
            let bundle = edited(t, valid_members(), |m| {
                m.format = "some-other-bundle".into()
            });
            Crafted::new(bundle)
        },
        words: &["not a swe-ark bundle", "some-other-bundle"],
    },
    Case {
        name: "first member not bundle.json",
        craft: first_member_not_bundle_json,
        words: &["instance.json", "first member", "not bundle.json"],
    },
    Case {
        name: "oversized bundle.json, from its header",
        craft: |t| {
            // The header claims 300 MiB; a few bytes follow.
            let manifest = ManifestJson::listing(&valid_members())
                .entry()
                .claiming(300 << 20);
            Crafted::new(save(t, &tar_of(&[manifest]))).lacks("truncated")
        },
        words: &["bundle.json", "over the limit"],
    },
    Case {
        name: "a required member missing",
        craft: |t| {
            let entries: Vec<Entry> = valid_members()
                .into_iter()
                .filter(|e| e.name != b"instance.json")
                .collect();
            Crafted::new(save(t, &honest_tar(&entries)))
        },
        words: &["instance.json", "every bundle holds"],
    },
    // vcs.json (format version 2).
    Case {
        name: "vcs.json not JSON",
        craft: |t| Crafted::new(bundle_with_vcs(t, 2, Some("{not json\n"))).verified(),
        words: &["vcs.json", "not a valid VCS record"],
    },
    Case {
        // Valid JSON, but its describe is not what its first tag says.
        name: "vcs.json describe against its tags",
        craft: |t| bad_vcs_json(t, "4.4.2-6-g", "4.4.2-7-g"),
        words: &["vcs.json", "its first tag makes it"],
    },
    Case {
        name: "vcs.json with an unknown field",
        craft: |t| bad_vcs_json(t, "\"commits\": 12", "\"commits\": 12, \"extra\": 1"),
        words: &["vcs.json", "unknown field"],
    },
    Case {
        name: "vcs.json not canonical",
        craft: |t| bad_vcs_json(t, "\n  ", "\n    "),
        words: &["vcs.json", "canonical form"],
    },
    Case {
        name: "vcs.json in version 1",
        craft: |t| Crafted::new(bundle_with_vcs(t, 1, Some(&vcs_json()))),
        words: &[
            "lists vcs.json, a member of format version 2",
            "says version 1",
        ],
    },
    Case {
        name: "version 2 without vcs.json",
        craft: |t| Crafted::new(bundle_with_vcs(t, 2, None)),
        words: &["does not list vcs.json"],
    },
    // expected.json (format version 3).
    Case {
        name: "expected.json in version 1",
        craft: |t| Crafted::new(bundle_with(t, 1, &[("expected.json", &expected_json())])),
        words: &["lists expected.json", "says version 1"],
    },
    Case {
        name: "expected.json in version 2",
        craft: |t| {
            let (e, v) = (expected_json(), vcs_json());
            Crafted::new(bundle_with(
                t,
                2,
                &[("expected.json", &e), ("vcs.json", &v)],
            ))
        },
        words: &["lists expected.json", "says version 2"],
    },
    Case {
        name: "version 3 without expected.json",
        craft: |t| Crafted::new(bundle_with(t, 3, &[])),
        words: &["says version 3", "does not list it"],
    },
    Case {
        name: "results.json in version 3",
        craft: |t| {
            let e = expected_json();
            let extra = [("expected.json", e.as_str()), ("results.json", "{}\n")];
            Crafted::new(bundle_with(t, 3, &extra))
        },
        words: &["lists results.json", "replaces with expected.json"],
    },
    Case {
        name: "expected.json not canonical",
        craft: |t| bad_expected_json(t, "\n  ", "\n    "),
        words: &["expected.json", "canonical form"],
    },
    Case {
        name: "expected.json with an unknown field",
        craft: |t| bad_expected_json(t, "\"flaky\": [],", "\"flaky\": [],\n  \"timings\": {},"),
        words: &["expected.json", "unknown field `timings`"],
    },
    Case {
        name: "expected.json without a field",
        craft: |t| bad_expected_json(t, "  \"log_parser\": \"pytest\",\n", ""),
        words: &["expected.json", "missing field `log_parser`"],
    },
    // Paths.
    Case {
        name: "absolute path",
        craft: absolute_path,
        words: &["absolute"],
    },
    Case {
        // From the staging directory inside the target, three levels up is the target's
        // parent; from the target itself, it is the test's directory.
        name: "`..` component",
        craft: |t| {
            let bundle = unlisted(
                t,
                Entry::file("codebase/../../../escaped-dotdot", "pwned\n"),
            );
            Crafted::new(bundle).escape(t.path("escaped-dotdot"))
        },
        words: &["codebase/../../../escaped-dotdot", "`..` component"],
    },
    Case {
        name: "`..` in a pax path",
        craft: dotdot_in_a_pax_path,
        words: &["escaped-pax", "`..` component"],
    },
    Case {
        name: "`.` component",
        craft: |t| Crafted::new(unlisted(t, Entry::file("codebase/./x.py", "x\n"))),
        words: &["codebase/./x.py", "`.` component"],
    },
    Case {
        name: "empty component",
        craft: |t| Crafted::new(unlisted(t, Entry::file("codebase//x.py", "x\n"))),
        words: &["codebase//x.py", "empty component"],
    },
    Case {
        name: "path outside codebase/ and the fixed members",
        craft: |t| Crafted::new(honest_with(t, Entry::executable("evil.sh", "rm -rf ~\n"))),
        words: &["evil.sh", "not a member of the bundle format"],
    },
    Case {
        name: "duplicate member",
        craft: |t| {
            let again = Entry::file("codebase/widgets/core.py", "def f(): return 666\n");
            Crafted::new(unlisted(t, again))
        },
        words: &["codebase/widgets/core.py", "appears twice"],
    },
    Case {
        name: "path through a symlink member",
        craft: path_through_a_symlink_member,
        words: &[
            "codebase/link/x",
            "goes through the symlink",
            "codebase/link",
        ],
    },
    Case {
        name: "path below a file member",
        craft: |t| Crafted::new(unlisted(t, Entry::file("codebase/setup.py/x", "x\n"))),
        words: &["codebase/setup.py/x", "goes through the file"],
    },
    // Links.
    Case {
        name: "symlink pointing outside the tree",
        craft: |t| {
            let link = Entry::symlink("codebase/passwd", "../../etc/passwd");
            Crafted::new(honest_with(t, link))
        },
        words: &[
            "codebase/passwd",
            "points outside the tree",
            "../../etc/passwd",
        ],
    },
    Case {
        name: "absolute symlink",
        craft: |t| {
            let link = Entry::symlink("codebase/passwd", "/etc/passwd");
            Crafted::new(honest_with(t, link))
        },
        words: &["codebase/passwd", "points outside the tree"],
    },
    Case {
        name: "symlink climbing through another symlink",
        craft: symlink_climbing_through_another_symlink,
        words: &["codebase/a/b/t", "points outside the tree"],
    },
    Case {
        name: "symlink outside codebase/",
        craft: |t| {
            let entries: Vec<Entry> = valid_members()
                .into_iter()
                .map(|e| {
                    if e.name == b"instance.json" {
                        Entry::symlink("instance.json", "codebase/setup.py")
                    } else {
                        e
                    }
                })
                .collect();
            Crafted::new(save(t, &honest_tar(&entries)))
        },
        words: &["instance.json", "only codebase/ may hold symlinks"],
    },
    Case {
        name: "symlink entry carrying data",
        craft: |t| {
            let mut link = Entry::symlink("codebase/link", "setup.py");
            link.data = b"hidden payload".to_vec();
            Crafted::new(honest_with(t, link))
        },
        words: &["codebase/link", "carries data"],
    },
    Case {
        name: "hard link pointing outside the tree",
        craft: hard_link_pointing_outside_the_tree,
        words: &["codebase/hl", "hard link", "outside the tree"],
    },
    // Entry types.
    Case {
        name: "char device",
        craft: |t| Crafted::new(honest_with(t, Entry::special("codebase/null", CHAR_DEVICE))),
        words: &["codebase/null", "device file"],
    },
    Case {
        name: "block device",
        craft: |t| Crafted::new(honest_with(t, Entry::special("codebase/sda", BLOCK_DEVICE))),
        words: &["codebase/sda", "device file"],
    },
    Case {
        name: "FIFO",
        craft: |t| Crafted::new(honest_with(t, Entry::special("codebase/pipe", FIFO))),
        words: &["codebase/pipe", "FIFO"],
    },
    Case {
        // Without the usual trailing slash, so that the type is what is refused, not the path.
        name: "directory entry",
        craft: |t| {
            let dir = Entry::special("codebase/widgets", DIRECTORY).with_mode(0o755);
            Crafted::new(unlisted(t, dir))
        },
        words: &["codebase/widgets", "directory entry"],
    },
    Case {
        name: "unknown entry type",
        craft: |t| Crafted::new(unlisted(t, Entry::special("codebase/odd", b'Z'))),
        words: &["codebase/odd", "tar type `Z`"],
    },
    Case {
        // Type `7` reads like a regular file, but bundle format v1 has type `0` only.
        name: "contiguous file entry",
        craft: |t| {
            let file = Entry::file("codebase/contiguous.py", "x = 1\n").with_type(b'7');
            Crafted::new(honest_with(t, file))
        },
        words: &["codebase/contiguous.py", "tar type `7`"],
    },
    // Size limits: refused from the header, before the data is read.
    Case {
        name: "member over --max-member-size, from its header",
        craft: |t| {
            Crafted::new(huge_member(t))
                .args(&["--max-member-size", "4GiB"])
                .lacks("truncated")
        },
        words: &["codebase/huge.bin", "member size limit", "5368709120"],
    },
    Case {
        // The default limit is 4 GiB too.
        name: "member over the default member size limit",
        craft: |t| Crafted::new(huge_member(t)),
        words: &["codebase/huge.bin", "member size limit"],
    },
    Case {
        name: "bundle over --max-total-size",
        craft: bundle_over_max_total_size,
        words: &["codebase/big3.bin", "total size limit"],
    },
    // Pax extended headers: held to the limits like members, and only `path` / `linkpath`.
    Case {
        name: "pax header over the limit, from its header",
        craft: pax_header_over_the_limit,
        words: &[
            "././@PaxHeader",
            "5368709120",
            "over the limit",
            "pax header",
        ],
    },
    Case {
        // 4 MiB of real pax data (a few KiB compressed) under 1 MiB member and total limits:
        // the tar library on its own would read all of it into memory and accept the bundle.
        name: "large pax header counts against the limits",
        craft: |t| {
            let pax = pax_header(&pax_record("comment", &vec![b'z'; 4 << 20]));
            Crafted::new(led_by(t, vec![pax])).args(&[
                "--max-member-size",
                "1MiB",
                "--max-total-size",
                "1MiB",
            ])
        },
        words: &["././@PaxHeader", "over the limit", "pax header"],
    },
    Case {
        name: "pax size record",
        craft: pax_size_record,
        words: &["././@PaxHeader", "pax `size` record"],
    },
    Case {
        name: "pax header with no member after it",
        craft: |t| {
            let members = valid_members();
            let mut entries = members.clone();
            entries.push(pax_path(b"codebase/never.py"));
            Crafted::new(save(t, &bundle_tar(&members, &entries)))
        },
        words: &["ends after a pax header"],
    },
    Case {
        name: "two pax headers in a row",
        craft: |t| {
            let lead = vec![
                pax_path(b"codebase/../../../escaped-pax2"),
                pax_path(b"codebase/setup.py"),
            ];
            Crafted::new(led_by(t, lead)).escape(t.path("escaped-pax2"))
        },
        words: &["././@PaxHeader", "two pax headers"],
    },
];
