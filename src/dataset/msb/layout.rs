//! A row's layout: what its values do not say but its bytes do. Multi-SWE-bench writes its test
//! maps in the order of a Python set (its string hashes are salted per process), so that order
//! is kept; every other object is written in the order of Multi-SWE-bench's dataclasses, and
//! only an object that differs from it is recorded.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

use super::{RESULTS, TEST_MAPS};
use crate::dataset::ordered::OrderedJson;

/// Multi-SWE-bench's own field order: its `Dataset` dataclass (the fields of `PullRequest`,
/// then the tests), then `instance_id`, which the published rows add after them.
const ROW_ORDER: [&str; 22] = [
    "org",
    "repo",
    "number",
    "state",
    "title",
    "body",
    "base",
    "resolved_issues",
    "fix_patch",
    "test_patch",
    "tag",
    "number_interval",
    "lang",
    "fixed_tests",
    "p2p_tests",
    "f2p_tests",
    "s2p_tests",
    "n2p_tests",
    "run_result",
    "test_patch_result",
    "fix_patch_result",
    "instance_id",
];

/// What an object is in a row, for the order its keys have unless recorded otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Row,
    Base,
    Issues,
    Issue,
    TestMap,
    Test,
    Result,
    Other,
}

impl Shape {
    /// The dataclass's field order; keys not in it follow, sorted.
    fn schema(self) -> &'static [&'static str] {
        match self {
            Shape::Row => &ROW_ORDER,
            Shape::Base => &["label", "ref", "sha"],
            Shape::Issue => &["number", "title", "body"],
            Shape::Test => &["run", "test", "fix"],
            Shape::Result => &[
                "passed_count",
                "failed_count",
                "skipped_count",
                "passed_tests",
                "failed_tests",
                "skipped_tests",
            ],
            Shape::Issues | Shape::TestMap | Shape::Other => &[],
        }
    }

    fn child(self, key: &str) -> Shape {
        match self {
            Shape::Row if key == "base" => Shape::Base,
            Shape::Row if key == "resolved_issues" => Shape::Issues,
            Shape::Row if TEST_MAPS.contains(&key) => Shape::TestMap,
            Shape::Row if RESULTS.contains(&key) => Shape::Result,
            Shape::Issues => Shape::Issue,
            Shape::TestMap => Shape::Test,
            _ => Shape::Other,
        }
    }
}

/// `keys` (each once) in `shape`'s order: its schema's keys first, then the others sorted.
fn default_order<'a>(shape: Shape, keys: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut keys: Vec<&'a str> = keys.collect();
    keys.sort_unstable();
    keys.dedup();
    let schema = shape.schema();
    let mut out: Vec<&'a str> = schema
        .iter()
        .filter_map(|s| keys.binary_search(s).ok().map(|i| keys[i]))
        .collect();
    out.extend(keys.iter().filter(|k| !schema.contains(k)));
    out
}

/// `key` as one step of a JSON Pointer (RFC 6901): test names hold `/`.
fn push_step(path: &mut String, key: &str) {
    path.push('/');
    path.push_str(&key.replace('~', "~0").replace('/', "~1"));
}

/// How a row was written, beyond its values.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Layout {
    /// Non-ASCII written as `\uXXXX` escapes (Python's `ensure_ascii`, json.dumps' default).
    pub(super) ascii: bool,
    /// The row's keys in order: which optional fields it had, and where.
    pub(super) keys: Vec<String>,
    /// By JSON Pointer, each object whose keys were not in their default order: the k-th key
    /// written is the `orders[path][k]`-th of the default order.
    orders: BTreeMap<String, Vec<usize>>,
}

impl Layout {
    /// The layout of `row`, as read; `ascii` when its text had no byte beyond ASCII.
    pub(super) fn capture(row: &OrderedJson, ascii: bool) -> Layout {
        let mut keys: Vec<String> = Vec::new();
        for k in row.keys() {
            if !keys.iter().any(|x| x == k) {
                keys.push(k.to_string());
            }
        }
        let mut orders = BTreeMap::new();
        if let OrderedJson::Object(fields) = row {
            for (k, v) in fields {
                let mut path = String::new();
                push_step(&mut path, k);
                capture_in(v, Shape::Row.child(k), &mut path, &mut orders);
            }
        }
        Layout {
            ascii,
            keys,
            orders,
        }
    }

    pub(super) fn to_value(&self) -> Value {
        json!({"ascii": self.ascii, "keys": self.keys, "orders": self.orders})
    }

    /// The layout stored by [`Layout::to_value`]; none when absent or not of that form (the
    /// row is then written in Multi-SWE-bench's own order).
    pub(super) fn from_value(v: &Value) -> Option<Layout> {
        serde_json::from_value::<StoredLayout>(v.clone())
            .ok()
            .map(|s| Layout {
                ascii: s.ascii,
                keys: s.keys,
                orders: s.orders,
            })
    }
}

#[derive(serde::Deserialize)]
struct StoredLayout {
    ascii: bool,
    keys: Vec<String>,
    orders: BTreeMap<String, Vec<usize>>,
}

fn capture_in(
    v: &OrderedJson,
    shape: Shape,
    path: &mut String,
    orders: &mut BTreeMap<String, Vec<usize>>,
) {
    let len = path.len();
    match v {
        OrderedJson::Object(fields) => {
            let actual = v.keys();
            let default = default_order(shape, actual.iter().copied());
            // A key given twice is read once: such an object cannot come back as it was.
            if default.len() == actual.len() && default != actual {
                let at: HashMap<&str, usize> =
                    default.iter().enumerate().map(|(i, k)| (*k, i)).collect();
                let perm = actual.iter().filter_map(|k| at.get(k).copied()).collect();
                orders.insert(path.clone(), perm);
            }
            for (k, child) in fields {
                push_step(path, k);
                capture_in(child, shape.child(k), path, orders);
                path.truncate(len);
            }
        }
        OrderedJson::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                push_step(path, &i.to_string());
                capture_in(item, shape.child(""), path, orders);
                path.truncate(len);
            }
        }
        OrderedJson::Scalar(_) => {}
    }
}

/// `row` (a whole row's fields) in the order `layout` recorded, or Multi-SWE-bench's own.
pub(super) fn arrange(mut row: Map<String, Value>, layout: Option<&Layout>) -> OrderedJson {
    let empty = BTreeMap::new();
    let orders = layout.map_or(&empty, |l| &l.orders);
    let mut order: Vec<String> = layout
        .map(|l| {
            l.keys
                .iter()
                .filter(|k| row.contains_key(*k))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let rest: Vec<String> = default_order(
        Shape::Row,
        row.keys()
            .map(String::as_str)
            .filter(|k| !order.iter().any(|o| o == k)),
    )
    .into_iter()
    .map(str::to_string)
    .collect();
    order.extend(rest);
    let fields = order
        .into_iter()
        .filter_map(|k| {
            let v = row.remove(&k)?;
            let mut path = String::new();
            push_step(&mut path, &k);
            let shape = Shape::Row.child(&k);
            Some((k, arrange_in(v, shape, &mut path, orders)))
        })
        .collect();
    OrderedJson::Object(fields)
}

fn arrange_in(
    v: Value,
    shape: Shape,
    path: &mut String,
    orders: &BTreeMap<String, Vec<usize>>,
) -> OrderedJson {
    let len = path.len();
    match v {
        Value::Object(mut map) => {
            let default: Vec<String> = default_order(shape, map.keys().map(String::as_str))
                .into_iter()
                .map(str::to_string)
                .collect();
            let order: Vec<String> = match orders.get(path.as_str()) {
                Some(perm) if is_permutation(perm, default.len()) => {
                    perm.iter().map(|i| default[*i].clone()).collect()
                }
                _ => default,
            };
            let mut fields = Vec::with_capacity(order.len());
            for k in order {
                if let Some(child) = map.remove(&k) {
                    push_step(path, &k);
                    fields.push((k.clone(), arrange_in(child, shape.child(&k), path, orders)));
                    path.truncate(len);
                }
            }
            OrderedJson::Object(fields)
        }
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.into_iter().enumerate() {
                push_step(path, &i.to_string());
                out.push(arrange_in(item, shape.child(""), path, orders));
                path.truncate(len);
            }
            OrderedJson::Array(out)
        }
        scalar => OrderedJson::Scalar(scalar),
    }
}

/// Whether `perm` holds each of 0..n once: a stored order that no longer fits its object (a
/// field added or removed since) is not used.
fn is_permutation(perm: &[usize], n: usize) -> bool {
    let mut seen = vec![false; n];
    perm.len() == n
        && perm
            .iter()
            .all(|i| *i < n && !std::mem::replace(&mut seen[*i], true))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) -> String {
        let o: OrderedJson = serde_json::from_str(text).unwrap();
        let layout = Layout::capture(&o, true);
        let stored = Layout::from_value(&layout.to_value()).unwrap();
        assert_eq!(stored, layout);
        let Value::Object(row) = o.into_value() else {
            panic!("not an object")
        };
        serde_json::to_string(&arrange(row, Some(&stored))).unwrap()
    }

    #[test]
    fn only_objects_out_of_their_default_order_are_recorded() {
        let text = r#"{"org":"o","zeta":1,"f2p_tests":{"b/x":{"run":"NONE","test":"FAIL","fix":"PASS"},"a~y":{"run":"NONE","test":"FAIL","fix":"PASS"}},"base":{"label":"l","ref":"r","sha":"s"},"other":{"b":1,"a":2}}"#;
        let o: OrderedJson = serde_json::from_str(text).unwrap();
        let layout = Layout::capture(&o, true);
        assert_eq!(layout.keys, ["org", "zeta", "f2p_tests", "base", "other"]);
        let recorded: Vec<&str> = layout.orders.keys().map(String::as_str).collect();
        // The test map (a set's order) and the object of no schema; not `base`, nor each test.
        assert_eq!(recorded, ["/f2p_tests", "/other"]);
        assert_eq!(layout.orders["/f2p_tests"], [1, 0]);
        assert_eq!(round_trip(text), text);
    }

    #[test]
    fn without_a_layout_a_row_is_in_multi_swe_bench_order() {
        let o: OrderedJson = serde_json::from_str(
            r#"{"language":"c","instance_id":"o__r-1","base":{"sha":"s","label":"l","ref":"r"},"org":"o"}"#,
        )
        .unwrap();
        let Value::Object(row) = o.into_value() else {
            panic!()
        };
        assert_eq!(
            serde_json::to_string(&arrange(row, None)).unwrap(),
            r#"{"org":"o","base":{"label":"l","ref":"r","sha":"s"},"instance_id":"o__r-1","language":"c"}"#
        );
    }

    #[test]
    fn an_order_that_no_longer_fits_is_not_used() {
        assert!(is_permutation(&[1, 0, 2], 3));
        assert!(!is_permutation(&[1, 1, 2], 3));
        assert!(!is_permutation(&[1, 0], 3));
        assert!(!is_permutation(&[3, 0, 1], 3));
    }
}
