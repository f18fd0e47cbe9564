//! Finding the interpreter an executable context asks for: an exact major.minor, looked for in
//! an explicit path, pyenv's versions, `pythonX.Y` on PATH and uv-managed Pythons, and recorded
//! with its exact version, implementation, platform and the hash of its executable.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::digest::{Sha256Digest, Sha256Hasher};

#[derive(Debug, thiserror::Error)]
pub enum PythonError {
    #[error(
        "no Python {version} on this machine (looked in: {}); install it (`pyenv install {version}` \
         or `uv python install {version}`) or pass --python PATH",
        .searched.join("; ")
    )]
    NotFound {
        version: String,
        searched: Vec<String>,
    },
    #[error("`{path}` is Python {found}, not {wanted}")]
    WrongVersion {
        path: PathBuf,
        found: String,
        wanted: String,
    },
    #[error("`{path}` does not run as a Python interpreter: {detail}")]
    NotPython { path: PathBuf, detail: String },
}

/// An interpreter, as a lock records it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Interpreter {
    /// The executable, symlinks resolved.
    pub path: PathBuf,
    /// The exact version, e.g. `3.9.18`.
    pub version: String,
    /// `cpython`, `pypy`, …
    pub implementation: String,
    /// `sysconfig.get_platform()`, e.g. `linux-x86_64`.
    pub platform: String,
    /// `sys.base_prefix`: the installation a packed copy would take.
    pub prefix: PathBuf,
    /// The sha256 of the executable file.
    pub sha256: Sha256Digest,
}

/// The installation the interpreter executable `exe` belongs to (`<prefix>/bin/python3.9`'s
/// prefix, links resolved): what a confined command that runs it must see.
pub fn prefix_of(exe: &Path) -> PathBuf {
    let real = std::fs::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf());
    real.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or(real)
}

/// Works on every Python from 2.7 on: what the lock needs to know, as one JSON line.
const PROBE: &str = "import json, platform, sys, sysconfig; \
    sys.stdout.write(json.dumps({'version': platform.python_version(), \
    'implementation': platform.python_implementation().lower(), \
    'platform': sysconfig.get_platform(), \
    'prefix': getattr(sys, 'base_prefix', sys.prefix)}))";

fn probe(path: &Path) -> Result<Interpreter, PythonError> {
    let not_python = |detail: String| PythonError::NotPython {
        path: path.to_path_buf(),
        detail,
    };
    let real = std::fs::canonicalize(path).map_err(|e| not_python(e.to_string()))?;
    // -E -s (rather than 3.4's -I) so that Python 2.7 takes the same flags: no PYTHON*
    // variables, no user site-packages.
    let out = Command::new(&real)
        .args(["-E", "-s", "-c", PROBE])
        .output()
        .map_err(|e| not_python(e.to_string()))?;
    if !out.status.success() {
        return Err(not_python(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| not_python(e.to_string()))?;
    let field = |k: &str| {
        v.get(k)
            .and_then(|x| x.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let bytes = std::fs::read(&real).map_err(|e| not_python(e.to_string()))?;
    let mut h = Sha256Hasher::new();
    h.update(&bytes);
    Ok(Interpreter {
        path: real,
        version: field("version"),
        implementation: field("implementation"),
        platform: field("platform"),
        prefix: PathBuf::from(field("prefix")),
        sha256: h.finish(),
    })
}

fn major_minor(version: &str) -> String {
    version.split('.').take(2).collect::<Vec<_>>().join(".")
}

/// `3.9.18` > `3.9.2`: patch levels compare as numbers.
fn patch_of(name: &str) -> Vec<u64> {
    name.split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// `bin/EXE` of each installation in `dir` whose name `matches`, the newest patch release
/// first; none when `dir` cannot be read.
fn newest_first(dir: &Path, exe: &str, matches: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<(Vec<u64>, PathBuf)> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            matches(&name).then(|| (patch_of(&name), e.path().join("bin").join(exe)))
        })
        .collect();
    dirs.sort();
    dirs.into_iter().rev().map(|(_, p)| p).collect()
}

/// The places to look, best first, for Python `wanted` (major.minor).
fn candidates(wanted: &str) -> (Vec<PathBuf>, Vec<String>) {
    let exe = format!("python{wanted}");
    let mut found = Vec::new();
    let mut searched = Vec::new();
    // pyenv: the newest patch release of the version.
    let pyenv_root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")));
    if let Some(root) = pyenv_root {
        let versions = root.join("versions");
        searched.push(versions.display().to_string());
        found.extend(newest_first(&versions, &exe, |name| {
            name == wanted || name.starts_with(&format!("{wanted}."))
        }));
    }
    // PATH, leaving out pyenv's shims (they run whatever version pyenv selects).
    if let Some(path) = std::env::var_os("PATH") {
        searched.push(format!("{exe} on PATH"));
        for dir in std::env::split_paths(&path) {
            if dir.ends_with("shims") {
                continue;
            }
            found.push(dir.join(&exe));
        }
    }
    // uv-managed Pythons.
    if let Some(home) = std::env::var_os("HOME") {
        let uv = PathBuf::from(home).join(".local/share/uv/python");
        searched.push(uv.display().to_string());
        found.extend(newest_first(&uv, &exe, |name| {
            name.starts_with(&format!("cpython-{wanted}."))
        }));
    }
    (found, searched)
}

/// The interpreter for Python `wanted` (major.minor): `explicit` if given (it must be that
/// version), else the first that runs among pyenv's versions, `pythonX.Y` on PATH and uv's.
pub fn find(wanted: &str, explicit: Option<&Path>) -> Result<Interpreter, PythonError> {
    if let Some(path) = explicit {
        let i = probe(path)?;
        if major_minor(&i.version) != wanted {
            return Err(PythonError::WrongVersion {
                path: path.to_path_buf(),
                found: i.version,
                wanted: wanted.to_string(),
            });
        }
        return Ok(i);
    }
    let (paths, searched) = candidates(wanted);
    for p in paths {
        if !p.is_file() {
            continue;
        }
        if let Ok(i) = probe(&p)
            && major_minor(&i.version) == wanted
        {
            return Ok(i);
        }
    }
    Err(PythonError::NotFound {
        version: wanted.to_string(),
        searched,
    })
}

/// The interpreter of exactly `version` (e.g. `3.11.7`): the first among the places [`find`]
/// looks whose version is that one.
pub fn find_exact(version: &str) -> Result<Interpreter, PythonError> {
    let wanted = major_minor(version);
    let (paths, searched) = candidates(&wanted);
    for p in paths {
        if !p.is_file() {
            continue;
        }
        if let Ok(i) = probe(&p)
            && i.version == version
        {
            return Ok(i);
        }
    }
    Err(PythonError::NotFound {
        version: version.to_string(),
        searched,
    })
}

/// Probes the interpreter at `path` (which may be a packed copy in a new place).
pub fn probe_path(path: &Path) -> Result<Interpreter, PythonError> {
    probe(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_installed_version_and_says_where_it_looked_for_a_missing_one() {
        let mut any = false;
        for wanted in ["2.7", "3.6", "3.9", "3.11", "3.13"] {
            match find(wanted, None) {
                Ok(i) => {
                    any = true;
                    assert_eq!(major_minor(&i.version), wanted, "{i:?}");
                    assert_eq!(i.implementation, "cpython");
                    assert!(i.platform.starts_with("linux"), "{}", i.platform);
                    assert!(i.prefix.is_dir(), "{}", i.prefix.display());
                    // The explicit path gives the same record.
                    assert_eq!(find(wanted, Some(&i.path)).unwrap(), i);
                }
                Err(e) => eprintln!("skipped Python {wanted}: {e}"),
            }
        }
        if !any {
            eprintln!("skipped: no Python found at all");
        }
        let e = find("3.99", None).unwrap_err().to_string();
        assert!(
            e.contains("no Python 3.99") && e.contains("pyenv install 3.99"),
            "{e}"
        );
    }

    #[test]
    fn an_explicit_interpreter_of_another_version_is_refused() {
        let Ok(i) = find("3.11", None) else {
            eprintln!("skipped: no Python 3.11");
            return;
        };
        let e = find("3.9", Some(&i.path)).unwrap_err().to_string();
        assert!(e.contains("not 3.9"), "{e}");
        let e = find("3.9", Some(Path::new("/bin/sh")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not run as a Python"), "{e}");
    }
}
