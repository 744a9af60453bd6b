//! The parser: RFC 8259 in one pass, no recursion (open arrays and
//! objects are a stack of frames), a span for every value.
//!
//! One file past 700 lines: the parser is the first 400; the rest is its
//! tests (the tables of accepted and refused inputs, each error's line,
//! the room its containers keep), which read its private stacks.

use super::error::{ParseError, ParseErrorKind};
use super::limits::Limits;
use super::node::{decode, Key, Kind, Node};
use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::collections::HashSet;
use std::hash::BuildHasher;

/// From this many members on, an object's keys are checked for
/// duplicates by hash rather than by a scan of the ones before (a scan
/// compares lengths first, so up to here it costs less than hashing every
/// key; beyond, a hostile object's keys never cost more than linear time).
const HASH_FROM: usize = 32;

/// Parses `src` as one JSON document (whitespace around it allowed) into
/// a tree of spans. Refuses anything RFC 8259 does not allow (invalid UTF-8, control characters in strings,
/// bad escapes, leading zeros, `+1`, `NaN`, trailing commas, comments,
/// trailing characters), nesting deeper than `limits.max_depth`, a
/// repeated key in an object, a lone surrogate escape unless
/// `limits.surrogates` keeps it, and a number `serde_json` cannot hold
/// (`1e400`) if `limits.numbers` says so.
///
/// Whatever it accepts with lone surrogates and numbers out of range
/// refused and nesting below 128, `serde_json` accepts too, and reads the
/// same value.
///
/// # Errors
///
/// [`ParseError`]: the first problem and its byte offset (invalid UTF-8
/// is looked for first, in the whole source).
pub fn parse(src: &[u8], limits: &Limits) -> Result<Node, ParseError> {
    let text = std::str::from_utf8(src)
        .map_err(|error| ParseError::new(ParseErrorKind::InvalidUtf8, error.valid_up_to()))?;
    parse_str(text, limits)
}

/// [`parse`] of text already known to be UTF-8 (a `str`): the same tree,
/// without looking for invalid UTF-8 again.
///
/// # Errors
///
/// As [`parse`]'s, but for invalid UTF-8, which a `str` cannot hold.
pub fn parse_str(text: &str, limits: &Limits) -> Result<Node, ParseError> {
    let src = text.as_bytes();
    let Scratch {
        frames,
        items,
        members,
    } = SCRATCH.try_with(Cell::take).unwrap_or_default();
    let mut parser = Parser {
        src,
        text,
        pos: 0,
        limits,
        frames,
        items,
        members,
        hasher: None,
    };
    let parsed = parser.document();
    let scratch = Scratch {
        frames: parser.frames,
        items: parser.items,
        members: parser.members,
    };
    // Ignored: a thread being torn down keeps no scratch.
    let _ = SCRATCH.try_with(|cell| cell.set(scratch.emptied()));
    parsed
}

/// The parser's working stacks, kept between parses on each thread: a
/// small document (a streamed event) allocates only its arrays and
/// objects, each the size it is, never stacks grown again each time.
#[derive(Default)]
struct Scratch {
    frames: Vec<Frame>,
    items: Vec<Node>,
    members: Vec<(Key, Node)>,
}

impl Scratch {
    /// The most elements (members) whose room a thread keeps between
    /// parses: a large document's stacks are let go, not held for ever.
    const KEEP: usize = 256;

    /// Emptied for the next parse (what a refused document left in it
    /// dropped); a stack grown past [`Scratch::KEEP`] let go.
    fn emptied(mut self) -> Self {
        fn empty<T>(stack: &mut Vec<T>) {
            stack.clear();
            if stack.capacity() > Scratch::KEEP {
                *stack = Vec::new();
            }
        }
        empty(&mut self.frames);
        empty(&mut self.items);
        empty(&mut self.members);
        self
    }
}

thread_local! {
    /// This thread's [`Scratch`], taken by a parse while it runs.
    static SCRATCH: Cell<Scratch> = const {
        Cell::new(Scratch {
            frames: Vec::new(),
            items: Vec::new(),
            members: Vec::new(),
        })
    };
}

/// An array or object still open.
struct Frame {
    /// Its opening bracket's offset.
    start: usize,
    /// Whether it is an object.
    object: bool,
    /// Where its elements (in `items`) or members (in `members`) begin.
    first: usize,
    /// Hashes of its keys, once it has [`HASH_FROM`] of them.
    seen: Option<HashSet<u64>>,
    /// Each key's [`key_bit`], set: a key whose bit is not yet set is new
    /// without a look at the others (most keys of a small object).
    keys: u128,
}

/// A key's place in its object's [`Frame::keys`], from its text's length
/// and first and last bytes: equal texts always share one.
fn key_bit(bytes: &[u8]) -> u128 {
    let first = u32::from(bytes.first().copied().unwrap_or(0));
    let last = u32::from(bytes.last().copied().unwrap_or(0));
    // The length's low 32 bits are enough to spread the keys: equal
    // lengths give equal bits either way.
    #[allow(clippy::cast_possible_truncation, reason = "the low bits mix alike")]
    let length = bytes.len() as u32;
    let mixed = length.wrapping_mul(0x9E37_79B1)
        ^ first.wrapping_mul(0x85EB_CA6B)
        ^ last.wrapping_mul(0xC2B2_AE35);
    1 << (mixed >> 25)
}

/// The parser's state; its scalars are read in `scalar`.
pub(super) struct Parser<'a> {
    pub(super) src: &'a [u8],
    /// `src`, known to be UTF-8.
    pub(super) text: &'a str,
    pub(super) pos: usize,
    pub(super) limits: &'a Limits,
    frames: Vec<Frame>,
    /// The elements of the open arrays, innermost last.
    items: Vec<Node>,
    /// The members of the open objects, innermost last; the last one's
    /// value is a placeholder while it is being parsed.
    members: Vec<(Key, Node)>,
    hasher: Option<RandomState>,
}

impl Parser<'_> {
    /// The document: one value, whitespace around it allowed.
    fn document(&mut self) -> Result<Node, ParseError> {
        let root = self.tree()?;
        self.skip_whitespace();
        match self.char_at(self.pos) {
            None => Ok(root),
            Some(found) => Err(ParseError::new(
                ParseErrorKind::TrailingCharacters { found },
                self.pos,
            )),
        }
    }

    /// One value, with everything nested in it.
    fn tree(&mut self) -> Result<Node, ParseError> {
        'value: loop {
            self.skip_whitespace();
            let start = self.pos;
            let mut node = match self.peek() {
                Some(open @ (b'[' | b'{')) => {
                    if self.frames.len() >= self.limits.max_depth {
                        return Err(ParseError::new(
                            ParseErrorKind::TooDeep {
                                max_depth: self.limits.max_depth,
                            },
                            start,
                        ));
                    }
                    let object = open == b'{';
                    let close = if object { b'}' } else { b']' };
                    self.pos += 1;
                    self.skip_whitespace();
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        let kind = if object {
                            Kind::Object(Vec::new())
                        } else {
                            Kind::Array(Vec::new())
                        };
                        Node {
                            span: start..self.pos,
                            kind,
                        }
                    } else {
                        self.frames.push(Frame {
                            start,
                            object,
                            first: if object {
                                self.members.len()
                            } else {
                                self.items.len()
                            },
                            seen: None,
                            keys: 0,
                        });
                        if object {
                            self.member_key("a string key or '}'")?;
                        }
                        continue 'value;
                    }
                }
                _ => self.scalar()?,
            };
            // `node` is complete: it goes into the innermost open frame,
            // which then either expects another value or closes (and is
            // itself complete).
            loop {
                let Some(frame) = self.frames.last() else {
                    return Ok(node);
                };
                let (start, first, object) = (frame.start, frame.first, frame.object);
                if object {
                    if let Some(member) = self.members.last_mut() {
                        // The placeholder put there by `member_key` owns
                        // nothing: written over, not dropped.
                        debug_assert!(matches!(member.1.kind, Kind::Null));
                        std::mem::forget(std::mem::replace(&mut member.1, node));
                    }
                } else {
                    self.items.push(node);
                }
                self.skip_whitespace();
                let close = if object { b'}' } else { b']' };
                match self.peek() {
                    Some(b',') => {
                        let comma = self.pos;
                        self.pos += 1;
                        self.skip_whitespace();
                        if self.peek() == Some(close) {
                            return Err(ParseError::new(ParseErrorKind::TrailingComma, comma));
                        }
                        if object {
                            self.member_key("a string key")?;
                        }
                        continue 'value;
                    }
                    Some(b) if b == close => {
                        self.pos += 1;
                        self.frames.pop();
                        // Each its own size (copied out whole); the stacks
                        // keep their room.
                        let kind = if object {
                            Kind::Object(self.members.split_off(first))
                        } else {
                            Kind::Array(self.items.split_off(first))
                        };
                        node = Node {
                            span: start..self.pos,
                            kind,
                        };
                    }
                    _ => {
                        let expected = if object { "',' or '}'" } else { "',' or ']'" };
                        return Err(self.expected(expected));
                    }
                }
            }
        }
    }

    /// A member's key and its colon, inside the innermost frame (an
    /// object): pushed to `members` with a placeholder value.
    #[allow(
        clippy::inline_always,
        reason = "run for every key: inlined into the parse loop, a streamed event's parse takes 6 % fewer instructions"
    )]
    #[inline(always)]
    fn member_key(&mut self, expected: &'static str) -> Result<(), ParseError> {
        if self.peek() != Some(b'"') {
            return Err(self.expected(expected));
        }
        let start = self.pos;
        let escaped = self.string()?;
        let span = start..self.pos;
        let decoded = escaped.then(|| decode(&self.src[start + 1..self.pos - 1]).into_boxed_str());
        let key = Key::new(span, decoded);
        if self.is_duplicate(&key) {
            let text = key.text(self.src).into_owned();
            return Err(ParseError::new(
                ParseErrorKind::DuplicateKey { key: text },
                start,
            ));
        }
        self.skip_whitespace();
        if self.peek() != Some(b':') {
            return Err(self.expected("':'"));
        }
        self.pos += 1;
        let placeholder = Node {
            span: 0..0,
            kind: Kind::Null,
        };
        self.members.push((key, placeholder));
        Ok(())
    }

    /// Whether the innermost object already has `key`: most keys of a
    /// small object are new by their [`key_bit`] alone, here; the others
    /// are looked for in [`Parser::is_repeated`].
    #[allow(
        clippy::inline_always,
        reason = "the bit check most keys end at, inlined; the look itself stays out of line"
    )]
    #[inline(always)]
    fn is_duplicate(&mut self, key: &Key) -> bool {
        let Some(frame) = self.frames.last_mut() else {
            return false;
        };
        if self.members.len() - frame.first < HASH_FROM {
            let bit = key_bit(key.bytes(self.src));
            let known = frame.keys & bit != 0;
            frame.keys |= bit;
            if !known {
                return false;
            }
        }
        self.is_repeated(key)
    }

    /// Whether the innermost object already has `key`, looked for: by a
    /// scan of its members while it has fewer than [`HASH_FROM`], by
    /// their hashes from then on.
    #[inline(never)]
    fn is_repeated(&mut self, key: &Key) -> bool {
        let src = self.src;
        let Some(frame) = self.frames.last_mut() else {
            return false;
        };
        let bytes = key.bytes(src);
        let siblings = &self.members[frame.first..];
        // Keys without escapes (nearly all) of another length differ:
        // their literals' spans say so before their bytes are read.
        let plain = !key.has_escapes();
        let scan = || {
            siblings.iter().any(|(k, _)| {
                let differ = plain && !k.has_escapes() && k.span.len() != key.span.len();
                !differ && k.bytes(src) == bytes
            })
        };
        if siblings.len() < HASH_FROM {
            return scan();
        }
        let hasher = self.hasher.get_or_insert_with(RandomState::new);
        let seen = frame.seen.get_or_insert_with(|| {
            siblings
                .iter()
                .map(|(k, _)| hasher.hash_one(k.bytes(src)))
                .collect()
        });
        // A new hash is a new key; a known one is checked (collisions).
        !seen.insert(hasher.hash_one(bytes)) && scan()
    }

    pub(super) fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    pub(super) fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    pub(super) fn char_at(&self, at: usize) -> Option<char> {
        self.text.get(at..).and_then(|rest| rest.chars().next())
    }

    /// `expected`, and what is at the current offset instead.
    pub(super) fn expected(&self, expected: &'static str) -> ParseError {
        let found = self.char_at(self.pos);
        ParseError::new(ParseErrorKind::Expected { expected, found }, self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Accepted: each parses, and `serde_json` reads the same value.
    const ACCEPTED: &[&str] = &[
        "null",
        " true ",
        "\t\r\nfalse\n",
        "0",
        "-0",
        "-0.0e-0",
        "1.5E+3",
        "123456789012345678901234567890",
        "1e-400",
        r#""""#,
        r#""\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00""#,
        "\"\u{7f}é😀\u{2028}\"",
        "[]",
        "{}",
        "[ 1 , [ ] , { } ]",
        r#"{"a":{"a":{"a":1}},"b":[{"a":2}]}"#,
        r#"{"a":1,"A":2,"a ":3}"#,
    ];

    /// Refused: each input with its error line.
    const REFUSED: &[(&[u8], &str)] = &[
        (
            b"",
            "expected a json value, found the end of the input at byte 0",
        ),
        (
            b"   ",
            "expected a json value, found the end of the input at byte 3",
        ),
        (
            b"\xef\xbb\xbf{}",
            "expected a json value, found '\\u{feff}' at byte 0",
        ),
        (b"[1]x", "unexpected 'x' after the json value at byte 3"),
        (b"1 2", "unexpected '2' after the json value at byte 2"),
        (
            b"{\"a\":1}\n,",
            "unexpected ',' after the json value at byte 8",
        ),
        (b"[1,]", "trailing comma at byte 2"),
        (b"{\"a\":1 , }", "trailing comma at byte 7"),
        (b"[1 2]", "expected ',' or ']', found '2' at byte 3"),
        (
            b"{\"a\":1 \"b\":2}",
            "expected ',' or '}', found '\"' at byte 7",
        ),
        (b"{\"a\" 1}", "expected ':', found '1' at byte 5"),
        (
            b"{a:1}",
            "expected a string key or '}', found 'a' at byte 1",
        ),
        (b"{\"a\":1,,}", "expected a string key, found ',' at byte 7"),
        (b"['a']", "expected a json value, found '\\'' at byte 1"),
        (
            b"[1,",
            "expected a json value, found the end of the input at byte 3",
        ),
        (
            b"[",
            "expected a json value, found the end of the input at byte 1",
        ),
        (
            b"{\"a\":",
            "expected a json value, found the end of the input at byte 5",
        ),
        (b"+1", "expected a json value, found '+' at byte 0"),
        (b"NaN", "expected a json value, found 'N' at byte 0"),
        (b"[Infinity]", "expected a json value, found 'I' at byte 1"),
        (b"// c\n1", "expected a json value, found '/' at byte 0"),
        (b"[1]/*c*/", "unexpected '/' after the json value at byte 3"),
        (
            b"tru",
            "expected the rest of `true`, found the end of the input at byte 3",
        ),
        (b"[nul]", "expected the rest of `null`, found ']' at byte 4"),
        (b"01", "number with a leading zero at byte 0"),
        (b"[-007]", "number with a leading zero at byte 1"),
        (
            b"-",
            "expected a digit after '-', found the end of the input at byte 1",
        ),
        (b"-a", "expected a digit after '-', found 'a' at byte 1"),
        (
            b"1.",
            "expected a digit after '.', found the end of the input at byte 2",
        ),
        (b".5", "expected a json value, found '.' at byte 0"),
        (
            b"1e",
            "expected a digit in the exponent, found the end of the input at byte 2",
        ),
        (
            b"1e+",
            "expected a digit in the exponent, found the end of the input at byte 3",
        ),
        (
            b"\"abc",
            "expected '\"' to close the string, found the end of the input at byte 4",
        ),
        (
            b"\"a\nb\"",
            "unescaped control character U+000A in a string at byte 2",
        ),
        (
            b"\"\x00\"",
            "unescaped control character U+0000 in a string at byte 1",
        ),
        (
            b"\"a\\qb\"",
            "invalid escape: backslash followed by 'q' at byte 2",
        ),
        (
            b"\"\\",
            "invalid escape: backslash at the end of the input at byte 1",
        ),
        (
            b"\"\\u12G4\"",
            "invalid \\u escape (four hexadecimal digits expected) at byte 1",
        ),
        (
            b"\"\\u12\"",
            "invalid \\u escape (four hexadecimal digits expected) at byte 1",
        ),
        (
            b"\"\\ud800\"",
            "unpaired surrogate escape \\ud800 at byte 1",
        ),
        (
            b"\"\\uDC00\"",
            "unpaired surrogate escape \\udc00 at byte 1",
        ),
        (
            b"\"\\ud800\\u0041\"",
            "unpaired surrogate escape \\ud800 at byte 1",
        ),
        (b"\"\xff\"", "invalid utf-8 at byte 1"),
        (b"[\"\xc3\"]", "invalid utf-8 at byte 2"),
        (b"\"\xed\xa0\x80\"", "invalid utf-8 at byte 1"),
        (
            b"{\"model\":\"m\",\"messages\":[],\"x\":1,\"messages\":[{}]}",
            "duplicate key \"messages\" at byte 33",
        ),
        (b"{\"a\":1,\"\\u0061\":2}", "duplicate key \"a\" at byte 7"),
        (
            b"[{\"a\":{\"b\":1,\"b\":2}}]",
            "duplicate key \"b\" at byte 13",
        ),
        (
            b"{\"\\n\\\"\":1,\"\\n\\\"\":2}",
            "duplicate key \"\\n\\\"\" at byte 10",
        ),
    ];

    #[test]
    fn the_table_of_accepted_inputs_parses_to_what_serde_json_reads() {
        for input in ACCEPTED {
            let src = input.as_bytes();
            let root = parse(src, &Limits::default())
                .unwrap_or_else(|error| panic!("{input:?} refused: {error}"));
            let expected: serde_json::Value = serde_json::from_slice(src).unwrap();
            assert_eq!(root.to_value(src), expected, "{input:?}");
            assert_eq!(root.raw(src), input.trim().as_bytes(), "{input:?}");
        }
    }

    #[test]
    fn a_parse_after_a_refused_or_a_large_one_reads_only_its_own_document() {
        let same = |src: &[u8]| {
            let root = parse(src, &Limits::default()).unwrap();
            let expected: serde_json::Value = serde_json::from_slice(src).unwrap();
            assert_eq!(root.to_value(src), expected);
        };
        // Refused with arrays and objects open: what they held is not
        // part of the next document.
        let open = br#"{"a":[1,2,{"b":[3,{"c":"#;
        assert!(parse(open, &Limits::default()).is_err());
        same(br#"{"x":[{"y":1}],"z":[]}"#);
        assert!(parse(b"[[1,2],[3,", &Limits::default()).is_err());
        same(b"[4,[5]]");
        // A large document's stacks are not kept for the next.
        let large = format!(
            "[{}]",
            (0..1000)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        same(large.as_bytes());
        let kept = SCRATCH.take();
        assert!(
            kept.items.capacity() <= Scratch::KEEP,
            "{}",
            kept.items.capacity()
        );
        assert!(kept.items.is_empty() && kept.members.is_empty() && kept.frames.is_empty());
        same(br#"{"a":{"b":[1,{"c":2}]}}"#);
    }

    #[test]
    fn the_table_of_refused_inputs_gives_each_its_error_line() {
        for (input, line) in REFUSED {
            let error =
                parse(input, &Limits::default()).expect_err(&String::from_utf8_lossy(input));
            assert_eq!(
                error.to_string(),
                *line,
                "{:?}",
                String::from_utf8_lossy(input)
            );
            assert!(!line.contains('\n'));
        }
    }

    #[test]
    fn nesting_is_capped_at_the_limit_and_the_offset_is_the_bracket_too_many() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(parse(nested(256).as_bytes(), &Limits::default()).is_ok());
        let error = parse(nested(257).as_bytes(), &Limits::default()).unwrap_err();
        assert_eq!(error.to_string(), "nesting deeper than 256 at byte 256");
        let objects = format!("{}1{}", r#"{"a":"#.repeat(3), "}".repeat(3));
        let limits = Limits::default().with_max_depth(2);
        assert_eq!(
            parse(objects.as_bytes(), &limits).unwrap_err().to_string(),
            "nesting deeper than 2 at byte 10"
        );
        let zero = Limits::default().with_max_depth(0);
        assert!(parse(b"1", &zero).is_ok());
        assert_eq!(
            *parse(b" {}", &zero).unwrap_err().kind(),
            ParseErrorKind::TooDeep { max_depth: 0 }
        );
        // Far past the cap: refused without recursing (no stack overflow).
        let deep = "[".repeat(1_000_000);
        assert_eq!(
            parse(deep.as_bytes(), &Limits::default())
                .unwrap_err()
                .offset(),
            256
        );
    }

    #[test]
    fn serde_json_refuses_exactly_from_128_deep_so_127_is_the_cap_that_agrees() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let limits = Limits::default().with_max_depth(127);
        assert!(serde_json::from_str::<serde_json::Value>(&nested(127)).is_ok());
        assert!(parse(nested(127).as_bytes(), &limits).is_ok());
        assert!(serde_json::from_str::<serde_json::Value>(&nested(128)).is_err());
        assert!(parse(nested(128).as_bytes(), &limits).is_err());
    }

    #[test]
    fn a_large_object_finds_its_duplicate_by_hash() {
        let mut doc = String::from("{");
        for i in 0..1000 {
            doc += &["\"k", &i.to_string(), "\":0,"].concat();
        }
        let ok = format!("{doc}\"last\":0}}");
        assert_eq!(
            parse(ok.as_bytes(), &Limits::default())
                .unwrap()
                .as_object()
                .unwrap()
                .len(),
            1001
        );
        let dup = format!("{doc}\"k500\":0}}");
        let error = parse(dup.as_bytes(), &Limits::default()).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("duplicate key \"k500\" at byte {}", doc.len())
        );
    }

    #[test]
    fn a_small_object_finds_each_duplicate_whatever_bits_its_keys_share() {
        // 31 keys (below the hash's threshold) of a few lengths and ends,
        // so many share a bit of the quick check: each one repeated is
        // found, escaped or not, and the 31 distinct ones all pass.
        let keys: Vec<String> = (0..31)
            .map(|i| format!("k{}", "x".repeat(i % 4) + &i.to_string()))
            .collect();
        // The claim the test rests on: distinct keys do share bits here,
        // so the quick check sends some of them on to the full scan.
        let bits: HashSet<u128> = keys.iter().map(|k| key_bit(k.as_bytes())).collect();
        assert!(bits.len() < keys.len(), "no two keys share a bit");
        let doc: String = keys.iter().map(|k| ["\"", k, "\":0,"].concat()).collect();
        let whole = format!("{{{}}}", doc.trim_end_matches(','));
        let root = parse(whole.as_bytes(), &Limits::default()).unwrap();
        assert_eq!(root.as_object().unwrap().len(), 31);
        for key in &keys {
            let escaped = format!("\\u{:04x}{}", key.as_bytes()[0], &key[1..]);
            for again in [key.clone(), escaped] {
                let dup = format!("{{{doc}\"{again}\":1}}");
                let error = parse(dup.as_bytes(), &Limits::default()).unwrap_err();
                assert_eq!(
                    error.to_string(),
                    format!("duplicate key \"{key}\" at byte {}", doc.len() + 1),
                    "{dup}"
                );
            }
        }
    }

    #[test]
    fn each_array_and_object_holds_the_room_of_its_elements_only() {
        // A large document first, so this thread's stacks have grown: the
        // next document's containers (the root's elements start at the
        // stacks' bottom) are still each their own size.
        let large: String = format!("[{}]", vec!["{\"k\":[1,2,3]}"; 300].join(","));
        assert!(parse(large.as_bytes(), &Limits::default()).is_ok());
        let root = parse(b"{\"a\":[1,{\"b\":2}],\"c\":3}", &Limits::default()).unwrap();
        let Kind::Object(members) = &root.kind else {
            panic!("an object");
        };
        assert_eq!((members.len(), members.capacity()), (2, 2));
        let Kind::Array(items) = &members[0].1.kind else {
            panic!("an array");
        };
        assert_eq!((items.len(), items.capacity()), (2, 2));
        let array = parse(b"[true]", &Limits::default()).unwrap();
        let Kind::Array(items) = &array.kind else {
            panic!("an array");
        };
        assert_eq!((items.len(), items.capacity()), (1, 1));
    }

    #[test]
    fn a_duplicate_key_line_is_cut_and_stays_one_line() {
        let key = format!("a\n{}", "x".repeat(200));
        let doc = format!("{{\"{0}\":1,\"{0}\":2}}", key.replace('\n', "\\n"));
        let line = parse(doc.as_bytes(), &Limits::default())
            .unwrap_err()
            .to_string();
        assert!(line.starts_with("duplicate key \"a\\nxxx"), "{line}");
        assert!(line.contains("x…\" at byte"), "{line}");
        assert!(!line.contains('\n') && line.len() < 100, "{line}");
    }

    #[test]
    fn spans_cover_each_value_without_its_whitespace() {
        let src = b" { \"a\" : [ 1 , \"x\" ] , \"b\" : null } ";
        let root = parse(src, &Limits::default()).unwrap();
        assert_eq!(root.span, 1..35);
        let (key, a) = &root.as_object().unwrap()[0];
        assert_eq!(key.span, 3..6);
        assert_eq!(a.raw(src), b"[ 1 , \"x\" ]");
        assert_eq!(a.index(0).unwrap().span, 11..12);
        assert_eq!(a.index(1).unwrap().raw(src), b"\"x\"");
        assert_eq!(root.get(src, "b").unwrap().raw(src), b"null");
    }
}
