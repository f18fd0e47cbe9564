//! The decoding thread and the pipe from it: the zstd stream is decoded and hashed on one
//! thread while the tar is checked on another.

use std::cell::RefCell;
use std::io::{self, Read};
use std::rc::Rc;
use std::sync::mpsc::{Receiver, SyncSender};

use crate::digest::{Sha256Digest, Sha256Hasher};

pub(super) const CHUNK: usize = 1 << 20;

pub(super) type Chunk = Result<Vec<u8>, io::Error>;

/// The decoded tar stream, as it arrives from the decoding thread.
pub(super) struct Pipe {
    pub(super) rx: Receiver<Chunk>,
    pub(super) cur: Vec<u8>,
    pub(super) pos: usize,
    pub(super) zstd_error: Rc<RefCell<Option<String>>>,
}

impl Read for Pipe {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.cur.len() {
            match self.rx.recv() {
                Ok(Ok(chunk)) => {
                    self.cur = chunk;
                    self.pos = 0;
                }
                Ok(Err(e)) => {
                    let msg = e.to_string();
                    *self.zstd_error.borrow_mut() = Some(msg.clone());
                    return Err(io::Error::other(msg));
                }
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.cur.len() - self.pos);
        buf[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Reads the tar stream from `reader`, hashing it, and sends it on in chunks. Stops early if
/// the reader hangs up.
pub(super) fn pump(
    mut reader: Box<dyn Read + Send + '_>,
    tx: SyncSender<Chunk>,
) -> (Sha256Digest, u64) {
    let mut hasher = Sha256Hasher::new();
    let mut len = 0u64;
    loop {
        let mut buf = vec![0u8; CHUNK];
        let mut filled = 0;
        // Fill whole chunks so the reader side sees few, large pieces.
        while filled < CHUNK {
            match reader.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return (hasher.finish(), len);
                }
            }
        }
        if filled == 0 {
            return (hasher.finish(), len);
        }
        buf.truncate(filled);
        hasher.update(&buf);
        len += filled as u64;
        if tx.send(Ok(buf)).is_err() {
            return (hasher.finish(), len);
        }
    }
}
