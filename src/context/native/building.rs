//! A native lock's environment, built offline from its objects into `envs/<lock id>/` (a
//! cache, safe to delete): every `.deb` unpacked (`dpkg-deb -x`, no root and no maintainer
//! scripts) into one prefix, `root/`, shared read-only by the context's instances at
//! [`layout::ENVIRONMENT`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::NativeError;
use super::document::{NativeLock, digest};
use crate::context::{Built, ContextError, RunEnvironment, layout};
use crate::digest::Sha256Digest;
use crate::sandbox::Mount;
use crate::store::ObjectStore;

/// What [`build`] made (or found made).
#[derive(Debug, Clone)]
pub struct NativeBuilt {
    /// The prefix the packages were unpacked into (`root/usr/bin/cmake`).
    pub root: PathBuf,
    /// Each package's files, by name (what `dpkg-deb -c` lists): which programs it brings.
    pub files: BTreeMap<String, Vec<String>>,
}

// The name every kind gives its record of a built environment (`env ls` reads it).
const RECORD: &str = "env.json";

/// How this swe-ark lays an environment out beyond the packages' own files (1: libtool's data
/// for `_lt_pkgdatadir`; 2: autom4te.cfg naming the prefix): one built otherwise is built
/// again.
const LAYOUT: u32 = 2;

#[derive(serde::Serialize, serde::Deserialize)]
struct Record {
    files: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    layout: u32,
}

fn from_record(dir: &Path) -> Option<NativeBuilt> {
    let record: Record = serde_json::from_slice(&std::fs::read(dir.join(RECORD)).ok()?).ok()?;
    if record.layout != LAYOUT {
        return None;
    }
    Some(NativeBuilt {
        root: dir.join("root"),
        files: record.files,
    })
}

/// The environment of `lock` (whose id is `id`) under `cache_root/envs/`, built from
/// `objects` alone when it is not there yet.
pub fn build(
    lock: &NativeLock,
    id: &Sha256Digest,
    objects: &ObjectStore,
    cache_root: &Path,
) -> Result<NativeBuilt, NativeError> {
    let io = |p: &Path, e: std::io::Error| NativeError::Io(format!("{}: {e}", p.display()));
    let root = std::path::absolute(cache_root).map_err(|e| io(cache_root, e))?;
    let envs = root.join("envs");
    let dir = envs.join(id.hex());
    if let Some(built) = from_record(&dir) {
        return Ok(built);
    }
    std::fs::create_dir_all(&envs).map_err(|e| io(&envs, e))?;
    let staged = tempfile::Builder::new()
        .prefix(".tmp-build-")
        .tempdir_in(&envs)
        .map_err(|e| io(&envs, e))?;
    let prefix = staged.path().join("root");
    std::fs::create_dir_all(&prefix).map_err(|e| io(&prefix, e))?;
    let mut files = BTreeMap::new();
    for p in &lock.packages {
        let oid = digest(&p.sha256)?;
        let what = format!("{} {}", p.name, p.version);
        let fail = |detail: String| NativeError::Unpack {
            package: what.clone(),
            detail,
        };
        let deb = objects.ensure(&oid).map_err(|e| fail(e.to_string()))?;
        objects.check(&oid).map_err(|e| fail(e.to_string()))?;
        let listed = dpkg_deb(&["-c"], &deb, None, &what)?;
        dpkg_deb(&["-x"], &deb, Some(&prefix), &what)?;
        files.insert(p.name.clone(), listing(&listed));
    }
    libtool_data(&prefix).map_err(|e| io(&prefix, e))?;
    autom4te_cfg(&prefix).map_err(|e| io(&prefix, e))?;
    let record = serde_json::to_vec_pretty(&Record {
        files,
        layout: LAYOUT,
    })
    .map_err(|e| NativeError::Io(e.to_string()))?;
    std::fs::write(staged.path().join(RECORD), record).map_err(|e| io(staged.path(), e))?;
    let staged = staged.keep();
    // A directory left without its record (a crash, another swe-ark's) is only a cache.
    if dir.exists() && from_record(&dir).is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    match std::fs::rename(&staged, &dir) {
        Ok(()) => from_record(&dir)
            .ok_or_else(|| NativeError::Io(format!("{}: built, then not found", dir.display()))),
        // Another run built it first: theirs is as good.
        Err(_) if dir.join(RECORD).is_file() => {
            let _ = std::fs::remove_dir_all(&staged);
            build(lock, id, objects, cache_root)
        }
        Err(e) => Err(io(&dir, e)),
    }
}

/// Where [`LIBTOOL_DATA`] lays libtool's files out, under the prefix.
const LIBTOOL_DATA: &str = "usr/share/libtool/swe-ark-pkgdata";

/// libtoolize names `/usr/share/libtool/build-aux`, `/usr/share/libtool` and
/// `/usr/share/aclocal` as they were compiled in, and can be pointed elsewhere only all at
/// once, by `_lt_pkgdatadir`, as a libtool source tree lays them out (`build-aux`, `libltdl`,
/// `m4`): that layout made of relative links into the prefix, when libtool is in it.
fn libtool_data(prefix: &Path) -> std::io::Result<()> {
    if !prefix.join("usr/share/libtool/build-aux").is_dir() {
        return Ok(());
    }
    let dir = prefix.join(LIBTOOL_DATA);
    std::fs::create_dir_all(&dir)?;
    for (name, target) in [
        ("build-aux", "../build-aux"),
        ("libltdl", ".."),
        ("m4", "../../aclocal"),
    ] {
        std::os::unix::fs::symlink(target, dir.join(name))?;
    }
    Ok(())
}

/// autom4te reads autoconf's own macros (m4sugar) from the include paths its configuration
/// names, `/usr/share/autoconf` as Debian built it, which `AUTOM4TE_CFG` can replace only
/// whole, and which aclocal's calls of autom4te need too: the prefix's copy names them where
/// a run sees the prefix. A machine without autoconf of its own has none there.
fn autom4te_cfg(prefix: &Path) -> std::io::Result<()> {
    let cfg = prefix.join("usr/share/autoconf/autom4te.cfg");
    let Ok(text) = std::fs::read_to_string(&cfg) else {
        return Ok(());
    };
    let moved = text.replace(
        "'/usr/share/autoconf'",
        &format!("'{}/usr/share/autoconf'", layout::ENVIRONMENT),
    );
    std::fs::write(&cfg, moved)
}

/// `dpkg-deb ARGS DEB [DEST]` on `package`'s file: its output, or what it said when it
/// failed.
fn dpkg_deb(
    args: &[&str],
    deb: &Path,
    dest: Option<&Path>,
    package: &str,
) -> Result<String, NativeError> {
    let fail = |detail: String| NativeError::Unpack {
        package: package.to_string(),
        detail,
    };
    let mut cmd = Command::new("dpkg-deb");
    cmd.args(args).arg(deb);
    if let Some(d) = dest {
        cmd.arg(d);
    }
    let out = cmd.output().map_err(|e| fail(format!("dpkg-deb: {e}")))?;
    if !out.status.success() {
        return Err(fail(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The paths of a `dpkg-deb -c` listing (`./usr/bin/cmake`, symlinks by their own name).
fn listing(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let path = l.split_whitespace().nth(5)?;
            Some(path.trim_start_matches('.').to_string())
        })
        .filter(|p| !p.ends_with('/'))
        .collect()
}

/// The programs (`usr/bin/*`) of the packages `names` in `built`'s prefix.
pub fn programs_of(built: &NativeBuilt, names: &[String]) -> Vec<PathBuf> {
    names
        .iter()
        .filter_map(|n| built.files.get(n))
        .flatten()
        .filter(|p| p.starts_with("/usr/bin/") || p.starts_with("/bin/"))
        .map(|p| built.root.join(p.trim_start_matches('/')))
        .filter(|p| p.is_file())
        .collect()
}

/// The variables a program of the prefix at `root` needs to find its libraries and its own
/// files: the loader's path, and, for autotools (perl scripts that name `/usr/share/...`),
/// where theirs are.
pub fn vars(root: &str) -> Vec<(String, String)> {
    let lib = [
        "usr/lib/x86_64-linux-gnu",
        "lib/x86_64-linux-gnu",
        "usr/lib",
    ]
    .map(|d| format!("{root}/{d}"))
    .join(":");
    let share = format!("{root}/usr/share");
    let mut out = vec![("LD_LIBRARY_PATH".to_string(), lib)];
    let autoconf = [
        ("AUTOCONF", format!("{root}/usr/bin/autoconf")),
        ("AUTOHEADER", format!("{root}/usr/bin/autoheader")),
        ("AUTOM4TE", format!("{root}/usr/bin/autom4te")),
        ("AUTOM4TE_CFG", format!("{share}/autoconf/autom4te.cfg")),
        ("autom4te_perllibdir", format!("{share}/autoconf")),
        ("AC_MACRODIR", format!("{share}/autoconf")),
        (
            "trailer_m4",
            format!("{share}/autoconf/autoconf/trailer.m4"),
        ),
        ("ACLOCAL", format!("{root}/usr/bin/aclocal")),
        ("AUTOMAKE", format!("{root}/usr/bin/automake")),
        ("ACLOCAL_PATH", format!("{share}/aclocal")),
        // automake's own macros, where aclocal looks only at the place it was built for.
        ("ACLOCAL_AUTOMAKE_DIR", format!("{share}/aclocal-1.16")),
        ("LIBTOOLIZE", format!("{root}/usr/bin/libtoolize")),
        ("_lt_pkgdatadir", format!("{root}/{LIBTOOL_DATA}")),
        ("M4", format!("{root}/usr/bin/m4")),
    ];
    for (k, v) in autoconf {
        // Debian's `aclocal` and `automake` are alternatives its maintainer scripts link,
        // which an unpacked .deb lacks: the versioned program is the one.
        let versioned = format!("{v}-1.16");
        if Path::new(&v).exists() {
            out.push((k.to_string(), v));
        } else if matches!(k, "ACLOCAL" | "AUTOMAKE") && Path::new(&versioned).exists() {
            out.push((k.to_string(), versioned));
        }
    }
    let perl: Vec<String> = ["autoconf", "automake-1.16"]
        .iter()
        .map(|d| format!("{share}/{d}"))
        .filter(|d| Path::new(d).is_dir())
        .collect();
    if !perl.is_empty() {
        out.push(("PERL5LIB".to_string(), perl.join(":")));
        out.push((
            "AUTOMAKE_LIBDIR".to_string(),
            format!("{share}/automake-1.16"),
        ));
    }
    out
}

impl Built for NativeBuilt {
    /// The prefix at [`layout::ENVIRONMENT`], read-only, first on `PATH`, its libraries on
    /// the loader's path; the compiler and the C library are the machine's.
    fn for_run(&self, _work: &Path, _base_commit: &str) -> Result<RunEnvironment, ContextError> {
        // The variables name the prefix as the run sees it; whether a tool is there is read
        // off the host's copy.
        let host = self.root.to_string_lossy().to_string();
        let vars = vars(&host)
            .into_iter()
            .map(|(k, v)| (k, v.replace(&host, layout::ENVIRONMENT)))
            .collect();
        Ok(RunEnvironment {
            mounts: vec![Mount::new(&self.root, layout::ENVIRONMENT, false)],
            vars,
            path: vec![
                format!("{}/usr/bin", layout::ENVIRONMENT),
                format!("{}/bin", layout::ENVIRONMENT),
            ],
            service_envs: BTreeMap::new(),
            prepare: String::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_gives_the_files_of_a_package() {
        let text = "drwxr-xr-x root/root         0 2022-11-30 12:00 ./\n\
-rwxr-xr-x root/root  10 2022-11-30 12:00 ./usr/bin/cmake\n\
lrwxrwxrwx root/root   0 2022-11-30 12:00 ./usr/bin/cc -> gcc\n";
        assert_eq!(listing(text), vec!["/usr/bin/cmake", "/usr/bin/cc"]);
    }

    #[test]
    fn aclocal_and_automake_are_their_versioned_programs_when_no_alternative_links_them() {
        let t = tempfile::tempdir().unwrap();
        let bin = t.path().join("usr/bin");
        std::fs::create_dir_all(&bin).unwrap();
        for p in ["aclocal-1.16", "automake-1.16", "autoconf"] {
            std::fs::write(bin.join(p), "#!/usr/bin/perl").unwrap();
        }
        let vars: BTreeMap<String, String> =
            vars(&t.path().to_string_lossy()).into_iter().collect();
        assert!(
            vars["ACLOCAL"].ends_with("/usr/bin/aclocal-1.16"),
            "{vars:?}"
        );
        assert!(
            vars["AUTOMAKE"].ends_with("/usr/bin/automake-1.16"),
            "{vars:?}"
        );
        assert!(vars["AUTOCONF"].ends_with("/usr/bin/autoconf"), "{vars:?}");
    }

    #[test]
    fn libtools_data_is_laid_out_for_lt_pkgdatadir_when_libtool_is_there() {
        let t = tempfile::tempdir().unwrap();
        let prefix = t.path();
        libtool_data(prefix).unwrap();
        assert!(
            !prefix.join(LIBTOOL_DATA).exists(),
            "no libtool, nothing made"
        );
        std::fs::create_dir_all(prefix.join("usr/share/libtool/build-aux")).unwrap();
        std::fs::write(prefix.join("usr/share/libtool/build-aux/ltmain.sh"), "#").unwrap();
        std::fs::create_dir_all(prefix.join("usr/share/aclocal")).unwrap();
        std::fs::write(prefix.join("usr/share/aclocal/libtool.m4"), "dnl").unwrap();
        libtool_data(prefix).unwrap();
        let data = prefix.join(LIBTOOL_DATA);
        let cfg = prefix.join("usr/share/autoconf/autom4te.cfg");
        std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
        std::fs::write(&cfg, "args: --prepend-include '/usr/share/autoconf'\n").unwrap();
        autom4te_cfg(prefix).unwrap();
        assert_eq!(
            std::fs::read_to_string(&cfg).unwrap(),
            "args: --prepend-include '/env/usr/share/autoconf'\n"
        );
        assert!(data.join("build-aux/ltmain.sh").is_file());
        assert!(data.join("m4/libtool.m4").is_file());
        assert!(data.join("libltdl/build-aux").is_dir());
        let vars = vars(&prefix.to_string_lossy());
        assert!(
            vars.iter()
                .any(|(k, v)| k == "_lt_pkgdatadir" && v.ends_with(LIBTOOL_DATA))
        );
    }
}
