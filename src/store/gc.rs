//! Removing bundles and collecting what nothing references any more, and checking the whole
//! store piece by piece.
//!
//! gc runs alone (the store lock, exclusive). It first moves bundles kept as whole files from
//! before into the store; then it marks every piece that a bundle in the index needs (its
//! `bundle.json`, its members, and the bases of their deltas), writes the live pieces of packs
//! that also hold dead ones into new packs, changes the index in one transaction, and only
//! then deletes the files the index no longer names. Killed at any point it leaves an archive
//! that reads as before; the next gc finishes the job (files no index names are swept).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::bundle::PackOptions;
use crate::digest::{Sha256Digest, Sha256Hasher};
use crate::failpoint;
use crate::progress::Progress;

use super::ark::{Ark, ArkError};
use super::index::{BundleRow, PackRow, PieceLoc, RewrittenPack};
use super::lock::StoreLock;
use super::pieces::{Frames, PACK_MAGIC, PACK_SUFFIX, PieceReader, cut_pack, pack_path};
use super::stored::parse_manifest;

/// What a gc did (or, with `dry_run`, would do).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct GcReport {
    /// Whole bundle files moved into the store.
    pub migrated: Vec<Sha256Digest>,
    /// Whole bundle files left as they are, and why.
    pub not_migrated: Vec<(Sha256Digest, String)>,
    pub live_pieces: u64,
    pub dead_pieces: u64,
    pub packs_removed: u64,
    pub packs_rewritten: u64,
    /// Files deleted: packs no longer named, whole bundle files now in the store, temporary
    /// files of interrupted writes.
    pub files_removed: Vec<PathBuf>,
    /// Bytes of packs and whole files before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Bundle ids release snapshots name, and how many of them the archive holds.
    pub release_bundles: u64,
    pub release_bundles_missing: Vec<(String, Sha256Digest)>,
}

/// The 64-hex strings a release snapshot holds anywhere (bundle ids among them), by
/// snapshot name. Whatever the snapshot's layout, a bundle id in it is found.
pub fn release_names(root: &Path) -> Result<BTreeMap<String, HashSet<Sha256Digest>>, ArkError> {
    let dir = super::Layout::new(root).releases();
    let mut out = BTreeMap::new();
    let rd = match fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(source) => return Err(ArkError::Io { path: dir, source }),
    };
    for entry in rd {
        let path = entry
            .map_err(|source| ArkError::Io {
                path: dir.clone(),
                source,
            })?
            .path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".json"))
            .filter(|n| !n.starts_with(crate::fsutil::TEMP_PREFIX))
        else {
            continue;
        };
        let bytes = fs::read(&path).map_err(|source| ArkError::Io {
            path: path.clone(),
            source,
        })?;
        // A snapshot that is not JSON still protects every id written in it.
        let text = String::from_utf8_lossy(&bytes);
        let ids: HashSet<Sha256Digest> = text
            .split(|c: char| !c.is_ascii_hexdigit())
            .filter(|w| w.len() == 64)
            .filter_map(|w| w.to_ascii_lowercase().parse().ok())
            .collect();
        out.insert(name.to_string(), ids);
    }
    Ok(out)
}

fn io_at(path: &Path) -> impl Fn(io::Error) -> ArkError + '_ {
    move |source| ArkError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn remove_file(path: &Path) -> Result<bool, ArkError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_at(path)(e)),
    }
}

fn file_size(path: &Path) -> u64 {
    fs::metadata(path).map_or(0, |m| m.len())
}

impl Ark {
    /// Registers a release snapshot (its JSON, as the release stage writes it) in the
    /// archive, as `releases/<name>.json`: from then on gc and `rm` keep every bundle it
    /// names. Registering the same name again replaces it.
    pub fn register_release(&self, name: &str, snapshot: &[u8]) -> Result<PathBuf, ArkError> {
        let dir = self.releases_dir();
        let valid = !name.is_empty()
            && !name.starts_with('.')
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !valid {
            return Err(ArkError::Io {
                path: dir.join(name),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a release name is letters, digits, `-`, `_` and `.`",
                ),
            });
        }
        fs::create_dir_all(&dir).map_err(io_at(&dir))?;
        let path = dir.join(format!("{name}.json"));
        crate::fsutil::write_atomic(&path, snapshot).map_err(io_at(&path))?;
        Ok(path)
    }

    /// Forgets a registered release snapshot: the bundles only it named may then be removed.
    pub fn unregister_release(&self, name: &str) -> Result<bool, ArkError> {
        remove_file(&self.releases_dir().join(format!("{name}.json")))
    }

    /// The names of the releases registered in the archive, sorted.
    pub fn releases(&self) -> Result<Vec<String>, ArkError> {
        Ok(release_names(self.root())?.into_keys().collect())
    }

    /// Forgets the registered release `name`; with `prune`, also removes from the index the
    /// bundles that only it kept: those it names that no other registered release names and
    /// that are not the newest bundle of their instance. Returns the removed bundle ids.
    pub fn remove_release(
        &mut self,
        name: &str,
        prune: bool,
    ) -> Result<Vec<Sha256Digest>, ArkError> {
        let mut releases = release_names(self.root())?;
        let Some(named) = releases.remove(name) else {
            return Err(ArkError::NoSuchRelease {
                name: name.to_string(),
                known: releases.keys().cloned().collect(),
            });
        };
        let mut prunable = Vec::new();
        if prune {
            let rows = self.index().bundles()?;
            let mut newest: HashMap<&str, &BundleRow> = HashMap::new();
            for r in &rows {
                let e = newest.entry(r.instance_id.as_str()).or_insert(r);
                if (r.packed_at, r.id) > (e.packed_at, e.id) {
                    *e = r;
                }
            }
            prunable = rows
                .iter()
                .filter(|r| named.contains(&r.id))
                .filter(|r| !releases.values().any(|ids| ids.contains(&r.id)))
                .filter(|r| newest.get(r.instance_id.as_str()).map(|n| n.id) != Some(r.id))
                .map(|r| r.id)
                .collect();
            prunable.sort();
        }
        // The registration goes first: a crash after it leaves bundles that `rm` may remove,
        // never a removed bundle that a registered release still names.
        self.unregister_release(name)?;
        if !prunable.is_empty() {
            self.remove_bundles(&prunable)?;
        }
        Ok(prunable)
    }

    /// Removes bundles from the index (in one transaction), and the whole files of those kept
    /// so; their pieces stay until gc. A bundle that a registered release snapshot names is
    /// refused, and then nothing is removed.
    pub fn remove_bundles(&mut self, ids: &[Sha256Digest]) -> Result<usize, ArkError> {
        let releases = release_names(self.root())?;
        for id in ids {
            let holding: Vec<String> = releases
                .iter()
                .filter(|(_, named)| named.contains(id))
                .map(|(n, _)| n.clone())
                .collect();
            if !holding.is_empty() {
                return Err(ArkError::HeldByRelease {
                    bundle: *id,
                    releases: holding,
                });
            }
        }
        let whole: Vec<PathBuf> = self
            .index()
            .bundles()?
            .into_iter()
            .filter(|b| ids.contains(&b.id) && b.manifest_piece.is_none())
            .map(|b| self.whole_file_path(&b.id))
            .collect();
        let n = self.index_mut().remove_bundles(ids)?;
        // The rows are gone: now the files they named.
        for p in whole {
            remove_file(&p)?;
        }
        Ok(n)
    }

    fn stored_bytes(&self) -> Result<u64, ArkError> {
        let packs: u64 = self.index().packs()?.iter().map(|p| p.size).sum();
        let whole: u64 = self
            .index()
            .bundles()?
            .iter()
            .filter(|b| b.manifest_piece.is_none())
            .map(|b| file_size(&self.whole_file_path(&b.id)))
            .sum();
        Ok(packs + whole)
    }

    /// Moves whole bundle files into the store, frees what no bundle needs, and sweeps files
    /// the index does not name. See the module's comment for the order of things.
    pub fn gc(
        &mut self,
        options: &PackOptions,
        dry_run: bool,
        progress: &dyn Progress,
    ) -> Result<GcReport, ArkError> {
        let root = self.root().to_path_buf();
        let _lock = StoreLock::exclusive_now(&root)
            .map_err(io_at(&root.join(super::lock::LOCK_FILE)))?
            .ok_or_else(|| ArkError::Busy(root.clone()))?;
        let mut report = GcReport {
            bytes_before: self.stored_bytes()?,
            ..GcReport::default()
        };

        // Release snapshots: every bundle they name must be one the archive holds, or gc
        // would not know what to keep for it.
        let bundles = self.index().bundles()?;
        self.count_release_bundles(&root, &bundles, &mut report)?;

        // 1. Whole files from before, into the store.
        if !dry_run {
            self.migrate_whole_files(&bundles, options, progress, &mut report)?;
        }

        // 2. What the bundles need.
        let mut reader = self.piece_reader();
        reader.load_all(self.index())?;
        let live = self.live_pieces(&reader)?;
        let mut by_pack: BTreeMap<i64, Vec<(Sha256Digest, PieceLoc)>> = BTreeMap::new();
        for (id, loc) in reader.locs() {
            by_pack
                .entry(loc.pack)
                .or_default()
                .push((*id, loc.clone()));
        }
        let packs = self.index().packs()?;
        let mut dead_pieces = Vec::new();
        let mut dead_packs = Vec::new();
        let mut rewritten = Vec::new();
        for pack in &packs {
            let pieces = by_pack.remove(&pack.no).unwrap_or_default();
            // The pack's frames (a block holds several pieces), in the order they are in.
            let mut frames: Frames = BTreeMap::new();
            for (id, loc) in pieces {
                frames.entry(loc.offset).or_default().push((id, loc));
            }
            let framed: u64 = frames.values().map(|f| f[0].1.length).sum();
            let slack = pack.size.saturating_sub(PACK_MAGIC.len() as u64 + framed);
            let mut any_live = false;
            let mut any_dead = false;
            for f in frames.values_mut() {
                f.sort_by_key(|(_, l)| l.skip);
                for (id, _) in f.iter() {
                    if live.contains(id) {
                        any_live = true;
                        report.live_pieces += 1;
                    } else {
                        any_dead = true;
                        report.dead_pieces += 1;
                        dead_pieces.push(*id);
                    }
                }
            }
            if !any_live {
                dead_packs.push(pack.no);
                report.packs_removed += 1;
                continue;
            }
            if !any_dead && slack == 0 {
                continue;
            }
            report.packs_rewritten += 1;
            dead_packs.push(pack.no);
            if dry_run {
                continue;
            }
            rewritten.push(self.rewrite_pack(&reader, &frames, &live, pack, options)?);
        }
        if dry_run {
            report.bytes_after = report.bytes_before;
            return Ok(report);
        }
        failpoint::hit("gc.before-index");
        if !dead_pieces.is_empty() || !dead_packs.is_empty() {
            self.index_mut()
                .apply_gc(&rewritten, &dead_pieces, &dead_packs)?;
        }
        failpoint::hit("gc.before-delete");

        // 3. Files the index does not name.
        self.sweep(&mut report)?;
        report.bytes_after = self.stored_bytes()?;
        Ok(report)
    }

    /// Release snapshots: every bundle they name must be one the archive holds, or gc would
    /// not know what to keep for it. Counted in `report`, the missing ones named.
    fn count_release_bundles(
        &self,
        root: &Path,
        bundles: &[BundleRow],
        report: &mut GcReport,
    ) -> Result<(), ArkError> {
        let held: HashSet<Sha256Digest> = bundles.iter().map(|b| b.id).collect();
        let releases = release_names(root)?;
        let objects: HashSet<Sha256Digest> =
            self.index().objects()?.into_iter().map(|o| o.id).collect();
        for (name, named) in &releases {
            for id in named {
                if held.contains(id) {
                    report.release_bundles += 1;
                } else if !objects.contains(id) {
                    // Not a bundle here and not an object: a bundle the archive lacks, or a
                    // root hash. Reported; nothing of it is here to free.
                    report.release_bundles_missing.push((name.clone(), *id));
                }
            }
        }

        Ok(())
    }

    /// Step 1 of gc: whole files from before, into the store; those that cannot be moved are
    /// named in `report`.
    fn migrate_whole_files(
        &mut self,
        bundles: &[BundleRow],
        options: &PackOptions,
        progress: &dyn Progress,
        report: &mut GcReport,
    ) -> Result<(), ArkError> {
        for row in bundles.iter().filter(|b| b.manifest_piece.is_none()) {
            let path = self.whole_file_path(&row.id);
            if !path.is_file() {
                report
                    .not_migrated
                    .push((row.id, format!("its file `{}` is missing", path.display())));
                continue;
            }
            match self.store_file(&path, Some(row.id), &[], options, progress) {
                Ok((_, parts, _)) => {
                    self.index_mut().record_stored_bundle(None, row, &parts)?;
                    failpoint::hit("gc.after-migrate");
                    remove_file(&path)?;
                    report.files_removed.push(path);
                    report.migrated.push(row.id);
                }
                Err(e) => report.not_migrated.push((row.id, e.to_string())),
            }
        }
        Ok(())
    }

    /// The pieces the bundles need: each bundle's bundle.json and members, and the bases of
    /// every delta among them.
    fn live_pieces(&self, reader: &PieceReader) -> Result<HashSet<Sha256Digest>, ArkError> {
        let mut live: HashSet<Sha256Digest> = HashSet::new();
        for row in self.index().bundles()? {
            let Some(m) = row.manifest_piece else {
                continue;
            };
            // Hash before trust: a bundle.json that is not what its id says stops gc, since
            // what it needs could not be known.
            let bytes = reader.get_checked(&m)?;
            let manifest = parse_manifest(Path::new(&format!("bundle {}", row.id)), &bytes)?;
            live.insert(m);
            live.extend(manifest.members.iter().map(|mm| mm.sha256));
        }
        let mut stack: Vec<Sha256Digest> = live.iter().copied().collect();
        while let Some(id) = stack.pop() {
            if let Some(b) = reader.loc(&id).and_then(|l| l.base)
                && live.insert(b)
            {
                stack.push(b);
            }
        }
        Ok(live)
    }

    /// The live pieces of `pack`, re-hashed, into a new pack: a frame whose pieces all live is
    /// copied as it is, a block that lost some is made again from the rest.
    fn rewrite_pack(
        &self,
        reader: &PieceReader,
        frames: &Frames,
        live: &HashSet<Sha256Digest>,
        pack: &PackRow,
        options: &PackOptions,
    ) -> Result<RewrittenPack, ArkError> {
        let keep = |id: &Sha256Digest| live.contains(id);
        let (name, size, moved) =
            cut_pack(reader, frames, &keep, &self.packs_dir(), options.level)?;
        Ok(RewrittenPack {
            name,
            size,
            repo: pack.repo.clone(),
            moved,
        })
    }

    /// Step 3 of gc: files the index does not name: the packs just replaced, whatever an
    /// interrupted pack or gc left, whole files of bundles now in the store.
    fn sweep(&mut self, report: &mut GcReport) -> Result<(), ArkError> {
        let named: HashSet<String> = self.index().packs()?.into_iter().map(|p| p.name).collect();
        let packs_dir = self.packs_dir();
        for path in list(&packs_dir)? {
            let Some(file) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let stray = match file.strip_suffix(PACK_SUFFIX) {
                Some(name) => !named.contains(name),
                None => file.starts_with(crate::fsutil::TEMP_PREFIX),
            };
            if stray && remove_file(&path)? {
                report.files_removed.push(path);
            }
        }
        let stored: HashSet<Sha256Digest> = self
            .index()
            .bundles()?
            .into_iter()
            .filter(|b| b.manifest_piece.is_some())
            .map(|b| b.id)
            .collect();
        for path in list(&self.bundles_dir())? {
            let temp = path
                .file_name()
                .is_some_and(|n| n.as_encoded_bytes().starts_with(b".tmp-"));
            let redundant =
                crate::bundle::id_from_file_name(&path).is_some_and(|id| stored.contains(&id));
            if (temp || redundant) && remove_file(&path)? {
                report.files_removed.push(path);
            }
        }
        crate::fsutil::sync_dir(&packs_dir).map_err(io_at(&packs_dir))?;
        Ok(())
    }

    /// Checks every pack file against its name and every piece against its id (each decoded
    /// once, bases before the deltas on them). Returns the problems found, by pack name.
    pub fn check_store(
        &self,
        progress: &dyn Progress,
    ) -> Result<Vec<(String, u64, Vec<String>)>, ArkError> {
        let mut reader = self.piece_reader();
        reader.load_all(self.index())?;
        let packs = self.index().packs()?;
        let mut problems: HashMap<i64, Vec<String>> = HashMap::new();
        self.check_pack_files(&reader, &packs, &mut problems, progress);
        check_pieces(&reader, &mut problems, progress);
        let mut counts: HashMap<i64, u64> = HashMap::new();
        for loc in reader.locs().values() {
            *counts.entry(loc.pack).or_default() += 1;
        }
        let mut out: Vec<(String, u64, Vec<String>)> = packs
            .iter()
            .map(|p| {
                (
                    p.name.clone(),
                    counts.get(&p.no).copied().unwrap_or(0),
                    problems.remove(&p.no).unwrap_or_default(),
                )
            })
            .collect();
        for (_, v) in problems {
            out.push(("(store)".into(), 0, v));
        }
        Ok(out)
    }

    /// Every pack file hashed against its name and measured against its row; what is wrong
    /// goes to `problems`, by pack number.
    fn check_pack_files(
        &self,
        reader: &PieceReader,
        packs: &[PackRow],
        problems: &mut HashMap<i64, Vec<String>>,
        progress: &dyn Progress,
    ) {
        let total: u64 = packs.iter().map(|p| p.size).sum();
        progress.start("checking packs", Some(total));
        for p in packs {
            // A pack kept only in the archive's bucket is fetched to be checked.
            let path = reader
                .local_pack(p.no)
                .unwrap_or_else(|_| pack_path(&self.packs_dir(), &p.name));
            match hash_file(&path, progress) {
                Ok((id, size)) => {
                    if id.hex() != p.name {
                        problems
                            .entry(p.no)
                            .or_default()
                            .push(format!("the file hashes to {id}, not to its name"));
                    }
                    if size != p.size {
                        problems
                            .entry(p.no)
                            .or_default()
                            .push(format!("{size} bytes, the index says {}", p.size));
                    }
                }
                Err(e) => problems
                    .entry(p.no)
                    .or_default()
                    .push(format!("`{}`: {e}", path.display())),
            }
        }
        progress.finish();
    }
}

/// Every piece, decoded once and hashed against its id: a walk down the forest of deltas from
/// each whole piece. What is wrong goes to `problems`, by pack number (-1: the store's).
fn check_pieces(
    reader: &PieceReader,
    problems: &mut HashMap<i64, Vec<String>>,
    progress: &dyn Progress,
) {
    let mut children: HashMap<Sha256Digest, Vec<Sha256Digest>> = HashMap::new();
    let mut roots = Vec::new();
    for (id, loc) in reader.locs() {
        match loc.base {
            Some(b) => children.entry(b).or_default().push(*id),
            None => roots.push(*id),
        }
    }
    // Whole pieces in the order they are stored, so that each block is decoded once.
    roots.sort_by_key(|id| {
        let l = &reader.locs()[id];
        (l.pack, l.offset, l.skip)
    });
    progress.start("checking pieces", Some(reader.locs().len() as u64));
    let mut checked = 0u64;
    let mut stack: Vec<(Sha256Digest, Option<std::rc::Rc<Vec<u8>>>)> =
        roots.into_iter().rev().map(|r| (r, None)).collect();
    while let Some((id, base)) = stack.pop() {
        checked += 1;
        progress.advance(1);
        let loc = &reader.locs()[&id];
        match reader.decode_one(&id, base.as_deref().map(|v| &v[..])) {
            Ok(content) => {
                let actual = Sha256Digest::of(&content);
                if actual != id {
                    problems
                        .entry(loc.pack)
                        .or_default()
                        .push(format!("piece {id}: its content hashes to {actual}"));
                    continue;
                }
                if let Some(kids) = children.get(&id) {
                    let content = std::rc::Rc::new(content);
                    for k in kids {
                        stack.push((*k, Some(content.clone())));
                    }
                }
            }
            Err(e) => problems.entry(loc.pack).or_default().push(e.to_string()),
        }
    }
    progress.finish();
    if checked != reader.locs().len() as u64 {
        problems.entry(-1).or_default().push(format!(
            "{} pieces are deltas in a loop or on a missing base",
            reader.locs().len() as u64 - checked
        ));
    }
}

fn list(dir: &Path) -> Result<Vec<PathBuf>, ArkError> {
    crate::fsutil::list_dir(dir).map_err(io_at(dir))
}

fn hash_file(path: &Path, progress: &dyn Progress) -> io::Result<(Sha256Digest, u64)> {
    use std::io::Read;
    let mut f = fs::File::open(path)?;
    let mut h = Sha256Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n_total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        n_total += n as u64;
        progress.advance(n as u64);
    }
    Ok((h.finish(), n_total))
}
