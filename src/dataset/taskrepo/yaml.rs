//! The YAML of a task repository (`sweb.yaml`, `task.yaml`) as JSON values, both ways.
//!
//! Reading goes through yaml-rust2 (YAML 1.2's core schema). swebench writes these files with
//! PyYAML, which quotes every string that would read back as anything else, so a file it wrote
//! reads the same under either schema.
//!
//! Writing is what `export-dataset --format task-repo` needs for a task it did not import as
//! files: keys sorted (as swebench's `dump_yaml`), block style, and every string
//! double-quoted with YAML's escapes, so that PyYAML's `safe_load` (YAML 1.1: `no`, `1.0`,
//! `2024-01-01` are not strings there) gives back exactly the JSON value written.

use std::fmt::Write as _;

use serde_json::{Map, Value};
use yaml_rust2::{Yaml, YamlLoader};

/// Why a YAML text is not the JSON value a task repository needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum YamlError {
    #[error("not valid YAML: {0}")]
    Syntax(String),
    #[error("it is empty")]
    Empty,
    #[error("it holds {0} documents, not one")]
    Documents(usize),
    #[error("at `{at}`: {what}")]
    Value { at: String, what: String },
}

/// The one document of `text`, as JSON.
pub fn parse(text: &str) -> Result<Value, YamlError> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| YamlError::Syntax(e.to_string()))?;
    match docs.as_slice() {
        [] => Err(YamlError::Empty),
        [one] => to_json(one, "."),
        many => Err(YamlError::Documents(many.len())),
    }
}

fn to_json(y: &Yaml, at: &str) -> Result<Value, YamlError> {
    let fail = |what: String| YamlError::Value {
        at: at.to_string(),
        what,
    };
    Ok(match y {
        Yaml::Null => Value::Null,
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Real(text) => {
            let n = y
                .as_f64()
                .and_then(serde_json::Number::from_f64)
                .ok_or_else(|| fail(format!("`{text}` is not a finite number")))?;
            Value::Number(n)
        }
        Yaml::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| to_json(item, &format!("{at}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Hash(h) => {
            let mut m = Map::new();
            for (k, v) in h {
                let key = match k {
                    Yaml::String(s) => s.clone(),
                    Yaml::Integer(i) => i.to_string(),
                    other => return Err(fail(format!("a key is not text ({other:?})"))),
                };
                let path = if at == "." {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                let value = to_json(v, &path)?;
                if m.insert(key.clone(), value).is_some() {
                    return Err(fail(format!("key `{key}` appears twice")));
                }
            }
            Value::Object(m)
        }
        Yaml::Alias(_) | Yaml::BadValue => return Err(fail("an alias swe-ark cannot read".into())),
    })
}

/// `map` as a YAML document: keys sorted, nested values in block style, strings
/// double-quoted. PyYAML's `safe_load` of it gives `map` back.
pub fn emit(map: &Map<String, Value>) -> String {
    let mut out = String::new();
    emit_map(map, 0, &mut out);
    out
}

fn emit_map(map: &Map<String, Value>, indent: usize, out: &mut String) {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    for k in keys {
        let pad = " ".repeat(indent);
        let _ = write!(out, "{pad}{}:", key(k));
        emit_value(&map[k.as_str()], indent, out);
    }
}

/// A value after `key:` or `- `: a scalar or an empty collection on the same line, else a
/// block below.
fn emit_value(v: &Value, indent: usize, out: &mut String) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            emit_map(m, indent + 2, out);
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            for item in items {
                let _ = write!(out, "{}-", " ".repeat(indent));
                emit_value(item, indent + 2, out);
            }
        }
        scalar => {
            out.push(' ');
            out.push_str(&scalar_text(scalar));
            out.push('\n');
        }
    }
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) if n.is_f64() => float_text(n.as_f64().unwrap_or_default()),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quoted(s),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

/// A float as YAML 1.1 reads one: a `.` in the mantissa and a sign in the exponent
/// (`1.0e+20`; PyYAML reads `1e20` as a string).
fn float_text(f: f64) -> String {
    let text = serde_json::Number::from_f64(f).map_or_else(|| "0.0".into(), |n| n.to_string());
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((m, e)) => (m.to_string(), Some(e.to_string())),
        None => (text, None),
    };
    let mantissa = if mantissa.contains('.') {
        mantissa
    } else {
        format!("{mantissa}.0")
    };
    match exponent {
        Some(e) if e.starts_with(['+', '-']) => format!("{mantissa}e{e}"),
        Some(e) => format!("{mantissa}e+{e}"),
        None => mantissa,
    }
}

/// A key plain when it is a word YAML reads as a string either way, else double-quoted.
fn key(k: &str) -> String {
    let word = k
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let special = ["null", "true", "false", "yes", "no", "on", "off", "y", "n"]
        .iter()
        .any(|s| s.eq_ignore_ascii_case(k));
    if word && !special {
        k.to_string()
    } else {
        quoted(k)
    }
}

/// `s` as a YAML double-quoted scalar: what PyYAML would not take as is (controls, `"`,
/// `\`, and the characters its reader refuses) escaped.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            // PyYAML's printable set: TAB, LF, CR, 0x20-0x7E, NEL, 0xA0-0xD7FF,
            // 0xE000-0xFFFD, and beyond the BMP. (A BOM is refused inside a document.)
            ' '..='~' => out.push(c),
            '\u{85}' | '\u{A0}'..='\u{D7FF}' | '\u{E000}'..='\u{FEFE}' => out.push(c),
            '\u{FF00}'..='\u{FFFD}' => out.push(c),
            c if (c as u32) > 0xFFFF => out.push(c),
            c if (c as u32) <= 0xFF => {
                let _ = write!(out, "\\x{:02X}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_is_written_reads_back_the_same() {
        let v = json!({
            "version": "0.12", "created_at": "2024-01-01T10:00:00Z", "no": "yes",
            "difficulty": "<15 min", "weird key": "a\"b\\c\u{7f}\u{feff}\t\n",
            "datasets": ["SWE-bench/SWE-bench_Lite", "x"], "empty": [], "n": 3, "f": 1e20,
            "nested": {"test_patch": [{"path": "a/b.png", "url": ""}], "patch": []},
            "nothing": null, "t": true,
        });
        let text = emit(v.as_object().unwrap());
        assert!(
            text.starts_with("created_at: \"2024-01-01T10:00:00Z\"\n"),
            "{text}"
        );
        assert!(text.contains("\"no\": \"yes\""), "{text}");
        assert!(text.contains("f: 1.0e+20"), "{text}");
        assert_eq!(parse(&text).unwrap(), v, "{text}");
    }

    #[test]
    fn bad_yaml_says_where() {
        assert!(matches!(parse("a: [1,"), Err(YamlError::Syntax(_))));
        assert_eq!(parse(""), Err(YamlError::Empty));
        let e = parse("a:\n  b: .inf\n").unwrap_err().to_string();
        assert!(e.contains("a.b") && e.contains(".inf"), "{e}");
    }
}
