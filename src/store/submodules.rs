//! The submodules that the commits an archive needs of a repository name: each mirrored as a
//! repository of its own and its gitlink commits pinned there (`mirror add`, `mirror update`),
//! and the pins of what `pack` carried.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::dataset::Instance;
use crate::mirror::{self, GitlinkAt, Mirror, MirrorError, RepoName, Submodule, SubmoduleScan};
use crate::progress::Progress;

use super::mirrors::MirrorStateError;
use super::{Ark, IndexError, PinRow};

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

/// Who needs a commit: (instance id, role), shared by the submodules below it.
type Users = Rc<BTreeSet<(String, String)>>;

/// The commits the archive needs of a repository, each with who needs it.
type Needed = BTreeMap<String, BTreeSet<(String, String)>>;

/// A commit to read the submodules of: the mirror holding it, the commit, its path from the
/// top of the codebase (empty for the repository itself), who needs it.
struct Visit {
    holder: RepoName,
    commit: String,
    prefix: Vec<u8>,
    users: Users,
}

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

/// The walk from one repository's commits down through its submodules.
struct Walk<'a> {
    top: &'a RepoName,
    git_base: &'a str,
    mirrors_dir: PathBuf,
    progress: &'a dyn Progress,
    open: HashMap<RepoName, Mirror>,
    scan: SubmoduleScan,
    /// The submodules of each (mirror, commit) read so far.
    known: HashMap<(RepoName, String), Vec<Submodule>>,
    /// Mirrors that could not be fetched in this run.
    failed: BTreeSet<RepoName>,
    /// (mirror, commit) pairs whose problem was said.
    reported: BTreeSet<(String, String)>,
    uses: BTreeMap<Vec<u8>, SubmoduleUse>,
    commits: BTreeMap<Vec<u8>, BTreeSet<String>>,
    wanted: Vec<WantedPin>,
    out: SubmodulesMirrored,
}

impl Ark {
    /// Mirrors the submodules that the commits the archive needs of repository `name` name:
    /// each instance's base and environment setup commits (and the commits pinned for them),
    /// read from its mirror's `.gitmodules`; each submodule added or fetched as a mirror of its
    /// own (through `git_base` when its URL is GitHub's), its gitlink commit pinned there for
    /// each instance that needs it, recursively. `fetched` holds the mirrors already fetched by
    /// this run, so a submodule shared by several repositories is fetched once. A gitlink that
    /// cannot be mirrored is in the result's `problems`; the rest is still done. Instances for
    /// which `leaves_empty` is true (their context's `empty_submodules`) need none.
    pub fn mirror_submodules(
        &mut self,
        name: &RepoName,
        git_base: &str,
        fetched: &mut BTreeSet<RepoName>,
        leaves_empty: &dyn Fn(&Instance) -> bool,
        progress: &dyn Progress,
    ) -> Result<SubmodulesMirrored, MirrorStateError> {
        let mut walk = Walk {
            top: name,
            git_base,
            mirrors_dir: self.mirrors_dir(),
            progress,
            open: HashMap::new(),
            scan: SubmoduleScan::new(),
            known: HashMap::new(),
            failed: BTreeSet::new(),
            reported: BTreeSet::new(),
            uses: BTreeMap::new(),
            commits: BTreeMap::new(),
            wanted: Vec::new(),
            out: SubmodulesMirrored::default(),
        };
        let top = Mirror::open(&walk.mirrors_dir, name)?;
        let (needed, pinned) = self.needed_commits(name, leaves_empty)?;
        // A submodule's mirror has pins and no instances: its own submodules come with the
        // walk from the repository above it.
        if needed.is_empty() && !pinned && head_has_gitmodules(&top) {
            walk.out.notes.push(format!(
                "{name} has submodules, but no instance of it is in the archive yet, so no \
                 commit says which to mirror: after `swe-ark import` or `collect`, run `swe-ark \
                 mirror update {name}`"
            ));
        }
        let mut queue = Vec::new();
        for (commit, users) in needed {
            if top.commit(&commit).is_err() {
                let (who, role) = users.iter().next().cloned().unwrap_or_default();
                walk.out.notes.push(format!(
                    "the {role} {commit} of {who} is not in mirror {name}: the submodules it \
                     names are not known"
                ));
                continue;
            }
            queue.push(Visit {
                holder: name.clone(),
                commit,
                prefix: Vec::new(),
                users: Rc::new(users),
            });
        }
        walk.open.insert(name.clone(), top);
        while let Some(at) = queue.pop() {
            for sub in walk.submodules_of(&at)? {
                if let Some(next) = walk.visit(self, fetched, &at, sub)? {
                    queue.push(next);
                }
            }
        }
        let mut out = std::mem::take(&mut walk.out);
        out.pins = self.write_pins(&mut walk.open, &walk.wanted)?;
        out.submodules = std::mem::take(&mut walk.uses)
            .into_iter()
            .map(|(path, u)| SubmoduleUse {
                commits: walk.commits.get(&path).map_or(0, BTreeSet::len),
                ..u
            })
            .collect();
        Ok(out)
    }

    /// The commits the archive needs of repository `name`, each with who needs it (instance,
    /// role), and whether the mirror holds pins at all.
    fn needed_commits(
        &self,
        name: &RepoName,
        leaves_empty: &dyn Fn(&Instance) -> bool,
    ) -> Result<(Needed, bool), IndexError> {
        let mut needed = Needed::new();
        let mut empty = BTreeSet::new();
        for i in self.index().all_instances()? {
            if !i.repo.eq_ignore_ascii_case(name.as_str()) {
                continue;
            }
            if leaves_empty(&i) {
                empty.insert(i.instance_id);
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
            if empty.contains(&p.instance_id) {
                continue;
            }
            if p.role == "base_commit" || p.role == "environment_setup_commit" {
                needed
                    .entry(p.commit)
                    .or_default()
                    .insert((p.instance_id, p.role));
            }
        }
        Ok((needed, pinned))
    }

    /// Pins, for instance `instance_id`, each submodule its `role` commit's codebase was
    /// filled with (as [`Mirror::codebase_with_submodules`] returns them), in the submodules'
    /// mirrors, and records the pins in one transaction.
    pub fn pin_submodules(
        &mut self,
        instance_id: &str,
        role: &str,
        subs: &[Submodule],
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

impl Walk<'_> {
    /// The submodules `at`'s commit names (read once per mirror and commit; what cannot be
    /// mirrored goes to the problems).
    fn submodules_of(&mut self, at: &Visit) -> Result<Vec<Submodule>, MirrorStateError> {
        let key = (at.holder.clone(), at.commit.clone());
        if let Some(subs) = self.known.get(&key) {
            return Ok(subs.clone());
        }
        let m = opened(&mut self.open, &self.mirrors_dir, &at.holder)?;
        let (subs, problems) = m.submodules_at(&at.commit, self.git_base, b"", &mut self.scan)?;
        for p in problems {
            // A gitlink that .gitmodules does not name is the repository's own state, which
            // `git submodule update` leaves empty too (and so do pack and validate): said, not
            // an error of the mirror's.
            if matches!(p, MirrorError::UnnamedSubmodule { .. }) {
                self.out
                    .notes
                    .push(format!("{p}; left empty, as git leaves it"));
            } else {
                self.out.problems.push(p);
            }
        }
        self.known.insert(key, subs.clone());
        Ok(subs)
    }

    /// Submodule `sub` of `at`'s commit: its mirror added or fetched (once per run), its
    /// commit checked there, its pins wanted; the visit to its own submodules, or `None` when
    /// it cannot be mirrored (said in the problems).
    fn visit(
        &mut self,
        ark: &mut Ark,
        fetched: &mut BTreeSet<RepoName>,
        at: &Visit,
        sub: Submodule,
    ) -> Result<Option<Visit>, MirrorStateError> {
        let name = sub.source.name.clone();
        if self.failed.contains(&name) || !self.fetch(ark, fetched, at, &sub)? {
            return Ok(None);
        }
        let m = opened(&mut self.open, &self.mirrors_dir, &at.holder)?;
        if let Err(e) = m.submodule_mirror(&self.mirrors_dir, &at.commit, &sub, self.top) {
            if self.reported.insert((name.to_string(), sub.commit.clone())) {
                self.out.problems.push(e);
            }
            return Ok(None);
        }
        let full = if at.prefix.is_empty() {
            sub.path.clone()
        } else {
            [&at.prefix[..], b"/", &sub.path].concat()
        };
        self.uses
            .entry(full.clone())
            .or_insert_with(|| SubmoduleUse {
                superproject: self.top.to_string(),
                path: String::from_utf8_lossy(&full).into_owned(),
                mirror: name.to_string(),
                url: sub.source.url.clone(),
                commits: 0,
            });
        self.commits
            .entry(full.clone())
            .or_default()
            .insert(sub.commit.clone());
        for (instance_id, role) in at.users.iter() {
            self.wanted.push(WantedPin {
                mirror: name.clone(),
                instance_id: instance_id.clone(),
                role: role.clone(),
                path: full.clone(),
                commit: sub.commit.clone(),
            });
        }
        Ok(Some(Visit {
            holder: name,
            commit: sub.commit,
            prefix: full,
            users: at.users.clone(),
        }))
    }

    /// Adds or fetches `sub`'s mirror unless this run did; false when that failed (said in
    /// the problems, and not tried again).
    fn fetch(
        &mut self,
        ark: &mut Ark,
        fetched: &mut BTreeSet<RepoName>,
        at: &Visit,
        sub: &Submodule,
    ) -> Result<bool, MirrorStateError> {
        let name = &sub.source.name;
        if fetched.contains(name) {
            return Ok(true);
        }
        self.progress.line(&format!(
            "submodule `{}` of {}: mirroring {name} from {}",
            sub.shown_path(),
            at.holder,
            sub.source.url
        ));
        match Mirror::add(&self.mirrors_dir, name, &sub.source.url, self.progress) {
            Ok((m, report)) => {
                ark.record_mirror(&m)?;
                self.out.fetches.push(report);
                self.open.insert(name.clone(), m);
                fetched.insert(name.clone());
                Ok(true)
            }
            Err(e) => {
                self.out.problems.push(MirrorError::SubmoduleFetch {
                    at: Box::new(GitlinkAt {
                        name: at.holder.to_string(),
                        commit: at.commit.clone(),
                        path: sub.shown_path(),
                        gitlink: sub.commit.clone(),
                        url: sub.url.clone(),
                    }),
                    submodule: name.to_string(),
                    detail: e.to_string(),
                });
                self.failed.insert(name.clone());
                Ok(false)
            }
        }
    }
}

/// Mirror `name`, opened once.
fn opened<'a>(
    open: &'a mut HashMap<RepoName, Mirror>,
    mirrors_dir: &Path,
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
