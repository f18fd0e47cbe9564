//! The split of a pull request's diff into the gold patch and the test patch, one whole
//! `diff --git` section per file.

use super::RulesError;
use super::diff_path::{
    PathError, PathPair, bare_path, header_readings, label_path, line_body, lossy,
};
use super::test_path::is_test_path_bytes;

/// A pull request's diff, cut in two.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SplitDiff {
    /// The gold patch: the sections of the files that are not test files, in diff order.
    pub patch: String,
    /// The sections of the test files, in diff order.
    pub test_patch: String,
    /// The path of each section in `test_patch`, in diff order.
    pub test_files: Vec<String>,
    /// The path of each section in `patch`, in diff order.
    pub gold_files: Vec<String>,
}

/// One file's section of a diff: from its `diff --git ` line up to the next one.
#[derive(Debug)]
pub(super) struct Section<'a> {
    /// The section's text, exactly as in the diff (its last line ends where the next header
    /// starts, or where the diff ends).
    pub(super) text: &'a str,
    /// The file the section is classified by: the new path, or for a deletion the old one.
    pub(super) path: Vec<u8>,
}

/// Cuts `diff` before each line that starts with `diff --git `: each piece's text and the
/// 1-based number of its header line. Text before the first header is not in any piece.
pub(super) fn pieces(diff: &str) -> Vec<(&str, usize)> {
    let mut starts: Vec<(usize, usize)> = Vec::new(); // (byte offset, line number)
    let mut offset = 0;
    for (i, line) in diff.split_inclusive('\n').enumerate() {
        if line.starts_with("diff --git ") {
            starts.push((offset, i + 1));
        }
        offset += line.len();
    }
    starts
        .iter()
        .enumerate()
        .map(|(i, &(start, line))| {
            let end = starts.get(i + 1).map_or(diff.len(), |s| s.0);
            (&diff[start..end], line)
        })
        .collect()
}

/// The sections of `diff`, as [`pieces`], refusing text that is not a diff: no header, or
/// anything before the first one.
fn cut_sections(diff: &str) -> Result<Vec<(&str, usize)>, RulesError> {
    let sections = pieces(diff);
    let Some(&(_, first_header)) = sections.first() else {
        return Err(RulesError::NotADiff);
    };
    if first_header != 1 {
        let text = diff.lines().next().unwrap_or_default();
        return Err(RulesError::TextBeforeFirstHeader {
            line: 1,
            first_header,
            text: text.to_string(),
        });
    }
    Ok(sections)
}

/// Reads one section's header: which file it is about. The `rename`/`copy` lines, then the
/// `---`/`+++` lines, say it exactly; the `diff --git` header is read in their light, and on
/// its own only when it is unambiguous or names the same path twice (`a/X b/X`, as git writes
/// it for every change but a rename or copy).
pub(super) fn parse_section(text: &str, first_line: usize) -> Result<Section<'_>, RulesError> {
    let mut lines = text.split_inclusive('\n');
    let header_line = line_body(lines.next().unwrap_or_default());
    let bad = |offset: usize, line: &str, reason: PathError| RulesError::BadLine {
        line: first_line + offset,
        text: line.to_string(),
        reason,
    };
    let rest = header_line.strip_prefix("diff --git ").unwrap_or_default();
    let readings = header_readings(rest).map_err(|r| bad(0, header_line, r))?;

    let (mut old, mut new): (Option<Vec<u8>>, Option<Vec<u8>>) = (None, None);
    let (mut minus_seen, mut plus_seen) = (false, false);
    for (i, line) in lines.enumerate() {
        let line = line_body(line);
        let offset = i + 1;
        // The extended header ends where the hunks or the binary data begin.
        if line.starts_with("@@") || line == "GIT binary patch" || line.starts_with("Binary files ")
        {
            break;
        }
        if let Some(r) = line
            .strip_prefix("rename from ")
            .or_else(|| line.strip_prefix("copy from "))
        {
            old = Some(bare_path(r).map_err(|e| bad(offset, line, e))?);
        } else if let Some(r) = line
            .strip_prefix("rename to ")
            .or_else(|| line.strip_prefix("copy to "))
        {
            new = Some(bare_path(r).map_err(|e| bad(offset, line, e))?);
        } else if let Some(r) = line.strip_prefix("--- ").filter(|_| !minus_seen) {
            minus_seen = true;
            if let Some(p) = label_path(r, "a/").map_err(|e| bad(offset, line, e))? {
                old.get_or_insert(p);
            }
        } else if let Some(r) = line.strip_prefix("+++ ").filter(|_| !plus_seen) {
            plus_seen = true;
            if let Some(p) = label_path(r, "b/").map_err(|e| bad(offset, line, e))? {
                new.get_or_insert(p);
            }
        }
    }

    let consistent: Vec<&PathPair> = readings
        .iter()
        .filter(|(a, b)| old.as_ref().is_none_or(|o| o == a) && new.as_ref().is_none_or(|n| n == b))
        .collect();
    if consistent.is_empty() {
        let show = |p: &Option<Vec<u8>>| p.as_deref().map_or("(none)".to_string(), lossy);
        return Err(RulesError::InconsistentPath {
            line: first_line,
            header: header_line.to_string(),
            old: show(&old),
            new: show(&new),
        });
    }
    let from_header = match consistent.as_slice() {
        [(_, b)] => Some(b.clone()),
        _ => consistent
            .iter()
            .find(|(a, b)| a == b)
            .map(|(_, b)| b.clone()),
    };
    let path = new
        .or(from_header)
        .or(old)
        .ok_or_else(|| RulesError::AmbiguousPath {
            line: first_line,
            header: header_line.to_string(),
        })?;
    Ok(Section { text, path })
}

/// Splits a `git diff` (as GitHub serves a pull request's `.diff`) into the gold patch and the
/// test patch. Each `diff --git ` section is kept whole and goes to `test_patch` if its path is
/// a test path ([`is_test_path`](super::is_test_path)), else to `patch`. A section's path is
/// its new path (`rename to`, `copy to`, `+++ b/`, the header's `b/` side); for a deleted file,
/// the old one.
pub fn split_diff(diff: &str) -> Result<SplitDiff, RulesError> {
    let mut out = SplitDiff::default();
    for (text, line) in cut_sections(diff)? {
        let section = parse_section(text, line)?;
        let path = lossy(&section.path);
        if is_test_path_bytes(&section.path) {
            out.test_patch.push_str(section.text);
            out.test_files.push(path);
        } else {
            out.patch.push_str(section.text);
            out.gold_files.push(path);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> String {
        v.to_string()
    }

    const SRC_MOD: &str = "diff --git a/src/core.py b/src/core.py\n\
index 1111111..2222222 100644\n\
--- a/src/core.py\n\
+++ b/src/core.py\n\
@@ -1,2 +1,2 @@\n\
 import os\n\
-def f(): return 1\n\
+def f(): return 2\n";

    const TEST_NEW: &str = "diff --git a/tests/test_core.py b/tests/test_core.py\n\
new file mode 100644\n\
index 0000000..3333333\n\
--- /dev/null\n\
+++ b/tests/test_core.py\n\
@@ -0,0 +1,2 @@\n\
+from src.core import f\n\
+def test_f(): assert f() == 2\n";

    const SRC_DELETED: &str = "diff --git a/old.txt b/old.txt\n\
deleted file mode 100644\n\
index 4444444..0000000\n\
--- a/old.txt\n\
+++ /dev/null\n\
@@ -1 +0,0 @@\n\
-gone\n";

    const MODE_ONLY: &str = "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n";

    const BINARY: &str = "diff --git a/data.bin b/data.bin\n\
index 5555555..6666666 100644\n\
GIT binary patch\n\
literal 5\n\
McmZQzWMXDy0000\n\
\n\
literal 4\n\
LcmZQzWMW|y00\n\
\n";

    const BINARY_NO_DATA: &str = "diff --git a/tests/img.png b/tests/img.png\n\
index 7777777..8888888 100644\n\
Binary files a/tests/img.png and b/tests/img.png differ\n";

    const PURE_RENAME: &str = "diff --git a/tests/old_helper.py b/src/helper.py\n\
similarity index 100%\n\
rename from tests/old_helper.py\n\
rename to src/helper.py\n";

    const RENAME_INTO_TESTS: &str = "diff --git a/src/util.py b/tests/util.py\n\
similarity index 90%\n\
rename from src/util.py\n\
rename to tests/util.py\n\
index 9999999..aaaaaaa 100644\n\
--- a/src/util.py\n\
+++ b/tests/util.py\n\
@@ -1 +1 @@\n\
-x = 1\n\
+x = 2\n";

    fn diff_of(sections: &[&str]) -> String {
        sections.concat()
    }

    #[test]
    fn sections_go_whole_to_patch_or_test_patch() {
        let diff = diff_of(&[
            SRC_MOD,
            TEST_NEW,
            SRC_DELETED,
            MODE_ONLY,
            BINARY,
            BINARY_NO_DATA,
            PURE_RENAME,
            RENAME_INTO_TESTS,
        ]);
        let split = split_diff(&diff).unwrap();
        assert_eq!(
            split.patch,
            diff_of(&[SRC_MOD, SRC_DELETED, MODE_ONLY, BINARY, PURE_RENAME])
        );
        assert_eq!(
            split.test_patch,
            diff_of(&[TEST_NEW, BINARY_NO_DATA, RENAME_INTO_TESTS])
        );
        assert_eq!(
            split.gold_files,
            vec![
                "src/core.py",
                "old.txt",
                "run.sh",
                "data.bin",
                "src/helper.py"
            ]
        );
        assert_eq!(
            split.test_files,
            vec!["tests/test_core.py", "tests/img.png", "tests/util.py"]
        );
    }

    #[test]
    fn a_diff_without_a_final_newline_keeps_its_last_section_as_is() {
        let diff = format!("{SRC_MOD}{}", TEST_NEW.trim_end());
        let split = split_diff(&diff).unwrap();
        assert_eq!(split.test_patch, TEST_NEW.trim_end());
        assert_eq!(split.patch, SRC_MOD);
    }

    #[test]
    fn hunk_lines_that_look_like_headers_are_content() {
        // A removed line `-- a/x` shows as `--- a/x`; after the first `@@` nothing is header.
        let section = "diff --git a/src/a.py b/src/a.py\n\
--- a/src/a.py\n\
+++ b/src/a.py\n\
@@ -1,2 +1,2 @@\n\
--- a/tests/x\n\
+++ b/tests/x\n\
 rename to tests/y\n";
        let split = split_diff(section).unwrap();
        assert_eq!(split.gold_files, vec!["src/a.py"]);
        assert!(split.test_patch.is_empty());
    }

    #[test]
    fn renames_are_classified_by_their_new_path() {
        let split = split_diff(PURE_RENAME).unwrap();
        assert_eq!(split.gold_files, vec!["src/helper.py"]);
        let split = split_diff(RENAME_INTO_TESTS).unwrap();
        assert_eq!(split.test_files, vec!["tests/util.py"]);
        let copy = "diff --git a/src/a.py b/tests/a.py\n\
similarity index 100%\n\
copy from src/a.py\n\
copy to tests/a.py\n";
        assert_eq!(split_diff(copy).unwrap().test_files, vec!["tests/a.py"]);
    }

    #[test]
    fn quoted_paths_are_unquoted() {
        let diff = "diff --git \"a/docs/sp ace\\303\\251.txt\" \"b/docs/sp ace\\303\\251.txt\"\n\
index 1111111..2222222 100644\n\
--- \"a/docs/sp ace\\303\\251.txt\"\n\
+++ \"b/docs/sp ace\\303\\251.txt\"\n\
@@ -1 +1 @@\n\
-a\n\
+b\n\
diff --git \"a/tests/tab\\there\" \"b/tests/tab\\there\"\n\
new file mode 100644\n\
index 0000000..2222222\n\
--- /dev/null\n\
+++ \"b/tests/tab\\there\"\n\
@@ -0,0 +1 @@\n\
+b\n\
diff --git \"a/q\\\"uote\\\\back\" \"b/q\\\"uote\\\\back\"\n\
old mode 100644\n\
new mode 100755\n";
        let split = split_diff(diff).unwrap();
        assert_eq!(split.gold_files, vec!["docs/sp aceé.txt", "q\"uote\\back"]);
        assert_eq!(split.test_files, vec!["tests/tab\there"]);
    }

    #[test]
    fn one_quoted_path_and_one_plain_one() {
        let diff = "diff --git a/src/plain.py \"b/tests/t\\303\\251st.py\"\n\
similarity index 100%\n\
rename from src/plain.py\n\
rename to \"tests/t\\303\\251st.py\"\n\
diff --git \"a/src/\\303\\251.py\" b/src/e.py\n\
similarity index 100%\n\
rename from \"src/\\303\\251.py\"\n\
rename to src/e.py\n";
        let split = split_diff(diff).unwrap();
        assert_eq!(split.test_files, vec!["tests/tést.py"]);
        assert_eq!(split.gold_files, vec!["src/e.py"]);
    }

    #[test]
    fn paths_that_are_not_utf8_are_shown_lossily_and_classified_by_bytes() {
        let diff = "diff --git \"a/tests/caf\\351\" \"b/tests/caf\\351\"\n\
old mode 100644\n\
new mode 100755\n";
        let split = split_diff(diff).unwrap();
        assert_eq!(split.test_files, vec!["tests/caf\u{fffd}"]);
    }

    #[test]
    fn unquoted_paths_with_spaces() {
        // The same path twice: the equal halves settle it, even with ` b/` inside.
        let mode =
            "diff --git a/my dir/x b/y.py b/my dir/x b/y.py\nold mode 100644\nnew mode 100755\n";
        assert_eq!(
            split_diff(mode).unwrap().gold_files,
            vec!["my dir/x b/y.py"]
        );
        // A deleted binary file: no `+++` line, the header alone.
        let deleted = "diff --git a/q b/r b/q b/r\n\
deleted file mode 100644\n\
index 1111111..0000000\n\
Binary files a/q b/r and /dev/null differ\n";
        assert_eq!(split_diff(deleted).unwrap().gold_files, vec!["q b/r"]);
        // `--- a/…` and `+++ b/…` of a name with a space end with a tab.
        let modified = "diff --git a/sp ace.py b/sp ace.py\n\
index 1111111..2222222 100644\n\
--- a/sp ace.py\t\n\
+++ b/sp ace.py\t\n\
@@ -1 +1 @@\n\
-a\n\
+b\n";
        assert_eq!(split_diff(modified).unwrap().gold_files, vec!["sp ace.py"]);
        // A rename whose names hold ` b/`: the rename lines say where the names end.
        let rename = "diff --git a/x b/old.py b/x b/new_test.py\n\
similarity index 100%\n\
rename from x b/old.py\n\
rename to x b/new_test.py\n";
        assert_eq!(
            split_diff(rename).unwrap().test_files,
            vec!["x b/new_test.py"]
        );
        // One ` b/` only: that is where the second name starts.
        let rename = "diff --git a/my src/a.py b/my tests/a.py\n\
similarity index 100%\n\
rename from my src/a.py\n\
rename to my tests/a.py\n";
        assert_eq!(
            split_diff(rename).unwrap().test_files,
            vec!["my tests/a.py"]
        );
    }

    #[test]
    fn an_unreadable_header_with_nothing_else_is_ambiguous() {
        // Two different names with ` b/` in them and no other line naming them.
        let diff = "diff --git a/x b/y b/z\nold mode 100644\nnew mode 100755\n";
        let err = split_diff(diff).unwrap_err();
        assert!(
            matches!(err, RulesError::AmbiguousPath { line: 1, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("a/x b/y b/z"), "{err}");
    }

    #[test]
    fn crlf_line_ends_are_tolerated_in_headers() {
        let diff = "diff --git a/tests/a.py b/tests/a.py\r\n\
--- a/tests/a.py\r\n\
+++ b/tests/a.py\r\n\
@@ -1 +1 @@\r\n\
-a\r\n\
+b\r\n";
        let split = split_diff(diff).unwrap();
        assert_eq!(split.test_files, vec!["tests/a.py"]);
        assert_eq!(split.test_patch, diff);
    }

    #[test]
    fn text_that_is_not_a_diff_is_refused() {
        assert_eq!(split_diff(""), Err(RulesError::NotADiff));
        assert_eq!(split_diff("hello\nworld\n"), Err(RulesError::NotADiff));
        assert_eq!(
            split_diff("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"),
            Err(RulesError::NotADiff)
        );
        let err =
            split_diff(&format!("From abc Mon Sep 17 00:00:00 2001\n\n{SRC_MOD}")).unwrap_err();
        assert_eq!(
            err,
            RulesError::TextBeforeFirstHeader {
                line: 1,
                first_header: 3,
                text: s("From abc Mon Sep 17 00:00:00 2001"),
            }
        );
        let msg = err.to_string();
        assert!(
            msg.contains("line 1") && msg.contains("line 3") && msg.contains("From abc"),
            "{msg}"
        );
        // Even a blank line before the first header.
        let err = split_diff(&format!("\n{SRC_MOD}")).unwrap_err();
        assert!(matches!(
            err,
            RulesError::TextBeforeFirstHeader {
                line: 1,
                first_header: 2,
                ..
            }
        ));
        // `diff --git` must start a line.
        assert_eq!(
            split_diff(" diff --git a/x b/x\n"),
            Err(RulesError::NotADiff)
        );
    }

    #[test]
    fn bad_headers_are_named_with_their_line() {
        let cases = [
            ("diff --git \"a/unterminated b/x\n", 1, "closing"),
            ("diff --git \"a/bad\\q\" \"b/bad\\q\"\n", 1, "escape"),
            ("diff --git x/a y/a\n", 1, "does not start with `a/`"),
            ("diff --git a/onlyone\n", 1, "a/PATH b/PATH"),
            ("diff --git \"a/x\"\"b/x\"\n", 1, "no space"),
            ("diff --git \"a/x\" \"b/x\" tail\n", 1, "tail"),
        ];
        for (header, line, needle) in cases {
            let diff = format!("{SRC_MOD}{header}");
            let err = split_diff(&diff).unwrap_err();
            let msg = err.to_string();
            assert!(
                matches!(&err, RulesError::BadLine { line: l, .. } if *l == line + 8),
                "{header:?}: {msg}"
            );
            assert!(msg.contains(needle), "{header:?}: {msg}");
            assert!(msg.contains(header.trim_end()), "{header:?}: {msg}");
        }
        let err = split_diff("diff --git a/x b/x\n--- c/x\n+++ b/x\n").unwrap_err();
        assert!(matches!(err, RulesError::BadLine { line: 2, .. }), "{err}");
        let err = split_diff("diff --git a/x b/x\nrename to \"open\n").unwrap_err();
        assert!(matches!(err, RulesError::BadLine { line: 2, .. }), "{err}");
    }

    #[test]
    fn lines_that_disagree_with_the_header_are_refused() {
        let diff = "diff --git a/src/a.py b/src/a.py\n\
--- a/src/a.py\n\
+++ b/tests/a.py\n\
@@ -1 +1 @@\n\
-a\n\
+b\n";
        let err = split_diff(diff).unwrap_err();
        assert_eq!(
            err,
            RulesError::InconsistentPath {
                line: 1,
                header: s("diff --git a/src/a.py b/src/a.py"),
                old: s("src/a.py"),
                new: s("tests/a.py"),
            }
        );
        assert!(err.to_string().contains("tests/a.py"));
    }
}
