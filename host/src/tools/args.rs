//! Argument extraction shared by the tools: every failure is a one-line
//! message naming the argument and the type it should have. Also the
//! reading of an opened file as text, which the editing tools share.

use serde_json::Value;
use std::io::Read;

/// The field `key` of the argument object; `None` when absent or null.
fn field<'a>(args: &'a Value, key: &str) -> Result<Option<&'a Value>, String> {
    match args {
        Value::Object(map) => Ok(map.get(key).filter(|v| !v.is_null())),
        Value::Null => Ok(None),
        other => Err(format!(
            "arguments must be a JSON object, got {}",
            kind(other)
        )),
    }
}

/// A JSON value's type name, for messages.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The required string argument `key`.
pub(crate) fn required_str<'a>(args: &'a Value, key: &str) -> Result<&'a str, String> {
    match field(args, key)? {
        Some(Value::String(text)) => Ok(text),
        Some(other) => Err(format!(
            "argument `{key}` must be a string, got {}",
            kind(other)
        )),
        None => Err(format!("missing required argument `{key}` (a string)")),
    }
}

/// The optional non-negative integer argument `key` (an integral float such
/// as `2.0` is accepted).
pub(crate) fn optional_u64(args: &Value, key: &str) -> Result<Option<u64>, String> {
    let Some(value) = field(args, key)? else {
        return Ok(None);
    };
    let number = match value {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u64::MAX as f64)
                .map(|f| f as u64)
        }),
        _ => None,
    };
    number.map(Some).ok_or_else(|| {
        format!(
            "argument `{key}` must be a non-negative integer, got {}",
            value
        )
    })
}

/// The optional boolean argument `key`.
pub(crate) fn optional_bool(args: &Value, key: &str) -> Result<Option<bool>, String> {
    match field(args, key)? {
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(format!(
            "argument `{key}` must be a boolean, got {}",
            kind(other)
        )),
        None => Ok(None),
    }
}

/// The required array argument `key`.
pub(crate) fn required_array<'a>(args: &'a Value, key: &str) -> Result<&'a [Value], String> {
    match field(args, key)? {
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(format!(
            "argument `{key}` must be an array, got {}",
            kind(other)
        )),
        None => Err(format!("missing required argument `{key}` (an array)")),
    }
}

/// Reads an opened workspace file (see `Workspace::open`) to its end as
/// UTF-8 text; `path` is the caller's spelling, for messages.
pub(crate) fn read_text(path: &str, file: &mut impl Read) -> Result<String, String> {
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {path}: {e}"))?;
    String::from_utf8(bytes).map_err(|_| not_utf8(path))
}

/// The error for a file whose content is not UTF-8 text.
pub(crate) fn not_utf8(path: &str) -> String {
    format!("{path} is not valid UTF-8 text (binary file?); only text files can be read or edited")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn extracts_and_reports() {
        let args = json!({"s": "x", "n": 3, "f": 2.0, "b": true, "a": [1], "z": null});
        assert_eq!(required_str(&args, "s").unwrap(), "x");
        assert!(required_str(&args, "n")
            .unwrap_err()
            .contains("must be a string"));
        assert!(required_str(&args, "q").unwrap_err().contains("missing"));
        assert_eq!(optional_u64(&args, "n").unwrap(), Some(3));
        assert_eq!(optional_u64(&args, "f").unwrap(), Some(2));
        assert_eq!(optional_u64(&args, "z").unwrap(), None);
        assert!(optional_u64(&args, "s").is_err());
        assert!(optional_u64(&json!({"n": -1}), "n").is_err());
        assert_eq!(optional_bool(&args, "b").unwrap(), Some(true));
        assert!(optional_bool(&args, "s").is_err());
        assert_eq!(required_array(&args, "a").unwrap().len(), 1);
        assert!(required_str(&json!([1]), "s")
            .unwrap_err()
            .contains("JSON object"));
    }
}
