//! An instance's installed state, kept (docs/REPLAY.md, "The installed state"): the
//! environment and the work tree as the context's install left them at the base commit, made
//! once — by the first run of an instance whose state the archive lacks — and kept as an
//! object (`installed`) under the key of everything that install depends on. Later runs of
//! any instance with that key start from it: the environment's side is a farm of the lock's
//! shared copy with the state's changes (cached beside it, mounted read-only under the
//! instance's private layer), the tree's side is written into the checkout after the
//! setup. The install then runs again only when the patch changes what it built
//! ([`reinstall_reason`]), as SWE-bench's evaluation script runs it on an image that has it.

mod delta;
mod farm;
mod state;

pub use farm::{FarmSweep, sweep_farms};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::digest::{Sha256Digest, Sha256Hasher};
use crate::manifest::Context;
use crate::store::{Index, InstalledStateRow, Layout, ObjectStore};

/// Where an instance's environment changes go, as its runner gives it.
#[derive(Debug, Clone)]
pub(crate) enum EnvChanges {
    /// An overlay's upper layer.
    Upper(PathBuf),
    /// A writable copy of `original`.
    Copy { copy: PathBuf, original: PathBuf },
}

/// What an instance is, for the key and the record.
pub(crate) struct Identity<'a> {
    pub lock: Sha256Digest,
    pub repo: &'a str,
    pub instance_id: &'a str,
    pub base_commit: &'a str,
    /// Where the runs see the work tree and the environment.
    pub work_tree: &'a str,
    pub env_at: &'a Path,
}

/// The key of an installed state: everything the install at a base commit depends on.
pub(crate) fn key(
    id: &Identity,
    ctx: &Context,
    prepare: &str,
    vars: &BTreeMap<String, String>,
) -> Sha256Digest {
    let mut h = Sha256Hasher::new();
    let mut field = |name: &str, value: &str| {
        h.update(format!("{name} {}\n", value.len()).as_bytes());
        h.update(value.as_bytes());
        h.update(b"\n");
    };
    field("format", &state::FORMAT.to_string());
    field("lock", &id.lock.hex());
    field("base_commit", id.base_commit);
    field("work_tree", id.work_tree);
    field("environment", &id.env_at.display().to_string());
    field("pre_install", &ctx.pre_install.join("\n"));
    field("eval_commands", &ctx.eval_commands.join("\n"));
    field("install", &ctx.install);
    field("prepare", prepare);
    for (k, v) in vars {
        field(&format!("var {k}"), v);
    }
    h.finish()
}

/// Why the install must run again after a patch touching `touched` (None: the kept state is
/// what it would make). A non-editable install copied the sources into the environment, so
/// any change needs it; an editable one reads Python sources where they are, so only what
/// the install itself reads or builds needs it: anything but a `.py` file (a C or Cython
/// source, `setup.cfg`, `pyproject.toml`, package data), a build script (`setup.py`,
/// `setupext.py`, `setup_package.py`) or a `.py` at the repository's top (which `setup.py`
/// may import) other than `conftest.py`. Documentation (`.rst`, `.md`, anything under
/// `doc/` or `docs/`) is never built.
pub(crate) fn reinstall_reason(touched: &[String], editable: bool) -> Option<String> {
    let first = touched.first()?;
    if !editable {
        return Some(format!(
            "the install is not editable: the environment holds its own copy of `{first}`"
        ));
    }
    touched.iter().find_map(|p| {
        let name = p.rsplit('/').next().unwrap_or(p);
        let documentation = [".rst", ".md", ".markdown"]
            .iter()
            .any(|x| name.ends_with(x))
            || p.starts_with("doc/")
            || p.starts_with("docs/");
        let source = (name.ends_with(".py") || name.ends_with(".pyi"))
            && !matches!(name, "setup.py" | "setupext.py" | "setup_package.py")
            && (p.contains('/') || name == "conftest.py");
        (!documentation && !source)
            .then(|| format!("the patch changes `{p}`, which the install reads"))
    })
}

/// Whether an install that changed `env` (found under `root`) left the work tree at
/// `work_tree` editable: a `.egg-link`, an `__editable__` finder or path file, a `.pth` naming
/// the tree, or a `direct_url.json` that says so.
fn editable(env: &delta::Delta, root: &Path, work_tree: &str) -> bool {
    env.changed.iter().any(|c| {
        let name = c.rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let read = || std::fs::read_to_string(root.join(&c.rel)).unwrap_or_default();
        name.ends_with(".egg-link")
            || name.starts_with("__editable__")
            || (name.ends_with(".pth") && read().lines().any(|l| l.starts_with(work_tree)))
            || (name == "direct_url.json" && read().replace(' ', "").contains("\"editable\":true"))
    })
}

/// A state made or found, as the run's record says it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcome {
    /// `kept` (found and used), `made` (made by this run), or empty.
    pub how: &'static str,
    pub object: Option<Sha256Digest>,
    /// Why the install ran again after the patch ('' when it did not).
    pub reinstalled: String,
}

/// An instance's installed state: where it is looked up and recorded, what was found.
pub(crate) struct Plan {
    pub key: Sha256Digest,
    index: PathBuf,
    objects: ObjectStore,
    lock: Sha256Digest,
    repo: String,
    instance_id: String,
    base_commit: String,
    work_tree: String,
    /// The state found kept, its `state.json` read when the environment was made from it.
    kept: Option<(Sha256Digest, bool)>,
    /// The shared hold on the kept state's farm, for as long as the plan lives: `gc` leaves
    /// a held farm alone.
    farm_hold: Option<std::fs::File>,
    /// The work tree and environment are as installed at the base commit (kept or made).
    pub at_base: bool,
    pub editable: bool,
    pub outcome: Outcome,
}

/// Why an installed state could not be used or made: said in the log, never fatal (the
/// instance installs as it would without one).
#[derive(Debug, thiserror::Error)]
pub(crate) enum StateError {
    #[error("installed state {key}: {what}: {source}")]
    Io {
        key: String,
        what: &'static str,
        source: std::io::Error,
    },
    #[error("installed state {key}: the archive's index: {source}")]
    Index {
        key: String,
        source: crate::store::IndexError,
    },
}

impl Plan {
    /// The plan of an instance of the archive at `cache_root` (None when it has no index:
    /// there is nowhere to keep a state).
    pub fn new(
        cache_root: &Path,
        objects: &ObjectStore,
        id: &Identity,
        key: Sha256Digest,
    ) -> Option<Plan> {
        let index = Layout::new(cache_root).index();
        index.is_file().then(|| Plan {
            key,
            index,
            objects: objects.clone(),
            lock: id.lock,
            repo: id.repo.to_string(),
            instance_id: id.instance_id.to_string(),
            base_commit: id.base_commit.to_string(),
            work_tree: id.work_tree.to_string(),
            kept: None,
            farm_hold: None,
            at_base: false,
            editable: false,
            outcome: Outcome::default(),
        })
    }

    fn io(&self, what: &'static str) -> impl FnOnce(std::io::Error) -> StateError + '_ {
        move |source| StateError::Io {
            key: self.key.short(),
            what,
            source,
        }
    }

    /// The environment of the kept state, when the archive has one: a farm of `shared` (the
    /// lock's copy at the layout) with the state's changes, made once per state and owner
    /// beside it under `cache_root` and shared by every instance of the key. None when there
    /// is none.
    pub fn kept_environment(
        &mut self,
        cache_root: &Path,
        shared: &Path,
    ) -> Result<Option<PathBuf>, StateError> {
        // Opened to write where it can be (its last connection then tidies the WAL files
        // away); read-only on a seed archive that cannot be written.
        let row = Index::open(&self.index)
            .or_else(|_| Index::open_read_only(&self.index))
            .and_then(|i| i.installed_state(&self.key))
            .map_err(|source| StateError::Index {
                key: self.key.short(),
                source,
            })?;
        let Some(row) = row else { return Ok(None) };
        // Checked at every use (a state is small): one that went bad is made again, and
        // its record replaced, by this run.
        if let Err(e) = self.objects.check(&row.object) {
            tracing::warn!(
                "installed state {} is not used: {e}; this run installs and keeps it again",
                self.key.short()
            );
            return Ok(None);
        }
        let owner = crate::sandbox::layer_owner();
        // Absolute: the sandbox mounts it from the runs' own root.
        let envs = std::path::absolute(Layout::new(cache_root).env(&self.lock))
            .map_err(self.io("finding the lock's directory"))?;
        let dir = farm::dir(&envs, owner, &row.object);
        // Made when missing; made again when a gc removed it before the hold was taken.
        let mut hold = farm::hold(&dir).map_err(self.io("holding its environment"))?;
        for _ in 0..2 {
            if hold.is_some() {
                break;
            }
            self.make_farm(&envs, &dir, shared, &row.object, owner)?;
            hold = farm::hold(&dir).map_err(self.io("holding its environment"))?;
        }
        let Some(hold) = hold else {
            return Err(self.io("holding its environment")(std::io::Error::other(
                "removed again as soon as it was made",
            )));
        };
        self.farm_hold = Some(hold);
        self.kept = Some((row.object, row.editable));
        Ok(Some(dir.join("env")))
    }

    fn make_farm(
        &self,
        envs: &Path,
        dir: &Path,
        shared: &Path,
        object: &Sha256Digest,
        owner: u32,
    ) -> Result<(), StateError> {
        // Marked: what a killed run leaves is removed by the next staging here, or by gc.
        let staged = crate::fsutil::work_dir(envs, crate::fsutil::TEMP_PREFIX)
            .map_err(self.io("staging its environment"))?;
        let env = staged.path().join("env");
        crate::fsutil::link_tree(shared, &env)
            .map_err(self.io("linking the shared environment"))?;
        let targets = state::Targets {
            env: Some(&env),
            tree: None,
        };
        state::apply(&self.objects, object, &targets).map_err(self.io("applying it"))?;
        crate::sandbox::give_to_layer_owner(staged.path(), owner)
            .map_err(|e| std::io::Error::other(e.to_string()))
            .map_err(self.io("giving it to the runs' owner"))?;
        // Another process may have put its own in place first: the same files, kept.
        let staged = staged.keep();
        if let Err(e) = std::fs::rename(&staged, dir) {
            let _ = crate::fsutil::remove_tree(&staged);
            if !dir.is_dir() {
                return Err(self.io("putting it in place")(e));
            }
        }
        Ok(())
    }

    /// The kept state's work tree side written into `tree` (after the setup); false when
    /// there is no kept state.
    pub fn apply_tree(&mut self, tree: &Path) -> Result<bool, StateError> {
        let Some((object, editable)) = self.kept else {
            return Ok(false);
        };
        let targets = state::Targets {
            env: None,
            tree: Some(tree),
        };
        state::apply(&self.objects, &object, &targets)
            .map_err(self.io("writing its work tree files"))?;
        self.at_base = true;
        self.editable = editable;
        self.outcome.how = "kept";
        self.outcome.object = Some(object);
        Ok(true)
    }

    /// What the install just did at the base commit, packed and recorded under the key.
    pub fn make(
        &mut self,
        env: &EnvChanges,
        tree: &Path,
        staging: &Path,
        install_seconds: f64,
    ) -> Result<Sha256Digest, StateError> {
        let (env_delta, env_root) = match env {
            EnvChanges::Upper(upper) => (delta::from_upper(upper), upper.as_path()),
            EnvChanges::Copy { copy, original } => {
                (delta::from_copy(copy, original), copy.as_path())
            }
        };
        let env_delta = env_delta.map_err(self.io("reading the environment's changes"))?;
        let tree_delta =
            delta::from_work_tree(tree).map_err(self.io("reading the work tree's changes"))?;
        let editable = editable(&env_delta, env_root, &self.work_tree);
        let t = Instant::now();
        let packed = state::pack(
            &self.objects,
            staging,
            (&self.key, editable),
            (env_root, &env_delta),
            (tree, &tree_delta),
        )
        .map_err(self.io("packing it"))?;
        tracing::debug!(
            "installed state {} packed in {:.2} s: {} bytes",
            self.key.short(),
            t.elapsed().as_secs_f64(),
            packed.size
        );
        let row = InstalledStateRow {
            key: self.key,
            object: packed.id,
            lock_id: self.lock.hex(),
            repo: self.repo.clone(),
            base_commit: self.base_commit.clone(),
            instance_id: self.instance_id.clone(),
            editable,
            env_entries: env_delta.entries() as u64,
            tree_entries: tree_delta.entries() as u64,
            size: packed.size,
            install_seconds,
            made_at: 0,
        };
        Index::open(&self.index)
            .and_then(|mut i| i.record_installed_state(&row))
            .map_err(|source| StateError::Index {
                key: self.key.short(),
                source,
            })?;
        self.at_base = true;
        self.editable = editable;
        self.outcome.how = "made";
        self.outcome.object = Some(packed.id);
        Ok(packed.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_install_runs_again_only_for_what_it_reads() {
        assert_eq!(reinstall_reason(&[], false), None);
        assert_eq!(
            reinstall_reason(&paths(&["pkg/a.py", "CHANGES.rst", "doc/x.txt"]), true),
            None
        );
        assert_eq!(
            reinstall_reason(&paths(&["conftest.py", "pkg/b.pyi"]), true),
            None
        );
        for built in [
            "setup.py",
            "pkg/setup_package.py",
            "pkg/_ext.c",
            "pkg/x.pyx",
            "setup.cfg",
            "versioneer.py",
            "pkg/data.json",
        ] {
            let why = reinstall_reason(&paths(&["pkg/a.py", built]), true).unwrap();
            assert!(why.contains(built), "{why}");
        }
        assert!(
            reinstall_reason(&paths(&["pkg/a.py"]), false)
                .unwrap()
                .contains("not editable")
        );
    }
}
