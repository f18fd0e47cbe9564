//! A shared tree shown to swe-ark itself through an overlay (docs/SANDBOX.md, "The work
//! tree's layer"): an instance's work tree, kept once, mounted at the instance's `src/` with
//! a private writable layer. Unlike an environment's layer, which only the runs see, the
//! work tree is also what swe-ark's own steps read and write between the runs (`git apply`,
//! the tree's state between evaluations, an installed state's files), so the overlay is
//! mounted where they are: in a mount namespace of the calling thread's own, made once per
//! thread (`unshare(CLONE_NEWNS)`, which a thread of a many-threaded process may do). The
//! processes that thread starts (git, the sandbox's runs) are in it too; no other thread or
//! process sees the mount, and nothing stays mounted on the host when swe-ark ends, however
//! it ends.
//!
//! Only root may do this (the mount is in the initial user namespace, so that the runs'
//! sandbox can bind it as it binds any directory). An overlay cannot be idmapped, so as root
//! the shared tree and the layer are the runs' uid's ([`super::layer_owner`]) on disk, and
//! what swe-ark writes into the layer itself, as root, is given to that uid before each run
//! ([`TreeOverlay::give_new_files_to_runs`]).

use std::cell::RefCell;
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, lchown};
use std::path::{Path, PathBuf};

use super::{Layer, NoLayers, c_path, euid, layer_owner};

/// An overlay mounted in the calling thread's mount namespace, detached when dropped (from
/// the same thread: it is not `Send`).
#[derive(Debug)]
pub struct TreeOverlay {
    at: CString,
    merged: PathBuf,
    upper: PathBuf,
    /// Not `Send`: the mount is the thread's.
    _thread: std::marker::PhantomData<*const ()>,
}

impl TreeOverlay {
    /// Mounts `lower` (read-only) under `layer` at `at` (an existing empty directory), in the
    /// calling thread's own mount namespace. Err: why it cannot be here (not root, a
    /// container without the right to mount, a path an overlay's options cannot name, a
    /// filesystem that refuses); the caller copies the tree instead.
    pub fn mount(lower: &Path, layer: &Layer, at: &Path) -> Result<TreeOverlay, NoLayers> {
        if euid() != 0 {
            return Err(NoLayers("swe-ark is not root".into()));
        }
        let upper = layer.upper();
        let work = layer.path().join("work");
        let mut options = String::new();
        for (key, path) in [
            ("lowerdir", lower),
            ("upperdir", &upper),
            ("workdir", &work),
        ] {
            let text = path.to_str().filter(|t| !t.contains([',', ':', '\\']));
            let Some(text) = text else {
                return Err(NoLayers(format!(
                    "{} cannot be named in an overlay's options",
                    path.display()
                )));
            };
            if !options.is_empty() {
                options.push(',');
            }
            options.push_str(&format!("{key}={text}"));
        }
        private_mount_namespace()?;
        let target = c_path(at).map_err(|e| NoLayers(e.to_string()))?;
        let data = CString::new(options).map_err(|_| NoLayers("a path with a NUL byte".into()))?;
        // SAFETY: mount with C strings that outlive the call.
        let mounted = unsafe {
            libc::mount(
                c"overlay".as_ptr(),
                target.as_ptr(),
                c"overlay".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                data.as_ptr().cast(),
            )
        };
        if mounted != 0 {
            return Err(NoLayers(format!(
                "the overlay on {} was refused: {}",
                at.display(),
                io::Error::last_os_error()
            )));
        }
        Ok(TreeOverlay {
            at: target,
            merged: at.to_path_buf(),
            upper,
            _thread: std::marker::PhantomData,
        })
    }

    /// Gives what swe-ark wrote into the layer as root (a file a patch added, a directory
    /// `git apply` made) to the runs' uid, through the overlay, so that a run may change it
    /// as it may change the rest of the tree. Only the layer is walked: it holds what
    /// changed, not the tree.
    pub fn give_new_files_to_runs(&self) -> io::Result<usize> {
        let owner = layer_owner();
        if owner == euid() {
            return Ok(0);
        }
        let mut given = 0;
        let mut stack = vec![PathBuf::new()];
        while let Some(rel) = stack.pop() {
            for entry in fs::read_dir(self.upper.join(&rel))? {
                let entry = entry?;
                let rel = rel.join(entry.file_name());
                let meta = entry.metadata()?;
                if meta.is_dir() {
                    stack.push(rel.clone());
                }
                // A whiteout (a character device) stands for a removed file: nothing to give.
                if meta.uid() == owner || meta.file_type().is_char_device() {
                    continue;
                }
                lchown(self.merged.join(&rel), Some(owner), Some(owner))?;
                given += 1;
            }
        }
        Ok(given)
    }
}

impl Drop for TreeOverlay {
    fn drop(&mut self) {
        // SAFETY: umount2 with a C string that outlives the call. Detached: a process of the
        // instance that is somehow still there does not keep the tree busy.
        if unsafe { libc::umount2(self.at.as_ptr(), libc::MNT_DETACH) } != 0 {
            tracing::debug!(
                "sandbox: cannot unmount the work tree's overlay on {}: {}",
                self.merged.display(),
                io::Error::last_os_error()
            );
        }
    }
}

/// Puts the calling thread in a mount namespace of its own, once: a copy of the process's,
/// whose mounts take what the host mounts later but give nothing back (`MS_SLAVE`).
fn private_mount_namespace() -> Result<(), NoLayers> {
    thread_local! {
        static PRIVATE: RefCell<Option<Result<(), NoLayers>>> = const { RefCell::new(None) };
    }
    PRIVATE.with(|state| {
        state
            .borrow_mut()
            .get_or_insert_with(|| {
                // SAFETY: unshare and mount with constant arguments; they affect only the
                // calling thread (CLONE_FS: its root, working directory and umask become its
                // own, which a new mount namespace needs).
                unsafe {
                    if libc::unshare(libc::CLONE_NEWNS | libc::CLONE_FS) != 0 {
                        return Err(NoLayers(format!(
                            "no mount namespace of its own: {}",
                            io::Error::last_os_error()
                        )));
                    }
                    if libc::mount(
                        std::ptr::null(),
                        c"/".as_ptr(),
                        std::ptr::null(),
                        libc::MS_REC | libc::MS_SLAVE,
                        std::ptr::null(),
                    ) != 0
                    {
                        return Err(NoLayers(format!(
                            "its mount namespace could not be made a slave: {}",
                            io::Error::last_os_error()
                        )));
                    }
                }
                Ok(())
            })
            .clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    #[test]
    fn the_thread_sees_the_overlay_others_do_not_and_the_shared_tree_is_never_written() {
        if euid() != 0 {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let lower = d.path().join("lower");
        let at = d.path().join("src");
        fs::create_dir_all(lower.join("pkg")).unwrap();
        fs::create_dir(&at).unwrap();
        fs::write(lower.join("pkg/a.py"), "a = 1\n").unwrap();
        let mounted = Barrier::new(2);
        let looked = Barrier::new(2);
        let seen = std::thread::scope(|s| {
            let holder = s.spawn(|| {
                let layer = Layer::prepare(&d.path().join("layer")).unwrap();
                let overlay = TreeOverlay::mount(&lower, &layer, &at);
                mounted.wait();
                let overlay = match overlay {
                    Ok(o) => o,
                    Err(why) => {
                        eprintln!("no overlay here: {why}");
                        looked.wait();
                        return None;
                    }
                };
                fs::write(at.join("pkg/a.py"), "a = 2\n").unwrap();
                fs::write(at.join("pkg/new.py"), "").unwrap();
                fs::remove_file(at.join("pkg/new.py")).unwrap();
                fs::write(at.join("added.py"), "").unwrap();
                overlay.give_new_files_to_runs().unwrap();
                let owner = fs::metadata(at.join("added.py")).unwrap().uid();
                assert_eq!(owner, layer_owner());
                // A thread it starts is in its namespace.
                let inner = s.spawn(|| fs::read_dir(&at).unwrap().count());
                let inner = inner.join().unwrap();
                let seen = fs::read_to_string(at.join("pkg/a.py")).unwrap();
                looked.wait();
                drop(overlay);
                Some((seen, inner))
            });
            mounted.wait();
            // Another thread does not see the mount.
            assert_eq!(fs::read_dir(&at).unwrap().count(), 0);
            looked.wait();
            holder.join().unwrap()
        });
        let Some((seen, inner)) = seen else { return };
        assert_eq!(seen, "a = 2\n");
        assert_eq!(inner, 2, "pkg/ and added.py");
        assert_eq!(
            fs::read_to_string(lower.join("pkg/a.py")).unwrap(),
            "a = 1\n"
        );
        assert!(!lower.join("added.py").exists());
        assert!(d.path().join("layer/upper/added.py").exists());
    }
}
