//! `env lock`, `env build`, `env ls`, `env show` for real: tiny distributions made by
//! tests/fixtures/mkdists.py, served by a real package index on 127.0.0.1, a real mirror of a
//! git repository made here, real virtual environments and real pip (and uv when
//! `SWE_ARK_UV` names one). Nothing leaves the machine.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::pyindex::PyIndex;
use common::{TestContext, git, git_commit_all, git_init_commit, pyfix, stderr, stdout};

/// Everything made before 2021-06-01 (the commit's date); alpha 2.0 came later.
const SPEC: &str = r#"[
 {"name": "tinybuild", "version": "1.0", "kind": "wheel", "backend": true},
 {"name": "alpha", "version": "1.0", "kind": "wheel", "requires": ["delta"], "requires_python": ">=3.6"},
 {"name": "alpha", "version": "2.0", "kind": "wheel", "requires": ["delta"], "requires_python": ">=3.6"},
 {"name": "beta",  "version": "1.2", "kind": "sdist", "requires": []},
 {"name": "delta", "version": "1.0", "kind": "wheel"},
 {"name": "gamma", "version": "1.0", "kind": "wheel"},
 {"name": "epsilon", "version": "1.0", "kind": "wheel"},
 {"name": "zeta", "version": "1.0", "kind": "wheel"},
 {"name": "omega", "version": "1.0", "kind": "wheel"},
 {"name": "eta", "version": "1.0", "kind": "wheel", "requires": ["theta>=2.0"]},
 {"name": "theta", "version": "1.0", "kind": "wheel"},
 {"name": "theta", "version": "2.0", "kind": "wheel"},
 {"name": "theta", "version": "3.0", "kind": "wheel"}
]"#;

const COMMIT_DATE: &str = "2021-06-01T00:00:00Z";

struct Fixture {
    t: TestContext,
    index: PyIndex,
    commit: String,
    python: String,
    python_path: PathBuf,
}

fn manifest(python: &str, extra_versions: &str) -> String {
    format!(
        r#"repo = "acme/widget"
source = "tests/env.rs"
log_parser = "pytest"

[defaults]
python = "{python}"
packages = ["alpha"]
requirements = ["requirements.txt"]
pip_packages = ["gamma==1.0"]
install = "python -m pip install -e ."
test_cmd = "pytest -rA"
notes = "a fixture"

[versions."0.1"]

[versions."0.2"]
python = "3.99"

[versions."0.3"]
pip_packages = ["nosuchpkg"]

[versions."0.4"]
pip_packages = ["epsilon==1.0"]

[versions."0.6"]
pip_packages = ["zeta"]

[versions."0.5"]
requirements = []
pip_packages = []
install = ""
{extra_versions}
"#
    )
}

impl Fixture {
    /// None (after saying why) when no suitable Python is on the machine.
    fn new(extra_versions: &str) -> Option<Fixture> {
        let Some((python, python_path)) = pyfix::python() else {
            eprintln!("skipped: no Python 3.9-3.13 on this machine");
            return None;
        };
        let t = TestContext::new();
        let dists = t.path("dists");
        pyfix::mkdists(&python_path, &dists, SPEC);
        let index = PyIndex::start(&dists);
        index.set_upload_time("alpha-2.0-py3-none-any.whl", "2023-01-01T00:00:00Z");
        // eta 1.0 (pinned by a context) came after the commit and needs a theta of then.
        index.set_upload_time("eta-1.0-py3-none-any.whl", "2023-06-01T00:00:00Z");
        index.set_upload_time("theta-2.0-py3-none-any.whl", "2023-05-01T00:00:00Z");
        index.set_upload_time("theta-3.0-py3-none-any.whl", "2024-01-01T00:00:00Z");
        index.yank("epsilon-1.0-py3-none-any.whl", "broken build");

        // The repository: a project built with tinybuild, depending on gamma; beta (an sdist)
        // comes from its requirements file.
        let repo = t.path("repo");
        pyfix::mkproject(&python_path, &repo, "widget", "0.1", r#"["gamma"]"#);
        std::fs::write(repo.join("requirements.txt"), "beta\n# a comment\n-e .\n").unwrap();
        let commit = git_init_commit(&repo, "widget 0.1", COMMIT_DATE);

        t.widget_manifests(&manifest(&python, extra_versions));
        let f = Fixture {
            t,
            index,
            commit,
            python,
            python_path,
        };
        f.ok(&[
            "mirror",
            "add",
            repo.to_str().unwrap(),
            "--name",
            "acme/widget",
        ]);
        Some(f)
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = self.t.cmd();
        c.env("SWE_ARK_MANIFESTS", self.t.path("manifests"))
            .env("SWE_ARK_INDEX_URL", self.index.url())
            .args(args);
        c
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        self.cmd(args).output().unwrap()
    }

    fn expect(&self, args: &[&str], code: i32) -> std::process::Output {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "swe-ark {args:?}\n--- stdout\n{}\n--- stderr\n{}",
            stdout(&out),
            stderr(&out)
        );
        out
    }

    /// The lock `id` as `env show` prints it.
    fn shown_lock(&self, id: &str) -> toml::Value {
        toml::from_str(&self.ok(&["env", "show", id])).unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        stdout(&self.expect(args, 0))
    }

    fn lock(&self, version: &str, extra: &[&str]) -> String {
        let mut args = vec![
            "env",
            "lock",
            "acme/widget",
            version,
            "--commit",
            &self.commit,
        ];
        args.extend(extra);
        common::last_line(self.ok(&args).as_bytes())
    }

    fn locks_json(&self) -> Vec<serde_json::Value> {
        serde_json::from_str(&self.ok(&["env", "ls", "--json"])).unwrap()
    }
}

/// Runs `python -c code` in the environment `venv`, with nothing from the caller's env.
fn py(venv: &Path, code: &str) -> String {
    let out = Command::new(venv.join("bin/python"))
        .args(["-c", code])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(out.status.success(), "{code}: {}", stderr(&out));
    stdout(&out).trim().to_string()
}

/// `pip install -e checkout` in the environment `venv` with no index: the wheelhouse only.
fn install_offline(venv: &Path, checkout: &Path, wheelhouse: &str) {
    let out = Command::new(venv.join("bin/python"))
        .args(["-m", "pip", "install", "-q", "-e"])
        .arg(checkout)
        .env_clear()
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", venv.join("bin").display()),
        )
        .env("PIP_CONFIG_FILE", "/dev/null")
        .env("PIP_NO_INDEX", "1")
        .env("PIP_FIND_LINKS", wheelhouse)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

const LIST: &str = "import json,sys,sysconfig,os; \
    d=sysconfig.get_paths()['purelib']; \
    print(json.dumps(sorted(e for e in os.listdir(d) if e.endswith('.dist-info'))))";

#[test]
fn locks_as_of_then_and_builds_offline_from_objects_only() {
    let Some(f) = Fixture::new("") else { return };
    let id = f.lock("0.1", &[]);
    assert_eq!(id.len(), 64, "{id}");

    // As of the commit's date: alpha 2.0 (uploaded in 2023) was never offered, never fetched.
    let requests = f.index.requests().join("\n");
    assert!(
        requests.contains("/files/alpha-1.0-py3-none-any.whl"),
        "{requests}"
    );
    assert!(!requests.contains("alpha-2.0"), "{requests}");

    let text = f.ok(&["env", "show", &id[..12]]);
    let lock: toml::Value = toml::from_str(&text).unwrap();
    assert_eq!(lock["lock-version"].as_str(), Some("1.0"));
    let packages = lock["packages"].as_array().unwrap();
    let pkg = |name: &str| {
        packages
            .iter()
            .find(|p| p["name"].as_str() == Some(name))
            .unwrap_or_else(|| panic!("{name} not in the lock:\n{text}"))
    };
    let role = |name: &str| {
        pkg(name)["tool"]["swe-ark"]["role"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(pkg("alpha")["version"].as_str(), Some("1.0"));
    for name in ["alpha", "beta", "delta", "gamma"] {
        assert_eq!(role(name), "runtime", "{name}");
    }
    // The build backend of beta's sdist and of the project's own install: locked for builds.
    assert_eq!(role("tinybuild"), "build");
    // beta came as an sdist: both it and the wheel built from it are kept, each by hash.
    let beta = pkg("beta");
    let sdist_sha = beta["sdist"]["hashes"]["sha256"].as_str().unwrap();
    let built = &beta["tool"]["swe-ark"]["built-wheel"];
    assert!(built["name"].as_str().unwrap().ends_with(".whl"), "{text}");
    assert_ne!(built["hashes"]["sha256"].as_str().unwrap(), sdist_sha);
    let meta = &lock["tool"]["swe-ark"];
    assert_eq!(meta["commit"].as_str(), Some(f.commit.as_str()));
    assert_eq!(meta["exclude-newer"].as_str(), Some(COMMIT_DATE));
    assert_eq!(meta["project"]["name"].as_str(), Some("widget"));
    assert!(
        meta["python"]["version"]
            .as_str()
            .unwrap()
            .starts_with(&f.python)
    );
    // The installer that resolved, as pip names itself: the interpreter's own (ensurepip's).
    let out = std::process::Command::new(&f.python_path)
        .args(["-c", "import ensurepip; print(ensurepip.version())"])
        .output()
        .unwrap();
    let bundled = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        meta["resolver"].as_str(),
        Some(format!("pip {}", bundled.trim()).as_str())
    );
    // Every artifact is an object under its sha256, and the lock is one too.
    for p in packages {
        for a in p
            .get("wheels")
            .and_then(|w| w.as_array())
            .into_iter()
            .flatten()
        {
            let sha = a["hashes"]["sha256"].as_str().unwrap();
            assert!(
                f.t.ark()
                    .join("objects/sha256")
                    .join(&sha[..2])
                    .join(&sha[2..])
                    .is_file()
            );
        }
    }
    let rows = f.locks_json();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["id"].as_str(), Some(id.as_str()));
    assert_eq!(rows[0]["repo"].as_str(), Some("acme/widget"));
    assert_eq!(rows[0]["built"].as_bool(), Some(true));
    let ls = f.ok(&["env", "ls"]);
    assert!(ls.contains(&id[..12]) && ls.contains("acme/widget"), "{ls}");

    // Locking again gives the same bytes, hence the same id, and downloads nothing.
    let before = f.index.file_requests();
    assert_eq!(f.lock("0.1", &[]), id);
    let after = f.index.file_requests();
    assert_eq!(before, after, "a re-lock downloaded files again");

    // Another builder: another archive, HOME, TMPDIR, user and working directory, seconds
    // later. beta's wheel is built from its sdist again (tinybuild, like setuptools, stamps
    // the build's time unless SOURCE_DATE_EPOCH says otherwise): the same lock, byte for byte,
    // and it names nothing of where either was made.
    let bob = f.t.path("bob");
    for d in ["home", "tmp", "cwd"] {
        std::fs::create_dir_all(bob.join(d)).unwrap();
    }
    let pyenv_root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")));
    let as_bob = |args: &[&str]| {
        let mut c = f.t.cmd_at(&bob.join("ark"));
        c.env("SWE_ARK_MANIFESTS", f.t.path("manifests"))
            .env("SWE_ARK_INDEX_URL", f.index.url())
            .env("HOME", bob.join("home"))
            .env("TMPDIR", bob.join("tmp"))
            .env("USER", "bob")
            .env("LOGNAME", "bob")
            .current_dir(bob.join("cwd"))
            .args(args);
        if let Some(root) = &pyenv_root {
            c.env("PYENV_ROOT", root);
        }
        common::succeeded(&c.output().unwrap(), &format!("swe-ark {args:?}"))
    };
    let repo = f.t.path("repo");
    as_bob(&[
        "mirror",
        "add",
        repo.to_str().unwrap(),
        "--name",
        "acme/widget",
    ]);
    let bob_id = common::last_line(
        as_bob(&["env", "lock", "acme/widget", "0.1", "--commit", &f.commit]).as_bytes(),
    );
    let bob_text = as_bob(&["env", "show", &bob_id]);
    assert_eq!(bob_text, text, "two builders' locks differ");
    assert_eq!(bob_id, id);
    for place in [f.t.path(""), bob.clone()] {
        let place = place.display().to_string();
        assert!(
            !text.contains(place.trim_end_matches('/')),
            "{place} in\n{text}"
        );
    }

    // Built from objects with the network cut: no index, no route anywhere.
    let build_args = ["env", "build", &id[..16], "--offline", "--force", "--json"];
    let out = if common::can_unshare() {
        let mut c = Command::new("unshare");
        c.args(["-n", "--"]).arg(env!("CARGO_BIN_EXE_swe-ark"));
        c.arg("--ark").arg(f.t.ark()).arg("--no-progress");
        c.args(build_args).env_remove("SWE_ARK_INDEX_URL");
        c.output().unwrap()
    } else {
        eprintln!("note: unshare -n is not available; building without a network namespace");
        f.run(&build_args)
    };
    assert!(out.status.success(), "{}", stderr(&out));
    let built: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let venv = PathBuf::from(built["venv"].as_str().unwrap());
    assert_eq!(
        py(
            &venv,
            "import alpha, beta, delta, gamma; print(alpha.VERSION, beta.VERSION)"
        ),
        "1.0 1.2"
    );
    assert_eq!(built["cached"].as_bool(), Some(false));
    // The second build is the cache.
    let again: serde_json::Value =
        serde_json::from_str(&f.ok(&["env", "build", &id, "--json"])).unwrap();
    assert_eq!(again["cached"].as_bool(), Some(true));

    // A per-instance copy runs from its own place, and the instance's install works in it
    // with no index at all (tinybuild comes from the wheelhouse).
    let copy = f.t.path("instance-env");
    f.ok(&["env", "build", &id, "--copy-to", copy.to_str().unwrap()]);
    let pip = Command::new(copy.join("bin/pip"))
        .arg("--version")
        .env_clear()
        .output()
        .unwrap();
    assert!(
        stdout(&pip).contains(copy.to_str().unwrap()),
        "{}{}",
        stdout(&pip),
        stderr(&pip)
    );
    // The environment is a prefix of its own, as a conda environment is: started through a
    // symlink placed elsewhere (tox-current-env links `sys.executable` into `.tox/py39/bin/`),
    // its interpreter still sees its packages, which a virtual environment's would not.
    assert!(!copy.join("pyvenv.cfg").exists());
    let elsewhere = f.t.path("tox-env/bin");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(copy.join("bin/python"), elsewhere.join("python")).unwrap();
    let linked = Command::new(elsewhere.join("python"))
        .args(["-c", "import sys, alpha; print(sys.prefix, alpha.VERSION)"])
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(
        stdout(&linked).trim(),
        format!("{} 1.0", copy.display()),
        "{}",
        stderr(&linked)
    );
    let checkout = f.t.path("checkout");
    git(
        f.t.path("").as_path(),
        &[
            "clone",
            "-q",
            f.t.path("repo").to_str().unwrap(),
            checkout.to_str().unwrap(),
        ],
    );
    install_offline(&copy, &checkout, built["wheelhouse"].as_str().unwrap());
    assert_eq!(py(&copy, "import widget; print(widget.VERSION)"), "0.1");
    // The cached environment is untouched by the instance's install.
    assert!(!py(&venv, LIST).contains("widget"));
}

#[test]
fn pip_and_uv_build_the_same_environment() {
    let Some(uv) = std::env::var_os("SWE_ARK_UV") else {
        eprintln!("skipped: SWE_ARK_UV is not set (`make test` installs a pinned uv)");
        return;
    };
    if !Path::new(&uv).is_file() {
        eprintln!(
            "skipped: SWE_ARK_UV={} does not exist",
            Path::new(&uv).display()
        );
        return;
    }
    let Some(f) = Fixture::new("") else { return };
    let id = f.lock("0.1", &["--installer", "pip"]);
    let build = |installer: &str| -> (String, String) {
        let out = f.ok(&[
            "env",
            "build",
            &id,
            "--force",
            "--installer",
            installer,
            "--json",
        ]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let venv = PathBuf::from(v["venv"].as_str().unwrap());
        (
            v["installer"].as_str().unwrap().to_string(),
            py(&venv, LIST),
        )
    };
    let (pip_name, pip_list) = build("pip");
    let (uv_name, uv_list) = build("uv");
    assert!(pip_name.starts_with("pip"), "{pip_name}");
    assert_eq!(uv_name, "uv");
    assert_eq!(pip_list, uv_list);
    assert!(uv_list.contains("alpha-1.0.dist-info"), "{uv_list}");
}

#[test]
fn a_tampered_or_missing_object_is_refused_naming_the_package() {
    let Some(f) = Fixture::new("") else { return };
    let id = f.lock("0.5", &[]);
    let lock = f.shown_lock(&id);
    let alpha = locked_package(&lock, "alpha");
    let sha = alpha["wheels"][0]["hashes"]["sha256"].as_str().unwrap();
    let object =
        f.t.ark()
            .join("objects/sha256")
            .join(&sha[..2])
            .join(&sha[2..]);
    let good = std::fs::read(&object).unwrap();

    let mut bad = good.clone();
    let n = bad.len();
    bad[n / 2] ^= 0x55;
    std::fs::write(&object, &bad).unwrap();
    let out = f.expect(&["env", "build", &id, "--force"], 2);
    let e = stderr(&out);
    assert!(e.contains("alpha 1.0") && e.contains("corrupt"), "{e}");
    assert!(!f.t.ark().join("envs").join(&id).join("env.json").exists());

    std::fs::remove_file(&object).unwrap();
    let out = f.expect(&["env", "build", &id, "--force"], 2);
    let e = stderr(&out);
    assert!(
        e.contains("alpha 1.0") && e.contains("not in the archive's objects"),
        "{e}"
    );

    std::fs::write(&object, &good).unwrap();
    f.ok(&["env", "build", &id, "--force"]);
}

#[test]
fn bad_input_gets_a_clear_error_and_leaves_no_lock() {
    let Some(f) = Fixture::new("") else { return };
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["env", "lock", "acme/nope", "0.1"],
            &["no manifest describes repository acme/nope", "acme/widget"],
        ),
        (
            &["env", "lock", "acme/widget", "9.9"],
            &["has no version 9.9", "0.1, 0.2"],
        ),
        (
            &["env", "lock", "acme/widget", "0.2"],
            &["no Python 3.99", "pyenv install 3.99"],
        ),
        (
            &["env", "lock", "acme/widget", "0.1"],
            &[
                "no environment setup commit for acme/widget 0.1",
                "--commit",
            ],
        ),
        (
            &[
                "env",
                "lock",
                "acme/widget",
                "0.1",
                "--commit",
                "0000000000000000000000000000000000000000",
            ],
            &["has no commit 0000000000000000000000000000000000000000"],
        ),
        (&["env", "build", "ffff"], &["no lock matches `ffff`"]),
        (
            &[
                "env",
                "lock",
                "acme/widget",
                "0.1",
                "--exclude-newer",
                "last week",
            ],
            &["--exclude-newer `last week` is not a date"],
        ),
    ];
    for (args, needles) in cases {
        let out = f.expect(args, 2);
        let e = stderr(&out);
        for n in *needles {
            assert!(e.contains(n), "swe-ark {args:?}: {e}");
        }
    }
    // A requirement nothing satisfies.
    let out = f.expect(
        &["env", "lock", "acme/widget", "0.3", "--commit", &f.commit],
        2,
    );
    let e = stderr(&out);
    assert!(e.contains("nosuchpkg") && e.contains("pip_packages"), "{e}");
    // A yanked release: refused, unless asked for.
    let out = f.expect(
        &["env", "lock", "acme/widget", "0.4", "--commit", &f.commit],
        2,
    );
    let e = stderr(&out);
    assert!(
        e.contains("epsilon 1.0 was yanked") && e.contains("broken build"),
        "{e}"
    );
    // An artifact the index lists but no longer serves (and the archive does not hold).
    f.index.vanish("zeta-1.0-py3-none-any.whl");
    let out = f.expect(
        &["env", "lock", "acme/widget", "0.6", "--commit", &f.commit],
        2,
    );
    let e = stderr(&out);
    assert!(
        e.contains("zeta-1.0-py3-none-any.whl is listed by the index but cannot be downloaded"),
        "{e}"
    );
    // None of it left a lock behind, nor a built environment, nor a work directory.
    assert!(f.locks_json().is_empty());
    let envs = f.t.ark().join("envs");
    assert!(!envs.exists() || std::fs::read_dir(&envs).unwrap().next().is_none());
    let tmp: Vec<_> = std::fs::read_dir(f.t.ark().join("tmp"))
        .map(|rd| rd.flatten().collect())
        .unwrap_or_default();
    assert!(tmp.is_empty(), "{tmp:?}");

    let out = f.expect(
        &[
            "env",
            "lock",
            "acme/widget",
            "0.4",
            "--commit",
            &f.commit,
            "--allow-yanked",
        ],
        0,
    );
    let id = common::last_line(&out.stdout);
    let text = f.ok(&["env", "show", &id]);
    assert!(text.contains("yanked = \"broken build\""), "{text}");
    let _ = &f.python_path;
}

#[test]
fn python_3_6_and_3_7_contexts_build_with_pip_and_uv_says_it_cannot() {
    let old: Vec<&str> = ["3.6", "3.7"]
        .into_iter()
        .filter(|v| swe_ark::env::python::find(v, None).is_ok())
        .collect();
    if old.is_empty() {
        eprintln!("skipped: neither Python 3.6 nor 3.7 is on this machine");
        return;
    }
    // Wheels only: 3.6's own pip (18.1) predates PEP 517 builds.
    let extra: String = old
        .iter()
        .map(|v| {
            format!(
                "\n[versions.\"py{v}\"]\npython = \"{v}\"\nrequirements = []\npip_packages = []\ninstall = \"\"\n"
            )
        })
        .collect();
    let Some(f) = Fixture::new(&extra) else {
        return;
    };
    for v in old {
        let id = f.lock(&format!("py{v}"), &[]);
        let built: serde_json::Value =
            serde_json::from_str(&f.ok(&["env", "build", &id, "--force", "--json"])).unwrap();
        assert!(
            built["installer"].as_str().unwrap().starts_with("pip"),
            "{built}"
        );
        let venv = PathBuf::from(built["venv"].as_str().unwrap());
        let (major, minor) = v.split_once('.').unwrap();
        assert_eq!(
            py(
                &venv,
                "import sys, alpha; print(sys.version_info[:2], alpha.VERSION)"
            ),
            format!("({major}, {minor}) 1.0")
        );
        if std::env::var_os("SWE_ARK_UV").is_some() {
            let out = f.expect(&["env", "build", &id, "--force", "--installer", "uv"], 2);
            let e = stderr(&out);
            assert!(
                e.contains(&format!("uv does not install into Python {v}")),
                "{e}"
            );
        }
    }
}

#[test]
fn a_packed_interpreter_runs_from_the_archive() {
    let Some(f) = Fixture::new("") else { return };
    let id = f.lock("0.5", &["--pack-python"]);
    let v: serde_json::Value =
        serde_json::from_str(&f.ok(&["env", "build", &id, "--force", "--packed-python", "--json"]))
            .unwrap();
    let venv = PathBuf::from(v["venv"].as_str().unwrap());
    // Made from the packed interpreter; the environment is a prefix of its own.
    let interpreter = std::fs::canonicalize(v["interpreter"].as_str().unwrap()).unwrap();
    let pythons = std::fs::canonicalize(f.t.ark().join("pythons")).unwrap();
    assert!(
        interpreter.starts_with(&pythons),
        "{} is not under {}",
        interpreter.display(),
        pythons.display()
    );
    let base = interpreter
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .display()
        .to_string();
    assert_eq!(
        py(&venv, "import sys; print(sys.prefix == sys.base_prefix)"),
        "True"
    );
    assert_eq!(
        py(&venv, "import alpha, json, ssl; print(alpha.VERSION)"),
        "1.0"
    );
    // The packed interpreter carries no `__pycache__`: the build compiles the standard
    // library once, so that no install or run compiles it again into its own layer.
    // (`imaplib`: a module that nothing the build or this test runs imports.)
    let pyc = venv.join(format!(
        "lib/python{}/__pycache__/imaplib.cpython-{}.pyc",
        f.python,
        f.python.replace('.', "")
    ));
    assert!(pyc.is_file(), "{}", pyc.display());
    // Its build variables name the environment itself, which holds the headers, not the
    // locker's prefix nor where the interpreter is unpacked: a C extension built offline
    // finds Python.h in the environment, wherever an instance's run sees it.
    let include = py(
        &venv,
        "import sysconfig; print(sysconfig.get_config_var('INCLUDEPY'))",
    );
    let include = std::fs::canonicalize(&include).unwrap_or_else(|e| panic!("{include}: {e}"));
    let venv_real = std::fs::canonicalize(&venv).unwrap();
    assert!(include.starts_with(&venv_real), "{}", include.display());
    assert!(include.join("Python.h").is_file(), "{}", include.display());
    // Unpacked once for the machine (the suite's shared cache): the archive's tree is hard
    // links to the shared one, but for its build files, which name the archive's own place.
    use std::os::unix::fs::MetadataExt;
    let stdlib = Path::new(&base).join(format!("lib/python{}", f.python));
    let shared = common::shared_cache()
        .join("pythons")
        .join(Path::new(&base).file_name().unwrap())
        .join(format!("lib/python{}", f.python));
    let inode = |p: &Path| std::fs::metadata(p).unwrap().ino();
    assert_eq!(inode(&stdlib.join("os.py")), inode(&shared.join("os.py")));
    let data = std::fs::read_dir(&stdlib)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("_sysconfigdata") && n.ends_with(".py")
        })
        .unwrap();
    let text = std::fs::read_to_string(&data).unwrap();
    assert!(text.contains(&format!("'prefix': '{base}'")), "{text}");
    let name = data.file_name().unwrap();
    assert_ne!(inode(&data), inode(&shared.join(name)));
    // The packed executable does not lean on the original prefix for its libpython.
    let exe = std::fs::read_dir(Path::new(&base).join("bin"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_str().unwrap() == format!("python{}", f.python))
        .unwrap();
    let bytes = std::fs::read(&exe).unwrap();
    let original = swe_ark::env::python::find(&f.python, None).unwrap().prefix;
    let needle = format!("{}/lib\0", original.display());
    assert!(
        !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
        "the packed interpreter still names {needle}"
    );
}

#[test]
fn an_instance_whose_base_commit_needs_more_gets_it_in_the_wheelhouse() {
    let extra = "\n[versions.\"0.8\"]\nrequirements = []\npip_packages = []\n";
    let Some(f) = Fixture::new(extra) else { return };
    // Another commit of the project needs omega too; an instance sits on it.
    let repo = f.t.path("repo");
    pyfix::mkproject(
        &f.python_path,
        &repo,
        "widget",
        "0.1",
        r#"["gamma", "omega"]"#,
    );
    let base = git_commit_all(&repo, "widget needs omega", "2021-05-01T00:00:00Z");
    // A later commit that changes no dependency declaration: its install is not run again.
    std::fs::write(repo.join("NEWS.txt"), "news\n").unwrap();
    let base2 = git_commit_all(&repo, "news", "2021-05-03T00:00:00Z");
    f.ok(&["mirror", "update", "acme/widget"]);
    let row = |id: &str, base: &str| {
        serde_json::json!({
            "repo": "acme/widget", "instance_id": id, "base_commit": base,
            "patch": "", "test_patch": "", "problem_statement": "", "hints_text": "",
            "created_at": "2021-05-04T00:00:00Z", "version": "0.8",
            "FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]", "environment_setup_commit": f.commit,
        })
    };
    let file = f.t.path("inst.jsonl");
    std::fs::write(
        &file,
        format!(
            "{}\n{}\n",
            row("acme__widget-1", &base),
            row("acme__widget-2", &base2)
        ),
    )
    .unwrap();
    f.ok(&["import", file.to_str().unwrap()]);
    // No --commit: the instance names its environment setup commit.
    let out = f.expect(&["env", "lock", "acme/widget", "0.8"], 0);
    let said = stderr(&out);
    assert!(
        said.contains(&format!(
            "running the install at base commit {}",
            &base[..12]
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "base commit {} declares its dependencies as {} does",
            &base2[..12],
            &base[..12]
        )),
        "{said}"
    );
    let id = common::last_line(&out.stdout);
    let lock = f.shown_lock(&id);
    let omega = locked_package(&lock, "omega");
    assert_eq!(omega["tool"]["swe-ark"]["role"].as_str(), Some("instance"));
    let mut covered = vec![base.clone(), base2.clone()];
    covered.sort();
    assert_eq!(
        lock["tool"]["swe-ark"]["instance-commits"],
        toml::Value::Array(covered.into_iter().map(toml::Value::String).collect())
    );
    // Not installed in the environment, but the instance's install finds it offline.
    let built: serde_json::Value =
        serde_json::from_str(&f.ok(&["env", "build", &id, "--json"])).unwrap();
    let venv = PathBuf::from(built["venv"].as_str().unwrap());
    assert!(!py(&venv, LIST).contains("omega"));
    let copy = f.t.path("instance-env");
    f.ok(&["env", "build", &id, "--copy-to", copy.to_str().unwrap()]);
    let checkout = f.t.path("checkout");
    git(
        f.t.path("").as_path(),
        &[
            "clone",
            "-q",
            repo.to_str().unwrap(),
            checkout.to_str().unwrap(),
        ],
    );
    git(&checkout, &["checkout", "-q", &base]);
    install_offline(&copy, &checkout, built["wheelhouse"].as_str().unwrap());
    assert_eq!(py(&copy, "import omega; print(omega.VERSION)"), "1.0");
}

/// One published-form instance of acme/widget at `commit`, as a JSONL file.
fn dataset_file(f: &Fixture, version: &str, created_at: &str) -> PathBuf {
    let path = f.t.path("dataset.jsonl");
    let row = serde_json::json!({
        "repo": "acme/widget", "instance_id": "acme__widget-1", "base_commit": f.commit,
        "patch": "", "test_patch": "", "problem_statement": "p", "hints_text": "",
        "created_at": created_at, "version": version, "environment_setup_commit": f.commit,
        "FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]",
    });
    std::fs::write(&path, format!("{row}\n")).unwrap();
    path
}

/// `env lock acme/widget 0.1`: the new lock's id.
fn lock_0_1(f: &Fixture) -> String {
    common::last_line(f.ok(&["env", "lock", "acme/widget", "0.1"]).as_bytes())
}

fn lock_meta(f: &Fixture, id: &str) -> toml::Value {
    let text = f.ok(&["env", "show", id]);
    toml::from_str(&text).unwrap()
}

/// The package `name` of `lock`; a panic, showing the lock, when it has none.
fn locked_package<'a>(lock: &'a toml::Value, name: &str) -> &'a toml::Value {
    lock["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("{name} is not in the lock:\n{lock}"))
}

fn locked_version(lock: &toml::Value, name: &str) -> String {
    locked_package(lock, name)["version"]
        .as_str()
        .unwrap_or_else(|| panic!("{name} has no version in the lock"))
        .to_string()
}

#[test]
fn explicit_pins_pass_the_cutoff_and_unmet_requirements_name_the_rule() {
    let Some(f) = Fixture::new(
        r#"
[versions."0.7"]
pip_packages = ["gamma==1.0", "alpha==2.0"]

[versions."0.8"]
pip_packages = ["alpha>=2.0"]

[versions."0.9"]
pip_packages = ["eta==1.0"]
"#,
    ) else {
        return;
    };
    // alpha 2.0 was uploaded in 2023, after the commit (2021-06-01): pinned, it is admitted,
    // and the lock says so.
    let id = f.lock("0.7", &[]);
    let lock = lock_meta(&f, &id);
    assert_eq!(locked_version(&lock, "alpha"), "2.0");
    let meta = &lock["tool"]["swe-ark"];
    assert_eq!(meta["exclude-newer"].as_str(), Some(COMMIT_DATE));
    assert_eq!(
        meta["exclude-newer-rule"].as_str(),
        Some("the environment setup commit's date")
    );
    let notes: Vec<&str> = meta["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        notes.contains(
            &"alpha==2.0: pinned by the context, uploaded 2023-01-01T00:00:00Z after the cutoff \
              2021-06-01T00:00:00Z; admitted"
        ),
        "{notes:?}"
    );

    // A range only a later release meets: refused, naming the requirement, the release that
    // would meet it, the rule that excluded it and what would admit it.
    let out = f.expect(
        &["env", "lock", "acme/widget", "0.8", "--commit", &f.commit],
        2,
    );
    let e = stderr(&out);
    for needle in [
        "alpha>=2.0",
        "no release uploaded before the cutoff 2021-06-01T00:00:00Z (the environment setup \
         commit's date) satisfies it",
        "alpha-2.0-py3-none-any.whl, was uploaded 2023-01-01T00:00:00Z",
        "`env lock --exclude-newer 2023-01-01T00:00:01Z`",
    ] {
        assert!(e.contains(needle), "{needle}\n{e}");
    }
    // ... which does admit it.
    f.lock("0.8", &["--exclude-newer", "2023-01-01T00:00:01Z"]);

    // A pinned release's own requirement that nothing before the cutoff meets: its earliest
    // release that does (theta 2.0, not the newest, 3.0) is admitted, and noted.
    let id = f.lock("0.9", &[]);
    let lock = lock_meta(&f, &id);
    assert_eq!(locked_version(&lock, "eta"), "1.0");
    assert_eq!(locked_version(&lock, "theta"), "2.0");
    let notes = lock["tool"]["swe-ark"]["notes"].to_string();
    assert!(
        notes.contains(
            "theta==2.0: eta, admitted past the cutoff, requires theta>=2.0, which no release \
             before the cutoff 2021-06-01T00:00:00Z satisfies; its earliest release that does \
             (uploaded 2023-05-01T00:00:00Z) admitted"
        ),
        "{notes}"
    );
}

#[test]
fn a_dataset_date_is_what_locks_resolve_as_of_and_bad_dates_are_refused() {
    let Some(f) = Fixture::new("") else { return };
    let data = dataset_file(&f, "0.1", "2021-05-01T00:00:00Z");
    let data = data.to_str().unwrap();

    // Bad dates are refused before anything enters the archive.
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["import", data, "--environments-as-of", "2999-01-01"],
            &["2999-01-01T00:00:00Z", "is in the future"],
        ),
        (
            &["import", data, "--environments-as-of", "2021-01-01"],
            &[
                "before 1 of its instance(s) were created",
                "acme__widget-1 at 2021-05-01T00:00:00Z",
            ],
        ),
        (
            &["import", data, "--dataset", "my-lab-set"],
            &[
                "unknown dataset `my-lab-set`",
                "swe-bench-verified",
                "--environments-as-of",
            ],
        ),
        (
            &["import", data, "--environments-as-of", "yesterday"],
            &["`yesterday` is not a date"],
        ),
    ];
    for (args, needles) in cases {
        let e = stderr(&f.expect(args, 2));
        for n in *needles {
            assert!(e.contains(n), "swe-ark {args:?}: {e}");
        }
    }
    assert!(!f.ok(&["ls"]).contains("acme__widget-1"));

    // SWE-bench's own files by default: as of when its harness built its environments, so
    // alpha 2.0 (2023) is what unpinned `alpha` resolves to, though the commit is of 2021.
    f.ok(&["import", data]);
    let lock = lock_meta(&f, &lock_0_1(&f));
    assert_eq!(locked_version(&lock, "alpha"), "2.0");
    let meta = &lock["tool"]["swe-ark"];
    assert_eq!(meta["exclude-newer"].as_str(), Some("2024-01-26T00:00:00Z"));
    assert!(
        meta["exclude-newer-rule"]
            .as_str()
            .unwrap()
            .starts_with("dataset swe-bench: "),
        "{meta:?}"
    );

    // A dataset of one's own, dated; --exclude-newer still overrides it.
    let import_my_lab_set = |as_of: &str| {
        f.ok(&[
            "import",
            data,
            "--dataset",
            "my-lab-set",
            "--environments-as-of",
            as_of,
        ])
    };
    import_my_lab_set("2022-01-01");
    let lock = lock_meta(&f, &lock_0_1(&f));
    assert_eq!(locked_version(&lock, "alpha"), "1.0");
    let meta = &lock["tool"]["swe-ark"];
    assert_eq!(meta["exclude-newer"].as_str(), Some("2022-01-01T00:00:00Z"));
    assert_eq!(
        meta["exclude-newer-rule"].as_str(),
        Some("dataset my-lab-set: given with --environments-as-of")
    );
    let id = common::last_line(
        f.ok(&[
            "env",
            "lock",
            "acme/widget",
            "0.1",
            "--exclude-newer",
            "2023-06-01",
        ])
        .as_bytes(),
    );
    assert_eq!(
        lock_meta(&f, &id)["tool"]["swe-ark"]["exclude-newer-rule"].as_str(),
        Some("--exclude-newer")
    );

    // A date after the pull request but before the environment setup commit: refused at lock.
    import_my_lab_set("2021-05-15");
    let e = stderr(&f.expect(&["env", "lock", "acme/widget", "0.1"], 2));
    assert!(
        e.contains("the cutoff 2021-05-15T00:00:00Z (dataset my-lab-set")
            && e.contains("is before the environment setup commit")
            && e.contains("committed 2021-06-01T00:00:00Z"),
        "{e}"
    );
    // `commit`: as of the environment setup commit again.
    f.ok(&["import", data, "--environments-as-of", "commit"]);
    let id = lock_0_1(&f);
    assert_eq!(
        lock_meta(&f, &id)["tool"]["swe-ark"]["exclude-newer"].as_str(),
        Some(COMMIT_DATE)
    );
}

#[test]
fn installers_are_offered_as_of_the_interpreters_first_release() {
    use swe_ark::env::asof;
    use swe_ark::env::proxy::{LockProxy, ProxyConfig};
    let Some((_, python)) = pyfix::python() else {
        eprintln!("skipped: no Python 3.9-3.13 on this machine");
        return;
    };
    let t = common::TestContext::new();
    let dists = t.path("dists");
    pyfix::mkdists(
        &python,
        &dists,
        r#"[
 {"name": "setuptools", "version": "1.0", "kind": "wheel"},
 {"name": "setuptools", "version": "2.0", "kind": "wheel"},
 {"name": "setuptools", "version": "3.0", "kind": "wheel"},
 {"name": "delta", "version": "1.0", "kind": "wheel"},
 {"name": "delta", "version": "2.0", "kind": "wheel"},
 {"name": "setuptools-scm", "version": "8.0.4", "kind": "wheel"},
 {"name": "setuptools-scm", "version": "8.1.0", "kind": "wheel"},
 {"name": "setuptools-scm", "version": "8.2.0", "kind": "wheel"}
]"#,
    );
    let index = PyIndex::start(&dists);
    for (file, when) in [
        ("setuptools-1.0-py3-none-any.whl", "2015-01-01T00:00:00Z"),
        ("setuptools-2.0-py3-none-any.whl", "2019-06-01T00:00:00Z"),
        ("setuptools-3.0-py3-none-any.whl", "2025-01-01T00:00:00Z"),
        ("delta-1.0-py3-none-any.whl", "2015-01-01T00:00:00Z"),
        ("delta-2.0-py3-none-any.whl", "2019-06-01T00:00:00Z"),
        (
            "setuptools_scm-8.0.4-py3-none-any.whl",
            "2023-10-02T15:14:31Z",
        ),
        (
            "setuptools_scm-8.1.0-py3-none-any.whl",
            // As PyPI has it: with a fraction of a second.
            "2024-05-06T15:07:55.281315Z",
        ),
        (
            "setuptools_scm-8.2.0-py3-none-any.whl",
            "2025-02-21T22:48:20Z",
        ),
    ] {
        index.set_upload_time(file, when);
    }
    let proxy = LockProxy::start(ProxyConfig {
        upstream: index.url(),
        exclude_newer: asof::parse_when("2016-01-01"),
        pins: Default::default(),
        installers_as_of: asof::installers_floor("3.9"),
        tool_floors: asof::tool_floors("3.9", asof::parse_when("2016-01-01").unwrap()),
        allow_yanked: false,
        objects: swe_ark::store::ObjectStore::new(t.path("objects")),
    })
    .unwrap();
    let page = |project: &str| {
        reqwest::blocking::get(format!("{}{project}/", proxy.url()))
            .unwrap()
            .text()
            .unwrap()
    };
    let setuptools = page("setuptools");
    assert!(
        setuptools.contains("setuptools-1.0") && setuptools.contains("setuptools-2.0"),
        "{setuptools}"
    );
    assert!(!setuptools.contains("setuptools-3.0"), "{setuptools}");
    let delta = page("delta");
    assert!(
        delta.contains("delta-1.0") && !delta.contains("delta-2.0"),
        "{delta}"
    );
    assert_eq!(
        proxy.admitted(),
        vec![
            "setuptools: offered as of 2020-10-05T00:00:00Z (the interpreter's first release), \
             not the cutoff 2016-01-01T00:00:00Z: older installers do not run on it"
                .to_string()
        ]
    );
    // A cutoff before setuptools-scm 8.0's window: no floor (here, with no release before the
    // cutoff, its earliest one is offered, as for any project).
    assert!(!page("setuptools-scm").contains("setuptools_scm-8.1.0"));

    // A cutoff inside setuptools-scm 8.0's window (2024-01-26, SWE-bench's): before Python 3.11
    // it cannot read today's git dates, so it comes as of its fix, 8.1.0, and no later; on
    // 3.11 the era's release runs, and stays.
    let in_window = asof::parse_when("2024-01-26T00:00:00Z").unwrap();
    let scm_page = |python: &str| {
        let proxy = LockProxy::start(ProxyConfig {
            upstream: index.url(),
            exclude_newer: Some(in_window),
            pins: Default::default(),
            installers_as_of: None,
            tool_floors: asof::tool_floors(python, in_window),
            allow_yanked: false,
            objects: swe_ark::store::ObjectStore::new(t.path("objects")),
        })
        .unwrap();
        let text = reqwest::blocking::get(format!("{}setuptools-scm/", proxy.url()))
            .unwrap()
            .text()
            .unwrap();
        (text, proxy.admitted())
    };
    let (old, admitted) = scm_page("3.9.18");
    assert!(
        old.contains("setuptools_scm-8.0.4")
            && old.contains("setuptools_scm-8.1.0")
            && !old.contains("setuptools_scm-8.2.0"),
        "{old}"
    );
    assert_eq!(admitted.len(), 1, "{admitted:?}");
    assert!(
        admitted[0].starts_with(
            "setuptools-scm: offered as of 2024-05-06T15:08:00Z, not the cutoff \
             2024-01-26T00:00:00Z: setuptools-scm 8.0 reads git's commit dates"
        ),
        "{admitted:?}"
    );
    let (new, admitted) = scm_page("3.11.7");
    assert!(
        new.contains("setuptools_scm-8.0.4") && !new.contains("setuptools_scm-8.1.0"),
        "{new}"
    );
    assert!(admitted.is_empty(), "{admitted:?}");
}

#[test]
fn a_conda_environment_file_is_locked_as_pip_requirements() {
    let extra = "\n[versions.\"0.9\"]\nrequirements = []\npip_packages = []\n\
                 conda_environment = [\"ci/environment.yml\", \"environment.yml\"]\n";
    let Some(f) = Fixture::new(extra) else { return };
    let repo = f.t.path("repo");
    std::fs::write(
        repo.join("environment.yml"),
        "name: widget-tests\nchannels:\n  - conda-forge\ndependencies:\n  - python=3.9\n  \
         - hdf5\n  - omega=1.0   # a test dependency\n  - pip\n  - pip:\n    - delta\n",
    )
    .unwrap();
    let commit = git_commit_all(&repo, "an environment file", "2021-06-02T00:00:00Z");
    f.ok(&["mirror", "update", "acme/widget"]);
    let out = f.expect(
        &["env", "lock", "acme/widget", "0.9", "--commit", &commit],
        0,
    );
    let lock = lock_meta(&f, &common::last_line(&out.stdout));
    assert_eq!(locked_version(&lock, "omega"), "1.0");
    assert_eq!(locked_version(&lock, "delta"), "1.0");
    let meta = &lock["tool"]["swe-ark"];
    assert_eq!(
        meta["context"]["conda-environment"].as_str(),
        Some("environment.yml")
    );
    assert_eq!(
        meta["context"]["conda-mapped"],
        toml::Value::Array(vec!["omega==1.0.*".into(), "delta".into()])
    );
    let notes = meta["notes"].to_string();
    for n in [
        "environment.yml: `python=3.9` left out (the interpreter is the context's)",
        "environment.yml: `hdf5` left out (a C library",
        "environment.yml: `pip` left out",
    ] {
        assert!(notes.contains(n), "{n}\n{notes}");
    }
    // An environment file that is not one: the lock names it and why.
    std::fs::write(repo.join("environment.yml"), "dependencies: 3\n").unwrap();
    let commit = git_commit_all(&repo, "a broken environment file", "2021-06-03T00:00:00Z");
    f.ok(&["mirror", "update", "acme/widget"]);
    let e = stderr(&f.expect(
        &["env", "lock", "acme/widget", "0.9", "--commit", &commit],
        2,
    ));
    assert!(
        e.contains("conda environment file `environment.yml`: `dependencies` is not a list"),
        "{e}"
    );
}

/// The installs of `env lock` run the context's own code (its `install`, its dependencies'
/// builds): confined by the sandbox unless `--unconfined`. Confined, an install that writes
/// outside its work directory leaves nothing there; the lock reaches the index (its proxy), and
/// the offline proof runs with no network at all, so a probe of the index from the install
/// arrives once (the lock's install), not twice. `--unconfined` writes there and reaches the
/// index from both. Where the kernel cannot confine, `env lock` and `env build` refuse up front
/// (exit 2, naming `--unconfined`), leaving no lock.
#[test]
fn the_installs_of_a_lock_are_confined_unless_told_otherwise() {
    let outside = std::env::temp_dir().join(format!("swe-ark-env-outside-{}", std::process::id()));
    std::fs::create_dir_all(&outside).unwrap();
    let escaped = outside.join("escaped");
    // Filled in once the index's port is known: a placeholder the manifest is rewritten from.
    let extra = format!(
        "\n[versions.\"0.7\"]\nrequirements = []\npip_packages = []\n\
         install = '''python -m pip install -e . && {{ python -c \"import urllib.request as u; \
         u.urlopen('INDEX/install-probe/', timeout=5)\" >/dev/null 2>&1; \
         touch '{}' 2>/dev/null; true; }}'''\n",
        escaped.display()
    );
    let Some(f) = Fixture::new(&extra) else {
        let _ = std::fs::remove_dir_all(&outside);
        return;
    };
    let manifest_path = f.t.path("manifests/acme__widget.toml");
    let text = std::fs::read_to_string(&manifest_path).unwrap();
    std::fs::write(&manifest_path, text.replace("INDEX", &f.index.url())).unwrap();
    let probes = || {
        f.index
            .requests()
            .iter()
            .filter(|r| r.contains("/install-probe/"))
            .count()
    };

    let lock_json = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["env", "lock", "acme/widget", "0.7", "--commit", &f.commit];
        args.push("--json");
        args.extend(extra);
        serde_json::from_str(&f.ok(&args)).unwrap()
    };

    let report = lock_json(&[]);
    assert_eq!(report["confinement"], "confined", "{report}");
    assert!(
        !escaped.exists(),
        "a confined install wrote {}",
        escaped.display()
    );
    assert_eq!(
        probes(),
        1,
        "the lock's install reaches the index, the offline proof does not"
    );

    let report = lock_json(&["--unconfined"]);
    assert_eq!(report["confinement"], "unconfined", "{report}");
    assert!(
        escaped.exists(),
        "an unconfined install runs with the caller's rights"
    );
    assert_eq!(
        probes(),
        3,
        "unconfined, the offline proof reached the index too"
    );
    let id = report["id"].as_str().unwrap().to_string();
    let _ = std::fs::remove_dir_all(&outside);

    // Where the kernel cannot confine: refused before any work, naming the flag.
    if !Path::new("/usr/bin/unshare").exists() || !common::can_unshare() {
        eprintln!("skipped the refusal: needs unshare and user namespaces");
        return;
    }
    let locks_before = f.locks_json().len();
    let forbid = "for f in user pid net mnt; do echo 0 > /proc/sys/user/max_${f}_namespaces \
                  || exit 1; done; exec \"$@\"";
    for args in [
        &["env", "lock", "acme/widget", "0.7", "--commit", &f.commit][..],
        &["env", "build", &id, "--force"][..],
    ] {
        let c = f.cmd(args);
        let mut wrapped = Command::new("/usr/bin/unshare");
        wrapped
            .args(["--user", "--map-root-user", "/bin/sh", "-c", forbid, "sh"])
            .arg(c.get_program())
            .args(c.get_args());
        for (k, v) in c.get_envs() {
            if let Some(v) = v {
                wrapped.env(k, v);
            }
        }
        let out = wrapped.output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("confinement is not possible here (") && err.contains("--unconfined"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(
        f.locks_json().len(),
        locks_before,
        "a refused lock leaves no lock"
    );
}
