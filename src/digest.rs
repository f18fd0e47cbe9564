//! Typed content hashes: a sha256 is the identity of every bundle and object, a git object id
//! (sha1) is how git names a tree or blob.

use std::fmt;
use std::io::{self, Read, Write};
use std::str::FromStr;

use sha1::Sha1;
use sha2::{Digest as _, Sha256};

/// A sha256 digest, shown as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256Digest(pub [u8; 32]);

/// A git object id (sha1), shown as 40 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GitOid(pub [u8; 20]);

#[derive(Debug, thiserror::Error)]
#[error("`{text}` is not a {what} ({expected} hex digits)")]
pub struct ParseDigestError {
    text: String,
    what: &'static str,
    expected: usize,
}

impl Sha256Digest {
    pub fn of(bytes: &[u8]) -> Self {
        Sha256Digest(Sha256::digest(bytes).into())
    }

    /// The first 12 hex digits, for tables meant for people.
    pub fn short(&self) -> String {
        self.hex()[..12].to_string()
    }
}

fn parse_hex<const N: usize>(s: &str, what: &'static str) -> Result<[u8; N], ParseDigestError> {
    let err = || ParseDigestError {
        text: s.to_string(),
        what,
        expected: N * 2,
    };
    // Lowercase only: one spelling per digest. One pass (manifests hold thousands of them).
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    let bytes = s.as_bytes();
    if bytes.len() != N * 2 {
        return Err(err());
    }
    let mut out = [0u8; N];
    for (o, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        match (digit(pair[0]), digit(pair[1])) {
            (Some(h), Some(l)) => *o = (h << 4) | l,
            _ => return Err(err()),
        }
    }
    Ok(out)
}

/// What both hash types are alike in: written as lowercase hex everywhere (shown, parsed,
/// serialized); `what` names the type in a parse error.
macro_rules! hex_digest {
    ($name:ident, $what:literal) => {
        impl $name {
            pub fn hex(&self) -> String {
                hex::encode(self.0)
            }
        }

        impl FromStr for $name {
            type Err = ParseDigestError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                parse_hex(s, $what).map($name)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.hex())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self.hex())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.hex())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                // Borrowed where the input allows: no String per digest.
                struct Hex;
                impl serde::de::Visitor<'_> for Hex {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str(concat!("a ", $what, " in lowercase hex"))
                    }
                    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<$name, E> {
                        s.parse().map_err(E::custom)
                    }
                }
                d.deserialize_str(Hex)
            }
        }
    };
}

hex_digest!(Sha256Digest, "sha256");
hex_digest!(GitOid, "git object id");

/// Incremental sha256.
#[derive(Clone, Default)]
pub struct Sha256Hasher(Sha256);

impl Sha256Hasher {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    pub fn finish(self) -> Sha256Digest {
        Sha256Digest(self.0.finalize().into())
    }
}

/// Incremental git blob id: sha1 over `blob <len>\0` and the content.
#[derive(Clone)]
pub struct GitBlobHasher(Sha1);

impl GitBlobHasher {
    pub fn new(len: u64) -> Self {
        let mut h = Sha1::new();
        h.update(format!("blob {len}\0").as_bytes());
        GitBlobHasher(h)
    }
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    pub fn finish(self) -> GitOid {
        GitOid(self.0.finalize().into())
    }
}

/// The id git gives an object of `kind` with this content.
pub fn git_object_id(kind: &str, content: &[u8]) -> GitOid {
    let mut h = Sha1::new();
    h.update(format!("{kind} {}\0", content.len()).as_bytes());
    h.update(content);
    GitOid(h.finalize().into())
}

/// A writer that hashes everything written through it and counts the bytes.
pub struct HashingWriter<W> {
    inner: W,
    hasher: Sha256Hasher,
    len: u64,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            hasher: Sha256Hasher::new(),
            len: 0,
        }
    }
    pub fn finish(self) -> (W, Sha256Digest, u64) {
        (self.inner, self.hasher.finish(), self.len)
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A reader that hashes everything read through it and counts the bytes.
pub struct HashingReader<R> {
    inner: R,
    hasher: Sha256Hasher,
    len: u64,
}

impl<R: Read> HashingReader<R> {
    pub fn new(inner: R) -> Self {
        HashingReader {
            inner,
            hasher: Sha256Hasher::new(),
            len: 0,
        }
    }
    pub fn len(&self) -> u64 {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn finish(self) -> (R, Sha256Digest, u64) {
        (self.inner, self.hasher.finish(), self.len)
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        assert_eq!(
            Sha256Digest::of(b"").hex(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        // `git hash-object` of an empty file, and of "hello\n".
        assert_eq!(
            GitBlobHasher::new(0).finish().hex(),
            "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
        );
        let mut h = GitBlobHasher::new(6);
        h.update(b"hello\n");
        assert_eq!(h.finish().hex(), "ce013625030ba8dba906f756967f9e9ca394464a");
        assert_eq!(
            git_object_id("tree", b"").hex(),
            "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
        );
    }

    #[test]
    fn parse_rejects_bad_hex() {
        assert!("abc".parse::<Sha256Digest>().is_err());
        assert!(
            "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"
                .parse::<Sha256Digest>()
                .is_err()
        );
        let d: Sha256Digest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
            .parse()
            .unwrap();
        assert_eq!(d, Sha256Digest::of(b""));
    }
}
