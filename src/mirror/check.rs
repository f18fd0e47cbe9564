//! `mirror verify`: a mirror checked against what the archive expects of it — every object
//! readable, every pin where the index says, every commit an instance needs there with its
//! whole tree, and the refs as the last fetch recorded them. The archive's expectations are
//! gathered by the caller (the index is a layer above).

use std::collections::BTreeMap;

use crate::progress::Progress;

use super::{Mirror, MirrorError};

/// A pin the archive recorded: `reference` should point at `commit`.
#[derive(Debug, Clone)]
pub struct ExpectedPin {
    pub reference: String,
    pub commit: String,
    /// What it is for, for messages: `base_commit of astropy__astropy-12907`.
    pub what: String,
}

/// What the archive expects of one mirror.
#[derive(Debug, Clone, Default)]
pub struct Expected {
    pub pins: Vec<ExpectedPin>,
    /// Commits instances need (base commits), each with what it is for.
    pub commits: Vec<(String, String)>,
    /// The refs the index recorded at the last fetch.
    pub refs: BTreeMap<String, String>,
}

/// What the check found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Checked {
    pub objects: usize,
    pub pins: usize,
    /// One sentence per problem; none: the mirror is as the archive expects.
    pub problems: Vec<String>,
}

/// Checks mirror `m` against `expected`.
pub fn verify(
    m: &Mirror,
    expected: &Expected,
    progress: &dyn Progress,
) -> Result<Checked, MirrorError> {
    let (objects, mut problems) = m.check_objects(progress)?;
    let pins = m.pins()?;
    for pin in &expected.pins {
        match pins.get(&pin.reference) {
            None => problems.push(format!(
                "pin {} ({}) is missing from the mirror",
                pin.reference, pin.what
            )),
            Some(t) if *t != pin.commit => problems.push(format!(
                "pin {} points at {t}, the index says {}",
                pin.reference, pin.commit
            )),
            Some(_) => {}
        }
    }
    // Every commit an instance needs, with its whole tree.
    let mut needed: Vec<(String, String)> = expected
        .pins
        .iter()
        .map(|p| (p.commit.clone(), p.what.clone()))
        .chain(expected.commits.iter().cloned())
        .collect();
    needed.sort();
    needed.dedup_by(|a, b| a.0 == b.0);
    for (commit, what) in needed {
        match m.check_tree(&commit) {
            Ok(found) => problems.extend(found),
            Err(e) => problems.push(format!("{what}: {e}")),
        }
    }
    let actual = super::upstream_refs(&m.repo).map_err(m.git())?;
    for change in super::diff_refs(&expected.refs, &actual) {
        problems.push(format!(
            "refs differ from the index's record of the last fetch: {change}"
        ));
    }
    Ok(Checked {
        objects,
        pins: pins.len(),
        problems,
    })
}
