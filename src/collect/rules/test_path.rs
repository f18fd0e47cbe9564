//! Test files: which paths SWE-bench calls tests.

/// The words SWE-bench looks for in a path to call it a test file.
pub const TEST_WORDS: [&str; 4] = ["test", "tests", "testing", "e2e"];

/// Whether `path` is a test file, as SWE-bench decides it: one of [`TEST_WORDS`] occurs
/// anywhere in it, case-sensitively, as a substring (`contest.py` and `latest/x.py` are test
/// files; `Test.java` is not). Kept as SWE-bench has it so the same pull request splits the
/// same way here as in the published datasets.
pub fn is_test_path(path: &str) -> bool {
    is_test_path_bytes(path.as_bytes())
}

pub(super) fn is_test_path_bytes(path: &[u8]) -> bool {
    TEST_WORDS
        .iter()
        .any(|w| path.windows(w.len()).any(|win| win == w.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_paths_by_component_and_by_substring() {
        for p in [
            "tests/test_core.py",
            "tests/data/input.json",
            "pkg/tests/__init__.py",
            "testing/helpers.py",
            "e2e/run.js",
            "src/test_utils.py",
            "conftest.py",
            // Substrings of other words count, as in SWE-bench.
            "src/contest.py",
            "latest/x.py",
            "docs/attestation.md",
            "src/protester.rs",
            "web/e2e_helpers.ts",
        ] {
            assert!(is_test_path(p), "{p}");
        }
        for p in [
            "src/core.py",
            "Tests/Foo.java",
            "TEST.md",
            "src/TestCase.java",
            "tset/x.py",
            "src/te_st.py",
            "",
        ] {
            assert!(!is_test_path(p), "{p}");
        }
    }
}
