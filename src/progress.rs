//! Progress reporting is a trait the library calls; the command line plugs in a terminal bar
//! (stderr is a terminal), plain lines ([`Lines`]: it is not), or nothing (`-q`, tests).

pub trait Progress: Sync {
    /// A new phase of `total` units (bytes), or of unknown length.
    fn start(&self, _label: &str, _total: Option<u64>) {}
    /// A new phase of `total` items (instances), each named by [`Progress::item`] as it begins.
    fn start_items(&self, _label: &str, _total: u64) {}
    /// The item now being worked on.
    fn item(&self, _name: &str) {}
    fn advance(&self, _units: u64) {}
    /// A line for people about what just ended (an instance's outcome), kept above the bar.
    fn line(&self, _text: &str) {}
    fn finish(&self) {}
}

/// Reports nothing.
pub struct NoProgress;

impl Progress for NoProgress {}

/// No bar, each [`Progress::line`] on stderr: for a stderr that is not a terminal (a log file,
/// CI).
pub struct Lines;

impl Progress for Lines {
    fn line(&self, text: &str) {
        eprintln!("{text}");
    }
}
