//! The scanner: every check in one pass over the text, at memory speed.
//!
//! No check's regex scans the whole text. Two prefilters find where a
//! built-in check could match, and the check's own regex runs only there
//! (anchored, or over a few bytes around the spot), with the surrounding
//! text as context for `\b`:
//!
//! * one multi-pattern regex of the literals every match starts with or
//!   contains (`@`, `AKIA`, `sk-`, `ghp_`, `xox?-`, `-----BEGIN `, the
//!   password words in any case, `10.`, `172.`, `192.168.`), which the
//!   regex engine searches with SIMD literal search (Teddy / memchr);
//! * a byte-class scan, eight bytes at a time, for the end of every
//!   number-shaped value: four digits after a digit and a separator or
//!   digit (how every phone, SSN and card number ends).
//!
//! Custom patterns (if any) add one pass of one [`regex::bytes::RegexSet`]
//! over all of them. ASCII classes (`(?-u)`) keep the built-in automata
//! small.
//!
//! Past 700 lines only with its tests: the code is its first 628 lines,
//! and the last 330 are the tests that pin the prefilters and the checks
//! they guard together, kept beside them.

use crate::config::{Action, Config};
use crate::partial::{one_line, Partial, Partials};
use chimera_plugin_api::prelude::PackError;
use regex::bytes::RegexSet;
use regex_automata::meta::Regex;
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input};
use std::ops::Range;

/// What replaces each redacted span.
pub const REDACTED: &str = "[REDACTED]";

/// How the prefilters find a built-in check's candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Anchor {
    /// Every match starts with a match of this literal alternation: the
    /// check runs anchored there.
    Starts(&'static str),
    /// Every match contains this literal and no whitespace: the check runs
    /// over the run of non-whitespace around it.
    Within(&'static str),
    /// Every match ends a number-shaped value: the check runs over the
    /// [`NUMBER_WINDOW`] bytes before its end.
    Number,
}

/// How far back from its end a number-shaped match may start (the longest,
/// a card number with separators, has 19 bytes; a phone number with `+1`
/// and parentheses 17).
const NUMBER_WINDOW: usize = 24;

/// A built-in check: its name in reasons, its pattern (in the syntax
/// Python's `re` and Rust's `regex` share, ASCII semantics), how its
/// candidates are found, and whether a match must also pass the Luhn check.
struct Builtin {
    name: &'static str,
    pattern: &'static str,
    anchor: Anchor,
    luhn: bool,
    enabled: fn(&Config) -> bool,
}

/// The built-in checks, in check order.
const BUILTINS: [Builtin; 8] = [
    Builtin {
        name: "email",
        pattern: r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}",
        anchor: Anchor::Within("@"),
        luhn: false,
        enabled: |c| c.check_pii_email,
    },
    Builtin {
        name: "phone",
        pattern: r"(?:\+1[-. ]?)?(?:\(\d{3}\) ?|\b\d{3}[-. ])\d{3}[-. ]\d{4}\b",
        anchor: Anchor::Number,
        luhn: false,
        enabled: |c| c.check_pii_phone,
    },
    Builtin {
        name: "ssn",
        pattern: r"\b\d{3}-\d{2}-\d{4}\b",
        anchor: Anchor::Number,
        luhn: false,
        enabled: |c| c.check_pii_ssn,
    },
    Builtin {
        name: "api_key",
        pattern: r"\bAKIA[0-9A-Z]{16}\b|\bsk-[A-Za-z0-9]{20,}|\bghp_[A-Za-z0-9]{36}\b|\bxox[bporas]-[A-Za-z0-9-]{10,}",
        anchor: Anchor::Starts(r"AKIA|sk-|ghp_|xox[bporas]-"),
        luhn: false,
        enabled: |c| c.check_secrets_api_key,
    },
    Builtin {
        name: "private_key",
        pattern: r"-----BEGIN [A-Z ]*PRIVATE KEY",
        anchor: Anchor::Starts("-----BEGIN "),
        luhn: false,
        enabled: |c| c.check_secrets_private_key,
    },
    Builtin {
        name: "password",
        pattern: r"(?i)(?:password|passwd|pwd|secret|token)\s*[:=]\s*\S+",
        anchor: Anchor::Starts("(?i)password|passwd|pwd|secret|token"),
        luhn: false,
        enabled: |c| c.check_secrets_password,
    },
    Builtin {
        name: "credit_card",
        pattern: r"\b\d{4}[ -]?\d{4}[ -]?\d{4}[ -]?\d{4}\b",
        anchor: Anchor::Number,
        luhn: true,
        enabled: |c| c.check_credit_card,
    },
    Builtin {
        name: "ip_internal",
        pattern: r"\b(?:10\.\d{1,3}\.\d{1,3}\.\d{1,3}|172\.(?:1[6-9]|2\d|3[01])\.\d{1,3}\.\d{1,3}|192\.168\.\d{1,3}\.\d{1,3})\b",
        anchor: Anchor::Starts(r"10\.|172\.|192\.168\."),
        luhn: false,
        enabled: |c| c.check_ip_internal,
    },
];

/// One enabled check.
#[derive(Debug)]
struct Check {
    name: String,
    regex: Regex,
    /// `None` for a custom pattern.
    anchor: Option<Anchor>,
    luhn: bool,
}

/// The enabled checks of one configuration, compiled.
#[derive(Debug)]
pub struct Scanner {
    checks: Vec<Check>,
    /// The literal prefilters (one for the literals matches start with,
    /// one for those they contain): pattern *i* of each is the anchor of
    /// the check at index *i* of its list.
    literals: Vec<(Regex, Vec<usize>)>,
    /// The checks found by the number scan.
    number_checks: Vec<usize>,
    /// All custom patterns, and the check index of the first.
    custom: Option<(RegexSet, usize)>,
    /// Where a match of any check could still be under way, for streams.
    partials: Partials,
}

/// The enabled checks' names and patterns, in check order, as written:
/// built-in patterns in the syntax Python's `re` shares (a benchmark runs
/// them there for comparison); custom patterns as the user gave them.
#[must_use]
pub fn patterns(config: &Config) -> Vec<(String, String)> {
    BUILTINS
        .iter()
        .filter(|b| (b.enabled)(config))
        .map(|b| (b.name.to_owned(), b.pattern.to_owned()))
        .chain(
            config
                .custom_patterns
                .iter()
                .enumerate()
                .map(|(i, p)| (p.shown_name(i), p.pattern.clone())),
        )
        .collect()
}

/// A built-in pattern compiled: ASCII classes, matching bytes.
fn ascii(pattern: &str) -> Result<Regex, String> {
    Regex::builder()
        .syntax(syntax::Config::new().unicode(false).utf8(false))
        .build(pattern)
        .map_err(|e| one_line(&e))
}

/// The ASCII whitespace `\s` matches.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

impl Scanner {
    /// Compiles the enabled checks. An invalid custom pattern is an error.
    ///
    /// # Errors
    ///
    /// A `PackError`, naming the pattern, when a custom pattern is not a valid
    /// regular expression or matches the empty text.
    pub fn new(config: &Config) -> Result<Scanner, PackError> {
        let mut checks = Vec::new();
        // (anchor literals, their checks) for `Starts`, then `Within`.
        let mut groups: [(Vec<&str>, Vec<usize>); 2] = Default::default();
        let mut number_checks = Vec::new();
        for builtin in BUILTINS.iter().filter(|b| (b.enabled)(config)) {
            let regex = ascii(builtin.pattern)
                .map_err(|e| PackError::msg(format!("check {}: {e}", builtin.name)))?;
            match builtin.anchor {
                Anchor::Starts(literals) => {
                    groups[0].0.push(literals);
                    groups[0].1.push(checks.len());
                }
                Anchor::Within(literals) => {
                    groups[1].0.push(literals);
                    groups[1].1.push(checks.len());
                }
                Anchor::Number => number_checks.push(checks.len()),
            }
            checks.push(Check {
                name: builtin.name.to_owned(),
                regex,
                anchor: Some(builtin.anchor),
                luhn: builtin.luhn,
            });
        }
        let mut literals = Vec::new();
        for (anchors, owners) in groups {
            if anchors.is_empty() {
                continue;
            }
            let regex = Regex::builder()
                .syntax(syntax::Config::new().unicode(false).utf8(false))
                .build_many(&anchors)
                .map_err(|e| PackError::msg(format!("checks: {}", one_line(&e))))?;
            literals.push((regex, owners));
        }
        let first_custom = checks.len();
        // Every check's pattern, in check order, for the stream holds.
        let mut all: Vec<(&str, bool)> = BUILTINS
            .iter()
            .filter(|b| (b.enabled)(config))
            .map(|b| (b.pattern, false))
            .collect();
        for (position, custom) in config.custom_patterns.iter().enumerate() {
            let pattern = custom.pattern.as_str();
            let regex = Regex::builder()
                .syntax(syntax::Config::new().utf8(false))
                .build(pattern)
                .map_err(|e| {
                    PackError::msg(format!("custom pattern {pattern:?}: {}", one_line(&e)))
                })?;
            if regex.is_match("") {
                // It would fire on every text, and redact nothing.
                return Err(PackError::msg(format!(
                    "custom pattern {pattern:?} matches the empty text"
                )));
            }
            checks.push(Check {
                name: custom.shown_name(position),
                regex,
                anchor: None,
                luhn: false,
            });
            all.push((pattern, true));
        }
        let custom = if config.custom_patterns.is_empty() {
            None
        } else {
            let set = RegexSet::new(config.custom_patterns.iter().map(|p| &p.pattern))
                .map_err(|e| PackError::msg(format!("custom patterns: {}", one_line(&e))))?;
            Some((set, first_custom))
        };
        let partials =
            Partials::new(&all).map_err(|e| PackError::msg(format!("custom patterns: {e}")))?;
        Ok(Scanner {
            checks,
            literals,
            number_checks,
            custom,
            partials,
        })
    }

    /// The matches of check `index` that its prefilter found at `at`
    /// (a literal's start, or the end of a number-shaped value), each
    /// handed to `sink` until it answers false. Verified: the Luhn check
    /// too. Returns false when `sink` asked to stop.
    ///
    /// `scanned` is where the check's last run of non-whitespace ended
    /// (`Within` checks) or its last match ended (`Starts` checks): a
    /// literal inside it is not scanned again, so `x@x@x@…` and
    /// `password:password:…` cost one pass, not one per literal.
    fn verify(
        &self,
        index: usize,
        bytes: &[u8],
        at: usize,
        scanned: &mut usize,
        sink: &mut dyn FnMut(usize, Range<usize>) -> bool,
    ) -> bool {
        let check = &self.checks[index];
        let range = match check.anchor {
            Some(Anchor::Starts(_)) => {
                // A literal inside this check's last match starts no
                // match that ends past it (the built-in `Starts` patterns
                // end in a run that the earlier match already took to its
                // end), so `password:password:…` costs one pass, not one
                // per literal.
                if at < *scanned {
                    return true;
                }
                let input = Input::new(bytes).range(at..).anchored(Anchored::Yes);
                return match check.regex.search(&input) {
                    Some(found) => {
                        *scanned = found.end();
                        sink(index, found.range())
                    }
                    None => true,
                };
            }
            Some(Anchor::Within(_)) => {
                if at < *scanned {
                    return true;
                }
                let start = bytes[*scanned..at]
                    .iter()
                    .rposition(|&b| is_space(b))
                    .map_or(*scanned, |i| *scanned + i + 1);
                let end = bytes[at..]
                    .iter()
                    .position(|&b| is_space(b))
                    .map_or(bytes.len(), |i| at + i);
                *scanned = end;
                start..end
            }
            Some(Anchor::Number) => at.saturating_sub(NUMBER_WINDOW)..at,
            None => 0..bytes.len(),
        };
        for found in check.regex.find_iter(Input::new(bytes).range(range)) {
            if check.luhn && !luhn(&bytes[found.range()]) {
                continue;
            }
            if !sink(index, found.range()) {
                return false;
            }
        }
        true
    }

    /// Every verified match in `bytes`, as (check, span), handed to `sink`
    /// until it answers false. `wanted(check)` false skips a check's
    /// candidates. A span may be reported more than once.
    fn visit(
        &self,
        bytes: &[u8],
        wanted: &dyn Fn(usize) -> bool,
        sink: &mut dyn FnMut(usize, Range<usize>) -> bool,
    ) {
        // Per check: where the last run of non-whitespace scanned ended.
        let mut scanned = vec![0; self.checks.len()];
        for (literals, owners) in &self.literals {
            let mut from = 0;
            while let Some(found) = literals.search(&Input::new(bytes).range(from..)) {
                let check = owners[found.pattern().as_usize()];
                if wanted(check)
                    && !self.verify(check, bytes, found.start(), &mut scanned[check], sink)
                {
                    return;
                }
                from = found.start() + 1;
            }
        }
        if self.number_checks.iter().any(|&c| wanted(c)) {
            let mut go_on = true;
            number_ends(bytes, |end| {
                for &check in &self.number_checks {
                    if wanted(check) && !self.verify(check, bytes, end, &mut 0, sink) {
                        go_on = false;
                        return false;
                    }
                }
                true
            });
            if !go_on {
                return;
            }
        }
        if let Some((set, first)) = &self.custom {
            for i in &set.matches(bytes) {
                if wanted(first + i) && !self.verify(first + i, bytes, 0, &mut 0, sink) {
                    return;
                }
            }
        }
    }

    /// The checks that fire on `text`, in check order. Each check stops
    /// being verified once it fired, and the scan stops once all fired.
    #[must_use]
    pub fn triggered(&self, text: &str) -> Vec<usize> {
        let fired: Vec<std::cell::Cell<bool>> = (0..self.checks.len())
            .map(|_| std::cell::Cell::new(false))
            .collect();
        let mut left = self.checks.len();
        self.visit(
            text.as_bytes(),
            &|check| !fired[check].get(),
            &mut |check, _| {
                if !fired[check].replace(true) {
                    left -= 1;
                }
                left > 0
            },
        );
        (0..self.checks.len()).filter(|&i| fired[i].get()).collect()
    }

    /// True when custom patterns are configured (their matches may span
    /// any text, whitespace included).
    #[must_use]
    pub fn has_custom(&self) -> bool {
        self.custom.is_some()
    }

    /// Every match of every check in `bytes`, sorted by check then span,
    /// without duplicates.
    #[must_use]
    pub fn matches(&self, bytes: &[u8]) -> Vec<(usize, Range<usize>)> {
        let mut all = Vec::new();
        self.visit(bytes, &|_| true, &mut |check, span| {
            all.push((check, span));
            true
        });
        all.sort_unstable_by_key(|(check, span)| (*check, span.start, span.end));
        all.dedup();
        all
    }

    /// The names of `checks`, joined with `, ` (a name that several
    /// custom checks share, once).
    #[must_use]
    pub fn names(&self, checks: &[usize]) -> String {
        let mut names: Vec<&str> = Vec::with_capacity(checks.len());
        for &i in checks {
            let name = self.checks[i].name.as_str();
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names.join(", ")
    }

    /// The earliest position of `bytes` from `from` on where a match of
    /// some check could be under way at the end — `bytes[p..]` begins a
    /// possible match, however long — and that check (see [`Partials`]).
    /// `None` when nothing could.
    #[must_use]
    pub fn partial_from(&self, bytes: &[u8], from: usize) -> Option<Partial> {
        self.partials.earliest(bytes, from)
    }

    /// The name of check `index`.
    #[must_use]
    pub fn name(&self, index: usize) -> &str {
        self.checks
            .get(index)
            .map_or("", |check| check.name.as_str())
    }

    /// `text` with every match of every firing check replaced by
    /// [`REDACTED`] (overlapping matches are one marker), and the checks
    /// that fired; `None` when none fires.
    #[must_use]
    pub fn redact(&self, text: &str) -> Option<(String, Vec<usize>)> {
        let found = self.matches(text.as_bytes());
        if found.is_empty() {
            return None;
        }
        let mut fired: Vec<usize> = found.iter().map(|(check, _)| *check).collect();
        fired.dedup();
        let spans = found.into_iter().map(|(_, span)| span).collect();
        Some((replace_spans(text, spans), fired))
    }
}

/// One flag (the byte's high bit) per byte of `word` that is an ASCII digit.
fn digit_flags(word: u64) -> u64 {
    const LOW: u64 = 0x0101_0101_0101_0101;
    let t = word ^ (0x30 * LOW);
    let not_digit = (((t >> 4) & (0x0F * LOW)) + 0x7F * LOW) | ((t & (0x0F * LOW)) + 0x76 * LOW);
    !not_digit & (0x80 * LOW)
}

/// One flag (the byte's high bit) per byte of `word` equal to `byte`.
fn byte_flags(word: u64, byte: u8) -> u64 {
    const LOW: u64 = 0x0101_0101_0101_0101;
    let y = word ^ (u64::from(byte) * LOW);
    !(((y & (0x7F * LOW)) + 0x7F * LOW) | y) & (0x80 * LOW)
}

/// Calls `f` with the end (exclusive) of every run of four digits that
/// follows a separator (space, `-`, `.`) or digit that follows a digit —
/// how every phone, SSN and card number ends — until `f` answers false.
/// Eight bytes at a time; separators are looked at only where four digits
/// end.
fn number_ends(bytes: &[u8], mut f: impl FnMut(usize) -> bool) {
    let (mut digits, mut previous) = (0u64, 0u64);
    // One word; false when `f` asked to stop.
    let mut step = |word: u64, at: usize| -> bool {
        let d = digit_flags(word);
        if d != 0 {
            // This word's flags above the previous word's: byte k of the
            // upper half is byte k of this word, shifting by 8·j looks j back.
            let dd = (u128::from(d) << 64) | u128::from(digits);
            let runs = dd & (dd << 8) & (dd << 16) & (dd << 24);
            if runs >> 64 != 0 {
                let shaped = |w: u64, d: u64| {
                    d | byte_flags(w, b' ') | byte_flags(w, b'-') | byte_flags(w, b'.')
                };
                let ss = (u128::from(shaped(word, d)) << 64) | u128::from(shaped(previous, digits));
                let mut hits = u64::try_from((runs & (ss << 32) & (dd << 40)) >> 64).unwrap_or(0);
                while hits != 0 {
                    let byte = hits.trailing_zeros() as usize / 8;
                    if !f(at + byte + 1) {
                        return false;
                    }
                    hits &= hits - 1;
                }
            }
        }
        digits = d;
        previous = word;
        true
    };
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for w in &mut words {
        let word = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        if !step(word, at) {
            return;
        }
        at += 8;
    }
    let mut tail = [0u8; 8];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    step(u64::from_le_bytes(tail), at);
}

/// `text` with `spans` (byte ranges, any order) each replaced by
/// [`REDACTED`], overlapping spans merged into one. A span is widened to
/// character boundaries, so the result is always well-formed.
#[must_use]
pub fn replace_spans(text: &str, spans: Vec<Range<usize>>) -> String {
    let mut spans: Vec<Range<usize>> = spans
        .into_iter()
        .map(|span| {
            let (mut start, mut end) = (span.start.min(text.len()), span.end.min(text.len()));
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            while !text.is_char_boundary(end) {
                end += 1;
            }
            start..end
        })
        .filter(|span| !span.is_empty())
        .collect();
    spans.sort_unstable_by_key(|span| span.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for span in spans {
        match merged.last_mut() {
            Some(last) if span.start < last.end => last.end = last.end.max(span.end),
            _ => merged.push(span),
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for span in merged {
        out.push_str(&text[at..span.start]);
        out.push_str(REDACTED);
        at = span.end;
    }
    out.push_str(&text[at..]);
    out
}

/// The Luhn check over the digits of `candidate` (separators skipped).
#[must_use]
pub fn luhn(candidate: &[u8]) -> bool {
    let mut sum = 0u32;
    let mut count = 0u32;
    for &b in candidate.iter().rev().filter(|b| b.is_ascii_digit()) {
        let mut digit = u32::from(b - b'0');
        if count % 2 == 1 {
            digit *= 2;
            if digit > 9 {
                digit -= 9;
            }
        }
        sum += digit;
        count += 1;
    }
    count > 0 && sum % 10 == 0
}

/// The verdict of one configuration on one text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing fired.
    Clean,
    /// Block, naming the checks that fired.
    Block(String),
    /// Let this redacted text through instead; the checks that fired.
    Redacted(String, String),
}

impl Scanner {
    /// What `action` does with `text`.
    #[must_use]
    pub fn judge(&self, action: Action, text: &str) -> Verdict {
        match action {
            Action::Block => {
                let fired = self.triggered(text);
                if fired.is_empty() {
                    Verdict::Clean
                } else {
                    Verdict::Block(self.names(&fired))
                }
            }
            Action::Redact => match self.redact(text) {
                None => Verdict::Clean,
                Some((text, fired)) => Verdict::Redacted(text, self.names(&fired)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scanner(config: serde_json::Value) -> Scanner {
        let config: Config = serde_json::from_value(config).unwrap();
        Scanner::new(&config).unwrap()
    }

    fn fired(scanner: &Scanner, text: &str) -> String {
        scanner.names(&scanner.triggered(text))
    }

    #[test]
    fn each_check_fires_on_its_own_kind_of_value_and_names_only_itself() {
        let all = scanner(serde_json::json!({}));
        let cases = [
            ("write to bob@example.com soon", "email"),
            ("call 555-123-4567 now", "phone"),
            ("call (555) 123-4567 now", "phone"),
            ("call +1 555 123 4567 now", "phone"),
            ("ssn 123-45-6789 here", "ssn"),
            ("aws AKIAIOSFODNN7EXAMPLE key", "api_key"),
            ("openai sk-abcdefghijklmnopqrstuvwx ok", "api_key"),
            ("gh ghp_abcdefghijklmnopqrstuvwxyz0123456789 ok", "api_key"),
            ("slack xoxb-1234567890-abcdefghij ok", "api_key"),
            ("-----BEGIN RSA PRIVATE KEY-----\nMIIE", "private_key"),
            ("-----BEGIN PRIVATE KEY-----", "private_key"),
            ("password: hunter2", "password"),
            ("PASSWD=hunter2", "password"),
            ("the token = abc123", "password"),
            ("card 4111 1111 1111 1111 ok", "credit_card"),
            ("card 4111-1111-1111-1111 ok", "credit_card"),
            ("card 4111111111111111 ok", "credit_card"),
            ("host 10.1.2.3 up", "ip_internal"),
            ("host 172.20.0.5 up", "ip_internal"),
            ("host 192.168.1.10 up", "ip_internal"),
        ];
        for (text, name) in cases {
            assert_eq!(fired(&all, text), name, "{text}");
        }
    }

    #[test]
    fn clean_text_and_near_misses_fire_nothing() {
        let all = scanner(serde_json::json!({}));
        for text in [
            "the build passed in 3.21s on 2026-12-02 at 12:03:55",
            "public host 8.8.8.8 and 172.15.0.1 and 172.32.0.1",
            "task-abcdefghijklmnopqrstuvwxyz is not a key",
            "card 4111 1111 1111 1112 fails the Luhn check",
            "tokens: 5, passwords are long",
            "timestamp 1733100000 is not a phone number",
        ] {
            assert_eq!(fired(&all, text), "", "{text}");
        }
    }

    #[test]
    fn the_luhn_check_accepts_valid_numbers_and_skips_separators() {
        assert!(luhn(b"4111111111111111"));
        assert!(luhn(b"4111 1111 1111 1111"));
        assert!(luhn(b"5500-0000-0000-0004"));
        assert!(!luhn(b"4111111111111112"));
        assert!(!luhn(b""));
    }

    #[test]
    fn names_follow_check_order_not_text_order() {
        let all = scanner(serde_json::json!({"custom_patterns": ["launch code"]}));
        assert_eq!(
            fired(
                &all,
                "launch code 10.0.0.1, then 123-45-6789 and bob@example.com"
            ),
            "email, ssn, ip_internal, custom-1"
        );
        let named = scanner(serde_json::json!({"custom_patterns": [
            {"pattern": "launch code", "name": "launch_code"},
            "omega",
            {"pattern": "alpha"}
        ]}));
        assert_eq!(
            fired(&named, "launch code omega alpha"),
            "launch_code, custom-2, custom-3"
        );
    }

    #[test]
    fn a_custom_name_must_be_short_plain_and_not_a_built_in_one() {
        for (name, error) in [
            ("", "must be 1 to 64"),
            ("two words", "must be 1 to 64"),
            ("email", "is a built-in check's name"),
            ("custom-2", "is kept for unnamed patterns"),
        ] {
            let config = serde_json::json!({"custom_patterns": [{"pattern": "x", "name": name}]});
            let refused = serde_json::from_value::<Config>(config)
                .unwrap_err()
                .to_string();
            assert!(refused.contains(error), "{name:?}: {refused}");
        }
        let config = serde_json::json!({"custom_patterns": [{"pattern": "x", "nmae": "y"}]});
        assert!(serde_json::from_value::<Config>(config).is_err());
    }

    #[test]
    fn a_possible_beginning_of_a_match_is_found_and_prose_is_not_held() {
        let phrase = scanner(serde_json::json!({"custom_patterns": [r"deploy\s+key\s+omega"]}));
        let at = |text: &str| phrase.partial_from(text.as_bytes(), 0).map(|p| p.start);
        assert_eq!(at("the deploy "), Some(4));
        assert_eq!(at("the deploy key "), Some(4));
        assert_eq!(at("the deploy keys "), None);
        // A trailing word may begin an address (`keys@host.org`).
        assert_eq!(at("the deploy keys"), Some(11));
        assert_eq!(at("a plain sentence, "), None);
        let found = phrase.partial_from(b"the deploy ", 0).unwrap();
        assert_eq!(phrase.name(found.check), "custom-1");
        let builtins = scanner(serde_json::json!({}));
        let at = |text: &str| builtins.partial_from(text.as_bytes(), 0).map(|p| p.start);
        assert_eq!(at("set password : "), Some(4));
        assert_eq!(at("-----BEGIN RSA "), Some(0));
        assert_eq!(at("passwords are long and "), None);
        assert_eq!(at("call 555-12"), Some(5));
    }

    #[test]
    fn a_switched_off_check_never_fires() {
        let no_email = scanner(serde_json::json!({"check_pii_email": false}));
        assert_eq!(fired(&no_email, "bob@example.com"), "");
        assert_eq!(fired(&no_email, "bob@example.com 10.0.0.1"), "ip_internal");
    }

    #[test]
    fn redaction_replaces_every_match_and_merges_overlapping_ones() {
        let all = scanner(serde_json::json!({}));
        let (text, fired) = all
            .redact("mail bob@example.com or amy@example.org today")
            .unwrap();
        assert_eq!(text, "mail [REDACTED] or [REDACTED] today");
        assert_eq!(all.names(&fired), "email");
        // The password value is an email: one span covers both matches.
        let (text, fired) = all.redact("token=bob@example.com ok").unwrap();
        assert_eq!(text, "[REDACTED] ok");
        assert_eq!(all.names(&fired), "email, password");
        assert_eq!(all.redact("nothing here"), None);
        // Matches inside a match: one marker, and each literal of the run
        // is not searched from again.
        let run = "password:".repeat(20_000);
        let (text, fired) = all.redact(&format!("{run} ok")).unwrap();
        assert_eq!(text, "[REDACTED] ok");
        assert_eq!(all.names(&fired), "password");
        let (text, _) = all.redact("pwd=a x secret: b").unwrap();
        assert_eq!(
            text, "[REDACTED] x [REDACTED]",
            "separate matches stay apart"
        );
    }

    #[test]
    fn a_card_shaped_number_failing_luhn_is_not_redacted_but_a_valid_one_is() {
        let all = scanner(serde_json::json!({}));
        let (text, _) = all
            .redact("4111 1111 1111 1112 and 4111 1111 1111 1111")
            .unwrap();
        assert_eq!(text, "4111 1111 1111 1112 and [REDACTED]");
    }

    #[test]
    fn spans_are_merged_and_widened_to_character_boundaries() {
        assert_eq!(replace_spans("abcdef", vec![3..5, 1..4]), "a[REDACTED]f");
        assert_eq!(
            replace_spans("abcdef", vec![0..1, 1..2]),
            "[REDACTED][REDACTED]cdef"
        );
        // `é` is bytes 1..3; a span ending inside it takes all of it.
        assert_eq!(
            replace_spans("né!", std::iter::once(0..2).collect()),
            "[REDACTED]!"
        );
    }

    #[test]
    fn an_invalid_custom_pattern_or_one_matching_empty_text_is_a_one_line_error() {
        let config: Config =
            serde_json::from_value(serde_json::json!({"custom_patterns": ["(unclosed"]})).unwrap();
        let error = Scanner::new(&config).unwrap_err().to_string();
        assert!(!error.contains('\n'), "{error}");
        assert!(
            error.starts_with("custom pattern \"(unclosed\": "),
            "{error}"
        );
        let config: Config =
            serde_json::from_value(serde_json::json!({"custom_patterns": ["x*"]})).unwrap();
        let error = Scanner::new(&config).unwrap_err().to_string();
        assert_eq!(error, "custom pattern \"x*\" matches the empty text");
    }

    #[test]
    fn number_ends_are_found_across_word_boundaries_and_in_the_tail() {
        let ends = |text: &str| {
            let mut all = Vec::new();
            number_ends(text.as_bytes(), |end| {
                all.push(end);
                true
            });
            all
        };
        assert_eq!(ends("ab 123-45-6789"), [14]);
        assert_eq!(ends("1234567"), [6, 7]);
        assert_eq!(ends("seven x 555 123 4567."), [20]);
        assert_eq!(
            ends("2026-12-02 12:03:55.123 in 4321 ms"),
            Vec::<usize>::new()
        );
    }

    #[test]
    fn a_valid_card_right_after_a_card_shaped_number_is_still_found() {
        let all = scanner(serde_json::json!({}));
        let text = "123456789012 4111 1111 1111 1111";
        assert_eq!(fired(&all, text), "credit_card");
        assert_eq!(reference(&Config::default(), text, true), "credit_card");
    }

    #[test]
    fn checks_see_the_text_around_their_candidates() {
        let all = scanner(serde_json::json!({}));
        for text in [
            "x4111111111111111",
            "41111111111111112",
            "abc123-45-6789",
            "sk-short",
        ] {
            assert_eq!(fired(&all, text), "", "{text}");
        }
        // Literals that overlap another check's are still seen.
        assert_eq!(fired(&all, "sk-----BEGIN RSA PRIVATE KEY"), "private_key");
        assert_eq!(fired(&all, "secretoken: abc"), "password");
    }

    /// Every check's regex over the whole text, one after another: what
    /// the prefilters must agree with. A card number is looked for from
    /// every start (`overlapping`) or as the regex's leftmost matches do
    /// (not): a valid number right after a card-shaped one that fails the
    /// Luhn check (`123456789012 4111 1111 1111 1111`) is missed by the
    /// leftmost matches alone, and the prefilter, which looks back from
    /// each number's end, finds it.
    fn reference(config: &Config, text: &str, overlapping: bool) -> String {
        let names: Vec<String> = patterns(config)
            .into_iter()
            .filter(|(name, pattern)| {
                let regex = regex::bytes::Regex::new(&format!("(?-u){pattern}")).unwrap();
                let bytes = text.as_bytes();
                if name != "credit_card" {
                    return regex.is_match(bytes);
                }
                if overlapping {
                    (0..bytes.len()).any(|start| {
                        regex
                            .find_at(bytes, start)
                            .is_some_and(|m| luhn(m.as_bytes()))
                    })
                } else {
                    regex.find_iter(bytes).any(|m| luhn(m.as_bytes()))
                }
            })
            .map(|(name, _)| name)
            .collect();
        names.join(", ")
    }

    const PIECES: [&str; 28] = [
        " ",
        " ",
        "\n",
        "-",
        ".",
        "x",
        "word",
        "2026-12-02",
        "12",
        "7",
        "4111 1111 1111 1111",
        "4111111111111111",
        "123-45-6789",
        "555-123-4567",
        "(555) 123-4567",
        "bob@example.com",
        "@",
        "example.com",
        "AKIAIOSFODNN7EXAMPLE",
        "sk-abcdefghijklmnopqrstuvwx",
        "xoxb-",
        "1234567890",
        "-----BEGIN ",
        "RSA PRIVATE KEY",
        "Password",
        ": hunter2",
        "10.1.2.3",
        "192.168.",
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        #[test]
        fn the_prefiltered_scan_fires_what_the_regexes_find_and_nothing_that_is_not_there(
            picks in proptest::collection::vec(0..PIECES.len(), 0..24)
        ) {
            let text: String = picks.iter().map(|&i| PIECES[i]).collect();
            let config = Config::default();
            let all = Scanner::new(&config).unwrap();
            let fired = fired(&all, &text);
            // At least what the regexes' own matches find; at most what a
            // match from any start finds (nothing that is not there).
            let least = reference(&config, &text, false);
            let most = reference(&config, &text, true);
            let names = |list: &str| -> Vec<String> {
                list.split(", ").filter(|n| !n.is_empty()).map(str::to_owned).collect()
            };
            for name in names(&least) {
                proptest::prop_assert!(names(&fired).contains(&name), "{} missed in {:?}", name, text);
            }
            for name in names(&fired) {
                proptest::prop_assert!(names(&most).contains(&name), "{} not there in {:?}", name, text);
            }
        }
    }
}
