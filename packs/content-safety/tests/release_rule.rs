//! The stream release rule against an oracle, for any split and any span:
//! random prose with a whitespace-spanning phrase (`launch\s+code\s+alpha`)
//! padded by 1 byte to twice the hold limit, split into random deltas.
//!
//! The oracle is independent of the gate's automaton: the whole-text scan
//! for matches, and a hand-written regex of the phrase's beginnings for
//! what could still become one.
//!
//! * Block mode: no byte of a match is ever shown; after each offer the
//!   released text ends before every possible beginning of the phrase
//!   that is still alive; the stream is blocked exactly when the text has
//!   a match or, at some offer, a live beginning longer than the limit.
//! * Redact mode: the published text is the whole-text redaction (or,
//!   when a live beginning ran past the limit, a prefix of it that stops
//!   before that beginning); it is blocked exactly in that case.

use content_safety::stream::{simulate, Rules, Why};
use content_safety::{Action, Config, Scanner, REDACTED};
use proptest::prelude::*;
use regex::Regex;

/// A small limit, so spans past it are cheap to make.
const LIMIT: usize = 64;

const PHRASE: &str = r"launch\s+code\s+alpha";

/// Every beginning of a match of [`PHRASE`], written out by hand.
const BEGINNINGS: &str = r"^(?:l(?:a(?:u(?:n(?:c(?:h(?:\s+(?:c(?:o(?:d(?:e(?:\s+(?:a(?:l(?:p(?:h(?:a)?)?)?)?)?)?)?)?)?)?)?)?)?)?)?)?)?$";

fn scanner() -> Scanner {
    let config: Config = serde_json::from_value(serde_json::json!({
        "custom_patterns": [{"pattern": PHRASE, "name": "launch_code"}]
    }))
    .unwrap();
    Scanner::new(&config).unwrap()
}

fn rules(action: Action) -> Rules {
    Rules {
        action,
        hold_back: 0,
        hold_limit: LIMIT,
    }
}

/// One piece of the text: a word (near-misses of the phrase among them),
/// a separator, or the phrase, whole or cut short, with its padding.
fn piece() -> impl Strategy<Value = String> {
    let word = prop::sample::select(vec![
        "the", "a", "lunch", "code", "alpha", "launch", "pad", "is", "set", "launched", "codes",
        "alp", "l",
    ])
    .prop_map(str::to_owned);
    let separator = prop::sample::select(vec![" ", "  ", "\n", "\t"]).prop_map(str::to_owned);
    let pad = || {
        (1..=2 * LIMIT, prop::sample::select(vec![' ', '\n', '\t']))
            .prop_map(|(n, c)| c.to_string().repeat(n))
    };
    let phrase = (pad(), pad(), 1..=3usize).prop_map(|(first, second, words)| {
        let mut text = format!("launch{first}");
        if words >= 2 {
            text.push_str("code");
            text.push_str(&second);
        }
        if words >= 3 {
            text.push_str("alpha");
        }
        text
    });
    prop_oneof![3 => word, 3 => separator, 2 => phrase]
}

/// A text and the cuts that split it into deltas.
fn text_and_cuts() -> impl Strategy<Value = (String, Vec<usize>)> {
    prop::collection::vec(piece(), 0..16)
        .prop_map(|pieces| pieces.concat())
        .prop_flat_map(|text| {
            let len = text.len();
            (
                Just(text),
                prop::collection::vec(0..=len, 0..24).prop_map(|mut cuts| {
                    cuts.sort_unstable();
                    cuts.dedup();
                    cuts
                }),
            )
        })
}

/// The deltas of `text` cut at `cuts`, and where each offer ends.
fn split<'t>(text: &'t str, cuts: &[usize]) -> (Vec<&'t str>, Vec<usize>) {
    let mut deltas = Vec::new();
    let mut ends = Vec::new();
    let mut at = 0;
    for &cut in cuts.iter().chain([text.len()].iter()) {
        if cut > at {
            deltas.push(&text[at..cut]);
            ends.push(cut);
            at = cut;
        }
    }
    (deltas, ends)
}

/// Where, at an offer ending at `end`, a beginning of the phrase is alive.
fn alive_at(beginnings: &Regex, text: &str, end: usize) -> Vec<usize> {
    (0..end)
        .filter(|&start| beginnings.is_match(&text[start..end]))
        .collect()
}

/// The earliest live beginning longer than [`LIMIT`] at some offer.
fn over_limit(beginnings: &Regex, text: &str, ends: &[usize]) -> Option<usize> {
    ends.iter()
        .filter_map(|&end| {
            alive_at(beginnings, text, end)
                .into_iter()
                .find(|&start| end - start > LIMIT)
        })
        .min()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn block_mode_never_shows_a_byte_of_a_match_or_of_a_live_beginning((text, cuts) in text_and_cuts()) {
        let scanner = scanner();
        let beginnings = Regex::new(BEGINNINGS).unwrap();
        let (deltas, ends) = split(&text, &cuts);
        let out = simulate(&scanner, &deltas, rules(Action::Block));
        let shown = out.shown();
        let first_match = scanner.matches(text.as_bytes()).iter().map(|(_, span)| span.start).min();
        if let Some(start) = first_match {
            prop_assert!(shown.len() <= start, "shown {shown:?} reaches the match at {start}");
        }
        // After each offer, nothing released reaches a live beginning.
        let mut released = 0;
        for (end, piece) in ends.iter().zip(&out.released) {
            released += piece.len();
            if let Some(&start) = alive_at(&beginnings, &text, *end).first() {
                prop_assert!(released <= start, "released {released} past a beginning at {start} after {end}");
            }
        }
        let over = over_limit(&beginnings, &text, &ends);
        if let Some(start) = over {
            prop_assert!(shown.len() <= start);
        }
        prop_assert_eq!(out.blocked.is_some(), first_match.is_some() || over.is_some(), "{:?}", out);
        if first_match.is_none() && over.is_some() {
            prop_assert_eq!(out.blocked, Some(("launch_code".to_owned(), Why::OverLimit(LIMIT))));
        }
    }

    #[test]
    fn redact_mode_publishes_the_whole_text_redaction_or_stops_before_a_beginning_past_the_limit((text, cuts) in text_and_cuts()) {
        let scanner = scanner();
        let beginnings = Regex::new(BEGINNINGS).unwrap();
        let (deltas, ends) = split(&text, &cuts);
        let out = simulate(&scanner, &deltas, rules(Action::Redact));
        let shown = out.shown();
        let matches = scanner.matches(text.as_bytes());
        let redacted = scanner.redact(&text).map_or_else(|| text.clone(), |(r, _)| r);
        match over_limit(&beginnings, &text, &ends) {
            None => {
                prop_assert_eq!(&out.blocked, &None);
                prop_assert_eq!(shown, redacted);
            }
            Some(start) => {
                prop_assert_eq!(out.blocked, Some(("launch_code".to_owned(), Why::OverLimit(LIMIT))));
                prop_assert!(redacted.starts_with(&shown), "{shown:?} is not a prefix of {redacted:?}");
                // Where `start` lies in the redacted text.
                let before: Vec<usize> = matches
                    .iter()
                    .filter(|(_, span)| span.end <= start)
                    .map(|(_, span)| span.len())
                    .collect();
                let mapped = start + before.len() * REDACTED.len() - before.iter().sum::<usize>();
                prop_assert!(shown.len() <= mapped);
            }
        }
    }
}

#[test]
fn a_phrase_padded_past_four_kibibytes_is_held_whole_in_both_modes() {
    let scanner = scanner();
    let spaces = " ".repeat(5000);
    let deltas = ["the launch", spaces.as_str(), "code ", "alpha is set"];
    let rules = |action| Rules {
        action,
        hold_back: 0,
        hold_limit: content_safety::DEFAULT_HOLD_LIMIT,
    };
    let block = simulate(&scanner, &deltas, rules(Action::Block));
    assert_eq!(block.shown(), "the ");
    assert_eq!(
        block.blocked,
        Some(("launch_code".to_owned(), Why::Matched))
    );
    let redact = simulate(&scanner, &deltas, rules(Action::Redact));
    assert_eq!(redact.shown(), "the [REDACTED] is set");
    assert_eq!(redact.blocked, None);
}
