//! One member of the host's session facts, found without reading the rest.
//!
//! The facts are a JSON object of a few small members (the call's number,
//! its source, the last call's charge) and two larger ones written last
//! (the session's charges per source and the host's price table). A pack
//! that asks for one small member used to have serde read the whole
//! object, the price table's numbers among it, on every interceptor call:
//! with every shipped pack loaded that was a quarter of their time on a
//! gateway request. [`member`] walks the members up to the one asked for,
//! skipping each value by its brackets and quotes, and hands back that
//! value's own text for serde to read.

/// The JSON text of the top-level member `key` of `object`, as written
/// (`"agent"`, `7`, `{"billed":"none"}`), found by skipping the members
/// before it unread. `None` when there is no such member or the walk
/// cannot reach it (see [`Members`]): the caller then reads nothing from
/// the facts, as it does from facts serde could not parse. The first of
/// two members of the same name is the one found; the value itself is not
/// checked (serde reads it).
pub(crate) fn member<'a>(object: &'a str, key: &str) -> Option<&'a str> {
    Members::of(object)
        .find(|(name, _)| *name == key)
        .map(|(_, value)| value)
}

/// The top-level members of a JSON object, in order: each name (written
/// without escapes) and its value's text. The walk ends early, and
/// [`Members::unreadable`] says so, when it cannot go on: text that is not
/// an object, a name written with escapes (which could spell another name
/// than its bytes do), a value that does not end, members not separated by
/// commas.
pub(crate) struct Members<'a> {
    object: &'a str,
    /// Where the next member's name starts; `None` once the walk ended.
    at: Option<usize>,
    unreadable: bool,
}

impl<'a> Members<'a> {
    /// The walk over `object`'s members.
    pub(crate) fn of(object: &'a str) -> Self {
        let bytes = object.as_bytes();
        let open = skip_space(bytes, 0);
        let mut walk = Members {
            object,
            at: None,
            unreadable: bytes.get(open) != Some(&b'{'),
        };
        if !walk.unreadable {
            let first = skip_space(bytes, open + 1);
            if bytes.get(first) != Some(&b'}') {
                walk.at = Some(first);
            }
        }
        walk
    }

    /// True when the walk ended before the object did.
    pub(crate) fn unreadable(&self) -> bool {
        self.unreadable
    }

    fn step(&self, at: usize) -> Option<((&'a str, &'a str), Option<usize>)> {
        let bytes = self.object.as_bytes();
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let name_end = string_end(bytes, at)?;
        let name = self.object.get(at + 1..name_end - 1)?;
        if name.contains('\\') {
            return None;
        }
        let colon = skip_space(bytes, name_end);
        if bytes.get(colon) != Some(&b':') {
            return None;
        }
        let start = skip_space(bytes, colon + 1);
        let end = value_end(bytes, start)?;
        // Both ends fall on ASCII bytes (a bracket, a quote, a delimiter),
        // so on character boundaries.
        let value = self.object.get(start..end)?;
        let after = skip_space(bytes, end);
        let next = match bytes.get(after)? {
            b',' => Some(skip_space(bytes, after + 1)),
            b'}' => None,
            _ => return None,
        };
        Some(((name, value), next))
    }
}

impl<'a> Iterator for Members<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let at = self.at.take()?;
        match self.step(at) {
            Some((member, next)) => {
                self.at = next;
                Some(member)
            }
            None => {
                self.unreadable = true;
                None
            }
        }
    }
}

/// The text of a member's value when it is a JSON string written without
/// escapes: its characters, borrowed. `None` for anything else.
pub(crate) fn plain_string(value: &str) -> Option<&str> {
    let inner = value.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains(['"', '\\'])).then_some(inner)
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// One past the closing quote of the string opening at `at`.
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    loop {
        match bytes.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

/// One past the value starting at `at`: a string to its closing quote, an
/// object or array to its matching bracket (the strings inside skipped
/// whole, so a bracket in one counts for nothing), anything else to the
/// delimiter that ends it.
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => {
            let mut depth = 0_usize;
            let mut i = at;
            loop {
                match bytes.get(i)? {
                    b'"' => {
                        i = string_end(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        b',' | b'}' | b']' | b':' => None,
        _ => {
            let end = bytes[at..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .map_or(bytes.len(), |len| at + len);
            Some(end)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{member, plain_string, Members};

    const FACTS: &str = r#"{"capabilities":["edits"],"call":7,"cost_usd":0.5,"last_call":{"billed":"none","charged_to":"agent"},"model":"gpt-\"4o\"}]","relayed":true,"source":"agent","usage":{"agent":{"input_tokens":3}},"prices":{"m":{"input":1.0,"output":2.0}}}"#;

    #[test]
    fn each_member_is_its_value_as_written() {
        assert_eq!(member(FACTS, "capabilities"), Some(r#"["edits"]"#));
        assert_eq!(member(FACTS, "call"), Some("7"));
        assert_eq!(member(FACTS, "cost_usd"), Some("0.5"));
        assert_eq!(
            member(FACTS, "last_call"),
            Some(r#"{"billed":"none","charged_to":"agent"}"#)
        );
        assert_eq!(member(FACTS, "model"), Some(r#""gpt-\"4o\"}]""#));
        assert_eq!(member(FACTS, "relayed"), Some("true"));
        assert_eq!(member(FACTS, "source"), Some(r#""agent""#));
        assert_eq!(
            member(FACTS, "prices"),
            Some(r#"{"m":{"input":1.0,"output":2.0}}"#)
        );
        assert_eq!(member(FACTS, "gate_retry"), None);
        // A member's name inside another's value is not a member.
        assert_eq!(member(FACTS, "billed"), None);
        assert_eq!(member(FACTS, "input"), None);
    }

    #[test]
    fn spaces_between_the_parts_are_skipped() {
        let spaced = " {\n \"a\" : [ 1 , { \"b\" : \"}\" } ] ,\t\"c\"\r:\nnull }";
        assert_eq!(member(spaced, "a"), Some(r#"[ 1 , { "b" : "}" } ]"#));
        assert_eq!(member(spaced, "c"), Some("null"));
    }

    #[test]
    fn text_the_walk_cannot_read_gives_nothing() {
        for text in [
            "",
            "[]",
            "{}",
            "{\"call\"}",
            "{\"call\":}",
            "{\"call\":7 \"source\":\"agent\"}",
            "{\"a\":[1,2,\"source\":\"agent\"",
            "{\"a\":\"never ends, \\\"source\\\":\"agent\"",
            // The key spelled with an escape could be `source`.
            "{\"sour\\u0063e\":\"other\",\"source\":\"agent\"}",
        ] {
            assert_eq!(member(text, "source"), None, "{text}");
        }
        // A member is given only once what follows it says the object
        // goes on or ends.
        assert_eq!(member("{\"call\":7,", "call"), Some("7"));
        assert_eq!(member("{\"call\":7", "call"), None);
    }

    #[test]
    fn a_plain_string_is_its_characters() {
        assert_eq!(plain_string(r#""agent""#), Some("agent"));
        assert_eq!(plain_string(r#""é""#), Some("é"));
        assert_eq!(plain_string(r#""a\"b""#), None);
        assert_eq!(plain_string("7"), None);
        assert_eq!(plain_string("\""), None);
    }

    #[test]
    fn the_walk_says_whether_it_reached_the_end() {
        let mut walk = Members::of(FACTS);
        assert_eq!(walk.by_ref().count(), 9);
        assert!(!walk.unreadable());
        let mut empty = Members::of(" { } ");
        assert_eq!(empty.next(), None);
        assert!(!empty.unreadable());
        for text in ["{\"a\":1,\"b\"", "{\"a\":1 \"b\":2}", "{\"a\":1,}", "[1]"] {
            let mut walk = Members::of(text);
            while walk.next().is_some() {}
            assert!(walk.unreadable(), "{text}");
        }
    }
}
