//! JSON rendered the way Python's `json.dumps(value, sort_keys=True)` does
//! (`", "` and `": "` separators, non-ASCII escaped, `repr` floats), so a
//! delegated task reads exactly as the Python Chimera renders it.

use serde_json::Value;
use std::fmt::Write;

/// Renders `value` like `json.dumps(value, sort_keys=True)`.
#[cfg(test)]
fn dumps(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => {
                let _ = write!(out, "{i}");
            }
            (None, Some(u), _) => {
                let _ = write!(out, "{u}");
            }
            (None, None, Some(f)) => out.push_str(&float_repr(f)),
            _ => out.push_str(&n.to_string()),
        },
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => write_object_except(out, map, &[]),
    }
}

/// Renders the entries of `map` whose keys are not in `skip`, as
/// `json.dumps` renders a dict, keys sorted (by code point, as Python does).
pub(crate) fn write_object_except(
    out: &mut String,
    map: &serde_json::Map<String, Value>,
    skip: &[&str],
) {
    let mut entries: Vec<(&String, &Value)> = map
        .iter()
        .filter(|(key, _)| !skip.contains(&key.as_str()))
        .collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push('{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_string(out, key);
        out.push_str(": ");
        write_value(out, value);
    }
    out.push('}');
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's `repr(float)`: shortest round-trip digits, positional for
/// exponents in [-4, 16), scientific (`1e+16`, `1.5e-07`) otherwise.
fn float_repr(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let sci = format!("{f:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..16).contains(&exponent) {
        let positional = format!("{f}");
        if positional.contains('.') {
            positional
        } else {
            format!("{positional}.0")
        }
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_render_like_python_json_dumps_with_sorted_keys() {
        assert_eq!(
            dumps(&json!({"query": "bean varieties"})),
            r#"{"query": "bean varieties"}"#
        );
        assert_eq!(
            dumps(&json!({"b": [1, 2.5, true, null], "a": {"z": 1, "y": "é"}})),
            r#"{"a": {"y": "\u00e9", "z": 1}, "b": [1, 2.5, true, null]}"#
        );
    }

    #[test]
    fn floats_follow_python_repr() {
        for (value, text) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1.5e-7, "1.5e-07"),
            (0.0001, "0.0001"),
            (-2.5, "-2.5"),
        ] {
            assert_eq!(float_repr(value), text);
        }
    }

    #[test]
    fn astral_characters_become_surrogate_pairs() {
        assert_eq!(dumps(&json!("🫘")), r#""\ud83e\uded8""#);
    }
}
