//! The `stream_chunk` handler: judging streamed text delta by delta
//! without ever releasing a byte that a later delta turns into a match.

use crate::config::Action;
use crate::scan::{replace_spans, Scanner};
use chimera_plugin_api::prelude::{Segment, StreamRewrite};
use std::ops::Range;

/// How far before the released boundary a scan starts at most (see
/// [`TOKENS_BEHIND`]).
pub const LOOK_BEHIND: usize = 4096;

/// How many whitespace-separated tokens before the boundary a scan starts.
/// A match cannot begin in released text — the release rule holds every
/// possible beginning of a match of any check, however far back — so this
/// look-behind is a safety net (a match found straddling the boundary
/// still blocks) and the context a check's `\b` reads. Six tokens cover
/// every built-in check that may contain a separator: a spaced phone or
/// card number (four groups), a PEM header (`-----BEGIN RSA PRIVATE
/// KEY`), a password assignment (`password : value`).
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
/// `released` (the token it may cut included), never more than
/// [`LOOK_BEHIND`] bytes, moved back to a character start. Scanning only
/// this keeps an offer's cost in what is held: no match can begin in
/// released text (the release rule holds every possible beginning), so
/// what lies further back cannot change a verdict; the tokens are a
/// safety net and the context of `\b`.
fn window_start(full: &str, released: usize) -> usize {
    let floor = released.saturating_sub(LOOK_BEHIND);
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
    while !full.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// How a stream is judged: the configured action and holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// Block or redact.
    pub action: Action,
    /// At least this many bytes at the end are held (`stream_hold_back`).
    pub hold_back: usize,
    /// A possible match held longer than this blocks the stream
    /// (`stream_hold_limit`).
    pub hold_limit: usize,
}

impl Rules {
    /// The rules of `config`.
    #[must_use]
    pub fn of(config: &crate::Config) -> Rules {
        Rules {
            action: config.action,
            hold_back: config.stream_hold_back,
            hold_limit: config.stream_hold_limit,
        }
    }
}

/// Why a stream is blocked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// A match was found (block mode).
    Matched,
    /// Redact mode: a match began in text already shown, so it could not
    /// be redacted.
    Escalated,
    /// Text that could still become a match would be held longer than
    /// this many bytes (the hold limit): it is never released unjudged.
    OverLimit(usize),
}

/// What the gate does with one segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// Release `full` up to this offset and hold the rest (`full.len()`:
    /// release everything).
    HoldFrom(usize),
    /// Redact mode: the candidate (the text after the released part) with
    /// every judged match replaced by [`REDACTED`](crate::REDACTED), held
    /// from `hold_from` (an offset into the released text followed by the
    /// new candidate).
    Redact {
        /// The redacted candidate.
        candidate: String,
        /// Where the hold starts in the rewritten text.
        hold_from: usize,
    },
    /// Block the stream, naming the checks that fired (or the check whose
    /// possible match ran past the hold limit).
    Block {
        /// The checks, in check order.
        checks: String,
        /// Why.
        why: Why,
    },
}

/// The stream verdict on `full`, of which `released` bytes are shown.
///
/// Matches ending at or before the released boundary were judged on an
/// earlier delta and are ignored. Before the final check a match that
/// ends exactly at the end of the text so far is not judged yet (the next
/// delta may extend it into a different match, or into none: `4111…1111`
/// followed by `2` is no card number); it is held instead, so what is
/// judged does not depend on how the text was split. Any other match
/// blocks (block mode), or is replaced by the marker (redact mode) —
/// unless it began in released text, which cannot be taken back: then
/// redact mode escalates to a block.
///
/// What is held is the release rule of the gate; ARCHITECTURE.md shows it
/// on a worked example. From the earliest of these on:
///
/// * a match not judged yet (it ends at the end of the text);
/// * the trailing run of non-whitespace (a trailing `123-4` may become an
///   SSN, `bob@exa` an address);
/// * a trailing run of number-shaped text (`4111 1111 ` may become a card);
/// * the earliest position from which the text is the beginning of a
///   possible match of any check, however far back
///   ([`Scanner::partial_from`]);
/// * the last `hold_back` bytes.
///
/// When the first two runs alone would hold more than `hold_limit`
/// bytes, only the exact beginnings are held; when a possible match
/// itself would be held longer, the stream is blocked ([`Why::OverLimit`]).
#[must_use]
pub fn judge(
    scanner: &Scanner,
    full: &str,
    released: usize,
    last: bool,
    rules: Rules,
) -> Judgement {
    let start = window_start(full, released);
    let window = &full.as_bytes()[start..];
    // The judged matches, as (check, span).
    let mut found: Vec<(usize, Range<usize>)> = Vec::new();
    // Where the text not judged yet begins, and the check of a match there.
    let mut pending = (full.len(), None);
    for (index, span) in scanner.matches(window) {
        let (from, to) = (start + span.start, start + span.end);
        if to <= released {
            continue;
        }
        if !last && to == full.len() {
            if from < pending.0 {
                pending = (from, Some(index));
            }
            continue;
        }
        found.push((index, from..to));
    }
    let straddled = found.iter().any(|(_, span)| span.start < released);
    if !found.is_empty() && (rules.action == Action::Block || straddled) {
        let mut fired: Vec<usize> = found.iter().map(|(index, _)| *index).collect();
        fired.sort_unstable();
        fired.dedup();
        return Judgement::Block {
            checks: scanner.names(&fired),
            why: if straddled && rules.action == Action::Redact {
                Why::Escalated
            } else {
                Why::Matched
            },
        };
    }
    // Redact mode: a judged match reaching into what is not judged yet
    // waits with it (redacting it now could hide the start of a longer
    // match); the rest is replaced now.
    let mut spans: Vec<(usize, Range<usize>)> = found;
    spans.sort_unstable_by_key(|(_, span)| span.start);
    while let Some(reaching) = spans.iter().position(|(_, span)| span.end > pending.0) {
        let (index, start) = (spans[reaching].0, spans[reaching].1.start);
        if start < pending.0 {
            pending = (start, Some(index));
        }
        spans.retain(|(_, span)| span.end <= pending.0);
    }
    let held = |text: &str, pending: (usize, Option<usize>)| match hold(
        scanner, text, released, last, rules, pending,
    ) {
        Ok(from) => Ok(from),
        Err(check) => Err(Judgement::Block {
            checks: scanner.name(check).to_owned(),
            why: Why::OverLimit(rules.hold_limit),
        }),
    };
    if spans.is_empty() {
        return held(full, pending).map_or_else(|block| block, Judgement::HoldFrom);
    }
    let shifted = spans
        .into_iter()
        .map(|(_, span)| span.start - released..span.end - released)
        .collect();
    let candidate = replace_spans(&full[released..], shifted);
    let grown = released + candidate.len();
    // Everything changed lies before `pending`: it moves by the growth.
    let pending = ((pending.0 + grown).saturating_sub(full.len()), pending.1);
    let mut rewritten = String::with_capacity(grown);
    rewritten.push_str(&full[..released]);
    rewritten.push_str(&candidate);
    match held(&rewritten, pending) {
        Ok(hold_from) => Judgement::Redact {
            candidate,
            hold_from,
        },
        Err(block) => block,
    }
}

/// Where the hold of `full` starts (see [`judge`]): `full.len()` at the
/// final check, else the earliest of `pending` and the holds of the
/// unreleased text. `Err(check)`: a possible match of `check` would be held
/// longer than the limit.
fn hold(
    scanner: &Scanner,
    full: &str,
    released: usize,
    last: bool,
    rules: Rules,
    pending: (usize, Option<usize>),
) -> Result<usize, usize> {
    if last {
        return Ok(full.len());
    }
    let candidate = full.get(released..).unwrap_or("");
    let rough = released + hold_from(candidate, 0).min(number_from(candidate));
    let partial = scanner.partial_from(full.as_bytes(), released);
    let (exact, check) = match partial {
        Some(partial) if partial.start <= pending.0 => (partial.start, Some(partial.check)),
        _ => pending,
    };
    let mut from = rough.min(exact);
    if full.len() - from > rules.hold_limit {
        // The rough runs hold too much: keep only what could really
        // become a match.
        from = exact;
        if full.len() - from > rules.hold_limit {
            return Err(check.unwrap_or(0));
        }
    }
    Ok(from.min(full.len().saturating_sub(rules.hold_back)))
}

/// [`judge`] on one segment, as the seam's answer: `block` builds the
/// block reason (and the notice) from the check names and why. On a host
/// that cannot rewrite streamed text, a redaction is a block too.
pub fn decide(
    scanner: &Scanner,
    segment: Segment<'_>,
    rules: Rules,
    block: impl FnOnce(&str, Why) -> String,
) -> StreamRewrite {
    let full = segment.full();
    let rules = if segment.can_replace() {
        rules
    } else {
        Rules {
            action: Action::Block,
            ..rules
        }
    };
    match judge(
        scanner,
        full,
        segment.released_offset(),
        segment.is_final(),
        rules,
    ) {
        Judgement::Block { checks, why } => StreamRewrite::Block(block(&checks, why)),
        Judgement::HoldFrom(offset) if offset >= full.len() => StreamRewrite::Release,
        Judgement::HoldFrom(offset) => StreamRewrite::HoldFrom(offset),
        Judgement::Redact {
            candidate,
            hold_from,
        } => StreamRewrite::Replace {
            candidate,
            hold_from,
        },
    }
}

/// What a simulated stream came to (see [`simulate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Streamed {
    /// The text released after each offer (the final check last).
    pub released: Vec<String>,
    /// The block, if any: the checks named and why.
    pub blocked: Option<(String, Why)>,
}

impl Streamed {
    /// Everything shown, in order.
    #[must_use]
    pub fn shown(&self) -> String {
        self.released.concat()
    }
}

/// Drives [`judge`] as a host does, for tests and benchmarks: each delta
/// appended and offered on its own, a rewrite applied to the unreleased
/// text, the hold applied, then a final check with holds ignored.
#[must_use]
pub fn simulate(scanner: &Scanner, deltas: &[&str], rules: Rules) -> Streamed {
    let mut full = String::new();
    let mut released = 0;
    let mut out = Streamed {
        released: Vec::new(),
        blocked: None,
    };
    let last = deltas.len();
    for (i, delta) in deltas.iter().copied().chain([""]).enumerate() {
        full.push_str(delta);
        let offset = match judge(scanner, &full, released, i == last, rules) {
            Judgement::Block { checks, why } => {
                out.blocked = Some((checks, why));
                return out;
            }
            Judgement::HoldFrom(offset) => offset,
            Judgement::Redact {
                candidate,
                hold_from,
            } => {
                full.truncate(released);
                full.push_str(&candidate);
                hold_from
            }
        };
        let end = released.max(offset.min(full.len()));
        out.released.push(full[released..end].to_owned());
        released = end;
    }
    out
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

    /// Drives `judge` as the host does (see [`simulate`]).
    fn stream_as(scanner: &Scanner, deltas: &[&str], hold_back: usize, action: Action) -> Streamed {
        simulate(scanner, deltas, rules(action, hold_back))
    }

    fn rules(action: Action, hold_back: usize) -> Rules {
        Rules {
            action,
            hold_back,
            hold_limit: crate::DEFAULT_HOLD_LIMIT,
        }
    }

    /// [`stream_as`] in block mode: (shown, block).
    fn stream(scanner: &Scanner, deltas: &[&str], hold_back: usize) -> (String, Option<String>) {
        let out = stream_as(scanner, deltas, hold_back, Action::Block);
        (out.shown(), out.blocked.map(|(checks, _)| checks))
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
            judge(
                &phrase,
                &full,
                released.len(),
                false,
                rules(Action::Block, 0)
            ),
            Judgement::HoldFrom(released.len())
        );
    }

    #[test]
    fn a_phrase_spanning_whitespace_is_held_from_its_possible_beginning() {
        let phrase = scanner(serde_json::json!({"custom_patterns": [r"launch\s+code\s+alpha"]}));
        let deltas = ["the launch ", "code ", "alpha is set"];
        let blocked = Some("custom-1".to_owned());
        assert_eq!(
            stream(&phrase, &deltas, 0),
            ("the ".to_owned(), blocked.clone())
        );
        assert_eq!(stream(&phrase, &deltas, 64), (String::new(), blocked));
        // Redact mode replaces the whole phrase: nothing of it is shown.
        let redacted = stream_as(&phrase, &deltas, 0, Action::Redact);
        assert_eq!(redacted.shown(), "the [REDACTED] is set");
        assert_eq!(redacted.blocked, None);
        // A phrase that turns out not to be one is released on the delta
        // that tells.
        let out = stream_as(&phrase, &["the launch ", "pad is set"], 0, Action::Block);
        assert_eq!(out.released, ["the ", "launch pad is ", "set"]);
    }

    #[test]
    fn the_release_rule_on_the_worked_example() {
        // ARCHITECTURE.md, "The stream release rule", shows this table.
        let gate = scanner(serde_json::json!({"custom_patterns": [
            {"pattern": r"deploy\s+key\s+omega", "name": "deploy_key"}
        ]}));
        let deltas = ["the deploy ", "key ", "omega now"];
        let block = stream_as(&gate, &deltas, 0, Action::Block);
        assert_eq!(block.released, ["the ", ""]);
        assert_eq!(block.blocked, Some(("deploy_key".to_owned(), Why::Matched)));
        let redact = stream_as(&gate, &deltas, 0, Action::Redact);
        assert_eq!(redact.released, ["the ", "", "[REDACTED] ", "now"]);
        assert_eq!(redact.blocked, None);
        // `stream_hold_back` holds at least the last N bytes.
        let held = stream_as(&gate, &["a clean ", "answer ", "here"], 6, Action::Block);
        assert_eq!(held.released, ["a ", "clean a", "nswe", "r here"]);
        let all = stream_as(&gate, &deltas, 64, Action::Block);
        assert_eq!(all.released, ["", ""]);
    }

    #[test]
    fn redact_mode_replaces_each_match_once_however_the_stream_is_split() {
        let all = scanner(serde_json::json!({}));
        let whole = "reach ops@example.org or dev@example.net today";
        let splits: [&[&str]; 4] = [
            &["reach ops@example.org or dev@example.net today"],
            &["reach ops@example.org ", "or dev@example.net ", "today"],
            &["reach ops@exa", "mple.org or dev@", "example.net today"],
            &[
                "reach o",
                "ps@example.o",
                "rg or dev@example.ne",
                "t",
                " today",
            ],
        ];
        for deltas in splits {
            let out = stream_as(&all, deltas, 0, Action::Redact);
            assert_eq!(
                out.shown(),
                "reach [REDACTED] or [REDACTED] today",
                "{deltas:?}"
            );
            assert_eq!(out.blocked, None);
            assert!(out.released.iter().all(|r| !r.contains('@')), "{out:?}");
        }
        assert_eq!(
            all.redact(whole).unwrap().0,
            "reach [REDACTED] or [REDACTED] today"
        );
    }

    #[test]
    fn a_redaction_that_would_start_in_released_text_escalates_to_a_block() {
        let all = scanner(serde_json::json!({}));
        // `bob@` was shown already (by a gate that held less): only a
        // block can still stop the rest.
        let full = "mail bob@example.com ok";
        assert_eq!(
            judge(&all, full, 9, false, rules(Action::Redact, 0)),
            Judgement::Block {
                checks: "email".to_owned(),
                why: Why::Escalated
            }
        );
        assert_eq!(
            judge(&all, full, 9, false, rules(Action::Block, 0)),
            Judgement::Block {
                checks: "email".to_owned(),
                why: Why::Matched
            }
        );
    }

    #[test]
    fn the_scan_window_reaches_at_most_4096_bytes_behind_the_boundary() {
        let phrase = scanner(serde_json::json!({"custom_patterns": [r"start\S*end"]}));
        let long = format!("start{}", "x".repeat(LOOK_BEHIND));
        // Released: `start` lies more than 4096 bytes behind the boundary.
        let full = format!("{long}end ");
        assert_eq!(
            judge(&phrase, &full, long.len(), false, rules(Action::Block, 0)),
            Judgement::HoldFrom(full.len())
        );
        let short = "startxx";
        let full = format!("{short}end ");
        assert!(matches!(
            judge(&phrase, &full, short.len(), false, rules(Action::Block, 0)),
            Judgement::Block { .. }
        ));
    }
}
