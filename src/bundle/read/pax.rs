//! Tar entries read raw, a pax header held to the limits like a member and allowed only the
//! records a bundle needs.

use std::cell::RefCell;
use std::io::Read;
use std::rc::Rc;

use tar::EntryType;

use super::scan::Scanner;
use crate::bundle::error::BundleError;
use crate::bundle::path;

/// The largest pax extended header a reader accepts: swe-ark writes one only to carry a path or
/// link target over 100 bytes.
const MAX_PAX_HEADER: u64 = 1 << 20;

/// A pax record's key and value.
type PaxRecord<'a> = (&'a [u8], &'a [u8]);

/// The `path` and `linkpath` a pax header gives the entry after it.
type PaxNames = (Option<Vec<u8>>, Option<Vec<u8>>);

/// A pax record that does not read as `<len> <key>=<value>\n` (its first 40 bytes).
#[derive(Debug, thiserror::Error)]
#[error("malformed record `{0}`")]
struct MalformedPax(String);

/// The records of a pax extended header, each `<len> <key>=<value>\n` where `<len>` counts
/// the whole record. Split by length, not at newlines: a value may hold a newline.
fn pax_records(mut data: &[u8]) -> Result<Vec<PaxRecord<'_>>, MalformedPax> {
    let mut records = Vec::new();
    while !data.is_empty() {
        let bad = || MalformedPax(path::display(&data[..data.len().min(40)]));
        let space = data.iter().position(|&b| b == b' ').ok_or_else(bad)?;
        let len: usize = std::str::from_utf8(&data[..space])
            .ok()
            .and_then(|n| n.parse().ok())
            .ok_or_else(bad)?;
        if len <= space + 1 || len > data.len() || data[len - 1] != b'\n' {
            return Err(bad());
        }
        let record = &data[space + 1..len - 1];
        let eq = record.iter().position(|&b| b == b'=').ok_or_else(bad)?;
        records.push((&record[..eq], &record[eq + 1..]));
        data = &data[len..];
    }
    Ok(records)
}

/// A tar entry with its path and link target (from its pax header, if it has one).
pub(super) type Member<'a, R> = (tar::Entry<'a, R>, Vec<u8>, Option<Vec<u8>>);

impl Scanner<'_> {
    /// The next member and the path and link target its pax header gives it. The tar is read
    /// raw: the tar crate would read a pax header of any size into memory before a limit is
    /// checked, and would take records such as `size` from it. Here a pax header is held to the
    /// limits from its header, like a member, and may hold only `path`, `linkpath` and
    /// `hdrcharset` records.
    pub(super) fn next_member<'a, R: Read>(
        &self,
        entries: &mut tar::Entries<'a, R>,
        total: &mut u64,
        zstd_error: &Rc<RefCell<Option<String>>>,
    ) -> Result<Option<Member<'a, R>>, BundleError> {
        let mut pax: Option<PaxNames> = None;
        loop {
            let mut entry = match entries.next() {
                Some(e) => e.map_err(|e| self.classify(e, zstd_error))?,
                None if pax.is_some() => {
                    return Err(BundleError::Tar {
                        path: self.bundle.to_path_buf(),
                        detail: "the archive ends after a pax header".into(),
                    });
                }
                None => return Ok(None),
            };
            let header_name = entry.path_bytes().into_owned();
            if entry.header().entry_type() != EntryType::XHeader {
                let (path, linkpath) = pax.unwrap_or_default();
                let link = linkpath.or_else(|| entry.link_name_bytes().map(|l| l.into_owned()));
                return Ok(Some((entry, path.unwrap_or(header_name), link)));
            }
            if pax.is_some() {
                return Err(self.refuse(&header_name, "two pax headers in a row"));
            }
            let size = entry.size();
            let limit = MAX_PAX_HEADER.min(self.limits.max_member_size);
            if size > limit {
                return Err(self.refuse(
                    &header_name,
                    format!("{size} bytes is over the limit of {limit} for a pax header"),
                ));
            }
            *total += size;
            if *total > self.limits.max_total_size {
                return Err(self.refuse(
                    &header_name,
                    format!(
                        "the bundle expands past the total size limit of {} bytes",
                        self.limits.max_total_size
                    ),
                ));
            }
            let mut data = Vec::with_capacity(size as usize);
            entry
                .read_to_end(&mut data)
                .map_err(|e| self.classify(e, zstd_error))?;
            if data.len() as u64 != size {
                return Err(BundleError::Tar {
                    path: self.bundle.to_path_buf(),
                    detail: format!("a pax header is truncated ({} of {size} bytes)", data.len()),
                });
            }
            let records = pax_records(&data).map_err(|e| BundleError::Tar {
                path: self.bundle.to_path_buf(),
                detail: format!("a pax header is malformed: {e}"),
            })?;
            let mut found: PaxNames = (None, None);
            for (key, value) in records {
                match key {
                    b"path" => found.0 = Some(value.to_vec()),
                    b"linkpath" => found.1 = Some(value.to_vec()),
                    b"hdrcharset" => {}
                    other => {
                        return Err(self.refuse(
                            &header_name,
                            format!(
                                "a pax `{}` record (bundle format v1 has only `path` and `linkpath`)",
                                path::display(other)
                            ),
                        ));
                    }
                }
            }
            pax = Some(found);
        }
    }
}
