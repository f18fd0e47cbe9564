//! The Python kind: a context locked as a PEP 751 `pylock.toml` (every wheel and sdist kept as
//! an object, the interpreter carried by hash), built offline into an environment that is a
//! prefix of its own (`crate::env`), and run with the instance's copy of it at
//! [`layout::ENVIRONMENT`] and the lock's artifacts at [`layout::WHEELHOUSE`].

mod directives;

use std::collections::BTreeMap;
use std::path::Path;

use super::{
    Built, ContextError, Kind, Lock, LockOptions, LockSummary, NeededObject, RunEnvironment,
    TestCommand, Unavailable, layout,
};
use crate::digest::Sha256Digest;
use crate::env::build::{self, BuildOptions, BuiltEnv};
use crate::env::pylock::PyLock;
use crate::manifest::Context;
use crate::sandbox::Mount;
use crate::store::{Ark, ObjectStore};

pub use directives::test_directives;

/// The Python kind.
pub struct Python;

impl Kind for Python {
    fn name(&self) -> &'static str {
        "python"
    }

    fn lock_member(&self) -> &'static str {
        "env/pylock.toml"
    }

    fn lock(
        &self,
        ark: &mut Ark,
        ctx: &Context,
        opts: &LockOptions,
        say: &dyn Fn(&str),
    ) -> Result<LockSummary, ContextError> {
        let opts = crate::env::lock::LockOptions {
            commit: opts.commit.clone(),
            python: opts.runtime.clone(),
            index_url: opts.index_url.clone(),
            exclude_newer: opts.exclude_newer,
            pack_python: opts.pack_runtime,
            allow_yanked: opts.allow_yanked,
            installer: opts.installer,
            unconfined: opts.unconfined,
        };
        let report = crate::env::lock::lock(ark, ctx, &opts, say)?;
        Ok(summary(report))
    }

    fn read_lock(&self, id: Sha256Digest, bytes: &[u8]) -> Result<Box<dyn Lock>, ContextError> {
        let lock = PyLock::parse(bytes).map_err(|e| ContextError::BadLock {
            id: id.hex(),
            detail: e.to_string(),
        })?;
        // Checked once here: `objects` then cannot fail.
        let objects = lock
            .needed_objects()
            .map_err(|e| ContextError::BadLock {
                id: id.hex(),
                detail: e.to_string(),
            })?
            .into_iter()
            .map(|(id, size, kind)| NeededObject { id, size, kind })
            .collect();
        Ok(Box::new(PythonLock { id, lock, objects }))
    }

    fn test_command(&self, ctx: &Context, test_patch: &str) -> TestCommand {
        let directives = test_directives(test_patch, &ctx.test_cmd);
        let quoted: Vec<String> = directives.iter().map(|d| crate::shell::quote(d)).collect();
        TestCommand {
            command: format!("{} {}", ctx.test_cmd, quoted.join(" ")),
            directives,
        }
    }

    fn default_parser(&self) -> &'static str {
        "pytest"
    }
}

/// What `env lock` says of a Python lock: its report, and a sentence of it.
fn summary(report: crate::env::lock::LockReport) -> LockSummary {
    let sentence = format!(
        "locked {} {} at {} with Python {}: {} packages ({} installed, {}{} in the wheelhouse \
         only), {} artifacts, {}; {} wheels built from sdists; proven offline in {:.1} s",
        report.repo,
        report.version,
        &report.commit[..12.min(report.commit.len())],
        report.python,
        report.packages,
        report.runtime,
        if report.services > 0 {
            format!("{} in services' own environments, ", report.services)
        } else {
            String::new()
        },
        report.build,
        report.artifacts,
        crate::units::human_bytes(report.bytes),
        report.built_wheels.len(),
        report.env.seconds
    );
    LockSummary {
        id: report.id.clone(),
        commit: report.commit.clone(),
        notes: report.notes.clone(),
        sentence,
        details: serde_json::to_value(&report).unwrap_or_default(),
    }
}

/// A `pylock.toml`, read.
struct PythonLock {
    id: Sha256Digest,
    lock: PyLock,
    objects: Vec<NeededObject>,
}

impl Lock for PythonLock {
    fn id(&self) -> Sha256Digest {
        self.id
    }

    fn runtime(&self) -> String {
        self.lock.tool.swe_ark.python.version.clone()
    }

    fn base_commits(&self) -> Vec<String> {
        let meta = &self.lock.tool.swe_ark;
        std::iter::once(meta.commit.clone())
            .chain(meta.instance_commits.iter().cloned())
            .collect()
    }

    /// The patches' build files ([`crate::env::lock::build_files_touched`]) when the lock
    /// does not name the instance among those whose patched trees it installed.
    fn uncovered_patch_files(
        &self,
        ctx: &Context,
        instance_id: &str,
        patches: [&str; 2],
    ) -> Vec<String> {
        let meta = &self.lock.tool.swe_ark;
        if meta.instance_patches.iter().any(|i| i == instance_id) {
            return Vec::new();
        }
        let mut files: Vec<String> = patches
            .iter()
            .flat_map(|p| crate::env::lock::build_files_touched(p, ctx))
            .collect();
        files.sort();
        files.dedup();
        files
    }

    /// The packages of the conda environment file the lock was made from (the one its context
    /// names, at the commit it was locked at, as SWE-bench builds the image from it) that pip
    /// cannot provide. An instance's own base commit may lack that file (xarray's older
    /// commits have `ci/requirements/py3*.yml` only).
    fn unavailable(&self, file_at: &dyn Fn(&str, &str) -> Option<Vec<u8>>) -> Vec<Unavailable> {
        let meta = &self.lock.tool.swe_ark;
        let Some(text) = meta
            .context
            .conda_environment
            .as_deref()
            .and_then(|f| file_at(&meta.commit, f))
        else {
            return Vec::new();
        };
        crate::env::conda::absent_in(&String::from_utf8_lossy(&text))
            .into_iter()
            .map(|(name, why)| Unavailable {
                name,
                why: format!("which only conda provides: {why}"),
            })
            .collect()
    }

    fn objects(&self) -> Vec<NeededObject> {
        self.objects.clone()
    }

    fn needs_from_machine(&self) -> Option<String> {
        let python = &self.lock.tool.swe_ark.python;
        python.packed.is_none().then(|| {
            format!(
                "Python {} ({}) installed (lock it again without --no-pack-python to carry it)",
                python.version, python.implementation
            )
        })
    }

    fn build(
        &self,
        objects: &ObjectStore,
        cache_root: &Path,
        unconfined: bool,
    ) -> Result<Box<dyn Built>, ContextError> {
        let opts = BuildOptions {
            unconfined,
            ..BuildOptions::default()
        };
        let built = build::build(objects, cache_root, &self.id, &self.lock, &opts)?;
        Ok(Box::new(PythonBuilt(built)))
    }
}

/// A built Python environment, in the archive's cache.
struct PythonBuilt(BuiltEnv);

impl Built for PythonBuilt {
    /// The environment at [`layout::ENVIRONMENT`] under the instance's own writable layer
    /// (`work/env-layer`; the runner copies it where a run cannot have one), each service's
    /// read-only at [`layout::SERVICE_ENVS`] — both from the lock's copy made for the fixed
    /// layout once — the lock's artifacts at [`layout::WHEELHOUSE`], and installs that find
    /// them there and nothing else.
    fn for_run(&self, work: &Path, _base_commit: &str) -> Result<RunEnvironment, ContextError> {
        let built = &self.0;
        let env_at = Path::new(layout::ENVIRONMENT);
        let wheelhouse_at = Path::new(layout::WHEELHOUSE);
        let services_at = Path::new(layout::SERVICE_ENVS);
        let shared = build::at_layout(built, env_at, services_at, crate::sandbox::layer_owner())?;
        let mut mounts = vec![
            Mount::layered(&shared.venv, env_at, work.join("env-layer")),
            Mount::new(&built.wheelhouse, wheelhouse_at, false),
        ];
        let mut service_envs = BTreeMap::new();
        for (name, dir) in &shared.services {
            let at = services_at.join(name);
            mounts.push(Mount::new(dir, &at, false));
            service_envs.insert(name.clone(), (dir.clone(), at));
        }
        let mut vars = build::offline_install_env(wheelhouse_at);
        vars.insert("PIP_CONFIG_FILE".into(), "/dev/null".into());
        vars.insert("PIP_DISABLE_PIP_VERSION_CHECK".into(), "1".into());
        Ok(RunEnvironment {
            mounts,
            vars,
            path: vec![format!("{}/bin", layout::ENVIRONMENT)],
            service_envs,
            prepare: String::new(),
        })
    }
}
