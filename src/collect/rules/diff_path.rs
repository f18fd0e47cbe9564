//! The paths on the lines of a diff section's header (`diff --git`, `---`/`+++`,
//! `rename`/`copy`), as git writes them: C-quoted or plain, with or without `a/`/`b/`.

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
pub(super) fn line_body(line: &str) -> &str {
    let line = line.strip_suffix('\n').unwrap_or(line);
    line.strip_suffix('\r').unwrap_or(line)
}

/// The file named on a `--- ` or `+++ ` line: `None` for `/dev/null`. Unquoted, the name ends
/// at a tab (git puts one after a name with a space; other tools put a date there). The
/// `prefix` (`a/` or `b/`) is required and removed.
pub(super) fn label_path(rest: &str, prefix: &str) -> Result<Option<Vec<u8>>, PathError> {
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
pub(super) fn bare_path(rest: &str) -> Result<Vec<u8>, PathError> {
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
pub(super) type PathPair = (Vec<u8>, Vec<u8>);

/// The readings of a `diff --git a/X b/Y` header: each possible (X, Y), prefixes removed.
/// Quoted paths give one reading; unquoted paths with spaces may give several, one per
/// ` b/` in the line, since nothing marks where X ends.
pub(super) fn header_readings(rest: &str) -> Result<Vec<PathPair>, PathError> {
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

pub(super) fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
