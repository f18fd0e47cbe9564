//! Running an environment's Python and its installers: a clean process environment (no user
//! configuration, no PYTHON* or PIP* from the caller), captured output, and the list of
//! installed distributions read from site-packages.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::pipseed::{self, PipSeeds};
use super::steps::{StepRunner, last_lines, run};
use super::{EnvError, io_err};

/// The variables a step may see from the caller's environment; everything else is dropped so
/// that a user's pip.conf, PYTHONPATH or proxy settings cannot change what gets locked.
const PASSED_THROUGH: &[&str] = &["HOME", "TMPDIR", "TERM", "USER", "LOGNAME", "SHELL"];

/// A virtual environment at `dir`.
#[derive(Debug, Clone)]
pub struct Venv {
    pub dir: PathBuf,
}

/// One distribution found in site-packages.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct InstalledDist {
    pub name: String,
    pub version: String,
    /// The `.dist-info` / `.egg-info` path.
    pub path: String,
    /// PEP 610 `direct_url.json`'s `url`, when the dist was installed from a URL or a path.
    #[serde(default)]
    pub direct_url: Option<String>,
}

/// Python 3.3+: every distribution in the environment's purelib and platlib.
const LIST_DISTS: &str = r#"
import email.parser, json, os, sys, sysconfig
dirs = []
for k in ("purelib", "platlib"):
    d = sysconfig.get_paths()[k]
    if d not in dirs:
        dirs.append(d)
out = []
for d in dirs:
    if not os.path.isdir(d):
        continue
    for e in sorted(os.listdir(d)):
        p = os.path.join(d, e)
        if e.endswith(".dist-info"):
            meta = os.path.join(p, "METADATA")
        elif e.endswith(".egg-info"):
            meta = os.path.join(p, "PKG-INFO") if os.path.isdir(p) else p
        else:
            continue
        if not os.path.isfile(meta):
            continue
        with open(meta, "rb") as f:
            m = email.parser.BytesParser().parse(f, headersonly=True)
        url = None
        du = os.path.join(p, "direct_url.json")
        if os.path.isfile(du):
            with open(du) as f:
                try:
                    url = json.load(f).get("url")
                except ValueError:
                    url = None
        out.append({"name": m["Name"], "version": m["Version"], "path": p, "direct_url": url})
sys.stdout.write("\n" + "swe-ark-dists: " + json.dumps(out) + "\n")
"#;

/// What starts [`LIST_DISTS`]'s line of output.
const LISTED: &str = "swe-ark-dists: ";

impl Venv {
    /// `python -m venv DIR`, with the interpreter's own pip (as ensurepip installs it,
    /// offline; from a seed of `pip` when there is one, [`pipseed`]) unless `pip` is None.
    pub fn create(
        base_python: &Path,
        dir: &Path,
        pip: Option<&PipSeeds>,
    ) -> Result<Venv, EnvError> {
        run_venv(base_python, dir, &[], "a virtual environment")?;
        let env = Venv {
            dir: dir.to_path_buf(),
        };
        if let Some(seeds) = pip {
            pipseed::install(&env, seeds)?;
        }
        Ok(env)
    }

    /// An environment that is a Python prefix of its own, as a conda environment is, rather
    /// than a virtual environment: `python -m venv --copies` (a real interpreter binary in
    /// `bin/`), the interpreter's standard library and `libpython` copied beside it, and no
    /// `pyvenv.cfg`. Python finds its prefix from where its binary is, so the environment is
    /// the same whichever path starts it — also through a symlink placed elsewhere, which a
    /// virtual environment does not survive (tox-current-env links `sys.executable` into
    /// `.tox/py39/bin/`, and Python started that way would not see the venv's packages).
    /// CPython's own test suite (`test/`) and the interpreter's site-packages are left out.
    /// Its headers (`include/`) are copied too and its build files (`_sysconfigdata`, the
    /// `config-*/Makefile`) name the environment itself: a C extension built in it finds
    /// `Python.h` there, so that nothing of the interpreter's own installation is needed
    /// where the environment is used (an instance's run sees only the environment).
    /// pip (as in [`Venv::create`]) unless `pip` is None.
    pub fn create_prefix(
        base_python: &Path,
        dir: &Path,
        pip: Option<&PipSeeds>,
    ) -> Result<Venv, EnvError> {
        // pip comes last: the copied binary of a shared-library build runs only once its
        // libpython is beside it.
        run_venv(base_python, dir, &["--copies"], "an environment")?;
        // Where the interpreter keeps its standard library and shared library.
        let mut cmd = Command::new(base_python);
        cmd.args([
            "-E",
            "-s",
            "-c",
            // LIBDIR is a build variable: it names the prefix the interpreter was built for,
            // which a packed interpreter no longer is (nor may this user be able to read it),
            // so it is taken relative to the running interpreter's prefix.
            "import platform, sys, sysconfig; print(sysconfig.get_paths()['stdlib']); \
             libdir = sysconfig.get_config_var('LIBDIR') or ''; \
             built = sysconfig.get_config_var('prefix') or ''; \
             base = getattr(sys, 'base_prefix', sys.prefix); \
             print(base + libdir[len(built):] if built and \
             libdir.startswith(built) else libdir); \
             print(sysconfig.get_config_var('LDLIBRARY') or ''); \
             print(platform.python_version()); \
             print(sysconfig.get_paths()['include'])",
        ]);
        clean_env(&mut cmd, None, &BTreeMap::new());
        let out = run(
            &mut cmd,
            "asking the interpreter where its standard library is",
        )?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut lines = text.lines();
        let (stdlib, libdir, ldlibrary, version, include) = (
            PathBuf::from(lines.next().unwrap_or("")),
            lines.next().unwrap_or(""),
            lines.next().unwrap_or(""),
            lines.next().unwrap_or(""),
            PathBuf::from(lines.next().unwrap_or("")),
        );
        let name = stdlib.file_name().ok_or_else(|| EnvError::Command {
            step: "asking the interpreter where its standard library is".into(),
            status: "unreadable output".into(),
            output: text.clone(),
        })?;
        let lib = dir.join("lib");
        copy_tree(
            &stdlib,
            &lib.join(name),
            &|rel: &Path| rel != Path::new("site-packages") && rel != Path::new("test"),
            None,
        )?;
        // A shared-library build whose binary finds libpython next to itself (a packed
        // interpreter's `$ORIGIN/../lib`) needs it in the environment's lib/.
        if ldlibrary.contains(".so") {
            let libdir = Path::new(libdir);
            if let Ok(rd) = std::fs::read_dir(libdir) {
                for e in rd.flatten() {
                    let n = e.file_name();
                    let n = n.to_string_lossy();
                    if n.starts_with("libpython") && n.contains(".so") && !e.path().is_dir() {
                        let to = lib.join(&*n);
                        if !to.exists() {
                            copy_file(&e.path(), &to, std::fs::metadata(e.path()).ok())?;
                        }
                    }
                }
            }
        }
        copy_headers(&include, dir)?;
        super::packed::relocate_build_files(dir, dir)?;
        let cfg = dir.join("pyvenv.cfg");
        std::fs::remove_file(&cfg).map_err(io_err(&cfg))?;
        let env = Venv {
            dir: dir.to_path_buf(),
        };
        env.compile_stdlib(&lib.join(name), version);
        if let Some(seeds) = pip {
            pipseed::install(&env, seeds)?;
        }
        // The proof: the interpreter takes the environment for its prefix, and is the same
        // Python (a libpython missing from lib/ would have the loader take the system's).
        let mut cmd = env.command(&BTreeMap::new());
        cmd.args([
            "-E",
            "-s",
            "-c",
            "import platform, sys; print(sys.prefix); print(platform.python_version())",
        ]);
        let out = run(&mut cmd, "starting the environment's interpreter")?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut lines = text.lines();
        let (prefix, runs_as) = (lines.next().unwrap_or(""), lines.next().unwrap_or(""));
        if runs_as != version {
            return Err(EnvError::Command {
                step: format!("creating an environment in {}", dir.display()),
                status: "wrong interpreter".into(),
                output: format!(
                    "its interpreter runs as Python {runs_as}, not {version} (the Python of {}): \
                     its shared library was not found beside it",
                    base_python.display()
                ),
            });
        }
        let want = std::path::absolute(dir).map_err(io_err(dir))?;
        if Path::new(prefix) != want {
            return Err(EnvError::Command {
                step: format!("creating an environment in {}", dir.display()),
                status: "wrong prefix".into(),
                output: format!(
                    "its interpreter takes {prefix} for its prefix, not {}",
                    want.display()
                ),
            });
        }
        Ok(env)
    }

    pub fn bin(&self) -> PathBuf {
        self.dir.join("bin")
    }

    pub fn python(&self) -> PathBuf {
        self.bin().join("python")
    }

    /// Compiles the standard library copied into the environment, once: a packed
    /// interpreter comes without `__pycache__` (its files are dated by the unpacking), and
    /// what is not compiled here would be compiled by the install into every installed state
    /// and by every run into its private layer. Best effort: the standard library holds files
    /// that are not valid Python (lib2to3's test data), and a failure only costs time later.
    fn compile_stdlib(&self, stdlib: &Path, version: &str) {
        compile_tree(self.command(&BTreeMap::new()), stdlib, version);
    }

    /// A command running this environment's Python with a clean process environment.
    pub fn command(&self, extra: &BTreeMap<String, String>) -> Command {
        let mut cmd = Command::new(self.python());
        clean_env(&mut cmd, Some(self), extra);
        cmd
    }

    /// A shell command (`bash -c`) run in `cwd` with this environment first on PATH.
    pub fn shell(&self, script: &str, cwd: &Path, extra: &BTreeMap<String, String>) -> Command {
        let mut cmd = Command::new("bash");
        cmd.args(["-c", script]).current_dir(cwd);
        clean_env(&mut cmd, Some(self), extra);
        cmd
    }

    /// The distributions in the environment, read by its own interpreter (which runs what
    /// its packages' `.pth` files say: through `steps`).
    pub fn installed(&self, steps: &StepRunner) -> Result<Vec<InstalledDist>, EnvError> {
        let mut cmd = self.command(&BTreeMap::new());
        cmd.args(["-E", "-s", "-c", LIST_DISTS]);
        let out = steps.run(&mut cmd, "listing the installed distributions")?;
        // The last line: a confined run's stderr comes in the same stream.
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix(LISTED))
            .unwrap_or("");
        let mut dists: Vec<InstalledDist> =
            serde_json::from_str(line).map_err(|e| EnvError::Command {
                step: "listing the installed distributions".into(),
                status: "unreadable output".into(),
                output: format!("{e}:\n{}", last_lines(&text, 20).join("\n")),
            })?;
        dists.sort_by_key(|d| d.name.to_lowercase());
        Ok(dists)
    }

    /// pip's version in this environment (`pip 24.0`), or None when it has no pip: from the
    /// name of its one `pip-X.dist-info` in site-packages, else as `pip --version` says (half
    /// a second of starting pip).
    pub fn pip_version(&self, steps: &StepRunner) -> Option<String> {
        if let Some(v) = self.pip_dist_info_version() {
            return Some(format!("pip {v}"));
        }
        let mut cmd = self.command(&BTreeMap::new());
        cmd.args(["-m", "pip", "--version"]);
        let out = steps.run(&mut cmd, "asking pip its version").ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines().rev().find_map(|l| {
            let mut words = l.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some("pip"), Some(v), Some("from")) => Some(format!("pip {v}")),
                _ => None,
            }
        })
    }

    /// The version in the name of the one `lib/python*/site-packages/pip-X.dist-info` of this
    /// environment; None when there is not exactly one.
    fn pip_dist_info_version(&self) -> Option<String> {
        let mut found = Vec::new();
        for lib in std::fs::read_dir(self.dir.join("lib")).ok()?.flatten() {
            let site = lib.path().join("site-packages");
            for e in std::fs::read_dir(site).into_iter().flatten().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(v) = name
                    .strip_prefix("pip-")
                    .and_then(|rest| rest.strip_suffix(".dist-info"))
                {
                    found.push(v.to_string());
                }
            }
        }
        (found.len() == 1).then(|| found.remove(0))
    }
}

/// Replaces the caller's environment with a minimal one: PATH with the venv first, a UTF-8
/// locale, no bytecode-less surprises, then `extra` (the context's variables, installer
/// settings) on top.
pub fn clean_env(cmd: &mut Command, venv: Option<&Venv>, extra: &BTreeMap<String, String>) {
    cmd.env_clear();
    for k in PASSED_THROUGH {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    let system_path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".to_string());
    let path = match venv {
        Some(v) => {
            cmd.env("VIRTUAL_ENV", &v.dir);
            format!("{}:{system_path}", v.bin().display())
        }
        None => system_path,
    };
    cmd.env("PATH", path)
        .env("LANG", "C.UTF-8")
        .env("LC_ALL", "C.UTF-8")
        .env("PYTHONNOUSERSITE", "1")
        .env("PIP_CONFIG_FILE", "/dev/null")
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .env("PIP_NO_INPUT", "1")
        .env("PIP_NO_WARN_SCRIPT_LOCATION", "1")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost");
    for (k, v) in extra {
        cmd.env(k, v);
    }
}

/// The oldest time a wheel (a zip file) can hold: 1980-01-01.
const ZIP_EPOCH: u64 = 315_532_800;

/// What makes a wheel built from an sdist the same bytes on every machine and in every run,
/// as reproducible-builds.org describes it for Python and the build backends honour it: the
/// files' times in the wheel from `SOURCE_DATE_EPOCH` (here the lock's cutoff, an input of
/// the lock), no hash-randomized iteration orders (`PYTHONHASHSEED`), and C extensions built
/// without debug information, which names the temporary directory the build ran in (`-g0`
/// after the interpreter's own `-g`). `context` is the manifest's environment: its flags are
/// kept, ours come after them.
pub fn reproducible_build_env(
    when: std::time::SystemTime,
    context: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let secs = when
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        .max(ZIP_EPOCH);
    let flags = |name: &str| match context.get(name).map(|v| v.trim()) {
        Some(v) if !v.is_empty() => format!("{v} -g0"),
        _ => "-g0".to_string(),
    };
    BTreeMap::from([
        ("SOURCE_DATE_EPOCH".to_string(), secs.to_string()),
        ("PYTHONHASHSEED".to_string(), "0".to_string()),
        ("CFLAGS".to_string(), flags("CFLAGS")),
        ("CXXFLAGS".to_string(), flags("CXXFLAGS")),
    ])
}

/// The interpreter's headers (`include/pythonX.Y`), copied into the environment `dir` when
/// they are the interpreter's own (a system interpreter's, under `/usr`, are the system's and
/// are seen wherever the environment is).
fn copy_headers(include: &Path, dir: &Path) -> Result<(), EnvError> {
    let Some(name) = include.file_name() else {
        return Ok(());
    };
    if !include.is_dir() || include.starts_with("/usr") {
        return Ok(());
    }
    copy_tree(include, &dir.join("include").join(name), &|_| true, None)
}

/// Copies the environment `src` to `dest` (a new directory) for commands that see it at
/// `seen_at` (`dest` itself, or where a run mounts it), rewriting `src`'s path to it in the
/// text files that name it: those of `bin/` (console scripts carry their interpreter's
/// absolute path in their shebang), `pyvenv.cfg`, and the build files (`_sysconfigdata`,
/// `config-*/Makefile`) of an environment that is a prefix of its own.
pub fn copy_venv(src: &Path, dest: &Path, seen_at: &Path) -> Result<(), EnvError> {
    copy_venv_named(src, src, dest, seen_at)
}

/// [`copy_venv`] of an environment whose files name it `named`: the path it was made at,
/// which is `src` or leads to it.
pub fn copy_venv_named(
    src: &Path,
    named: &Path,
    dest: &Path,
    seen_at: &Path,
) -> Result<(), EnvError> {
    let old = named.to_string_lossy().into_owned();
    let new = seen_at.to_string_lossy().into_owned();
    copy_tree(
        src,
        dest,
        &|_| true,
        Some(&Rewrite {
            applies: &names_its_place,
            old: &old,
            new: &new,
        }),
    )
}

/// Whether the file at `rel` in an environment names the environment's own path.
fn names_its_place(rel: &Path) -> bool {
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    match parts
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["bin", _] | ["pyvenv.cfg"] => true,
        ["lib", py, name] => {
            py.starts_with("python") && name.starts_with("_sysconfigdata") && name.ends_with(".py")
        }
        ["lib", py, config, "Makefile"] => {
            py.starts_with("python") && config.starts_with("config-")
        }
        _ => false,
    }
}

/// In the files `applies` names (by their path relative to the tree), `old` becomes `new`.
struct Rewrite<'a> {
    applies: &'a dyn Fn(&Path) -> bool,
    old: &'a str,
    new: &'a str,
}

/// Copies the tree `src` to `dest` (created), leaving out the paths (relative to `src`) that
/// `keep` refuses, and what is below them; the text files `rewrite` names are rewritten.
fn copy_tree(
    src: &Path,
    dest: &Path,
    keep: &dyn Fn(&Path) -> bool,
    rewrite: Option<&Rewrite>,
) -> Result<(), EnvError> {
    let mut stack = vec![PathBuf::new()];
    std::fs::create_dir_all(dest).map_err(io_err(dest))?;
    while let Some(rel) = stack.pop() {
        let dir = src.join(&rel);
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .map_err(io_err(&dir))?
            .collect::<Result<_, _>>()
            .map_err(io_err(&dir))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let r = rel.join(e.file_name());
            if !keep(&r) {
                continue;
            }
            let (from, to) = (src.join(&r), dest.join(&r));
            let ft = e.file_type().map_err(io_err(&from))?;
            if ft.is_symlink() {
                let target = std::fs::read_link(&from).map_err(io_err(&from))?;
                std::os::unix::fs::symlink(&target, &to).map_err(io_err(&to))?;
            } else if ft.is_dir() {
                std::fs::create_dir_all(&to).map_err(io_err(&to))?;
                stack.push(r);
            } else if let Some(rw) = rewrite.filter(|rw| (rw.applies)(&r)) {
                let bytes = std::fs::read(&from).map_err(io_err(&from))?;
                let perms = std::fs::metadata(&from)
                    .map_err(io_err(&from))?
                    .permissions();
                let bytes = match std::str::from_utf8(&bytes) {
                    Ok(text) if text.contains(rw.old) => text.replace(rw.old, rw.new).into_bytes(),
                    _ => bytes,
                };
                std::fs::write(&to, bytes).map_err(io_err(&to))?;
                std::fs::set_permissions(&to, perms).map_err(io_err(&to))?;
            } else {
                copy_file(&from, &to, e.metadata().ok())?;
            }
        }
    }
    Ok(())
}

/// Copies one file, keeping its permissions and modification time ([`crate::fsutil::copy_file`]).
fn copy_file(from: &Path, to: &Path, meta: Option<std::fs::Metadata>) -> Result<(), EnvError> {
    crate::fsutil::copy_file(from, to, meta).map_err(io_err(to))
}

/// `python -m venv --without-pip [EXTRA] DIR` in a clean environment (pip, when wanted,
/// comes after: [`pipseed`]).
fn run_venv(base_python: &Path, dir: &Path, extra: &[&str], what: &str) -> Result<(), EnvError> {
    let mut cmd = Command::new(base_python);
    cmd.args(["-E", "-s", "-m", "venv"])
        .args(extra)
        .arg("--without-pip")
        .arg(dir);
    clean_env(&mut cmd, None, &BTreeMap::new());
    run(&mut cmd, &format!("creating {what} in {}", dir.display())).map(|_| ())
}

/// Runs `python` (a command of the interpreter, its environment set) as `compileall` over
/// `dir`; best effort, what fails is only logged. In parallel where the version can and the
/// tree is not compiled yet (no `__pycache__` at its top): over a compiled tree, `compileall`
/// only compares each file with its `.pyc`, and its worker processes would cost more than
/// that (0.4 s against 0.1 s for a standard library).
pub(super) fn compile_tree(mut python: Command, dir: &Path, version: &str) {
    python.args(["-E", "-s", "-m", "compileall", "-q"]);
    let compiled =
        std::fs::read_dir(dir.join("__pycache__")).is_ok_and(|mut rd| rd.next().is_some());
    if !version.starts_with("2.") && !compiled {
        python.arg("-j0");
    }
    python.arg(dir);
    match python.output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => tracing::debug!(
            "compiling {}: {} ({} bytes of output)",
            dir.display(),
            out.status,
            out.stdout.len() + out.stderr.len()
        ),
        Err(e) => tracing::warn!("cannot compile {}: {e}", dir.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// pip's version is read from its one `.dist-info`; with none, or two, nothing is read.
    #[test]
    fn pip_version_comes_from_its_one_dist_info() {
        let dir = tempfile::tempdir().unwrap();
        let env = Venv {
            dir: dir.path().to_path_buf(),
        };
        let site = dir.path().join("lib/python3.11/site-packages");
        std::fs::create_dir_all(site.join("pip_tools-7.0.dist-info")).unwrap();
        assert_eq!(env.pip_dist_info_version(), None);
        std::fs::create_dir_all(site.join("pip-23.2.1.dist-info")).unwrap();
        assert_eq!(env.pip_dist_info_version().as_deref(), Some("23.2.1"));
        std::fs::create_dir_all(site.join("pip-24.0.dist-info")).unwrap();
        assert_eq!(env.pip_dist_info_version(), None);
    }
}
