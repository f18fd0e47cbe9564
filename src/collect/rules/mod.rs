//! The rules that turn a merged pull request into a task instance, as the SWE-bench paper
//! (appendix A.1–A.2) and its code apply them, made exact. They are pure functions of text;
//! `docs/COLLECT-RULES.md` states each rule and why it is as it is.
//!
//! - [`linked_issues`]: the issues a pull request resolves (`Fixes #12`).
//! - [`is_test_path`] and [`split_diff`]: the pull request's diff cut into the gold `patch` and
//!   the `test_patch`, one whole `diff --git` section per file.
//! - [`instance_id`], [`problem_statement`], [`hints_text`]: the instance's text fields.
//! - [`new_names_used_by_tests`]: functions and classes the gold patch adds that the tests use.
//!
//! Each rule is in the file named after it; `diff_path` reads the paths on a diff's lines for
//! `split` and `new_names`.

mod diff_path;
mod fields;
mod issues;
mod new_names;
mod split;
mod test_path;
mod time;

pub use diff_path::PathError;
pub use fields::{hints_text, instance_id, problem_statement, try_hints_text};
pub use issues::{CLOSING_KEYWORDS, linked_issues, strip_markdown_comments};
pub use new_names::new_names_used_by_tests;
pub use split::{SplitDiff, split_diff};
pub use test_path::{TEST_WORDS, is_test_path};
pub use time::{Instant, parse_rfc3339};

/// Why a text could not be read by the rules. Each message carries the data it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RulesError {
    #[error("the text is not a git diff: it has no line starting with `diff --git `")]
    NotADiff,
    #[error(
        "the text is not a git diff: line {line} comes before the first `diff --git ` line \
         (on line {first_header}): `{text}`"
    )]
    TextBeforeFirstHeader {
        line: usize,
        first_header: usize,
        text: String,
    },
    #[error("line {line} of the diff, `{text}`: {reason}")]
    BadLine {
        line: usize,
        text: String,
        reason: PathError,
    },
    #[error(
        "the diff section at line {line} (`{header}`) names the old path `{old}` and the new \
         path `{new}` on its other lines, which its header does not"
    )]
    InconsistentPath {
        line: usize,
        header: String,
        old: String,
        new: String,
    },
    #[error(
        "the diff section at line {line} (`{header}`) does not say which file it changes: \
         the paths in its header are ambiguous and it has no `rename to`, `+++ b/` or `--- a/` line"
    )]
    AmbiguousPath { line: usize, header: String },
    #[error(
        "`{value}` is not an RFC 3339 time (YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)): {reason}"
    )]
    BadTime { value: String, reason: String },
}
