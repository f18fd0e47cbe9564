//! JSON that keeps the order of each object's keys as the file had it. `serde_json::Value`
//! sorts them (its map is a BTreeMap, and turning on `preserve_order` would change every
//! instance's canonical bytes), but a Multi-SWE-bench row only comes back byte for byte when
//! its keys come back in their order.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Number, Value};

/// A JSON value whose objects are lists of (key, value) in the order they were read or are to
/// be written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OrderedJson {
    Object(Vec<(String, OrderedJson)>),
    Array(Vec<OrderedJson>),
    /// null, a boolean, a number or a string.
    Scalar(Value),
}

impl OrderedJson {
    /// The keys of an object, in order; none for anything else.
    pub(crate) fn keys(&self) -> Vec<&str> {
        match self {
            OrderedJson::Object(fields) => fields.iter().map(|(k, _)| k.as_str()).collect(),
            _ => Vec::new(),
        }
    }

    /// As a `serde_json::Value` (keys sorted). A key given twice keeps its last value, as
    /// serde_json and Python's json module both read it.
    pub(crate) fn into_value(self) -> Value {
        match self {
            OrderedJson::Scalar(v) => v,
            OrderedJson::Array(items) => {
                Value::Array(items.into_iter().map(OrderedJson::into_value).collect())
            }
            OrderedJson::Object(fields) => Value::Object(
                fields
                    .into_iter()
                    .map(|(k, v)| (k, v.into_value()))
                    .collect::<Map<String, Value>>(),
            ),
        }
    }
}

impl Serialize for OrderedJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            OrderedJson::Scalar(v) => v.serialize(s),
            OrderedJson::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            OrderedJson::Object(fields) => {
                let mut map = s.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

struct OrderedVisitor;

impl<'de> Visitor<'de> for OrderedVisitor {
    type Value = OrderedJson;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<OrderedJson, E> {
        Ok(OrderedJson::Scalar(Value::Bool(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<OrderedJson, E> {
        Ok(OrderedJson::Scalar(Value::Number(v.into())))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<OrderedJson, E> {
        Ok(OrderedJson::Scalar(Value::Number(v.into())))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<OrderedJson, E> {
        // JSON text has no NaN or infinity, so a parsed float always fits.
        Ok(OrderedJson::Scalar(
            Number::from_f64(v).map_or(Value::Null, Value::Number),
        ))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<OrderedJson, E> {
        Ok(OrderedJson::Scalar(Value::String(v.to_string())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<OrderedJson, E> {
        Ok(OrderedJson::Scalar(Value::String(v)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<OrderedJson, E> {
        Ok(OrderedJson::Scalar(Value::Null))
    }
    fn visit_none<E: de::Error>(self) -> Result<OrderedJson, E> {
        Ok(OrderedJson::Scalar(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OrderedJson, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(OrderedJson::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedJson, A::Error> {
        let mut fields = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, OrderedJson>()? {
            fields.push((k, v));
        }
        Ok(OrderedJson::Object(fields))
    }
}

impl<'de> Deserialize<'de> for OrderedJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<OrderedJson, D::Error> {
        d.deserialize_any(OrderedVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_their_order_and_come_back_in_it() {
        let text =
            r#"{"z": 1, "a": {"run": "PASS", "fix": "FAIL"}, "m": [true, null, -2, 0.5, "é"]}"#;
        let o: OrderedJson = serde_json::from_str(text).unwrap();
        assert_eq!(o.keys(), ["z", "a", "m"]);
        assert_eq!(
            serde_json::to_string(&o).unwrap(),
            text.replace(", ", ",").replace(": ", ":")
        );
        let v = o.into_value();
        assert_eq!(v, serde_json::from_str::<Value>(text).unwrap());
        // A key given twice: the last value, as serde_json reads it.
        let o: OrderedJson = serde_json::from_str(r#"{"a": 1, "a": 2}"#).unwrap();
        assert_eq!(o.into_value()["a"], 2);
    }
}
