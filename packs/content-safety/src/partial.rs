//! Where a match could still be under way at the end of a stream's text:
//! the earliest position from which the text so far is the beginning of a
//! possible match of some check, however far back that is.
//!
//! For each check's regex `R` the gate builds, once, the language of the
//! *beginnings* of its matches, `Pref(R)`: every string that some
//! continuation turns into a match. (`Pref` follows the regex's syntax
//! tree: a literal's beginnings are its byte prefixes, a class's are
//! nothing or one member, a concatenation's are a beginning of its first
//! part or the whole first part followed by a beginning of the rest, a
//! repetition's are some whole copies followed by a beginning of one more,
//! an alternation's are any branch's.) Look-around assertions (`\b`, `^`,
//! `$`) are dropped first: that only widens the language, so a beginning
//! is never missed, and it keeps the automaton free of Unicode word
//! boundaries, which a lazy DFA cannot run on non-ASCII text.
//!
//! All checks' `Pref` languages are compiled, *reversed*, into one lazy
//! DFA (match kind "all", so every accepting position is reported). To
//! find where the hold must start, the DFA reads the text backwards from
//! its end: it accepts after reading `text[p..]` exactly when `text[p..]`
//! is a beginning of a match, and it dies as soon as no earlier position
//! can be one. A query costs at most one DFA step per byte between `from`
//! and the end (usually far fewer: the automaton dies at the first byte
//! that no match can contain there), with a constant per step, and it
//! keeps one state at a time — the lazy DFA's cache may be cleared
//! mid-query without losing anything.

use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::nfa::thompson;
use regex_automata::util::pool::Pool;
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input, MatchKind};
use regex_syntax::hir::{Hir, HirKind, Repetition};
use std::sync::Arc;

/// The checks' possible beginnings, compiled (see the module docs).
pub struct Partials {
    dfa: Arc<DFA>,
    /// One cache per thread that queries at a time.
    caches: Pool<Cache, CacheMaker>,
}

/// Makes a cache for [`Partials::dfa`].
type CacheMaker =
    Box<dyn Fn() -> Cache + Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe>;

impl std::fmt::Debug for Partials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partials")
            .field("patterns", &self.dfa.pattern_len())
            .finish_non_exhaustive()
    }
}

/// The earliest possible beginning of a match (see [`Partials::earliest`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partial {
    /// Where it begins.
    pub start: usize,
    /// The index of its check in the list given to [`Partials::new`].
    pub check: usize,
}

impl Partials {
    /// Compiles the beginnings of `patterns` — each `(regex, unicode)`, in
    /// check order — into one automaton.
    ///
    /// # Errors
    ///
    /// One line, when a pattern does not parse or its automaton would be
    /// too large.
    pub fn new(patterns: &[(&str, bool)]) -> Result<Partials, String> {
        let mut beginnings = Vec::with_capacity(patterns.len());
        for &(pattern, unicode) in patterns {
            let config = syntax::Config::new().unicode(unicode).utf8(false);
            let hir = syntax::parse_with(pattern, &config).map_err(|e| one_line(&e))?;
            beginnings.push(prefixes(&hir));
        }
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .reverse(true)
                    .utf8(false)
                    .which_captures(thompson::WhichCaptures::None),
            )
            .build_many_from_hir(&beginnings)
            .map_err(|e| one_line(&e))?;
        let dfa = DFA::builder()
            .configure(DFA::config().match_kind(MatchKind::All))
            .build_from_nfa(nfa)
            .map_err(|e| one_line(&e))?;
        let dfa = Arc::new(dfa);
        let made = Arc::clone(&dfa);
        let maker: CacheMaker = Box::new(move || made.create_cache());
        Ok(Partials {
            dfa,
            caches: Pool::new(maker),
        })
    }

    /// The earliest position `p` in `from..bytes.len()` from which
    /// `bytes[p..]` is the beginning of a possible match of some check
    /// (matches that end exactly at the end included), with that check;
    /// `None` when there is none. Moved back to the start of a UTF-8
    /// character when it falls inside one. An automaton that gives up (never expected:
    /// it has no look-around) answers `from`: holding is the safe side.
    #[must_use]
    pub fn earliest(&self, bytes: &[u8], from: usize) -> Option<Partial> {
        let end = bytes.len();
        if from >= end {
            return None;
        }
        let dfa = &*self.dfa;
        let mut cache = self.caches.get();
        let gave_up = Some(Partial {
            start: from,
            check: 0,
        });
        let input = Input::new(bytes).range(from..end).anchored(Anchored::Yes);
        let Ok(mut state) = dfa.start_state_reverse(&mut cache, &input) else {
            return gave_up;
        };
        let mut found = None;
        // Matches are reported one byte late: the state entered on the byte
        // at `at` tells whether `bytes[at + 1..]` is accepted.
        let mut at = end;
        loop {
            let next = if at > 0 {
                dfa.next_state(&mut cache, state, bytes[at - 1])
            } else {
                dfa.next_eoi_state(&mut cache, state)
            };
            let Ok(next) = next else {
                return gave_up;
            };
            state = next;
            if state.is_match() && at < end {
                let check = dfa.match_pattern(&cache, state, 0).as_usize();
                found = Some(Partial { start: at, check });
            }
            if state.is_dead() || at == from {
                break;
            }
            if state.is_quit() {
                return gave_up;
            }
            at -= 1;
        }
        found.map(|mut partial| {
            // Back over UTF-8 continuation bytes to the character's start
            // (looked at locally: the text may be long).
            while partial.start > 0 && bytes.get(partial.start).is_some_and(|b| b & 0xC0 == 0x80) {
                partial.start -= 1;
            }
            partial
        })
    }
}

/// `hir` without its look-around assertions: a superset of its language.
fn relaxed(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Look(_) => Hir::empty(),
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) => hir.clone(),
        HirKind::Repetition(rep) => Hir::repetition(Repetition {
            sub: Box::new(relaxed(&rep.sub)),
            ..rep.clone()
        }),
        HirKind::Capture(capture) => relaxed(&capture.sub),
        HirKind::Concat(subs) => Hir::concat(subs.iter().map(relaxed).collect()),
        HirKind::Alternation(subs) => Hir::alternation(subs.iter().map(relaxed).collect()),
    }
}

/// `hir` or nothing.
fn optional(hir: Hir) -> Hir {
    Hir::repetition(Repetition {
        min: 0,
        max: Some(1),
        greedy: true,
        sub: Box::new(hir),
    })
}

/// The beginnings of the matches of `hir` (the empty string included),
/// look-around dropped: see the module docs. Linear in the size of `hir`
/// times its depth.
fn prefixes(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Hir::empty(),
        HirKind::Literal(literal) => {
            // a(b(c)?)? for `abc`.
            let mut nested = Hir::empty();
            for &byte in literal.0.iter().rev() {
                nested = optional(Hir::concat(vec![Hir::literal([byte]), nested]));
            }
            nested
        }
        HirKind::Class(_) => optional(hir.clone()),
        HirKind::Repetition(rep) => match rep.max {
            Some(0) => Hir::empty(),
            max => Hir::concat(vec![
                Hir::repetition(Repetition {
                    min: 0,
                    max: max.map(|m| m - 1),
                    greedy: true,
                    sub: Box::new(relaxed(&rep.sub)),
                }),
                prefixes(&rep.sub),
            ]),
        },
        HirKind::Capture(capture) => prefixes(&capture.sub),
        HirKind::Concat(subs) => {
            // P(a b c) = P(a) | a (P(b) | b P(c)).
            let mut parts = subs.iter().rev();
            let mut nested = parts.next().map_or_else(Hir::empty, prefixes);
            for sub in parts {
                nested =
                    Hir::alternation(vec![prefixes(sub), Hir::concat(vec![relaxed(sub), nested])]);
            }
            nested
        }
        HirKind::Alternation(subs) => Hir::alternation(subs.iter().map(prefixes).collect()),
    }
}

/// An error as one line: its last non-empty line (the description),
/// without the `error: ` prefix and the caret diagram above it.
pub(crate) fn one_line(error: &impl std::fmt::Display) -> String {
    let text = error.to_string();
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    last.trim().trim_start_matches("error: ").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn earliest(patterns: &[&str], text: &str) -> Option<usize> {
        let patterns: Vec<(&str, bool)> = patterns.iter().map(|p| (*p, true)).collect();
        Partials::new(&patterns)
            .unwrap()
            .earliest(text.as_bytes(), 0)
            .map(|p| p.start)
    }

    #[test]
    fn a_phrase_is_held_from_its_first_word_however_far_back() {
        let phrase = [r"launch\s+code\s+alpha"];
        let spaces = " ".repeat(100_000);
        assert_eq!(earliest(&phrase, "the launch"), Some(4));
        assert_eq!(earliest(&phrase, &format!("the launch{spaces}")), Some(4));
        assert_eq!(
            earliest(&phrase, &format!("the launch{spaces}code alp")),
            Some(4)
        );
        // The phrase went another way: nothing can be under way.
        assert_eq!(earliest(&phrase, &format!("the launch{spaces}pad")), None);
        // A prefix of the first word.
        assert_eq!(earliest(&phrase, "ok lau"), Some(3));
        assert_eq!(earliest(&phrase, "nothing here"), None);
    }

    #[test]
    fn every_kind_of_syntax_has_its_beginnings() {
        let cases: [(&str, &str, Option<usize>); 10] = [
            (r"ab|cd", "xc", Some(1)),
            (r"(ab)+c", "xababa", Some(1)),
            (r"a{3}b", "xaaa", Some(1)),
            (r"a{3}b", "xaaaa", Some(2)),
            (r"a{0}b", "xb", Some(1)),
            (r"[0-9]{2}-x", "a1", Some(1)),
            (r"\bkey\b\s*=", "monkey ", Some(3)),
            (r"^secret$", "the secr", Some(4)),
            (r"é+t", "café", Some(3)),
            (r"(?i)token", "a TOK", Some(2)),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(
                earliest(&[pattern], text),
                expected,
                "{pattern} on {text:?}"
            );
        }
    }

    #[test]
    fn the_earliest_beginning_of_any_check_wins_and_names_its_check() {
        let partials = Partials::new(&[("zzz", true), (r"b\s+c", true)]).unwrap();
        let found = partials.earliest(b"a b  ", 0).unwrap();
        assert_eq!(found, Partial { start: 2, check: 1 });
        assert_eq!(partials.earliest(b"a b  ", 3), None);
    }

    #[test]
    fn a_position_inside_a_character_is_moved_back_to_its_start() {
        let partials = Partials::new(&[(r"(?-u:\x80)x", false)]).unwrap();
        // é is C3 A9: a match could begin at its second byte.
        let text = "café";
        let found = partials.earliest(text.as_bytes(), 0);
        assert_eq!(found.map(|p| p.start), None);
        let found = Partials::new(&[(r"(?-u:\xA9)", false)])
            .unwrap()
            .earliest("é".as_bytes(), 0);
        // A complete match ending at the end is held too, from `é`'s start.
        assert_eq!(found.map(|p| p.start), Some(0));
    }
}
