//! # json-schema
//!
//! Makes the final answer valid JSON that matches a JSON Schema, on
//! `output`. The JSON is taken from the answer: the first fenced block
//! tagged `json`, else the first fenced block, else the whole answer
//! trimmed ([`extract`]). Then:
//!
//! * valid → the answer becomes exactly that JSON text (unchanged when it
//!   already was);
//! * invalid → a retry: the host asks the model again with the answer and
//!   the rendered `retry_prompt`, and judges the new answer from the start
//!   of the chain — at most `max_retries` times per answer (capped at the
//!   host's 10);
//! * still invalid when the retries are used up (at once with
//!   `max_retries: 0`) → blocked with
//!   `JSON schema validation failed: <error>` and the notice
//!   `Response failed JSON schema validation after <N> retries: <error>`.
//!
//! The error is `invalid JSON: <parser error>` for text that does not
//! parse, else every schema violation, `; `-joined. In the reason and the
//! notice, which a user reads, a failed `pattern` is named by where it
//! sits in the schema, never by its regular expression
//! (`"abc" does not match the pattern at /properties/id/pattern`), and so
//! is a failed `not` (`... is not allowed by the schema at
//! /properties/tag/not`), whose schema may hold one; the retry prompt's
//! `{error}`, which the model reads to correct its answer, words them as
//! the validator does, the pattern included ([`Invalid`]). `retry_prompt`
//! placeholders: `{schema}` (the schema as compact JSON), `{error}`,
//! `{content}` (the answer being retried); rendered in one pass, unknown
//! ones kept as they are. The host never offers a substitute reply (a
//! gate's refusal) to `output`, so a refusal is never judged as JSON.
//!
//! The retries a conversation asked for in the current turn are counted
//! here (the host tells an `output` gate nothing about its retries), for
//! at most 256 conversations at a time.
//!
//! Configuration (JSON): `schema` (the schema, or a string of its JSON
//! text) or `schema_file` (a path, `~/` expanded, at most 1 MiB of UTF-8;
//! it wins over `schema`) — one of them is required; `max_retries`
//! (default 3); `retry_prompt` (default [`DEFAULT_RETRY_PROMPT`]). A
//! schema that does not parse or is not a valid schema refuses the load
//! with one line; `$ref`s are never fetched.

mod extract;
mod gate;

pub use extract::extract;
pub use gate::{Config, Invalid, JsonSchema, DEFAULT_RETRY_PROMPT};

chimera_plugin_api::export_packs!(JsonSchema);
