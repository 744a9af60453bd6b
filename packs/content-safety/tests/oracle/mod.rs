//! An oracle for the stream release rule, independent of the gate's
//! automaton: the whole-text scan for matches, and a hand-written regex of
//! the beginnings of one whitespace-spanning phrase for what could still
//! become a match. Shared by the pack's own property test and the one
//! through the `chimera` binary (`tests/all/streamed_gates.rs`).
//!
//! The texts are random prose over a few words (near-misses of the phrase
//! among them) with the phrase `launch\s+code\s+alpha`, whole or cut
//! short, padded by 1 byte to twice the hold limit, split into random
//! deltas. Each delta is one offer.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "shared by two test crates; each uses part of it"
)]

use content_safety::{Config, Scanner, REDACTED};
use proptest::prelude::*;
use regex::Regex;

/// A small limit, so spans past it are cheap to make.
pub const LIMIT: usize = 64;

/// The phrase, a custom pattern.
pub const PHRASE: &str = r"launch\s+code\s+alpha";

/// Its name.
pub const NAME: &str = "launch_code";

/// Every beginning of a match of [`PHRASE`], written out by hand.
const BEGINNINGS: &str = r"^(?:l(?:a(?:u(?:n(?:c(?:h(?:\s+(?:c(?:o(?:d(?:e(?:\s+(?:a(?:l(?:p(?:h(?:a)?)?)?)?)?)?)?)?)?)?)?)?)?)?)?)?)?$";

/// The gate's configuration: every built-in check, the phrase, the limit.
pub fn config(action: &str) -> serde_json::Value {
    serde_json::json!({
        "action": action,
        "scan_stream": true,
        "stream_hold_limit": LIMIT,
        "custom_patterns": [{"pattern": PHRASE, "name": NAME}]
    })
}

/// The scanner of [`config`] (built once).
pub fn scanner() -> &'static Scanner {
    static BUILT: std::sync::OnceLock<Scanner> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let config: Config = serde_json::from_value(config("block")).unwrap();
        Scanner::new(&config).unwrap()
    })
}

/// One piece of the text: a word, a separator, or the phrase, whole or cut
/// short, with its padding.
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

/// A text and its deltas (none empty).
pub fn text_and_deltas(cuts: usize) -> impl Strategy<Value = (String, Vec<String>)> {
    prop::collection::vec(piece(), 0..16)
        .prop_map(|pieces| pieces.concat())
        .prop_flat_map(move |text| {
            let len = text.len();
            (
                Just(text),
                prop::collection::vec(0..=len, 0..cuts).prop_map(|mut cuts| {
                    cuts.sort_unstable();
                    cuts.dedup();
                    cuts
                }),
            )
        })
        .prop_map(|(text, cuts)| {
            let mut deltas = Vec::new();
            let mut at = 0;
            for cut in cuts.into_iter().chain([text.len()]) {
                if cut > at {
                    deltas.push(text[at..cut].to_owned());
                    at = cut;
                }
            }
            (text, deltas)
        })
}

/// What a stream came to, however it was run.
#[derive(Debug)]
pub struct Outcome {
    /// Everything shown.
    pub shown: String,
    /// The text released after each offer, in order (the final check
    /// last, when the stream got that far), when known.
    pub per_offer: Option<Vec<String>>,
    /// Blocked: `true` when for a possible match past the limit.
    pub blocked: Option<bool>,
}

/// Where each offer of `deltas` ends.
fn ends(deltas: &[String]) -> Vec<usize> {
    deltas
        .iter()
        .scan(0, |at, delta| {
            *at += delta.len();
            Some(*at)
        })
        .collect()
}

/// Where, at an offer ending at `end`, a beginning of the phrase is alive.
fn alive_at(text: &str, end: usize) -> Vec<usize> {
    static COMPILED: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let beginnings = COMPILED.get_or_init(|| Regex::new(BEGINNINGS).unwrap());
    (0..end)
        .filter(|&start| beginnings.is_match(&text[start..end]))
        .collect()
}

/// The earliest live beginning longer than [`LIMIT`] at some offer.
fn over_limit(text: &str, deltas: &[String]) -> Option<usize> {
    ends(deltas)
        .into_iter()
        .filter_map(|end| {
            alive_at(text, end)
                .into_iter()
                .find(|&start| end - start > LIMIT)
        })
        .min()
}

/// Block mode: no byte of a match is ever shown; after each offer the
/// released text ends before every live beginning of the phrase; the
/// stream is blocked exactly when the text has a match or, at some offer,
/// a live beginning longer than the limit. `Err`: what went wrong.
pub fn check_block(text: &str, deltas: &[String], out: &Outcome) -> Result<(), String> {
    let scanner = scanner();
    let ends = ends(deltas);
    let shown = &out.shown;
    let first_match = scanner
        .matches(text.as_bytes())
        .iter()
        .map(|(_, span)| span.start)
        .min();
    if let Some(start) = first_match {
        if shown.len() > start {
            return Err(format!("shown {shown:?} reaches the match at {start}"));
        }
    }
    let mut released = 0;
    let per_offer = out.per_offer.as_deref().unwrap_or_default();
    for (&end, piece) in ends.iter().zip(per_offer) {
        released += piece.len();
        if let Some(&start) = alive_at(text, end).first() {
            if released > start {
                return Err(format!(
                    "released {released} past a live beginning at {start} after the offer ending at {end}"
                ));
            }
        }
    }
    let over = over_limit(text, deltas);
    if over.is_some_and(|start| shown.len() > start) {
        return Err(format!(
            "shown {shown:?} reaches a beginning past the limit"
        ));
    }
    let must_block = first_match.is_some() || over.is_some();
    if out.blocked.is_some() != must_block {
        return Err(format!(
            "blocked {:?}, expected a block: {must_block}",
            out.blocked
        ));
    }
    if first_match.is_none() && over.is_some() && out.blocked != Some(true) {
        return Err(format!(
            "blocked {:?}, expected a block past the limit",
            out.blocked
        ));
    }
    Ok(())
}

/// Redact mode: the published text is the whole-text redaction or, when a
/// live beginning ran past the limit, a prefix of it that stops before
/// that beginning (and the stream is blocked exactly then).
pub fn check_redact(text: &str, deltas: &[String], out: &Outcome) -> Result<(), String> {
    let scanner = scanner();
    let shown = &out.shown;
    let matches = scanner.matches(text.as_bytes());
    let redacted = scanner
        .redact(text)
        .map_or_else(|| text.to_owned(), |(r, _)| r);
    match over_limit(text, deltas) {
        None if out.blocked.is_some() => Err(format!("blocked {:?}", out.blocked)),
        None if *shown != redacted => Err(format!("shown {shown:?}, expected {redacted:?}")),
        None => Ok(()),
        Some(_) if out.blocked != Some(true) => Err(format!(
            "blocked {:?}, expected a block past the limit",
            out.blocked
        )),
        Some(_) if !redacted.starts_with(shown.as_str()) => {
            Err(format!("{shown:?} is not a prefix of {redacted:?}"))
        }
        Some(start) => {
            // Where `start` lies in the redacted text.
            let before: Vec<usize> = matches
                .iter()
                .filter(|(_, span)| span.end <= start)
                .map(|(_, span)| span.len())
                .collect();
            let mapped = start + before.len() * REDACTED.len() - before.iter().sum::<usize>();
            if shown.len() > mapped {
                return Err(format!("shown {shown:?} reaches the beginning at {start}"));
            }
            Ok(())
        }
    }
}
