//! Tool-call arguments, kept as the raw JSON text the model sent.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use std::fmt;

/// A tool call's arguments: the model's JSON text, verbatim. Parsing happens
/// on demand ([`Arguments::parse`]); crossing into a pack costs nothing.
#[derive(Clone)]
pub struct Arguments(Box<RawValue>);

impl Arguments {
    /// Arguments from JSON text; refuses text that is not valid JSON.
    ///
    /// # Errors
    ///
    /// The [`serde_json::Error`] when `text` is not valid JSON.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        RawValue::from_string(text.to_owned()).map(Arguments)
    }

    /// Arguments serialised from a value.
    #[must_use]
    pub fn from_value(value: &serde_json::Value) -> Self {
        // Serialising a `Value` cannot fail.
        Arguments(serde_json::value::to_raw_value(value).unwrap_or_else(|_| Self::empty_raw()))
    }

    /// `{}`.
    #[must_use]
    pub fn empty() -> Self {
        Arguments(Self::empty_raw())
    }

    fn empty_raw() -> Box<RawValue> {
        RawValue::from_string("{}".to_owned()).unwrap_or_else(|_| unreachable!("`{{}}` is JSON"))
    }

    /// The JSON text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The arguments parsed; invalid JSON cannot occur (checked on the way in).
    #[must_use]
    pub fn parse(&self) -> serde_json::Value {
        serde_json::from_str(self.as_str()).unwrap_or(serde_json::Value::Null)
    }

    /// The string argument `key`, if present.
    #[must_use]
    pub fn get_str(&self, key: &str) -> Option<String> {
        match self.parse() {
            serde_json::Value::Object(mut map) => match map.remove(key) {
                Some(serde_json::Value::String(text)) => Some(text),
                _ => None,
            },
            _ => None,
        }
    }
}

impl Default for Arguments {
    fn default() -> Self {
        Arguments::empty()
    }
}

impl PartialEq for Arguments {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl fmt::Debug for Arguments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Arguments {
    /// Serialises the text as it is, unless it spans lines: then with the
    /// whitespace between tokens removed (key order and number spelling
    /// kept), so a JSON-lines transcript stays one object per line.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = self.as_str();
        if !text.contains(['\n', '\r']) {
            return self.0.serialize(serializer);
        }
        match RawValue::from_string(minify(text)) {
            Ok(compact) => compact.serialize(serializer),
            Err(_) => self.0.serialize(serializer),
        }
    }
}

/// Drops whitespace outside JSON strings.
fn minify(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_ascii_whitespace() {
            out.push(c);
        }
    }
    out
}

impl<'de> Deserialize<'de> for Arguments {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(Arguments)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_line_arguments_serialise_on_one_line_with_their_strings_intact() {
        let arguments =
            Arguments::from_json("{\n  \"b\": \"x  y\\\" \",\n  \"a\": [1, 2.50]\n}").unwrap();
        assert_eq!(
            serde_json::to_string(&arguments).unwrap(),
            r#"{"b":"x  y\" ","a":[1,2.50]}"#
        );
        let single = Arguments::from_json(r#"{"a": 1}"#).unwrap();
        assert_eq!(serde_json::to_string(&single).unwrap(), r#"{"a": 1}"#);
    }
}
