//! The deduplicated store: instances of one repository share most of their content, and the
//! archive keeps it once (whole, or as deltas), while every bundle reads back byte for byte;
//! `rm` and `gc` free what nothing else needs and never what a release names; whole bundle
//! files from before are read, then moved into the store.

mod common;

use std::fs;
use std::path::Path;

use common::*;

/// Python-like text from a seeded generator: varied lines, as real source has.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn line(&mut self) -> String {
        const WORDS: [&str; 16] = [
            "value", "parse", "node", "result", "config", "token", "buffer", "index", "stream",
            "handler", "schema", "query", "cache", "event", "item", "state",
        ];
        let a = WORDS[(self.next() % 16) as usize];
        let b = WORDS[(self.next() % 16) as usize];
        match self.next() % 4 {
            0 => format!(
                "    {a}_{} = {b}.get({})\n",
                self.next() % 100,
                self.next() % 1000
            ),
            1 => format!("def {a}_{b}(self, {b}=None):\n"),
            2 => format!("    if {a} is not None and {b} > {}:\n", self.next() % 50),
            _ => format!("        return {b}_{}({a})\n", self.next() % 10),
        }
    }

    fn file(&mut self, lines: usize) -> String {
        (0..lines).map(|_| self.line()).collect()
    }
}

fn write(dir: &Path, rel: &str, content: &str) {
    let p = dir.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

/// A repository with `commits` commits over 80 files: each commit edits five files (a line
/// changed, a line added), adds one and deletes one. Returns its commits, oldest first.
fn make_history(dir: &Path, commits: usize) -> Vec<String> {
    fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    let mut g = Gen(7);
    let mut files: Vec<String> = Vec::new();
    for i in 0..80 {
        let rel = format!("pkg/mod{}/file{i}.py", i % 8);
        write(dir, &rel, &g.file(60 + (i % 7) * 20));
        files.push(rel);
    }
    let mut out = vec![git_commit_all(dir, "first", "2024-01-01T00:00:00Z")];
    for c in 1..commits {
        for k in 0..5 {
            let rel = &files[(c * 7 + k * 13) % files.len()];
            let mut lines: Vec<String> = fs::read_to_string(dir.join(rel))
                .unwrap()
                .lines()
                .map(|l| format!("{l}\n"))
                .collect();
            let at = (g.next() as usize) % lines.len();
            lines[at] = g.line();
            lines.insert((g.next() as usize) % lines.len(), g.line());
            write(dir, rel, &lines.concat());
        }
        let rel = format!("pkg/new/added{c}.py");
        write(dir, &rel, &g.file(40));
        files.push(rel);
        let gone = files.remove((c * 11) % files.len());
        fs::remove_file(dir.join(gone)).unwrap();
        out.push(git_commit_all(
            dir,
            &format!("change {c}"),
            &format!("2024-01-{:02}T00:00:00Z", c + 1),
        ));
    }
    out
}

/// Mirrors `upstream` as acme/widgets and packs one instance per commit; returns the ids.
fn pack_history(t: &TestContext, upstream: &Path, commits: &[String]) -> Vec<String> {
    let url = format!("file://{}", upstream.display());
    t.run_expect(&["mirror", "add", &url, "--name", "acme/widgets"], 0);
    commits
        .iter()
        .enumerate()
        .map(|(i, c)| pack_from_mirror(t, &t.instance_at(c, &format!("acme__widgets-{i}"))))
        .collect()
}

/// Packs `inst` from the acme/widgets mirror; returns the bundle id.
fn pack_from_mirror(t: &TestContext, inst: &Path) -> String {
    let inst = inst.to_str().unwrap();
    let out = t.run_expect(&["pack", "--repo", "acme/widgets", "--instance", inst], 0);
    last_line(&out.stdout)
}

fn stats(t: &TestContext) -> serde_json::Value {
    serde_json::from_slice(&t.run_expect(&["ls", "--stats", "--json"], 0).stdout).unwrap()
}

fn stored_bytes(t: &TestContext) -> u64 {
    stats(t)["total"]["stored_bytes"].as_u64().unwrap()
}

#[test]
fn a_history_of_instances_is_stored_many_times_smaller_and_reads_back_exactly() {
    let t = TestContext::new();
    let commits = make_history(&t.path("upstream"), 12);
    let ids = pack_history(&t, &t.path("upstream"), &commits);

    // Every bundle comes back as the self-contained file it is: its tar hashes to its id.
    let mut self_contained = 0;
    for id in &ids {
        let file = t.bundle_path(id);
        assert_eq!(sha256_hex(&decompress(&file)), *id);
        self_contained += fs::metadata(&file).unwrap().len();
    }
    let s = stats(&t);
    let repo = &s["repos"][0];
    assert_eq!(repo["repo"], "acme/widgets");
    assert_eq!(repo["bundles"], 12);
    let stored = repo["stored_bytes"].as_u64().unwrap();
    let ratio = repo["dedup_ratio"].as_f64().unwrap();
    assert!(ratio > 10.0, "logical/stored is only {ratio:.1}: {s}");
    assert!(
        stored * 5 < self_contained,
        "stored {stored} bytes, the self-contained bundles {self_contained}"
    );
    let text = stdout(&t.run_expect(&["ls", "--stats"], 0));
    assert!(
        text.contains("acme/widgets") && text.contains("x"),
        "{text}"
    );

    // `pack --output` writes the same bytes that the store gives back.
    let last = commits.len() - 1;
    let inst = t.instance_at(&commits[last], &format!("acme__widgets-{last}"));
    let out = t.run_expect(
        &[
            "-q",
            "pack",
            "--repo",
            "acme/widgets",
            "--instance",
            inst.to_str().unwrap(),
            "--output",
            "direct",
        ],
        0,
    );
    assert_eq!(last_line(&out.stdout), ids[last]);
    assert_eq!(
        fs::read(t.path(&format!("direct/{}.tar.zst", ids[last]))).unwrap(),
        fs::read(t.bundle_path(&ids[last])).unwrap()
    );

    // Unpacked from the store, the codebase is the commit's tree.
    t.run_expect(&["unpack", &ids[last], "-o", "out"], 0);
    git(&t.path("upstream"), &["checkout", "-q", &commits[last]]);
    let mut want = tree_listing(&t.path("upstream"));
    want.retain(|(p, _, _)| !p.starts_with(b".git"));
    want.sort();
    let mut got = tree_listing(&t.path("out/codebase"));
    got.sort();
    assert_eq!(got, want);
    t.run_expect(&["verify"], 0);

    // The same instances packed in the same order into another archive: the same packs.
    let t2 = TestContext::new();
    let ids2 = pack_history(&t2, &t.path("upstream"), &commits);
    assert_eq!(ids2, ids);
    let names = |t: &TestContext| -> Vec<String> {
        t.pack_files()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(names(&t2), names(&t));
}

/// Packs the fixture codebase (as instance 42) and a second version of it: one file changed,
/// one gone, one new (as instance 43). Returns both ids.
fn two_versions(t: &TestContext) -> (String, String) {
    let cb = t.path("cb");
    make_fixture_codebase(&cb);
    let mut g = Gen(3);
    write(&cb, "widgets/big.py", &g.file(400));
    write(&cb, "widgets/old.py", &g.file(300));
    let a = t.pack(&cb);
    let big = fs::read_to_string(cb.join("widgets/big.py")).unwrap();
    write(&cb, "widgets/big.py", &format!("{big}{}", g.line()));
    fs::remove_file(cb.join("widgets/old.py")).unwrap();
    write(&cb, "widgets/new.py", &g.file(50));
    let inst = t.instance_at(BASE_COMMIT, "acme__widgets-43");
    let out = t.run_expect(
        &[
            "pack",
            "--instance",
            inst.to_str().unwrap(),
            "--codebase",
            cb.to_str().unwrap(),
        ],
        0,
    );
    (a, last_line(&out.stdout))
}

#[test]
fn rm_and_gc_free_what_nothing_else_uses() {
    let t = TestContext::new();
    let (a, b) = two_versions(&t);
    let b_file = fs::read(t.bundle_path(&b)).unwrap();
    let before = stored_bytes(&t);

    // Removing the first: what the second still needs stays (its unchanged files, and the
    // old versions its deltas are made against); what only the first had goes.
    let out = t.run_expect(&["rm", "acme__widgets-42"], 0);
    assert_eq!(last_line(&out.stdout), a);
    assert_eq!(stored_bytes(&t), before, "rm alone frees nothing");
    let dry = stdout(&t.run_expect(&["gc", "--dry-run"], 0));
    assert!(dry.contains("would free"), "{dry}");
    assert_eq!(stored_bytes(&t), before);
    let gc: serde_json::Value =
        serde_json::from_slice(&t.run_expect(&["gc", "--json"], 0).stdout).unwrap();
    assert!(gc["dead_pieces"].as_u64().unwrap() >= 1, "{gc}");
    assert_eq!(gc["packs_rewritten"], 1, "{gc}");
    let after = stored_bytes(&t);
    assert!(after < before, "{after} vs {before}");
    assert_eq!(fs::read(t.bundle_path(&b)).unwrap(), b_file);
    t.run_expect(&["verify"], 0);
    t.run_expect(&["unpack", &b, "-o", "out"], 0);
    let err = stderr(&t.run_expect(&["unpack", &a, "-o", "gone"], 2));
    assert!(err.contains("no bundle in the archive matches"), "{err}");

    // A second gc has nothing to do.
    let again: serde_json::Value =
        serde_json::from_slice(&t.run_expect(&["gc", "--json"], 0).stdout).unwrap();
    assert_eq!(again["dead_pieces"], 0);
    assert_eq!(again["packs_rewritten"], 0);

    // With the last bundle gone, nothing is left.
    t.run_expect(&["rm", &b[..12]], 0);
    t.run_expect(&["gc"], 0);
    assert!(t.pack_files().is_empty(), "{:?}", t.pack_files());
    assert_eq!(stored_bytes(&t), 0);
    t.run_expect(&["verify"], 0);
}

#[test]
fn gc_and_rm_keep_what_a_release_snapshot_names() {
    let t = TestContext::new();
    let (a, b) = two_versions(&t);
    // A snapshot as the release stage registers it (any layout: the ids are found in it).
    fs::create_dir_all(t.ark().join("releases")).unwrap();
    fs::write(
        t.ark().join("releases/r1.json"),
        serde_json::json!({"name": "r1", "instances": [{"instance_id": "acme__widgets-42", "bundle": a}]})
            .to_string(),
    )
    .unwrap();
    let err = stderr(&t.run_expect(&["rm", "acme__widgets-42"], 2));
    assert!(err.contains(&a) && err.contains("r1"), "{err}");
    t.run_expect(&["rm", &b], 0);
    t.run_expect(&["gc"], 0);
    let file = t.bundle_path(&a);
    assert_eq!(sha256_hex(&decompress(&file)), a);
    t.run_expect(&["verify"], 0);
    // Once the release is gone, so may the bundle be.
    fs::remove_file(t.ark().join("releases/r1.json")).unwrap();
    t.run_expect(&["rm", &a], 0);
    t.run_expect(&["gc"], 0);
    assert!(t.pack_files().is_empty());
}

#[test]
fn whole_bundle_files_from_before_are_read_then_moved_into_the_store() {
    let t = TestContext::new();
    let (a, b) = two_versions(&t);
    let a_file = fs::read(t.bundle_path(&a)).unwrap();
    let b_file = fs::read(t.bundle_path(&b)).unwrap();
    // The archive as an older swe-ark left it: bundles as whole files, no pieces.
    fs::create_dir_all(t.ark().join("bundles")).unwrap();
    for (id, bytes) in [(&a, &a_file), (&b, &b_file)] {
        fs::write(t.ark().join(format!("bundles/{id}.tar.zst")), bytes).unwrap();
    }
    {
        let conn = rusqlite::Connection::open(t.ark().join("index.sqlite")).unwrap();
        conn.execute_batch(
            "UPDATE bundles SET manifest_piece = NULL, sketch = NULL,
                 file_size = 1000;
             DELETE FROM pieces; DELETE FROM packs;",
        )
        .unwrap();
    }
    for p in t.pack_files() {
        fs::remove_file(p).unwrap();
    }
    // Read as they are.
    t.run_expect(&["verify"], 0);
    t.run_expect(&["unpack", &a, "-o", "out-a"], 0);
    assert_eq!(fs::read(t.bundle_path(&a)).unwrap(), a_file);
    let s = stats(&t);
    assert_eq!(s["repos"][0]["whole_files"], 2, "{s}");

    // gc moves them into the store, deduplicated; the files go once the index names pieces.
    let gc: serde_json::Value =
        serde_json::from_slice(&t.run_expect(&["gc", "--json"], 0).stdout).unwrap();
    assert_eq!(gc["migrated"].as_array().unwrap().len(), 2, "{gc}");
    assert!(!t.ark().join(format!("bundles/{a}.tar.zst")).exists());
    let s = stats(&t);
    assert_eq!(s["repos"][0]["whole_files"], 0, "{s}");
    assert!(
        s["total"]["stored_bytes"].as_u64().unwrap() < (a_file.len() + b_file.len()) as u64,
        "{s}"
    );
    assert_eq!(fs::read(t.bundle_path(&a)).unwrap(), a_file);
    assert_eq!(fs::read(t.bundle_path(&b)).unwrap(), b_file);
    t.run_expect(&["verify"], 0);

    // A damaged whole file is left as it is, and said so (exit 1).
    let conn = rusqlite::Connection::open(t.ark().join("index.sqlite")).unwrap();
    conn.execute(
        "UPDATE bundles SET manifest_piece = NULL WHERE id = ?1",
        [&b],
    )
    .unwrap();
    let mut bad = b_file.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x20;
    fs::write(t.ark().join(format!("bundles/{b}.tar.zst")), &bad).unwrap();
    let out = t.run_expect(&["gc"], 1);
    assert!(stderr(&out).contains(&b), "{}", stderr(&out));
    assert!(t.ark().join(format!("bundles/{b}.tar.zst")).exists());
}

#[test]
fn import_of_a_bundle_file_stores_it_deduplicated() {
    let t = TestContext::new();
    let (a, _) = two_versions(&t);
    let file = t.bundle_path(&a);
    let other = TestContext::new();
    fs::create_dir_all(other.ark()).unwrap();
    let mut ark = swe_ark::store::Ark::create(&other.ark()).unwrap();
    let row = ark
        .import_bundle_file(
            &file,
            None,
            &swe_ark::bundle::PackOptions::default(),
            &swe_ark::progress::NoProgress,
        )
        .unwrap();
    assert_eq!(row.id.hex(), a);
    drop(ark);
    other.run_expect(&["verify"], 0);
    assert_eq!(
        fs::read(other.bundle_path(&a)).unwrap(),
        fs::read(&file).unwrap()
    );
    let show = stdout(&other.run_expect(&["show", "acme__widgets-42"], 0));
    assert!(show.contains(&a), "{show}");
}

#[test]
fn a_release_imported_elsewhere_is_stored_deduplicated_and_release_rm_frees_what_only_it_kept() {
    let t = TestContext::new();
    let commits = make_history(&t.path("upstream"), 8);
    let ids = pack_history(&t, &t.path("upstream"), &commits);
    let snap = t.path("r1.json");
    let snap_s = snap.to_str().unwrap();
    t.run_expect(&["release", "create", "r1", "-o", snap_s], 0);
    // `release create` registered it in the archive.
    let ls = stdout(&t.run_expect(&["release", "ls"], 0));
    assert!(ls.starts_with("r1  "), "{ls}");
    let err = stderr(&t.run_expect(&["rm", "acme__widgets-3"], 2));
    assert!(err.contains("r1"), "{err}");

    // Exported and imported into an empty archive: stored deduplicated there too, every
    // bundle the same bytes, and the release registered.
    let file = t.path("r1.ark");
    t.run_expect(
        &["export", "--release", snap_s, "-o", file.to_str().unwrap()],
        0,
    );
    let other = t.path("other");
    let there = |args: &[&str], code: i32| {
        let out = t.cmd_at(&other).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        out
    };
    there(&["import-archive", file.to_str().unwrap()], 0);
    let s: serde_json::Value =
        serde_json::from_slice(&there(&["ls", "--stats", "--json"], 0).stdout).unwrap();
    let ratio = s["repos"][0]["dedup_ratio"].as_f64().unwrap();
    assert!(
        ratio > 5.0,
        "logical/stored after import is only {ratio:.1}: {s}"
    );
    assert_eq!(s["repos"][0]["bundles"], 8);
    there(&["verify"], 0);
    there(&["release", "verify", snap_s], 0);
    assert!(stdout(&there(&["release", "ls"], 0)).starts_with("r1  "));
    let exported = t.path("exported-there");
    there(
        &["export-bundle", &ids[5], "-o", exported.to_str().unwrap()],
        0,
    );
    assert_eq!(
        fs::read(exported.join(format!("{}.tar.zst", ids[5]))).unwrap(),
        fs::read(t.bundle_path(&ids[5])).unwrap()
    );
    // Importing it again adds nothing.
    let again: serde_json::Value = serde_json::from_slice(
        &there(&["import-archive", file.to_str().unwrap(), "--json"], 0).stdout,
    )
    .unwrap();
    assert_eq!(again["bundles_added"], 0, "{again}");

    // Instance 3 packed again from another commit: its old bundle is kept by the release
    // alone. `release rm` removes it (and only it) from the index; gc then frees what no
    // bundle needs (here its pieces all stay: the other bundles, and the deltas of the new
    // one, are made against them; rm_and_gc_free_what_nothing_else_uses tests the freeing).
    let newer = pack_from_mirror(&t, &t.instance_at(&commits[7], "acme__widgets-3"));
    assert_ne!(newer, ids[3]);
    let out = t.run_expect(&["release", "rm", "r1"], 0);
    assert_eq!(stdout(&out).trim(), ids[3]);
    assert!(stdout(&t.run_expect(&["release", "ls"], 0)).is_empty());
    let err = stderr(&t.run_expect(&["release", "rm", "r1"], 2));
    assert!(err.contains("no release `r1`"), "{err}");
    t.run_expect(&["gc"], 0);
    t.run_expect(&["verify"], 0);
    let err = stderr(&t.run_expect(&["unpack", &ids[3], "-o", "gone"], 2));
    assert!(err.contains("no bundle in the archive matches"), "{err}");
    t.run_expect(&["unpack", &newer, "-o", "kept"], 0);
}

#[test]
fn a_block_ending_in_a_piece_just_under_the_streaming_size_reads_back() {
    // Whole pieces go into a block until it holds 128 KiB; the piece that crosses that may be
    // as large as 32 MiB - 1 (larger ones are streamed): the block then holds more than
    // 32 MiB, which a reader once refused as a corrupt frame.
    let t = TestContext::new();
    let cb = t.path("cb");
    let mut g = Gen(11);
    write(&cb, "a.py", &g.file(2_000));
    assert!(fs::metadata(cb.join("a.py")).unwrap().len() < 128 << 10);
    let mut big = String::with_capacity(32 << 20);
    while big.len() < (32 << 20) - 200 {
        big.push_str(&g.line());
    }
    big.truncate((32 << 20) - 1);
    write(&cb, "b.py", &big);
    let id = t.pack(&cb);
    t.run_expect(&["verify", &id], 0);
    t.run_expect(&["unpack", &id, "-o", "out"], 0);
    assert_eq!(
        fs::read(t.path("out/codebase/b.py")).unwrap(),
        big.as_bytes()
    );
}
