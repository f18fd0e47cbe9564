//! An instance's own `/tmp` on a tmpfs with a size limit (docs/SANDBOX.md, "The writable
//! trees"). An instance's `/tmp` must outlive each of its commands (pre-install, install, the
//! tests), as a SWE-bench container's does, so it cannot be the tmpfs of one run's root. As
//! root, swe-ark mounts a tmpfs on the instance's `tmp/` directory for the instance's
//! lifetime, and each confined run sees it as its `/tmp` ([`super::Spec::tmp`]): what a
//! prediction writes there is bounded by the size, not by the archive's disk. The mount is
//! detached when the instance ends.

use std::ffi::CString;
use std::io;
use std::path::Path;

use super::{SandboxError, c_path, euid};

/// A tmpfs mounted on a directory, detached when dropped.
#[derive(Debug)]
pub struct InstanceTmp {
    dir: CString,
}

impl InstanceTmp {
    /// Mounts a tmpfs of at most `size` bytes (mode 1777, no set-uid, no devices) on `dir`,
    /// an existing empty directory. None when swe-ark is not root, or root without the right
    /// to mount (a container): the directory then stays on the disk it is on, bounded per file
    /// only; the reason is logged.
    pub fn mount(dir: &Path, size: u64) -> Result<Option<InstanceTmp>, SandboxError> {
        if euid() != 0 {
            return Ok(None);
        }
        let target = c_path(dir)?;
        let options = CString::new(format!("mode=1777,size={size}"))
            .map_err(|_| SandboxError::InvalidSpec("tmpfs options with a NUL byte".into()))?;
        // SAFETY: mount with C strings that outlive the call.
        let mounted = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                options.as_ptr().cast(),
            )
        };
        if mounted != 0 {
            tracing::debug!(
                "sandbox: cannot mount a tmpfs on {} ({}): the instance's /tmp stays on disk",
                dir.display(),
                io::Error::last_os_error()
            );
            return Ok(None);
        }
        Ok(Some(InstanceTmp { dir: target }))
    }
}

impl Drop for InstanceTmp {
    fn drop(&mut self) {
        // SAFETY: umount2 with a C string that outlives the call. Detached: a process of the
        // instance that is somehow still there does not keep the directory busy.
        if unsafe { libc::umount2(self.dir.as_ptr(), libc::MNT_DETACH) } != 0 {
            tracing::debug!(
                "sandbox: cannot unmount the tmpfs on {}: {}",
                self.dir.to_string_lossy(),
                io::Error::last_os_error()
            );
        }
    }
}
