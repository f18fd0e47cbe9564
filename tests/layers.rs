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
    (
        1,
        &["dataset", "logparse", "vcs", "sandbox", "remote", "diff"],
    ),
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

/// Every file of `src/`, in order: its path there and its text.
fn sources() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(&src).unwrap().display().to_string();
            (rel, std::fs::read_to_string(f).unwrap())
        })
        .collect()
}

#[test]
fn only_the_context_kinds_use_a_kinds_machinery() {
    let mut bad = Vec::new();
    for (rel, text) in &sources() {
        let module = rel.split('/').next().unwrap().trim_end_matches(".rs");
        if KIND_MACHINERY.contains(&module) || KIND_USERS.iter().any(|u| rel.starts_with(u)) {
            continue;
        }
        let own = layer_of(module).unwrap_or(0);
        for (line, used) in uses(text) {
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

/// The code with comments, string and character literals blanked (their lines kept), so that
/// braces and words are the code's own.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            out.push_str(&" ".repeat(end));
            i += end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(rest.len(), |e| e + 2);
            out.extend(
                rest[..end]
                    .chars()
                    .map(|c| if c == '\n' { '\n' } else { ' ' }),
            );
            i += end;
        } else if c == b'r'
            && (rest.starts_with("r\"") || rest.starts_with("r#"))
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
        {
            let hashes = rest[1..].chars().take_while(|&c| c == '#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let start = 1 + hashes + 1;
            let end = rest[start..]
                .find(&close)
                .map_or(rest.len(), |e| start + e + close.len());
            out.extend(
                rest[..end]
                    .chars()
                    .map(|c| if c == '\n' { '\n' } else { ' ' }),
            );
            i += end;
        } else if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            out.extend(
                text[i..end]
                    .chars()
                    .map(|c| if c == '\n' { '\n' } else { ' ' }),
            );
            i = end;
        } else if c == b'\'' {
            // A character literal ('x', '\n', '\''), not a lifetime ('a).
            let lit = if let Some(escaped) = rest.strip_prefix("'\\") {
                // The escaped character first (`'\''`), then the closing quote.
                escaped.get(1..).and_then(|r| r.find('\'')).map(|e| e + 4)
            } else {
                rest.char_indices()
                    .nth(2)
                    .filter(|(_, ch)| *ch == '\'')
                    .map(|(e, _)| e + 1)
            };
            match lit {
                Some(len) => {
                    out.push_str(&" ".repeat(rest[..len].chars().count()));
                    i += len;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let ch = rest.chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// Each function of `code` (comments and literals blanked) outside test modules: its name,
/// first line and length in lines.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let end = lines
        .iter()
        .position(|l| l.trim_start().starts_with("#[cfg(test)]"))
        .unwrap_or(lines.len());
    let mut out = Vec::new();
    for (n, line) in lines[..end].iter().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(at) = words.iter().position(|w| *w == "fn") else {
            continue;
        };
        let Some(name) = words.get(at + 1).map(|w| {
            w.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect::<String>()
        }) else {
            continue;
        };
        if name.is_empty() {
            continue;
        }
        let (mut depth, mut started) = (0i64, false);
        for (k, l) in lines[n..].iter().enumerate() {
            for ch in l.chars() {
                match ch {
                    '{' => {
                        depth += 1;
                        started = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if started && depth <= 0 {
                out.push((name.clone(), n + 1, k + 1));
                break;
            }
            if !started && l.trim_end().ends_with(';') {
                break;
            }
        }
    }
    out
}

/// docs/ARCHITECTURE.md, "Functions and files": what a newcomer can hold in mind.
const MAX_FUNCTION_LINES: usize = 120;
const MAX_FILE_LINES: usize = 1000;
const MAX_CLI_CODE_LINES: usize = 200;

#[test]
fn functions_and_files_stay_small_and_errors_typed() {
    let mut bad = Vec::new();
    for (rel, text) in &sources() {
        let lines = text.lines().count();
        if lines > MAX_FILE_LINES {
            bad.push(format!(
                "src/{rel}: {lines} lines (at most {MAX_FILE_LINES})"
            ));
        }
        let code = code_only(text);
        if rel.starts_with("cli/") {
            let code_lines = code.lines().filter(|l| !l.trim().is_empty()).count();
            if code_lines > MAX_CLI_CODE_LINES {
                bad.push(format!(
                    "src/{rel}: {code_lines} code lines (a command-line file has at most \
                     {MAX_CLI_CODE_LINES})"
                ));
            }
        }
        for (name, line, len) in functions(&code) {
            if len > MAX_FUNCTION_LINES {
                bad.push(format!(
                    "src/{rel}:{line}: fn {name} is {len} lines (at most {MAX_FUNCTION_LINES})"
                ));
            }
        }
        let library = code.split("#[cfg(test)]").next().unwrap_or("");
        let flat: String = library.split_whitespace().collect::<Vec<_>>().join(" ");
        for (i, _) in flat.match_indices(", String>") {
            if let Some(start) = generic_opened_by(&flat, i, "Result") {
                bad.push(format!(
                    "src/{rel}: `{}`: a typed error, not a String",
                    &flat[start..i + ", String>".len()]
                ));
            }
        }
        if flat.contains("type Err = String") {
            bad.push(format!("src/{rel}: `type Err = String`: a typed error"));
        }
    }
    assert!(bad.is_empty(), "too large, or untyped:\n{}", bad.join("\n"));
}

/// Where the generic `NAME<` whose top-level argument list holds the comma at `comma` starts,
/// if it is `NAME`'s.
fn generic_opened_by(text: &str, comma: usize, name: &str) -> Option<usize> {
    let mut depth = 0i64;
    for (i, c) in text[..comma].char_indices().rev() {
        match c {
            '>' => depth += 1,
            '<' if depth == 0 => {
                return text[..i].ends_with(name).then(|| i - name.len());
            }
            '<' => depth -= 1,
            _ => {}
        }
    }
    None
}

#[test]
fn the_measures_read_rust() {
    let text = "fn a() {\n    let s = \"}\";\n    // }\n    let c = '}'; let q = '\\'';\n    let r = r#\"{\"#;\n}\nfn b<'a>(x: &'a str) -> Result<(), String> { x.len(); Ok(()) }\n";
    let code = code_only(text);
    assert_eq!(
        functions(&code),
        vec![("a".into(), 1, 6), ("b".into(), 7, 1)]
    );
    assert!(code.contains("Result<(), String>"));
    assert!(!code.contains("r#"));
    let t = "Result<Vec<Vec<u8>>, String> Result<BTreeMap<String, String>, E>";
    assert_eq!(
        generic_opened_by(t, t.find(", String>").unwrap(), "Result"),
        Some(0)
    );
    let j = t.rfind(", String>").unwrap();
    assert_eq!(generic_opened_by(t, j, "Result"), None);
}
