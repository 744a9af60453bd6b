//! # content-safety
//!
//! A PII and secret gate: finds sensitive values in what the user is
//! shown, and blocks the text or redacts them.
//!
//! ## Checks
//!
//! In check order (the order names appear in reasons, joined with `, `),
//! each with its switch (all on by default):
//!
//! | name | switch | finds |
//! |---|---|---|
//! | `email` | `check_pii_email` | email addresses |
//! | `phone` | `check_pii_phone` | phone numbers with separators (`555-123-4567`, `(555) 123-4567`, `+1 555 123 4567`) |
//! | `ssn` | `check_pii_ssn` | `ddd-dd-dddd` |
//! | `api_key` | `check_secrets_api_key` | `AKIA` + 16, `sk-` + ≥ 20 alphanumerics, `ghp_` + 36, `xox[bporas]-…` |
//! | `private_key` | `check_secrets_private_key` | a PEM `-----BEGIN … PRIVATE KEY` header |
//! | `password` | `check_secrets_password` | `password`/`passwd`/`pwd`/`secret`/`token`, then `:` or `=` and a value (any case) |
//! | `credit_card` | `check_credit_card` | four groups of four digits (optional space or dash) that pass the Luhn check |
//! | `ip_internal` | `check_ip_internal` | private IPv4: 10/8, 172.16/12, 192.168/16 |
//! | `custom:<regex>` | `custom_patterns` | each regular expression given |
//!
//! No check's regex scans the whole text: two literal prefilters (SIMD
//! literal search for what matches start with or contain: `@`, `AKIA`,
//! `sk-`, `-----BEGIN `, the password words, `10.`, ...) and one byte-class
//! scan (eight bytes at a time, for the end of a number-shaped value) find
//! the few places a check could match, and the check's own regex runs only
//! there, with the surrounding text as context. Custom patterns add one
//! pass of one `RegexSet` over all of them. See [`scan`].
//!
//! ## Seams
//!
//! * `output` (always): block → reason `Content safety: <checks>` and the
//!   notice (`message` with `{checks}` filled in); redact → every match of
//!   every check that fired becomes `[REDACTED]` (overlapping matches are
//!   one marker), no block. A gate loaded after this one sees the redacted
//!   text.
//! * `tool_result` (`scan_tool_results`): block → the recorded result
//!   becomes the error `blocked by content_safety: <checks>` (the model
//!   learns the call failed and never sees the output); redact → the
//!   output is redacted.
//! * `model_response` (`scan_llm_responses`): block → reason
//!   `Content safety (llm.response): <checks>`; the host publishes a
//!   substitute reply whose text is the notice, without tool calls;
//!   redact → the text is redacted, the tool calls are kept.
//! * `stream_chunk` (`scan_stream`): each delta is judged before it is
//!   shown. The trailing run of non-whitespace of the unreleased text is
//!   held (a trailing `123-4` may become an SSN), and so is a trailing run
//!   of number-shaped text (`4111 1111 ` may become a card number), pulled
//!   back further to `stream_hold_back` bytes before the end when that is
//!   earlier. The scan starts at most 4096 bytes before the released
//!   boundary; matches that end at or before it were judged already. A
//!   match blocks the stream with `Content safety (llm.stream.chunk):
//!   <checks>` — in redact mode too, since the seam cannot rewrite text —
//!   and the reply becomes the notice. So a secret split over deltas is
//!   never shown, not even in part, and the verdict does not depend on how
//!   the text was split.
//!
//! Every interceptor fails closed: an error or a panic blocks.
//!
//! ## Streaming and redaction
//!
//! `scan_stream` defaults to `scan_llm_responses` in block mode and to off
//! in redact mode. Without a `stream_chunk` interceptor the host turns
//! streaming off for the run (this pack gates whole replies), so a redact
//! configuration shows `mail me at [REDACTED] today` whole instead of
//! blocking a stream it cannot rewrite. `scan_stream: true` in redact mode
//! keeps streaming and blocks on a match.
//!
//! ## Configuration
//!
//! `action` (`block` | `redact`, default `block`), `message` (default
//! `Content blocked: contains sensitive information ({checks}).`), the
//! eight `check_*` switches, `custom_patterns` (default none),
//! `scan_tool_results`, `scan_llm_responses` (both default false),
//! `scan_stream` (see above), `stream_hold_back` (bytes, default 0).
//! Unknown keys, another action, an invalid pattern and one that matches
//! the empty text are load errors (one line).

mod config;
mod gate;
pub mod scan;
pub mod stream;

pub use config::{Action, Config, CustomPattern, DEFAULT_MESSAGE};
pub use gate::{ContentSafety, ESCALATED};
pub use scan::{Scanner, Verdict, REDACTED};

chimera_plugin_api::export_packs!(ContentSafety);
