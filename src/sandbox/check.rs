//! What a [`Spec`] must be before anything is prepared for it, and the clean environment the
//! command gets.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::Path;

use super::{DEFAULT_PATH, Mount, RUN_HOME, SandboxError, Spec, is_host_name};

pub(super) fn check(spec: &Spec) -> Result<(), SandboxError> {
    if let Some(c) = &spec.confine {
        c.check(&spec.cwd, &spec.mounts)?;
    }
    for m in &spec.mounts {
        check_mount(m)?;
        if let Some(layer) = &m.layer {
            super::layer::check(&m.host, layer, spec.confine.is_some())?;
        }
    }
    if let Some(tmp) = &spec.tmp
        && (!tmp.is_absolute() || !tmp.is_dir())
    {
        return Err(SandboxError::InvalidSpec(format!(
            "cannot show {} as /tmp: it is not an existing directory's absolute path",
            tmp.display()
        )));
    }
    for (from, to) in &spec.binds {
        // The target as the run sees it: a file under a mount is the mount's.
        for path in [from.clone(), spec.host_path(to)] {
            if !path.is_absolute() || !path.is_file() {
                return Err(SandboxError::InvalidSpec(format!(
                    "cannot show {} in place of {}: {} is not an existing file's absolute path",
                    from.display(),
                    to.display(),
                    path.display()
                )));
            }
        }
    }
    for path in &spec.hidden {
        let file = std::fs::metadata(path);
        if !path.is_absolute() || file.as_ref().map_or(true, |m| m.is_dir()) {
            return Err(SandboxError::InvalidSpec(format!(
                "cannot hide {}: it is not the absolute path of an existing file",
                path.display()
            )));
        }
    }
    for name in spec.hosts.keys() {
        if !is_host_name(name) {
            return Err(SandboxError::InvalidSpec(format!(
                "`{name}` is not a valid host name for /etc/hosts"
            )));
        }
    }
    for (key, value) in &spec.env {
        if key.is_empty() || key.contains('=') || key.contains('\0') {
            return Err(SandboxError::InvalidSpec(format!(
                "`{key}` is not a valid environment variable name"
            )));
        }
        if value.contains('\0') {
            return Err(SandboxError::InvalidSpec(format!(
                "the value of {key} contains a NUL byte"
            )));
        }
    }
    match fs::metadata(spec.host_path(&spec.cwd)) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(SandboxError::Cwd {
            path: spec.cwd.clone(),
            source: io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
        }),
        Err(source) => Err(SandboxError::Cwd {
            path: spec.cwd.clone(),
            source,
        }),
    }
}

/// A mount's host side must be an existing directory's absolute path; its place inside an
/// absolute path of its own, not the root and not where the sandbox puts its own.
fn check_mount(m: &Mount) -> Result<(), SandboxError> {
    let plain = |p: &Path| {
        p.is_absolute()
            && p.components()
                .all(|c| !matches!(c, std::path::Component::ParentDir))
    };
    if !plain(&m.host) || !m.host.is_dir() {
        return Err(SandboxError::InvalidSpec(format!(
            "cannot mount {} in a run: it is not an existing directory's absolute path",
            m.host.display()
        )));
    }
    let reserved = ["/proc", "/dev", "/sys", "/tmp", RUN_HOME];
    if !plain(&m.at) || m.at == Path::new("/") || reserved.iter().any(|r| m.at.starts_with(r)) {
        return Err(SandboxError::InvalidSpec(format!(
            "cannot mount {} at {} in a run: the place must be an absolute path of its own, \
             not / or under {}",
            m.host.display(),
            m.at.display(),
            reserved.join(", ")
        )));
    }
    Ok(())
}

/// The clean base environment, then the caller's variables.
pub(super) fn environment(spec: &Spec, home: &Path) -> BTreeMap<OsString, OsString> {
    let mut env: BTreeMap<OsString, OsString> = [
        ("PATH", OsString::from(DEFAULT_PATH)),
        ("HOME", home.as_os_str().to_owned()),
        ("TZ", "UTC".into()),
        ("PYTHONHASHSEED", "0".into()),
        ("LANG", "C.UTF-8".into()),
        ("LC_ALL", "C.UTF-8".into()),
    ]
    .into_iter()
    .map(|(k, v)| (OsString::from(k), v))
    .collect();
    for (key, value) in &spec.env {
        env.insert(key.into(), value.into());
    }
    env
}
