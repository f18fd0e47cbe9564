//! swe-ark: a reproducible, offline archive of SWE-bench-style task instances.
//!
//! The library is organised by stage (see `docs/ARCHITECTURE.md`): [`bundle`] owns the
//! deterministic bundle format, [`store`] the archive directory (object store and SQLite index),
//! [`dataset`] the SWE-bench instance type. [`cli`] is the command line on top of them.

pub mod archive;
pub mod bundle;
pub mod cli;
pub mod collect;
pub mod context;
pub mod dataset;
pub mod demo;
pub mod diff;
pub mod digest;
pub mod env;
pub mod failpoint;
pub mod fsutil;
pub mod gitcmd;
pub mod harness;
mod local_server;
pub mod logparse;
pub mod manifest;
pub mod mirror;
pub mod pack;
pub mod plan;
pub mod progress;
pub mod release;
pub mod remote;
pub mod replay;
pub mod sandbox;
pub mod shard;
pub mod shell;
pub mod store;
pub mod text;
pub mod units;
pub mod validate;
pub mod vcs;
pub mod verdict;
pub mod workers;
