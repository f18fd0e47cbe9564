//! The instance's text fields: its id, problem statement and hints.

use super::RulesError;
use super::time::parse_rfc3339;

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

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> String {
        v.to_string()
    }

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
}
