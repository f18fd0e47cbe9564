//! pip as `ensurepip` installs it, kept once per interpreter and copied into each later
//! environment of that interpreter.
//!
//! ensurepip unpacks pip (and setuptools, before Python 3.12) from the wheels bundled with the
//! interpreter and byte-compiles every module, at every call: 4–6 s of CPU, two or three
//! times in every lock (the resolution's virtual environment, the services' installer, the
//! built environment). What it writes depends on nothing but the interpreter (its version and
//! bytecode tag), the bundled wheels, the layout of the environment (where site-packages and
//! the scripts are) and the path of the environment's Python, which only the scripts in
//! `bin/` name: in their `#!` line, and so in the RECORD lines that hash them.
//!
//! So the first ensurepip of a kind is run for real and what it added is kept in a *seed*,
//! `<seeds>/<key>/`, the key hashing all of the above but the path. Later environments get a
//! copy: every file keeps its mode and time (a `.pyc` stays valid for its source), each script
//! gets the `#!` line pip would have written for its own environment (distlib's rule: the
//! interpreter's path, or a `/bin/sh` trampoline when the path is long or has a space), and
//! its RECORD lines are hashed again. A compiled module keeps the path it was compiled at in
//! its code objects; Python replaces it with the module's own path as it imports it
//! (`_imp._fix_co_filename`), so tracebacks name the right files.
//!
//! A seed is kept only when the capture proves the copy exact: ensurepip added files only in
//! site-packages and the scripts directory, changed none, and wrote each script's `#!` line
//! as the rule says. Otherwise (or for an interpreter whose ensurepip takes its wheels from
//! elsewhere, `WHEEL_PKG_DIR`) ensurepip runs every time, as before. A seed that cannot be
//! copied is removed and ensurepip runs instead: the seeds are a cache, safe to delete.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use base64::Engine as _;

use super::steps::run;
use super::venv::Venv;
use super::{EnvError, io_err};
use crate::digest::Sha256Digest;

/// What a seed's key and `seed.json` say about their own format (2: the scripts name
/// [`SEED_EXECUTABLE`], not the environment the seed was taken from).
const SEED_FORMAT: u32 = 2;
/// The interpreter a seed's scripts name in their `#!` line: no place of any machine or
/// archive (a seed is copied, moved and shared with its archive), replaced by the
/// environment's own Python when the seed is copied into it.
const SEED_EXECUTABLE: &str = "/swe-ark-pip-seed/bin/python";
/// The file in a seed that describes it; written last, so a seed without it is incomplete.
const SEED_JSON: &str = "seed.json";
/// Where a seed keeps the files ensurepip added, at their paths in the environment.
const SEED_TREE: &str = "tree";

/// Where ensurepip's results are kept: the archive's `cache/pip-seeds/`, or `pip-seeds/` in
/// the cache several archives share ([`super::shared_cache`]; the test suite's do).
#[derive(Debug, Clone)]
pub struct PipSeeds {
    dir: PathBuf,
}

impl PipSeeds {
    /// The seeds of the archive at `root`, or of the shared cache when there is one.
    pub fn for_ark(root: &Path) -> PipSeeds {
        match super::shared_cache(super::Shared::PipSeeds) {
            Some(dir) => PipSeeds::at(dir),
            None => PipSeeds::at(crate::store::Layout::new(root).pip_seeds()),
        }
    }

    pub fn at(dir: PathBuf) -> PipSeeds {
        PipSeeds { dir }
    }
}

/// What the environment's interpreter says about itself and its ensurepip.
#[derive(Debug, serde::Deserialize)]
struct Probe {
    executable: String,
    prefix: String,
    purelib: String,
    scripts: String,
    version: String,
    tag: String,
    platform: String,
    venv: bool,
    wheel_pkg_dir: String,
    bundled: String,
    wheels: Vec<String>,
}

const PROBE: &str = r#"
import json, os, sys, sysconfig
try:
    import ensurepip
    bundled = os.path.join(os.path.dirname(ensurepip.__file__), "_bundled")
    wheels = sorted(n for n in os.listdir(bundled) if n.endswith(".whl"))
except Exception:
    bundled, wheels = "", []
paths = sysconfig.get_paths()
print(json.dumps({
    "executable": sys.executable, "prefix": sys.prefix, "purelib": paths["purelib"],
    "scripts": paths["scripts"], "version": sys.version,
    "tag": sys.implementation.cache_tag or "", "platform": sys.platform,
    "venv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
    "wheel_pkg_dir": sysconfig.get_config_var("WHEEL_PKG_DIR") or "",
    "bundled": bundled, "wheels": wheels,
}))
"#;

/// The environment's layout, relative to its directory: what a seed is copied by.
struct Layout {
    purelib: PathBuf,
    scripts: PathBuf,
}

/// What `seed.json` says.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct SeedRecord {
    format: u32,
    /// The interpreter path the scripts' `#!` lines name in the seed ([`SEED_EXECUTABLE`]).
    executable: String,
    /// The scripts (paths relative to the environment), whose `#!` line is rewritten.
    scripts: Vec<PathBuf>,
    /// The RECORD files, whose lines for the scripts are hashed again.
    records: Vec<PathBuf>,
    /// Every file and link of the seed's tree, with its size: a seed that lost or cut one is
    /// refused before anything is copied.
    files: BTreeMap<PathBuf, u64>,
}

/// Gives `venv` the interpreter's own pip as `ensurepip --upgrade --default-pip` does: from
/// a seed of `seeds` when there is one for it, else by ensurepip itself (keeping its result as
/// a seed when it can be copied exactly).
pub(super) fn install(venv: &Venv, seeds: &PipSeeds) -> Result<(), EnvError> {
    let step = format!("installing pip in {}", venv.dir.display());
    // Whatever stands in the way of a seed, ensurepip itself is the answer.
    let seedable = probe(venv).and_then(|p| Ok(seed_key(&p, &venv.dir)?.map(|k| (p, k))));
    let (probe, (key, layout)) = match seedable {
        Ok(Some(found)) => found,
        Ok(None) => return ensurepip(venv, &step),
        Err(e) => {
            tracing::debug!("no pip seed for {}: {e}", venv.dir.display());
            return ensurepip(venv, &step);
        }
    };
    let seed = seeds.dir.join(&key);
    if seed.join(SEED_JSON).is_file() {
        match apply(&seed, &venv.dir, &probe.executable) {
            Ok(()) => {
                tracing::debug!(
                    "pip in {} from the seed {}",
                    venv.dir.display(),
                    seed.display()
                );
                return Ok(());
            }
            Err(e) => {
                tracing::warn!(
                    "the pip seed {} cannot be copied ({e}); it is removed and ensurepip runs",
                    seed.display()
                );
                undo(&seed.join(SEED_TREE), &venv.dir);
                let _ = crate::fsutil::remove_tree(&seed);
            }
        }
    }
    capture(venv, &probe, &layout, &seeds.dir, &key, &step)
}

fn ensurepip(venv: &Venv, step: &str) -> Result<(), EnvError> {
    let mut cmd = venv.command(&BTreeMap::new());
    cmd.args(["-E", "-s", "-m", "ensurepip", "--upgrade", "--default-pip"]);
    run(&mut cmd, step).map(|_| ())
}

fn probe(venv: &Venv) -> Result<Probe, EnvError> {
    let step = "asking the environment's interpreter about its ensurepip";
    let mut cmd = venv.command(&BTreeMap::new());
    cmd.args(["-E", "-s", "-c", PROBE]);
    let out = run(&mut cmd, step)?;
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).map_err(|e| EnvError::Command {
        step: step.into(),
        status: "unreadable output".into(),
        output: format!("{e}: {text}"),
    })
}

/// The seed's key and the environment's layout, or None when ensurepip's result cannot be
/// seeded: its wheels come from outside the interpreter, or the environment's paths are not
/// under its own directory.
fn seed_key(probe: &Probe, dir: &Path) -> Result<Option<(String, Layout)>, EnvError> {
    if probe.wheels.is_empty() || !probe.wheel_pkg_dir.is_empty() {
        return Ok(None);
    }
    let root = std::path::absolute(dir).map_err(io_err(dir))?;
    if Path::new(&probe.prefix) != root {
        return Ok(None);
    }
    let under = |p: &str| Path::new(p).strip_prefix(&root).ok().map(Path::to_path_buf);
    let (Some(purelib), Some(scripts), Some(executable)) = (
        under(&probe.purelib),
        under(&probe.scripts),
        under(&probe.executable),
    ) else {
        return Ok(None);
    };
    let mut wheels = Vec::new();
    for name in &probe.wheels {
        let path = Path::new(&probe.bundled).join(name);
        let bytes = std::fs::read(&path).map_err(io_err(&path))?;
        wheels.push((name.clone(), Sha256Digest::of(&bytes).hex()));
    }
    let what = serde_json::json!({
        "format": SEED_FORMAT,
        "version": probe.version,
        "tag": probe.tag,
        "platform": probe.platform,
        "venv": probe.venv,
        "purelib": purelib,
        "scripts": scripts,
        "executable": executable,
        "wheels": wheels,
    });
    let key = Sha256Digest::of(what.to_string().as_bytes()).hex();
    Ok(Some((key, Layout { purelib, scripts })))
}

/// The `#!` line pip (distlib's `ScriptMaker`) writes for a script run by `executable` on
/// Linux: the path itself when it has no space and the line fits in 127 bytes, else a
/// `/bin/sh` trampoline that `exec`s it (quoted when it has a space).
fn script_header(executable: &str) -> String {
    let exe = if executable.contains(' ') && !executable.starts_with('"') {
        format!("\"{executable}\"")
    } else {
        executable.to_string()
    };
    if !exe.contains(' ') && exe.len() + 3 <= 127 {
        format!("#!{exe}\n")
    } else {
        format!("#!/bin/sh\n'''exec' {exe} \"$0\" \"$@\"\n' '''\n")
    }
}

/// A file's identity for telling what ensurepip changed: its kind, size and time.
type Seen = BTreeMap<PathBuf, (u32, u64, i64, i64)>;

/// Calls `visit` with the path (relative to `root`) and metadata of everything under `root`,
/// each directory before what it holds; links are not followed.
fn walk(
    root: &Path,
    visit: &mut dyn FnMut(&Path, std::fs::Metadata) -> Result<(), EnvError>,
) -> Result<(), EnvError> {
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        for e in std::fs::read_dir(&dir).map_err(io_err(&dir))? {
            let r = rel.join(e.map_err(io_err(&dir))?.file_name());
            let m = std::fs::symlink_metadata(root.join(&r)).map_err(io_err(root.join(&r)))?;
            let is_dir = m.is_dir();
            visit(&r, m)?;
            if is_dir {
                stack.push(r);
            }
        }
    }
    Ok(())
}

/// Every file and link under `root` (directories left out: adding to one changes its time).
fn snapshot(root: &Path) -> Result<Seen, EnvError> {
    let mut seen = Seen::new();
    walk(root, &mut |rel, m| {
        if !m.is_dir() {
            seen.insert(
                rel.to_path_buf(),
                (m.mode(), m.len(), m.mtime(), m.mtime_nsec()),
            );
        }
        Ok(())
    })?;
    Ok(seen)
}

/// Runs ensurepip in `venv`, then keeps what it added as the seed `key` when it can be copied
/// exactly (the module's documentation).
fn capture(
    venv: &Venv,
    probe: &Probe,
    layout: &Layout,
    seeds: &Path,
    key: &str,
    step: &str,
) -> Result<(), EnvError> {
    let before = snapshot(&venv.dir)?;
    ensurepip(venv, step)?;
    let after = snapshot(&venv.dir)?;
    match seedable(&venv.dir, probe, layout, &before, &after) {
        Ok(record) => {
            if let Err(e) = store(&venv.dir, &after, &before, record, seeds, key) {
                tracing::debug!("the pip seed {key} was not kept: {e}");
            }
        }
        Err(why) => tracing::debug!(
            "ensurepip's result in {} is not kept as a seed: {why}",
            venv.dir.display()
        ),
    }
    Ok(())
}

/// Why ensurepip's result in an environment cannot be copied exactly.
#[derive(Debug, thiserror::Error)]
enum NotSeedable {
    #[error("it changed {}", .0.display())]
    Changed(PathBuf),
    #[error("it added {} (outside site-packages and the scripts)", .0.display())]
    Outside(PathBuf),
    #[error("{} does not start with {header:?}", .path.display())]
    Header { path: PathBuf, header: String },
    #[error("{}: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What a seed of ensurepip's result records, or why it cannot be one.
fn seedable(
    dir: &Path,
    probe: &Probe,
    layout: &Layout,
    before: &Seen,
    after: &Seen,
) -> Result<SeedRecord, NotSeedable> {
    if let Some((rel, _)) = before
        .iter()
        .find(|(rel, was)| after.get(*rel) != Some(*was))
    {
        return Err(NotSeedable::Changed(rel.clone()));
    }
    let header = script_header(&probe.executable);
    let (mut scripts, mut records) = (Vec::new(), Vec::new());
    for rel in after.keys().filter(|rel| !before.contains_key(*rel)) {
        if rel.starts_with(&layout.purelib) {
            let is_record = rel.file_name() == Some("RECORD".as_ref())
                && rel
                    .parent()
                    .and_then(Path::file_name)
                    .is_some_and(|d| d.as_bytes().ends_with(b".dist-info"));
            if is_record {
                records.push(rel.clone());
            }
        } else if rel.parent() == Some(layout.scripts.as_path()) {
            let bytes = std::fs::read(dir.join(rel)).map_err(|source| NotSeedable::Read {
                path: dir.join(rel),
                source,
            })?;
            if !bytes.starts_with(header.as_bytes()) {
                return Err(NotSeedable::Header {
                    path: rel.clone(),
                    header,
                });
            }
            scripts.push(rel.clone());
        } else {
            return Err(NotSeedable::Outside(rel.clone()));
        }
    }
    // The scripts are kept naming SEED_EXECUTABLE: the size of each as the seed holds it.
    let kept_header = script_header(SEED_EXECUTABLE).len() as u64;
    let files = after
        .iter()
        .filter(|(rel, _)| !before.contains_key(*rel))
        .map(|(rel, seen)| {
            let size = if scripts.contains(rel) {
                seen.1 - header.len() as u64 + kept_header
            } else {
                seen.1
            };
            (rel.clone(), size)
        })
        .collect();
    Ok(SeedRecord {
        format: SEED_FORMAT,
        executable: probe.executable.clone(),
        scripts,
        records,
        files,
    })
}

/// Copies what ensurepip added in `dir` into a new seed, renamed into place whole; a seed
/// another process stored first is kept. Its scripts name [`SEED_EXECUTABLE`] instead of the
/// environment's Python (`record.executable`), which is where ensurepip ran.
fn store(
    dir: &Path,
    after: &Seen,
    before: &Seen,
    mut record: SeedRecord,
    seeds: &Path,
    key: &str,
) -> std::io::Result<()> {
    std::fs::create_dir_all(seeds)?;
    let tmp = tempfile::Builder::new().prefix(".tmp-").tempdir_in(seeds)?;
    let tree = tmp.path().join(SEED_TREE);
    let (header, kept) = (
        script_header(&record.executable),
        script_header(SEED_EXECUTABLE),
    );
    for rel in after.keys().filter(|rel| !before.contains_key(*rel)) {
        let (from, to) = (dir.join(rel), tree.join(rel));
        std::fs::create_dir_all(crate::fsutil::parent_dir(&to))?;
        let meta = std::fs::symlink_metadata(&from)?;
        if meta.file_type().is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&from)?, &to)?;
        } else if record.scripts.contains(rel) {
            let bytes = std::fs::read(&from)?;
            let body = bytes.strip_prefix(header.as_bytes()).ok_or_else(|| {
                std::io::Error::other(format!("{} changed as it was read", from.display()))
            })?;
            std::fs::write(&to, [kept.as_bytes(), body].concat())?;
            std::fs::set_permissions(&to, meta.permissions())?;
        } else {
            crate::fsutil::copy_file(&from, &to, Some(meta))?;
        }
    }
    record.executable = SEED_EXECUTABLE.to_string();
    let json = serde_json::to_vec_pretty(&record).map_err(std::io::Error::other)?;
    std::fs::write(tmp.path().join(SEED_JSON), json)?;
    match std::fs::rename(tmp.path(), seeds.join(key)) {
        Ok(()) => {
            let _ = tmp.keep();
            tracing::debug!("kept ensurepip's result as the pip seed {key}");
            Ok(())
        }
        // Another process stored it first: theirs is the same.
        Err(_) if seeds.join(key).join(SEED_JSON).is_file() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Copies the seed into the environment at `dir`, run by `executable`.
fn apply(seed: &Path, dir: &Path, executable: &str) -> Result<(), EnvError> {
    let json = seed.join(SEED_JSON);
    let bytes = std::fs::read(&json).map_err(io_err(&json))?;
    let record: SeedRecord = serde_json::from_slice(&bytes).map_err(|e| EnvError::Command {
        step: format!("reading {}", json.display()),
        status: "unreadable".into(),
        output: e.to_string(),
    })?;
    let bad = |detail: String| EnvError::Command {
        step: format!("copying the pip seed {}", seed.display()),
        status: "not a seed".into(),
        output: detail,
    };
    if record.format != SEED_FORMAT {
        return Err(bad(format!("format {}", record.format)));
    }
    let tree = seed.join(SEED_TREE);
    let held: BTreeMap<PathBuf, u64> = snapshot(&tree)?
        .into_iter()
        .map(|(rel, seen)| (rel, seen.1))
        .collect();
    if held != record.files {
        let differs = record
            .files
            .iter()
            .find(|(rel, size)| held.get(*rel) != Some(size))
            .map(|(rel, _)| rel)
            .or_else(|| held.keys().find(|rel| !record.files.contains_key(*rel)));
        return Err(bad(format!(
            "its tree does not hold what seed.json lists ({})",
            differs.map_or_else(String::new, |r| r.display().to_string())
        )));
    }
    let (old, new) = (script_header(&record.executable), script_header(executable));
    let scripts: BTreeSet<&Path> = record.scripts.iter().map(PathBuf::as_path).collect();
    walk(&tree, &mut |r, meta| {
        let (from, to) = (tree.join(r), dir.join(r));
        if meta.is_dir() {
            if !to.is_dir() {
                std::fs::create_dir(&to).map_err(io_err(&to))?;
                std::fs::set_permissions(&to, meta.permissions()).map_err(io_err(&to))?;
            }
        } else if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&from).map_err(io_err(&from))?;
            std::os::unix::fs::symlink(target, &to).map_err(io_err(&to))?;
        } else if scripts.contains(r) {
            let text = std::fs::read(&from).map_err(io_err(&from))?;
            let body = text
                .strip_prefix(old.as_bytes())
                .ok_or_else(|| bad(format!("{} does not start with {old:?}", r.display())))?;
            let mut out = new.clone().into_bytes();
            out.extend_from_slice(body);
            std::fs::write(&to, out).map_err(io_err(&to))?;
            std::fs::set_permissions(&to, meta.permissions()).map_err(io_err(&to))?;
        } else {
            crate::fsutil::copy_file(&from, &to, Some(meta)).map_err(io_err(&to))?;
        }
        Ok(())
    })?;
    if old != new {
        for rel in &record.records {
            rehash_scripts(dir, rel, &record.scripts)?;
        }
    }
    Ok(())
}

/// Hashes again, in the RECORD file `rel` of the environment at `dir`, the lines of the
/// scripts (their `sha256=` and size), as pip writes them.
fn rehash_scripts(dir: &Path, rel: &Path, scripts: &[PathBuf]) -> Result<(), EnvError> {
    let path = dir.join(rel);
    let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
    // RECORD's paths are relative to the directory that holds the .dist-info.
    let base = rel.parent().and_then(Path::parent).unwrap_or(Path::new(""));
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let content = line.trim_end_matches(['\r', '\n']);
        let end = &line[content.len()..];
        let mut fields = content.rsplitn(3, ',');
        let (_size, _hash, name) = (fields.next(), fields.next(), fields.next());
        match name.map(|n| (n, normalize(&base.join(n)))) {
            Some((name, target)) if scripts.contains(&target) => {
                let bytes = std::fs::read(dir.join(&target)).map_err(io_err(dir.join(&target)))?;
                let hash = base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .encode(Sha256Digest::of(&bytes).0);
                out.push_str(&format!("{name},sha256={hash},{}{end}", bytes.len()));
            }
            _ => out.push_str(line),
        }
    }
    std::fs::write(&path, out).map_err(io_err(&path))
}

/// `path` with its `.` and `..` taken away, lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c.as_os_str()),
        }
    }
    out
}

/// Removes from `dir` what a copy of the seed tree `tree` may have put there (its files and
/// links, then its directories that are left empty), so that ensurepip starts clean.
fn undo(tree: &Path, dir: &Path) {
    let Ok(seen) = snapshot(tree) else { return };
    for rel in seen.keys() {
        let _ = std::fs::remove_file(dir.join(rel));
    }
    let mut dirs: BTreeSet<PathBuf> = BTreeSet::new();
    for rel in seen.keys() {
        for a in rel.ancestors().skip(1) {
            if !a.as_os_str().is_empty() {
                dirs.insert(a.to_path_buf());
            }
        }
    }
    // Deepest first; a directory that was there before (not empty) stays.
    for d in dirs.iter().rev() {
        let _ = std::fs::remove_dir(dir.join(d));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_header_is_the_path_or_a_shell_trampoline() {
        assert_eq!(script_header("/e/bin/python"), "#!/e/bin/python\n");
        let long = format!("/{}/bin/python", "x".repeat(120));
        assert_eq!(
            script_header(&long),
            format!("#!/bin/sh\n'''exec' {long} \"$0\" \"$@\"\n' '''\n")
        );
        // 124 bytes of path: "#!" + path + "\n" is 127, the longest line that stays simple.
        let edge = format!("/{}", "y".repeat(123));
        assert_eq!(script_header(&edge), format!("#!{edge}\n"));
        let over = format!("/{}", "y".repeat(124));
        assert!(script_header(&over).starts_with("#!/bin/sh\n"));
        assert_eq!(
            script_header("/a b/bin/python"),
            "#!/bin/sh\n'''exec' \"/a b/bin/python\" \"$0\" \"$@\"\n' '''\n"
        );
    }

    /// Every file under `root` but compiled ones: its path, mode and bytes.
    fn listing(root: &Path) -> BTreeMap<PathBuf, (u32, Vec<u8>)> {
        snapshot(root)
            .unwrap()
            .into_iter()
            .filter(|(rel, _)| rel.extension() != Some("pyc".as_ref()))
            .map(|(rel, seen)| {
                let p = root.join(&rel);
                let bytes = match std::fs::read_link(&p) {
                    Ok(t) => t.as_os_str().as_bytes().to_vec(),
                    Err(_) => std::fs::read(&p).unwrap(),
                };
                (rel, (seen.0, bytes))
            })
            .collect()
    }

    fn pip_runs(dir: &Path) {
        let out = std::process::Command::new(dir.join("bin/pip"))
            .arg("--version")
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains(&dir.display().to_string()), "{text}");
    }

    /// A seed captured in a short path and copied into a long one (where pip writes a shell
    /// trampoline) gives what ensurepip itself writes there; a seed cut short is refused,
    /// removed and made again.
    #[test]
    fn a_copied_seed_is_what_ensurepip_writes() {
        let Some(python) = ["3.11", "3.12", "3.10", "3.9", "3.13"]
            .iter()
            .find_map(|v| crate::env::python::find(v, None).ok())
        else {
            eprintln!("skipped: no Python 3.9-3.13");
            return;
        };
        let t = tempfile::tempdir().unwrap();
        let seeds = PipSeeds::at(t.path().join("seeds"));
        let seed_dirs = || crate::fsutil::list_dir(&seeds.dir).unwrap();
        Venv::create(&python.path, &t.path().join("a"), Some(&seeds)).unwrap();
        assert_eq!(seed_dirs().len(), 1, "{:?}", seed_dirs());
        let seed = seed_dirs().remove(0);
        assert!(seed.join(SEED_JSON).is_file());

        // ensurepip's own result at a long path, then the seed's copy at the same path.
        let long = t.path().join(format!("{}/env", "d".repeat(120)));
        let env = Venv::create(&python.path, &long, None).unwrap();
        ensurepip(&env, "ensurepip").unwrap();
        let want = listing(&long);
        assert!(
            std::fs::read(long.join("bin/pip"))
                .unwrap()
                .starts_with(b"#!/bin/sh\n"),
            "a long path gets a trampoline"
        );
        crate::fsutil::remove_tree(&long).unwrap();
        Venv::create(&python.path, &long, Some(&seeds)).unwrap();
        let got = listing(&long);
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>()
        );
        for (rel, w) in &want {
            assert!(
                got[rel] == *w,
                "{} differs: mode {:o}, {} bytes; copied mode {:o}, {} bytes",
                rel.display(),
                w.0,
                w.1.len(),
                got[rel].0,
                got[rel].1.len()
            );
        }
        pip_runs(&long);
        assert_eq!(seed_dirs(), vec![seed.clone()]);

        // A file of the seed cut short: refused, the seed removed, made again by ensurepip.
        let record: SeedRecord =
            serde_json::from_slice(&std::fs::read(seed.join(SEED_JSON)).unwrap()).unwrap();
        let (victim, _) = record.files.iter().find(|(_, n)| **n > 10).unwrap();
        std::fs::write(seed.join(SEED_TREE).join(victim), b"cut").unwrap();
        let again = t.path().join("again");
        Venv::create(&python.path, &again, Some(&seeds)).unwrap();
        pip_runs(&again);
        assert_ne!(std::fs::read(again.join(victim)).unwrap(), b"cut");
        assert_eq!(seed_dirs(), vec![seed.clone()]);
        let fixed = std::fs::read(seed.join(SEED_TREE).join(victim)).unwrap();
        assert_ne!(fixed, b"cut");
    }

    #[test]
    fn record_paths_are_normalized_lexically() {
        assert_eq!(
            normalize(Path::new("lib/python3.11/site-packages/../../../bin/pip")),
            PathBuf::from("bin/pip")
        );
    }
}
