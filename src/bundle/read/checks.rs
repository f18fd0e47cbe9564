//! The checks made once a member, or the whole tar, has been read: a member against its
//! listing, the codebase's tree id, what follows the end of the archive.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs;
use std::io::{self, Read};
use std::rc::Rc;

use super::check_record;
use super::pipe::Pipe;
use super::scan::{MemberContent, Scanner, Seen};
use super::sink::Sink;
use crate::bundle::error::BundleError;
use crate::bundle::manifest::{Manifest, ManifestMember};
use crate::bundle::{CODEBASE_DIR, gittree};

impl Scanner<'_> {
    /// A member against its listing in bundle.json: its kind and content; a record whose
    /// content is right must also make sense.
    pub(super) fn check_listed(
        &mut self,
        listed: &HashMap<&[u8], &ManifestMember>,
        name: &[u8],
        content: MemberContent,
    ) -> Result<(), BundleError> {
        let MemberContent {
            sha256,
            len: content_len,
            kind,
            record: mut record_content,
            ..
        } = content;
        match listed.get(name) {
            None => self.problem(name, "the member is not listed in bundle.json"),
            Some(m) => {
                if m.kind != kind {
                    self.problem(
                        name,
                        format!("it is a {kind:?} but bundle.json lists a {:?}", m.kind),
                    );
                }
                if m.sha256 == sha256
                    && m.size == content_len
                    && let Some(bytes) = record_content.take()
                {
                    // Its hash is right: what it says must make sense.
                    check_record(name, &bytes).map_err(|e| self.refuse(name, e.to_string()))?;
                }
                if m.sha256 != sha256 || m.size != content_len {
                    self.problem(
                        name,
                        format!(
                            "content does not match bundle.json (sha256 {sha256}, {content_len} bytes; \
                             expected {}, {} bytes)",
                            m.sha256, m.size
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    /// The codebase's git tree id, from its members and gitlinks, against bundle.json's, and
    /// the tree id of each carried submodule from its members against its `tree`; each
    /// submodule not carried unpacked as an empty directory, as `git checkout` leaves it.
    pub(super) fn check_codebase_tree(
        &mut self,
        manifest: &Manifest,
        seen: &Seen,
    ) -> Result<(), BundleError> {
        let submodules: Vec<gittree::Submodule> = manifest
            .gitlinks
            .iter()
            .map(|g| gittree::Submodule {
                path: &g.path[CODEBASE_DIR.len()..],
                commit: g.commit,
                carried: g.tree.is_some(),
            })
            .collect();
        let files = seen
            .codebase
            .iter()
            .map(|(p, k, o)| (&p[..], k.git_mode(), *o));
        match gittree::tree_ids(files, &submodules) {
            Ok((tree, trees)) => {
                if tree != manifest.codebase_tree {
                    self.problem(
                        b"codebase/",
                        format!(
                            "its git tree id is {tree}, but bundle.json says {}",
                            manifest.codebase_tree
                        ),
                    );
                }
                for (g, computed) in manifest.gitlinks.iter().zip(trees) {
                    if let (Some(claimed), Some(computed)) = (g.tree, computed)
                        && claimed != computed
                    {
                        self.problem(
                            &g.path,
                            format!(
                                "the submodule's files make the git tree {computed}, but \
                                 bundle.json says {claimed}"
                            ),
                        );
                    }
                }
            }
            Err(e) => self.problem(b"codebase/", e.to_string()),
        }
        if let Sink::Dir(root) = self.sink {
            for g in &manifest.gitlinks {
                let dir = Self::target_path(root, &g.path);
                fs::create_dir_all(&dir).map_err(|e| BundleError::io(&dir, e))?;
            }
        }
        Ok(())
    }

    /// Whatever follows the end-of-archive marker must be zero padding.
    pub(super) fn check_trailing(
        &mut self,
        mut pipe: Pipe,
        buf: &mut [u8],
        zstd_error: &Rc<RefCell<Option<String>>>,
    ) -> Result<(), BundleError> {
        loop {
            let n = pipe.read(buf).map_err(|e| self.classify(e, zstd_error))?;
            if n == 0 {
                break;
            }
            if buf[..n].iter().any(|&b| b != 0) {
                self.problem(b"(whole bundle)", "data follows the end of the tar archive");
                io::copy(&mut pipe, &mut io::sink()).map_err(|e| self.classify(e, zstd_error))?;
                break;
            }
        }
        Ok(())
    }
}
