//! Linked issues: the issues a pull request closes (`Fixes #12`).

use std::collections::BTreeSet;

use regex::Regex;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
