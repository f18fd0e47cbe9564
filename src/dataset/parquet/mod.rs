//! SWE-bench's datasets as Hugging Face publishes them: Parquet files (`data/test-00000-of-
//! 00001.parquet`), a column per field, the test lists as JSON strings. Read through the
//! `parquet` crate's row reader, one row group in memory at a time; written with its column
//! writer.

mod read;
mod write;

use std::io::Read;
use std::path::{Path, PathBuf};

pub(crate) use read::for_each_row;
pub(crate) use write::{Record, parquet_bytes};

#[derive(Debug, thiserror::Error)]
pub enum ParquetError {
    #[error("`{path}` is not a Parquet file swe-ark can read: {detail}")]
    Unreadable { path: PathBuf, detail: String },
    #[error(
        "`{path}` has no column `{column}`, which every SWE-bench record has (its columns: {have})"
    )]
    MissingColumn {
        path: PathBuf,
        column: String,
        have: String,
    },
    #[error("`{path}`: column `{column}` is {found}, not {expected}")]
    ColumnType {
        path: PathBuf,
        column: String,
        found: String,
        expected: &'static str,
    },
    #[error("`{path}` row {row}: {source}")]
    Value {
        path: PathBuf,
        row: usize,
        #[source]
        source: ValueError,
    },
    #[error(
        "instance `{instance}`: field `{field}` is {found}, which a Parquet column of SWE-bench \
         records cannot hold (text, numbers, booleans and lists of strings can; export this \
         instance as JSON instead)"
    )]
    Unwritable {
        instance: String,
        field: String,
        found: String,
    },
    #[error("writing Parquet: {0}")]
    Write(String),
}

/// A value of a row that JSON cannot carry as it is.
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    #[error("`{column}` holds bytes that are not UTF-8 ({detail})")]
    NotUtf8 { column: String, detail: String },
    #[error("`{0}` holds a number JSON cannot carry (NaN or infinite)")]
    NotFinite(String),
    #[error("`{0}` holds a decimal or a time of day, which no dataset field is")]
    Unsupported(String),
    #[error("`{0}` is a map whose keys are not text")]
    MapKeys(String),
}

/// Parquet's magic number, which opens and closes every file.
const MAGIC: &[u8; 4] = b"PAR1";

/// Whether the file at `path` is a Parquet file (it opens with `PAR1`), whatever its name.
pub fn is_parquet(path: &Path) -> std::io::Result<bool> {
    let mut head = [0u8; 4];
    let mut f = std::fs::File::open(path)?;
    let mut got = 0;
    while got < head.len() {
        match f.read(&mut head[got..])? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got == head.len() && &head == MAGIC)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::ordered::OrderedJson;
    use serde_json::{Value, json};

    fn record(id: &str, fields: Value) -> Record<'_> {
        let Value::Object(map) = fields else {
            unreachable!()
        };
        Record {
            id,
            fields: map.into_iter().collect(),
        }
    }

    fn read_back(bytes: &[u8]) -> Vec<Value> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.parquet");
        std::fs::write(&path, bytes).unwrap();
        assert!(is_parquet(&path).unwrap());
        let mut rows = Vec::new();
        for_each_row(&path, |n, row: OrderedJson| {
            assert_eq!(n, rows.len() + 1);
            rows.push(row.into_value());
            Ok::<(), ParquetError>(())
        })
        .unwrap();
        rows
    }

    #[test]
    fn records_come_back_as_they_went_and_the_bytes_are_the_same_each_time() {
        let records = vec![
            record(
                "a",
                json!({"base_commit": "0", "instance_id": "a", "patch": "p\n", "repo": "o/r",
                       "test_patch": "t", "FAIL_TO_PASS": ["x", "y"], "n": 3, "ok": true,
                       "hints_text": "caf\u{e9} \u{1f600}"}),
            ),
            record(
                "b",
                json!({"base_commit": "1", "instance_id": "b", "patch": "", "repo": "o/r",
                       "test_patch": "t", "FAIL_TO_PASS": [], "n": 2.5, "ok": null,
                       "hints_text": null}),
            ),
            record(
                "c",
                json!({"base_commit": "2", "instance_id": "c", "patch": "", "repo": "o/r",
                       "test_patch": "t", "FAIL_TO_PASS": null, "extra": "only here"}),
            ),
        ];
        let bytes = parquet_bytes(&records).unwrap();
        assert_eq!(parquet_bytes(&records).unwrap(), bytes, "deterministic");
        let rows = read_back(&bytes);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0]["FAIL_TO_PASS"], json!(["x", "y"]));
        assert_eq!(rows[0]["hints_text"], json!("caf\u{e9} \u{1f600}"));
        assert_eq!(
            rows[0]["n"],
            json!(3.0),
            "an integer column with a float is a float one"
        );
        assert_eq!(rows[1]["FAIL_TO_PASS"], json!([]), "empty, not null");
        assert_eq!(rows[1]["ok"], Value::Null);
        assert_eq!(rows[2]["FAIL_TO_PASS"], Value::Null);
        assert_eq!(rows[2]["extra"], json!("only here"));
        assert_eq!(
            rows[0]["extra"],
            Value::Null,
            "a field a record lacks is null"
        );
    }

    #[test]
    fn a_field_parquet_cannot_hold_names_the_instance() {
        let records = vec![
            record("a", json!({"instance_id": "a", "meta": "text"})),
            record("b", json!({"instance_id": "b", "meta": {"k": 1}})),
        ];
        let e = parquet_bytes(&records).unwrap_err().to_string();
        assert!(
            e.contains("`b`") && e.contains("`meta`") && e.contains("an object"),
            "{e}"
        );
        let records = vec![
            record("a", json!({"instance_id": "a", "meta": "text"})),
            record("b", json!({"instance_id": "b", "meta": 7})),
        ];
        let e = parquet_bytes(&records).unwrap_err().to_string();
        assert!(e.contains("an integer where `a` has text"), "{e}");
    }

    #[test]
    fn a_file_that_is_not_parquet_is_told_by_its_first_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.parquet");
        std::fs::write(&path, "{\"instance_id\": \"a\"}\n").unwrap();
        assert!(!is_parquet(&path).unwrap());
        std::fs::write(&path, "PAR").unwrap();
        assert!(!is_parquet(&path).unwrap());
        std::fs::write(&path, "PAR1 and then nothing a reader wants").unwrap();
        let e = for_each_row(&path, |_, _| Ok::<(), ParquetError>(())).unwrap_err();
        assert!(e.to_string().contains("is not a Parquet file"), "{e}");
    }
}
