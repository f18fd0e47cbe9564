//! SWE-bench dataset files as they are published: a JSON list of instances, or JSON Lines
//! (one instance per line), with FAIL_TO_PASS / PASS_TO_PASS as JSON strings holding lists.
//! Which of the two a file is, its content says, whatever its name.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use super::instance::{Instance, InstanceError};
use super::msb::{self, MsbExportError, RowForm};
use super::ordered::OrderedJson;
use super::parquet::{self, ParquetError};
use super::taskrepo::{self, SourceFile, TaskRepoError};

#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("cannot read `{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("`{path}` {place}: {detail}")]
    Json {
        path: PathBuf,
        place: String,
        detail: String,
    },
    #[error("`{path}` {place}: {source}")]
    Instance {
        path: PathBuf,
        place: String,
        #[source]
        source: InstanceError,
    },
    #[error("`{path}`: instance `{id}` appears twice ({first} and {second})")]
    Duplicate {
        path: PathBuf,
        id: String,
        first: String,
        second: String,
    },
    #[error(transparent)]
    Parquet(#[from] ParquetError),
    #[error(transparent)]
    TaskRepo(#[from] TaskRepoError),
    #[error("`{path}` holds no dataset file{which} (`*.parquet`, `*.json`, `*.jsonl`)")]
    EmptyFolder { path: PathBuf, which: String },
    #[error(
        "`{path}` has a `tasks/` folder but no `sweb.yaml`: a swebench 5 task repository says \
         in its `sweb.yaml` which datasets and splits it publishes"
    )]
    TaskRepoWithoutConfig { path: PathBuf },
}

/// How FAIL_TO_PASS / PASS_TO_PASS are written out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TestListForm {
    /// JSON strings holding lists, as the published datasets have them.
    Strings,
    /// Plain JSON lists.
    Lists,
}

/// The order of the fields in the published datasets; any other field follows, sorted.
const FIELD_ORDER: [&str; 12] = [
    "repo",
    "instance_id",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
    "hints_text",
    "created_at",
    "version",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "environment_setup_commit",
];

/// What a JSON file holds, told by its content (its name may say nothing: `preds.txt`).
#[derive(Debug, PartialEq)]
pub(crate) enum JsonText<'a> {
    /// One JSON value (a list, a map, or one record alone) whose first line is `line`.
    Document { value: Value, line: usize },
    /// JSON Lines: each non-blank line with its number, from 1.
    Lines(Vec<(usize, &'a str)>),
}

/// `text` as one JSON document when it is one. When it is not, but its first non-blank line is
/// a JSON object by itself, it is JSON Lines (the document stopped at the second record as
/// trailing characters). Otherwise the document's own error, which names line and column.
/// Blank text is JSON Lines of no line.
pub(crate) fn json_or_lines(text: &str) -> Result<JsonText<'_>, serde_json::Error> {
    let lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i + 1, l));
    let Some((first, first_line)) = lines.clone().next() else {
        return Ok(JsonText::Lines(Vec::new()));
    };
    match serde_json::from_str::<Value>(text) {
        Ok(value) => Ok(JsonText::Document { value, line: first }),
        Err(_) if matches!(serde_json::from_str(first_line), Ok(Value::Object(_))) => {
            Ok(JsonText::Lines(lines.collect()))
        }
        Err(e) => Err(e),
    }
}

/// One record of a dataset file: where it was, its JSON, and whether its text was all ASCII
/// (how a Multi-SWE-bench row is written back).
type Record = (String, OrderedJson, bool);

/// The items of `text` when it is a JSON list, each with whether its own text is all ASCII: a
/// list may hold rows written both ways (SWE-bench's records keep non-ASCII as is,
/// Multi-SWE-bench's escape it). None when `text` is not a list.
fn list_items(text: &str) -> Option<Vec<(OrderedJson, bool)>> {
    let bytes = text.as_bytes();
    let skip = |mut i: usize| {
        while bytes
            .get(i)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            i += 1;
        }
        i
    };
    let mut i = skip(0);
    if bytes.get(i) != Some(&b'[') {
        return None;
    }
    i = skip(i + 1);
    let mut items = Vec::new();
    if bytes.get(i) == Some(&b']') {
        return Some(items);
    }
    loop {
        let mut stream = serde_json::Deserializer::from_str(&text[i..]).into_iter();
        let item = stream.next()?.ok()?;
        let end = i + stream.byte_offset();
        items.push((item, text[i..end].is_ascii()));
        i = skip(end);
        match bytes.get(i) {
            Some(b',') => i = skip(i + 1),
            Some(b']') => return Some(items),
            _ => return None,
        }
    }
}

/// The records of `text`, read from `path`, each with where it was (`line 7`, `item 3`).
fn records(path: &Path, text: &str) -> Result<Vec<Record>, DatasetError> {
    let json_err = |place: String, e: serde_json::Error| DatasetError::Json {
        path: path.to_path_buf(),
        place,
        detail: e.to_string(),
    };
    let mut records = Vec::new();
    match json_or_lines(text) {
        // Read again keeping each object's key order, which a `Value` does not.
        Ok(JsonText::Document { line, .. }) => match list_items(text) {
            Some(items) => {
                for (i, (v, ascii)) in items.into_iter().enumerate() {
                    records.push((format!("item {}", i + 1), v, ascii));
                }
            }
            // One record alone: JSON Lines of one line (or that record spread over several).
            None => {
                let place = format!("line {line}");
                let v = serde_json::from_str(text).map_err(|e| json_err(place.clone(), e))?;
                records.push((place, v, text.is_ascii()));
            }
        },
        Ok(JsonText::Lines(lines)) => {
            for (n, line) in lines {
                let place = format!("line {n}");
                let v = serde_json::from_str(line).map_err(|e| json_err(place.clone(), e))?;
                records.push((place, v, line.is_ascii()));
            }
        }
        Err(e) if text.trim_start().starts_with('[') => {
            return Err(json_err("as a JSON list".into(), e));
        }
        Err(e) => return Err(json_err("is neither a JSON list nor JSON Lines".into(), e)),
    }
    Ok(records)
}

/// Instances read so far, each id with where it was: a second one is refused.
#[derive(Default)]
struct Reading {
    seen: HashMap<String, String>,
    out: Vec<(String, Instance)>,
}

impl Reading {
    /// Takes one record read from `path` at `place` (`line 7`, `item 3`, `row 12`); `named`
    /// is how the place is said when several files are read (`row 12 of `a.parquet``).
    fn take(
        &mut self,
        path: &Path,
        place: String,
        named: String,
        value: OrderedJson,
        ascii: bool,
    ) -> Result<(), DatasetError> {
        let inst = if msb::is_row(&value) {
            msb::read_row(value, ascii)
        } else {
            Instance::from_value(value.into_value())
        };
        let inst = inst.map_err(|source| DatasetError::Instance {
            path: path.to_path_buf(),
            place: place.clone(),
            source,
        })?;
        self.add(path, named, inst)
    }

    /// Adds `inst`, read from `path` at `named`, unless its id was read already.
    fn add(&mut self, path: &Path, named: String, inst: Instance) -> Result<(), DatasetError> {
        if let Some(first) = self.seen.insert(inst.instance_id.clone(), named.clone()) {
            return Err(DatasetError::Duplicate {
                path: path.to_path_buf(),
                id: inst.instance_id,
                first,
                second: named,
            });
        }
        self.out.push((named, inst));
        Ok(())
    }

    /// Every record of the file at `path`: Parquet when it opens with Parquet's magic number,
    /// else JSON (a list, or JSON Lines). `several`: places name the file too.
    fn file(&mut self, path: &Path, several: bool) -> Result<(), DatasetError> {
        let io = |source| DatasetError::Io {
            path: path.to_path_buf(),
            source,
        };
        let named = |place: &str| match several {
            true => format!("{place} of `{}`", path.display()),
            false => place.to_string(),
        };
        if parquet::is_parquet(path).map_err(io)? {
            // Rows of Hugging Face's files keep non-ASCII as is, as SWE-bench's records do.
            return parquet::for_each_row(path, |n, value| {
                let place = format!("row {n}");
                self.take(path, place.clone(), named(&place), value, false)
            });
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        for (place, value, ascii) in records(path, &text)? {
            self.take(path, place.clone(), named(&place), value, ascii)?;
        }
        Ok(())
    }
}

/// Reads every instance of a dataset file, each with where it was (`line 7`, `item 3`, `row
/// 12`): JSON (a list or JSON Lines) or Parquet, told by the content; rows of SWE-bench's form
/// and of Multi-SWE-bench's, told apart row by row by their fields. Nothing is returned unless
/// every record is a valid instance and no id appears twice.
pub fn read_dataset(path: &Path) -> Result<Vec<(String, Instance)>, DatasetError> {
    let mut reading = Reading::default();
    reading.file(path, false)?;
    Ok(reading.out)
}

/// Whether a file in a dataset folder is one of its data files: `*.parquet`, `*.json` or
/// `*.jsonl`, of `split` when one is named (Hugging Face names a split's shards
/// `SPLIT-00000-of-00002.parquet`, or puts them in a folder of the split's name).
fn is_data_file(rel: &Path, split: Option<&str>) -> bool {
    let ext = rel.extension().and_then(|e| e.to_str());
    if !matches!(ext, Some("parquet" | "json" | "jsonl")) {
        return false;
    }
    let Some(split) = split else {
        return true;
    };
    let stem = rel.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let shard_of_split = stem == split
        || stem
            .strip_prefix(split)
            .is_some_and(|rest| rest.starts_with('-') || rest.starts_with('.'));
    shard_of_split || rel.parent().is_some_and(|p| p.ends_with(split))
}

/// The data files under `dir` (any depth, hidden folders such as `.git` or `.cache` left
/// out), sorted by path: a downloaded dataset's shards in their order.
fn data_files(dir: &Path, split: Option<&str>) -> Result<Vec<PathBuf>, DatasetError> {
    let io = |path: &Path, source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| io(&d, e))? {
            let entry = entry.map_err(|e| io(&d, e))?;
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let kind = std::fs::metadata(&path).map_err(|e| io(&path, e))?;
            let rel = path.strip_prefix(dir).unwrap_or(&path);
            if kind.is_dir() {
                stack.push(path);
            } else if is_data_file(rel, split) {
                found.push(path);
            }
        }
    }
    found.sort();
    if found.is_empty() {
        return Err(DatasetError::EmptyFolder {
            path: dir.to_path_buf(),
            which: split
                .map(|s| format!(" of split `{s}`"))
                .unwrap_or_default(),
        });
    }
    Ok(found)
}

/// What [`read_datasets`] read.
#[derive(Debug, Default)]
pub struct DatasetsRead {
    /// Every instance, with where it was (`line 7`, `row 12 of `a.parquet``, `tasks/<id>`).
    pub instances: Vec<(String, Instance)>,
    /// The files of task repositories the instances keep, to be stored as objects.
    pub files: Vec<SourceFile>,
    /// The datasets the task repositories publish, in their `sweb.yaml`'s order.
    pub published: Vec<String>,
    /// What the reader says without refusing: tasks left out, swebench's warnings.
    pub notes: Vec<String>,
}

/// Reads every instance of the dataset files `paths`, as [`read_dataset`] reads one. A folder
/// with a `sweb.yaml` is a swebench 5 task repository (its published tasks, or those of
/// `split`); any other folder stands for the data files under it (a Hugging Face download:
/// `data/*.parquet`), only those of `split` when one is named. An id may appear once in all of
/// them together.
pub fn read_datasets(paths: &[PathBuf], split: Option<&str>) -> Result<DatasetsRead, DatasetError> {
    // In the order given: a task repository, or data files.
    let mut sources: Vec<(PathBuf, bool)> = Vec::new();
    for p in paths {
        if p.is_dir() && taskrepo::is_task_repo(p) {
            sources.push((p.clone(), true));
        } else if p.is_dir() && taskrepo::has_tasks(p) {
            // Its tests.json files are no dataset files.
            return Err(DatasetError::TaskRepoWithoutConfig { path: p.clone() });
        } else if p.is_dir() {
            sources.extend(data_files(p, split)?.into_iter().map(|f| (f, false)));
        } else {
            sources.push((p.clone(), false));
        }
    }
    let several = sources.len() > 1;
    let mut reading = Reading::default();
    let mut out = DatasetsRead::default();
    for (path, is_repo) in &sources {
        if !is_repo {
            reading.file(path, several)?;
            continue;
        }
        let repo = taskrepo::read_task_repo(path, split)?;
        for (place, inst) in repo.instances {
            let named = match several {
                true => format!("{place} of `{}`", path.display()),
                false => place,
            };
            reading.add(path, named, inst)?;
        }
        out.files.extend(repo.files);
        for d in repo.datasets {
            if !out.published.contains(&d) {
                out.published.push(d);
            }
        }
        for (s, n) in repo.left_out {
            out.notes.push(format!(
                "`{}`: left out {n} task(s) of split `{s}`, which its sweb.yaml does not \
                 publish (--split {s} imports them)",
                path.display()
            ));
        }
        out.notes.extend(repo.warnings);
    }
    out.instances = reading.out;
    Ok(out)
}

/// Writes JSON as Python's `json.dumps` does (`", "` and `": "` between items). SWE-bench's
/// files were written with `ensure_ascii=False` (non-ASCII as is); json.dumps' default,
/// `ensure_ascii=True` (`ascii`), writes every character beyond `~` as `\uXXXX`, as the
/// Multi-SWE-bench files have it. Either way an imported row comes back byte for byte.
struct PythonFormatter {
    ascii: bool,
}

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
    // serde_json has already escaped `"`, `\` and the control characters, as Python does.
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        if !self.ascii {
            return w.write_all(fragment.as_bytes());
        }
        let mut units = [0u16; 2];
        for c in fragment.chars() {
            if (' '..='~').contains(&c) {
                w.write_all(&[c as u8])?;
            } else {
                // Beyond the BMP, a surrogate pair, as Python writes it.
                for unit in c.encode_utf16(&mut units) {
                    write!(w, "\\u{unit:04x}")?;
                }
            }
        }
        Ok(())
    }
}

/// `value` as Python's `json.dumps(value, ensure_ascii=False)` writes it.
pub fn python_json(value: &impl Serialize) -> Vec<u8> {
    python_json_as(value, false)
}

/// `value` as Python's `json.dumps` writes it, with `ensure_ascii=ascii`.
pub(crate) fn python_json_as(value: &impl Serialize, ascii: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PythonFormatter { ascii });
    value
        .serialize(&mut ser)
        .expect("a JSON value always serializes");
    out
}

/// A record's fields, written in their order (a `serde_json::Map` would sort the keys).
struct OrderedFields(Vec<(String, Value)>);

impl Serialize for OrderedFields {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// One instance as a published record: the published fields in their order, then the others.
pub fn to_record(inst: &Instance, form: TestListForm) -> Vec<u8> {
    python_json(&OrderedFields(record_fields(inst, form)))
}

/// The fields of an instance's published record, in their order.
fn record_fields(inst: &Instance, form: TestListForm) -> Vec<(String, Value)> {
    let Value::Object(mut all) = inst.to_value() else {
        unreachable!("an instance is a JSON object")
    };
    if form == TestListForm::Strings {
        for key in ["FAIL_TO_PASS", "PASS_TO_PASS"] {
            if let Some(list) = all.get(key) {
                let text = String::from_utf8(python_json(list)).expect("JSON is UTF-8");
                all.insert(key.to_string(), Value::String(text));
            }
        }
    }
    let mut fields = Vec::new();
    for key in FIELD_ORDER {
        if let Some(v) = all.remove(key) {
            fields.push((key.to_string(), v));
        }
    }
    let rest: Map<String, Value> = all;
    fields.extend(rest);
    fields
}

/// The bytes of a dataset file of SWE-bench records: JSON Lines when `path` ends in `.jsonl`,
/// else a JSON list.
pub fn dataset_bytes(path: &Path, instances: &[Instance], form: TestListForm) -> Vec<u8> {
    let records: Vec<Vec<u8>> = instances.iter().map(|i| to_record(i, form)).collect();
    records_bytes(path, &records)
}

/// The form of the rows `export-dataset` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Each instance in the form it came in: a Multi-SWE-bench row as its own row, byte for
    /// byte; anything else as a SWE-bench record.
    AsImported,
    /// SWE-bench records; a Multi-SWE-bench row's own fields follow as extra fields.
    SweBench,
    /// Multi-SWE-bench rows; refused for an instance that did not come from one.
    MultiSweBench,
    /// SWE-bench records in a Parquet file, as Hugging Face publishes them (also what an
    /// output named `*.parquet` gets with `as-imported` or `swe-bench`).
    Parquet,
    /// A swebench 5 task repository: a folder, not a file (`sweb.yaml`, `tasks/<id>/…`).
    TaskRepo,
}

/// `inst` as a SWE-bench record. The layout of a Multi-SWE-bench row is left out: it describes
/// that row's bytes, and a record read back is a SWE-bench row.
fn swe_bench_record(inst: &Instance, tests: TestListForm) -> Vec<(String, Value)> {
    let mut fields = record_fields(inst, tests);
    fields.retain(|(k, _)| k != msb::LAYOUT_KEY && k != taskrepo::TASK_KEY);
    fields
}

/// Why a dataset could not be written as asked.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    MultiSweBench(#[from] MsbExportError),
    #[error(transparent)]
    Parquet(#[from] ParquetError),
    #[error(
        "`{0}` names a Parquet file, which holds SWE-bench records: Multi-SWE-bench rows are \
         written as JSON (`.jsonl` or `.json`)"
    )]
    MultiSweBenchAsParquet(PathBuf),
    #[error("a task repository is a folder of files, not the bytes of one file (`{0}`)")]
    TaskRepoIsAFolder(PathBuf),
}

/// The bytes of a dataset file of `instances` written as `format`: Parquet for `parquet` or an
/// output named `*.parquet`, else JSON Lines when `path` ends in `.jsonl`, else a JSON list;
/// `tests` is how SWE-bench records write their test lists.
pub fn export_bytes(
    path: &Path,
    instances: &[Instance],
    format: ExportFormat,
    tests: TestListForm,
) -> Result<Vec<u8>, ExportError> {
    if format == ExportFormat::TaskRepo {
        return Err(ExportError::TaskRepoIsAFolder(path.to_path_buf()));
    }
    let parquet_named = path.extension().is_some_and(|e| e == "parquet");
    if parquet_named && format == ExportFormat::MultiSweBench {
        return Err(ExportError::MultiSweBenchAsParquet(path.to_path_buf()));
    }
    if format == ExportFormat::Parquet
        || (parquet_named && matches!(format, ExportFormat::AsImported | ExportFormat::SweBench))
    {
        let records: Vec<parquet::Record<'_>> = instances
            .iter()
            .map(|inst| parquet::Record {
                id: &inst.instance_id,
                fields: swe_bench_record(inst, tests),
            })
            .collect();
        return Ok(parquet::parquet_bytes(&records)?);
    }
    let records = instances
        .iter()
        .map(|inst| match (format, msb::row_form(inst)) {
            (ExportFormat::MultiSweBench, _)
            | (ExportFormat::AsImported, RowForm::MultiSweBench) => msb::to_row(inst),
            _ => Ok(python_json(&OrderedFields(swe_bench_record(inst, tests)))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(records_bytes(path, &records))
}

/// `records` (each one JSON value) as the file `path` names: JSON Lines for `.jsonl`, a JSON
/// list otherwise, with Python's `", "` between items.
pub fn records_bytes(path: &Path, records: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    if path.extension().is_some_and(|e| e == "jsonl") {
        for r in records {
            out.extend_from_slice(r);
            out.push(b'\n');
        }
    } else {
        out.push(b'[');
        for (i, r) in records.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(r);
        }
        out.extend_from_slice(b"]\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_ascii_is_written_as_python_writes_it_either_way() {
        let v = serde_json::json!({"k\u{e9}": ["caf\u{e9} \u{1f600}\u{7f}\n\"\\/"]});
        assert_eq!(
            String::from_utf8(python_json_as(&v, true)).unwrap(),
            r#"{"k\u00e9": ["caf\u00e9 \ud83d\ude00\u007f\n\"\\/"]}"#
        );
        assert_eq!(
            String::from_utf8(python_json(&v)).unwrap(),
            "{\"k\u{e9}\": [\"caf\u{e9} \u{1f600}\u{7f}\\n\\\"\\\\/\"]}"
        );
    }

    #[test]
    fn each_item_of_a_list_says_whether_it_was_all_ascii() {
        let items = list_items(" [ {\"a\": \"\\u00e9\"} ,\n{\"b\": \"\u{e9}\"}, 3]").unwrap();
        let flags: Vec<bool> = items.iter().map(|(_, ascii)| *ascii).collect();
        assert_eq!(flags, [true, false, true]);
        assert_eq!(items[0].0.keys(), ["a"]);
        assert_eq!(list_items("[]").unwrap().len(), 0);
        assert!(list_items("{\"a\": 1}").is_none());
    }

    #[test]
    fn json_lines_and_documents_are_told_apart_by_their_content() {
        let doc = |t: &str| match json_or_lines(t) {
            Ok(JsonText::Document { line, .. }) => line,
            other => panic!("{t:?} read as {other:?}"),
        };
        let lines = |t: &str| match json_or_lines(t) {
            Ok(JsonText::Lines(l)) => l.into_iter().map(|(n, _)| n).collect::<Vec<_>>(),
            other => panic!("{t:?} read as {other:?}"),
        };
        assert_eq!(doc("[{\"a\": 1},\n {\"a\": 2}]"), 1);
        assert_eq!(doc("\n\n{\n  \"a\": {}\n}\n"), 3);
        // One line of JSON Lines is also one document: the caller knows what it expects.
        assert_eq!(doc("{\"a\": 1}\n"), 1);
        assert_eq!(lines("{\"a\": 1}\n\n{\"a\": 2}\n"), [1, 3]);
        // A bad line after the first is still JSON Lines: the caller names that line.
        assert_eq!(lines("{\"a\": 1}\nnot json\n"), [1, 2]);
        assert_eq!(lines(" \n"), Vec::<usize>::new());
        // A first line that is no record alone: the document's error, with its line.
        let e = json_or_lines("[{\"a\": 1}\n{\"a\": 2}]").unwrap_err();
        assert_eq!(e.line(), 2, "{e}");
        let e = json_or_lines("{not json\n{\"a\": 1}\n").unwrap_err();
        assert_eq!(e.line(), 1, "{e}");
    }
}
