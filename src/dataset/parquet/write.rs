//! Writing records as a Parquet file as Hugging Face publishes SWE-bench: one optional column
//! per field, text as UTF-8 strings, in the records' field order.

use std::sync::Arc;

use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType, ZstdLevel};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{Type, TypePtr};
use serde_json::Value;

use super::ParquetError;
use crate::dataset::instance::json_type_name;

/// One record: its instance id (for messages) and its fields in order.
pub(crate) struct Record<'a> {
    pub id: &'a str,
    pub fields: Vec<(String, Value)>,
}

/// What a column holds, from the values its records give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Integer,
    Float,
    Boolean,
    /// A list of strings (FAIL_TO_PASS written as lists).
    TextList,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Integer => "an integer",
            Kind::Float => "a float",
            Kind::Boolean => "a boolean",
            Kind::TextList => "a list of strings",
        }
    }

    fn of(v: &Value) -> Option<Kind> {
        match v {
            Value::Null => None,
            Value::String(_) => Some(Kind::Text),
            Value::Number(n) if n.is_i64() => Some(Kind::Integer),
            Value::Number(_) => Some(Kind::Float),
            Value::Bool(_) => Some(Kind::Boolean),
            Value::Array(items) if items.iter().all(Value::is_string) => Some(Kind::TextList),
            _ => None,
        }
    }

    /// The kind two values of one column share: an integer column with one float is a float
    /// column.
    fn join(a: Kind, b: Kind) -> Option<Kind> {
        match (a, b) {
            (a, b) if a == b => Some(a),
            (Kind::Integer, Kind::Float) | (Kind::Float, Kind::Integer) => Some(Kind::Float),
            _ => None,
        }
    }

    fn schema(self, name: &str) -> parquet::errors::Result<Type> {
        let primitive = |physical, logical| {
            Type::primitive_type_builder(name, physical)
                .with_repetition(Repetition::OPTIONAL)
                .with_logical_type(logical)
                .build()
        };
        match self {
            Kind::Text => primitive(PhysicalType::BYTE_ARRAY, Some(LogicalType::String)),
            Kind::Integer => primitive(PhysicalType::INT64, None),
            Kind::Float => primitive(PhysicalType::DOUBLE, None),
            Kind::Boolean => primitive(PhysicalType::BOOLEAN, None),
            // The three-level list every reader knows: LIST > repeated list > element.
            Kind::TextList => {
                let element = Type::primitive_type_builder("element", PhysicalType::BYTE_ARRAY)
                    .with_repetition(Repetition::OPTIONAL)
                    .with_logical_type(Some(LogicalType::String))
                    .build()?;
                let list = Type::group_type_builder("list")
                    .with_repetition(Repetition::REPEATED)
                    .with_fields(vec![Arc::new(element)])
                    .build()?;
                Type::group_type_builder(name)
                    .with_repetition(Repetition::OPTIONAL)
                    .with_logical_type(Some(LogicalType::List))
                    .with_fields(vec![Arc::new(list)])
                    .build()
            }
        }
    }
}

/// The columns of `records`: every field name in the order first met, with the kind of its
/// values (text when every value is null).
fn columns(records: &[Record<'_>]) -> Result<Vec<(String, Kind)>, ParquetError> {
    let mut columns: Vec<(String, Option<Kind>, &str)> = Vec::new();
    for r in records {
        for (name, value) in &r.fields {
            let at = match columns.iter().position(|(n, _, _)| n == name) {
                Some(at) => at,
                None => {
                    columns.push((name.clone(), None, r.id));
                    columns.len() - 1
                }
            };
            if value.is_null() {
                continue;
            }
            let unwritable = |found: String| ParquetError::Unwritable {
                instance: r.id.to_string(),
                field: name.clone(),
                found,
            };
            let kind = Kind::of(value).ok_or_else(|| unwritable(json_type_name(value).into()))?;
            let (_, have, first) = &mut columns[at];
            *have = match *have {
                None => {
                    *first = r.id;
                    Some(kind)
                }
                Some(k) => Some(Kind::join(k, kind).ok_or_else(|| {
                    unwritable(format!("{} where `{first}` has {}", kind.word(), k.word()))
                })?),
            };
        }
    }
    Ok(columns
        .into_iter()
        .map(|(n, k, _)| (n, k.unwrap_or(Kind::Text)))
        .collect())
}

/// About this many bytes of text per row group (pyarrow's files of SWE-bench hold one).
const ROW_GROUP_BYTES: usize = 64 << 20;

/// The rows of `records` cut into row groups of about [`ROW_GROUP_BYTES`].
fn row_groups<'r, 'a>(records: &'r [Record<'a>]) -> Vec<&'r [Record<'a>]> {
    let size = |r: &Record<'_>| -> usize {
        r.fields
            .iter()
            .map(|(_, v)| match v {
                Value::String(s) => s.len(),
                Value::Array(items) => items.iter().filter_map(Value::as_str).map(str::len).sum(),
                _ => 8,
            })
            .sum()
    };
    let mut groups = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, r) in records.iter().enumerate() {
        let b = size(r);
        if i > start && bytes + b > ROW_GROUP_BYTES {
            groups.push(&records[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += b;
    }
    if start < records.len() || records.is_empty() {
        groups.push(&records[start..]);
    }
    groups
}

/// The value of field `name` in `r` (null when the record lacks it).
fn value_of<'v>(r: &'v Record<'_>, name: &str) -> &'v Value {
    r.fields
        .iter()
        .find(|(n, _)| n == name)
        .map_or(&Value::Null, |(_, v)| v)
}

/// Writes one column of a row group. Definition levels: 0 is null; for a list, 1 an empty
/// list and 3 an item (2 would be a null item, which no record has).
fn write_column(
    writer: &mut parquet::file::writer::SerializedColumnWriter<'_>,
    kind: Kind,
    values: &[&Value],
) -> parquet::errors::Result<()> {
    let defs: Vec<i16> = values.iter().map(|v| i16::from(!v.is_null())).collect();
    match kind {
        Kind::Text => {
            let data: Vec<ByteArray> = values
                .iter()
                .filter_map(|v| v.as_str())
                .map(|s| ByteArray::from(s.as_bytes().to_vec()))
                .collect();
            writer
                .typed::<ByteArrayType>()
                .write_batch(&data, Some(&defs), None)?;
        }
        Kind::Integer => {
            let data: Vec<i64> = values.iter().filter_map(|v| v.as_i64()).collect();
            writer
                .typed::<Int64Type>()
                .write_batch(&data, Some(&defs), None)?;
        }
        Kind::Float => {
            let data: Vec<f64> = values.iter().filter_map(|v| v.as_f64()).collect();
            writer
                .typed::<DoubleType>()
                .write_batch(&data, Some(&defs), None)?;
        }
        Kind::Boolean => {
            let data: Vec<bool> = values.iter().filter_map(|v| v.as_bool()).collect();
            writer
                .typed::<BoolType>()
                .write_batch(&data, Some(&defs), None)?;
        }
        Kind::TextList => {
            let (mut data, mut defs, mut reps) = (Vec::new(), Vec::new(), Vec::new());
            for v in values {
                match v {
                    Value::Array(items) if !items.is_empty() => {
                        for (i, item) in items.iter().enumerate() {
                            data.push(ByteArray::from(
                                item.as_str().unwrap_or("").as_bytes().to_vec(),
                            ));
                            defs.push(3);
                            reps.push(i16::from(i > 0));
                        }
                    }
                    Value::Array(_) => {
                        defs.push(1);
                        reps.push(0);
                    }
                    _ => {
                        defs.push(0);
                        reps.push(0);
                    }
                }
            }
            writer
                .typed::<ByteArrayType>()
                .write_batch(&data, Some(&defs), Some(&reps))?;
        }
    }
    Ok(())
}

/// `records` as the bytes of a Parquet file: one optional column per field (text as UTF-8
/// strings, test lists as strings or lists of strings as the records give them), zstd
/// compressed, the same bytes for the same records. A field whose values are objects, or
/// lists of anything but strings, or of two kinds, is refused, naming the instance.
pub(crate) fn parquet_bytes(records: &[Record<'_>]) -> Result<Vec<u8>, ParquetError> {
    let columns = columns(records)?;
    let failed = |e: parquet::errors::ParquetError| ParquetError::Write(e.to_string());
    let fields = columns
        .iter()
        .map(|(name, kind)| kind.schema(name).map(Arc::new))
        .collect::<parquet::errors::Result<Vec<TypePtr>>>()
        .map_err(failed)?;
    let schema = Type::group_type_builder("schema")
        .with_fields(fields)
        .build()
        .map_err(failed)?;
    let level = ZstdLevel::try_new(3).map_err(failed)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .build();
    let mut out = Vec::new();
    let mut writer =
        SerializedFileWriter::new(&mut out, Arc::new(schema), Arc::new(props)).map_err(failed)?;
    for group in row_groups(records) {
        let mut rg = writer.next_row_group().map_err(failed)?;
        for (name, kind) in &columns {
            let Some(mut col) = rg.next_column().map_err(failed)? else {
                break;
            };
            let values: Vec<&Value> = group.iter().map(|r| value_of(r, name)).collect();
            write_column(&mut col, *kind, &values).map_err(failed)?;
            col.close().map_err(failed)?;
        }
        rg.close().map_err(failed)?;
    }
    writer.close().map_err(failed)?;
    Ok(out)
}
