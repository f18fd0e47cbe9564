//! Task instances from GitHub pull requests, as the SWE-bench paper builds them (its appendix
//! A.1–A.2): the rules (`rules`), the REST client (`github`), and the collection that joins
//! them.

mod archive;
pub mod github;
mod pulls;
pub mod rules;
mod summary;
pub mod version;

pub use archive::{Versioned, assign_and_record};
pub use pulls::{CollectError, CollectOptions, CollectReport, Outcome, assign_versions, collect};
