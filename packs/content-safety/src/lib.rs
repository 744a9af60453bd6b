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
//! | its `name`, else `custom-N` (its position, from 1) | `custom_patterns` | each regular expression given (a string, or `{pattern, name}`) |
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
//!   shown; what could still become a match is held until the next delta
//!   (see [`stream::judge`] for the rule, and ARCHITECTURE.md, "The stream
//!   release rule", for a worked example): every possible beginning of a
//!   match is held, however far back ([`partial`]); a possible match that
//!   would be held longer than `stream_hold_limit` blocks the stream
//!   ([`over_limit`]); matches that end at or before the released boundary
//!   were judged already. Block → `Content safety (llm.stream.chunk):
//!   <checks>` and the reply becomes the notice; redact → the stream is
//!   published with each match replaced by `[REDACTED]`, and that text is
//!   the reply. A match that began in text already shown cannot be
//!   redacted: redact mode then blocks, and the notice says why
//!   ([`ESCALATED`]). So a secret split over deltas is never shown, not
//!   even in part, and neither the verdict nor the redacted text depends
//!   on how the text was split.
//!
//! * `tool_call` (`scan_tool_calls`, default `scan_llm_responses`, and
//!   always behind a gateway, where the client runs what passes): the
//!   arguments of each call the model proposes are text it wrote. Block →
//!   the call is refused with `Content safety (tool call): <checks>` and
//!   the notice; redact → every string of the arguments is redacted and the
//!   call passes with its id. `scan_tool_calls: false` registers nothing.
//!
//! Every interceptor fails closed: an error or a panic blocks.
//!
//! ## Streaming
//!
//! `scan_stream` defaults to `scan_llm_responses`, in either action.
//! Without a `stream_chunk` interceptor (`scan_stream: false` with
//! `scan_llm_responses: true`) the host turns streaming off for the run,
//! since this pack then gates whole replies only.
//!
//! ## Configuration
//!
//! `action` (`block` | `redact`, default `block`), `message` (default
//! `Content blocked: contains sensitive information ({checks}).`), the
//! eight `check_*` switches, `custom_patterns` (default none),
//! `scan_tool_results`, `scan_llm_responses` (both default false),
//! `scan_stream` and `scan_tool_calls` (see above), `stream_hold_back` (bytes always held at the
//! end of a stream, default 0), `stream_hold_limit` (the most bytes of a
//! possible match a stream holds before it is blocked, default 65536, at
//! least 1). A custom pattern is a regular expression,
//! or a table `{pattern, name}`: block reasons and notices show its `name`
//! (1 to 64 of `A-Z a-z 0-9 _ - .`, not a built-in check's and not
//! `custom-N`), or `custom-N` (N its position among the custom patterns,
//! from 1), never the regex.
//! Unknown keys, another action, an invalid pattern and one that matches
//! the empty text are load errors (one line).

mod config;
mod gate;
pub mod partial;
pub mod scan;
pub mod stream;

pub use config::{Action, Config, CustomPattern, DEFAULT_HOLD_LIMIT, DEFAULT_MESSAGE};
pub use gate::{over_limit, ContentSafety, ESCALATED};
pub use scan::{Scanner, Verdict, REDACTED};

chimera_plugin_api::export_packs!(ContentSafety);
