//! SWE-bench task instances and the files that carry them.

mod instance;

pub use instance::{Instance, InstanceError, is_repo};
