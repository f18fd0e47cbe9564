//! Private writable layers (docs/SANDBOX.md, "Layers"): a directory shared by every run (a
//! built environment) shown to one instance's confined runs through an overlay, so that the
//! instance may change it (an install, `.pyc` files) without a copy of it, and without
//! touching what the next instance sees.
//!
//! The overlay is mounted by B inside the run's user namespace (Linux 5.11+), with the
//! `userxattr` option, so the layers must be what the namespace's root may own: the shared
//! (lower) directory is owned by [`layer_owner`], and so is the layer (`upper/`, `work/`)
//! while runs use it. When the instance ends, what the layer holds goes back to the caller
//! ([`Layer`]'s drop), as idmapped trees leave what a run made owned by root.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, lchown};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::confine::{SANDBOX_ID, hand_over};
use super::{Confine, Mount, SandboxError, Spec, euid, plan::sandbox_ids, prepare};

/// The uid a confined run's root is outside its user namespace: [`SANDBOX_ID`] when swe-ark
/// runs as root, else the caller's own. The directories shown under a layer must be its.
pub fn layer_owner() -> u32 {
    if euid() == 0 && sandbox_ids() {
        SANDBOX_ID
    } else {
        euid()
    }
}

/// Gives what the caller owns below `dir` to `owner` ([`layer_owner`]), links not followed:
/// directories to be shown under layers. `dir` itself stays the caller's, mode 0700: no
/// process of `owner`'s outside a run (65534 is `nobody`, which other daemons may be) can
/// reach what every instance's runs are shown; a run reaches it by a descriptor swe-ark
/// opened. Nothing to do when the caller is `owner`.
pub fn give_to_layer_owner(dir: &Path, owner: u32) -> Result<(), SandboxError> {
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
        .map_err(|e| prepare(&format!("closing {}", dir.display()), e))?;
    if owner == euid() {
        return Ok(());
    }
    let below: Vec<PathBuf> = fs::read_dir(dir)
        .and_then(|rd| rd.map(|e| e.map(|e| e.path())).collect())
        .map_err(|e| prepare(&format!("listing {}", dir.display()), e))?;
    hand_over(&below, euid(), owner)
}

/// A private writable layer: `dir/upper` holds what the runs changed, `dir/work` is the
/// overlay's. Given to [`layer_owner`] while it lives; its files go back to the caller when
/// it is dropped.
#[derive(Debug)]
pub struct Layer {
    dir: PathBuf,
}

impl Layer {
    /// A new layer at `dir` (which must not exist).
    pub fn prepare(dir: &Path) -> Result<Layer, SandboxError> {
        let make = |p: &Path| {
            fs::create_dir_all(p).map_err(|e| prepare(&format!("creating {}", p.display()), e))
        };
        for sub in ["upper", "work"] {
            make(&dir.join(sub))?;
        }
        let owner = layer_owner();
        if owner != euid() {
            for p in [dir.to_path_buf(), dir.join("upper"), dir.join("work")] {
                lchown(&p, Some(owner), Some(owner))
                    .map_err(|e| prepare(&format!("changing the owner of {}", p.display()), e))?;
            }
        }
        Ok(Layer {
            dir: dir.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// What the runs changed: the overlay's upper directory.
    pub fn upper(&self) -> PathBuf {
        self.dir.join("upper")
    }
}

impl Drop for Layer {
    fn drop(&mut self) {
        // The overlay's own directory (`work/work`, mode 000) would stop the removal of the
        // work directory by a caller who is not root.
        for e in fs::read_dir(self.dir.join("work"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let _ = fs::set_permissions(e.path(), fs::Permissions::from_mode(0o700));
        }
        let owner = layer_owner();
        if owner != euid()
            && let Err(e) = hand_over(std::slice::from_ref(&self.dir), owner, euid())
        {
            tracing::debug!("sandbox: cannot take back {}: {e}", self.dir.display());
        }
    }
}

/// What a layered mount needs: a confined run, the shared directory owned by
/// [`layer_owner`], the layer's `upper/` and `work/` on one filesystem.
pub(super) fn check(lower: &Path, layer: &Path, confined: bool) -> Result<(), SandboxError> {
    let bad = |why: String| {
        Err(SandboxError::InvalidSpec(format!(
            "cannot show {} under the layer {}: {why}",
            lower.display(),
            layer.display()
        )))
    };
    if !confined {
        return bad("layers are for confined runs only".into());
    }
    let owner = layer_owner();
    match fs::metadata(lower) {
        Ok(m) if m.uid() == owner => {}
        Ok(m) => return bad(format!("it is uid {}'s, not {owner}'s", m.uid())),
        Err(e) => return bad(e.to_string()),
    }
    let dev = |p: PathBuf| {
        fs::metadata(&p)
            .ok()
            .filter(|m| m.is_dir())
            .map(|m| m.dev())
    };
    match (dev(layer.join("upper")), dev(layer.join("work"))) {
        (Some(a), Some(b)) if a == b => Ok(()),
        _ => bad("its upper/ and work/ are not directories of one filesystem".into()),
    }
}

/// Why confined runs here cannot be given layered mounts.
#[derive(Debug, Clone, thiserror::Error)]
#[error("no private layers here: {0}")]
pub struct NoLayers(pub String);

/// Whether confined runs here can be given layered mounts (a kernel with overlays in user
/// namespaces, a filesystem under `scratch` with user extended attributes): tried once per
/// process with a real confined run in a directory under `scratch`; `Err` says why not.
pub fn layers_available(scratch: &Path) -> Result<(), NoLayers> {
    static AVAILABLE: OnceLock<Result<(), NoLayers>> = OnceLock::new();
    AVAILABLE
        .get_or_init(|| {
            let tried = try_layer(scratch);
            if let Err(why) = &tried {
                tracing::info!("sandbox: {why}: each instance gets a copy of its environment");
            }
            tried
        })
        .clone()
}

/// A confined run that appends to a file of a layered directory, then the checks that the
/// change went to the layer only.
fn try_layer(scratch: &Path) -> Result<(), NoLayers> {
    fs::create_dir_all(scratch).map_err(|e| NoLayers(format!("{}: {e}", scratch.display())))?;
    let dir = tempfile::Builder::new()
        .prefix(".tmp-layer-probe-")
        .tempdir_in(scratch)
        .map_err(|e| NoLayers(format!("{}: {e}", scratch.display())))?;
    let shared = dir.path().join("shared");
    let lower = shared.join("lower");
    let file = lower.join("file");
    let io = |p: &Path, e: std::io::Error| NoLayers(format!("{}: {e}", p.display()));
    fs::create_dir_all(&lower).map_err(|e| io(&lower, e))?;
    fs::write(&file, "lower\n").map_err(|e| io(&file, e))?;
    give_to_layer_owner(&shared, layer_owner()).map_err(|e| NoLayers(e.to_string()))?;
    let layer = Layer::prepare(&dir.path().join("layer")).map_err(|e| NoLayers(e.to_string()))?;
    let at = Path::new("/swe-ark/layer-probe");
    let mut spec = Spec::new("/bin/sh", at, dir.path().join("out"));
    spec.args = vec!["-c".into(), "echo upper >> file && mkdir new".into()];
    spec.confine = Some(Confine::new());
    spec.mounts = vec![Mount::layered(&lower, at, layer.path())];
    let outcome = super::run(&spec).map_err(|e| NoLayers(e.to_string()))?;
    let printed = fs::read_to_string(dir.path().join("out")).unwrap_or_default();
    if !outcome.success() {
        return Err(NoLayers(format!(
            "a run with a layer failed: {}",
            printed.trim()
        )));
    }
    let changed = fs::read_to_string(layer.upper().join("file")).unwrap_or_default();
    let kept = fs::read_to_string(&file).unwrap_or_default();
    if changed != "lower\nupper\n" || kept != "lower\n" || !layer.upper().join("new").is_dir() {
        return Err(NoLayers(format!(
            "a run's change did not go to its layer alone (layer: {changed:?}, shared: {kept:?})"
        )));
    }
    Ok(())
}
