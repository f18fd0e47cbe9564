//! The test directives: what the test command runs, from the files a test patch touches, as
//! SWE-bench's `get_test_directives` (swebench/harness/test_spec/python.py) makes them.

/// File endings that are not tests (SWE-bench's `NON_TEST_EXTS`; `csv` has no dot there).
const NON_TEST_EXTS: &[&str] = &[
    ".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml",
];

/// The `b/` paths of every `diff --git` header of `test_patch`, non-test files left out; for
/// the Django test runner (`./tests/runtests.py`), dotted module names instead of paths.
pub fn test_directives(test_patch: &str, test_cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in test_patch.lines() {
        let Some(rest) = line.strip_prefix("diff --git a/") else {
            continue;
        };
        // SWE-bench's pattern `diff --git a/.* b/(.*)`: the last ` b/` on the line.
        let Some(idx) = rest.rfind(" b/") else {
            continue;
        };
        let path = &rest[idx + 3..];
        if NON_TEST_EXTS.iter().any(|e| path.ends_with(e)) {
            continue;
        }
        out.push(path.to_string());
    }
    if test_cmd.contains("runtests.py") {
        out = out
            .into_iter()
            .map(|d| {
                let d = d.strip_suffix(".py").unwrap_or(&d);
                let d = d.strip_prefix("tests/").unwrap_or(d);
                d.replace('/', ".")
            })
            .collect();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATCH: &str = "diff --git a/tests/test_a.py b/tests/test_a.py\n--- a/x\n+++ b/x\n\
        diff --git a/tests/data/x.json b/tests/data/x.json\n\
        diff --git a/tests/fixtures/a.csv b/tests/fixtures/a.csv\n\
        diff --git a/tests/forms_tests/tests/test_b.py b/tests/forms_tests/tests/test_b.py\n";

    #[test]
    fn directives_as_swebench_makes_them() {
        assert_eq!(
            test_directives(PATCH, "pytest -rA"),
            vec!["tests/test_a.py", "tests/forms_tests/tests/test_b.py"]
        );
        assert_eq!(
            test_directives(PATCH, "./tests/runtests.py --verbosity 2"),
            vec!["test_a", "forms_tests.tests.test_b"]
        );
    }
}
