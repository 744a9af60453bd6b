//! Reading the session facts (the session view's extension, a JSON object
//! the host renders) for what one interceptor call asks of them, without
//! parsing all of it: packs read a flag or a member on every call, and the
//! whole object (the price table, the charges per source) on few.
//!
//! A needle found by a plain search is always a member's name: inside a
//! JSON string every `"` is escaped, so `"name":` with both quotes as they
//! stand cannot be part of one. The searchers are built once per process.

use memchr::memmem::Finder;
use serde::de::{Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use std::marker::PhantomData;
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
/// members after it are not read, those before it skipped. `None` when
/// `json` is no object, has no such member (before a malformed one), or
/// the member is no `T`.
pub(crate) fn member<'de, T: Deserialize<'de>>(json: &'de str, key: &str) -> Option<T> {
    member_read(json, key, PhantomData)
}

/// [`member`], its value read by `seed`.
fn member_read<'de, S: DeserializeSeed<'de>>(
    json: &'de str,
    key: &str,
    seed: S,
) -> Option<S::Value> {
    let mut found = None;
    let mut reader = serde_json::Deserializer::from_str(json);
    // Found before the end, the object's end is never reached, and the
    // reader says so in an error: what was found is the answer.
    let _ = reader.deserialize_map(Member {
        key,
        seed,
        found: &mut found,
    });
    found
}

/// The entry `name` of the object member `key` of `json` (a price table's
/// entry for one model), read as `T`; the table's other entries skipped.
pub(crate) fn entry<'de, T: Deserialize<'de>>(json: &'de str, key: &str, name: &str) -> Option<T> {
    member_read(json, key, Entry(name, PhantomData)).flatten()
}

/// Walks an object's members up to `key`, reading its value by `seed`
/// into `found`.
struct Member<'k, 'f, S, V> {
    key: &'k str,
    seed: S,
    found: &'f mut Option<V>,
}

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for Member<'_, '_, S, S::Value> {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(named) = map.next_key_seed(Named(self.key))? {
            if named {
                *self.found = map.next_value_seed(self.seed).ok();
                return Ok(());
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }
}

/// Reads an object's entry `.0` as `T` (the last, if named twice), every
/// other entry skipped.
struct Entry<'k, T>(&'k str, PhantomData<T>);

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for Entry<'_, T> {
    type Value = Option<T>;

    fn deserialize<D: Deserializer<'de>>(self, reader: D) -> Result<Option<T>, D::Error> {
        reader.deserialize_map(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for Entry<'_, T> {
    type Value = Option<T>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<T>, A::Error> {
        let mut found = None;
        while let Some(named) = map.next_key_seed(Named(self.0))? {
            if named {
                found = Some(map.next_value::<T>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// Whether a member's name is the one looked for, read without a copy of
/// it (a name with escapes is compared as it reads).
#[derive(Clone, Copy)]
struct Named<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for Named<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, reader: D) -> Result<bool, D::Error> {
        reader.deserialize_str(self)
    }
}

impl Visitor<'_> for Named<'_> {
    type Value = bool;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a member's name")
    }

    fn visit_str<E>(self, name: &str) -> Result<bool, E> {
        Ok(name == self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::{after, entry, has, member, number_after, string_after, CALL, RELAYED, SOURCE};

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
