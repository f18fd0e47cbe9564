//! Locked, offline-installable environments. So far: finding the interpreter a context needs.

pub mod python;
