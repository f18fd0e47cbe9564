//! What a collection run's report sums up for people.

use std::collections::BTreeMap;

use super::{CollectReport, Outcome};

impl CollectReport {
    /// How many pull requests were skipped for each reason.
    pub fn skipped_by_reason(&self) -> BTreeMap<&str, usize> {
        let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
        for o in self.outcomes.values() {
            if let Outcome::Skipped { reason } = o {
                *reasons.entry(reason.as_str()).or_default() += 1;
            }
        }
        reasons
    }
}
