//! Debian's package metadata as the lock reads it: the paragraphs of a Packages index (or of
//! `apt-cache show`), and a package set's dependency closure less what the machine provides.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::NativeError;

/// One package's paragraph, the fields the lock uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stanza {
    pub package: String,
    pub version: String,
    pub arch: String,
    /// `Filename:` (relative to the repository's base).
    pub filename: String,
    pub sha256: String,
    pub size: u64,
    /// `Depends:` and `Pre-Depends:`, each a list of alternatives (names only).
    pub depends: Vec<Vec<String>>,
    /// `Essential: yes` or `Priority: required`: in every Debian system.
    pub base_system: bool,
}

/// The packages every machine that runs a native context has, whatever Debian's priorities
/// say of them: the compiler and its C and C++ libraries (build-essential), and perl (which
/// autotools run, and which git needs).
pub const MACHINE_TOOLCHAIN: &[&str] = &[
    "binutils",
    "binutils-common",
    "binutils-x86-64-linux-gnu",
    "cpp",
    "cpp-12",
    "g++",
    "g++-12",
    "gcc",
    "gcc-12",
    "gcc-12-base",
    "libasan8",
    "libatomic1",
    "libbinutils",
    "libc-dev-bin",
    "libc6",
    "libc6-dev",
    "libcc1-0",
    "libcrypt-dev",
    "libgcc-12-dev",
    "libgcc-s1",
    "libgomp1",
    "libitm1",
    "liblsan0",
    "libnsl-dev",
    "libquadmath0",
    "libstdc++-12-dev",
    "libstdc++6",
    "libtirpc-dev",
    "libtsan2",
    "libubsan1",
    "linux-libc-dev",
    "make",
    "perl",
    "perl-base",
    "perl-modules-5.36",
    "libperl5.36",
];

/// Every paragraph of `text` that names a package, version, file and sha256.
pub fn parse(text: &str) -> Vec<Stanza> {
    text.split("\n\n").filter_map(paragraph).collect()
}

fn paragraph(text: &str) -> Option<Stanza> {
    let mut fields: BTreeMap<&str, String> = BTreeMap::new();
    let mut last: Option<&str> = None;
    for line in text.lines() {
        if line.starts_with([' ', '\t']) {
            if let Some(k) = last
                && let Some(v) = fields.get_mut(k)
            {
                v.push(' ');
                v.push_str(line.trim());
            }
            continue;
        }
        if let Some((k, v)) = line.split_once(':') {
            fields.insert(k.trim(), v.trim().to_string());
            last = Some(k.trim());
        }
    }
    let get = |k: &str| fields.get(k).cloned();
    let mut depends = Vec::new();
    for k in ["Pre-Depends", "Depends"] {
        if let Some(v) = fields.get(k) {
            depends.extend(v.split(',').map(alternatives).filter(|a| !a.is_empty()));
        }
    }
    Some(Stanza {
        package: get("Package")?,
        version: get("Version")?,
        arch: get("Architecture").unwrap_or_default(),
        filename: get("Filename")?,
        sha256: get("SHA256")?,
        size: get("Size")?.parse().ok()?,
        depends,
        base_system: get("Essential").as_deref() == Some("yes")
            || get("Priority").as_deref() == Some("required"),
    })
}

/// `perl:any | foo (>= 1) [amd64]` → `["perl", "foo"]`.
fn alternatives(clause: &str) -> Vec<String> {
    clause
        .split('|')
        .filter_map(|alt| {
            let name = alt.split_whitespace().next()?;
            let name = name.split(':').next().unwrap_or(name);
            (!name.is_empty()).then(|| name.to_string())
        })
        .collect()
}

/// What [`closure`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Closure {
    /// The packages to carry, by name.
    pub carried: BTreeMap<String, Stanza>,
    /// Packages met that the machine provides instead.
    pub from_machine: BTreeSet<String>,
    /// Dependencies no paragraph names (virtual packages, with no alternative that is real).
    pub unresolved: BTreeSet<String>,
}

/// The dependency closure of `wanted`, each dependency by its first alternative that has a
/// paragraph (`lookup`), stopping at packages the machine provides ([`MACHINE_TOOLCHAIN`],
/// Debian's essential and required set). A requested package that has no paragraph in
/// `index` is an error naming it.
pub fn closure(
    wanted: &[String],
    index: &str,
    mut lookup: impl FnMut(&str) -> Option<Stanza>,
) -> Result<Closure, NativeError> {
    let mut out = Closure::default();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut queue: VecDeque<String> = VecDeque::new();
    for w in wanted {
        if lookup(w).is_none() {
            return Err(NativeError::NoSuchPackage {
                package: w.clone(),
                index: index.to_string(),
            });
        }
        queue.push_back(w.clone());
    }
    while let Some(name) = queue.pop_front() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let requested = wanted.contains(&name);
        if !requested && MACHINE_TOOLCHAIN.contains(&name.as_str()) {
            out.from_machine.insert(name);
            continue;
        }
        let Some(s) = lookup(&name) else {
            out.unresolved.insert(name);
            continue;
        };
        if !requested && s.base_system {
            out.from_machine.insert(name);
            continue;
        }
        for alts in &s.depends {
            let pick = alts
                .iter()
                .find(|a| seen.contains(*a) || lookup(a).is_some())
                .unwrap_or(&alts[0]);
            queue.push_back(pick.clone());
        }
        out.carried.insert(name, s);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INDEX: &str = "Package: tool\nVersion: 1.0-1\nArchitecture: amd64\n\
Depends: libc6 (>= 2.34), libfoo | libbar, perl:any, virtual-thing\n\
Filename: pool/main/t/tool/tool_1.0-1_amd64.deb\nSize: 10\nSHA256: aa\n\n\
Package: libfoo\nVersion: 2\nArchitecture: amd64\nPre-Depends: dpkg\n\
Filename: pool/libfoo.deb\nSize: 3\nSHA256: bb\n\n\
Package: dpkg\nVersion: 1.21\nEssential: yes\nPriority: required\n\
Filename: pool/dpkg.deb\nSize: 3\nSHA256: cc\n\n\
Package: libbar\nVersion: 1\nFilename: pool/libbar.deb\nSize: 3\nSHA256: dd\n";

    #[test]
    fn the_closure_follows_first_alternatives_and_stops_at_the_machine() {
        let all = parse(INDEX);
        assert_eq!(all.len(), 4);
        assert_eq!(all[0].depends[1], vec!["libfoo", "libbar"]);
        let find = |n: &str| all.iter().find(|s| s.package == n).cloned();
        let c = closure(&["tool".to_string()], "t", find).unwrap();
        assert_eq!(
            c.carried.keys().collect::<Vec<_>>(),
            vec!["libfoo", "tool"],
            "libbar is an alternative not taken"
        );
        assert_eq!(
            c.from_machine.iter().collect::<Vec<_>>(),
            vec!["dpkg", "libc6", "perl"]
        );
        assert_eq!(
            c.unresolved.iter().collect::<Vec<_>>(),
            vec!["virtual-thing"]
        );
        let find = |n: &str| all.iter().find(|s| s.package == n).cloned();
        let e = closure(&["nothing".to_string()], "the index", find).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Debian package `nothing` is not in the index"
        );
    }
}
