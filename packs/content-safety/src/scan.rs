//! The scanner: every check in one pass over the text.
//!
//! All checks are compiled into one [`RegexSet`] (a single lazy DFA over
//! the union of the patterns, ASCII-only classes for the built-in checks),
//! so finding which checks fire costs one pass however many checks are on.
//! Only where a check fires is its own regex run again: for the spans to
//! redact, and for the card check's Luhn verification.

use crate::config::{Action, Config};
use chimera_plugin_api::prelude::PackError;
use regex::bytes::{Regex, RegexSet};
use std::ops::Range;

/// What replaces each redacted span.
pub const REDACTED: &str = "[REDACTED]";

/// A built-in check: its name in reasons, its pattern (in the syntax
/// Python's `re` and Rust's `regex` share, ASCII semantics), and whether a
/// match must also pass the Luhn check.
struct Builtin {
    name: &'static str,
    pattern: &'static str,
    luhn: bool,
    enabled: fn(&Config) -> bool,
}

/// The built-in checks, in check order.
const BUILTINS: [Builtin; 8] = [
    Builtin {
        name: "email",
        pattern: r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}",
        luhn: false,
        enabled: |c| c.check_pii_email,
    },
    Builtin {
        name: "phone",
        pattern: r"(?:\+1[-. ]?)?(?:\(\d{3}\) ?|\b\d{3}[-. ])\d{3}[-. ]\d{4}\b",
        luhn: false,
        enabled: |c| c.check_pii_phone,
    },
    Builtin {
        name: "ssn",
        pattern: r"\b\d{3}-\d{2}-\d{4}\b",
        luhn: false,
        enabled: |c| c.check_pii_ssn,
    },
    Builtin {
        name: "api_key",
        pattern: r"\bAKIA[0-9A-Z]{16}\b|\bsk-[A-Za-z0-9]{20,}|\bghp_[A-Za-z0-9]{36}\b|\bxox[bporas]-[A-Za-z0-9-]{10,}",
        luhn: false,
        enabled: |c| c.check_secrets_api_key,
    },
    Builtin {
        name: "private_key",
        pattern: r"-----BEGIN [A-Z ]*PRIVATE KEY",
        luhn: false,
        enabled: |c| c.check_secrets_private_key,
    },
    Builtin {
        name: "password",
        pattern: r"(?i)(?:password|passwd|pwd|secret|token)\s*[:=]\s*\S+",
        luhn: false,
        enabled: |c| c.check_secrets_password,
    },
    Builtin {
        name: "credit_card",
        pattern: r"\b\d{4}[ -]?\d{4}[ -]?\d{4}[ -]?\d{4}\b",
        luhn: true,
        enabled: |c| c.check_credit_card,
    },
    Builtin {
        name: "ip_internal",
        pattern: r"\b(?:10\.\d{1,3}\.\d{1,3}\.\d{1,3}|172\.(?:1[6-9]|2\d|3[01])\.\d{1,3}\.\d{1,3}|192\.168\.\d{1,3}\.\d{1,3})\b",
        luhn: false,
        enabled: |c| c.check_ip_internal,
    },
];

/// One enabled check.
#[derive(Debug)]
struct Check {
    name: String,
    regex: Regex,
    luhn: bool,
}

/// The enabled checks of one configuration, compiled.
#[derive(Debug)]
pub struct Scanner {
    checks: Vec<Check>,
    set: RegexSet,
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
                .map(|p| (format!("custom:{p}"), p.clone())),
        )
        .collect()
}

/// A regex error as one line: its last line (the description), without
/// the `error: ` prefix and the caret diagram above it.
fn one_line(error: &regex::Error) -> String {
    let text = error.to_string();
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    last.trim().trim_start_matches("error: ").to_owned()
}

impl Scanner {
    /// Compiles the enabled checks. An invalid custom pattern is an error.
    pub fn new(config: &Config) -> Result<Scanner, PackError> {
        let mut checks = Vec::new();
        let mut sources = Vec::new();
        for builtin in BUILTINS.iter().filter(|b| (b.enabled)(config)) {
            // ASCII classes: the lazy DFA stays small and fast.
            let source = format!("(?-u){}", builtin.pattern);
            let regex = Regex::new(&source)
                .map_err(|e| PackError::msg(format!("check {}: {}", builtin.name, one_line(&e))))?;
            checks.push(Check {
                name: builtin.name.to_owned(),
                regex,
                luhn: builtin.luhn,
            });
            sources.push(source);
        }
        for pattern in &config.custom_patterns {
            let regex = Regex::new(pattern).map_err(|e| {
                PackError::msg(format!("custom pattern {pattern:?}: {}", one_line(&e)))
            })?;
            checks.push(Check {
                name: format!("custom:{pattern}"),
                regex,
                luhn: false,
            });
            sources.push(pattern.clone());
        }
        let set = RegexSet::new(&sources)
            .map_err(|e| PackError::msg(format!("checks: {}", one_line(&e))))?;
        Ok(Scanner { checks, set })
    }

    /// The checks that fire on `text`, in check order (one pass; the card
    /// check's candidates are Luhn-verified only where it fires).
    #[must_use]
    pub fn triggered(&self, text: &str) -> Vec<usize> {
        let bytes = text.as_bytes();
        self.set
            .matches(bytes)
            .into_iter()
            .filter(|&i| !self.checks[i].luhn || self.spans(i, bytes).next().is_some())
            .collect()
    }

    /// Every match of check `index` in `bytes` (verified), as byte ranges.
    pub(crate) fn spans<'t>(
        &'t self,
        index: usize,
        bytes: &'t [u8],
    ) -> impl Iterator<Item = Range<usize>> + 't {
        let check = &self.checks[index];
        check
            .regex
            .find_iter(bytes)
            .filter(move |m| !check.luhn || luhn(m.as_bytes()))
            .map(|m| m.range())
    }

    /// The checks that may fire somewhere in `bytes` (unverified).
    pub(crate) fn candidates(&self, bytes: &[u8]) -> impl Iterator<Item = usize> {
        self.set.matches(bytes).into_iter()
    }

    /// The names of `checks`, joined with `, `.
    #[must_use]
    pub fn names(&self, checks: &[usize]) -> String {
        let names: Vec<&str> = checks
            .iter()
            .map(|&i| self.checks[i].name.as_str())
            .collect();
        names.join(", ")
    }

    /// `text` with every match of every firing check replaced by
    /// [`REDACTED`] (overlapping and touching spans merged into one), and
    /// the checks that fired; `None` when none fires.
    #[must_use]
    pub fn redact(&self, text: &str) -> Option<(String, Vec<usize>)> {
        let bytes = text.as_bytes();
        let mut fired = Vec::new();
        let mut spans = Vec::new();
        for index in self.candidates(bytes) {
            let before = spans.len();
            spans.extend(self.spans(index, bytes));
            if spans.len() > before {
                fired.push(index);
            }
        }
        if fired.is_empty() {
            return None;
        }
        Some((replace_spans(text, spans), fired))
    }
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
            "email, ssn, ip_internal, custom:launch code"
        );
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
    fn an_invalid_custom_pattern_is_a_one_line_error() {
        let config: Config =
            serde_json::from_value(serde_json::json!({"custom_patterns": ["(unclosed"]})).unwrap();
        let error = Scanner::new(&config).unwrap_err().to_string();
        assert!(!error.contains('\n'), "{error}");
        assert!(
            error.starts_with("custom pattern \"(unclosed\": "),
            "{error}"
        );
    }
}
