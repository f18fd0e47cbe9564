//! The checkout a lock installs from, and the files of it SWE-bench reads: the first
//! requirements file (read as SWE-bench reads it) and the first conda environment file.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::env::{EnvError, asof, conda, io_err, steps};
use crate::manifest::Context;
use crate::mirror::{DEFAULT_GIT_BASE, Mirror, RepoName, SubmoduleScan};

/// The files of the checkout SWE-bench reads: the first requirements file and the first conda
/// environment file that exist.
pub(super) struct SourceFiles {
    pub(super) requirements_file: Option<String>,
    pub(super) requirements_text: Option<String>,
    pub(super) conda_file: Option<String>,
    pub(super) conda_env: Option<conda::MappedEnvironment>,
}

pub(super) fn read_source_files(ctx: &Context, src: &Path) -> Result<SourceFiles, EnvError> {
    let first_existing = |names: &[String]| names.iter().find(|n| src.join(n).is_file()).cloned();
    // The requirements file SWE-bench would read, read now: its pins pass the cutoff too.
    let requirements_file = first_existing(&ctx.requirements);
    let requirements_text = match &requirements_file {
        Some(req) => Some(swebench_requirements(src, req)?),
        None => None,
    };
    // The conda environment file SWE-bench builds from (the first that exists), as pip
    // requirements.
    let conda_file = first_existing(&ctx.conda_environment);
    let conda_env = match &conda_file {
        Some(f) => Some(conda::map_file(&src.join(f), f)?),
        None => None,
    };
    Ok(SourceFiles {
        requirements_file,
        requirements_text,
        conda_file,
        conda_env,
    })
}

/// The context's explicit `==` pins, wherever SWE-bench reads requirements from.
pub(super) fn context_pins(
    ctx: &Context,
    files: &SourceFiles,
) -> BTreeMap<String, BTreeSet<String>> {
    asof::explicit_pins(
        ctx.packages
            .iter()
            .chain(&ctx.pip_packages)
            .chain(files.conda_env.iter().flat_map(|c| &c.requirements))
            .map(String::as_str)
            .chain(files.requirements_text.iter().flat_map(|t| t.lines())),
    )
}

/// Requirements SWE-bench's harness replaces, whatever their version
/// (`swebench/harness/test_spec/python.py`, `REPLACE_REQ_PACKAGES`): every release of
/// types-pkg_resources was yanked.
const REPLACE_REQUIREMENTS: &[(&str, &str)] = &[("types-pkg_resources", "types-setuptools")];

/// SWE-bench's reading of a requirements file (`get_requirements_by_commit` and
/// `clean_requirements` of swebench 4.1.0): `-r` includes inlined (one level) before the
/// file's own lines, lines that start with `-e .`, `#` or `.[test` left out, and
/// [`REPLACE_REQUIREMENTS`] applied.
fn swebench_requirements(src: &Path, req_path: &str) -> Result<String, EnvError> {
    let path = src.join(req_path);
    let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
    let dir = Path::new(req_path).parent().unwrap_or(Path::new(""));
    let excluded = |line: &str| {
        let l = line.trim();
        ["-e .", "#", ".[test"].iter().any(|p| l.starts_with(p))
    };
    let mut original = Vec::new();
    let mut additional = Vec::new();
    for line in text.split('\n') {
        if let Some(rest) = line.trim().strip_prefix("-r") {
            let nested = src.join(dir).join(rest.trim());
            let nested_text = std::fs::read_to_string(&nested).map_err(io_err(&nested))?;
            additional.extend(
                nested_text
                    .split('\n')
                    .filter(|l| !excluded(l))
                    .map(str::to_string),
            );
        } else if !excluded(line) {
            original.push(line.to_string());
        }
    }
    additional.push(original.join("\n"));
    let mut text = additional.join("\n");
    for (from, to) in REPLACE_REQUIREMENTS {
        // An escaped name in a fixed pattern: always a valid regex.
        let re = regex::Regex::new(&format!(r"(?m)^{}([<>=!~]=?.*|$)", regex::escape(from)))
            .expect("a valid regex");
        text = re.replace_all(&text, *to).into_owned();
    }
    Ok(text)
}

/// A working tree of `commit` (with its `.git`, which setuptools_scm and friends read), its
/// submodules checked out as `git clone --recursive` leaves them, each from its own mirror (a
/// clone of it at the gitlink's commit, registered in `.git/config`, so `git submodule status`
/// finds it up to date and nothing fetches it). A submodule whose mirror is missing stays
/// empty, with a warning naming what to run: the lock goes on, and fails on its own if the
/// install needs it.
pub fn checkout(mirror: &Mirror, commit: &str, dest: &Path) -> Result<(), EnvError> {
    let git = |args: &[&str], cwd: Option<&Path>| -> Result<(), EnvError> {
        let mut cmd = crate::gitcmd::command();
        cmd.args(args);
        if let Some(d) = cwd {
            cmd.current_dir(d);
        }
        steps::run(&mut cmd, &format!("checking out {commit}")).map(|_| ())
    };
    let (m, d) = (mirror.path.to_string_lossy(), dest.to_string_lossy());
    git(
        &["clone", "--quiet", "--shared", "--no-checkout", &m, &d],
        None,
    )?;
    git(&["checkout", "--quiet", "--detach", commit], Some(dest))?;
    let mirrors_dir = mirror.path.parent().unwrap_or(&mirror.path);
    checkout_submodules(mirror, mirrors_dir, &mirror.name, commit, dest)
}

/// The submodules of `commit` (checked out at `dest`) cloned into place, recursively.
fn checkout_submodules(
    mirror: &Mirror,
    mirrors_dir: &Path,
    top: &RepoName,
    commit: &str,
    dest: &Path,
) -> Result<(), EnvError> {
    let mut scan = SubmoduleScan::new();
    let (subs, problems) = mirror.submodules_at(commit, DEFAULT_GIT_BASE, b"", &mut scan)?;
    for p in problems {
        tracing::warn!("{p}; the checkout leaves it empty");
    }
    for sub in subs {
        let m = match mirror.submodule_mirror(mirrors_dir, commit, &sub, top) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!("{e}; the checkout leaves it empty");
                continue;
            }
        };
        let at = dest.join(std::ffi::OsStr::from_bytes(&sub.path));
        let step = format!(
            "checking out submodule `{}` at {}",
            sub.shown_path(),
            sub.commit
        );
        let run = |args: &[&std::ffi::OsStr], cwd: Option<&Path>| -> Result<(), EnvError> {
            let mut cmd = crate::gitcmd::command();
            cmd.args(args);
            if let Some(d) = cwd {
                cmd.current_dir(d);
            }
            steps::run(&mut cmd, &step).map(|_| ())
        };
        // A clone of its own (no alternates): what runs in the lock's sandbox sees only the
        // checkout. git made `at` an empty directory, which a clone may go into.
        run(
            &[
                "clone".as_ref(),
                "--quiet".as_ref(),
                "--no-checkout".as_ref(),
                m.path.as_os_str(),
                at.as_os_str(),
            ],
            None,
        )?;
        run(
            &[
                "checkout".as_ref(),
                "--quiet".as_ref(),
                "--detach".as_ref(),
                sub.commit.as_ref(),
            ],
            Some(&at),
        )?;
        let key = format!("submodule.{}.url", sub.name);
        run(
            &["config".as_ref(), key.as_ref(), sub.source.url.as_ref()],
            Some(dest),
        )?;
        checkout_submodules(&m, mirrors_dir, top, &sub.commit, &at)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::is_system_command;

    #[test]
    fn requirements_are_read_as_swebench_reads_them() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("reqs")).unwrap();
        std::fs::write(
            d.path().join("reqs/dev.txt"),
            "# dev\n-r base.txt\n-e .\npytest>=6\n.[test]\ntypes-pkg_resources==0.1.3\n",
        )
        .unwrap();
        std::fs::write(d.path().join("reqs/base.txt"), "attrs\n# c\nsix\n").unwrap();
        let got = swebench_requirements(d.path(), "reqs/dev.txt").unwrap();
        assert_eq!(got, "attrs\nsix\n\npytest>=6\ntypes-setuptools\n");
        assert!(is_system_command(
            "apt-get update && apt-get install -y gcc"
        ));
        assert!(!is_system_command("sed -i 's/a/b/' setup.py"));
    }
}
