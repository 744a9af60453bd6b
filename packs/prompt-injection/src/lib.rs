//! # prompt-injection
//!
//! Judges the user's input for prompt-injection phrases, on
//! `provider_request`: the new input of the turn only — the user messages
//! after the last assistant message (content and text blocks) — never the
//! history (Nexus re-scanned every user message on every request, so one
//! phrase blocked the rest of the session). System and assistant messages
//! are not judged, nor are the calls the host makes for itself: a gate
//! retry (its user message is a gate's feedback) and a compaction summary
//! (the history's transcript).
//!
//! All patterns — the eleven defaults in [`DEFAULT_PATTERNS`] and the
//! configured ones — are one `RegexSet`: one pass over each text. On a
//! match:
//!
//! * `action: "block"`: the request is blocked with
//!   `Prompt injection detected: <pattern>` (the source of the first
//!   matching pattern, in list order) and the notice `message`;
//! * `action: "warn"`: the request goes on, with the notice
//!   `Warning: potential prompt injection detected in input.`
//!
//! Configuration (JSON, every key optional): `action` (`block` | `warn`,
//! default `block`), `message` (default
//! `Input blocked: potential prompt injection detected.`), `patterns`
//! (extra regexes, a list or one string, added to the defaults),
//! `patterns_file` (a path, `~/` expanded: one regex per line, blank and
//! `#` lines skipped; at most 1 MiB, UTF-8). An invalid extra pattern, or
//! an unreadable file, refuses the load with one line naming it (Nexus
//! logged and skipped it: a gate that silently checks less than it was
//! told to is not what its user asked for).

mod gate;

pub use gate::{Action, Config, PromptInjection, DEFAULT_MESSAGE, DEFAULT_PATTERNS, WARNING};

chimera_plugin_api::export_packs!(PromptInjection);
