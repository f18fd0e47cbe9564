//! Python fixtures shared by the environment and validation tests: the interpreter they use,
//! distributions and projects made by tests/fixtures/mkdists.py, and the cache of real wheels
//! (pytest and its dependencies) that `make test` downloads before the tests run.

use std::path::{Path, PathBuf};
use std::process::Command;

/// An interpreter whose own pip does PEP 517 and 660 builds: (major.minor, path).
pub fn python() -> Option<(String, PathBuf)> {
    for v in ["3.11", "3.12", "3.10", "3.9", "3.13"] {
        if let Ok(i) = swe_ark::env::python::find(v, None) {
            return Some((v.to_string(), i.path));
        }
    }
    None
}

fn mkdists_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mkdists.py")
}

fn run(c: &mut Command) {
    let out = c.output().expect("mkdists.py runs");
    assert!(
        out.status.success(),
        "{c:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes the distributions `spec` (mkdists.py's JSON list) into `out`.
pub fn mkdists(python: &Path, out: &Path, spec: &str) {
    std::fs::create_dir_all(out).unwrap();
    let spec_file = out.with_extension("spec.json");
    std::fs::write(&spec_file, spec).unwrap();
    run(Command::new(python)
        .arg(mkdists_py())
        .arg(out)
        .arg(&spec_file));
}

/// Writes a project built with the `tinybuild` backend into `dir`.
pub fn mkproject(python: &Path, dir: &Path, name: &str, version: &str, deps_json: &str) {
    run(Command::new(python)
        .arg(mkdists_py())
        .arg("--project")
        .arg(dir)
        .args([name, version, deps_json]));
}

/// The real wheels `make test` fetched from PyPI (pytest and what it needs), or None.
pub fn test_wheels() -> Option<PathBuf> {
    let dir = std::env::var_os("SWE_ARK_TEST_WHEELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/test-wheels"));
    let has_pytest = std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("pytest-"));
    has_pytest.then_some(dir)
}
