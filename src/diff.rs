//! What a unified diff names, and a test patch and gold patch applied with git: what the
//! locks of every kind (a patch that changes the build), the harness (the files a patch
//! touches) and validation read of a patch.

use std::path::Path;

/// The paths a unified diff names (`diff --git a/X b/Y`, `--- X`, `+++ Y`, rename and copy
/// lines), with their `a/` / `b/` prefixes removed; `/dev/null` left out.
pub fn touched_paths(patch: &str) -> Vec<String> {
    let mut out = Vec::new();
    let strip = |p: &str| -> String {
        let p = p.split('\t').next().unwrap_or("").trim_end();
        let p = p.trim_matches('"');
        p.strip_prefix("a/")
            .or_else(|| p.strip_prefix("b/"))
            .unwrap_or(p)
            .to_string()
    };
    for line in patch.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            for part in rest.splitn(2, " b/") {
                out.push(strip(part));
            }
        } else if let Some(p) = line
            .strip_prefix("--- ")
            .or_else(|| line.strip_prefix("+++ "))
        {
            if p.trim() != "/dev/null" {
                out.push(strip(p));
            }
        } else if let Some(p) = ["rename from ", "rename to ", "copy from ", "copy to "]
            .iter()
            .find_map(|k| line.strip_prefix(k))
        {
            out.push(p.to_string());
        }
    }
    out.sort();
    out.dedup();
    out
}

/// A test patch, then a gold patch, applied to the tree at `src`; on failure, which one and
/// what git said.
pub fn apply_test_and_gold(src: &Path, patches: [&str; 2]) -> Result<(), (&'static str, String)> {
    for (what, patch) in ["test patch", "gold patch"].into_iter().zip(patches) {
        if patch.trim().is_empty() {
            continue;
        }
        let file = src.with_extension("diff");
        std::fs::write(&file, patch).map_err(|e| (what, e.to_string()))?;
        let out = crate::gitcmd::command()
            .args(["apply", "--whitespace=nowarn"])
            .arg(&file)
            .current_dir(src)
            .output()
            .map_err(|e| (what, e.to_string()))?;
        if !out.status.success() {
            return Err((
                what,
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
    }
    Ok(())
}
