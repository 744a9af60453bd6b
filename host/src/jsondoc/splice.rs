//! Edits on one source: replacements at exact spans, everything else
//! kept byte for byte; and the pieces to write a replacement with.

use std::fmt::Write as _;
use std::ops::Range;

/// Edits on one source, each a span and the bytes to put in its place.
///
/// [`render`](Self::render) applies them in the order of their spans
/// (insertions at one offset in the order they were made) and copies
/// every byte outside them unchanged. Edits may be added in any order;
/// two that overlap are an error, never merged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Splice {
    edits: Vec<(Range<usize>, Vec<u8>)>,
}

/// Why a [`Splice`] could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpliceError {
    /// Two edits cover some of the same bytes.
    #[error("edits overlap: bytes {}..{} and {}..{}", first.start, first.end, second.start, second.end)]
    Overlap {
        /// The one that starts first.
        first: Range<usize>,
        /// The other.
        second: Range<usize>,
    },
    /// An edit's span is reversed or reaches past the source's end.
    #[error("edit of bytes {}..{} is outside the {len}-byte source", span.start, span.end)]
    OutOfBounds {
        /// The span.
        span: Range<usize>,
        /// The source's length.
        len: usize,
    },
}

impl Splice {
    /// No edits.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts `bytes` in place of the source's `span` (an empty span
    /// inserts).
    pub fn replace(&mut self, span: Range<usize>, bytes: impl Into<Vec<u8>>) {
        self.edits.push((span, bytes.into()));
    }

    /// Takes `other`'s edits (made on the same source) as well.
    pub fn absorb(&mut self, other: Splice) {
        self.edits.extend(other.edits);
    }

    /// Whether there are no edits (rendering gives the source unchanged).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.edits.is_empty()
    }

    /// How many edits there are.
    #[must_use]
    pub fn len(&self) -> usize {
        self.edits.len()
    }

    /// The source with the edits applied.
    ///
    /// # Errors
    ///
    /// [`SpliceError::OutOfBounds`] for a span outside `src`,
    /// [`SpliceError::Overlap`] for two edits that overlap.
    pub fn render(&self, src: &[u8]) -> Result<Vec<u8>, SpliceError> {
        let mut order: Vec<&(Range<usize>, Vec<u8>)> = self.edits.iter().collect();
        // Stable: insertions at one offset keep the order they were made.
        order.sort_by_key(|(span, _)| (span.start, span.end));
        let mut out = Vec::with_capacity(src.len());
        let mut copied = 0;
        let mut previous: Option<&Range<usize>> = None;
        for (span, bytes) in order {
            if span.start > span.end || span.end > src.len() {
                return Err(SpliceError::OutOfBounds {
                    span: span.clone(),
                    len: src.len(),
                });
            }
            if let Some(previous) = previous.filter(|previous| previous.end > span.start) {
                return Err(SpliceError::Overlap {
                    first: previous.clone(),
                    second: span.clone(),
                });
            }
            out.extend_from_slice(&src[copied..span.start]);
            out.extend_from_slice(bytes);
            copied = span.end;
            previous = Some(span);
        }
        out.extend_from_slice(&src[copied..]);
        Ok(out)
    }
}

/// `text` as a JSON string literal, exactly as `serde_json` writes it:
/// `"` and `\` escaped, control characters as `\b \t \n \f \r` or
/// `\u00XX`, everything else (non-ASCII included) as it is.
#[must_use]
pub fn string_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    let mut plain = 0;
    for (at, byte) in text.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0c => "\\f",
            b'\r' => "\\r",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&text[plain..at]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{byte:04x}");
        } else {
            out.push_str(escape);
        }
        plain = at + 1;
    }
    out.push_str(&text[plain..]);
    out.push('"');
    out
}

/// An array of raw JSON pieces: `[a,b,...]`, each piece as it is (to
/// rebuild an array keeping the original bytes of the elements that
/// stay).
#[must_use]
pub fn array_from<P: AsRef<[u8]>>(parts: impl IntoIterator<Item = P>) -> Vec<u8> {
    let mut out = vec![b'['];
    for (i, part) in parts.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(part.as_ref());
    }
    out.push(b']');
    out
}

/// An object of keys and raw JSON values: `{"k":v,...}`, each key
/// written by [`string_literal`], each value as it is, in the order
/// given (duplicates are the caller's to avoid).
#[must_use]
pub fn object_from<K: AsRef<str>, V: AsRef<[u8]>>(
    parts: impl IntoIterator<Item = (K, V)>,
) -> Vec<u8> {
    let mut out = vec![b'{'];
    for (i, (key, value)) in parts.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(string_literal(key.as_ref()).as_bytes());
        out.push(b':');
        out.extend_from_slice(value.as_ref());
    }
    out.push(b'}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsondoc::{parse, Limits};

    const REQUEST: &[u8] = br#"{
  "model" : "gpt-x",   "temperature":0.70,
  "messages": [
    {"role":"system","content":"be brief"},
    {"role":"user", "content": [ {"type":"text","text":"call 555-0100\u0021"} ], "x-unknown": {"keep": [1e2, -0]}}
  ],
  "stream":true
}
"#;

    #[test]
    fn replacing_a_string_deep_inside_changes_only_its_bytes() {
        let root = parse(REQUEST, &Limits::default()).unwrap();
        let text = root
            .get(REQUEST, "messages")
            .and_then(|m| m.index(1))
            .and_then(|m| m.get(REQUEST, "content"))
            .and_then(|c| c.index(0))
            .and_then(|part| part.get(REQUEST, "text"))
            .unwrap();
        assert_eq!(text.text(REQUEST).unwrap(), "call 555-0100!");
        let mut splice = Splice::new();
        splice.replace(
            text.span.clone(),
            string_literal("call [PHONE] \"redacted\"\n"),
        );
        let out = splice.render(REQUEST).unwrap();
        let literal = br#""call [PHONE] \"redacted\"\n""#;
        assert_eq!(&out[..text.span.start], &REQUEST[..text.span.start]);
        assert_eq!(
            &out[text.span.start..text.span.start + literal.len()],
            literal
        );
        assert_eq!(
            &out[text.span.start + literal.len()..],
            &REQUEST[text.span.end..]
        );
        // Still one document, with the new text where the old one was.
        let again = parse(&out, &Limits::default()).unwrap();
        let new_text = again.get(&out, "messages").unwrap().index(1).unwrap();
        let part = new_text.get(&out, "content").unwrap().index(0).unwrap();
        assert_eq!(
            part.get(&out, "text").unwrap().text(&out).unwrap(),
            "call [PHONE] \"redacted\"\n"
        );
    }

    #[test]
    fn no_edits_render_the_source_byte_for_byte() {
        assert!(Splice::new().is_empty());
        assert_eq!(Splice::new().render(REQUEST).unwrap(), REQUEST);
    }

    #[test]
    fn overlapping_edits_are_refused_in_any_order() {
        for (a, b) in [(2..6, 4..8), (4..8, 2..6), (2..8, 3..4), (3..3, 2..8)] {
            let mut splice = Splice::new();
            splice.replace(a.clone(), "x");
            splice.replace(b.clone(), "y");
            let error = splice.render(b"0123456789").unwrap_err();
            let (first, second) = if (a.start, a.end) <= (b.start, b.end) {
                (a, b)
            } else {
                (b, a)
            };
            assert_eq!(
                error,
                SpliceError::Overlap {
                    first: first.clone(),
                    second: second.clone()
                }
            );
            assert_eq!(
                error.to_string(),
                format!(
                    "edits overlap: bytes {}..{} and {}..{}",
                    first.start, first.end, second.start, second.end
                )
            );
        }
    }

    #[test]
    fn adjacent_edits_and_insertions_apply_in_order() {
        let mut splice = Splice::new();
        splice.replace(6..8, "G");
        splice.replace(2..4, "A");
        splice.replace(4..6, "B");
        splice.replace(8..8, "<");
        splice.replace(8..8, ">");
        splice.replace(0..0, "^");
        assert_eq!(splice.len(), 6);
        assert_eq!(splice.render(b"0123456789").unwrap(), b"^01ABG<>89");
    }

    #[test]
    fn an_edit_outside_the_source_is_refused() {
        let mut splice = Splice::new();
        splice.replace(8..11, "x");
        assert_eq!(
            splice.render(b"0123456789").unwrap_err().to_string(),
            "edit of bytes 8..11 is outside the 10-byte source"
        );
        let mut reversed = Splice::new();
        #[allow(
            clippy::reversed_empty_ranges,
            reason = "the reversed span is what is tested"
        )]
        reversed.replace(5..3, "x");
        assert!(matches!(
            reversed.render(b"0123456789"),
            Err(SpliceError::OutOfBounds { .. })
        ));
    }

    #[test]
    fn an_array_is_rebuilt_from_the_elements_kept_as_they_were() {
        let root = parse(REQUEST, &Limits::default()).unwrap();
        let messages = root.get(REQUEST, "messages").unwrap();
        let kept = messages
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| {
                m.get(REQUEST, "role")
                    .is_none_or(|r| r.text(REQUEST).unwrap() != "system")
            })
            .map(|m| m.raw(REQUEST));
        let mut splice = Splice::new();
        splice.replace(messages.span.clone(), array_from(kept));
        let out = splice.render(REQUEST).unwrap();
        let user = messages.index(1).unwrap().raw(REQUEST);
        let expected = [
            &REQUEST[..messages.span.start],
            b"[",
            user,
            b"]",
            &REQUEST[messages.span.end..],
        ]
        .concat();
        assert_eq!(out, expected);
        let again = parse(&out, &Limits::default()).unwrap();
        assert_eq!(
            again
                .get(&out, "messages")
                .unwrap()
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert_eq!(array_from(Vec::<&[u8]>::new()), b"[]");
    }

    #[test]
    fn an_object_is_written_from_keys_and_raw_values() {
        let out = object_from([
            ("role", &br#""user""#[..]),
            ("a\"b", b"[1, 2]"),
            ("", b"{}"),
        ]);
        assert_eq!(out, br#"{"role":"user","a\"b":[1, 2],"":{}}"#);
        assert_eq!(object_from(Vec::<(&str, &[u8])>::new()), b"{}");
    }

    #[test]
    fn a_string_literal_is_what_serde_json_writes() {
        for text in [
            "",
            "plain",
            "q\"b\\s/",
            "\u{0}\u{1}\u{8}\t\n\u{b}\u{c}\r\u{1f} \u{7f}",
            "é😀\u{2028}\u{fffd}",
        ] {
            assert_eq!(
                string_literal(text),
                serde_json::to_string(text).unwrap(),
                "{text:?}"
            );
        }
    }
}
