//! The layering of docs/ARCHITECTURE.md, kept: a module of `src/` uses only modules of lower
//! layers (no arrow up, none sideways). Reads the source as text: every `crate::NAME` outside
//! comments and `#[cfg(test)]` modules.

use std::collections::BTreeMap;
use std::path::Path;

/// docs/ARCHITECTURE.md, "Layers".
const LAYERS: &[(u32, &[&str])] = &[
    (12, &["cli", "main", "lib"]),
    (11, &["shard"]),
    (10, &["archive", "demo"]),
    (9, &["pack", "release"]),
    (8, &["validate", "replay"]),
    (7, &["harness"]),
    (6, &["context"]),
    (5, &["env", "collect", "text", "plan"]),
    (4, &["store"]),
    (3, &["mirror"]),
    (2, &["bundle", "manifest"]),
    (1, &["dataset", "logparse", "vcs", "sandbox", "remote"]),
    (
        0,
        &[
            "digest",
            "fsutil",
            "gitcmd",
            "failpoint",
            "progress",
            "units",
            "verdict",
            "workers",
            "local_server",
            "shell",
        ],
    ),
];

/// The machinery of one kind of context (docs/ARCHITECTURE.md, "Context kinds"): only
/// `context` reaches it, and the `env` verb of the command line, whose options are the
/// Python kind's own. Everything else goes through `context::Kind`, so that a new language
/// is an implementation in `context/` and its manifests.
const KIND_MACHINERY: &[&str] = &["env"];
const KIND_USERS: &[&str] = &["context", "cli/env/"];

fn layer_of(module: &str) -> Option<u32> {
    LAYERS
        .iter()
        .find(|(_, names)| names.contains(&module))
        .map(|(l, _)| *l)
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The `crate::NAME` uses of `text` outside comments and test modules, with their lines.
fn uses(text: &str) -> Vec<(usize, String)> {
    let code = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            let name: String = rest[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.push((n + 1, name));
            rest = &rest[i + 7..];
        }
    }
    out
}

#[test]
fn no_module_uses_one_of_its_own_layer_or_above() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut bad = Vec::new();
    let mut unplaced = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let module = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        let Some(own) = layer_of(&module) else {
            unplaced.insert(module, rel.display().to_string());
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        for (line, used) in uses(&text) {
            if used == module {
                continue;
            }
            match layer_of(&used) {
                Some(l) if l < own => {}
                Some(l) => bad.push(format!(
                    "src/{}:{line}: {module} (layer {own}) uses {used} (layer {l})",
                    rel.display()
                )),
                None => {
                    unplaced.insert(used, format!("src/{}:{line}", rel.display()));
                }
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules with no layer (give them one in tests/layers.rs and docs/ARCHITECTURE.md): {unplaced:?}"
    );
    assert!(bad.is_empty(), "arrows up or sideways:\n{}", bad.join("\n"));
}

#[test]
fn only_the_context_kinds_use_a_kinds_machinery() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut bad = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().display().to_string();
        let module = rel.split('/').next().unwrap().trim_end_matches(".rs");
        if KIND_MACHINERY.contains(&module) || KIND_USERS.iter().any(|u| rel.starts_with(u)) {
            continue;
        }
        let own = layer_of(module).unwrap_or(0);
        let text = std::fs::read_to_string(f).unwrap();
        for (line, used) in uses(&text) {
            if KIND_MACHINERY.contains(&used.as_str()) && own > layer_of("context").unwrap() {
                bad.push(format!("src/{rel}:{line}: uses crate::{used}"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "modules above `context` that reach a kind's machinery (go through context::Kind):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_reader_finds_uses_and_skips_comments_and_tests() {
    let text = "use crate::store::Ark; // crate::cli\n/// crate::demo\nfn f() { crate::vcs::x() }\n#[cfg(test)]\nmod t { use crate::cli; }\n";
    let found: Vec<String> = uses(text).into_iter().map(|(_, n)| n).collect();
    assert_eq!(found, ["store", "vcs"]);
}
