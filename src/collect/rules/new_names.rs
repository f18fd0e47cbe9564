//! New names the tests use: functions and classes the gold patch adds that the tests call.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use super::diff_path::line_body;
use super::split::{parse_section, pieces};

static DEFINITION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^[ \t]*(?:(?:async[ \t]+)?def[ \t]+(?P<f>[\p{XID_Start}_][\p{XID_Continue}]*)[ \t]*\(|class[ \t]+(?P<c>[\p{XID_Start}_][\p{XID_Continue}]*))",
    )
    .expect("the definition pattern is valid")
});

static WORD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[\p{XID_Continue}]+").expect("the word pattern is valid"));

/// The name a line of Python defines, if it is a `def`, `async def` or `class` line.
fn defined_name(line: &str) -> Option<&str> {
    let caps = DEFINITION.captures(line)?;
    caps.name("f")
        .or_else(|| caps.name("c"))
        .map(|m| m.as_str())
}

/// Each section of `diff` with its path (`None` when the header cannot be read) and its hunk
/// lines: the lines after its first `@@`. Text before the first header is skipped.
fn hunk_lines(diff: &str) -> Vec<(Option<Vec<u8>>, Vec<&str>)> {
    pieces(diff)
        .into_iter()
        .map(|(text, line)| {
            let path = parse_section(text, line).ok().map(|s| s.path);
            let hunks = text
                .split_inclusive('\n')
                .map(line_body)
                .skip_while(|l| !l.starts_with("@@"))
                .collect();
            (path, hunks)
        })
        .collect()
}

/// The functions and classes the gold `patch` adds (`def NAME(`, `async def NAME(`,
/// `class NAME` on an added line of a `.py` file, at any indentation) that no removed line of
/// the patch defines (so they are new, not changed or moved), and that the `test_patch` uses:
/// the name is a whole word on one of its added lines. Sorted, without repeats.
pub fn new_names_used_by_tests(patch: &str, test_patch: &str) -> Vec<String> {
    let mut added = BTreeSet::new();
    let mut removed = BTreeSet::new();
    for (path, lines) in hunk_lines(patch) {
        let is_py = path.as_deref().is_some_and(|p| p.ends_with(b".py"));
        for line in lines {
            match (
                line.as_bytes().first(),
                line.get(1..).and_then(defined_name),
            ) {
                (Some(b'+'), Some(name)) if is_py => {
                    added.insert(name.to_string());
                }
                (Some(b'-'), Some(name)) => {
                    removed.insert(name.to_string());
                }
                _ => {}
            }
        }
    }
    let new: BTreeSet<&str> = added.difference(&removed).map(String::as_str).collect();
    if new.is_empty() {
        return Vec::new();
    }
    let mut used = BTreeSet::new();
    for (_, lines) in hunk_lines(test_patch) {
        for line in lines {
            let Some(l) = line.strip_prefix('+') else {
                continue;
            };
            for word in WORD.find_iter(l) {
                if new.contains(word.as_str()) {
                    used.insert(word.as_str().to_string());
                }
            }
        }
    }
    used.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOLD: &str = "diff --git a/pkg/core.py b/pkg/core.py\n\
index 1111111..2222222 100644\n\
--- a/pkg/core.py\n\
+++ b/pkg/core.py\n\
@@ -1,6 +1,16 @@\n\
 import os\n\
-def changed(a):\n\
+def changed(a, b):\n\
+def brand_new(x):\n\
+    pass\n\
+async def fetch_it (url):\n\
+class Widget(Base):\n\
+    def method_one(self):\n\
+class Plain:\n\
+class Bare\n\
+\tdef tabbed(self):\n\
+def unused_by_tests():\n\
+def défini():\n\
+x = 'def not_a_def('\n\
-class Moved:\n\
 def context_only():\n\
diff --git a/pkg/other.py b/pkg/other.py\n\
--- a/pkg/other.py\n\
+++ b/pkg/other.py\n\
@@ -1 +1,2 @@\n\
+class Moved:\n\
+def classify(x):\n\
diff --git a/README.md b/README.md\n\
--- a/README.md\n\
+++ b/README.md\n\
@@ -1 +1,2 @@\n\
+def from_markdown(x):\n";

    const TESTS: &str = "diff --git a/tests/test_core.py b/tests/test_core.py\n\
--- a/tests/test_core.py\n\
+++ b/tests/test_core.py\n\
@@ -1,3 +1,12 @@\n\
 from pkg.core import context_only\n\
-from pkg.core import unused_by_tests\n\
+from pkg.core import brand_new, changed, Widget, Plain, Bare\n\
+from pkg.core import fetch_it as f\n\
+from pkg.other import Moved, classify\n\
+def test_it(): assert brand_new(1) and Widget().method_one()\n\
+    obj.tabbed()\n\
+    défini()\n\
+    not_a_def_x()\n\
+    from_markdown()\n\
+    brand_newer()\n";

    #[test]
    fn new_names_that_the_tests_use() {
        assert_eq!(
            new_names_used_by_tests(GOLD, TESTS),
            vec![
                "Bare",
                "Plain",
                "Widget",
                "brand_new",
                "classify",
                "défini",
                "fetch_it",
                "method_one",
                "tabbed",
            ]
        );
    }

    #[test]
    fn new_names_need_an_added_use() {
        // Only context and removed lines of the tests mention them: no use.
        let tests = "diff --git a/tests/t.py b/tests/t.py\n\
--- a/tests/t.py\n\
+++ b/tests/t.py\n\
@@ -1,2 +1,1 @@\n\
 brand_new()\n\
-Widget()\n";
        assert!(new_names_used_by_tests(GOLD, tests).is_empty());
        assert!(new_names_used_by_tests(GOLD, "").is_empty());
        assert!(new_names_used_by_tests("", TESTS).is_empty());
        // Header lines are not added lines: `+++ b/brand_new.py` is no use.
        let tests = "diff --git a/tests/brand_new.py b/tests/brand_new.py\n\
new file mode 100644\n\
--- /dev/null\n\
+++ b/tests/brand_new.py\n\
@@ -0,0 +1 @@\n\
+pass\n";
        assert!(new_names_used_by_tests(GOLD, tests).is_empty());
    }

    #[test]
    fn a_removed_definition_anywhere_in_the_patch_makes_a_name_not_new() {
        let gold = "diff --git a/a.py b/a.py\n\
--- a/a.py\n\
+++ b/a.py\n\
@@ -1 +1 @@\n\
+def helper():\n\
diff --git a/b.pyx b/b.pyx\n\
--- a/b.pyx\n\
+++ b/b.pyx\n\
@@ -1 +1 @@\n\
-    def helper(self):\n";
        let tests = "diff --git a/tests/t.py b/tests/t.py\n--- a/tests/t.py\n+++ b/tests/t.py\n@@ -1 +1 @@\n+helper()\n";
        assert!(new_names_used_by_tests(gold, tests).is_empty());
    }
}
