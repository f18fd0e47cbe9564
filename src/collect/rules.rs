//! The rules that turn a merged pull request into a task instance, as the SWE-bench paper
//! (appendix A.1–A.2) and its code apply them, made exact. They are pure functions of text;
//! `docs/COLLECT-RULES.md` states each rule and why it is as it is.
//!
//! - [`linked_issues`]: the issues a pull request resolves (`Fixes #12`).
//! - [`is_test_path`] and [`split_diff`]: the pull request's diff cut into the gold `patch` and
//!   the `test_patch`, one whole `diff --git` section per file.
//! - [`instance_id`], [`problem_statement`], [`hints_text`]: the instance's text fields.
//! - [`new_names_used_by_tests`]: functions and classes the gold patch adds that the tests use.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

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

// ---------------------------------------------------------------------------------------------
// Linked issues
// ---------------------------------------------------------------------------------------------

/// The keywords that make a reference close an issue, as GitHub and SWE-bench list them.
pub const CLOSING_KEYWORDS: [&str; 9] = [
    "close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves", "resolved",
];

/// `text` with every Markdown (HTML) comment `<!-- … -->` removed, across lines; a `<!--`
/// that is never closed removes everything after it. Nothing is put in a comment's place.
pub fn strip_markdown_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<!--") {
        out.push_str(&rest[..start]);
        // The closing `-->` is searched after the opening `<!--`, so `<!-->` does not close
        // itself, as with SWE-bench's `<!--.*?-->`.
        match rest[start + 4..].find("-->") {
            Some(end) => rest = &rest[start + 4 + end + 3..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

fn closing_regex(owner: &str, name: &str) -> Regex {
    let repo = format!("{}/{}", regex::escape(owner), regex::escape(name));
    // `\b` before the keyword: `prefix #3` is no `fix`. `\b` after it: `fixesxyz #3` is no
    // `fixes`. Between keyword and reference: whitespace, or a colon with optional whitespace
    // on either side. The number must end where a word ends (`#12abc` is not issue 12).
    let pattern = format!(
        r"(?i)\b(?:{keywords})\b(?:[ \t\r\n]*:[ \t\r\n]*|[ \t\r\n]+)(?:#([0-9]+)|{repo}#([0-9]+)|https?://(?:www\.)?github\.com/{repo}/issues/([0-9]+))\b",
        keywords = CLOSING_KEYWORDS.join("|"),
    );
    Regex::new(&pattern).expect("the closing-keyword pattern is built from escaped parts")
}

/// The numbers of the issues of `owner/name` that the pull request's texts (title, body, each
/// commit message) close: a closing keyword, then `#N`, `OWNER/NAME#N` or
/// `https://github.com/OWNER/NAME/issues/N` of this same repository (compared
/// case-insensitively). Markdown comments are removed from each text first. Each keyword
/// links one reference. Sorted, without repeats; `#0` is no issue.
pub fn linked_issues(texts: &[&str], owner: &str, name: &str) -> Vec<u64> {
    let re = closing_regex(owner, name);
    let mut found = BTreeSet::new();
    for text in texts {
        let text = strip_markdown_comments(text);
        for caps in re.captures_iter(&text) {
            let number = (1..=3)
                .find_map(|i| caps.get(i))
                .and_then(|m| m.as_str().parse::<u64>().ok());
            if let Some(n) = number.filter(|n| *n > 0) {
                found.insert(n);
            }
        }
    }
    found.into_iter().collect()
}

// ---------------------------------------------------------------------------------------------
// Test files and the split of a diff
// ---------------------------------------------------------------------------------------------

/// The words SWE-bench looks for in a path to call it a test file.
pub const TEST_WORDS: [&str; 4] = ["test", "tests", "testing", "e2e"];

/// Whether `path` is a test file, as SWE-bench decides it: one of [`TEST_WORDS`] occurs
/// anywhere in it, case-sensitively, as a substring (`contest.py` and `latest/x.py` are test
/// files; `Test.java` is not). Kept as SWE-bench has it so the same pull request splits the
/// same way here as in the published datasets.
pub fn is_test_path(path: &str) -> bool {
    is_test_path_bytes(path.as_bytes())
}

fn is_test_path_bytes(path: &[u8]) -> bool {
    TEST_WORDS
        .iter()
        .any(|w| path.windows(w.len()).any(|win| win == w.as_bytes()))
}

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
struct Section<'a> {
    /// The section's text, exactly as in the diff (its last line ends where the next header
    /// starts, or where the diff ends).
    text: &'a str,
    /// The file the section is classified by: the new path, or for a deletion the old one.
    path: Vec<u8>,
}

/// Cuts `diff` before each line that starts with `diff --git `: each piece's text and the
/// 1-based number of its header line. Text before the first header is not in any piece.
fn pieces(diff: &str) -> Vec<(&str, usize)> {
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

/// Why a path on a line of a diff cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("the quoted path has an unknown escape `\\{0}`")]
    UnknownEscape(char),
    #[error("the quoted path has no closing `\"`")]
    Unclosed,
    #[error("the path `{path}` does not start with `{prefix}`")]
    NoPrefix { path: String, prefix: String },
    #[error("unexpected text `{0}` after the quoted path")]
    AfterQuoted(String),
    #[error("the path is empty")]
    Empty,
    #[error("no space after the first quoted path")]
    NoSpaceAfterQuoted,
    #[error("unexpected text `{0}` after the second path")]
    AfterSecond(String),
    #[error("the first path does not start with `a/`")]
    FirstNotA,
    #[error("expected `a/PATH b/PATH`: there is no ` b/` after the first path")]
    NoSecond,
}

/// Reads a C-quoted string as git writes it (`"a/caf\303\251"`): `s` starts with the opening
/// quote. Returns the bytes and what follows the closing quote.
fn unquote_c(s: &str) -> Result<(Vec<u8>, &str), PathError> {
    let bytes = s.as_bytes();
    debug_assert_eq!(bytes.first(), Some(&b'"'));
    let mut out = Vec::new();
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return Ok((out, &s[i + 1..])),
            b'\\' => {
                let Some(&c) = bytes.get(i + 1) else {
                    break;
                };
                let simple = match c {
                    b'a' => Some(0x07),
                    b'b' => Some(0x08),
                    b't' => Some(b'\t'),
                    b'n' => Some(b'\n'),
                    b'v' => Some(0x0b),
                    b'f' => Some(0x0c),
                    b'r' => Some(b'\r'),
                    b'"' => Some(b'"'),
                    b'\\' => Some(b'\\'),
                    _ => None,
                };
                if let Some(b) = simple {
                    out.push(b);
                    i += 2;
                    continue;
                }
                let octal = bytes.get(i + 1..i + 4).filter(|d| {
                    matches!(d[0], b'0'..=b'3') && d[1..].iter().all(|b| matches!(b, b'0'..=b'7'))
                });
                let Some(d) = octal else {
                    return Err(PathError::UnknownEscape(char::from(c)));
                };
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Err(PathError::Unclosed)
}

fn strip_prefix_bytes<'b>(name: &'b [u8], prefix: &str) -> Result<&'b [u8], PathError> {
    name.strip_prefix(prefix.as_bytes())
        .ok_or_else(|| PathError::NoPrefix {
            path: String::from_utf8_lossy(name).into_owned(),
            prefix: prefix.to_string(),
        })
}

/// A line without its end (`\n`, and a `\r` before it: git quotes any path holding a `\r`, so
/// a bare one can only come from a CRLF conversion of the diff).
fn line_body(line: &str) -> &str {
    let line = line.strip_suffix('\n').unwrap_or(line);
    line.strip_suffix('\r').unwrap_or(line)
}

/// The file named on a `--- ` or `+++ ` line: `None` for `/dev/null`. Unquoted, the name ends
/// at a tab (git puts one after a name with a space; other tools put a date there). The
/// `prefix` (`a/` or `b/`) is required and removed.
fn label_path(rest: &str, prefix: &str) -> Result<Option<Vec<u8>>, PathError> {
    let name: Vec<u8> = if rest.starts_with('"') {
        let (name, after) = unquote_c(rest)?;
        if !(after.is_empty() || after.starts_with('\t')) {
            return Err(PathError::AfterQuoted(after.to_string()));
        }
        name
    } else {
        let name = rest.split('\t').next().unwrap_or_default();
        if name == "/dev/null" {
            return Ok(None);
        }
        name.as_bytes().to_vec()
    };
    Ok(Some(strip_prefix_bytes(&name, prefix)?.to_vec()))
}

/// The path on a `rename from`/`rename to`/`copy from`/`copy to` line: no prefix, quoted if
/// it holds special characters.
fn bare_path(rest: &str) -> Result<Vec<u8>, PathError> {
    if rest.starts_with('"') {
        let (name, after) = unquote_c(rest)?;
        if !after.is_empty() {
            return Err(PathError::AfterQuoted(after.to_string()));
        }
        Ok(name)
    } else if rest.is_empty() {
        Err(PathError::Empty)
    } else {
        Ok(rest.as_bytes().to_vec())
    }
}

/// An old path and a new path.
type PathPair = (Vec<u8>, Vec<u8>);

/// The readings of a `diff --git a/X b/Y` header: each possible (X, Y), prefixes removed.
/// Quoted paths give one reading; unquoted paths with spaces may give several, one per
/// ` b/` in the line, since nothing marks where X ends.
fn header_readings(rest: &str) -> Result<Vec<PathPair>, PathError> {
    let pairs: Vec<PathPair> = if rest.starts_with('"') {
        let (a, after) = unquote_c(rest)?;
        let Some(after) = after.strip_prefix(' ') else {
            return Err(PathError::NoSpaceAfterQuoted);
        };
        let b = if after.starts_with('"') {
            let (b, tail) = unquote_c(after)?;
            if !tail.is_empty() {
                return Err(PathError::AfterSecond(tail.to_string()));
            }
            b
        } else {
            after.as_bytes().to_vec()
        };
        vec![(a, b)]
    } else if let Some(q) = rest.find(" \"") {
        // An unquoted path never holds `"` (git quotes those), so the second path starts here.
        let (b, tail) = unquote_c(&rest[q + 1..])?;
        if !tail.is_empty() {
            return Err(PathError::AfterSecond(tail.to_string()));
        }
        vec![(rest.as_bytes()[..q].to_vec(), b)]
    } else if !rest.starts_with("a/") {
        return Err(PathError::FirstNotA);
    } else {
        rest.match_indices(" b/")
            .map(|(i, _)| {
                (
                    rest.as_bytes()[..i].to_vec(),
                    rest.as_bytes()[i + 1..].to_vec(),
                )
            })
            .collect()
    };
    if pairs.is_empty() {
        return Err(PathError::NoSecond);
    }
    pairs
        .into_iter()
        .map(|(a, b)| {
            Ok((
                strip_prefix_bytes(&a, "a/")?.to_vec(),
                strip_prefix_bytes(&b, "b/")?.to_vec(),
            ))
        })
        .collect()
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Reads one section's header: which file it is about. The `rename`/`copy` lines, then the
/// `---`/`+++` lines, say it exactly; the `diff --git` header is read in their light, and on
/// its own only when it is unambiguous or names the same path twice (`a/X b/X`, as git writes
/// it for every change but a rename or copy).
fn parse_section(text: &str, first_line: usize) -> Result<Section<'_>, RulesError> {
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
/// a test path ([`is_test_path`]), else to `patch`. A section's path is its new path (`rename
/// to`, `copy to`, `+++ b/`, the header's `b/` side); for a deleted file, the old one.
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

// ---------------------------------------------------------------------------------------------
// The instance's text fields
// ---------------------------------------------------------------------------------------------

/// `OWNER__NAME-NUMBER`, as SWE-bench names instances (`django__django-11099`); the case of
/// OWNER and NAME is kept.
pub fn instance_id(owner: &str, name: &str, number: u64) -> String {
    format!("{owner}__{name}-{number}")
}

/// Each resolved issue's title, a newline, its body, a newline; issues in the order given (the
/// caller passes them by issue number). A null body is passed as an empty string.
pub fn problem_statement(issues: &[(String, String)]) -> String {
    let mut out = String::new();
    for (title, body) in issues {
        out.push_str(title);
        out.push('\n');
        out.push_str(body);
        out.push('\n');
    }
    out
}

/// An instant: seconds since the Unix epoch (UTC) and nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Instant {
    pub seconds: i64,
    pub nanos: u32,
}

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses an RFC 3339 time: `YYYY-MM-DDTHH:MM:SS`, an optional fraction of up to 9 digits,
/// then `Z` or an offset `+HH:MM`/`-HH:MM`. `T` may be `t` or a space and `Z` may be `z`, as
/// RFC 3339 allows. A leap second (`:60`) counts as the next minute's first second.
pub fn parse_rfc3339(value: &str) -> Result<Instant, RulesError> {
    let err = |reason: &str| RulesError::BadTime {
        value: value.to_string(),
        reason: reason.to_string(),
    };
    let b = value.as_bytes();
    let digits = |from: usize, n: usize| -> Result<i64, RulesError> {
        let part = b
            .get(from..from + n)
            .filter(|p| p.iter().all(u8::is_ascii_digit))
            .ok_or_else(|| err(&format!("expected {n} digits at character {}", from + 1)))?;
        Ok(part.iter().fold(0, |acc, d| acc * 10 + i64::from(d - b'0')))
    };
    let expect = |at: usize, allowed: &[u8], what: &str| -> Result<(), RulesError> {
        match b.get(at) {
            Some(c) if allowed.contains(c) => Ok(()),
            _ => Err(err(&format!("expected {what} at character {}", at + 1))),
        }
    };
    let year = digits(0, 4)?;
    expect(4, b"-", "`-`")?;
    let month = digits(5, 2)?;
    expect(7, b"-", "`-`")?;
    let day = digits(8, 2)?;
    expect(10, b"Tt ", "`T`")?;
    let hour = digits(11, 2)?;
    expect(13, b":", "`:`")?;
    let minute = digits(14, 2)?;
    expect(16, b":", "`:`")?;
    let second = digits(17, 2)?;
    let mut at = 19;
    let mut nanos: u32 = 0;
    if b.get(at) == Some(&b'.') {
        let frac: Vec<u8> = b[at + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .copied()
            .collect();
        if frac.is_empty() || frac.len() > 9 {
            return Err(err("a fraction of a second needs 1 to 9 digits"));
        }
        let mut n: u32 = 0;
        for i in 0..9 {
            n = n * 10 + frac.get(i).map_or(0, |d| u32::from(d - b'0'));
        }
        nanos = n;
        at += 1 + frac.len();
    }
    let offset_seconds = match b.get(at) {
        Some(b'Z' | b'z') if at + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) if at + 6 == b.len() => {
            let h = digits(at + 1, 2)?;
            expect(at + 3, b":", "`:` in the offset")?;
            let m = digits(at + 4, 2)?;
            if h > 23 || m > 59 {
                return Err(err("the offset is out of range"));
            }
            let s = h * 3600 + m * 60;
            if sign == b'-' { -s } else { s }
        }
        _ => {
            return Err(err(
                "expected `Z` or an offset `+HH:MM`/`-HH:MM` at the end",
            ));
        }
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month) {
        return Err(err("the month is out of range"));
    }
    let month_index = usize::try_from(month - 1).expect("the month is 1 to 12");
    if day < 1 || day > month_days[month_index] {
        return Err(err("the day is out of range"));
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err(err("the time of day is out of range"));
    }
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset_seconds;
    Ok(Instant { seconds, nanos })
}

/// The hints: the bodies of the comments (`(created_at, body)`, RFC 3339 times) created
/// strictly before `first_commit_time`, in the order given, each followed by a newline. An
/// error names the first time that is not RFC 3339.
pub fn try_hints_text(
    comments: &[(String, String)],
    first_commit_time: &str,
) -> Result<String, RulesError> {
    let limit = parse_rfc3339(first_commit_time)?;
    let mut out = String::new();
    for (created_at, body) in comments {
        if parse_rfc3339(created_at)? < limit {
            out.push_str(body);
            out.push('\n');
        }
    }
    Ok(out)
}

/// As [`try_hints_text`], never failing: a comment whose time is not RFC 3339 cannot be shown
/// to come before the first commit and is left out; if `first_commit_time` is not RFC 3339,
/// no comment is kept.
pub fn hints_text(comments: &[(String, String)], first_commit_time: &str) -> String {
    let Ok(limit) = parse_rfc3339(first_commit_time) else {
        return String::new();
    };
    let mut out = String::new();
    for (created_at, body) in comments {
        if parse_rfc3339(created_at).is_ok_and(|t| t < limit) {
            out.push_str(body);
            out.push('\n');
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// New names the tests use
// ---------------------------------------------------------------------------------------------

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

    fn s(v: &str) -> String {
        v.to_string()
    }

    // --- linked issues ---------------------------------------------------------------------

    #[test]
    fn every_keyword_in_any_case_links_an_issue() {
        for (i, kw) in CLOSING_KEYWORDS.iter().enumerate() {
            let n = i as u64 + 1;
            for text in [
                format!("{kw} #{n}"),
                format!("{} #{n}", kw.to_uppercase()),
                format!("This {}{} #{n}.", &kw[..1].to_uppercase(), &kw[1..]),
            ] {
                assert_eq!(linked_issues(&[&text], "o", "r"), vec![n], "{text}");
            }
        }
        assert_eq!(linked_issues(&["FiXeD #7"], "o", "r"), vec![7]);
    }

    #[test]
    fn colon_and_whitespace_between_keyword_and_reference() {
        let cases = [
            ("Fixes: #12", vec![12]),
            ("Fixes:#13", vec![13]),
            ("fixes : #14", vec![14]),
            ("closes\t#15", vec![15]),
            ("resolves\n#16", vec![16]),
            ("fixes   #17", vec![17]),
            // Nothing between keyword and reference, or something else: no link.
            ("fixes#3", vec![]),
            ("fixes - #3", vec![]),
            ("fixes issue #3", vec![]),
            ("fixes:: #3", vec![]),
        ];
        for (text, want) in cases {
            assert_eq!(linked_issues(&[text], "o", "r"), want, "{text:?}");
        }
    }

    #[test]
    fn the_keyword_must_be_a_whole_word() {
        let cases = [
            ("prefix #3", vec![]),
            ("suffix #3", vec![]),
            ("fixesxyz #3", vec![]),
            ("unresolved #3", vec![]),
            ("_fixes #3", vec![]),
            ("fix_ #3", vec![]),
            ("2fix #3", vec![]),
            ("(fixes #4)", vec![4]),
            ("-closes #5", vec![5]),
            ("[resolved #6]", vec![6]),
            ("fixes #1, fixes #2", vec![1, 2]),
            ("fixes fixes #3", vec![3]),
        ];
        for (text, want) in cases {
            assert_eq!(linked_issues(&[text], "o", "r"), want, "{text:?}");
        }
    }

    #[test]
    fn the_number_must_end_the_reference() {
        assert_eq!(
            linked_issues(&["fixes #12abc"], "o", "r"),
            Vec::<u64>::new()
        );
        assert_eq!(linked_issues(&["fixes #12_"], "o", "r"), Vec::<u64>::new());
        assert_eq!(linked_issues(&["fixes #12."], "o", "r"), vec![12]);
        assert_eq!(linked_issues(&["fixes #12/x"], "o", "r"), vec![12]);
        assert_eq!(linked_issues(&["fixes #0"], "o", "r"), Vec::<u64>::new());
        assert_eq!(linked_issues(&["fixes #007"], "o", "r"), vec![7]);
        assert_eq!(
            linked_issues(&["fixes #99999999999999999999999"], "o", "r"),
            Vec::<u64>::new()
        );
    }

    #[test]
    fn each_keyword_links_one_reference() {
        assert_eq!(linked_issues(&["fixes #1, #2 and #3"], "o", "r"), vec![1]);
        assert_eq!(linked_issues(&["fixes #1 #2"], "o", "r"), vec![1]);
    }

    #[test]
    fn urls_and_owner_name_references_of_the_same_repository_only() {
        let cases = [
            ("Resolves https://github.com/acme/widgets/issues/7", vec![7]),
            ("Resolves https://github.com/Acme/WIDGETS/issues/8", vec![8]),
            ("fixes http://github.com/acme/widgets/issues/9", vec![9]),
            (
                "fixes https://www.github.com/acme/widgets/issues/10",
                vec![10],
            ),
            (
                "fixes https://github.com/acme/widgets/issues/11#issuecomment-1",
                vec![11],
            ),
            ("fixes https://github.com/acme/widgets/issues/12/", vec![12]),
            ("fixes https://github.com/other/widgets/issues/7", vec![]),
            (
                "fixes https://github.com/acme/widgets-extra/issues/7",
                vec![],
            ),
            ("fixes https://github.com/acme/widgets/pull/7", vec![]),
            ("fixes https://gitlab.com/acme/widgets/issues/7", vec![]),
            ("fixes acme/widgets#13", vec![13]),
            ("fixes ACME/Widgets#14", vec![14]),
            ("fixes other/widgets#13", vec![]),
            ("fixes acme/widgets-extra#13", vec![]),
            ("fixes xacme/widgets#13", vec![]),
            ("fixes acme/widgets #13", vec![]),
        ];
        for (text, want) in cases {
            assert_eq!(linked_issues(&[text], "acme", "widgets"), want, "{text:?}");
        }
    }

    #[test]
    fn repository_names_are_taken_literally_not_as_patterns() {
        // `.` in a name must not match any character.
        assert_eq!(
            linked_issues(&["fixes aXb/c#1"], "a.b", "c"),
            Vec::<u64>::new()
        );
        assert_eq!(linked_issues(&["fixes a.b/c#1"], "a.b", "c"), vec![1]);
    }

    #[test]
    fn texts_are_searched_without_their_comments_and_merged() {
        let title = "Fix the widget (closes #3)";
        let body = "<!-- Please write `Fixes #123` below -->\nFixes #5\n<!--\nfixes #6\n-->";
        let commit1 = "Repair things\n\nResolves: #4";
        let commit2 = "More\n\nfixes #5\n<!-- fixes #7";
        assert_eq!(
            linked_issues(&[title, body, commit1, commit2], "o", "r"),
            vec![3, 4, 5]
        );
    }

    #[test]
    fn an_unterminated_comment_stops_at_the_end_of_its_own_text() {
        // Each text is cleaned on its own: a `<!--` in the title does not hide the body.
        assert_eq!(
            linked_issues(&["Title <!-- oops", "fixes #2"], "o", "r"),
            vec![2]
        );
    }

    #[test]
    fn strip_comments() {
        assert_eq!(strip_markdown_comments("a<!-- x -->b"), "ab");
        assert_eq!(strip_markdown_comments("a<!--\nx\n\ny-->b<!--z-->c"), "abc");
        assert_eq!(strip_markdown_comments("a<!-- never closed\nfixes #1"), "a");
        assert_eq!(strip_markdown_comments("a<!---->b"), "ab");
        assert_eq!(strip_markdown_comments("a<!-->b-->c"), "ac");
        assert_eq!(strip_markdown_comments("a --> b <!- c"), "a --> b <!- c");
        assert_eq!(strip_markdown_comments("<!-- a --> --> b"), " --> b");
        assert_eq!(strip_markdown_comments(""), "");
        // Removing a comment can join words; that is what SWE-bench does too.
        assert_eq!(linked_issues(&["fix<!-- -->es #9"], "o", "r"), vec![9]);
    }

    // --- test paths ------------------------------------------------------------------------

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

    // --- splitting diffs -------------------------------------------------------------------

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

    // --- instance fields -------------------------------------------------------------------

    #[test]
    fn instance_ids() {
        assert_eq!(
            instance_id("django", "django", 11099),
            "django__django-11099"
        );
        assert_eq!(
            instance_id("scikit-learn", "scikit-learn", 10297),
            "scikit-learn__scikit-learn-10297"
        );
        assert_eq!(instance_id("PyCQA", "Flake8", 1), "PyCQA__Flake8-1");
    }

    #[test]
    fn problem_statements() {
        assert_eq!(problem_statement(&[]), "");
        assert_eq!(
            problem_statement(&[(s("Crash"), s("It crashes.\r\nOften.")), (s("Slow"), s(""))]),
            "Crash\nIt crashes.\r\nOften.\nSlow\n\n"
        );
    }

    fn c(time: &str, body: &str) -> (String, String) {
        (s(time), s(body))
    }

    #[test]
    fn hints_are_the_comments_before_the_first_commit() {
        let comments = [
            c("2024-01-01T10:00:00Z", "first"),
            c("2024-01-01T11:59:59Z", "second\nline"),
            c("2024-01-01T12:00:00Z", "at the same second"),
            c("2024-01-01T13:00:00Z", "after"),
        ];
        assert_eq!(
            hints_text(&comments, "2024-01-01T12:00:00Z"),
            "first\nsecond\nline\n"
        );
        assert_eq!(hints_text(&comments, "2024-01-01T09:00:00Z"), "");
        assert_eq!(hints_text(&[], "2024-01-01T09:00:00Z"), "");
        // An empty comment still counts as one.
        assert_eq!(
            hints_text(&[c("2024-01-01T00:00:00Z", "")], "2024-01-02T00:00:00Z"),
            "\n"
        );
    }

    #[test]
    fn hints_compare_instants_not_text() {
        // 13:30+02:00 is 11:30Z: before noon UTC, though its text sorts after.
        let comments = [
            c("2024-01-01T13:30:00+02:00", "east"),
            c("2024-01-01T07:30:00-05:00", "west"),
            c("2024-01-01T11:59:59.999Z", "fraction"),
            c("2024-01-01T12:00:00.000000001Z", "a nanosecond late"),
        ];
        assert_eq!(
            hints_text(&comments, "2024-01-01T12:00:00Z"),
            "east\nfraction\n"
        );
        assert_eq!(
            hints_text(&comments, "2024-01-01T08:00:00-05:00"),
            "east\nwest\nfraction\na nanosecond late\n"
        );
    }

    #[test]
    fn bad_times_in_hints() {
        let comments = [c("yesterday", "vague"), c("2024-01-01T00:00:00Z", "ok")];
        assert_eq!(hints_text(&comments, "2024-06-01T00:00:00Z"), "ok\n");
        assert_eq!(hints_text(&comments, "soon"), "");
        let err = try_hints_text(&comments, "2024-06-01T00:00:00Z").unwrap_err();
        assert!(err.to_string().contains("`yesterday`"), "{err}");
        let err = try_hints_text(&comments, "soon").unwrap_err();
        assert!(err.to_string().contains("`soon`"), "{err}");
        assert_eq!(
            try_hints_text(&comments[1..], "2024-06-01T00:00:00Z").unwrap(),
            "ok\n"
        );
    }

    #[test]
    fn rfc3339_times() {
        let t = |v: &str| parse_rfc3339(v).unwrap();
        assert_eq!(
            t("1970-01-01T00:00:00Z"),
            Instant {
                seconds: 0,
                nanos: 0
            }
        );
        assert_eq!(
            t("1970-01-01T01:00:00+01:00"),
            Instant {
                seconds: 0,
                nanos: 0
            }
        );
        assert_eq!(t("1969-12-31T23:59:59Z").seconds, -1);
        assert_eq!(t("2024-02-29T00:00:00Z").seconds, 1_709_164_800);
        assert_eq!(t("2000-03-01T00:00:00Z").seconds, 951_868_800);
        assert_eq!(t("2024-01-01T12:00:00Z").seconds, 1_704_110_400);
        assert_eq!(t("2024-01-01t12:00:00z"), t("2024-01-01T12:00:00Z"));
        assert_eq!(t("2024-01-01 12:00:00Z"), t("2024-01-01T12:00:00Z"));
        assert_eq!(t("2024-01-01T12:00:00-00:00"), t("2024-01-01T12:00:00Z"));
        assert_eq!(t("2024-01-01T12:00:00.5Z").nanos, 500_000_000);
        assert_eq!(t("2024-01-01T12:00:00.123456789Z").nanos, 123_456_789);
        assert_eq!(t("2016-12-31T23:59:60Z"), t("2017-01-01T00:00:00Z"));
        for bad in [
            "",
            "2024-01-01",
            "2024-01-01T12:00:00",
            "2024-01-01T12:00Z",
            "2024-1-01T12:00:00Z",
            "2024-01-01T12:00:00+0100",
            "2024-01-01T12:00:00+01",
            "2024-01-01T12:00:00+24:00",
            "2024-01-01T12:00:00.Z",
            "2024-01-01T12:00:00.1234567890Z",
            "2024-01-01T12:00:00Z ",
            "2024-13-01T12:00:00Z",
            "2024-00-01T12:00:00Z",
            "2023-02-29T12:00:00Z",
            "2024-04-31T12:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T12:60:00Z",
            "2024-01-01T12:00:61Z",
            "2024-01-01X12:00:00Z",
            "2024-01-01T12:00:00+01:00:00",
        ] {
            let err = parse_rfc3339(bad).unwrap_err();
            assert!(
                err.to_string().contains(&format!("`{bad}`")),
                "{bad}: {err}"
            );
        }
        assert!(parse_rfc3339("1900-02-29T00:00:00Z").is_err());
        assert!(parse_rfc3339("2000-02-29T00:00:00Z").is_ok());
    }

    // --- new names used by tests -----------------------------------------------------------

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
