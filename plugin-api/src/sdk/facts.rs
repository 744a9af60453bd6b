//! Reading the session facts (the session view's extension, a JSON object
//! the host renders) for what one interceptor call asks of them, without
//! parsing all of it: packs read a flag or a member on every call, and the
//! whole object (the price table, the charges per source) on few.
//!
//! A needle found by a plain search is always a member's name: inside a
//! JSON string every `"` is escaped, so `"name":` with both quotes as they
//! stand cannot be part of one. The searchers are built once per process.

use memchr::memmem::Finder;
use serde::de::Deserialize;
use std::sync::LazyLock;

/// A searcher for `needle`, built on first use.
pub(crate) type Needle = LazyLock<Finder<'static>>;

/// `"gate_retry":true`.
pub(crate) static GATE_RETRY: Needle = LazyLock::new(|| Finder::new(b"\"gate_retry\":true"));
/// `"relayed":true`.
pub(crate) static RELAYED: Needle = LazyLock::new(|| Finder::new(b"\"relayed\":true"));
/// `"source":"`.
pub(crate) static SOURCE: Needle = LazyLock::new(|| Finder::new(b"\"source\":\""));
/// `"call":`.
pub(crate) static CALL: Needle = LazyLock::new(|| Finder::new(b"\"call\":"));

/// Whether `needle` occurs in `json`.
pub(crate) fn has(json: &str, needle: &Needle) -> bool {
    needle.find(json.as_bytes()).is_some()
}

/// The text right after the first `needle` in `json`.
pub(crate) fn after<'j>(json: &'j str, needle: &Needle) -> Option<&'j str> {
    let at = needle.find(json.as_bytes())?;
    // The needle is ASCII: the text after it starts on a character.
    json.get(at + needle.needle().len()..)
}

/// The first string member after `needle` (which ends with its opening
/// quote), as it stands in `json`, up to its closing quote.
pub(crate) fn string_after<'j>(json: &'j str, needle: &Needle) -> Option<&'j str> {
    let rest = after(json, needle)?;
    let end = memchr::memchr(b'"', rest.as_bytes())?;
    rest.get(..end)
}

/// The unsigned number right after each `needle` in `json`, the first that
/// reads as one and `keep` accepts.
pub(crate) fn number_after(json: &str, needle: &Needle, keep: impl Fn(u64) -> bool) -> Option<u64> {
    let bytes = json.as_bytes();
    needle.find_iter(bytes).find_map(|at| {
        let digits = &bytes[at + needle.needle().len()..];
        let end = digits
            .iter()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(digits.len());
        std::str::from_utf8(&digits[..end])
            .ok()?
            .parse()
            .ok()
            .filter(|n| keep(*n))
    })
}

/// The top-level member `key` of the object `json`, read as `T`; the
/// members after it are not read, those before it skipped (see
/// [`member_text`]). `None` when there is no such member to read, or it
/// is no `T`.
pub(crate) fn member<'de, T: Deserialize<'de>>(json: &'de str, key: &str) -> Option<T> {
    serde_json::from_str(member_text(json, key)?).ok()
}

/// The entry `name` of the object member `key` of `json` (a price table's
/// entry for one model), read as `T`; the table's other entries skipped.
pub(crate) fn entry<'de, T: Deserialize<'de>>(json: &'de str, key: &str, name: &str) -> Option<T> {
    member(member_text(json, key)?, name)
}

/// The text of the top-level member `key` of the object `json`: its value
/// as it stands. The members before it are skipped by their structure
/// alone (a string to its closing quote, an object or array to its
/// matching close, anything else to the next delimiter), not read: only
/// the member found is read as JSON, by its caller. The first, if named
/// twice. `None` when `json` is no object, or has no such member before
/// one that cannot be skipped.
pub(crate) fn member_text<'j>(json: &'j str, key: &str) -> Option<&'j str> {
    let bytes = json.as_bytes();
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    loop {
        at = skip_space(bytes, at);
        if bytes.get(at) != Some(&b'"') {
            // The object's end, or not an object's member.
            return None;
        }
        let name_end = string_end(bytes, at)?;
        let name = json.get(at..name_end)?;
        at = skip_space(bytes, name_end);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        let start = skip_space(bytes, at + 1);
        let end = value_end(bytes, start)?;
        if is_name(name, key) {
            return json.get(start..end);
        }
        at = skip_space(bytes, end);
        if bytes.get(at) != Some(&b',') {
            return None;
        }
        at += 1;
    }
}

/// Whether the member name `quoted` (quotes and all, as it stands) reads
/// as `key`; a name with escapes is read before it is compared.
fn is_name(quoted: &str, key: &str) -> bool {
    let Some(raw) = quoted.get(1..quoted.len().saturating_sub(1)) else {
        return false;
    };
    if !raw.contains('\\') {
        return raw == key;
    }
    serde_json::from_str::<String>(quoted).is_ok_and(|name| name == key)
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// Just past the string that opens at `at`: past its closing quote.
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    let mut from = at + 1;
    loop {
        let found = from + memchr::memchr2(b'"', b'\\', bytes.get(from..)?)?;
        if bytes[found] == b'"' {
            return Some(found + 1);
        }
        // A backslash: the character after it is escaped.
        from = found + 2;
    }
}

/// Just past the value that starts at `at`.
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => {
            let mut depth = 0_usize;
            let mut next = at;
            loop {
                match bytes.get(next)? {
                    b'"' => {
                        next = string_end(bytes, next)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(next + 1);
                        }
                    }
                    _ => {}
                }
                next += 1;
            }
        }
        _ => {
            let rest = &bytes[at..];
            let len = rest
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(rest.len());
            (len > 0).then_some(at + len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{
        after, entry, has, member, member_text, number_after, string_after, CALL, RELAYED, SOURCE,
    };

    const FACTS: &str = r#"{"capabilities":["edits"],"call":7,"cost_usd":0.5,"last_call":{"billed":"none","charged_to":"agent"},"model":"a \"source\":\"x","relayed":true,"source":"agent","usage":{},"prices":{"last_call":{"input":1.0,"output":2.0}}}"#;

    #[test]
    fn a_member_is_read_up_to_itself_and_a_missing_or_malformed_one_is_none() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Last {
            billed: String,
        }
        let last: Option<Option<Last>> = member(FACTS, "last_call");
        assert_eq!(
            last,
            Some(Some(Last {
                billed: "none".into()
            }))
        );
        // Only the top level is read: the price table's `last_call` model
        // is not the member.
        let without = FACTS.replace(r#""last_call":{"billed":"none","charged_to":"agent"},"#, "");
        assert_eq!(member::<Option<Last>>(&without, "last_call"), None);
        assert_eq!(member::<u64>(FACTS, "call"), Some(7));
        assert_eq!(member::<u64>(FACTS, "cost_usd"), None, "no u64");
        assert_eq!(member::<u64>("[1]", "call"), None, "no object");
        assert_eq!(
            member::<u64>(r#"{"a":tru"#, "call"),
            None,
            "malformed first"
        );
        assert_eq!(member::<u64>(r#"{"call":3,"a":tru"#, "call"), Some(3));
        // A name written with escapes is the same name.
        assert_eq!(member::<u64>(r#"{"c\u0061ll":4}"#, "call"), Some(4));
    }

    #[test]
    fn an_entry_of_a_member_is_read_alone() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Price {
            input: f64,
            output: f64,
        }
        let price = |model: &str| entry::<Price>(FACTS, "prices", model);
        assert_eq!(
            price("last_call"),
            Some(Price {
                input: 1.0,
                output: 2.0
            })
        );
        assert_eq!(price("gpt"), None);
        assert_eq!(entry::<Price>(FACTS, "usage", "x"), None);
        assert_eq!(entry::<Price>(FACTS, "model", "x"), None, "no object");
        let bad = r#"{"prices":{"m":{"input":1}}}"#;
        assert_eq!(entry::<Price>(bad, "prices", "m"), None, "no Price");
    }

    #[test]
    fn a_member_is_found_past_strings_and_nesting_that_look_like_its_end() {
        let json = r#" { "a" : {"b":"}]\"{,","c":[1,{"d":"]"},[]]} , "e":-1.5e3,"f":null, "want" : [5] ,"g":"#;
        assert_eq!(member_text(json, "want"), Some("[5]"));
        assert_eq!(member_text(json, "e"), Some("-1.5e3"));
        assert_eq!(member_text(json, "a").map(str::len), Some(35));
        assert_eq!(member_text(json, "g"), None, "no value");
        assert_eq!(member_text(json, "h"), None);
        assert_eq!(member_text(r#"{"a":"unclosed}"#, "b"), None);
        assert_eq!(member_text(r#"{"a":{"b":1}"#, "b"), None, "nested only");
        assert_eq!(member_text(r#"{"a":1 "b":2}"#, "b"), None, "no comma");
        assert_eq!(member_text(r#"{"a":1,"a":2}"#, "a"), Some("1"), "the first");
        assert_eq!(member_text("{}", "a"), None);
        assert_eq!(member_text("", "a"), None);
    }

    #[test]
    fn a_needle_inside_a_string_is_never_found() {
        // The model's name says `"source":"x` escaped: the member is the
        // one after it.
        assert_eq!(string_after(FACTS, &SOURCE), Some("agent"));
        assert!(has(FACTS, &RELAYED));
        assert!(!has(r#"{"model":"\"relayed\":true"}"#, &RELAYED));
        assert_eq!(number_after(FACTS, &CALL, |n| n != 0), Some(7));
        assert_eq!(
            number_after(r#"{"call":0,"x":{"call":9}}"#, &CALL, |n| n != 0),
            Some(9)
        );
        assert_eq!(number_after(r#"{"call":"#, &CALL, |_| true), None);
        assert_eq!(after(r#"{"call":"#, &CALL), Some(""));
    }
}
