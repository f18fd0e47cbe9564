//! The command line as a user meets it: output, exit codes (0 ok, 1 a check failed, 2 an
//! error) and clear errors for bad input.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use common::*;

fn pack_fixture(t: &TestContext) -> String {
    make_fixture_codebase(&t.path("cb"));
    t.pack(&t.path("cb"))
}

fn flip_byte(path: &std::path::Path, at: usize) {
    let mut bytes = fs::read(path).unwrap();
    let at = at.min(bytes.len() - 1);
    bytes[at] ^= 0x55;
    fs::write(path, bytes).unwrap();
}

#[test]
fn ls_show_and_verify_a_packed_instance() {
    let t = TestContext::new();
    let id = pack_fixture(&t);

    let ls = stdout(&t.run_expect(&["ls"], 0));
    assert!(
        ls.contains("acme__widgets-42") && ls.contains(&id[..12]),
        "{ls}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&t.run_expect(&["ls", "--json"], 0).stdout).unwrap();
    assert_eq!(json[0]["instance_id"], "acme__widgets-42");
    assert_eq!(json[0]["bundles"][0]["id"], id.as_str());
    assert_eq!(json[0]["bundles"][0]["codebase_files"], 13);

    for query in [&id[..], &id[..10], "acme__widgets-42"] {
        let show = stdout(&t.run_expect(&["show", query], 0));
        assert!(show.contains(&id), "{show}");
        assert!(show.contains("tests/test_core.py::test_f"), "{show}");
        assert!(show.contains("swe-ark-bundle v1"), "{show}");
    }
    let show: serde_json::Value =
        serde_json::from_slice(&t.run_expect(&["show", "--json", &id], 0).stdout).unwrap();
    assert_eq!(show["manifest"]["instance_id"], "acme__widgets-42");
    assert_eq!(
        show["instance"]["FAIL_TO_PASS"][0],
        "tests/test_core.py::test_f"
    );

    let out = t.run_expect(&["verify"], 0);
    assert!(
        stdout(&out).contains(&format!("ok  bundle {id}")),
        "{}",
        stdout(&out)
    );
    let out = t.run_expect(&["verify", "--json", "acme__widgets-42"], 0);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["ok"], true);
}

#[test]
fn pack_prints_only_the_id_when_quiet_and_is_idempotent() {
    let t = TestContext::new();
    make_fixture_codebase(&t.path("cb"));
    let inst = t.instance_file();
    let args = [
        "-q",
        "pack",
        "--instance",
        inst.to_str().unwrap(),
        "--codebase",
        "cb",
    ];
    let out = t.run_expect(&args, 0);
    let id = stdout(&out).trim().to_string();
    assert_eq!(id.len(), 64, "{id}");
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    let again = t.run_expect(&args, 0);
    assert_eq!(stdout(&again).trim(), id);
    let json: serde_json::Value =
        serde_json::from_slice(&t.run_expect(&["ls", "--json"], 0).stdout).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 1);
    assert_eq!(json[0]["bundles"].as_array().unwrap().len(), 1);
    // Packing it again wrote nothing new.
    assert_eq!(t.pack_files().len(), 1);
    // Pack files and exported bundle files are readable like any file tar would write.
    for p in [t.pack_files()[0].clone(), t.bundle_path(&id)] {
        let mode = fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o644, 0o644, "{}: {mode:o}", p.display());
    }
}

#[test]
fn verify_names_a_corrupted_or_missing_bundle_and_exits_1() {
    let t = TestContext::new();
    let id = pack_fixture(&t);
    let pack = t.pack_files().remove(0);
    let good = fs::read(&pack).unwrap();

    // A flipped byte in the stored frame of one file (a block it shares with its
    // neighbours): its pack, and the bundle with a member of that block, are named.
    let (pack_name, frame) = {
        let index = swe_ark::store::Index::open(&t.ark().join("index.sqlite")).unwrap();
        let core = swe_ark::digest::Sha256Digest::of(b"def f(): return 1\n");
        let loc = index.piece_locs(&[core]).unwrap().remove(0).1;
        (
            pack.file_stem().unwrap().to_string_lossy().into_owned(),
            loc,
        )
    };
    flip_byte(&pack, (frame.offset + frame.length / 2) as usize);
    let out = t.run_expect(&["verify"], 1);
    let text = stdout(&out);
    assert!(text.contains(&format!("BAD pack {pack_name}")), "{text}");
    assert!(text.contains(&format!("BAD bundle {id}")), "{text}");
    assert!(text.contains("member `"), "{text}");
    // Checking the one bundle finds it too; unpacking refuses it, writing nothing.
    let text = stdout(&t.run_expect(&["verify", &id[..8]], 1));
    assert!(text.contains("BAD"), "{text}");
    let err = stderr(&t.run_expect(&["unpack", &id, "-o", "out"], 2));
    assert!(err.contains("member `"), "{err}");
    assert!(!t.path("out").exists());

    // The pack file is gone.
    fs::remove_file(&pack).unwrap();
    let text = stdout(&t.run_expect(&["verify"], 1));
    assert!(text.contains("No such file"), "{text}");

    fs::write(&pack, &good).unwrap();
    t.run_expect(&["verify"], 0);
}

#[test]
fn verify_rehashes_objects() {
    let t = TestContext::new();
    pack_fixture(&t);
    let store = swe_ark::store::ObjectStore::new(t.ark().join("objects"));
    let id = store.put_bytes(b"a wheel, say").unwrap();
    {
        let mut index = swe_ark::store::Index::open(&t.ark().join("index.sqlite")).unwrap();
        index.record_object(&id, 12, "wheel").unwrap();
    }
    t.run_expect(&["verify"], 0);
    fs::write(store.path_of(&id), b"a wheel, sat").unwrap();
    let text = stdout(&t.run_expect(&["verify"], 1));
    assert!(text.contains(&format!("BAD object {id}")), "{text}");
    assert!(text.contains("corrupt"), "{text}");
}

#[test]
fn unpack_refuses_a_non_empty_target_and_unknown_ids() {
    let t = TestContext::new();
    let id = pack_fixture(&t);
    fs::create_dir(t.path("full")).unwrap();
    fs::write(t.path("full/keep.txt"), "mine").unwrap();
    let err = stderr(&t.run_expect(&["unpack", &id, "-o", "full"], 2));
    assert!(err.contains("not empty"), "{err}");
    assert_eq!(fs::read_to_string(t.path("full/keep.txt")).unwrap(), "mine");

    // A refused bundle leaves no directory behind, not even the parents unpack made.
    let bad = t.path("bad.tar.zst");
    fs::write(&bad, b"not zstd at all").unwrap();
    t.run_expect(
        &["unpack", bad.to_str().unwrap(), "-o", "new/deeper/out"],
        2,
    );
    assert!(!t.path("new").exists());

    let err = stderr(&t.run_expect(&["unpack", "no-such-instance", "-o", "x"], 2));
    assert!(
        err.contains("no bundle in the archive matches `no-such-instance`"),
        "{err}"
    );
    assert!(!t.path("x").exists());
    let err = stderr(&t.run_expect(&["show", "ffff0000"], 2));
    assert!(err.contains("ffff0000"), "{err}");
    // An empty directory is a fine target.
    fs::create_dir(t.path("empty")).unwrap();
    t.run_expect(&["unpack", &id, "-o", "empty"], 0);
    assert!(t.path("empty/bundle.json").is_file());
}

#[test]
fn unpack_works_on_a_bare_file_without_an_archive() {
    let t = TestContext::new();
    let id = pack_fixture(&t);
    let moved = t.path(&format!("{id}.tar.zst"));
    fs::copy(t.bundle_path(&id), &moved).unwrap();
    fs::remove_dir_all(t.ark()).unwrap();
    let out = t.run_expect(&["unpack", moved.to_str().unwrap(), "-o", "out"], 0);
    assert_eq!(last_line(&out.stdout), id);
    t.run_expect(&["verify", moved.to_str().unwrap()], 0);
    // Renamed to claim another id, the same file is refused.
    let liar = t.path(&format!("{}.tar.zst", "ab".repeat(32)));
    fs::copy(&moved, &liar).unwrap();
    let err = stderr(&t.run_expect(&["unpack", liar.to_str().unwrap(), "-o", "out2"], 2));
    assert!(err.contains(&id) && err.contains(&"ab".repeat(32)), "{err}");
    assert!(!t.path("out2").exists());
}

#[test]
fn bad_instances_are_refused_with_the_field_named() {
    let t = TestContext::new();
    make_fixture_codebase(&t.path("cb"));
    let cases: [(&str, &str); 6] = [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        (
            r#"{"instance_id": "x", "repo": "o/r", "patch": "", "test_patch": ""}"#,
            "`base_commit`",
        ),
        (
            r#"{"instance_id": "x", "repo": "o/r", "base_commit": "main", "patch": "", "test_patch": ""}"#,
            "`main`, not a full commit id",
        ),
        (
            r#"{"instance_id": "x", "repo": "o/r", "base_commit": "0123456789abcdef0123456789abcdef01234567", "patch": "", "test_patch": "", "FAIL_TO_PASS": "oops"}"#,
            "FAIL_TO_PASS",
        ),
        (
            r#"{"instance_id": "x", "repo": "nope", "base_commit": "0123456789abcdef0123456789abcdef01234567", "patch": "", "test_patch": ""}"#,
            "OWNER/NAME",
        ),
    ];
    for (json, expected) in cases {
        fs::write(t.path("bad.json"), json).unwrap();
        let out = t.run_expect(&["pack", "--instance", "bad.json", "--codebase", "cb"], 2);
        let err = stderr(&out);
        assert!(err.contains(expected), "for {json}: {err}");
        assert!(err.contains("bad.json"), "names the file: {err}");
    }
    assert!(
        !t.ark().join("index.sqlite").exists(),
        "nothing was created"
    );
}

#[test]
fn bad_codebases_and_side_files_are_refused() {
    let t = TestContext::new();
    let inst = t.instance_file();
    let inst = inst.to_str().unwrap();
    make_fixture_codebase(&t.path("cb"));

    // Packs `cb` with `extra` arguments; must fail with exit 2; returns stderr.
    let refused = |codebase: &str, extra: &[&str]| {
        let mut args = vec!["pack", "--instance", inst, "--codebase", codebase];
        args.extend_from_slice(extra);
        stderr(&t.run_expect(&args, 2))
    };

    let err = refused("nowhere", &[]);
    assert!(err.contains("nowhere"), "{err}");

    fs::write(t.path("spec.toml"), "python = ").unwrap();
    let err = refused("cb", &["--spec", "spec.toml"]);
    assert!(err.contains("--spec") && err.contains("TOML"), "{err}");

    fs::write(t.path("results.json"), "{").unwrap();
    let err = refused("cb", &["--results", "results.json"]);
    assert!(err.contains("--results") && err.contains("JSON"), "{err}");

    let err = refused("cb", &["--pre-log", "missing.log"]);
    assert!(err.contains("missing.log"), "{err}");

    // A symlink that leaves the codebase.
    std::os::unix::fs::symlink("../../etc/passwd", t.path("cb/escape")).unwrap();
    let err = refused("cb", &[]);
    assert!(err.contains("escape") && err.contains("outside"), "{err}");
    fs::remove_file(t.path("cb/escape")).unwrap();

    // A FIFO.
    let status = std::process::Command::new("mkfifo")
        .arg(t.path("cb/pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    let err = refused("cb", &[]);
    assert!(err.contains("pipe") && err.contains("FIFO"), "{err}");
    assert!(t.pack_files().is_empty(), "no pack file was left");
}

#[test]
fn commands_on_a_missing_archive_say_so() {
    let t = TestContext::new();
    for cmd in [&["ls"][..], &["verify"], &["show", "abcd"]] {
        let err = stderr(&t.run_expect(cmd, 2));
        assert!(err.contains("is not a swe-ark archive"), "{cmd:?}: {err}");
    }
    assert!(!t.ark().exists(), "reading commands create nothing");
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    let t = TestContext::new();
    t.run_expect(&["--help"], 0);
    t.run_expect(&["pack", "--help"], 0);
    t.run_expect(&["pack"], 2);
    t.run_expect(&["frobnicate"], 2);
    t.run_expect(
        &[
            "pack",
            "--instance",
            "x",
            "--codebase",
            "y",
            "--level",
            "99",
        ],
        2,
    );
}

#[test]
fn index_is_wal_with_a_schema_version_and_refuses_newer_schemas() {
    let t = TestContext::new();
    pack_fixture(&t);
    let conn = rusqlite::Connection::open(t.ark().join("index.sqlite")).unwrap();
    let version: u32 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, swe_ark::store::SCHEMA_VERSION);
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    for table in ["instances", "bundles", "objects"] {
        let n: i64 = conn
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap();
        assert!(n >= 0);
    }
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let err = stderr(&t.run_expect(&["ls"], 2));
    assert!(err.contains("schema version 99"), "{err}");
}

#[test]
fn broken_pipe_is_a_normal_end() {
    let t = TestContext::new();
    pack_fixture(&t);
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -o pipefail; {} --ark {} show --full acme__widgets-42 | head -c 10 >/dev/null",
            swe_ark::shell::quote(env!("CARGO_BIN_EXE_swe-ark")),
            swe_ark::shell::quote(&t.ark().display().to_string())
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn manifests_come_from_the_folder_given_and_a_bad_one_is_named() {
    let t = TestContext::new();
    pack_fixture(&t);
    // A folder that does not exist.
    let missing = t.path("no-such-manifests");
    let out = t.run_expect(
        &[
            "--manifests",
            missing.to_str().unwrap(),
            "validate",
            "--force",
        ],
        2,
    );
    let err = stderr(&out);
    assert!(
        err.contains("cannot read manifests in") && err.contains("no-such-manifests"),
        "{err}"
    );
    // A folder whose one manifest is not TOML: the file is named.
    let dir = t.path("manifests");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("acme__widgets.toml"), "this is [not toml").unwrap();
    let out = t.run_expect(
        &["--manifests", dir.to_str().unwrap(), "validate", "--force"],
        2,
    );
    let err = stderr(&out);
    assert!(err.contains("acme__widgets.toml"), "{err}");
    // SWE_ARK_MANIFESTS says the same as the flag.
    let mut c = t.cmd();
    c.env("SWE_ARK_MANIFESTS", &missing)
        .args(["validate", "--force"]);
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no-such-manifests"));
}

/// `replay` and `validate` ask the sandbox first: where the kernel cannot give what the options
/// ask (here a user namespace whose limits allow no namespace at all), they stop before any
/// instance, exit 2, and name what is missing and the flag that goes without it.
#[test]
fn replay_and_validate_refuse_up_front_what_the_sandbox_cannot_give() {
    if !std::path::Path::new("/usr/bin/unshare").exists() || !can_unshare() {
        eprintln!("skipped: needs unshare and user namespaces");
        return;
    }
    let t = TestContext::new();
    pack_fixture(&t);
    let preds = t.path("preds.jsonl");
    fs::write(
        &preds,
        "{\"instance_id\": \"acme__widgets-42\", \"model_name_or_path\": \"m\", \"model_patch\": \"\"}\n",
    )
    .unwrap();
    let forbid = "for f in user pid net mnt; do echo 0 > /proc/sys/user/max_${f}_namespaces \
                  || exit 1; done; exec \"$@\"";
    let without_namespaces = |args: &[&str]| {
        let mut c = t.cmd();
        let swe_ark = c.get_program().to_owned();
        let mut full: Vec<std::ffi::OsString> = c.get_args().map(|a| a.to_owned()).collect();
        full.extend(args.iter().map(std::ffi::OsString::from));
        c = std::process::Command::new("/usr/bin/unshare");
        c.args(["--user", "--map-root-user", "/bin/sh", "-c", forbid, "sh"])
            .arg(swe_ark)
            .args(full)
            .current_dir(t.path(""));
        c.output().unwrap()
    };
    let replay = ["replay", "--predictions", preds.to_str().unwrap()];
    let out = without_namespaces(&replay);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("network isolation is not possible here (") && err.contains("--allow-network"),
        "{err}"
    );
    let out = without_namespaces(&[&replay[..], &["--allow-network"]].concat());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("confinement is not possible here (") && err.contains("--unconfined"),
        "{err}"
    );
    let out = without_namespaces(&["validate", "--allow-network"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("confinement is not possible here ("));
    assert!(
        !t.path("ark/runs").exists(),
        "a refused replay leaves no run behind"
    );
    // Both flags given, the fixed layout still needs a mount namespace: refused, saying so.
    let out = without_namespaces(&[&replay[..], &["--allow-network", "--unconfined"]].concat());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the fixed layout (the work tree at /testbed) needs a mount namespace"),
        "{err}"
    );
    assert!(!t.path("ark/runs").exists(), "{err}");
}

#[test]
fn replay_reads_predictions_by_their_content_whatever_the_file_is_called() {
    let t = TestContext::new();
    pack_fixture(&t);
    // JSON Lines in a `.txt`: two predictions of instances the archive does not hold, so the
    // run accounts for each as excluded and runs nothing.
    let preds = t.path("preds.txt");
    let line = |id: &str| {
        format!(
            "{{\"instance_id\": \"{id}\", \"model_name_or_path\": \"m\", \"model_patch\": \"\"}}"
        )
    };
    fs::write(
        &preds,
        format!("{}\n{}\n", line("acme__gone-1"), line("acme__gone-2")),
    )
    .unwrap();
    let p = preds.to_str().unwrap();
    let args = [
        "replay",
        "--predictions",
        p,
        "--run-id",
        "r",
        "--allow-network",
        "--unconfined",
        "--json",
    ];
    let out = t.run(&args);
    let err = stderr(&out);
    assert!(!err.contains("malformed"), "{err}");
    let summaries: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let excluded = summaries[0]["excluded"].as_object().unwrap();
    assert_eq!(
        excluded.keys().collect::<Vec<_>>(),
        ["acme__gone-1", "acme__gone-2"],
        "{summaries}"
    );
    // A malformed line is named, with the file, whatever the file is called.
    fs::write(&preds, format!("{}\n{{oops\n", line("acme__gone-1"))).unwrap();
    let out = t.run_expect(&args, 2);
    let err = stderr(&out);
    assert!(
        err.contains(&format!("predictions `{p}` are malformed: line 2: ")),
        "{err}"
    );
}
