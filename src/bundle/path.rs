//! Member paths are raw bytes (file names need not be UTF-8). These rules decide which paths
//! a bundle may hold, for packing and for reading alike.

/// A path for messages: UTF-8 as is, other bytes escaped.
pub fn display(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

/// Why `path` cannot be a member path: absolute, empty, with `.`/`..`/empty components, or
/// with a NUL byte. `None` when it is fine.
pub fn invalid_reason(path: &[u8]) -> Option<&'static str> {
    if path.is_empty() {
        return Some("the path is empty");
    }
    if path[0] == b'/' {
        return Some("the path is absolute");
    }
    if path.contains(&0) {
        return Some("the path contains a NUL byte");
    }
    for comp in path.split(|&b| b == b'/') {
        match comp {
            b".." => return Some("the path has a `..` component"),
            b"." => return Some("the path has a `.` component"),
            b"" => return Some("the path has an empty component"),
            _ => {}
        }
    }
    None
}

/// Whether the symlink target `target`, found at member `link`, stays inside the tree rooted
/// at `root` (a prefix of `link` ending in `/`). Only leading `..` components are allowed: a
/// `..` after a name could climb out through another symlink (`s/../..` where `s` points up),
/// so checking each link on its own is enough only under that rule.
pub fn link_stays_inside(root: &[u8], link: &[u8], target: &[u8]) -> bool {
    if target.is_empty() || target[0] == b'/' || target.contains(&0) {
        return false;
    }
    let Some(rel) = link.strip_prefix(root) else {
        return false;
    };
    // The link's own directory is real (nothing is unpacked below a symlink).
    let depth = rel.iter().filter(|&&b| b == b'/').count();
    let mut ups = 0;
    let mut seen_name = false;
    for comp in target.split(|&b| b == b'/') {
        match comp {
            b"" | b"." => {}
            b".." if seen_name => return false,
            b".." => ups += 1,
            _ => seen_name = true,
        }
    }
    ups <= depth
}

/// Each proper ancestor of `path` (`a`, `a/b` for `a/b/c`).
pub fn ancestors(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    path.iter()
        .enumerate()
        .filter(|&(_, &b)| b == b'/')
        .map(move |(i, _)| &path[..i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        assert!(invalid_reason(b"codebase/a.py").is_none());
        assert!(invalid_reason(b"/etc/passwd").is_some());
        assert!(invalid_reason(b"codebase/../x").is_some());
        assert!(invalid_reason(b"codebase//x").is_some());
        assert!(invalid_reason(b"codebase/x/").is_some());
        assert!(link_stays_inside(b"codebase/", b"codebase/a/l", b"../b"));
        assert!(link_stays_inside(b"codebase/", b"codebase/l", b"a/./b"));
        assert!(!link_stays_inside(b"codebase/", b"codebase/l", b"../x"));
        assert!(!link_stays_inside(
            b"codebase/",
            b"codebase/a/l",
            b"../../x"
        ));
        assert!(!link_stays_inside(b"codebase/", b"codebase/l", b"/etc"));
        // A `..` after a name may climb through another link: refused.
        assert!(!link_stays_inside(
            b"codebase/",
            b"codebase/a/b/t",
            b"s/../../x"
        ));
        let a: Vec<&[u8]> = ancestors(b"a/b/c").collect();
        assert_eq!(a, vec![&b"a"[..], &b"a/b"[..]]);
    }
}
