//! Output helpers: the terminal progress bar, sizes for people, sizes from people, errors for
//! people.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::progress::Progress;
use crate::store::Checked;

/// A progress bar on stderr (the caller decides whether stderr is a terminal).
pub struct TerminalProgress {
    bar: ProgressBar,
}

impl TerminalProgress {
    pub fn new() -> Self {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        TerminalProgress { bar }
    }
}

impl Default for TerminalProgress {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress for TerminalProgress {
    fn start(&self, label: &str, total: Option<u64>) {
        self.bar.reset();
        match total {
            Some(t) => {
                self.bar.set_length(t);
                self.bar.set_style(
                    ProgressStyle::with_template(
                        "{msg} [{wide_bar}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
                    )
                    .expect("a valid template")
                    .progress_chars("=> "),
                );
            }
            None => {
                self.bar.unset_length();
                self.bar.set_style(
                    ProgressStyle::with_template("{msg} {spinner} {bytes} {bytes_per_sec}")
                        .expect("a valid template"),
                );
            }
        }
        self.bar.set_message(label.to_string());
    }
    fn advance(&self, units: u64) {
        self.bar.inc(units);
    }
    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

pub use crate::units::{human_bytes, parse_size};

/// A unix time for people, in UTC.
pub fn human_time(secs: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// The arguments of a `ls` subcommand (`mirror ls`, `env ls`, `release ls`).
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Print the list as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The width of a text column: its widest cell, and at least `min` (the header's width).
pub(super) fn column_width(cells: impl Iterator<Item = usize>, min: usize) -> usize {
    cells.max().unwrap_or(min).max(min)
}

/// `verify`'s and `release verify`'s results: JSON, or one line per check and one per
/// problem. Returns how many checks failed.
pub(super) fn print_checks(checks: &[Checked], json: bool) -> anyhow::Result<usize> {
    if json {
        out!("{}", serde_json::to_string_pretty(checks)?);
    } else {
        for c in checks {
            out!("{} {} {}", if c.ok { "ok " } else { "BAD" }, c.what, c.name);
            for p in &c.problems {
                out!("    {p}");
            }
        }
    }
    Ok(checks.iter().filter(|c| !c.ok).count())
}

/// Whether `e` comes from writing to a closed pipe (a reader that stopped early).
pub(super) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The error and its causes, joined by `: `, leaving out a cause whose text the message
/// already carries (typed errors here put their source in their own sentence).
pub(super) fn error_chain(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if msg.contains(&text) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&text);
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("3 parsecs").is_err());
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
    }
}
