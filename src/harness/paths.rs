//! The files a patch names, and putting files back as the checkout's commit has them: what
//! validation and replay do to the test patch's files before the tests (and replay to the
//! files a prediction may not change).

use std::path::Path;

pub use crate::diff::touched_paths;

/// The files a diff creates (`new file mode`, or `--- /dev/null`), as [`touched_paths`] names
/// them.
pub fn added_paths(patch: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut git_b: Option<&str> = None;
    let lines: Vec<&str> = patch.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            git_b = Some(rest.rsplit_once(" b/").map(|(_, b)| b).unwrap_or(rest));
        } else if line.starts_with("new file mode")
            && let Some(b) = git_b
        {
            out.push(b.trim_matches('"').to_string());
        } else if (line.trim_end() == "--- /dev/null" || line.starts_with("--- /dev/null\t"))
            && let Some(p) = lines.get(i + 1).and_then(|l| l.strip_prefix("+++ "))
        {
            let p = p
                .split('\t')
                .next()
                .unwrap_or("")
                .trim_end()
                .trim_matches('"');
            out.push(p.strip_prefix("b/").unwrap_or(p).to_string());
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Puts `paths` back as they are at the checkout's commit: a file the commit has is checked
/// out; one it does not have is removed (a link is removed, never followed). Returns what was
/// done to each, for the report.
pub fn restore(src: &Path, paths: &[String]) -> Vec<String> {
    let mut done = Vec::new();
    for p in paths {
        let in_commit = git(src, &["cat-file", "-e", &format!("HEAD:{p}")])
            .status
            .success();
        if in_commit {
            let _ = git(src, &["checkout", "-q", "HEAD", "--", p]);
            done.push(format!("{p}: checked out from the base commit"));
        } else {
            let at = src.join(p);
            if std::fs::symlink_metadata(&at).is_ok_and(|m| !m.is_dir()) {
                let _ = std::fs::remove_file(&at);
                done.push(format!("{p}: removed"));
            }
        }
    }
    done
}

fn git(src: &Path, args: &[&str]) -> std::process::Output {
    crate::gitcmd::output(src, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_files_are_read() {
        let p = "diff --git a/t/new.py b/t/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/t/new.py\n\
                 diff --git a/t/old.py b/t/old.py\n--- a/t/old.py\n+++ b/t/old.py\n\
                 --- /dev/null\t2020\n+++ b/plain.py\t2020\n";
        assert_eq!(added_paths(p), vec!["plain.py", "t/new.py"]);
        assert_eq!(added_paths(""), Vec::<String>::new());
    }
}
