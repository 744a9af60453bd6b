//! # redactor
//!
//! Scrubs a secret pattern from what goes on the wire and from tool results.
//!
//! * `provider_request` (ephemeral): message contents, text blocks, and
//!   string values nested anywhere inside tool-call arguments are
//!   pattern-scrubbed; headers named in `headers` (case-insensitive) are
//!   replaced wholesale, every other header value is pattern-scrubbed. Only
//!   this call's payload changes: the durable conversation keeps its text.
//! * `tool_result` (durable): output and error text are pattern-scrubbed, so
//!   the transcript records the scrubbed text.
//!
//! Nothing changed → no decision and no event (the value passes untouched).
//! Model name, tool schemas, kwargs, tool names and ids, and result metadata
//! are never touched. An invalid pattern is a load error.
//!
//! Configuration: `pattern` (default
//! `(?-u:\b)(?:sk|key|token|secret)-[A-Za-z0-9_\-]{8,}(?-u:\b)`: ASCII
//! word boundaries, which keep every scan on the regex engine's fast
//! automaton; write `(?-u:\b)` in your own patterns too), `replacement`
//! (default `[redacted]`, inserted literally) and `headers` (default
//! `["Authorization"]`).

mod config;
mod scrub;

pub use config::{Config, DEFAULT_PATTERN};
pub use scrub::Redactor;

chimera_plugin_api::export_packs!(Redactor);
