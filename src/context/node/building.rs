//! A node lock's environment, built offline from its objects into `envs/<lock id>/` (a cache,
//! safe to delete): `cache/content-v2/`, the content of npm's own cache (cacache), each tarball
//! filed by its sha512 and its sha1, which is how npm finds a tarball whose lockfile entry has
//! an integrity, with no index and no network; `npm-locks/`, the `package-lock.json` files the
//! lock generated, by the sha256 of the `package.json` they were resolved for; and `runtime/`,
//! node and npm as one prefix.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::NodeError;
use super::document::{Generated, NodeLock, digest};
use super::registry::unbase64;
use super::runtime;
use crate::context::{Built, ContextError, RunEnvironment, layout};
use crate::digest::Sha256Digest;
use crate::sandbox::Mount;
use crate::store::ObjectStore;

/// Where a run sees the generated `package-lock.json` files.
pub const NPM_LOCKS: &str = "/swe-ark/npm-locks";
/// The instance's own npm cache (its content linked from the environment's).
pub const NPM_CACHE: &str = "/swe-ark/npm-cache";

/// What [`build`] made (or found made).
#[derive(Debug, Clone)]
pub struct NodeBuilt {
    /// `envs/<lock id>/`.
    pub dir: PathBuf,
    /// The runtime's prefix (`bin/node`, `bin/npm`).
    pub runtime: PathBuf,
    /// npm's cache content (`content-v2`).
    pub content: PathBuf,
    /// `npm-locks/`, when the lock generated any.
    pub locks: Option<PathBuf>,
}

const RECORD: &str = "built.json";

fn io(p: &Path) -> impl Fn(std::io::Error) -> NodeError + '_ {
    move |e| NodeError::Io(format!("{}: {e}", p.display()))
}

fn found(dir: &Path, lock: &NodeLock) -> Option<NodeBuilt> {
    dir.join(RECORD).is_file().then(|| NodeBuilt {
        dir: dir.to_path_buf(),
        runtime: dir.join("runtime"),
        content: dir.join("cache/content-v2"),
        locks: (!lock.generated.is_empty()).then(|| dir.join("npm-locks")),
    })
}

/// The environment of `lock` (whose id is `id`) in `envs/` under `cache_root`: found built,
/// or built now.
pub fn build(
    lock: &NodeLock,
    id: &Sha256Digest,
    objects: &ObjectStore,
    cache_root: &Path,
) -> Result<NodeBuilt, NodeError> {
    let root = std::path::absolute(cache_root).map_err(io(cache_root))?;
    let envs = root.join("envs");
    let dir = envs.join(id.hex());
    if let Some(built) = found(&dir, lock) {
        return Ok(built);
    }
    std::fs::create_dir_all(&envs).map_err(io(&envs))?;
    let staged = tempfile::Builder::new()
        .prefix(".tmp-build-")
        .tempdir_in(&envs)
        .map_err(io(&envs))?;
    let s = staged.path();
    fill_cache(lock, objects, &s.join("cache/content-v2"))?;
    write_locks(lock, objects, &s.join("npm-locks"))?;
    let rt = s.join("runtime");
    match &lock.runtime.packed {
        Some(packed) => runtime::unpack(packed, objects, &rt)?,
        None => {
            let (node, npm) = runtime::locate(&lock.runtime)?;
            runtime::assemble(&rt, &node, &npm)?;
        }
    }
    let got = runtime::identify(&rt.join("bin/node"), &rt.join("lib/node_modules/npm"))?;
    if got.node_sha256 != lock.runtime.node_sha256
        || got.npm_files_sha256 != lock.runtime.npm_files_sha256
    {
        return Err(NodeError::Runtime(format!(
            "the runtime laid out hashes to node {} and npm files {}, the lock says {} and {}",
            got.node_sha256,
            got.npm_files_sha256,
            lock.runtime.node_sha256,
            lock.runtime.npm_files_sha256
        )));
    }
    std::fs::write(s.join(RECORD), b"{}\n").map_err(io(s))?;
    let staged = staged.keep();
    match std::fs::rename(&staged, &dir) {
        Ok(()) => found(&dir, lock)
            .ok_or_else(|| NodeError::Io(format!("{}: built, then not found", dir.display()))),
        // Another run built it first: theirs is as good.
        Err(_) if dir.join(RECORD).is_file() => {
            let _ = std::fs::remove_dir_all(&staged);
            build(lock, id, objects, cache_root)
        }
        Err(e) => Err(io(&dir)(e)),
    }
}

/// Each tarball copied from its object (checked as it is read) to where npm's cache files
/// content: `content-v2/<algorithm>/<hex[0..2]>/<hex[2..4]>/<hex[4..]>`, by sha512 and by sha1
/// (a link), read-only.
fn fill_cache(lock: &NodeLock, objects: &ObjectStore, content: &Path) -> Result<(), NodeError> {
    use std::os::unix::fs::PermissionsExt;
    for t in &lock.tarballs {
        let sha512 = t
            .integrity
            .strip_prefix("sha512-")
            .and_then(unbase64)
            .map(hex::encode)
            .ok_or_else(|| {
                NodeError::Document(format!(
                    "{}@{}: integrity `{}`",
                    t.name, t.version, t.integrity
                ))
            })?;
        let first = cache_path(content, "sha512", &sha512);
        if first.is_file() {
            continue;
        }
        let parent = first.parent().unwrap_or(content);
        std::fs::create_dir_all(parent).map_err(io(parent))?;
        let mut reader = objects
            .open(&digest(&t.sha256)?)
            .map_err(|e| NodeError::Io(format!("{}@{}: {e}", t.name, t.version)))?;
        let mut out = std::fs::File::create(&first).map_err(io(&first))?;
        std::io::copy(&mut reader, &mut out).map_err(io(&first))?;
        std::fs::set_permissions(&first, std::fs::Permissions::from_mode(0o444))
            .map_err(io(&first))?;
        let second = cache_path(content, "sha1", &t.sha1);
        let parent = second.parent().unwrap_or(content);
        std::fs::create_dir_all(parent).map_err(io(parent))?;
        if !second.exists() {
            std::fs::hard_link(&first, &second)
                .or_else(|_| std::fs::copy(&first, &second).map(|_| ()))
                .map_err(io(&second))?;
        }
    }
    Ok(())
}

fn cache_path(content: &Path, algo: &str, hex: &str) -> PathBuf {
    content
        .join(algo)
        .join(&hex[..2])
        .join(&hex[2..4])
        .join(&hex[4..])
}

fn write_locks(lock: &NodeLock, objects: &ObjectStore, dir: &Path) -> Result<(), NodeError> {
    for g in &lock.generated {
        let bytes = objects.get(&digest(&g.sha256)?).map_err(|e| {
            NodeError::Io(format!("generated package-lock.json of {}: {e}", g.commit))
        })?;
        let sub = dir.join(when_dir(g.when));
        std::fs::create_dir_all(&sub).map_err(io(&sub))?;
        let file = sub.join(format!("{}.json", g.key()));
        std::fs::write(&file, bytes).map_err(io(&file))?;
    }
    Ok(())
}

pub fn when_dir(when: Generated) -> &'static str {
    match when {
        Generated::Lockless => "lockless",
        Generated::Patched => "patched",
        Generated::Upgraded => "upgraded",
    }
}

/// The shell lines that put a generated `package-lock.json` in the tree at `locks`: the one
/// made after patches that changed `package.json` to what it is now, else the upgrade of the
/// tree's own version-1 lockfile, else, where the tree has none, the one made for its
/// `package.json`.
pub fn prepare_script(locks: &str) -> String {
    format!(
        "h=$(sha256sum package.json | cut -c1-64)\n\
         l=$(sha256sum package-lock.json 2>/dev/null | cut -c1-64)\n\
         if [ -f {locks}/patched/$h.json ]; then cp {locks}/patched/$h.json package-lock.json\n\
         elif [ -n \"$l\" ] && [ -f {locks}/upgraded/$l.json ]; then \
         cp {locks}/upgraded/$l.json package-lock.json\n\
         elif [ ! -e package-lock.json ] && [ -f {locks}/lockless/$h.json ]; then \
         cp {locks}/lockless/$h.json package-lock.json; fi\n"
    )
}

/// `to` made a tree of links to the files of `from` (copies where links cannot be made):
/// npm's cache of an instance, its content shared with the environment's and not copied.
pub fn link_tree(from: &Path, to: &Path) -> Result<(), NodeError> {
    std::fs::create_dir_all(to).map_err(io(to))?;
    for entry in std::fs::read_dir(from).map_err(io(from))? {
        let entry = entry.map_err(io(from))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().map_err(io(&src))?.is_dir() {
            link_tree(&src, &dst)?;
        } else if !dst.exists() {
            std::fs::hard_link(&src, &dst)
                .or_else(|_| std::fs::copy(&src, &dst).map(|_| ()))
                .map_err(io(&dst))?;
        }
    }
    Ok(())
}

/// The variables that make npm install from its cache alone.
pub fn offline_vars(cache: &str) -> BTreeMap<String, String> {
    [
        ("npm_config_cache", cache),
        ("npm_config_offline", "true"),
        ("npm_config_audit", "false"),
        ("npm_config_fund", "false"),
        ("npm_config_update_notifier", "false"),
        ("npm_config_progress", "false"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

impl Built for NodeBuilt {
    /// The runtime at [`layout::ENVIRONMENT`], read-only, first on `PATH`; an npm cache of the
    /// instance's own whose content is the lock's tarballs, npm offline; and the generated
    /// `package-lock.json` files, put in the tree before the install.
    fn for_run(&self, work: &Path, _base_commit: &str) -> Result<RunEnvironment, ContextError> {
        let cache = work.join("npm-cache");
        link_tree(&self.content, &cache.join("_cacache/content-v2"))?;
        let mut mounts = vec![
            Mount::new(&self.runtime, layout::ENVIRONMENT, false),
            Mount::new(&cache, NPM_CACHE, true),
        ];
        let mut prepare = String::new();
        if let Some(locks) = &self.locks {
            mounts.push(Mount::new(locks, NPM_LOCKS, false));
            prepare = prepare_script(NPM_LOCKS);
        }
        Ok(RunEnvironment {
            mounts,
            vars: offline_vars(NPM_CACHE),
            path: vec![format!("{}/bin", layout::ENVIRONMENT)],
            service_envs: BTreeMap::new(),
            prepare,
        })
    }
}
