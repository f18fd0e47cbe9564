//! The demo's upstream project, made by code: `demo/calc`, a small Python package with a git
//! history, release tags, and issues fixed by pull requests — as GitHub would hold them, so the
//! demo's API can serve them to `collect`. Every author, date and text is fixed: the same
//! commits (and so the same bundle ids) on every machine.
//!
//! The pull requests cover what `collect` and `validate` must tell apart:
//! - #2, #9, #13: an issue fixed, a test that fails before and passes after (kept);
//! - #4: the same, with a flaky test beside it (kept; the flaky test is reported and left out);
//! - #5: no issue linked (dropped by `collect`);
//! - #7: an issue fixed without any test change (dropped by `collect`);
//! - #11: an issue "fixed" by a test that already passed (dropped by `validate`).

use std::path::{Path, PathBuf};

use crate::gitcmd::{self, GitError};

use Edit::{Replace, Write};

/// The repository's name on the demo's GitHub.
pub const REPO: &str = "demo/calc";

/// A commit of a pull request's branch, as the API lists it.
#[derive(Debug, Clone)]
pub struct PullCommit {
    pub sha: String,
    pub message: String,
    pub date: String,
}

/// A merged pull request.
#[derive(Debug, Clone)]
pub struct Pull {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub branch: String,
    pub created_at: String,
    pub merged_at: String,
    pub base_sha: String,
    pub head_sha: String,
    pub commits: Vec<PullCommit>,
    /// `git diff base head`, what GitHub's `.diff` gives.
    pub diff: String,
}

/// An issue and its comments (`(created_at, body)`).
#[derive(Debug, Clone)]
pub struct Issue {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub created_at: String,
    pub comments: Vec<(String, String)>,
}

/// The repository on disk and what GitHub would say about it.
#[derive(Debug, Clone)]
pub struct Upstream {
    pub dir: PathBuf,
    pub pulls: Vec<Pull>,
    pub issues: Vec<Issue>,
}

/// One change to a file of the work tree.
enum Edit {
    Write(&'static str, &'static str),
    Replace(&'static str, &'static str, &'static str),
}

struct PullPlan {
    number: u64,
    title: &'static str,
    body: &'static str,
    branch: &'static str,
    created_at: &'static str,
    merged_at: &'static str,
    /// (date, message, edits) per commit of the branch.
    commits: Vec<(&'static str, &'static str, Vec<Edit>)>,
    /// A tag put on main after the merge.
    tag_after: Option<&'static str>,
}

const OPS: &str = r#""""Small arithmetic helpers."""


def add(a, b):
    return a + b


def mean(xs):
    return sum(xs) / len(xs)


def clamp(x, lo, hi):
    return max(lo, x)


def parse_number(text):
    return float(text)
"#;

const TESTS: &str = r#"from calc.ops import add, clamp, mean, parse_number


def test_add():
    assert add(2, 3) == 5


def test_mean():
    assert mean([1, 2, 3]) == 2


def test_clamp_low():
    assert clamp(-5, 0, 10) == 0


def test_parse_number():
    assert parse_number("2.5") == 2.5
"#;

const FLAKY: &str = r#"

def test_clamp_is_quick():
    # Flaky on purpose: its outcome flips from one run to the next (a counter file beside it),
    # as a timing-dependent test would. Validation runs the tests several times and finds it.
    import os

    counter = os.path.join(os.path.dirname(__file__), ".clamp-runs")
    runs = int(open(counter).read()) if os.path.exists(counter) else 0
    open(counter, "w").write(str(runs + 1))
    assert runs % 2 == 0
"#;

/// The upstream's issues, with their comments.
fn issues() -> Vec<Issue> {
    let issue =
        |number, title: &str, body: &str, created_at: &str, comments: &[(&str, &str)]| Issue {
            number,
            title: title.into(),
            body: body.into(),
            created_at: created_at.into(),
            comments: comments
                .iter()
                .map(|(t, b)| (t.to_string(), b.to_string()))
                .collect(),
        };
    let issues = vec![
        issue(
            1,
            "mean([]) raises ZeroDivisionError",
            "Calling `calc.ops.mean([])` raises ZeroDivisionError.\r\nThe mean of nothing should be 0.0.",
            "2024-02-01T09:00:00Z",
            &[
                (
                    "2024-02-01T12:00:00Z",
                    "Confirmed. An empty input should give 0.0.",
                ),
                ("2024-02-20T12:00:00Z", "Thanks for the fix!"),
            ],
        ),
        issue(
            3,
            "clamp ignores the upper bound",
            "`clamp(15, 0, 10)` returns 15; it should return 10.",
            "2024-02-12T09:00:00Z",
            &[],
        ),
        issue(
            6,
            "Typo in the README",
            "\"arithmatic\" should read \"arithmetic\".",
            "2024-03-01T09:00:00Z",
            &[],
        ),
        issue(
            8,
            "parse_number rejects a decimal comma",
            "`parse_number(\"1,5\")` raises ValueError; many locales write 1,5 for 1.5.",
            "2024-03-05T09:00:00Z",
            &[(
                "2024-03-05T15:00:00Z",
                "Replacing the comma before float() would do.",
            )],
        ),
        issue(
            10,
            "add() with negative numbers?",
            "Does `add` work with negative numbers? The docs do not say.",
            "2024-03-10T09:00:00Z",
            &[],
        ),
        issue(
            12,
            "mean() of a generator fails",
            "`mean(x for x in range(3))` raises TypeError: object of type 'generator' has no len().",
            "2024-03-20T09:00:00Z",
            &[],
        ),
    ];
    issues
}

/// The upstream's pull requests, in the order they are made and merged.
fn pull_plans() -> Vec<PullPlan> {
    vec![
        fix_empty_mean(),
        clamp_hi(),
        fast_add(),
        readme_typo(),
        decimal_comma(),
        add_negative(),
        mean_iterable(),
    ]
}

/// #2: an issue fixed over two commits, with a test that fails before and passes after
/// (kept); a closing keyword inside the body's template comment links nothing.
fn fix_empty_mean() -> PullPlan {
    PullPlan {
        number: 2,
        title: "Return 0.0 for the mean of nothing",
        body: "Fixes #1.\n\n<!-- Closes #99: a template comment, not a link -->",
        branch: "fix-empty-mean",
        created_at: "2024-02-10T10:00:00Z",
        merged_at: "2024-02-11T10:00:00Z",
        commits: vec![
            (
                "2024-02-10T09:30:00Z",
                "ops: the mean of an empty list is 0.0",
                vec![Replace(
                    "calc/ops.py",
                    "def mean(xs):\n",
                    "def mean(xs):\n    if not xs:\n        return 0.0\n",
                )],
            ),
            (
                "2024-02-10T09:45:00Z",
                "tests: the mean of nothing",
                vec![Replace(
                    "tests/test_ops.py",
                    "\n\ndef test_clamp_low",
                    "\n\ndef test_mean_empty():\n    assert mean([]) == 0.0\n\n\ndef test_clamp_low",
                )],
            ),
        ],
        tag_after: None,
    }
}

/// #4: an issue fixed, with a flaky test beside it (kept; the flaky test is reported and
/// left out); `v1.0.1` is tagged after it.
fn clamp_hi() -> PullPlan {
    PullPlan {
        number: 4,
        title: "clamp: respect the upper bound",
        body: "Closes #3. Also adds a timing check for clamp.",
        branch: "clamp-hi",
        created_at: "2024-02-14T10:00:00Z",
        merged_at: "2024-02-15T10:00:00Z",
        commits: vec![(
            "2024-02-14T09:30:00Z",
            "ops: clamp to hi as well",
            vec![
                Replace(
                    "calc/ops.py",
                    "    return max(lo, x)\n",
                    "    return min(hi, max(lo, x))\n",
                ),
                Replace(
                    "tests/test_ops.py",
                    "\n\ndef test_parse_number",
                    "\n\ndef test_clamp_high():\n    assert clamp(15, 0, 10) == 10\n\n\ndef test_parse_number",
                ),
                Write("tests/test_timing.py", FLAKY),
            ],
        )],
        tag_after: Some("v1.0.1"),
    }
}

/// #5: no issue linked (dropped by `collect`).
fn fast_add() -> PullPlan {
    PullPlan {
        number: 5,
        title: "Speed up add",
        body: "A faster add, with a test of its own.",
        branch: "fast-add",
        created_at: "2024-02-20T10:00:00Z",
        merged_at: "2024-02-21T10:00:00Z",
        commits: vec![(
            "2024-02-20T09:30:00Z",
            "ops: add without a temporary",
            vec![
                Replace(
                    "calc/ops.py",
                    "def add(a, b):\n",
                    "def add(a, b):\n    \"\"\"a + b.\"\"\"\n",
                ),
                Replace(
                    "tests/test_ops.py",
                    "\n\ndef test_mean():",
                    "\n\ndef test_add_floats():\n    assert add(0.5, 0.25) == 0.75\n\n\ndef test_mean():",
                ),
            ],
        )],
        tag_after: None,
    }
}

/// #7: an issue fixed without any test change (dropped by `collect`).
fn readme_typo() -> PullPlan {
    PullPlan {
        number: 7,
        title: "Fix the README's typo",
        body: "Fixes #6",
        branch: "readme-typo",
        created_at: "2024-03-02T10:00:00Z",
        merged_at: "2024-03-02T11:00:00Z",
        commits: vec![(
            "2024-03-02T09:30:00Z",
            "docs: arithmetic",
            vec![Replace("README.md", "arithmatic", "arithmetic")],
        )],
        tag_after: None,
    }
}

/// #9: an issue fixed, linked from the commit message rather than the body (kept).
fn decimal_comma() -> PullPlan {
    PullPlan {
        number: 9,
        title: "parse_number: accept a decimal comma",
        body: "See the issue.",
        branch: "decimal-comma",
        created_at: "2024-03-06T10:00:00Z",
        merged_at: "2024-03-07T10:00:00Z",
        commits: vec![(
            "2024-03-06T09:30:00Z",
            "ops: a decimal comma reads as a point (resolves #8)",
            vec![
                Replace(
                    "calc/ops.py",
                    "    return float(text)\n",
                    "    return float(text.replace(\",\", \".\"))\n",
                ),
                Replace(
                    "tests/test_ops.py",
                    "    assert parse_number(\"2.5\") == 2.5\n",
                    "    assert parse_number(\"2.5\") == 2.5\n\n\ndef test_parse_comma():\n    assert parse_number(\"1,5\") == 1.5\n",
                ),
            ],
        )],
        tag_after: None,
    }
}

/// #11: an issue "fixed" by a test that already passed (dropped by `validate`).
fn add_negative() -> PullPlan {
    PullPlan {
        number: 11,
        title: "Document add with negative numbers",
        body: "Fixes #10 — add already works; this documents it and adds a test.",
        branch: "add-negative",
        created_at: "2024-03-11T10:00:00Z",
        merged_at: "2024-03-12T10:00:00Z",
        commits: vec![(
            "2024-03-11T09:30:00Z",
            "ops: say that add takes any numbers",
            vec![
                Replace(
                    "calc/ops.py",
                    "    \"\"\"a + b.\"\"\"\n",
                    "    \"\"\"a + b, for any numbers, negative ones too.\"\"\"\n",
                ),
                Replace(
                    "tests/test_ops.py",
                    "\n\ndef test_mean():",
                    "\n\ndef test_add_negative():\n    assert add(-1, -2) == -3\n\n\ndef test_mean():",
                ),
            ],
        )],
        tag_after: None,
    }
}

/// #13: an issue fixed, linked by its URL (kept); `v1.0.2` is tagged after it.
fn mean_iterable() -> PullPlan {
    PullPlan {
        number: 13,
        title: "mean: accept any iterable",
        body: "fixes https://github.com/demo/calc/issues/12",
        branch: "mean-iterable",
        created_at: "2024-03-21T10:00:00Z",
        merged_at: "2024-03-22T10:00:00Z",
        commits: vec![(
            "2024-03-21T09:30:00Z",
            "ops: mean of any iterable",
            vec![
                Replace(
                    "calc/ops.py",
                    "def mean(xs):\n",
                    "def mean(xs):\n    xs = list(xs)\n",
                ),
                Replace(
                    "tests/test_ops.py",
                    "\n\ndef test_mean_empty",
                    "\n\ndef test_mean_generator():\n    assert mean(x for x in range(3)) == 1\n\n\ndef test_mean_empty",
                ),
            ],
        )],
        tag_after: Some("v1.0.2"),
    }
}

fn plan() -> (Vec<Issue>, Vec<PullPlan>) {
    (issues(), pull_plans())
}

/// Why the demo's upstream repository could not be made.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("git could not be started: {0}")]
    Spawn(#[source] std::io::Error),
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} has no `{from}` to replace")]
    NoMatch {
        path: &'static str,
        from: &'static str,
    },
}

/// The error of an I/O operation on `path`.
fn io_at(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> UpstreamError {
    let path = path.into();
    move |source| UpstreamError::Io { path, source }
}

fn git_at(dir: &Path, date: &str, args: &[&str]) -> Result<String, UpstreamError> {
    let out = gitcmd::command()
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Demo Author")
        .env("GIT_AUTHOR_EMAIL", "author@calc.example")
        .env("GIT_COMMITTER_NAME", "Demo Maintainer")
        .env("GIT_COMMITTER_EMAIL", "maintainer@calc.example")
        .env("GIT_AUTHOR_DATE", date)
        .env("GIT_COMMITTER_DATE", date)
        .env("GIT_CEILING_DIRECTORIES", dir.parent().unwrap_or(dir))
        .output()
        .map_err(UpstreamError::Spawn)?;
    if !out.status.success() {
        return Err(GitError::of(dir, args, &out).into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn apply_edit(dir: &Path, edit: &Edit) -> Result<(), UpstreamError> {
    let (path, text) = match edit {
        Edit::Write(path, text) => (path, text.to_string()),
        Edit::Replace(path, from, to) => {
            let old = std::fs::read_to_string(dir.join(path)).map_err(io_at(dir.join(path)))?;
            if !old.contains(from) {
                return Err(UpstreamError::NoMatch { path, from });
            }
            (path, old.replacen(from, to, 1))
        }
    };
    let file = dir.join(path);
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent).map_err(io_at(parent))?;
    }
    std::fs::write(&file, text).map_err(io_at(&file))
}

/// Makes the upstream repository in `dir` (which must not exist) and returns it with its
/// issues and pull requests.
pub fn make(dir: &Path) -> Result<Upstream, UpstreamError> {
    std::fs::create_dir_all(dir.join("calc")).map_err(io_at(dir))?;
    std::fs::create_dir_all(dir.join("tests")).map_err(io_at(dir))?;
    let initial = [
        ("calc/__init__.py", "__version__ = \"1.0.0\"\n"),
        ("calc/ops.py", OPS),
        ("tests/test_ops.py", TESTS),
        // pytest puts the folder of the rootmost conftest.py on sys.path: `import calc` works
        // from the checkout, no install needed.
        ("conftest.py", ""),
        ("README.md", "# calc\n\nSmall arithmatic helpers.\n"),
    ];
    for (path, text) in initial {
        std::fs::write(dir.join(path), text).map_err(io_at(path))?;
    }
    let first = "2024-01-02T10:00:00Z";
    git_at(dir, first, &["init", "-q", "-b", "main"])?;
    git_at(dir, first, &["add", "-A"])?;
    git_at(
        dir,
        first,
        &["commit", "-q", "-m", "calc: add, mean, clamp, parse_number"],
    )?;
    git_at(dir, first, &["tag", "v1.0.0"])?;

    let (issues, plans) = plan();
    let mut pulls = Vec::new();
    for p in plans {
        let base_sha = git_at(dir, p.created_at, &["rev-parse", "HEAD"])?
            .trim()
            .to_string();
        git_at(dir, p.created_at, &["checkout", "-q", "-b", p.branch])?;
        let mut commits = Vec::new();
        for (date, message, edits) in &p.commits {
            for e in edits {
                apply_edit(dir, e)?;
            }
            git_at(dir, date, &["add", "-A"])?;
            git_at(dir, date, &["commit", "-q", "-m", message])?;
            commits.push(PullCommit {
                sha: git_at(dir, date, &["rev-parse", "HEAD"])?
                    .trim()
                    .to_string(),
                message: message.to_string(),
                date: date.to_string(),
            });
        }
        let head_sha = git_at(dir, p.created_at, &["rev-parse", "HEAD"])?
            .trim()
            .to_string();
        let diff = git_at(
            dir,
            p.created_at,
            &["diff", "--no-color", &base_sha, &head_sha],
        )?;
        git_at(dir, p.merged_at, &["checkout", "-q", "main"])?;
        let message = format!("Merge pull request #{} from demo/{}", p.number, p.branch);
        git_at(
            dir,
            p.merged_at,
            &["merge", "-q", "--no-ff", "-m", &message, p.branch],
        )?;
        if let Some(tag) = p.tag_after {
            git_at(dir, p.merged_at, &["tag", tag])?;
        }
        pulls.push(Pull {
            number: p.number,
            title: p.title.into(),
            body: p.body.into(),
            branch: p.branch.into(),
            created_at: p.created_at.into(),
            merged_at: p.merged_at.into(),
            base_sha,
            head_sha,
            commits,
            diff,
        });
    }
    Ok(Upstream {
        dir: dir.to_path_buf(),
        pulls,
        issues,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_is_the_same_on_every_run() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let ua = make(&a.path().join("calc")).unwrap();
        let ub = make(&b.path().join("calc")).unwrap();
        let heads = |u: &Upstream| {
            u.pulls
                .iter()
                .map(|p| (p.base_sha.clone(), p.head_sha.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(heads(&ua), heads(&ub));
        assert_eq!(ua.pulls.len(), 7);
        let p4 = ua.pulls.iter().find(|p| p.number == 4).unwrap();
        assert!(p4.diff.contains("tests/test_timing.py"), "{}", p4.diff);
        let tags = gitcmd::run(&ua.dir, &["tag"]).unwrap();
        assert_eq!(
            tags.lines().collect::<Vec<_>>(),
            ["v1.0.0", "v1.0.1", "v1.0.2"]
        );
    }
}
