//! The bundle format: one task instance as a deterministic POSIX tar stream, zstd-compressed,
//! named by the sha256 of the uncompressed tar. Version 1, version 2 (version 1 with
//! `vcs.json`), and version 3 (the reproducible record of a validation, `expected.json`, in
//! place of its observations). See `docs/BUNDLE-FORMAT.md` for the exact bytes.

mod codebase;
mod error;
mod expected;
mod gittree;
mod manifest;
mod members;
mod pack;
mod path;

pub use path::link_stays_inside;
mod read;
mod tarfmt;

pub use codebase::{Codebase, CodebaseEntry, EntrySource};
pub use error::{BundleError, Problem};
pub use expected::{Expected, ExpectedError};
pub use gittree::{GITLINK_MODE, TreeError, tree_id};
pub use manifest::{EntryPathError, Gitlink, Manifest, ManifestMember, MemberKind};
pub use members::{FixedMembers, read_fixed_members, tar_id};
pub use pack::{
    PackInputs, PackOptions, PackPlan, PackedBundle, PlannedMember, ValidationRecord, pack_to_dir,
    plan, write_bundle_file,
};
pub use read::{
    BundleFile, BundleSource, Limits, MemoryMember, MemoryMembers, OnMember, ReadMember,
    ScanReport, id_from_file_name, read_manifest, read_manifest_from, read_members,
    read_members_into_memory, unpack, unpack_from, verify, verify_file,
};
pub use tarfmt::{END_OF_ARCHIVE, TarWriter, member_header, padding};

/// The `format` field of every `bundle.json`.
pub const FORMAT: &str = "swe-ark-bundle";
/// The format version of a bundle without `vcs.json`: its bytes, and so its id, are those of
/// every bundle written before version 2.
pub const VERSION_1: u32 = 1;
/// Version 1 with the optional member `vcs.json` (what git says about the base commit); a
/// bundle is version 2 exactly when it holds `vcs.json`.
pub const VERSION_2: u32 = 2;
/// A bundle whose validation record is reproducible: `expected.json` (what a validation
/// proved, with nothing of when, where or how long) in place of `results.json`, and logs
/// normalized by the documented rules; a bundle is version 3 exactly when it holds
/// `expected.json`.
pub const VERSION_3: u32 = 3;
/// The versions this swe-ark reads.
pub const SUPPORTED_VERSIONS: [u32; 3] = [VERSION_1, VERSION_2, VERSION_3];

/// The validation record of a version 1 or 2 bundle: everything the run saw, as given.
pub const RESULTS_MEMBER: &str = "results.json";
/// The validation record of a version 3 bundle (docs/BUNDLE-FORMAT.md, "expected.json").
pub const EXPECTED_MEMBER: &str = "expected.json";

/// The version of a bundle that does, or does not, hold `vcs.json` and `expected.json`.
pub fn version_for(has_vcs: bool, has_expected: bool) -> u32 {
    match (has_expected, has_vcs) {
        (true, _) => VERSION_3,
        (false, true) => VERSION_2,
        (false, false) => VERSION_1,
    }
}
/// The name of the manifest, always the first member of the tar.
pub const MANIFEST: &str = "bundle.json";
/// The directory that holds the instance's codebase inside a bundle.
pub const CODEBASE_DIR: &str = "codebase/";
/// Bundle files are named `<id>.tar.zst`.
pub const FILE_SUFFIX: &str = ".tar.zst";

/// Members every bundle holds besides `bundle.json` (and `codebase/`, which may be empty).
pub const REQUIRED_MEMBERS: [&str; 3] = ["instance.json", "patches/gold.diff", "patches/test.diff"];

/// Members other than the codebase that a bundle may hold. Anything else outside `codebase/`
/// is refused when reading.
pub const FIXED_MEMBERS: [&str; 14] = [
    "bundle.json",
    "env/native-lock.toml",
    "env/node-lock.toml",
    "env/pylock.toml",
    "env/rust-lock.toml",
    "env/spec.toml",
    "expected.json",
    "instance.json",
    "logs/post.log",
    "logs/pre.log",
    "patches/gold.diff",
    "patches/test.diff",
    "results.json",
    "vcs.json",
];
