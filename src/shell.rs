//! Shell words: what swe-ark puts into the bash scripts its runs execute.

/// `s` as one bash word: as it is when it holds only characters bash leaves alone, else
/// single-quoted (test ids hold spaces and brackets).
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-:=+,@".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn words_are_quoted_only_when_they_must_be() {
        assert_eq!(super::quote("tests/a.py"), "tests/a.py");
        assert_eq!(super::quote("it's"), "'it'\\''s'");
        assert_eq!(super::quote(""), "''");
    }
}
