//! Reading a Parquet file row by row (one row group in memory at a time), each row as the JSON
//! record it stands for: a column per field, in the file's column order.

use std::fs::File;
use std::path::Path;

use parquet::basic::{ConvertedType, LogicalType, Type as PhysicalType};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::{Field, Row};
use parquet::schema::types::Type;
use serde_json::{Number, Value};

use super::{ParquetError, ValueError};
use crate::dataset::ordered::OrderedJson;

// SWE-bench's fields that are strings (`version` may be a number) and those a record cannot
// lack, as an instance reads them; the test lists: a string holding a JSON list, or a list of
// strings.
use crate::dataset::instance::{REQUIRED, STRING_FIELDS as STRING_COLUMNS};
const LIST_COLUMNS: [&str; 2] = ["FAIL_TO_PASS", "PASS_TO_PASS"];

/// What a column's type is, in words, for messages.
fn describe(t: &Type) -> String {
    if t.is_group() {
        return match t.get_basic_info().logical_type_ref() {
            Some(LogicalType::List) => "a list".into(),
            Some(LogicalType::Map) => "a map".into(),
            _ if t.get_basic_info().converted_type() == ConvertedType::LIST => "a list".into(),
            _ => "a struct".into(),
        };
    }
    match (t.get_physical_type(), t.get_basic_info().logical_type_ref()) {
        (PhysicalType::BYTE_ARRAY, Some(LogicalType::String | LogicalType::Json)) => {
            "a string".into()
        }
        (physical, Some(logical)) => format!("{physical} ({logical:?})"),
        (physical, None) => physical.to_string(),
    }
}

fn is_bytes(t: &Type) -> bool {
    t.is_primitive() && t.get_physical_type() == PhysicalType::BYTE_ARRAY
}

fn is_number(t: &Type) -> bool {
    t.is_primitive()
        && matches!(
            t.get_physical_type(),
            PhysicalType::INT32 | PhysicalType::INT64 | PhysicalType::FLOAT | PhysicalType::DOUBLE
        )
}

/// A list whose items are text, in any of Parquet's list layouts.
fn is_list_of_bytes(t: &Type) -> bool {
    let listy = t.is_group()
        && (matches!(
            t.get_basic_info().logical_type_ref(),
            Some(LogicalType::List)
        ) || t.get_basic_info().converted_type() == ConvertedType::LIST);
    let mut inner = t;
    // LIST > repeated group list > element, or LIST > repeated element (older writers).
    while listy && inner.is_group() {
        match inner.get_fields() {
            [only] => inner = only,
            _ => return false,
        }
    }
    listy && is_bytes(inner)
}

/// Checks that a file of SWE-bench records has SWE-bench's columns, with their types: a wrong
/// column is named before any row is read. A file of Multi-SWE-bench rows (an `org` or
/// `fix_patch` column, no `patch`) is left to its rows' own checks.
fn check_columns(path: &Path, schema: &Type) -> Result<(), ParquetError> {
    let columns = schema.get_fields();
    let named = |n: &str| columns.iter().find(|c| c.name() == n);
    let multi_swe_bench = named("patch").is_none()
        && named("base_commit").is_none()
        && (named("org").is_some() || named("fix_patch").is_some());
    if multi_swe_bench {
        return Ok(());
    }
    if let Some(missing) = REQUIRED.iter().find(|c| named(c).is_none()) {
        let have: Vec<&str> = columns.iter().map(|c| c.name()).collect();
        return Err(ParquetError::MissingColumn {
            path: path.to_path_buf(),
            column: missing.to_string(),
            have: have.join(", "),
        });
    }
    for c in columns {
        let name = c.name();
        let fits = if STRING_COLUMNS.contains(&name) {
            is_bytes(c) || (name == "version" && is_number(c))
        } else if LIST_COLUMNS.contains(&name) {
            is_bytes(c) || is_list_of_bytes(c)
        } else {
            true
        };
        if !fits {
            return Err(ParquetError::ColumnType {
                path: path.to_path_buf(),
                column: name.to_string(),
                found: describe(c),
                expected: if LIST_COLUMNS.contains(&name) {
                    "a string holding a JSON list, or a list of strings"
                } else if name == "version" {
                    "a string or a number"
                } else {
                    "a string"
                },
            });
        }
    }
    Ok(())
}

/// Days since 1970-01-01 as `YYYY-MM-DD` (Howard Hinnant's civil-from-days).
fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// A timestamp as RFC 3339 in UTC, with the fraction its unit carries.
fn timestamp(units: i64, per_second: i64) -> String {
    let secs = units.div_euclid(per_second);
    let frac = units.rem_euclid(per_second);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let time = format!("{:02}:{:02}:{:02}", rest / 3600, rest / 60 % 60, rest % 60);
    let frac = match (frac, per_second) {
        (0, _) => String::new(),
        (f, 1_000) => format!(".{f:03}"),
        (f, _) => format!(".{f:06}"),
    };
    format!("{}T{time}{frac}Z", civil_date(days))
}

/// A field's value as JSON. Text, numbers, booleans, lists, structs and maps with text keys
/// map as they are; dates and timestamps become their RFC 3339 text (SWE-bench writes
/// `created_at` as text); a binary value that is not UTF-8 cannot be JSON.
fn to_json(column: &str, field: &Field) -> Result<OrderedJson, ValueError> {
    let number = |n: Option<Number>| {
        n.map(|n| OrderedJson::Scalar(Value::Number(n)))
            .ok_or_else(|| ValueError::NotFinite(column.to_string()))
    };
    Ok(match field {
        Field::Null => OrderedJson::Scalar(Value::Null),
        Field::Bool(b) => OrderedJson::Scalar(Value::Bool(*b)),
        Field::Byte(n) => OrderedJson::Scalar(Value::from(*n)),
        Field::Short(n) => OrderedJson::Scalar(Value::from(*n)),
        Field::Int(n) => OrderedJson::Scalar(Value::from(*n)),
        Field::Long(n) => OrderedJson::Scalar(Value::from(*n)),
        Field::UByte(n) => OrderedJson::Scalar(Value::from(*n)),
        Field::UShort(n) => OrderedJson::Scalar(Value::from(*n)),
        Field::UInt(n) => OrderedJson::Scalar(Value::from(*n)),
        Field::ULong(n) => OrderedJson::Scalar(Value::from(*n)),
        Field::Float16(f) => number(Number::from_f64(f64::from(*f)))?,
        Field::Float(f) => number(Number::from_f64(f64::from(*f)))?,
        Field::Double(f) => number(Number::from_f64(*f))?,
        Field::Str(s) => OrderedJson::Scalar(Value::String(s.clone())),
        Field::Bytes(b) => match std::str::from_utf8(b.data()) {
            Ok(s) => OrderedJson::Scalar(Value::String(s.to_string())),
            Err(e) => {
                return Err(ValueError::NotUtf8 {
                    column: column.to_string(),
                    detail: e.to_string(),
                });
            }
        },
        Field::Date(days) => OrderedJson::Scalar(Value::String(civil_date(i64::from(*days)))),
        Field::TimestampMillis(ms) => OrderedJson::Scalar(Value::String(timestamp(*ms, 1_000))),
        Field::TimestampMicros(us) => OrderedJson::Scalar(Value::String(timestamp(*us, 1_000_000))),
        Field::Decimal(_) | Field::TimeMillis(_) | Field::TimeMicros(_) => {
            return Err(ValueError::Unsupported(column.to_string()));
        }
        Field::Group(row) => row_json(row)?,
        Field::ListInternal(list) => OrderedJson::Array(
            list.elements()
                .iter()
                .map(|f| to_json(column, f))
                .collect::<Result<_, _>>()?,
        ),
        Field::MapInternal(map) => {
            let mut fields = Vec::new();
            for (k, v) in map.entries() {
                let Field::Str(key) = k else {
                    return Err(ValueError::MapKeys(column.to_string()));
                };
                fields.push((key.clone(), to_json(column, v)?));
            }
            OrderedJson::Object(fields)
        }
    })
}

fn row_json(row: &Row) -> Result<OrderedJson, ValueError> {
    let mut fields = Vec::with_capacity(row.len());
    for (name, field) in row.get_column_iter() {
        fields.push((name.clone(), to_json(name, field)?));
    }
    Ok(OrderedJson::Object(fields))
}

/// Calls `each` with every row of the Parquet file at `path`, in order, as a JSON object with
/// the file's columns in their order, and its number from 1. The file's columns are checked
/// first when it holds SWE-bench records.
pub(crate) fn for_each_row<E: From<ParquetError>>(
    path: &Path,
    mut each: impl FnMut(usize, OrderedJson) -> Result<(), E>,
) -> Result<(), E> {
    let bad = |detail: String| ParquetError::Unreadable {
        path: path.to_path_buf(),
        detail,
    };
    let file = File::open(path).map_err(|e| bad(e.to_string()))?;
    let reader = SerializedFileReader::new(file).map_err(|e| bad(e.to_string()))?;
    check_columns(path, reader.metadata().file_metadata().schema())?;
    let rows = reader.get_row_iter(None).map_err(|e| bad(e.to_string()))?;
    for (i, row) in rows.enumerate() {
        let n = i + 1;
        let row = row.map_err(|e| bad(format!("row {n}: {e}")))?;
        let json = row_json(&row).map_err(|source| ParquetError::Value {
            path: path.to_path_buf(),
            row: n,
            source,
        })?;
        each(n, json)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_timestamps_read_as_rfc_3339() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(19_723), "2024-01-01");
        assert_eq!(civil_date(-1), "1969-12-31");
        assert_eq!(timestamp(1_700_000_000_000, 1_000), "2023-11-14T22:13:20Z");
        assert_eq!(
            timestamp(1_700_000_000_123_456, 1_000_000),
            "2023-11-14T22:13:20.123456Z"
        );
        assert_eq!(timestamp(-1, 1_000), "1969-12-31T23:59:59.999Z");
    }
}
