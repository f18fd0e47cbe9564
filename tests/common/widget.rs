//! The `acme/widget` fixture that the validation and release tests share: a small Python
//! project in a git repository made by code (one commit, fixed dates), its executable context
//! in a manifests folder of its own, a package index on 127.0.0.1 serving a build backend
//! and pytest (the wheels `make test` fetched), patches and instances built on its commit,
//! and the way to run swe-ark as on a machine with no network.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::pyindex::PyIndex;
use super::{TestContext, git_init_commit, pyfix, stderr, stdout};

pub const BASE_DATE: &str = "2021-06-01T00:00:00Z";

pub const CORE: &str = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n";
pub const TESTS: &str =
    "from widget.core import sub\n\n\ndef test_sub():\n    assert sub(3, 1) == 2\n";

pub const GOLD: &str = "diff --git a/widget/core.py b/widget/core.py\n--- a/widget/core.py\n+++ b/widget/core.py\n\
@@ -1,5 +1,5 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n \n \n def sub(a, b):\n";

/// A test that the gold patch makes pass.
pub const ADD_TEST: &str =
    "\n\ndef test_add():\n    from widget.core import add\n    assert add(1, 2) == 3\n";

/// A diff that appends `body` to tests/test_core.py (as it is at the base commit).
pub fn test_patch(body: &str) -> String {
    let added: String = body.lines().map(|l| format!("+{l}\n")).collect();
    let n = body.lines().count();
    format!(
        "diff --git a/tests/test_core.py b/tests/test_core.py\n\
         --- a/tests/test_core.py\n+++ b/tests/test_core.py\n\
         @@ -3,3 +3,{} @@ from widget.core import sub\n \n def test_sub():\n     assert sub(3, 1) == 2\n{added}",
        3 + n
    )
}

/// Instance `acme__widget-<n>` at `commit`, with its test lists as JSON strings.
pub fn instance(
    n: u32,
    test_patch: &str,
    patch: &str,
    f2p: &[&str],
    p2p: &[&str],
    commit: &str,
) -> serde_json::Value {
    serde_json::json!({
        "repo": "acme/widget",
        "instance_id": format!("acme__widget-{n}"),
        "base_commit": commit,
        "patch": patch,
        "test_patch": test_patch,
        "problem_statement": format!("issue {n}"),
        "hints_text": "",
        "created_at": "2021-07-01T00:00:00Z",
        "version": "1.0",
        "FAIL_TO_PASS": serde_json::to_string(f2p).unwrap(),
        "PASS_TO_PASS": serde_json::to_string(p2p).unwrap(),
        "environment_setup_commit": commit,
    })
}

/// Where [`Widget::set_versions`] adds its tables.
const MORE_VERSIONS: &str = "\n# more versions\n";

/// The fixture, ready to mirror, lock and validate.
pub struct Widget {
    /// The interpreter's major.minor and path.
    pub version: String,
    pub python: PathBuf,
    pub index: PyIndex,
    /// The upstream repository and its one commit.
    pub repo: PathBuf,
    pub base: String,
    /// The manifests folder (`SWE_ARK_MANIFESTS`).
    pub manifests: PathBuf,
}

impl Widget {
    /// Makes the fixture under `t`; `None` (saying why) where the machine has no Python
    /// 3.9-3.13 or the wheels are not fetched.
    pub fn new(t: &TestContext) -> Option<Widget> {
        let Some((version, python)) = pyfix::python() else {
            eprintln!("skipped: no Python 3.9-3.13 on this machine");
            return None;
        };
        let Some(wheels) = pyfix::test_wheels() else {
            eprintln!("skipped: no pytest wheels in .tools/test-wheels (`make test` fetches them)");
            return None;
        };
        let dists = t.path("dists");
        pyfix::mkdists(
            &python,
            &dists,
            r#"[{"name": "tinybuild", "version": "1.0", "kind": "wheel", "backend": true}]"#,
        );
        for e in std::fs::read_dir(&wheels).unwrap().flatten() {
            std::fs::copy(e.path(), dists.join(e.file_name())).unwrap();
        }
        let index = PyIndex::start(&dists);

        let repo = t.path("repo");
        pyfix::mkproject(&python, &repo, "widget", "1.0", "[]");
        std::fs::write(repo.join("widget/core.py"), CORE).unwrap();
        std::fs::create_dir_all(repo.join("tests")).unwrap();
        std::fs::write(repo.join("tests/test_core.py"), TESTS).unwrap();
        let base = git_init_commit(&repo, "widget 1.0", BASE_DATE);

        let manifests = t.widget_manifests(&format!(
            "repo = \"acme/widget\"\nsource = \"tests/common/widget.rs\"\nlog_parser = \"pytest\"\n\n\
             [defaults]\npython = \"{version}\"\npip_packages = [\"pytest\"]\n\
             install = \"python -m pip install -e .\"\ntest_cmd = \"pytest -rA\"\n\n\
             [[defaults.services]]\nname = \"web\"\n\
             command = [\"python\", \"-m\", \"http.server\", \"{{port}}\", \"--bind\", \"127.0.0.1\"]\n\
             env_var = \"WEB_URL\"\n\n[versions.\"1.0\"]\n"
        ));
        Some(Widget {
            version,
            python,
            index,
            repo,
            base,
            manifests,
        })
    }

    /// `swe-ark` on `t`'s archive with the fixture's manifests and index.
    pub fn cmd(&self, t: &TestContext) -> Command {
        self.cmd_at(t, &t.ark())
    }

    /// [`Widget::cmd`] on another archive directory.
    pub fn cmd_at(&self, t: &TestContext, ark: &Path) -> Command {
        let mut c = t.cmd_at(ark);
        c.env("SWE_ARK_MANIFESTS", &self.manifests)
            .env("SWE_ARK_INDEX_URL", self.index.url());
        c
    }

    /// Runs [`Widget::cmd_at`] with `args`, whatever its exit code.
    pub fn run_at(&self, t: &TestContext, ark: &Path, args: &[&str]) -> Output {
        self.cmd_at(t, ark).args(args).output().unwrap()
    }

    /// Runs [`Widget::cmd`] with `args`, whatever its exit code.
    pub fn run(&self, t: &TestContext, args: &[&str]) -> Output {
        self.cmd(t).args(args).output().unwrap()
    }

    /// Mirrors the widget's repository as acme/widget.
    pub fn add_mirror(&self, t: &TestContext) {
        self.ok(
            t,
            &[
                "mirror",
                "add",
                self.repo.to_str().unwrap(),
                "--name",
                "acme/widget",
            ],
        );
    }

    /// Runs [`Widget::cmd`] with `args`; it must succeed; its stdout.
    pub fn ok(&self, t: &TestContext, args: &[&str]) -> String {
        let out = self.run(t, args);
        assert!(
            out.status.success(),
            "swe-ark {args:?}\n{}\n{}",
            stdout(&out),
            stderr(&out)
        );
        stdout(&out)
    }

    /// Gives the manifest more versions than 1.0 (more contexts): `tables` is TOML,
    /// `[versions."X"]` tables, which replace any added before.
    pub fn set_versions(&self, tables: &str) {
        let path = self.manifests.join("acme__widget.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let base = text.split(MORE_VERSIONS).next().unwrap().to_string();
        std::fs::write(&path, format!("{base}{MORE_VERSIONS}{tables}")).unwrap();
    }

    /// Mirrors the repository, locks its context and imports `instances`.
    pub fn mirror_lock_import(&self, t: &TestContext, instances: &[serde_json::Value]) {
        self.add_mirror(t);
        self.ok(
            t,
            &["env", "lock", "acme/widget", "1.0", "--commit", &self.base],
        );
        let data: String = instances.iter().map(|i| format!("{i}\n")).collect();
        let file = t.path("instances.jsonl");
        std::fs::write(&file, data).unwrap();
        self.ok(t, &["import", file.to_str().unwrap()]);
    }
}

/// `swe-ark --no-progress` as on a machine cut off from every network: under `unshare -n`,
/// with no variables but `HOME` and a `PATH` that finds `python` (and `PYENV_ROOT` when
/// it is pyenv's), so nothing of this machine's configuration reaches it.
pub fn offline_swe_ark(python: &Path, home: &Path) -> Command {
    let python_dir = python.parent().unwrap();
    let mut c = Command::new("unshare");
    c.args(["-n", "--"])
        .arg(env!("CARGO_BIN_EXE_swe-ark"))
        .arg("--no-progress")
        .env_clear()
        .env("HOME", home)
        .env("PATH", format!("{}:/usr/bin:/bin", python_dir.display()));
    if let Some(root) = python
        .ancestors()
        .nth(4)
        .filter(|r| r.join("versions").is_dir())
    {
        c.env("PYENV_ROOT", root);
    }
    c
}
