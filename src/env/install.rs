//! Putting locked wheels into an environment with no index and no dependency resolution: the
//! installer (uv when it can serve the interpreter, pip otherwise) and the install itself,
//! shared by the tests' environment (`build`) and the services' (`services`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::EnvError;
use super::steps::StepRunner;
use super::venv::{self, Venv};

/// Which installer puts the locked wheels in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Installer {
    /// uv when it is present and supports the interpreter (3.8+), pip otherwise.
    #[default]
    Auto,
    Uv,
    Pip,
}

/// The uv executable: `SWE_ARK_UV`, else `uv` on PATH.
pub fn find_uv() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SWE_ARK_UV") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("uv"))
        .find(|p| p.is_file())
}

fn uv_supports(python_version: &str) -> bool {
    let mut parts = python_version
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (3, 8)
}

/// The installer to use, or why the one asked for cannot be.
pub(super) fn choose_installer(
    asked: Installer,
    python_version: &str,
) -> Result<(Installer, Option<PathBuf>), EnvError> {
    let uv = find_uv();
    match asked {
        Installer::Pip => Ok((Installer::Pip, None)),
        Installer::Uv => match uv {
            None => Err(EnvError::NoInstaller(
                "uv".into(),
                "set SWE_ARK_UV or put uv on PATH (`make tools` installs a pinned one in \
                 .tools/bin)"
                    .into(),
            )),
            Some(_) if !uv_supports(python_version) => Err(EnvError::NoInstaller(
                "uv".into(),
                format!("uv does not install into Python {python_version}; use pip"),
            )),
            Some(p) => Ok((Installer::Uv, Some(p))),
        },
        Installer::Auto => match uv {
            Some(p) if uv_supports(python_version) => Ok((Installer::Uv, Some(p))),
            _ => Ok((Installer::Pip, None)),
        },
    }
}

/// Installs the wheels at `files` into `venv` with no index and no dependency resolution,
/// through `steps`, which must let it write `venv` and `uv_cache` and read `files`.
pub(super) fn install_wheels(
    steps: &StepRunner,
    venv: &Venv,
    installer: Installer,
    uv: Option<&Path>,
    uv_cache: &Path,
    files: &[PathBuf],
) -> Result<(), EnvError> {
    if files.is_empty() {
        return Ok(());
    }
    let mut cmd = match (installer, uv) {
        (Installer::Uv, Some(uv)) => {
            let mut c = Command::new(uv);
            let mut extra = BTreeMap::new();
            extra.insert("UV_CACHE_DIR".to_string(), uv_cache.display().to_string());
            extra.insert("UV_NO_CONFIG".to_string(), "1".to_string());
            venv::clean_env(&mut c, Some(venv), &extra);
            c.args(["pip", "install", "--quiet", "--python"])
                .arg(venv.python())
                .args(["--offline", "--no-index", "--no-deps", "--no-build"])
                // Compiled once here, not in every instance's copy (pip compiles too).
                .args(["--link-mode", "copy", "--compile-bytecode"]);
            c
        }
        _ => {
            let mut c = venv.command(&BTreeMap::new());
            c.args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-index",
                "--no-deps",
                "--no-cache-dir",
            ]);
            c
        }
    };
    cmd.args(files);
    steps.run(&mut cmd, "installing the locked wheels")?;
    forget_file_urls(venv, files)
}

/// Removes what says the distributions came from `files` (`direct_url.json`, PEP 610, and its
/// line in RECORD): it names the wheelhouse where the environment was built, a place of the
/// archive that no run sees and that is not where a copy of the archive is. Without it they
/// read as installed from an index, which is what the lock's artifacts are (`pip freeze`
/// then says `name==version`, as in SWE-bench's environments).
fn forget_file_urls(venv: &Venv, files: &[PathBuf]) -> Result<(), EnvError> {
    let lib = venv.dir.join("lib");
    let Ok(pythons) = std::fs::read_dir(&lib) else {
        return Ok(());
    };
    for site in pythons.flatten().map(|e| e.path().join("site-packages")) {
        let Ok(entries) = std::fs::read_dir(&site) else {
            continue;
        };
        for info in entries.flatten().map(|e| e.path()) {
            let url = info.join("direct_url.json");
            let named = std::fs::read(&url)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .and_then(|v| v["url"].as_str().map(str::to_string))
                .and_then(|u| u.strip_prefix("file://").map(super::proxy::percent_decode));
            if !named.is_some_and(|path| files.iter().any(|f| Path::new(&path) == f)) {
                continue;
            }
            std::fs::remove_file(&url).map_err(super::io_err(&url))?;
            let record = info.join("RECORD");
            let Ok(text) = std::fs::read_to_string(&record) else {
                continue;
            };
            let name = info
                .file_name()
                .map(|n| format!("{}/direct_url.json,", n.to_string_lossy()))
                .unwrap_or_default();
            let kept: String = text
                .split_inclusive('\n')
                .filter(|line| !line.starts_with(&name))
                .collect();
            crate::fsutil::write_atomic(&record, kept.as_bytes())
                .map_err(super::io_err(&record))?;
        }
    }
    Ok(())
}
