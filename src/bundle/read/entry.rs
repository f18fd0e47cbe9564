//! Structural checks on one tar entry, before a byte of it is written: its path, its type,
//! its size.

use tar::EntryType;

use super::record_limit;
use super::scan::{Scanner, Seen};
use crate::bundle::error::BundleError;
use crate::bundle::manifest::MemberKind;
use crate::bundle::{CODEBASE_DIR, FIXED_MEMBERS, path};

fn kind_name(t: EntryType) -> String {
    match t {
        EntryType::Directory => "a directory entry (bundle format v1 has none)".into(),
        EntryType::Char | EntryType::Block => "a device file".into(),
        EntryType::Fifo => "a FIFO".into(),
        EntryType::GNUSparse => "a sparse file".into(),
        EntryType::XGlobalHeader => "a pax global header".into(),
        other => format!("an entry of tar type `{}`", other.as_byte() as char),
    }
}

impl Scanner<'_> {
    /// Structural checks on one entry, before a byte of it is written.
    pub(super) fn check_entry(
        &self,
        name: &[u8],
        etype: EntryType,
        link: Option<&[u8]>,
        seen: &Seen,
    ) -> Result<MemberKind, BundleError> {
        if let Some(reason) = path::invalid_reason(name) {
            return Err(self.refuse(name, reason));
        }
        let in_codebase =
            name.starts_with(CODEBASE_DIR.as_bytes()) && name.len() > CODEBASE_DIR.len();
        if !in_codebase && !FIXED_MEMBERS.iter().any(|f| f.as_bytes() == name) {
            return Err(self.refuse(
                name,
                "not a member of the bundle format (only codebase/… and the fixed members)",
            ));
        }
        if seen.kinds.contains_key(name) {
            return Err(self.refuse(name, "the member appears twice"));
        }
        if seen.gitlinks.contains_key(name) {
            return Err(self.refuse(
                name,
                "bundle.json lists this path as a submodule, a directory",
            ));
        }
        // Inside a submodule, the innermost one around it must carry its content.
        if let Some(g) = path::ancestors(name)
            .filter(|p| seen.gitlinks.contains_key(*p))
            .last()
            && !seen.gitlinks[g]
        {
            return Err(self.refuse(
                name,
                format!(
                    "bundle.json lists `{}` as a submodule whose content the bundle does not \
                     carry (no `tree`)",
                    path::display(g)
                ),
            ));
        }
        for anc in path::ancestors(name) {
            match seen.kinds.get(anc) {
                Some(MemberKind::Symlink) => {
                    return Err(self.refuse(
                        name,
                        format!("its path goes through the symlink `{}`", path::display(anc)),
                    ));
                }
                Some(_) => {
                    return Err(self.refuse(
                        name,
                        format!("its path goes through the file `{}`", path::display(anc)),
                    ));
                }
                None => {}
            }
        }
        match etype {
            EntryType::Regular => Ok(MemberKind::File),
            EntryType::Symlink => {
                let target = link.unwrap_or_default();
                if !in_codebase {
                    return Err(self.refuse(name, "only codebase/ may hold symlinks"));
                }
                if !path::link_stays_inside(CODEBASE_DIR.as_bytes(), name, target) {
                    return Err(self.refuse(
                        name,
                        format!(
                            "the symlink points outside the tree (to `{}`)",
                            path::display(target)
                        ),
                    ));
                }
                Ok(MemberKind::Symlink)
            }
            EntryType::Link => {
                let target = link.unwrap_or_default();
                let outside = path::invalid_reason(target).is_some();
                Err(self.refuse(
                    name,
                    format!(
                        "a hard link to `{}`{}; bundle format v1 has no hard links",
                        path::display(target),
                        if outside { ", outside the tree" } else { "" }
                    ),
                ))
            }
            other => Err(self.refuse(name, kind_name(other))),
        }
    }

    /// A member's size against the limits (a symlink carries none), counted in the total.
    pub(super) fn check_member_size(
        &self,
        name: &[u8],
        kind: MemberKind,
        size: u64,
        seen: &mut Seen,
    ) -> Result<(), BundleError> {
        if kind == MemberKind::Symlink && size != 0 {
            return Err(self.refuse(name, "a symlink entry that carries data"));
        }
        if seen.kinds.len() as u64 >= self.limits.max_members {
            return Err(self.refuse(
                name,
                format!("the bundle has over {} members", self.limits.max_members),
            ));
        }
        if size > self.limits.max_member_size {
            return Err(self.refuse(
                name,
                format!(
                    "{size} bytes is over the member size limit of {}",
                    self.limits.max_member_size
                ),
            ));
        }
        if let Some(limit) = record_limit(name) {
            self.size_within(name, size, limit, &path::display(name))?;
        }
        seen.total += size;
        if seen.total > self.limits.max_total_size {
            return Err(self.refuse(
                name,
                format!(
                    "the bundle expands past the total size limit of {} bytes",
                    self.limits.max_total_size
                ),
            ));
        }
        Ok(())
    }
}
