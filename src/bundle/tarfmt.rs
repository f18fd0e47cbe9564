//! The one tar layout swe-ark writes: POSIX ustar headers with mtime 0, uid/gid 0, empty user
//! and group names; a path or link target longer than the 100-byte header field goes into a
//! pax extended header (`path` / `linkpath`, with `hdrcharset=BINARY` when not UTF-8) named
//! `././@PaxHeader`. No directory entries; the archive ends with two zero blocks.

use std::io::{self, Read, Write};

use tar::{EntryType, Header};

use super::manifest::MemberKind;

const BLOCK: usize = 512;
const NAME_FIELD: usize = 100;
/// The largest size an ustar header's 11 octal digits can hold.
pub const MAX_MEMBER_SIZE: u64 = 0o77777777777;
const PAX_HEADER_NAME: &[u8] = b"././@PaxHeader";

pub struct TarWriter<W: Write> {
    out: W,
}

fn pax_record(key: &str, value: &[u8]) -> Vec<u8> {
    // "<len> <key>=<value>\n" where <len> counts the whole record, its own digits included.
    let base = key.len() + value.len() + 3;
    let mut len = base + 1;
    while base + len.to_string().len() != len {
        len = base + len.to_string().len();
    }
    let mut rec = format!("{len} {key}=").into_bytes();
    rec.extend_from_slice(value);
    rec.push(b'\n');
    debug_assert_eq!(rec.len(), len);
    rec
}

fn header(name: &[u8], entry_type: EntryType, mode: u32, size: u64, link: &[u8]) -> Header {
    let mut h = Header::new_ustar();
    {
        let u = h.as_ustar_mut().expect("a new ustar header is ustar");
        let n = name.len().min(NAME_FIELD);
        u.name[..n].copy_from_slice(&name[..n]);
        let l = link.len().min(NAME_FIELD);
        u.linkname[..l].copy_from_slice(&link[..l]);
    }
    h.set_mode(mode);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_size(size);
    h.set_entry_type(entry_type);
    h.set_cksum();
    h
}

/// What ends every archive: two zero blocks.
pub const END_OF_ARCHIVE: [u8; 2 * BLOCK] = [0u8; 2 * BLOCK];

/// The zeros that pad `size` bytes of content to a whole block.
pub fn padding(size: u64) -> &'static [u8] {
    const ZEROS: [u8; BLOCK] = [0u8; BLOCK];
    let rem = (size % BLOCK as u64) as usize;
    if rem == 0 { &[] } else { &ZEROS[..BLOCK - rem] }
}

/// The bytes before a member's content: a pax extended header when the path or link target
/// is over 100 bytes, then the ustar header. Readers that rebuild a tar from stored members
/// use it, so the one layout lives here.
pub fn member_header(path: &[u8], kind: MemberKind, size: u64, link: &[u8]) -> io::Result<Vec<u8>> {
    if size > MAX_MEMBER_SIZE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{size} bytes is over the largest member a bundle holds ({MAX_MEMBER_SIZE})"),
        ));
    }
    let mut out = Vec::with_capacity(BLOCK);
    let mut pax = Vec::new();
    let binary = std::str::from_utf8(path).is_err() || std::str::from_utf8(link).is_err();
    if (path.len() > NAME_FIELD || link.len() > NAME_FIELD) && binary {
        pax.extend(pax_record("hdrcharset", b"BINARY"));
    }
    if path.len() > NAME_FIELD {
        pax.extend(pax_record("path", path));
    }
    if link.len() > NAME_FIELD {
        pax.extend(pax_record("linkpath", link));
    }
    if !pax.is_empty() {
        let h = header(
            PAX_HEADER_NAME,
            EntryType::XHeader,
            0o644,
            pax.len() as u64,
            b"",
        );
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(&pax);
        out.extend_from_slice(padding(pax.len() as u64));
    }
    let entry_type = match kind {
        MemberKind::Symlink => EntryType::Symlink,
        _ => EntryType::Regular,
    };
    let h = header(path, entry_type, kind.tar_mode(), size, link);
    out.extend_from_slice(h.as_bytes());
    Ok(out)
}

impl<W: Write> TarWriter<W> {
    pub fn new(out: W) -> Self {
        TarWriter { out }
    }

    /// Appends one member. `data` must yield exactly `size` bytes (for a symlink, `size` is 0
    /// and `link` is its target); a source that yields more or fewer is an error, since a file
    /// that changes while it is packed must not give a bundle that lies.
    pub fn append(
        &mut self,
        path: &[u8],
        kind: MemberKind,
        size: u64,
        link: &[u8],
        data: &mut dyn Read,
    ) -> io::Result<()> {
        self.out
            .write_all(&member_header(path, kind, size, link)?)?;
        if size > 0 {
            let copied = io::copy(&mut data.take(size), &mut self.out)?;
            let mut probe = [0u8; 1];
            if copied != size || data.read(&mut probe)? != 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "the content changed while it was packed ({size} bytes expected, {} read)",
                        if copied == size {
                            format!("more than {size}")
                        } else {
                            copied.to_string()
                        }
                    ),
                ));
            }
            self.pad(size)?;
        }
        Ok(())
    }

    fn pad(&mut self, size: u64) -> io::Result<()> {
        self.out.write_all(padding(size))
    }

    /// Writes the end-of-archive marker (two zero blocks) and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.write_all(&END_OF_ARCHIVE)?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pax_record_length_counts_itself() {
        assert_eq!(pax_record("path", b"x"), b"9 path=x\n");
        // Where the length's own digits tip it from 9 to 11.
        assert_eq!(pax_record("path", b"xy"), b"11 path=xy\n");
        let long = vec![b'a'; 95];
        let r = pax_record("path", &long);
        let len: usize = std::str::from_utf8(&r[..r.iter().position(|&b| b == b' ').unwrap()])
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(len, r.len());
    }
}
