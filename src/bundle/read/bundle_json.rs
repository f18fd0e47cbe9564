//! `bundle.json`, the first member, read and checked before anything else is trusted.

use std::collections::{HashMap, HashSet};
use std::io::Read;

use super::scan::Scanner;
use crate::bundle::error::BundleError;
use crate::bundle::manifest::Manifest;
use crate::bundle::{CODEBASE_DIR, FORMAT, MANIFEST, REQUIRED_MEMBERS, SUPPORTED_VERSIONS, path};

impl Scanner<'_> {
    pub(super) fn read_manifest(
        &self,
        entry: &mut tar::Entry<impl Read>,
        name: &[u8],
    ) -> Result<(Manifest, Vec<u8>), BundleError> {
        let not_bundle = |detail: String| BundleError::NotABundle {
            path: self.bundle.to_path_buf(),
            detail,
        };
        if name != MANIFEST.as_bytes() || !entry.header().entry_type().is_file() {
            return Err(not_bundle(format!(
                "its first member is `{}`, not {MANIFEST}",
                path::display(name)
            )));
        }
        let size = entry.size();
        self.size_within(name, size, self.limits.max_manifest_size, MANIFEST)?;
        let mut bytes = Vec::with_capacity(size as usize);
        entry
            .read_to_end(&mut bytes)
            .map_err(|e| BundleError::io(self.bundle, e))?;
        let bad = |detail: String| BundleError::BadManifest {
            path: self.bundle.to_path_buf(),
            detail,
        };
        let loose: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
        if loose.get("format").and_then(|v| v.as_str()) != Some(FORMAT) {
            return Err(not_bundle(format!(
                "bundle.json has format {}, not \"{FORMAT}\"",
                loose
                    .get("format")
                    .map_or("(none)".to_string(), |v| v.to_string())
            )));
        }
        match loose.get("version").and_then(|v| v.as_u64()) {
            Some(v) if SUPPORTED_VERSIONS.iter().any(|&s| u64::from(s) == v) => {}
            Some(found) => {
                return Err(BundleError::UnsupportedVersion {
                    path: self.bundle.to_path_buf(),
                    found,
                });
            }
            None => return Err(bad("it has no numeric `version`".into())),
        }
        let manifest: Manifest = serde_json::from_value(loose).map_err(|e| bad(e.to_string()))?;
        if let Some(why) = manifest.version_mismatch() {
            return Err(bad(why));
        }
        let mut paths = HashSet::new();
        for m in &manifest.members {
            if m.path == MANIFEST.as_bytes() || !paths.insert(&m.path[..]) {
                return Err(bad(format!(
                    "member `{}` is listed twice (or bundle.json lists itself)",
                    path::display(&m.path)
                )));
            }
        }
        let mut links = HashSet::new();
        for g in &manifest.gitlinks {
            let name = path::display(&g.path);
            if !g.path.starts_with(CODEBASE_DIR.as_bytes()) || g.path.len() == CODEBASE_DIR.len() {
                return Err(bad(format!("gitlink `{name}` is not inside codebase/")));
            }
            if paths.contains(&g.path[..]) || !links.insert(&g.path[..]) {
                return Err(bad(format!(
                    "gitlink `{name}` is listed twice or is also a member"
                )));
            }
        }
        // A path inside a submodule belongs to the innermost one around it, which must carry
        // its content (a `tree`): members, and submodules of a submodule.
        let carried: HashMap<&[u8], bool> = manifest
            .gitlinks
            .iter()
            .map(|g| (&g.path[..], g.tree.is_some()))
            .collect();
        let inside = manifest
            .members
            .iter()
            .map(|m| (&m.path[..], "member"))
            .chain(manifest.gitlinks.iter().map(|g| (&g.path[..], "gitlink")));
        for (p, what) in inside {
            if let Some(anc) = path::ancestors(p)
                .filter(|a| carried.contains_key(a))
                .last()
                && !carried[anc]
            {
                return Err(bad(format!(
                    "{what} `{}` lies inside the submodule `{}`, whose content bundle.json \
                     does not carry (no `tree`)",
                    path::display(p),
                    path::display(anc)
                )));
            }
        }
        for required in REQUIRED_MEMBERS {
            if !paths.contains(required.as_bytes()) {
                return Err(bad(format!(
                    "it does not list `{required}`, which every bundle holds"
                )));
            }
        }
        if manifest.members.len() as u64 > self.limits.max_members {
            return Err(bad(format!(
                "it lists {} members, over the limit of {}",
                manifest.members.len(),
                self.limits.max_members
            )));
        }
        Ok((manifest, bytes))
    }
}
