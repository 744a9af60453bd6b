//! The `stream_chunk` handler: judging streamed text delta by delta
//! without ever releasing a byte that a later delta turns into a match.

use crate::scan::Scanner;
use chimera_plugin_api::prelude::{Segment, StreamDecision};

/// How far before the released boundary a scan starts at most: a match
/// ending after the boundary and starting further back is not seen.
pub const LOOK_BEHIND: usize = 4096;

/// How many whitespace-separated tokens before the boundary a built-in
/// check's match can start. Only a match that contains a separator can
/// straddle the boundary (the hold keeps a trailing run unreleased), and
/// the built-in checks that may contain one are short phrases: a spaced
/// phone or card number (four groups), a PEM header (`-----BEGIN RSA
/// PRIVATE KEY`), a password assignment (`password : value`). Six tokens
/// cover them all; custom patterns, which may span anything, get the whole
/// [`LOOK_BEHIND`].
pub const TOKENS_BEHIND: usize = 6;

/// How many streamed bytes the gate takes per judgement
/// (`Registrar::stream_window`): a judgement's fixed cost — the call, the
/// look-behind, the scanner's start — is paid once per window instead of
/// once per delta. The host still offers sooner when text has waited
/// 25 ms, so a stream at reading pace is shown as it comes.
pub const WINDOW: usize = 1024;

/// The separators that end a trailing run: space, tab, LF, CR.
fn is_separator(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Where the hold of `content` starts: at the start of its trailing run of
/// non-separator bytes (a trailing `123-4` may become an SSN), pulled back
/// to `len − hold_back` when that is earlier (clamped at 0). `content.len()`
/// holds nothing.
#[must_use]
pub fn hold_from(content: &str, hold_back: usize) -> usize {
    let bytes = content.as_bytes();
    let run = bytes
        .iter()
        .rposition(|&b| is_separator(b))
        .map_or(0, |i| i + 1);
    run.min(bytes.len().saturating_sub(hold_back))
}

/// Where a trailing run of number-shaped text starts (digits and the
/// separators a phone or card number may contain: space, `-`, `.`, `(`,
/// `)`, `+`), from its first non-space byte; `content.len()` when the run
/// has no digit. A card number `4111 1111 ` may go on with `1111 1111`:
/// its groups must not be released one by one.
#[must_use]
pub fn number_from(content: &str) -> usize {
    let bytes = content.as_bytes();
    let shaped = |b: u8| b.is_ascii_digit() || matches!(b, b' ' | b'-' | b'.' | b'(' | b')' | b'+');
    let run = bytes.iter().rposition(|&b| !shaped(b)).map_or(0, |i| i + 1);
    let tail = &bytes[run..];
    if !tail.iter().any(u8::is_ascii_digit) {
        return bytes.len();
    }
    run + tail.iter().position(|&b| b != b' ').unwrap_or(0)
}

/// The start of the scan window: [`TOKENS_BEHIND`] tokens before
/// `released` (the token it may cut included), or — with custom patterns —
/// [`LOOK_BEHIND`] bytes; never more than [`LOOK_BEHIND`]; moved back to a
/// character start. Scanning only this keeps a stream's cost linear with a
/// small constant: what lies further back cannot change a verdict.
fn window_start(full: &str, released: usize, custom: bool) -> usize {
    let floor = released.saturating_sub(LOOK_BEHIND);
    let mut start = floor;
    if !custom {
        let bytes = full.as_bytes();
        let mut at = released;
        while at > floor && !is_separator(bytes[at - 1]) {
            at -= 1;
        }
        for _ in 0..TOKENS_BEHIND {
            while at > floor && is_separator(bytes[at - 1]) {
                at -= 1;
            }
            while at > floor && !is_separator(bytes[at - 1]) {
                at -= 1;
            }
        }
        start = at;
    }
    while !full.is_char_boundary(start) {
        start -= 1;
    }
    start
}

/// The stream verdict: `Err(checks)` to block (names in check order), or
/// `Ok(offset)` — hold the text of `full` from `offset` on (`full.len()`:
/// release everything).
///
/// Matches ending at or before the released boundary were judged on an
/// earlier delta and are ignored. Any other match blocks, whatever the
/// action: the seam takes no replacement, so streamed text cannot be
/// redacted. Before the final check a match that ends exactly at the end
/// of the text so far is not judged yet (the next delta may extend it into
/// a different match, or into none: `4111…1111` followed by `2` is no card
/// number); it is held instead, so what is judged does not depend on how
/// the text was split.
pub fn judge(
    scanner: &Scanner,
    full: &str,
    released: usize,
    last: bool,
    hold_back: usize,
) -> Result<usize, String> {
    let start = window_start(full, released, scanner.has_custom());
    let window = &full.as_bytes()[start..];
    let mut fired = Vec::new();
    let mut hold = full.len();
    for (index, span) in scanner.matches(window) {
        let (from, to) = (start + span.start, start + span.end);
        if to <= released {
            continue;
        }
        if !last && to == full.len() {
            hold = hold.min(from);
            continue;
        }
        if fired.last() != Some(&index) {
            fired.push(index);
        }
    }
    if !fired.is_empty() {
        return Err(scanner.names(&fired));
    }
    if last {
        return Ok(full.len());
    }
    let candidate = full.get(released..).unwrap_or("");
    let own = hold_from(candidate, hold_back).min(number_from(candidate));
    Ok(hold.min(released + own))
}

/// [`judge`] on one segment, as the seam's answer (`reason` builds the
/// block reason from the check names).
pub fn decide(
    scanner: &Scanner,
    segment: Segment<'_>,
    hold_back: usize,
    reason: impl FnOnce(&str) -> String,
) -> StreamDecision {
    match judge(
        scanner,
        segment.full(),
        segment.released_offset(),
        segment.is_final(),
        hold_back,
    ) {
        Err(checks) => StreamDecision::Block(reason(&checks)),
        Ok(offset) if offset >= segment.full().len() => StreamDecision::Release,
        Ok(offset) => StreamDecision::HoldFrom(offset),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn scanner(config: serde_json::Value) -> Scanner {
        let config: Config = serde_json::from_value(config).unwrap();
        Scanner::new(&config).unwrap()
    }

    #[test]
    fn the_hold_starts_at_the_trailing_word_or_hold_back_bytes_before_the_end() {
        let table = [
            ("hello wor", 0, 6),
            ("hello ", 0, 6),
            ("abcdef", 0, 0),
            ("", 0, 0),
            ("hello world", 8, 3),
            ("hi", 99, 0),
            ("hello worldwide", 2, 6),
            ("line\nabc", 0, 5),
            ("tab\tx\ry", 0, 6),
        ];
        for (content, hold_back, from) in table {
            assert_eq!(
                hold_from(content, hold_back),
                from,
                "{content:?}, {hold_back}"
            );
        }
    }

    #[test]
    fn a_trailing_number_is_held_from_its_first_digit_or_sign() {
        assert_eq!(number_from("card 4111 1111 "), 5);
        assert_eq!(number_from("call (555) 12"), 5);
        assert_eq!(number_from("hello "), 6);
        assert_eq!(number_from("a - b"), 5);
        assert_eq!(number_from("4111"), 0);
    }

    /// Drives `judge` as the host does: each delta appended, the hold
    /// applied, a final check with holds ignored. Returns the released text
    /// and the block, if any.
    fn stream(scanner: &Scanner, deltas: &[&str], hold_back: usize) -> (String, Option<String>) {
        let mut full = String::new();
        let mut released = 0;
        let last = deltas.len();
        for (i, delta) in deltas.iter().copied().chain([""]).enumerate() {
            full.push_str(delta);
            match judge(scanner, &full, released, i == last, hold_back) {
                Err(checks) => return (full[..released].to_owned(), Some(checks)),
                Ok(offset) => released = released.max(offset.min(full.len())),
            }
        }
        (full, None)
    }

    #[test]
    fn secrets_split_over_deltas_are_blocked_before_any_of_them_is_released() {
        let all = scanner(serde_json::json!({}));
        let cases: [(&[&str], &str, &str); 5] = [
            (
                &["the number is ", "123-45-6789", " ok"],
                "the number is ",
                "ssn",
            ),
            (&["ssn 123-4", "5-67", "89 done"], "ssn ", "ssn"),
            (
                &["card 4111", "1111", "1111", "1111 end"],
                "card ",
                "credit_card",
            ),
            (
                &["card 4111 ", "1111 1111 ", "1111 end"],
                "card ",
                "credit_card",
            ),
            (
                &["key sk-abc", "defghijklmnopqrstuvwx", "yz end"],
                "key ",
                "api_key",
            ),
        ];
        for (deltas, shown, checks) in cases {
            assert_eq!(
                stream(&all, deltas, 0),
                (shown.to_owned(), Some(checks.to_owned())),
                "{deltas:?}"
            );
        }
    }

    #[test]
    fn a_clean_stream_is_released_whole_and_a_number_that_grows_out_of_shape_is_not_blocked() {
        let all = scanner(serde_json::json!({}));
        assert_eq!(
            stream(&all, &["a perfectly ", "ordinary ", "answer"], 0),
            ("a perfectly ordinary answer".to_owned(), None)
        );
        // 4111…1111 is a card number until a 17th digit arrives.
        assert_eq!(
            stream(&all, &["id 4111111111111111", "2 ok"], 0),
            ("id 41111111111111112 ok".to_owned(), None)
        );
    }

    #[test]
    fn a_match_already_released_is_not_judged_again() {
        let phrase = scanner(serde_json::json!({"custom_patterns": ["alpha"]}));
        // Released before the gate saw it whole: judging it again would
        // block a later, clean delta.
        let released = "alpha ok ";
        let full = format!("{released}more");
        assert_eq!(
            judge(&phrase, &full, released.len(), false, 0),
            Ok(released.len())
        );
    }

    #[test]
    fn a_phrase_spanning_whitespace_leaks_its_leading_words_unless_hold_back_covers_it() {
        let phrase = scanner(serde_json::json!({"custom_patterns": [r"launch\s+code\s+alpha"]}));
        let deltas = ["the launch ", "code ", "alpha is set"];
        let checks = Some(r"custom:launch\s+code\s+alpha".to_owned());
        assert_eq!(
            stream(&phrase, &deltas, 0),
            ("the launch code ".to_owned(), checks.clone())
        );
        assert_eq!(stream(&phrase, &deltas, 64), (String::new(), checks));
    }

    #[test]
    fn the_scan_window_reaches_at_most_4096_bytes_behind_the_boundary() {
        let phrase = scanner(serde_json::json!({"custom_patterns": [r"start\S*end"]}));
        let long = format!("start{}", "x".repeat(LOOK_BEHIND));
        // Released: `start` lies more than 4096 bytes behind the boundary.
        let full = format!("{long}end ");
        assert_eq!(judge(&phrase, &full, long.len(), false, 0), Ok(full.len()));
        let short = "startxx";
        let full = format!("{short}end ");
        assert!(judge(&phrase, &full, short.len(), false, 0).is_err());
    }
}
