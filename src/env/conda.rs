//! SWE-bench's conda environment files, mapped to pip requirements.
//!
//! For some contexts (every pydata/xarray version, matplotlib 3.5–3.9) SWE-bench builds the
//! environment from the repository's own conda environment file (`conda env update -f
//! environment.yml`), then installs `pip_packages` with pip. swe-ark has no conda: the file's
//! dependencies are read and each conda package becomes the PyPI project that provides the
//! same Python distribution ([`PYPI_NAMES`]), or is left out with the reason ([`LEFT_OUT`]):
//! the interpreter and installers the lock already sets, C libraries that PyPI's wheels carry
//! inside them, and packages PyPI does not have. Conda's version specs become PEP 440 ones
//! (`numpy=1.21` is conda's "1.21.*"). The file's `pip:` section is taken as it is.
//!
//! What was mapped and what was left out is written in the lock (docs/ENVIRONMENTS.md).

use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

/// conda-forge packages whose PyPI counterpart has another name, or is several projects: a
/// conda package brings the C libraries it links, which on PyPI are wheels of their own. Any
/// other name maps to the PyPI project of the same name (PEP 503-normalized names compare
/// equal: `netcdf4` is `netCDF4`).
pub const PYPI_NAMES: &[(&str, &[&str])] = &[
    // ecCodes, the C library conda-forge's cfgrib and eccodes bring: PyPI's ecmwflibs wheels
    // carry it, and the eccodes bindings find it there (findlibs).
    ("cfgrib", &["cfgrib", "ecmwflibs"]),
    ("dask-core", &["dask"]),
    ("eccodes", &["ecmwflibs"]),
    ("iris", &["scitools-iris"]),
    ("matplotlib-base", &["matplotlib"]),
    ("msgpack-python", &["msgpack"]),
    ("pyqt", &["PyQt5"]),
    ("pytables", &["tables"]),
    ("python-eccodes", &["eccodes", "ecmwflibs"]),
    ("python-graphviz", &["graphviz"]),
    ("pytorch", &["torch"]),
];

/// conda packages with no pip counterpart in a Python environment, and why.
pub const LEFT_OUT: &[(&str, &str)] = &[
    ("python", "the interpreter is the context's"),
    ("pip", "the installers are the lock's"),
    (
        "setuptools-scm-git-archive",
        "a setuptools_scm plugin conda-forge packages separately",
    ),
    ("hdf5", "a C library: h5py's and netCDF4's wheels carry it"),
    ("libnetcdf", "a C library: netCDF4's wheels carry it"),
    ("cdms2", "not on PyPI (conda-forge only)"),
    ("gtk4", "a system library"),
    (
        "pygobject",
        "needs the system's GObject introspection libraries to build",
    ),
    (
        "graphviz",
        "the Graphviz program on conda-forge; PyPI's graphviz is Python bindings",
    ),
    (
        "wxpython",
        "PyPI has it for Linux only as source needing GTK development files",
    ),
    ("compilers", "the build toolchain"),
    ("c-compiler", "the build toolchain"),
    ("cxx-compiler", "the build toolchain"),
    ("fortran-compiler", "the build toolchain"),
    ("make", "a system program"),
    ("pkg-config", "a system program"),
    ("ghostscript", "a system program"),
    ("inkscape", "a system program"),
    ("ffmpeg", "a system program"),
    ("imagemagick", "a system program"),
    ("texlive-core", "a system program"),
];

/// Entries of [`LEFT_OUT`] that an environment made with pip has all the same, another way:
/// the interpreter and installers, C libraries inside PyPI's wheels, build tools and
/// plugins. The others (conda-only packages, system programs and libraries) are absent, and
/// a test that needs one cannot pass here ([`absent_in`]).
const PROVIDED_OTHERWISE: &[&str] = &[
    "python",
    "pip",
    "setuptools-scm-git-archive",
    "hdf5",
    "libnetcdf",
    "compilers",
    "c-compiler",
    "cxx-compiler",
    "fortran-compiler",
    "make",
    "pkg-config",
];

/// The packages of a conda environment file that an environment mapped to pip lacks, each with
/// why (its [`LEFT_OUT`] reason): `cdms2`, `not on PyPI (conda-forge only)`.
pub fn absent_in(text: &str) -> Vec<(String, &'static str)> {
    let Ok(docs) = YamlLoader::load_from_str(text) else {
        return Vec::new();
    };
    let Some(Yaml::Array(deps)) = docs.first().map(|d| &d["dependencies"]) else {
        return Vec::new();
    };
    let mut out: Vec<(String, &'static str)> = Vec::new();
    for spec in deps.iter().filter_map(Yaml::as_str) {
        let name = spec_name(spec);
        if PROVIDED_OTHERWISE.contains(&name.as_str()) || out.iter().any(|(n, _)| *n == name) {
            continue;
        }
        if let Some((_, why)) = LEFT_OUT.iter().find(|(n, _)| *n == name) {
            out.push((name, why));
        }
    }
    out
}

/// A conda match spec's package name, lowercase (`conda-forge::cdms2=3.1` is `cdms2`).
fn spec_name(spec: &str) -> String {
    spec_parts(spec).0
}

/// A conda match spec as its package name (lowercase) and its version constraint as written:
/// the comment, the channel (`conda-forge::`) and the brackets (`[build=…]`) left out.
fn spec_parts(spec: &str) -> (String, &str) {
    let spec = spec.split('#').next().unwrap_or("").trim();
    let spec = spec.rsplit("::").next().unwrap_or(spec);
    let spec = match spec.find('[') {
        Some(i) => &spec[..i],
        None => spec,
    };
    let split = spec
        .find(|c: char| c.is_whitespace() || "=<>!~".contains(c))
        .unwrap_or(spec.len());
    let (name, version) = spec.split_at(split);
    (name.trim().to_ascii_lowercase(), version)
}

/// A conda environment file, read as pip requirements.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MappedEnvironment {
    /// pip requirement strings, in the file's order (its `pip:` section last).
    pub requirements: Vec<String>,
    /// Conda dependencies not mapped: `(the dependency as written, why)`.
    pub left_out: Vec<(String, String)>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("conda environment file `{path}`: {detail}")]
pub struct CondaError {
    pub path: String,
    pub detail: String,
}

/// Reads `path` (shown as `shown`) and maps its dependencies.
pub fn map_file(path: &Path, shown: &str) -> Result<MappedEnvironment, CondaError> {
    let err = |detail: String| CondaError {
        path: shown.to_string(),
        detail,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    map_text(&text).map_err(|e| err(e.to_string()))
}

/// Why an environment file does not map to pip requirements.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    #[error("not YAML: {0}")]
    NotYaml(#[from] yaml_rust2::ScanError),
    #[error("it is empty")]
    Empty,
    #[error("it has no `dependencies` list")]
    NoDependencies,
    #[error("`dependencies` is not a list")]
    DependenciesNotAList,
    #[error("a `pip:` entry is not a string")]
    PipEntryNotAString,
    #[error("a dependency entry `{0}` is neither a package nor `pip:`")]
    BadEntry(String),
    #[error("a dependency is a number, not a package")]
    Number,
    #[error("a dependency is not a string")]
    NotAString,
}

/// Why one conda match spec is left out of the pip requirements.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeftOut {
    #[error("no package name")]
    NoName,
    /// One of [`LEFT_OUT`], with its reason.
    #[error("{0}")]
    Listed(&'static str),
    #[error("alternatives `{0}` have no pip equivalent")]
    Alternatives(String),
    #[error("version `{0}` does not parse")]
    BadVersion(String),
}

/// Maps the text of an environment file.
pub fn map_text(text: &str) -> Result<MappedEnvironment, MapError> {
    let docs = YamlLoader::load_from_str(text)?;
    let doc = docs.first().ok_or(MapError::Empty)?;
    let deps = match &doc["dependencies"] {
        Yaml::Array(a) => a,
        Yaml::BadValue | Yaml::Null => return Err(MapError::NoDependencies),
        _ => return Err(MapError::DependenciesNotAList),
    };
    let mut out = MappedEnvironment::default();
    let mut pip_section = Vec::new();
    for d in deps {
        match d {
            Yaml::String(spec) => match map_spec(spec) {
                Ok(reqs) => {
                    for r in reqs {
                        if !out.requirements.contains(&r) {
                            out.requirements.push(r);
                        }
                    }
                }
                Err(why) => out.left_out.push((spec.clone(), why.to_string())),
            },
            Yaml::Hash(h) => {
                for (k, v) in h {
                    match (k.as_str(), v) {
                        (Some("pip"), Yaml::Array(items)) => {
                            for item in items {
                                let line =
                                    item.as_str().ok_or(MapError::PipEntryNotAString)?.trim();
                                // Options (`-e .`, `--index-url`) are the repository's own
                                // development setup, not requirements.
                                if !line.is_empty() && !line.starts_with('-') {
                                    pip_section.push(line.to_string());
                                }
                            }
                        }
                        _ => {
                            return Err(MapError::BadEntry(k.as_str().unwrap_or("?").to_string()));
                        }
                    }
                }
            }
            Yaml::Integer(_) | Yaml::Real(_) => {
                return Err(MapError::Number);
            }
            _ => return Err(MapError::NotAString),
        }
    }
    out.requirements.extend(pip_section);
    Ok(out)
}

/// One conda match spec (`name`, `name=1.2`, `name >=1.2,<2`, `name=1.2=py39_0`,
/// `conda-forge::name`, `name[build=...]`) as pip requirements (the version applies to the
/// first, the package itself), or why it is left out.
pub fn map_spec(spec: &str) -> Result<Vec<String>, LeftOut> {
    let (name, version) = spec_parts(spec);
    if name.is_empty() {
        return Err(LeftOut::NoName);
    }
    if let Some((_, why)) = LEFT_OUT.iter().find(|(n, _)| *n == name) {
        return Err(LeftOut::Listed(why));
    }
    let version = conda_version(version.trim())?;
    Ok(match PYPI_NAMES.iter().find(|(n, _)| *n == name) {
        Some((_, projects)) => projects
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if i == 0 {
                    format!("{p}{version}")
                } else {
                    p.to_string()
                }
            })
            .collect(),
        None => vec![format!("{name}{version}")],
    })
}

/// A conda version constraint as PEP 440: `=1.2` and `1.2` are conda's fuzzy "1.2.*", `==1.2`
/// exact, a build string (`=1.2=py39_0`) dropped, `|` alternatives refused.
fn conda_version(v: &str) -> Result<String, LeftOut> {
    if v.is_empty() {
        return Ok(String::new());
    }
    if v.contains('|') {
        return Err(LeftOut::Alternatives(v.to_string()));
    }
    let mut parts = Vec::new();
    for c in v.split(',') {
        let c = c.trim();
        // Two-character operators before their one-character prefixes.
        let (op, rest) = ["==", ">=", "<=", "!=", "~=", ">", "<"]
            .into_iter()
            .find_map(|op| c.strip_prefix(op).map(|r| (op, r)))
            .unwrap_or_else(|| ("fuzzy", c.strip_prefix('=').unwrap_or(c)));
        // `=1.2=build`: the build string is conda's own.
        let version = rest.split('=').next().unwrap_or("").trim();
        let version = version.split_whitespace().next().unwrap_or("");
        if version.is_empty() {
            return Err(LeftOut::BadVersion(v.to_string()));
        }
        parts.push(match op {
            // Conda's `1.21`, `1.21.*` and `1.21*` all mean "1.21 or any 1.21.x".
            "fuzzy" => format!(
                "=={}.*",
                version.trim_end_matches('*').trim_end_matches('.')
            ),
            _ => format!("{op}{version}"),
        });
    }
    Ok(parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `r` is an error that says `words`.
    #[track_caller]
    fn refused<T: std::fmt::Debug, E: std::fmt::Display>(r: Result<T, E>, words: &str) {
        let e = r.unwrap_err().to_string();
        assert!(e.contains(words), "{e}");
    }

    #[test]
    fn specs_map_to_pip() {
        for (conda, pip) in [
            ("numpy", "numpy"),
            ("numpy=1.21", "numpy==1.21.*"),
            ("numpy 1.21", "numpy==1.21.*"),
            ("numpy==1.21.0", "numpy==1.21.0"),
            ("numpy>=1.21,<2", "numpy>=1.21,<2"),
            ("numpy=1.21.0=py39h1234_0", "numpy==1.21.0.*"),
            ("conda-forge::dask-core>=2022.1", "dask>=2022.1"),
            ("matplotlib-base", "matplotlib"),
            ("iris", "scitools-iris"),
            ("pytest!=4.6.0,!=5.4.0", "pytest!=4.6.0,!=5.4.0"),
            ("lxml    # Optional dep of pydap", "lxml"),
            ("numpy=1.21.*", "numpy==1.21.*"),
        ] {
            assert_eq!(map_spec(conda), Ok(vec![pip.to_string()]), "{conda}");
        }
        assert_eq!(
            map_spec("cfgrib>=0.9"),
            Ok(vec!["cfgrib>=0.9".to_string(), "ecmwflibs".to_string()])
        );
        refused(map_spec("hdf5"), "C library");
        assert!(map_spec("python=3.10").is_err());
        assert!(map_spec("pip").is_err());
        assert!(map_spec("numpy 1.2|1.3").is_err());
    }

    #[test]
    fn files_map_with_their_pip_section_and_what_was_left_out() {
        let m = map_text(
            "name: t\nchannels:\n  - conda-forge\ndependencies:\n  - hdf5\n  - numpy=1.21\n  \
             - sparse  # sparse arrays\n  - pip\n  - pip:\n    - numbagg\n    - -e .\n",
        )
        .unwrap();
        assert_eq!(m.requirements, vec!["numpy==1.21.*", "sparse", "numbagg"]);
        assert_eq!(
            m.left_out
                .iter()
                .map(|(d, _)| d.as_str())
                .collect::<Vec<_>>(),
            vec!["hdf5", "pip"]
        );
        refused(map_text("name: t\n"), "no `dependencies`");
        refused(map_text("dependencies: 3\n"), "not a list");
        assert!(map_text(": : :\n  - [").is_err());
    }

    #[test]
    fn packages_pip_cannot_have_are_named_with_why() {
        let text = [
            "name: test",
            "channels: [conda-forge]",
            "dependencies:",
            "  - python=3.8",
            "  - pip",
            "  - hdf5",
            "  - conda-forge::cdms2=3.1",
            "  - numpy",
            "  - ffmpeg",
            "  - cdms2",
            "  - pip:",
            "      - x",
        ]
        .join("\n");
        let text = text.as_str();
        assert_eq!(
            absent_in(text),
            vec![
                ("cdms2".to_string(), "not on PyPI (conda-forge only)"),
                ("ffmpeg".to_string(), "a system program"),
            ]
        );
        assert!(absent_in("not: [yaml").is_empty());
        assert!(absent_in("name: x\n").is_empty());
    }
}
