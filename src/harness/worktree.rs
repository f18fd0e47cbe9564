//! An instance's git work tree, made once per bundle and shown to each run under a private
//! layer (docs/REPLAY.md, "The work tree"). Making it (the codebase unpacked, `git add`, the
//! history fast-imported) is most of what a warm replay spends before its tests; a bundle is
//! content-addressed, so what its work tree is never changes. The first run of a bundle
//! keeps its tree in the archive's `trees/<owner>-<bundle id>/tree/`; every later run sees
//! that tree at `work/src` through an overlay with a private writable layer
//! ([`crate::sandbox::TreeOverlay`]: as root), or a copy of it (a reflink where the
//! filesystem shares extents) where an overlay cannot be had, and its record says which
//! (`worktree_mount`).
//!
//! A run holds a shared `flock` on its tree's directory while it may use it; `gc` removes
//! only trees that no run holds and no indexed bundle names ([`sweep_trees`]).

use std::collections::HashSet;
use std::fs::{self, File, TryLockError};
use std::io;
use std::path::{Path, PathBuf};

use super::{Reason, Stop};
use crate::digest::Sha256Digest;
use crate::sandbox::{self, Layer, TreeOverlay};
use crate::store::Layout;
use crate::vcs::VcsRecord;

/// Where a run's work tree comes from.
pub enum WorkTreeFrom {
    /// The codebase's files in `work/src`, made a git work tree there for this run only
    /// (validation, from a mirror; a bundle read without its id).
    Files,
    /// A bundle's tree, kept under the archive: held, or (not kept yet) made from the
    /// codebase's files in `work/src` and kept.
    Kept(KeptTree),
}

/// A bundle's kept work tree: its place, and the run's hold on it once it is whole.
pub struct KeptTree {
    dir: PathBuf,
    hold: Option<File>,
}

impl KeptTree {
    /// The kept tree of bundle `bundle` in the archive at `cache_root`, held if it is there.
    /// Its directory names the uid its files are (the runs' as root, [`sandbox::layer_owner`]).
    pub fn of_bundle(cache_root: &Path, bundle: &Sha256Digest) -> Result<KeptTree, Stop> {
        let trees = std::path::absolute(Layout::new(cache_root).trees())
            .map_err(|e| Stop(Reason::Io, format!("the archive's trees: {e}")))?;
        let dir = trees.join(format!("{}-{}", sandbox::layer_owner(), bundle.hex()));
        let hold = hold(&dir).map_err(|e| io_stop(&dir, "holding", e))?;
        Ok(KeptTree { dir, hold })
    }

    /// Whether the tree is kept (and held): the bundle's codebase need not be unpacked.
    pub fn is_kept(&self) -> bool {
        self.hold.is_some()
    }

    fn tree(&self) -> PathBuf {
        self.dir.join(TREE)
    }
}

/// The tree inside a kept tree's directory.
const TREE: &str = "tree";

/// A shared hold on the kept tree at `dir`: None when it is not there (never made, or
/// removed by a `gc` before the hold was taken).
fn hold(dir: &Path) -> io::Result<Option<File>> {
    let file = match File::open(dir) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    file.lock_shared()?;
    // A gc that removed it held it exclusively until then: what is left is not a tree.
    if !dir.join(TREE).join(".git").is_dir() {
        return Ok(None);
    }
    Ok(Some(file))
}

fn io_stop(path: &Path, doing: &str, e: io::Error) -> Stop {
    Stop(
        Reason::Io,
        format!("{doing} the work tree {}: {e}", path.display()),
    )
}

/// What [`make`] gives [`show`]: the tree to show at `work/src`, or nothing (it is there).
pub struct Made {
    kept: Option<KeptTree>,
}

/// Makes the work tree ready (any thread): with [`WorkTreeFrom::Files`], `src` made a git
/// work tree as `record` says; with a kept tree not kept yet, the same, then moved into the
/// archive and kept; with a kept one, nothing.
pub fn make(from: WorkTreeFrom, src: &Path, record: Option<&VcsRecord>) -> Result<Made, Stop> {
    let build = |dir: &Path| {
        crate::vcs::build_work_tree(dir, record).map_err(|e| Stop(Reason::Checkout, e.to_string()))
    };
    match from {
        WorkTreeFrom::Files => {
            build(src)?;
            Ok(Made { kept: None })
        }
        WorkTreeFrom::Kept(k) if k.is_kept() => Ok(Made { kept: Some(k) }),
        WorkTreeFrom::Kept(k) => {
            build(src)?;
            let kept = keep(src, k)?;
            Ok(Made { kept: Some(kept) })
        }
    }
}

/// Moves the git work tree `src` into the archive as `k`'s tree (staged, then renamed into
/// place), its files the runs' uid's, and holds it. Another run that kept the same bundle's
/// tree first wins; this one's is dropped.
fn keep(src: &Path, k: KeptTree) -> Result<KeptTree, Stop> {
    let trees = crate::fsutil::parent_dir(&k.dir);
    let staging =
        crate::fsutil::work_dir(trees, "staging-").map_err(|e| io_stop(trees, "staging in", e))?;
    let staged = staging.path().join("kept");
    fs::create_dir(&staged).map_err(|e| io_stop(&staged, "making", e))?;
    let tree = staged.join(TREE);
    if fs::rename(src, &tree).is_err() {
        // Another filesystem than the work directory's.
        crate::fsutil::copy_tree(src, &tree).map_err(|e| io_stop(&tree, "copying", e))?;
        crate::fsutil::remove_tree(src).map_err(|e| io_stop(src, "removing", e))?;
    }
    fs::create_dir(src).map_err(|e| io_stop(src, "making", e))?;
    let owner = sandbox::layer_owner();
    sandbox::give_to_layer_owner(&staged, owner).map_err(|e| Stop(Reason::Io, e.to_string()))?;
    // The index's record of each file (its owner and change time among them) made true
    // again: runs see an unchanged tree as unchanged without reading every file.
    crate::gitcmd::run(&tree, &["update-index", "-q", "--refresh"])
        .map_err(|e| Stop(Reason::Checkout, e.to_string()))?;
    match fs::rename(&staged, &k.dir) {
        Ok(()) => {}
        Err(e) if k.dir.exists() => {
            tracing::debug!("{}: kept by another run first ({e})", k.dir.display());
        }
        Err(e) => return Err(io_stop(&k.dir, "keeping", e)),
    }
    let hold = hold(&k.dir).map_err(|e| io_stop(&k.dir, "holding", e))?;
    if hold.is_none() {
        return Err(Stop(
            Reason::Io,
            format!("the work tree {} went away as it was kept", k.dir.display()),
        ));
    }
    Ok(KeptTree { dir: k.dir, hold })
}

/// The work tree as a run has it: how it was given, and what must live as long as the run.
/// Dropped on the thread that made it (its overlay is that thread's).
pub struct ShownTree {
    /// `overlay`, `reflink`, `copy` (a kept tree), or `built` (made for this run).
    pub how: &'static str,
    overlay: Option<TreeOverlay>,
    _layer: Option<Layer>,
    _hold: Option<File>,
}

impl ShownTree {
    /// Whether the tree's files are the runs' uid's on disk ([`sandbox::Mount::runs_own`]).
    pub fn runs_own(&self) -> bool {
        self.overlay.is_some()
    }

    /// Before a run: what swe-ark itself wrote into the tree, given to the runs' uid.
    pub fn before_run(&self) -> Result<(), Stop> {
        if let Some(o) = &self.overlay {
            o.give_new_files_to_runs().map_err(|e| {
                Stop(
                    Reason::Io,
                    format!("giving the work tree's new files to the runs: {e}"),
                )
            })?;
        }
        Ok(())
    }
}

/// Shows the made tree at `work/src` (on the thread that runs the instance): under an
/// overlay where this thread can mount one and `whole_copy` is not asked for (a work
/// directory kept for inspection shows the whole tree), else a copy.
pub fn show(made: Made, work: &Path, whole_copy: bool) -> Result<ShownTree, Stop> {
    let Some(kept) = made.kept else {
        return Ok(ShownTree {
            how: "built",
            overlay: None,
            _layer: None,
            _hold: None,
        });
    };
    let src = work.join("src");
    let lower = kept.tree();
    if !whole_copy {
        let layer = Layer::prepare(&work.join("tree-layer"))
            .map_err(|e| Stop(Reason::Sandbox, e.to_string()))?;
        match TreeOverlay::mount(&lower, &layer, &src) {
            Ok(overlay) => {
                return Ok(ShownTree {
                    how: "overlay",
                    overlay: Some(overlay),
                    _layer: Some(layer),
                    _hold: kept.hold,
                });
            }
            Err(why) => tracing::debug!("the work tree is copied: {why}"),
        }
    }
    let how = if crate::fsutil::clones_into(&lower.join(".git").join("HEAD"), work) {
        "reflink"
    } else {
        "copy"
    };
    fs::remove_dir(&src).map_err(|e| io_stop(&src, "replacing", e))?;
    crate::fsutil::copy_tree(&lower, &src).map_err(|e| io_stop(&src, "copying", e))?;
    Ok(ShownTree {
        how,
        overlay: None,
        _layer: None,
        _hold: kept.hold,
    })
}

/// What [`sweep_trees`] removed (or, with `dry_run`, would remove), and what it left.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TreeSweep {
    /// Kept trees of bundles the index no longer names, removed, and their bytes.
    pub trees_removed: Vec<PathBuf>,
    /// Stagings that killed runs left.
    pub stagings_removed: usize,
    pub bytes: u64,
    /// Trees left because a run holds them.
    pub trees_in_use: Vec<PathBuf>,
}

/// Removes from `trees_root` the kept trees of bundles outside `live` that no run holds, and
/// the stagings that killed runs left.
pub fn sweep_trees(
    trees_root: &Path,
    live: &HashSet<Sha256Digest>,
    dry_run: bool,
) -> io::Result<TreeSweep> {
    let mut report = TreeSweep::default();
    if !trees_root.is_dir() {
        return Ok(report);
    }
    let staged = crate::fsutil::workdir::remove_stale(trees_root, dry_run)?;
    report.stagings_removed = staged.removed;
    report.bytes = staged.bytes;
    for entry in crate::fsutil::list_dir(trees_root)? {
        let bundle = entry
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.split_once('-'))
            .filter(|(owner, _)| owner.parse::<u32>().is_ok())
            .and_then(|(_, hex)| hex.parse::<Sha256Digest>().ok());
        let Some(bundle) = bundle else { continue };
        if live.contains(&bundle) {
            continue;
        }
        let file = File::open(&entry)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                report.trees_in_use.push(entry);
                continue;
            }
            Err(TryLockError::Error(e)) => return Err(e),
        }
        report.bytes += crate::fsutil::workdir::tree_bytes(&entry);
        if !dry_run {
            crate::fsutil::remove_tree(&entry)?;
        }
        report.trees_removed.push(entry);
    }
    Ok(report)
}
