//! The command's stdout and stderr, copied from their one pipe into the output file, up to
//! the cap.

use std::fs::File;
use std::io::{self, BufWriter, PipeReader, Read, Write};
use std::os::fd::AsRawFd;
use std::process::Child;
use std::time::{Duration, Instant};

/// What [`capture`] saw.
pub(super) struct Captured {
    pub(super) total: u64,
    pub(super) truncated: bool,
    /// Set when the output pipe stayed open after the helpers ended.
    pub(super) unfinished: Option<String>,
}

/// Copies the output pipe into `file`, keeping the first `cap` bytes, until every writer is
/// gone. Should anything keep the pipe open after the helpers have ended (nothing should: the
/// tree is dead by then), it stops 5 s later.
pub(super) fn capture(
    pipe: PipeReader,
    file: File,
    cap: u64,
    child: &mut Child,
) -> io::Result<Captured> {
    let mut pipe = pipe;
    let mut out = BufWriter::new(file);
    let mut write_error: Option<io::Error> = None;
    let mut kept: u64 = 0;
    let mut total: u64 = 0;
    let mut last: Option<u8> = None;
    let mut buf = vec![0u8; 64 * 1024];
    let mut helpers_done: Option<Instant> = None;
    let mut unfinished = None;
    loop {
        let mut pfd = libc::pollfd {
            fd: pipe.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one element.
        let ready = unsafe { libc::poll(&mut pfd, 1, 250) };
        if ready > 0 {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let chunk = &buf[..n];
                    total = total.saturating_add(n as u64);
                    let room = usize::try_from(cap.saturating_sub(kept)).unwrap_or(usize::MAX);
                    let keep = &chunk[..chunk.len().min(room)];
                    if !keep.is_empty() && write_error.is_none() {
                        if let Err(e) = out.write_all(keep) {
                            write_error = Some(e);
                        }
                        kept = kept.saturating_add(keep.len() as u64);
                        last = keep.last().copied();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        } else if ready < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        match helpers_done {
            None => {
                if matches!(child.try_wait(), Ok(Some(_)) | Err(_)) {
                    helpers_done = Some(Instant::now());
                }
            }
            Some(at) if at.elapsed() > Duration::from_secs(5) => {
                unfinished = Some(
                    "the output pipe stayed open after the command's processes ended (a \
                     descriptor passed outside the sandbox?); the output may be incomplete"
                        .to_string(),
                );
                break;
            }
            Some(_) => {}
        }
    }
    if let Some(e) = write_error {
        return Err(e);
    }
    let truncated = total > kept;
    if truncated {
        if last.is_some_and(|b| b != b'\n') {
            out.write_all(b"\n")?;
        }
        writeln!(out, "[swe-ark: output truncated after {kept} bytes]")?;
    }
    out.flush()?;
    Ok(Captured {
        total,
        truncated,
        unfinished,
    })
}
