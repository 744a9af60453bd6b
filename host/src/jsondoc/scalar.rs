//! Scalars: `null`, booleans, numbers and strings, each checked where
//! it stands (a string's escapes and UTF-16 pairs, a number's grammar and
//! range); strings are not decoded here.

use super::error::{ParseError, ParseErrorKind};
use super::limits::{Numbers, Surrogates};
use super::node::{hex4, Kind, Node};
use super::parse::Parser;

/// A number with at most this many integer digits, plus its exponent, is
/// below 10^300: in range, not worth asking `serde_json`.
const IN_RANGE_DIGITS: i64 = 300;

impl Parser<'_> {
    /// `null`, a boolean, a number or a string.
    pub(super) fn scalar(&mut self) -> Result<Node, ParseError> {
        let start = self.pos;
        let kind = match self.peek() {
            Some(b'"') => Kind::String {
                escaped: self.string()?,
            },
            Some(b't') => {
                self.literal(b"true", "the rest of `true`")?;
                Kind::Bool(true)
            }
            Some(b'f') => {
                self.literal(b"false", "the rest of `false`")?;
                Kind::Bool(false)
            }
            Some(b'n') => {
                self.literal(b"null", "the rest of `null`")?;
                Kind::Null
            }
            Some(b'-' | b'0'..=b'9') => {
                self.number()?;
                Kind::Number
            }
            _ => return Err(self.expected("a json value")),
        };
        Ok(Node {
            span: start..self.pos,
            kind,
        })
    }

    fn literal(&mut self, word: &[u8], expected: &'static str) -> Result<(), ParseError> {
        for &b in word {
            if self.peek() != Some(b) {
                return Err(self.expected(expected));
            }
            self.pos += 1;
        }
        Ok(())
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, and in a
    /// float's range under [`Numbers::InRange`].
    fn number(&mut self) -> Result<(), ParseError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if matches!(self.peek(), Some(b'0'..=b'9')) {
                    return Err(ParseError::new(ParseErrorKind::LeadingZero, start));
                }
            }
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.expected("a digit after '-'")),
        }
        // Digits before the point, then plus the exponent: the value is
        // below 10 to that.
        let mut magnitude = i64::try_from(self.pos - start).unwrap_or(i64::MAX);
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.expected("a digit after '.'"));
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            let negative = self.peek() == Some(b'-');
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.expected("a digit in the exponent"));
            }
            let digits = self.pos;
            self.digits();
            let exponent = match &self.src[digits..self.pos] {
                short if short.len() <= 6 => short
                    .iter()
                    .fold(0, |value, digit| value * 10 + i64::from(digit - b'0')),
                _ => i64::MAX,
            };
            magnitude = if negative && exponent != i64::MAX {
                magnitude - exponent
            } else {
                magnitude.saturating_add(exponent)
            };
        }
        if magnitude > IN_RANGE_DIGITS && self.limits.numbers == Numbers::InRange {
            // `serde_json`'s own verdict: its float parsing is not
            // correctly rounded at the edge of the range, so only it can
            // say which numbers it refuses.
            let text = &self.text[start..self.pos];
            if text.parse::<serde_json::Number>().is_err() {
                return Err(ParseError::new(ParseErrorKind::NumberOutOfRange, start));
            }
        }
        Ok(())
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }

    /// A string literal, from its opening quote to past its closing one;
    /// whether it holds an escape.
    #[inline]
    pub(super) fn string(&mut self) -> Result<bool, ParseError> {
        // Most strings hold no escape: their closing quote is the first
        // stop past the opening one.
        let at = skip_plain(self.src, self.pos + 1);
        if self.src.get(at) == Some(&b'"') {
            self.pos = at + 1;
            return Ok(false);
        }
        self.string_from(at)
    }

    /// The rest of a string from `at`, its first stop that is not its
    /// closing quote (an escape, a control character or the end).
    #[inline(never)]
    fn string_from(&mut self, mut at: usize) -> Result<bool, ParseError> {
        let src = self.src;
        let mut escaped = false;
        loop {
            at = skip_plain(src, at);
            match src.get(at) {
                Some(b'"') => {
                    self.pos = at + 1;
                    return Ok(escaped);
                }
                Some(b'\\') => {
                    escaped = true;
                    at = self.escape(at)?;
                }
                Some(&byte) => {
                    return Err(ParseError::new(
                        ParseErrorKind::ControlCharacter { byte },
                        at,
                    ));
                }
                None => {
                    self.pos = at;
                    return Err(self.expected("'\"' to close the string"));
                }
            }
        }
    }

    /// The escape at `at` (a backslash); the offset past it.
    fn escape(&self, at: usize) -> Result<usize, ParseError> {
        let src = self.src;
        match src.get(at + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(at + 2),
            Some(b'u') => {
                let unit = hex4(&src[at + 2..])
                    .ok_or_else(|| ParseError::new(ParseErrorKind::InvalidUnicodeEscape, at))?;
                let lone = match unit {
                    0xD800..=0xDBFF => {
                        let low = match src.get(at + 6..at + 8) {
                            Some(b"\\u") => hex4(&src[at + 8..]),
                            _ => None,
                        };
                        if low.is_some_and(|low| (0xDC00..=0xDFFF).contains(&low)) {
                            return Ok(at + 12);
                        }
                        true
                    }
                    0xDC00..=0xDFFF => true,
                    _ => false,
                };
                if lone && self.limits.surrogates == Surrogates::Refuse {
                    return Err(ParseError::new(
                        ParseErrorKind::LoneSurrogate { code_unit: unit },
                        at,
                    ));
                }
                Ok(at + 6)
            }
            _ => Err(ParseError::new(
                ParseErrorKind::InvalidEscape {
                    found: self.char_at(at + 1),
                },
                at,
            )),
        }
    }
}

/// Past the bytes from `at` that a string holds as they are (anything but
/// a quote, a backslash or a control character), eight at a time while
/// eight are left: the first stop in a word is found from the word's
/// flags, not byte by byte.
#[inline]
pub(super) fn skip_plain(src: &[u8], mut at: usize) -> usize {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    /// The high bit of each byte of `word` below `limit` (at most 0x80).
    /// A borrow only runs upward, so the lowest bit set is exact (one
    /// above it may be a borrow's).
    const fn below(word: u64, limit: u64) -> u64 {
        word.wrapping_sub(ONES * limit) & !word & HIGHS
    }
    while let Some(chunk) = src.get(at..at + 8) {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(chunk);
        // Little-endian: the first byte is the lowest.
        let word = u64::from_le_bytes(bytes);
        let stops = below(word ^ (ONES * u64::from(b'"')), 1)
            | below(word ^ (ONES * u64::from(b'\\')), 1)
            | below(word, 0x20);
        if stops != 0 {
            // The lowest flag's byte: its high bit is bit 8k + 7.
            return at + (stops.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while let Some(&b) = src.get(at) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            break;
        }
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsondoc::{parse, Limits};
    use serde_json::Value;

    #[test]
    fn a_number_too_large_for_a_float_is_kept_as_written_unless_refused() {
        let src = br#"{"a":[1e400, -1E+400, 5e-324, 123456789012345678901234567890]}"#;
        let root = parse(src, &Limits::default()).unwrap();
        let a = root.get(src, "a").unwrap();
        assert_eq!(a.index(0).unwrap().number_text(src), Some("1e400"));
        assert_eq!(a.index(1).unwrap().raw(src), b"-1E+400");
        assert!(serde_json::from_slice::<Value>(src).is_err());
        let value = a.to_value(src);
        assert_eq!(value[0].as_f64(), Some(f64::MAX));
        assert_eq!(value[1].as_f64(), Some(-f64::MAX));
        assert_eq!(value[2], serde_json::from_str::<Value>("5e-324").unwrap());
        let in_range = Limits::default().with_numbers(Numbers::InRange);
        assert!(parse(b"[5e-324, 123456789012345678901234567890]", &in_range).is_ok());
        for (input, line) in [
            ("[1e400]", "number out of range at byte 1"),
            ("-1.8e308", "number out of range at byte 0"),
            (r#"{"a":[1,-1E+400]}"#, "number out of range at byte 8"),
        ] {
            let error = parse(input.as_bytes(), &in_range).unwrap_err();
            assert_eq!(error.to_string(), line);
        }
    }

    #[test]
    fn numbers_at_the_edge_of_the_range_get_serde_json_s_verdict() {
        let zeros = |n: usize| "0".repeat(n);
        let numbers = [
            "1e300".to_owned(),
            "1e308".to_owned(),
            "1e309".to_owned(),
            "1.7976931348623157e308".to_owned(),
            "1.7976931348623158e308".to_owned(),
            "-1.7976931348623157E+308".to_owned(),
            "0.0e99999999".to_owned(),
            "0e400".to_owned(),
            "1e-99999999999999999999".to_owned(),
            "-1e-400".to_owned(),
            "10e307".to_owned(),
            "1000e-3".to_owned(),
            format!("1{}", zeros(299)),
            format!("1{}", zeros(308)),
            format!("1{}", zeros(309)),
            format!("1{}e-10", zeros(310)),
            format!("1{}.5e-1", zeros(300)),
            format!("0.{}1e320", zeros(500)),
            format!("-0.{}1", zeros(1000)),
        ];
        let in_range = Limits::default().with_numbers(Numbers::InRange);
        for number in &numbers {
            let kept = parse(number.as_bytes(), &Limits::default()).unwrap();
            let ours = parse(number.as_bytes(), &in_range);
            let theirs = serde_json::from_str::<Value>(number);
            if let Ok(value) = &theirs {
                assert_eq!(&kept.to_value(number.as_bytes()), value, "{number}");
            }
            match (ours, theirs) {
                (Ok(root), Ok(value)) => {
                    assert_eq!(root.to_value(number.as_bytes()), value, "{number}");
                }
                (Err(error), Err(_)) => {
                    assert_eq!(*error.kind(), ParseErrorKind::NumberOutOfRange, "{number}");
                }
                (ours, theirs) => panic!("{number}: {ours:?} but serde_json {theirs:?}"),
            }
        }
    }

    #[test]
    fn lone_surrogates_are_accepted_as_written_when_kept() {
        let keep = Limits::default().with_surrogates(Surrogates::Keep);
        for input in [
            r#""\ud800""#,
            r#""\uDFFF""#,
            r#"["\ud800\u0041"]"#,
            r#"{"\udc00":1}"#,
        ] {
            let root = parse(input.as_bytes(), &keep).unwrap();
            assert_eq!(root.raw(input.as_bytes()), input.as_bytes());
            assert!(parse(input.as_bytes(), &Limits::default()).is_err());
        }
        // Kept or not, the rest of the escape grammar still holds.
        assert!(parse(br#""\ud800\uZZZZ""#, &keep).is_err());
        assert!(parse(br#""\ud800\q""#, &keep).is_err());
    }

    #[test]
    fn skipping_plain_bytes_stops_at_the_first_quote_backslash_or_control() {
        let text = b"abcdefghijklmnopqrstuvwxyz\xc3\xa9\x7f0123456789";
        for stop in [b'"', b'\\', 0x00, 0x1f] {
            for at in 0..text.len() {
                let mut bytes = text.to_vec();
                bytes[at] = stop;
                assert_eq!(skip_plain(&bytes, 0), at);
            }
        }
        assert_eq!(skip_plain(text, 3), text.len());
        // Two stops in one word: the first is found, whatever stands
        // around it (a byte a borrow could flag above it, a high byte).
        let around: [&[u8]; 4] = [b"\x20", b"\x21", b"\xff", b"\x80"];
        for stop in [b'"', b'\\', 0x00, 0x1f] {
            for second in [b'"', b'\\', 0x00, 0x1f] {
                for filler in around {
                    for at in 0..16 {
                        let mut bytes = filler.repeat(24);
                        bytes[at] = stop;
                        bytes[at + 1 + at % 3] = second;
                        assert_eq!(skip_plain(&bytes, 0), at, "{bytes:?}");
                    }
                }
            }
        }
    }
}
