//! A stream segment as a host hands it over: the turn's text in the
//! input's `text`, the facts (`released`, `delta`, `final`, `replace`) in
//! its extension — read at fixed columns when the host wrote them, by
//! search otherwise — and how far back a hold from an offset reaches.

use super::inputs::Segment;
use crate::abi::SeamInput;

/// How many trailing bytes of the segment's text a hold from `offset`
/// withholds: never released text (an offset inside it holds the whole
/// candidate), moved back to a character boundary so the split never cuts
/// a character.
pub(super) fn held_bytes(segment: Segment<'_>, offset: usize) -> usize {
    let full = segment.full;
    let mut from = offset.clamp(segment.released, full.len());
    while !full.is_char_boundary(from) {
        from -= 1;
    }
    full.len() - from
}

/// How many trailing bytes of a rewritten candidate a hold from `offset`
/// (into `released` bytes of released text, then `candidate`) withholds:
/// clamped to the candidate, moved back to a character start.
pub(super) fn rewritten_hold(released: usize, candidate: &str, offset: usize) -> usize {
    let mut from = offset.saturating_sub(released).min(candidate.len());
    while !candidate.is_char_boundary(from) {
        from -= 1;
    }
    candidate.len() - from
}

/// The segment a host hands over: the turn's text in `text`, and
/// `{"released":R,"delta":D,"final":B}` in `extension_json` (with
/// `"replace":true` from a host that takes rewrites).
pub(super) fn segment_of<'a>(input: &SeamInput<'a>) -> Option<Segment<'a>> {
    let full = input.text.as_str();
    let facts = input.extension_json.as_str();
    let (released, delta, last, replace) = facts_exact(facts).or_else(|| {
        Some((
            json_uint(facts, "\"released\":")?,
            json_uint(facts, "\"delta\":")?,
            facts.contains("\"final\":true"),
            facts.contains("\"replace\":true"),
        ))
    })?;
    (released <= full.len() && full.is_char_boundary(released) && delta <= full.len()).then_some(
        Segment {
            full,
            released,
            delta,
            last,
            replace,
        },
    )
}

/// The facts in exactly the layouts this crate's hosts write, read at
/// fixed columns without searching: `{"released":R,"delta":D,"final":B}`
/// with each number right-aligned in 20 characters and `true ` padded to
/// the width of `false`, and — from a host that takes rewrites — the same
/// with `,"replace":true` before the closing brace. `None` for any other
/// spelling.
fn facts_exact(facts: &str) -> Option<(usize, usize, bool, bool)> {
    fn column(bytes: &[u8]) -> Option<usize> {
        let digits = &bytes[bytes.iter().position(|&b| b != b' ')?..];
        digits.iter().try_fold(0usize, |n, &b| {
            b.is_ascii_digit()
                .then(|| n.checked_mul(10)?.checked_add(usize::from(b - b'0')))
                .flatten()
        })
    }
    const REPLACE: &[u8] = b",\"replace\":true}";
    let bytes = facts.as_bytes();
    let (bytes, replace) = match bytes.len() {
        76 => (bytes, false),
        91 if bytes.ends_with(REPLACE) => (&bytes[..75], true),
        _ => return None,
    };
    if !bytes.starts_with(b"{\"released\":") || &bytes[32..41] != b",\"delta\":" {
        return None;
    }
    let last = match &bytes[61..] {
        b",\"final\":false}" | b",\"final\":false" => false,
        b",\"final\":true }" | b",\"final\":true " => true,
        _ => return None,
    };
    Some((
        column(&bytes[12..32])?,
        column(&bytes[41..61])?,
        last,
        replace,
    ))
}

/// The unsigned integer right after `key` in a flat JSON object.
fn json_uint(json: &str, key: &str) -> Option<usize> {
    let rest = &json[json.find(key)? + key.len()..];
    let digits = rest.trim_start();
    let end = digits
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(full: &str, released: usize) -> Segment<'_> {
        Segment {
            full,
            released,
            delta: 0,
            last: false,
            replace: true,
        }
    }

    #[test]
    fn the_hosts_facts_are_read_exactly_and_any_other_spelling_by_search() {
        let columns = |released: &str, delta: &str, last: &str| {
            format!(r#"{{"released":{released:>20},"delta":{delta:>20},"final":{last}}}"#)
        };
        assert_eq!(
            facts_exact(&columns("12", "4", "false")),
            Some((12, 4, false, false))
        );
        assert_eq!(
            facts_exact(&columns("0", "16", "true ")),
            Some((0, 16, true, false))
        );
        let rewriting = |last: &str| {
            let mut facts = columns("3", "5", last);
            facts.pop();
            facts + r#","replace":true}"#
        };
        assert_eq!(facts_exact(&rewriting("true ")), Some((3, 5, true, true)));
        assert_eq!(facts_exact(&rewriting("false")), Some((3, 5, false, true)));
        assert_eq!(facts_exact(&columns("1 2", "4", "false")), None);
        assert_eq!(facts_exact(&columns("", "4", "false")), None);
        assert_eq!(
            facts_exact(&columns("99999999999999999999", "4", "false")),
            None,
            "overflow"
        );
        assert_eq!(
            facts_exact(r#"{"released":12,"delta":4,"final":false}"#),
            None
        );
        let other = r#"{"delta": 4, "released": 12, "final":true}"#;
        assert_eq!(json_uint(other, "\"released\":"), Some(12));
        assert_eq!(json_uint(other, "\"delta\":"), Some(4));
        assert_eq!(json_uint(other, "\"nope\":"), None);
    }

    #[test]
    fn a_hold_is_clamped_to_the_candidate_and_widened_to_a_character_start() {
        let full = "say né";
        // Inside the released part: the whole candidate is held.
        assert_eq!(held_bytes(segment(full, 4), 1), full.len() - 4);
        // Past the end: nothing is held.
        assert_eq!(held_bytes(segment(full, 4), 99), 0);
        // Inside `é` (bytes 5..7): moved back to its start.
        assert_eq!(held_bytes(segment(full, 4), 6), 2);
    }

    #[test]
    fn a_rewrites_hold_counts_in_the_rewritten_candidate() {
        // Released "say " (4 bytes), candidate rewritten to "[X] né".
        let candidate = "[X] né";
        assert_eq!(rewritten_hold(4, candidate, 4 + 4), 3, "from `né`");
        assert_eq!(rewritten_hold(4, candidate, 0), candidate.len(), "all");
        assert_eq!(rewritten_hold(4, candidate, 99), 0, "nothing");
        assert_eq!(rewritten_hold(4, candidate, 4 + 6), 2, "inside `é`");
    }
}
