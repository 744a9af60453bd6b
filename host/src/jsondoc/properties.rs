//! Properties of the parser over generated documents, against
//! `serde_json`: seeded random generation (the same cases on every run;
//! a failure names its seed and case).
//!
//! - Random values (no duplicate keys, by construction), written compactly
//!   and pretty by `serde_json` and with random whitespace, escapes and
//!   number spellings by [`write_variant`]: `parse` accepts, `to_value` is
//!   what `serde_json` reads, and every node's raw bytes read with
//!   `serde_json` give that node's `to_value`.
//! - Those documents mutated, and short random strings over JSON's
//!   alphabet: whenever `parse` accepts (numbers out of range refused),
//!   `serde_json` accepts and reads the same value; whenever `serde_json`
//!   accepts and `parse` does not, the reason is a duplicate key; keeping
//!   lone surrogates or numbers out of range accepts more, for that reason
//!   only.

use super::{parse, string_literal, Kind, Limits, Node, Numbers, ParseErrorKind, Surrogates};
use fastrand::Rng;
use serde_json::{Map, Number, Value};

/// Nesting of generated values; below `serde_json`'s limit of 128.
const MAX_DEPTH: usize = 6;

/// The limits that agree with `serde_json`: it refuses nesting 128 deep,
/// and numbers out of a float's range.
const AGREEING: Limits = Limits::new()
    .with_max_depth(127)
    .with_numbers(Numbers::InRange);

const CHARS: &[char] = &[
    'a',
    'b',
    'z',
    ' ',
    '"',
    '\\',
    '/',
    '\u{0}',
    '\u{8}',
    '\t',
    '\n',
    '\u{c}',
    '\r',
    '\u{1f}',
    '\u{7f}',
    'é',
    '\u{2028}',
    '€',
    '😀',
    '\u{fffd}',
    '\u{ffff}',
    '\u{10ffff}',
];

fn random_string(rng: &mut Rng) -> String {
    (0..rng.usize(0..8))
        .map(|_| {
            if rng.bool() {
                CHARS[rng.usize(..CHARS.len())]
            } else {
                rng.char(..)
            }
        })
        .collect()
}

fn random_number(rng: &mut Rng) -> Value {
    match rng.u8(0..5) {
        0 => Value::from(rng.i64(-1000..1000)),
        1 => Value::from(rng.i64(..)),
        2 => Value::from(rng.u64(..)),
        3 => Number::from_f64(f64::from_bits(rng.u64(..))).map_or(Value::Null, Value::Number),
        _ => Number::from_f64(rng.f64() * 1000.0 - 500.0).map_or(Value::Null, Value::Number),
    }
}

fn random_value(rng: &mut Rng, depth: usize) -> Value {
    let leaf = depth >= MAX_DEPTH || rng.u8(0..3) == 0;
    match rng.u8(0..if leaf { 4 } else { 6 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.bool()),
        2 => random_number(rng),
        3 => Value::String(random_string(rng)),
        4 => Value::Array(
            (0..rng.usize(0..5))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        _ => {
            let mut map = Map::new();
            for _ in 0..rng.usize(0..5) {
                map.insert(random_string(rng), random_value(rng, depth + 1));
            }
            Value::Object(map)
        }
    }
}

fn whitespace(rng: &mut Rng, out: &mut String) {
    for _ in 0..rng.usize(0..3).saturating_sub(1) {
        out.push([' ', '\n', '\r', '\t'][rng.usize(..4)]);
    }
}

/// A string literal with escapes chosen at random where JSON allows one.
fn write_string(rng: &mut Rng, text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        let must = matches!(c, '"' | '\\' | '\u{0}'..='\u{1f}');
        if !must && rng.u8(0..4) != 0 {
            out.push(c);
            continue;
        }
        let short = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '/' => Some("\\/"),
            '\u{8}' => Some("\\b"),
            '\u{c}' => Some("\\f"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            _ => None,
        };
        match short {
            Some(escape) if rng.bool() => out.push_str(escape),
            _ => {
                let mut units = [0; 2];
                for unit in c.encode_utf16(&mut units) {
                    let hex = format!("{unit:04x}");
                    out.push_str("\\u");
                    out.push_str(&if rng.bool() { hex.to_uppercase() } else { hex });
                }
            }
        }
    }
    out.push('"');
}

/// `value` in JSON, with random whitespace, escapes and number spellings.
fn write_variant(rng: &mut Rng, value: &Value, out: &mut String) {
    whitespace(rng, out);
    match value {
        Value::Number(n) if n.is_i64() || n.is_u64() => {
            out.push_str(&n.to_string());
            out.push_str(["", "", ".0", "e0", "E+00", ".000e-0"][rng.usize(..6)]);
        }
        Value::String(text) => write_string(rng, text, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_variant(rng, item, out);
            }
            whitespace(rng, out);
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            for (i, (key, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                whitespace(rng, out);
                write_string(rng, key, out);
                whitespace(rng, out);
                out.push(':');
                write_variant(rng, item, out);
            }
            whitespace(rng, out);
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
    whitespace(rng, out);
}

/// Every node of the tree, with its own checks: its raw bytes hold no
/// surrounding whitespace and read (with `serde_json`) as its `to_value`.
fn check_nodes(src: &[u8], node: &Node, case: &str) {
    let raw = node.raw(src);
    let ws = |b: &u8| matches!(b, b' ' | b'\n' | b'\r' | b'\t');
    assert!(
        !raw.first().is_some_and(ws) && !raw.last().is_some_and(ws),
        "{case}"
    );
    let read: Value = serde_json::from_slice(raw).unwrap_or_else(|e| panic!("{case}: raw {e}"));
    assert_eq!(read, node.to_value(src), "{case}");
    match &node.kind {
        Kind::String { escaped } => {
            assert_eq!(*escaped, raw.contains(&b'\\'), "{case}");
            assert_eq!(read.as_str(), node.text(src).as_deref(), "{case}");
            if let Ok(text) = std::str::from_utf8(src) {
                assert_eq!(read.as_str(), node.text_in(text).as_deref(), "{case}");
            }
        }
        Kind::Array(items) => items.iter().for_each(|n| check_nodes(src, n, case)),
        Kind::Object(members) => {
            for (key, value) in members {
                let literal = &src[key.span.clone()];
                let text: String = serde_json::from_slice(literal).unwrap();
                assert_eq!(key.text(src), text, "{case}");
                assert!(key.is(src, &text), "{case}");
                assert!(node.get(src, &text).is_some(), "{case}");
                check_nodes(src, value, case);
            }
        }
        Kind::Number => assert_eq!(node.as_u64(src), read.as_u64(), "{case}"),
        Kind::Null | Kind::Bool(_) => {}
    }
}

/// The no-differential property on any input; whether `parse` accepted.
fn check_agreement(src: &[u8], case: &str) -> bool {
    let ours = parse(src, &AGREEING);
    let theirs = serde_json::from_slice::<Value>(src);
    match (&ours, &theirs) {
        (Ok(root), Ok(value)) => {
            assert_eq!(&root.to_value(src), value, "{case}");
            check_nodes(src, root, case);
        }
        (Ok(_), Err(error)) => panic!("{case}: accepted, serde_json refuses: {error}"),
        (Err(error), Ok(_)) => assert!(
            matches!(error.kind(), ParseErrorKind::DuplicateKey { .. }),
            "{case}: refused ({error}), serde_json accepts"
        ),
        (Err(_), Err(_)) => {}
    }
    if let Err(error) = &ours {
        let line = error.to_string();
        assert!(
            !line.contains('\n') && error.offset() <= src.len(),
            "{case}: {line}"
        );
    }
    // Keeping lone surrogates, or numbers out of range, relaxes that one
    // rule and nothing else.
    let relaxed = [
        AGREEING.with_surrogates(Surrogates::Keep),
        AGREEING.with_numbers(Numbers::Keep),
    ];
    for (rule, limits) in relaxed.iter().enumerate() {
        match (&ours, &parse(src, limits)) {
            (Ok(strict), Ok(kept)) => assert_eq!(strict, kept, "{case}"),
            (Ok(_), Err(error)) => panic!("{case}: relaxed {rule} refuses: {error}"),
            (Err(error), Ok(kept)) => {
                let explained = match rule {
                    0 => matches!(error.kind(), ParseErrorKind::LoneSurrogate { .. }),
                    _ => *error.kind() == ParseErrorKind::NumberOutOfRange,
                };
                assert!(explained, "{case}: {error}, relaxed {rule} accepts");
                let _ = kept.to_value(src);
            }
            (Err(_), Err(_)) => {}
        }
    }
    ours.is_ok()
}

/// Pieces a mutation inserts: the ones near the grammar's edges.
const TOKENS: &[&[u8]] = &[
    b"\"",
    b"\\",
    b"\\u",
    b"\\ud800",
    b"\\udc00",
    b"\\ud83d\\ude00",
    b"\\u00e9",
    b",",
    b":",
    b"[",
    b"]",
    b"{",
    b"}",
    b"{\"a\":1,\"a\":2}",
    b"1e400",
    b"-0",
    b"01",
    b"1.",
    b".5",
    b"1e",
    b"+1",
    b"true",
    b"tru",
    b"null",
    b"NaN",
    b"/*",
    b"//",
    b" ",
    b"\n",
    b"\x00",
    b"\x1f",
    b"\x7f",
    b"\xff",
    b"\xc3",
    b"\xc3\xa9",
    b"\xed\xa0\x80",
    b"\xef\xbb\xbf",
    b"1.7976931348623157e308",
];

fn mutate(rng: &mut Rng, doc: &mut Vec<u8>) {
    for _ in 0..rng.usize(1..4) {
        let at = rng.usize(..=doc.len());
        match rng.u8(0..5) {
            0 if at < doc.len() => {
                doc.remove(at);
            }
            1 if at < doc.len() => doc[at] = rng.u8(..),
            2 => {
                let token = TOKENS[rng.usize(..TOKENS.len())];
                doc.splice(at..at, token.iter().copied());
            }
            3 if at < doc.len() => {
                let end = rng.usize(at..=doc.len().min(at + 16));
                let copy = doc[at..end].to_vec();
                let to = rng.usize(..=doc.len());
                doc.splice(to..to, copy);
            }
            _ => {
                const BYTES: &[u8] = b"{}[]\",:\\ 0-e.tu";
                doc.insert(at, BYTES[rng.usize(..BYTES.len())]);
            }
        }
    }
}

#[test]
fn generated_documents_parse_to_what_serde_json_reads_in_every_node() {
    let mut rng = Rng::with_seed(0x5eed_0001);
    for case in 0..2000 {
        let value = random_value(&mut rng, 0);
        let mut variant = String::new();
        write_variant(&mut rng, &value, &mut variant);
        let docs = [
            serde_json::to_vec(&value).unwrap(),
            serde_json::to_vec_pretty(&value).unwrap(),
            variant.into_bytes(),
        ];
        for (form, doc) in docs.iter().enumerate() {
            let case = format!("case {case} form {form}: {}", String::from_utf8_lossy(doc));
            let root = parse(doc, &Limits::default()).unwrap_or_else(|e| panic!("{case}: {e}"));
            let expected: Value = serde_json::from_slice(doc).unwrap();
            assert_eq!(root.to_value(doc), expected, "{case}");
            check_nodes(doc, &root, &case);
        }
    }
}

#[test]
fn mutated_documents_are_never_accepted_unless_serde_json_reads_the_same() {
    let mut rng = Rng::with_seed(0x5eed_0002);
    let mut accepted = 0;
    for case in 0..50_000 {
        let value = random_value(&mut rng, 0);
        let mut doc = match case % 3 {
            0 => serde_json::to_vec(&value).unwrap(),
            1 => serde_json::to_vec_pretty(&value).unwrap(),
            _ => {
                let mut variant = String::new();
                write_variant(&mut rng, &value, &mut variant);
                variant.into_bytes()
            }
        };
        mutate(&mut rng, &mut doc);
        let case = format!("case {case}: {:?}", String::from_utf8_lossy(&doc));
        accepted += usize::from(check_agreement(&doc, &case));
    }
    // Not vacuous: some of the inputs are documents.
    assert!(accepted > 2000, "{accepted} accepted");
}

#[test]
fn random_short_inputs_are_never_accepted_unless_serde_json_reads_the_same() {
    const ALPHABET: &[u8] = b"{}[]\",:\\ \n0123456789-+.eEtrufalsn/ux\x00\x1f\x80\xff";
    let mut rng = Rng::with_seed(0x5eed_0003);
    let mut accepted = 0;
    for case in 0..200_000 {
        let doc: Vec<u8> = (0..rng.usize(0..12))
            .map(|_| {
                if rng.u8(0..8) == 0 {
                    rng.u8(..)
                } else {
                    ALPHABET[rng.usize(..ALPHABET.len())]
                }
            })
            .collect();
        let case = format!("case {case}: {:?}", String::from_utf8_lossy(&doc));
        accepted += usize::from(check_agreement(&doc, &case));
    }
    // Not vacuous: some of the inputs are documents.
    assert!(accepted > 3000, "{accepted} accepted");
}

#[test]
fn a_repeated_key_is_refused_wherever_it_is() {
    let mut rng = Rng::with_seed(0x5eed_0004);
    for case in 0..300 {
        let key = random_string(&mut rng);
        let mut inner = Map::new();
        inner.insert(key.clone(), random_value(&mut rng, 3));
        let mut doc = String::new();
        write_variant(&mut rng, &Value::Object(inner), &mut doc);
        // The same key again, spelt with other escapes.
        let mut again = String::new();
        write_string(&mut rng, &key, &mut again);
        let at = doc.rfind('}').unwrap();
        doc.insert_str(at, &format!(",{again}:null"));
        let wrapped = format!("[1,{{\"m\":{doc}}}]");
        let error = parse(wrapped.as_bytes(), &Limits::default()).unwrap_err();
        assert_eq!(
            *error.kind(),
            ParseErrorKind::DuplicateKey { key: key.clone() },
            "case {case}: {wrapped}"
        );
        assert!(serde_json::from_str::<Value>(&wrapped).is_ok());
    }
}

#[test]
fn string_literals_are_written_as_serde_json_writes_them() {
    let mut rng = Rng::with_seed(0x5eed_0005);
    for _ in 0..2000 {
        let text = random_string(&mut rng);
        assert_eq!(string_literal(&text), serde_json::to_string(&text).unwrap());
    }
}

#[test]
fn every_body_of_the_fidelity_corpus_parses_and_its_strings_splice_back_in_place() {
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/fidelity");
    let mut bodies = Vec::new();
    for entry in std::fs::read_dir(&corpus).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let recorded: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            for exchange in recorded["exchanges"].as_array().unwrap() {
                let body = exchange["request"]["body"].as_str().unwrap();
                bodies.push((path.clone(), body.as_bytes().to_vec()));
            }
        }
    }
    for entry in std::fs::read_dir(corpus.join("handmade")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            bodies.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    assert!(bodies.len() > 20, "{} bodies", bodies.len());
    for (path, body) in &bodies {
        let root = parse(body, &Limits::default()).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        assert_eq!(root.raw(body), body.trim_ascii(), "{path:?}");
        if let Ok(value) = serde_json::from_slice::<Value>(body) {
            assert_eq!(root.to_value(body), value, "{path:?}");
        } else {
            // Only numbers a float cannot hold keep serde_json out.
            let in_range = Limits::default().with_numbers(Numbers::InRange);
            let error = parse(body, &in_range).unwrap_err();
            assert_eq!(*error.kind(), ParseErrorKind::NumberOutOfRange, "{path:?}");
        }
        // Every string re-encoded in place: the same document again.
        let mut splice = super::Splice::new();
        let mut strings = vec![&root];
        while let Some(node) = strings.pop() {
            match &node.kind {
                Kind::String { .. } => {
                    splice.replace(node.span.clone(), string_literal(&node.text(body).unwrap()));
                }
                Kind::Array(items) => strings.extend(items),
                Kind::Object(members) => strings.extend(members.iter().map(|(_, n)| n)),
                _ => {}
            }
        }
        let out = splice.render(body).unwrap();
        let again = parse(&out, &Limits::default()).unwrap();
        assert_eq!(again.to_value(&out), root.to_value(body), "{path:?}");
    }
}

/// The accessors of [`Node`](super::Node), on parsed documents.
mod accessors {
    use crate::jsondoc::node::decode;
    use crate::jsondoc::{parse, Limits, Surrogates};
    use std::borrow::Cow;

    #[test]
    fn accessors_find_members_elements_and_scalars() {
        let src = br#" {"model":"m","n":2,"stream":true,"stop":null,"messages":[{"role":"user"},"x\ny"]} "#;
        let root = parse(src, &Limits::default()).unwrap();
        assert_eq!(root.kind_name(), "object");
        assert_eq!(root.raw(src).first(), Some(&b'{'));
        assert_eq!(root.get(src, "model").unwrap().text(src).unwrap(), "m");
        assert_eq!(root.get(src, "n").unwrap().number_text(src), Some("2"));
        assert_eq!(root.get(src, "n").unwrap().as_u64(src), Some(2));
        assert_eq!(root.get(src, "model").unwrap().as_u64(src), None);
        let numbers = b"[0,18446744073709551615,18446744073709551616,-1,-0,1.0,1e2,7]";
        let read = parse(numbers, &Limits::default()).unwrap();
        let whole: Vec<Option<u64>> = read
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64(numbers))
            .collect();
        let by_parsing: Vec<Option<u64>> = read
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.number_text(numbers).and_then(|t| t.parse().ok()))
            .collect();
        assert_eq!(whole, by_parsing);
        assert_eq!(whole[1], Some(u64::MAX));
        assert_eq!(root.get(src, "stream").unwrap().as_bool(), Some(true));
        assert!(root.get(src, "stop").unwrap().is_null());
        assert!(root.get(src, "absent").is_none());
        let messages = root.get(src, "messages").unwrap();
        assert_eq!(messages.as_array().unwrap().len(), 2);
        let first = messages.index(0).unwrap();
        assert_eq!(first.get(src, "role").unwrap().raw(src), br#""user""#);
        assert_eq!(messages.index(1).unwrap().text(src).unwrap(), "x\ny");
        assert!(messages.index(2).is_none());
        assert!(messages.get(src, "role").is_none());
        assert_eq!(root.as_object().unwrap()[0].0.text(src), "model");
    }

    #[test]
    fn text_is_borrowed_without_escapes_and_decoded_with_them() {
        let src = br#"["plain", "tab\there", "\u00e9\ud83d\ude00\/"]"#;
        let root = parse(src, &Limits::default()).unwrap();
        assert!(matches!(
            root.index(0).unwrap().text(src),
            Some(Cow::Borrowed("plain"))
        ));
        assert!(matches!(
            root.index(1).unwrap().text(src),
            Some(Cow::Owned(_))
        ));
        assert_eq!(root.index(1).unwrap().text(src).unwrap(), "tab\there");
        assert_eq!(root.index(2).unwrap().text(src).unwrap(), "é😀/");
    }

    #[test]
    fn an_escaped_key_is_found_by_its_decoded_text() {
        let src = br#"{"mess\u0061ges":[]}"#;
        let root = parse(src, &Limits::default()).unwrap();
        let (key, _) = &root.as_object().unwrap()[0];
        assert!(key.has_escapes());
        assert_eq!(key.span, 1..16);
        assert!(root.get(src, "messages").is_some());
    }

    #[test]
    fn a_kept_lone_surrogate_decodes_to_the_replacement_character() {
        let limits = Limits::default().with_surrogates(Surrogates::Keep);
        let src = br#"["a\ud800b", "\udc00", "\ud800\ud800\udc00"]"#;
        let root = parse(src, &limits).unwrap();
        assert_eq!(root.index(0).unwrap().text(src).unwrap(), "a\u{FFFD}b");
        assert_eq!(root.index(1).unwrap().text(src).unwrap(), "\u{FFFD}");
        assert_eq!(
            root.index(2).unwrap().text(src).unwrap(),
            "\u{FFFD}\u{10000}"
        );
        assert_eq!(root.index(0).unwrap().raw(src), br#""a\ud800b""#);
        assert_eq!(root.to_value(src)[0], "a\u{FFFD}b");
    }

    #[test]
    fn to_value_is_what_serde_json_makes_of_the_raw_bytes() {
        let src = br#"{"a":[1,-0,1.50,1E+2,18446744073709551616],"b":{"c":"\n"},"d":false}"#;
        let root = parse(src, &Limits::default()).unwrap();
        let expected: serde_json::Value = serde_json::from_slice(src).unwrap();
        assert_eq!(root.to_value(src), expected);
        let a = root.get(src, "a").unwrap();
        assert_eq!(
            a.to_value(src),
            serde_json::from_slice::<serde_json::Value>(a.raw(src)).unwrap()
        );
    }

    #[test]
    fn a_foreign_source_gives_garbage_not_a_panic() {
        let src = br#"{"key":"value\n"}"#;
        let root = parse(src, &Limits::default()).unwrap();
        for other in [&b""[..], b"{", b"\xff\xfe\\", b"\\u12"] {
            let _ = root.to_value(other);
            let _ = root.get(other, "key");
        }
        // A literal with an escape and one without, read in other texts
        // (in the last, the plain one's span ends inside a character).
        let plain_src = br#"{"key":"value"}"#;
        let plain = parse(plain_src, &Limits::default()).unwrap();
        let accents = "\u{e9}".repeat(7);
        for value in [root.get(src, "key"), plain.get(plain_src, "key")] {
            for other in ["", "{", "\\u12", &accents] {
                let _ = value.unwrap().text_in(other);
            }
        }
        let value = plain.get(plain_src, "key").unwrap();
        assert_eq!(value.text_in(&accents), Some(Cow::Borrowed("")));
        assert_eq!(decode(b"\\"), "\u{FFFD}");
        assert_eq!(decode(b"\\u12"), "\u{FFFD}12");
        assert_eq!(decode(b"\\q\xff"), "\u{FFFD}\u{FFFD}");
    }
}
