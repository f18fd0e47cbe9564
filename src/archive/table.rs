//! `pieces.bin`: what the packs of a version 2 archive file hold, frame by frame
//! (docs/RELEASES.md has the layout). It names no piece: the receiver decodes every piece
//! and names it by the sha256 of its content, which it must do to check it anyway. Ids
//! would be 32 bytes a piece, 5% of the file on a real repository's history.
//!
//! One zstd frame of:
//!
//! ```text
//! "swe-ark-pieces-v1\n"
//! varint H, then H ids of 32 bytes     the pieces the receiver must hold (bases of deltas)
//! varint P                             packs, in the order the file holds them
//!   per pack: varint F                 frames, from the pack's magic to its end
//!     per frame: varint length, byte kind
//!       kind 0 (whole pieces): varint n, then n sizes (varint)
//!       kind 1 (a delta):      varint size, varint base: 2k for carried piece k (pieces are
//!                              numbered in the order the table lists them, from 0),
//!                              2j + 1 for held id j
//! ```
//!
//! Varints are unsigned LEB128.

use std::collections::BTreeMap;

use crate::digest::Sha256Digest;
use crate::store::{Frame, FrameBase, FrameHolds};

const MAGIC: &[u8] = b"swe-ark-pieces-v1\n";
/// The table is compressed at this level: it is small, and compressing it harder costs little.
const LEVEL: i32 = 19;
/// The most a table may decode to.
const MAX_TABLE: usize = 1 << 30;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// The table's bytes for the packs' frames, in the order the file holds the packs.
pub fn encode(packs: &[&[Frame]]) -> Vec<u8> {
    let mut held: BTreeMap<Sha256Digest, usize> = BTreeMap::new();
    for f in packs.iter().flat_map(|p| p.iter()) {
        if let FrameHolds::Delta {
            base: FrameBase::Held(id),
            ..
        } = &f.holds
        {
            held.insert(*id, 0);
        }
    }
    for (i, v) in held.values_mut().enumerate() {
        *v = i;
    }
    let mut out = MAGIC.to_vec();
    put_varint(&mut out, held.len() as u64);
    for id in held.keys() {
        out.extend_from_slice(&id.0);
    }
    put_varint(&mut out, packs.len() as u64);
    for frames in packs {
        put_varint(&mut out, frames.len() as u64);
        for f in frames.iter() {
            put_varint(&mut out, f.length);
            match &f.holds {
                FrameHolds::Whole(sizes) => {
                    out.push(0);
                    put_varint(&mut out, sizes.len() as u64);
                    for s in sizes {
                        put_varint(&mut out, *s);
                    }
                }
                FrameHolds::Delta { size, base } => {
                    out.push(1);
                    put_varint(&mut out, *size);
                    let b = match base {
                        FrameBase::Carried(k) => 2 * *k as u64,
                        FrameBase::Held(id) => 2 * held[id] as u64 + 1,
                    };
                    put_varint(&mut out, b);
                }
            }
        }
    }
    zstd::bulk::compress(&out, LEVEL).unwrap_or_default()
}

/// Why a piece table does not read; each says where and what was found.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("it does not decode: {0}")]
    Decompress(#[source] std::io::Error),
    #[error("it is not a swe-ark piece table")]
    NotATable,
    #[error("it ends early, at byte {at}")]
    EndsEarly { at: usize },
    #[error("a number at byte {at} is too long")]
    NumberTooLong { at: usize },
    #[error("a count of {count} at byte {at} is more than it holds")]
    CountTooLarge { count: u64, at: usize },
    /// The id starting at byte `at` is cut short.
    #[error("it ends inside a held piece's id")]
    HeldIdCut { at: usize },
    #[error("it describes {described} pack(s); the file holds {held}")]
    PackCount { described: usize, held: usize },
    #[error("a delta names held piece {index} of {held}")]
    HeldPieceUnknown { index: usize, held: usize },
    #[error("a frame of kind {kind} at byte {at}")]
    FrameKind { kind: u8, at: usize },
    #[error("{count} bytes follow the last pack's frames")]
    TrailingBytes { count: usize },
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn byte(&mut self) -> Result<u8, TableError> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or(TableError::EndsEarly { at: self.at })?;
        self.at += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, TableError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(TableError::NumberTooLong { at: self.at })
    }

    /// A count of things that take at least one byte each: never more than the bytes left.
    fn count(&mut self) -> Result<usize, TableError> {
        let n = self.varint()?;
        if n > (self.bytes.len() - self.at) as u64 {
            return Err(TableError::CountTooLarge {
                count: n,
                at: self.at,
            });
        }
        Ok(n as usize)
    }
}

/// The packs' frames from the table's bytes; `packs` is how many packs the file holds.
pub fn decode(compressed: &[u8], packs: usize) -> Result<Vec<Vec<Frame>>, TableError> {
    let bytes = zstd::bulk::decompress(compressed, MAX_TABLE).map_err(TableError::Decompress)?;
    if !bytes.starts_with(MAGIC) {
        return Err(TableError::NotATable);
    }
    let mut c = Cursor {
        bytes: &bytes,
        at: MAGIC.len(),
    };
    let h = c.count()?;
    let mut held = Vec::with_capacity(h);
    for _ in 0..h {
        let end = c.at + 32;
        let id: [u8; 32] = bytes
            .get(c.at..end)
            .and_then(|s| s.try_into().ok())
            .ok_or(TableError::HeldIdCut { at: c.at })?;
        held.push(Sha256Digest(id));
        c.at = end;
    }
    let p = c.count()?;
    if p != packs {
        return Err(TableError::PackCount {
            described: p,
            held: packs,
        });
    }
    let mut out = Vec::with_capacity(p);
    for _ in 0..p {
        let f = c.count()?;
        let mut frames = Vec::with_capacity(f);
        for _ in 0..f {
            let length = c.varint()?;
            let holds = match c.byte()? {
                0 => {
                    let n = c.count()?;
                    let mut sizes = Vec::with_capacity(n);
                    for _ in 0..n {
                        sizes.push(c.varint()?);
                    }
                    FrameHolds::Whole(sizes)
                }
                1 => {
                    let size = c.varint()?;
                    let b = c.varint()?;
                    let base = if b % 2 == 0 {
                        FrameBase::Carried((b / 2) as usize)
                    } else {
                        let j = (b / 2) as usize;
                        FrameBase::Held(
                            *held
                                .get(j)
                                .ok_or(TableError::HeldPieceUnknown { index: j, held: h })?,
                        )
                    };
                    FrameHolds::Delta { size, base }
                }
                kind => return Err(TableError::FrameKind { kind, at: c.at - 1 }),
            };
            frames.push(Frame { length, holds });
        }
        out.push(frames);
    }
    if c.at != bytes.len() {
        return Err(TableError::TrailingBytes {
            count: bytes.len() - c.at,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_reads_back_as_written() {
        let held = Sha256Digest::of(b"held");
        let packs = vec![
            vec![
                Frame {
                    length: 300,
                    holds: FrameHolds::Whole(vec![10, 0, 1 << 40]),
                },
                Frame {
                    length: 5,
                    holds: FrameHolds::Delta {
                        size: 99,
                        base: FrameBase::Carried(2),
                    },
                },
            ],
            vec![Frame {
                length: 128,
                holds: FrameHolds::Delta {
                    size: 7,
                    base: FrameBase::Held(held),
                },
            }],
        ];
        let refs: Vec<&[Frame]> = packs.iter().map(|p| &p[..]).collect();
        let bytes = encode(&refs);
        assert_eq!(decode(&bytes, 2).unwrap(), packs);
        let wrong = decode(&bytes, 3).unwrap_err();
        assert!(matches!(
            wrong,
            TableError::PackCount {
                described: 2,
                held: 3
            }
        ));
        assert_eq!(
            wrong.to_string(),
            "it describes 2 pack(s); the file holds 3"
        );
        let mut raw = zstd::bulk::decompress(&bytes, MAX_TABLE).unwrap();
        raw.pop();
        let cut = zstd::bulk::compress(&raw, 3).unwrap();
        assert!(decode(&cut, 2).is_err());
        assert!(
            decode(b"not zstd", 2)
                .unwrap_err()
                .to_string()
                .contains("does not decode")
        );
    }
}
