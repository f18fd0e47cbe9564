//! What the archive knows of its mirrors: their state as recorded at each fetch, and what its
//! instances expect of them (`mirror verify`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use crate::mirror::{self, Mirror, MirrorError, RepoName, SubmoduleScan};
use crate::progress::Progress;

use super::{Ark, IndexError, PinRow};

#[derive(Debug, thiserror::Error)]
pub enum MirrorStateError {
    #[error(transparent)]
    Git(#[from] git2::Error),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Mirror(Box<MirrorError>),
}

impl From<MirrorError> for MirrorStateError {
    fn from(e: MirrorError) -> Self {
        MirrorStateError::Mirror(Box::new(e))
    }
}

impl Ark {
    /// Records mirror `m`'s current state (URL, refs, their hash, size) in the index.
    pub fn record_mirror(&mut self, m: &Mirror) -> Result<(), MirrorStateError> {
        let refs = mirror::upstream_refs(&m.repo)?;
        let hash = mirror::refs_hash(&refs);
        let size = mirror::disk_size(&m.path);
        self.index_mut()
            .record_mirror(m.name.as_str(), &m.url(), &refs, &hash, size)?;
        Ok(())
    }

    /// What the archive's index expects of mirror `name`: its pins, its instances' base
    /// commits, the refs of its last fetch.
    pub fn mirror_expected(&self, name: &RepoName) -> Result<mirror::Expected, IndexError> {
        let pins = self.index().pins(name.as_str())?;
        Ok(mirror::Expected {
            pins: pins
                .into_iter()
                .map(|p| mirror::ExpectedPin {
                    what: format!("{} of {}", p.role, p.instance_id),
                    reference: p.reference,
                    commit: p.commit,
                })
                .collect(),
            commits: self
                .index()
                .instances_of_repo(name.as_str())?
                .into_iter()
                .map(|i| (i.base_commit, format!("base_commit of {}", i.instance_id)))
                .collect(),
            refs: self.index().mirror_refs(name.as_str())?,
        })
    }
}

/// What mirroring a repository's submodules did.
#[derive(Debug, Default)]
pub struct SubmodulesMirrored {
    /// Each submodule mirror added or fetched, in the order fetched.
    pub fetches: Vec<mirror::FetchReport>,
    /// Each submodule found, by its path from the top of the repository's codebase.
    pub submodules: Vec<SubmoduleUse>,
    /// Pins written in the submodules' mirrors.
    pub pins: usize,
    /// Sentences for people: commits not in the mirror, no instances yet.
    pub notes: Vec<String>,
    /// Gitlinks that could not be mirrored, each an error naming it; everything else was done.
    pub problems: Vec<MirrorError>,
}

/// A submodule the archive's commits name.
#[derive(Debug, Clone)]
pub struct SubmoduleUse {
    /// The repository whose commits need it.
    pub superproject: String,
    /// Its path in that repository's codebase (through the submodules it is inside).
    pub path: String,
    /// The mirror that keeps it, and where that fetches from.
    pub mirror: String,
    pub url: String,
    /// How many different commits of it those commits name.
    pub commits: usize,
}

/// A commit that instances need, and who: (instance id, role).
type Users = Rc<BTreeSet<(String, String)>>;

/// A pin to write: the submodule's mirror, who needs it, where, which commit.
struct WantedPin {
    mirror: RepoName,
    instance_id: String,
    role: String,
    path: Vec<u8>,
    commit: String,
}

/// What a pin row calls a submodule pin: `submodule modules/x at base_commit`, so that `mirror
/// verify` says `submodule modules/x at base_commit of jq-1`.
fn submodule_role(path: &[u8], role: &str) -> String {
    format!("submodule {} at {role}", String::from_utf8_lossy(path))
}

impl Ark {
    /// Mirrors the submodules that the commits the archive needs of repository `name` name:
    /// each instance's base and environment setup commits (and the commits pinned for them),
    /// read from its mirror's `.gitmodules`; each submodule added or fetched as a mirror of its
    /// own (through `git_base` when its URL is GitHub's), its gitlink commit pinned there for
    /// each instance that needs it, recursively. `fetched` holds the mirrors already fetched by
    /// this run, so a submodule shared by several repositories is fetched once. A gitlink that
    /// cannot be mirrored is in the result's `problems`; the rest is still done.
    pub fn mirror_submodules(
        &mut self,
        name: &RepoName,
        git_base: &str,
        fetched: &mut BTreeSet<RepoName>,
        progress: &dyn Progress,
    ) -> Result<SubmodulesMirrored, MirrorStateError> {
        let mirrors_dir = self.mirrors_dir();
        let mut out = SubmodulesMirrored::default();
        let mut open: HashMap<RepoName, Mirror> = HashMap::new();
        let top = Mirror::open(&mirrors_dir, name)?;
        let mut needed: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
        for i in self.index().all_instances()? {
            if !i.repo.eq_ignore_ascii_case(name.as_str()) {
                continue;
            }
            let env = i.environment_setup_commit.clone();
            if !env.is_empty() && env != i.base_commit {
                needed
                    .entry(env)
                    .or_default()
                    .insert((i.instance_id.clone(), "environment_setup_commit".into()));
            }
            needed
                .entry(i.base_commit)
                .or_default()
                .insert((i.instance_id, "base_commit".into()));
        }
        let pins = self.index().pins(name.as_str())?;
        let pinned = !pins.is_empty();
        for p in pins {
            if p.role == "base_commit" || p.role == "environment_setup_commit" {
                needed
                    .entry(p.commit)
                    .or_default()
                    .insert((p.instance_id, p.role));
            }
        }
        // A submodule's mirror has pins and no instances: its own submodules come with the
        // walk from the repository above it.
        if needed.is_empty() && !pinned && head_has_gitmodules(&top) {
            out.notes.push(format!(
                "{name} has submodules, but no instance of it is in the archive yet, so no \
                 commit says which to mirror: after `swe-ark import` or `collect`, run `swe-ark \
                 mirror update {name}`"
            ));
        }
        let mut queue: Vec<(RepoName, String, Vec<u8>, Users)> = Vec::new();
        for (commit, users) in needed {
            if top.commit(&commit).is_err() {
                let (who, role) = users.iter().next().cloned().unwrap_or_default();
                out.notes.push(format!(
                    "the {role} {commit} of {who} is not in mirror {name}: the submodules it \
                     names are not known"
                ));
                continue;
            }
            queue.push((name.clone(), commit, Vec::new(), Rc::new(users)));
        }
        open.insert(name.clone(), top);
        let mut scan = SubmoduleScan::new();
        let mut known: HashMap<(RepoName, String), Vec<mirror::Submodule>> = HashMap::new();
        let mut failed: BTreeSet<RepoName> = BTreeSet::new();
        let mut reported: BTreeSet<(String, String)> = BTreeSet::new();
        // By path: the mirror, its URL, the commits named.
        let mut uses: BTreeMap<Vec<u8>, SubmoduleUse> = BTreeMap::new();
        let mut commits: BTreeMap<Vec<u8>, BTreeSet<String>> = BTreeMap::new();
        let mut wanted = Vec::new();
        while let Some((holder, commit, prefix, users)) = queue.pop() {
            let key = (holder.clone(), commit.clone());
            let subs = match known.get(&key) {
                Some(s) => s.clone(),
                None => {
                    let m = opened(&mut open, &mirrors_dir, &holder)?;
                    let (subs, problems) = m.submodules_at(&commit, git_base, b"", &mut scan)?;
                    out.problems.extend(problems);
                    known.insert(key, subs.clone());
                    subs
                }
            };
            for s in subs {
                let sub_name = s.source.name.clone();
                if failed.contains(&sub_name) {
                    continue;
                }
                if !fetched.contains(&sub_name) {
                    progress.line(&format!(
                        "submodule `{}` of {holder}: mirroring {sub_name} from {}",
                        s.shown_path(),
                        s.source.url
                    ));
                    match Mirror::add(&mirrors_dir, &sub_name, &s.source.url, progress) {
                        Ok((m, report)) => {
                            self.record_mirror(&m)?;
                            out.fetches.push(report);
                            open.insert(sub_name.clone(), m);
                        }
                        Err(e) => {
                            out.problems.push(MirrorError::SubmoduleFetch {
                                at: Box::new(mirror::GitlinkAt {
                                    name: holder.to_string(),
                                    commit: commit.clone(),
                                    path: s.shown_path(),
                                    gitlink: s.commit.clone(),
                                    url: s.url.clone(),
                                }),
                                submodule: sub_name.to_string(),
                                detail: e.to_string(),
                            });
                            failed.insert(sub_name);
                            continue;
                        }
                    }
                    fetched.insert(sub_name.clone());
                }
                let m = opened(&mut open, &mirrors_dir, &holder)?;
                if let Err(e) = m.submodule_mirror(&mirrors_dir, &commit, &s, name) {
                    if reported.insert((sub_name.to_string(), s.commit.clone())) {
                        out.problems.push(e);
                    }
                    continue;
                }
                let full = if prefix.is_empty() {
                    s.path.clone()
                } else {
                    [&prefix[..], b"/", &s.path].concat()
                };
                uses.entry(full.clone()).or_insert_with(|| SubmoduleUse {
                    superproject: name.to_string(),
                    path: String::from_utf8_lossy(&full).into_owned(),
                    mirror: sub_name.to_string(),
                    url: s.source.url.clone(),
                    commits: 0,
                });
                commits
                    .entry(full.clone())
                    .or_default()
                    .insert(s.commit.clone());
                for (instance_id, role) in users.iter() {
                    wanted.push(WantedPin {
                        mirror: sub_name.clone(),
                        instance_id: instance_id.clone(),
                        role: role.clone(),
                        path: full.clone(),
                        commit: s.commit.clone(),
                    });
                }
                queue.push((sub_name, s.commit, full, users.clone()));
            }
        }
        out.pins = self.write_pins(&mut open, &wanted)?;
        out.submodules = uses
            .into_iter()
            .map(|(path, u)| SubmoduleUse {
                commits: commits.get(&path).map_or(0, BTreeSet::len),
                ..u
            })
            .collect();
        Ok(out)
    }

    /// Pins, for instance `instance_id`, each submodule its `role` commit's codebase was
    /// filled with (as [`Mirror::codebase_with_submodules`] returns them), in the submodules'
    /// mirrors, and records the pins in one transaction.
    pub fn pin_submodules(
        &mut self,
        instance_id: &str,
        role: &str,
        subs: &[mirror::Submodule],
    ) -> Result<(), MirrorStateError> {
        let wanted: Vec<WantedPin> = subs
            .iter()
            .map(|s| WantedPin {
                mirror: s.source.name.clone(),
                instance_id: instance_id.to_string(),
                role: role.to_string(),
                path: s.path.clone(),
                commit: s.commit.clone(),
            })
            .collect();
        self.write_pins(&mut HashMap::new(), &wanted)?;
        Ok(())
    }

    /// The refs first, then their rows in one transaction (a ref without its row is harmless,
    /// a row without its ref is what `mirror verify` reports). Returns how many.
    fn write_pins(
        &mut self,
        open: &mut HashMap<RepoName, Mirror>,
        wanted: &[WantedPin],
    ) -> Result<usize, MirrorStateError> {
        let mirrors_dir = self.mirrors_dir();
        let mut rows = Vec::with_capacity(wanted.len());
        for w in wanted {
            let m = opened(open, &mirrors_dir, &w.mirror)?;
            let reference = m.pin_submodule(&w.instance_id, &w.role, &w.path, &w.commit)?;
            rows.push(PinRow {
                mirror: w.mirror.to_string(),
                reference,
                commit: w.commit.clone(),
                instance_id: w.instance_id.clone(),
                role: submodule_role(&w.path, &w.role),
            });
        }
        if !rows.is_empty() {
            self.index_mut().record_pins(&rows)?;
        }
        Ok(rows.len())
    }
}

/// Mirror `name`, opened once.
fn opened<'a>(
    open: &'a mut HashMap<RepoName, Mirror>,
    mirrors_dir: &std::path::Path,
    name: &RepoName,
) -> Result<&'a Mirror, MirrorError> {
    if !open.contains_key(name) {
        open.insert(name.clone(), Mirror::open(mirrors_dir, name)?);
    }
    Ok(&open[name])
}

/// Whether the mirror's HEAD commit has a `.gitmodules`.
fn head_has_gitmodules(m: &Mirror) -> bool {
    m.repo
        .head()
        .and_then(|h| h.peel_to_tree())
        .is_ok_and(|t| t.get_name(".gitmodules").is_some())
}
