//! The text datasets SWE-bench publishes beside its instances (SWE-bench_bm25_13K/27K/40K/50K,
//! SWE-bench_oracle), made from a bundle alone: the code base is read from the bundle in
//! memory, the files BM25 ranks highest for the issue (or the files the gold patch edits) go
//! into SWE-bench's style-3 prompt within a `cl100k_base` token budget. See docs/TEXT.md.

mod analyzer;
mod bm25;
pub mod files;
mod porter;
mod prompt;
pub mod tokenizer;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use serde_json::Value;

use crate::bundle::{
    self, BundleError, BundleSource, CODEBASE_DIR, Limits, MemoryMember, MemoryMembers,
};
use crate::dataset::{Instance, InstanceError, python_json};
use crate::digest::Sha256Digest;
use crate::progress::Progress;

pub use analyzer::Analyzer;
pub use bm25::{B, Document, Hit, Index, K1, MAX_CLAUSES, SearchResult};
pub use porter::stem;
pub use prompt::{code_text, dataset_patch, dataset_text, style3};

/// SWE-bench's retrieval depth: the 20 best files are candidates for the prompt.
pub const DEFAULT_TOP_K: usize = 20;

/// Which files go into the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Retrieval {
    /// The files BM25 ranks highest for the problem statement, within the token budget.
    Bm25,
    /// The files the gold patch edits, whole.
    Oracle,
}

#[derive(Debug, Clone)]
pub struct Options {
    pub retrieval: Retrieval,
    /// The most tokens `text` may have (BM25 only).
    pub max_tokens: Option<usize>,
    /// How many BM25 hits are candidates.
    pub top_k: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum TextError {
    #[error(transparent)]
    Bundle(#[from] BundleError),
    #[error("the instance.json of `{bundle}` is invalid: {source}")]
    Instance {
        bundle: PathBuf,
        #[source]
        source: InstanceError,
    },
    #[error(
        "`{path}` in the code base is not UTF-8 text (SWE-bench's builder reads it as text and \
         fails on it too)"
    )]
    NotText { path: String },
    #[error("the gold patch edits `{path}`, which the code base at the base commit does not have")]
    MissingFile { path: String },
    #[error(
        "the prompt without any code (instructions, issue and README files) is already {tokens} \
         tokens, over the budget of {budget}"
    )]
    OverBudget { tokens: usize, budget: usize },
}

/// One instance's dataset row and how it was made.
#[derive(Debug, Clone)]
pub struct InstanceText {
    pub instance: Instance,
    /// The prompt, as the dataset's `text` column has it.
    pub text: String,
    /// `text` in `cl100k_base` tokens.
    pub tokens: usize,
    /// The files shown in the prompt: in rank order for BM25, in path order for the oracle.
    pub files: Vec<String>,
    /// The README files shown (always, outside the budget's choice, as upstream does).
    pub readmes: Vec<String>,
    /// BM25: what the search found, and over how many documents.
    pub search: Option<SearchResult>,
    pub documents: usize,
}

impl InstanceText {
    /// The dataset row: the columns of SWE-bench's text datasets, in their order, with the
    /// test lists as JSON strings and the patch between `<patch>` tags, as published.
    pub fn record(&self) -> Vec<u8> {
        let i = &self.instance;
        let list =
            |l: &Vec<String>| Value::String(String::from_utf8_lossy(&python_json(l)).into_owned());
        let s = |v: &str| Value::String(v.to_string());
        let fields = [
            ("instance_id", s(&i.instance_id)),
            ("text", s(&self.text)),
            ("repo", s(&i.repo)),
            ("base_commit", s(&i.base_commit)),
            ("problem_statement", s(&i.problem_statement)),
            ("hints_text", s(&i.hints_text)),
            ("created_at", s(&i.created_at)),
            ("patch", s(&dataset_patch(&i.patch))),
            ("test_patch", s(&i.test_patch)),
            ("version", s(&i.version)),
            ("FAIL_TO_PASS", list(&i.fail_to_pass)),
            ("PASS_TO_PASS", list(&i.pass_to_pass)),
            ("environment_setup_commit", s(&i.environment_setup_commit)),
        ];
        python_json(&Ordered(&fields))
    }

    /// The BM25 hits as SWE-bench's retrieval file has them (`{"instance_id", "hits":
    /// [{"docid", "score"}]}`).
    pub fn hits_record(&self) -> Vec<u8> {
        let hits: Vec<Value> = self
            .search
            .iter()
            .flat_map(|s| &s.hits)
            .map(|h| serde_json::json!({"docid": h.id, "score": h.score}))
            .collect();
        let fields = [
            (
                "instance_id",
                Value::String(self.instance.instance_id.clone()),
            ),
            ("hits", Value::Array(hits)),
        ];
        python_json(&Ordered(&fields))
    }
}

/// Fields in the order given (serde_json's map would sort them).
struct Ordered<'a>(&'a [(&'a str, Value)]);

impl serde::Serialize for Ordered<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// Bytes as Python's `open(path).read()` gives them: strict UTF-8, and universal newlines
/// (`\r\n` and `\r` become `\n`).
fn python_text(bytes: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(bytes).ok()?;
    if s.contains('\r') {
        Some(s.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        Some(s.to_string())
    }
}

/// SWE-bench's `is_test`: a path with the word test, tests or testing in it (words split at
/// space, `_`, `/` and `.`) is a test file, left out of the BM25 index.
pub fn is_test_path(path: &str) -> bool {
    path.to_lowercase()
        .split([' ', '_', '/', '.'])
        .any(|w| matches!(w, "test" | "tests" | "testing"))
}

/// Whether a code base file is a BM25 document: a `.py` file that is not a test file (SWE-bench
/// walks the repository with `rglob("*.py")`).
pub fn is_document_path(path: &str) -> bool {
    path.ends_with(".py") && !is_test_path(path)
}

fn is_readme(path: &str) -> bool {
    !path.contains('/') && path.to_lowercase().starts_with("readme")
}

/// The files SWE-bench's oracle shows: each patched file's source name (unidiff's
/// `source_file`: the `--- ` line, or the `diff --git` header's when there is none) with
/// everything up to the first `a/` cut off. A new file's source is `/dev/null`, which upstream
/// then reads as an empty file; it is kept, so that the text is the published one.
pub fn oracle_paths(patch: &str) -> BTreeSet<String> {
    let lines: Vec<&str> = patch.split('\n').collect();
    let mut sources: Vec<String> = Vec::new();
    // The file a `diff --git` header opened, until its `---` line names its source.
    let mut open_git_file = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(rest) = line.strip_prefix("diff --git ") {
            let source = rest.split(" b/").next().unwrap_or(rest);
            sources.push(source.to_string());
            open_git_file = true;
        } else if let Some(rest) = line.strip_prefix("--- ")
            && lines.get(i + 1).is_some_and(|l| l.starts_with("+++ "))
        {
            let name = rest.split('\t').next().unwrap_or(rest).to_string();
            match sources.last_mut() {
                Some(last) if open_git_file => *last = name,
                _ => sources.push(name),
            }
            open_git_file = false;
            i += 1;
        } else if let Some((old, new)) = hunk_lengths(line) {
            // Skip the hunk's lines: a removed `-- x` line is content, not a header.
            let (mut old, mut new) = (old, new);
            while (old > 0 || new > 0)
                && lines
                    .get(i + 1)
                    .is_some_and(|l| !l.starts_with("diff --git "))
            {
                i += 1;
                match lines[i].as_bytes().first() {
                    Some(b'-') => old = old.saturating_sub(1),
                    Some(b'+') => new = new.saturating_sub(1),
                    Some(b'\\') => {}
                    _ => {
                        old = old.saturating_sub(1);
                        new = new.saturating_sub(1);
                    }
                }
            }
        }
        i += 1;
    }
    sources
        .into_iter()
        .map(|s| match s.split_once("a/") {
            Some((_, rest)) => rest.to_string(),
            None => s,
        })
        .collect()
}

/// The line counts of a hunk header `@@ -a[,b] +c[,d] @@`.
fn hunk_lengths(line: &str) -> Option<(usize, usize)> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, _) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let len = |r: &str| -> Option<usize> {
        match r.split_once(',') {
            Some((_, n)) => n.parse().ok(),
            None => r.parse::<usize>().ok().map(|_| 1),
        }
    };
    Some((len(old)?, len(new)?))
}

/// The code base as read from a bundle: files and symlinks by path (UTF-8 paths only).
struct Codebase {
    entries: HashMap<String, MemoryMember>,
}

impl Codebase {
    fn from_members(members: MemoryMembers) -> (Codebase, Option<Vec<u8>>) {
        let mut entries = HashMap::new();
        let mut instance = None;
        for (name, member) in members {
            if name == b"instance.json" {
                if let MemoryMember::File { content, .. } = member {
                    instance = Some(content);
                }
                continue;
            }
            let Some(rel) = name.strip_prefix(CODEBASE_DIR.as_bytes()) else {
                continue;
            };
            match String::from_utf8(rel.to_vec()) {
                Ok(rel) => {
                    entries.insert(rel, member);
                }
                Err(_) => tracing::debug!(
                    "left out `{}`: its path is not UTF-8",
                    String::from_utf8_lossy(rel)
                ),
            }
        }
        (Codebase { entries }, instance)
    }

    /// The content of the file at `path`, following symlinks inside the code base.
    fn file(&self, path: &str) -> Option<&[u8]> {
        let mut path = path.to_string();
        for _ in 0..40 {
            match self.entries.get(&path)? {
                MemoryMember::File { content, .. } => return Some(content),
                MemoryMember::Symlink { target } => {
                    let target = std::str::from_utf8(target).ok()?;
                    let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
                    path = normalize(dir, target)?;
                }
            }
        }
        None
    }

    /// The first path on the way from `path` through symlinks that was not read into memory,
    /// if the way leads out of what was read (and not out of the code base).
    fn unresolved(&self, path: &str) -> Option<String> {
        let mut path = path.to_string();
        for _ in 0..40 {
            match self.entries.get(&path) {
                None => return Some(path),
                Some(MemoryMember::File { .. }) => return None,
                Some(MemoryMember::Symlink { target }) => {
                    let target = std::str::from_utf8(target).ok()?;
                    let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
                    path = normalize(dir, target)?;
                }
            }
        }
        None
    }

    /// Reads the bundle again for what `wanted` leads to and the first read did not keep;
    /// a chain of links out of the kept set takes one more read per link.
    fn complete(
        &mut self,
        wanted: &[String],
        report: &bundle::ScanReport,
        source: &dyn BundleSource,
        progress: &dyn Progress,
    ) -> Result<(), TextError> {
        let listed: BTreeSet<&[u8]> = report
            .manifest
            .members
            .iter()
            .map(|m| m.path.as_slice())
            .collect();
        for _ in 0..8 {
            let missing: BTreeSet<Vec<u8>> = wanted
                .iter()
                .filter_map(|p| self.unresolved(p))
                .map(|p| [CODEBASE_DIR.as_bytes(), p.as_bytes()].concat())
                .filter(|p| listed.contains(p.as_slice()))
                .collect();
            if missing.is_empty() {
                break;
            }
            let keep = |name: &[u8]| missing.contains(name);
            let (more, _, _) = read(source, Some(report.id), &keep, progress)?;
            self.entries.extend(more.entries);
        }
        Ok(())
    }

    fn text(&self, path: &str) -> Result<Option<String>, TextError> {
        match self.file(path) {
            None => Ok(None),
            Some(bytes) => python_text(bytes)
                .map(Some)
                .ok_or_else(|| TextError::NotText {
                    path: path.to_string(),
                }),
        }
    }
}

/// `target` seen from directory `dir`, as a path inside the code base; `None` if it leaves it.
fn normalize(dir: &str, target: &str) -> Option<String> {
    if target.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

fn read(
    source: &dyn BundleSource,
    expected: Option<Sha256Digest>,
    keep: &dyn Fn(&[u8]) -> bool,
    progress: &dyn Progress,
) -> Result<(Codebase, Option<Vec<u8>>, bundle::ScanReport), TextError> {
    let (report, members) =
        bundle::read_members_into_memory(source, expected, &Limits::default(), keep, progress)?;
    let (codebase, instance) = Codebase::from_members(members);
    Ok((codebase, instance, report))
}

/// The dataset row of the instance in a bundle (checked against `expected`, and member by
/// member against its manifest, before anything in it is used).
pub fn from_bundle(
    source: &dyn BundleSource,
    expected: Option<Sha256Digest>,
    options: &Options,
    progress: &dyn Progress,
) -> Result<InstanceText, TextError> {
    let bm25 = options.retrieval == Retrieval::Bm25;
    let keep = |name: &[u8]| -> bool {
        if name == b"instance.json" {
            return true;
        }
        let Some(rel) = name.strip_prefix(CODEBASE_DIR.as_bytes()) else {
            return false;
        };
        let rel = String::from_utf8_lossy(rel);
        is_readme(&rel) || (bm25 && is_document_path(&rel))
    };
    let (mut codebase, instance, report) = read(source, expected, &keep, progress)?;
    let instance =
        Instance::from_json(&instance.unwrap_or_default()).map_err(|e| TextError::Instance {
            bundle: source.name().to_path_buf(),
            source: e,
        })?;
    // What the first pass may have left out: the targets of symlinks (README files, modules)
    // and the files the gold patch edits, which are only known once instance.json is read.
    let oracle = (options.retrieval == Retrieval::Oracle).then(|| oracle_paths(&instance.patch));
    let mut wanted: Vec<String> = codebase
        .entries
        .iter()
        .filter(|(p, m)| matches!(m, MemoryMember::Symlink { .. }) && (is_readme(p) || bm25))
        .map(|(p, _)| p.clone())
        .collect();
    wanted.extend(oracle.iter().flatten().cloned());
    codebase.complete(&wanted, &report, source, progress)?;
    // SWE-bench's retrieval read a clone without its submodules: their files, which a bundle
    // may carry, are not the repository's documents.
    let submodules: Vec<String> = report
        .manifest
        .gitlinks
        .iter()
        .filter_map(|g| g.path.strip_prefix(CODEBASE_DIR.as_bytes()))
        .map(|p| format!("{}/", String::from_utf8_lossy(p)))
        .collect();
    if !submodules.is_empty() {
        codebase
            .entries
            .retain(|p, _| !submodules.iter().any(|s| p.starts_with(s.as_str())));
    }
    let mut readmes = BTreeMap::new();
    let mut root: Vec<&String> = codebase.entries.keys().filter(|p| is_readme(p)).collect();
    root.sort();
    for name in root {
        if let Some(text) = codebase.text(name)? {
            readmes.insert(name.clone(), text);
        }
    }
    match oracle {
        Some(wanted) => oracle_text(&codebase, &wanted, readmes, instance),
        None => bm25_text(&codebase, readmes, options, instance),
    }
}

/// The text with the files the gold patch edits (`wanted`), SWE-bench's oracle retrieval.
fn oracle_text(
    codebase: &Codebase,
    wanted: &BTreeSet<String>,
    readmes: BTreeMap<String, String>,
    instance: Instance,
) -> Result<InstanceText, TextError> {
    let ps = &instance.problem_statement;
    let mut files = BTreeMap::new();
    for p in wanted {
        let text = if p == "/dev/null" {
            String::new()
        } else {
            codebase
                .text(p)?
                .ok_or_else(|| TextError::MissingFile { path: p.clone() })?
        };
        files.insert(p.clone(), text);
    }
    let text = dataset_text(&style3(ps, &readmes, &files));
    Ok(InstanceText {
        tokens: tokenizer::count(&text),
        text,
        files: files.into_keys().collect(),
        readmes: readmes.into_keys().collect(),
        search: None,
        documents: 0,
        instance,
    })
}

/// The text with the files BM25 ranks highest for the problem statement, as many as fit.
fn bm25_text(
    codebase: &Codebase,
    readmes: BTreeMap<String, String>,
    options: &Options,
    instance: Instance,
) -> Result<InstanceText, TextError> {
    let ps = &instance.problem_statement;
    let mut paths: Vec<&String> = codebase
        .entries
        .keys()
        .filter(|p| is_document_path(p))
        .collect();
    paths.sort();
    let mut docs = Vec::with_capacity(paths.len());
    let mut contents: HashMap<&str, String> = HashMap::new();
    for p in paths {
        match codebase.file(p).and_then(python_text) {
            Some(text) => {
                docs.push(Document {
                    id: p.clone(),
                    text: format!("{p}\n{text}"),
                });
                contents.insert(p, text);
            }
            None => tracing::debug!("left out of the index: `{p}` (not a UTF-8 file)"),
        }
    }
    let index = Index::build(&docs);
    drop(docs);
    let search = index.search(ps, options.top_k);
    let ranked: Vec<(&str, &str)> = search
        .hits
        .iter()
        .filter_map(|h| {
            contents
                .get(h.id.as_str())
                .map(|c| (h.id.as_str(), c.as_str()))
        })
        .collect();
    let (files, text, tokens) = fit(ps, &readmes, &ranked, options.max_tokens)?;
    Ok(InstanceText {
        text,
        tokens,
        files,
        readmes: readmes.into_keys().collect(),
        search: Some(search),
        documents: index.len(),
        instance,
    })
}

/// SWE-bench's choice of files under a budget: in rank order, each file that still fits
/// (counted alone, as `[start of …]` … `[end of …]`) is added, the others skipped; the prompt is
/// then made with the chosen files in path order. The sum of the parts is not exactly the
/// count of the whole, so the whole is counted too and, should it be over the budget, the
/// lowest-ranked chosen file goes until it is not: the budget is never exceeded.
fn fit(
    ps: &str,
    readmes: &BTreeMap<String, String>,
    ranked: &[(&str, &str)],
    budget: Option<usize>,
) -> Result<(Vec<String>, String, usize), TextError> {
    let mut chosen: Vec<(&str, &str)> = Vec::new();
    match budget {
        None => chosen.extend_from_slice(ranked),
        Some(budget) => {
            let mut used = tokenizer::count(&style3(ps, readmes, &BTreeMap::new()));
            for &(path, content) in ranked {
                let n = tokenizer::count(&prompt::file_text(path, content));
                if used + n < budget {
                    chosen.push((path, content));
                    used += n;
                }
            }
        }
    }
    loop {
        let files: BTreeMap<String, String> = chosen
            .iter()
            .map(|(p, c)| (p.to_string(), c.to_string()))
            .collect();
        let text = dataset_text(&style3(ps, readmes, &files));
        let tokens = tokenizer::count(&text);
        match budget {
            Some(budget) if tokens > budget => {
                if chosen.pop().is_none() {
                    return Err(TextError::OverBudget { tokens, budget });
                }
            }
            _ => {
                return Ok((
                    chosen.iter().map(|(p, _)| p.to_string()).collect(),
                    text,
                    tokens,
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_files_are_told_by_their_words() {
        assert!(is_test_path("tests/unit/core.py"));
        assert!(is_test_path("pkg/test_core.py"));
        assert!(is_test_path("pkg/testing.py"));
        assert!(is_test_path("Pkg/Tests/x.py"));
        assert!(!is_test_path("pkg/conftest.py"));
        assert!(!is_test_path("pkg/contest.py"));
        assert!(!is_test_path("pkg/testutils.py"));
        assert!(is_document_path("src/a.py"));
        assert!(!is_document_path("src/a.pyi"));
    }

    #[test]
    fn oracle_paths_follow_unidiff() {
        let patch = "diff --git a/src/x.py b/src/x.py\n--- a/src/x.py\n+++ b/src/x.py\n\
                     @@ -1 +1 @@\n--- a/fake.py\n+++ b/fake.py\n\
                     diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n\
                     +++ b/new.py\n@@ -0,0 +1 @@\n+x\n\
                     diff --git a/img.png b/img.png\nBinary files a/img.png and b/img.png differ\n";
        let got: Vec<String> = oracle_paths(patch).into_iter().collect();
        assert_eq!(got, ["/dev/null", "img.png", "src/x.py"]);
    }

    #[test]
    fn symlinks_resolve_inside_the_code_base() {
        assert_eq!(normalize("a/b", "../c.py").as_deref(), Some("a/c.py"));
        assert_eq!(normalize("", "../c.py"), None);
        assert_eq!(normalize("a", "/etc/passwd"), None);
    }

    #[test]
    fn text_is_read_as_python_reads_it() {
        assert_eq!(python_text(b"a\r\nb\rc\n").as_deref(), Some("a\nb\nc\n"));
        assert_eq!(python_text(b"\xff"), None);
    }
}
