//! Progress reporting is a trait the library calls; the command line plugs in a terminal bar,
//! tests and quiet runs plug in nothing.

pub trait Progress: Sync {
    /// A new phase of `total` units (bytes), or of unknown length.
    fn start(&self, _label: &str, _total: Option<u64>) {}
    fn advance(&self, _units: u64) {}
    fn finish(&self) {}
}

/// Reports nothing.
pub struct NoProgress;

impl Progress for NoProgress {}
