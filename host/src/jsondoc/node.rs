//! The parsed tree: every value with its byte span in the source, strings
//! and numbers left as written until asked for.
//!
//! A [`Node`] does not borrow its source: every accessor that reads text
//! takes the same `src` that was parsed. Given another slice it returns
//! garbage (never panics).

use std::borrow::Cow;
use std::ops::Range;

/// A JSON value and where it is in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The value's bytes in the source: from its first byte to its last,
    /// no surrounding whitespace (a string's quotes included).
    pub span: Range<usize>,
    /// What the value is.
    pub kind: Kind,
}

/// What a [`Node`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number; its text, as written, is the node's span.
    Number,
    /// A string; the node's span is the literal, quotes included.
    String {
        /// Whether the literal holds a backslash escape (if not, its text
        /// is the bytes between the quotes, borrowed as they are).
        escaped: bool,
    },
    /// An array's elements, in order.
    Array(Vec<Node>),
    /// An object's members, in document order (keys are unique: the
    /// parser refuses a repeated one).
    Object(Vec<(Key, Node)>),
}

/// An object member's key: its span, and its text decoded when the
/// literal holds an escape (otherwise the text is the source's bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    /// The key's string literal in the source, quotes included.
    pub span: Range<usize>,
    /// The decoded text, kept only when the literal holds an escape.
    decoded: Option<Box<str>>,
}

impl Key {
    pub(super) fn new(span: Range<usize>, decoded: Option<Box<str>>) -> Self {
        Self { span, decoded }
    }

    /// The key's text: borrowed from `src`, or the decoded text when the
    /// literal holds an escape.
    #[must_use]
    pub fn text<'a>(&'a self, src: &'a [u8]) -> Cow<'a, str> {
        match &self.decoded {
            Some(text) => Cow::Borrowed(text),
            None => utf8(self.bytes(src)),
        }
    }

    /// Whether the key's text is `name` (no allocation, no decoding).
    #[must_use]
    pub fn is(&self, src: &[u8], name: &str) -> bool {
        match &self.decoded {
            Some(text) => text.as_bytes() == name.as_bytes(),
            // The name's bytes between two quotes: a literal of another
            // length is another key, without a look at its bytes. (Its
            // length by subtraction: `Range::len` goes through the
            // iterator's size hint, which made a member's look 6 % dearer.)
            None => {
                self.span.end.wrapping_sub(self.span.start) == name.len() + 2
                    && inner(src, &self.span) == name.as_bytes()
            }
        }
    }

    /// Whether the literal holds a backslash escape.
    #[must_use]
    pub fn has_escapes(&self) -> bool {
        self.decoded.is_some()
    }

    /// The key's text as UTF-8 bytes.
    pub(super) fn bytes<'a>(&'a self, src: &'a [u8]) -> &'a [u8] {
        match &self.decoded {
            Some(text) => text.as_bytes(),
            None => inner(src, &self.span),
        }
    }
}

impl Node {
    /// The value's bytes in `src`, exactly as written.
    #[must_use]
    pub fn raw<'a>(&self, src: &'a [u8]) -> &'a [u8] {
        src.get(self.span.clone()).unwrap_or_default()
    }

    /// The kind's name, for error lines: `null`, `boolean`, `number`,
    /// `string`, `array` or `object`.
    #[must_use]
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            Kind::Null => "null",
            Kind::Bool(_) => "boolean",
            Kind::Number => "number",
            Kind::String { .. } => "string",
            Kind::Array(_) => "array",
            Kind::Object(_) => "object",
        }
    }

    /// The member named `key` of an object (`None` for any other kind or
    /// a missing key). Compares bytes: no allocation.
    #[must_use]
    pub fn get(&self, src: &[u8], key: &str) -> Option<&Node> {
        self.as_object()?
            .iter()
            .find(|(k, _)| k.is(src, key))
            .map(|(_, node)| node)
    }

    /// The element at `index` of an array.
    #[must_use]
    pub fn index(&self, index: usize) -> Option<&Node> {
        self.as_array()?.get(index)
    }

    /// An array's elements.
    #[must_use]
    pub fn as_array(&self) -> Option<&[Node]> {
        match &self.kind {
            Kind::Array(items) => Some(items),
            _ => None,
        }
    }

    /// An object's members, in document order.
    #[must_use]
    pub fn as_object(&self) -> Option<&[(Key, Node)]> {
        match &self.kind {
            Kind::Object(members) => Some(members),
            _ => None,
        }
    }

    /// A boolean's value.
    #[must_use]
    pub fn as_bool(&self) -> Option<bool> {
        match self.kind {
            Kind::Bool(value) => Some(value),
            _ => None,
        }
    }

    /// Whether the value is `null`.
    #[must_use]
    pub fn is_null(&self) -> bool {
        matches!(self.kind, Kind::Null)
    }

    /// A number's text as written (`1.50`, `-0`, `1E+2`).
    #[must_use]
    pub fn number_text<'a>(&self, src: &'a [u8]) -> Option<&'a str> {
        match self.kind {
            Kind::Number => std::str::from_utf8(self.raw(src)).ok(),
            _ => None,
        }
    }

    /// A number written as a whole number within `u64` (digits only: no
    /// sign, fraction or exponent) as that number; `None` for anything
    /// else. What `u64`'s own parsing makes of [`number_text`](Self::number_text),
    /// without reading the text twice.
    #[must_use]
    pub fn as_u64(&self, src: &[u8]) -> Option<u64> {
        let Kind::Number = self.kind else {
            return None;
        };
        let digits = self.raw(src);
        if digits.is_empty() {
            return None;
        }
        digits.iter().try_fold(0u64, |n, &b| {
            let digit = b.wrapping_sub(b'0');
            if digit > 9 {
                return None;
            }
            n.checked_mul(10)?.checked_add(u64::from(digit))
        })
    }

    /// A string's text: borrowed from `src` when the literal holds no
    /// escape, decoded otherwise. A lone surrogate escape (accepted only
    /// under [`Surrogates::Keep`](super::Surrogates::Keep)) decodes to
    /// U+FFFD; the source's bytes are unchanged.
    #[must_use]
    pub fn text<'a>(&self, src: &'a [u8]) -> Option<Cow<'a, str>> {
        match self.kind {
            Kind::String { escaped: false } => Some(utf8(inner(src, &self.span))),
            Kind::String { escaped: true } => Some(Cow::Owned(decode(inner(src, &self.span)))),
            _ => None,
        }
    }

    /// [`text`](Self::text) in a source that is text (the `str` that was
    /// parsed, as [`parse_str`](super::parse_str) takes it): a literal
    /// with no escape is borrowed as it is, its bytes not checked for
    /// UTF-8 again. Given another source it returns garbage or an empty
    /// text (never panics).
    #[must_use]
    pub fn text_in<'a>(&self, src: &'a str) -> Option<Cow<'a, str>> {
        match self.kind {
            Kind::String { escaped: false } => Some(Cow::Borrowed(
                src.get(self.span.start + 1..self.span.end.saturating_sub(1))
                    .unwrap_or_default(),
            )),
            Kind::String { escaped: true } => self.text(src.as_bytes()),
            _ => None,
        }
    }

    /// The subtree as a `serde_json` value: what `serde_json` makes of
    /// [`raw`](Self::raw), except where `serde_json` would refuse it: the
    /// value is built from the tree (so `serde_json`'s own nesting limit
    /// of 127 does not apply), a lone surrogate escape
    /// ([`Surrogates::Keep`](super::Surrogates::Keep)) becomes U+FFFD, and
    /// a number too large for a float
    /// ([`Numbers::Keep`](super::Numbers::Keep)) becomes `f64::MAX` or
    /// `-f64::MAX`, the nearest `serde_json` holds.
    #[must_use]
    pub fn to_value(&self, src: &[u8]) -> serde_json::Value {
        use serde_json::Value;
        match &self.kind {
            Kind::Null => Value::Null,
            Kind::Bool(value) => Value::Bool(*value),
            Kind::Number => {
                let text = self.number_text(src).unwrap_or_default();
                text.parse::<serde_json::Number>()
                    .ok()
                    .or_else(|| {
                        let max = if text.starts_with('-') {
                            -f64::MAX
                        } else {
                            f64::MAX
                        };
                        serde_json::Number::from_f64(max)
                    })
                    .map_or(Value::Null, Value::Number)
            }
            Kind::String { .. } => Value::String(self.text(src).unwrap_or_default().into_owned()),
            Kind::Array(items) => Value::Array(items.iter().map(|n| n.to_value(src)).collect()),
            Kind::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|(k, n)| (k.text(src).into_owned(), n.to_value(src)))
                    .collect(),
            ),
        }
    }
}

/// The bytes between a string literal's quotes.
fn inner<'a>(src: &'a [u8], span: &Range<usize>) -> &'a [u8] {
    src.get(span.start + 1..span.end.saturating_sub(1))
        .unwrap_or_default()
}

/// `bytes` as text: borrowed when they are UTF-8 (always, from the
/// source that was parsed: checked by `str::from_utf8`, a word at a time
/// over ASCII), read lossily otherwise (a byte at a time; a stray byte
/// becomes U+FFFD).
#[must_use]
pub fn utf8(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// The text of a string literal's content (the bytes between its
/// quotes), escapes decoded. A lone surrogate escape, or anything else
/// malformed (only possible with a `src` other than the one parsed),
/// becomes U+FFFD.
pub(super) fn decode(content: &[u8]) -> String {
    let mut out = Vec::with_capacity(content.len());
    let mut i = 0;
    while i < content.len() {
        let Some(offset) = content[i..].iter().position(|&b| b == b'\\') else {
            out.extend_from_slice(&content[i..]);
            break;
        };
        out.extend_from_slice(&content[i..i + offset]);
        i += offset + 1;
        let Some(&escape) = content.get(i) else {
            push_char(&mut out, char::REPLACEMENT_CHARACTER);
            break;
        };
        i += 1;
        let simple = match escape {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let (c, used) = unicode_escape(&content[i..]);
                push_char(&mut out, c);
                i += used;
                continue;
            }
            _ => {
                push_char(&mut out, char::REPLACEMENT_CHARACTER);
                continue;
            }
        };
        out.push(simple);
    }
    String::from_utf8(out)
        .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned())
}

/// A `\u` escape's character, given the bytes after `\u`, and how many
/// of them it used: four, or ten for a surrogate pair.
fn unicode_escape(rest: &[u8]) -> (char, usize) {
    let Some(unit) = hex4(rest) else {
        return (char::REPLACEMENT_CHARACTER, 0);
    };
    match unit {
        0xD800..=0xDBFF => {
            let low = match rest.get(4..6) {
                Some(b"\\u") => hex4(&rest[6..]).filter(|u| (0xDC00..=0xDFFF).contains(u)),
                _ => None,
            };
            match low {
                Some(low) => {
                    let code =
                        0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00);
                    (
                        char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER),
                        10,
                    )
                }
                None => (char::REPLACEMENT_CHARACTER, 4),
            }
        }
        _ => (
            char::from_u32(u32::from(unit)).unwrap_or(char::REPLACEMENT_CHARACTER),
            4,
        ),
    }
}

/// Four hexadecimal digits at the start of `bytes`, as a code unit.
pub(super) fn hex4(bytes: &[u8]) -> Option<u16> {
    let digits = bytes.get(..4)?;
    let mut unit = 0u16;
    for &b in digits {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return None,
        };
        unit = unit << 4 | u16::from(digit);
    }
    Some(unit)
}

fn push_char(out: &mut Vec<u8>, c: char) {
    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
}
