//! # output-length
//!
//! Keeps final answers under a length, on `output`. The length is counted
//! in characters (Unicode scalar values), not bytes as in Nexus: a limit
//! of 10 is ten letters whatever the script.
//!
//! An answer of at most `max_chars` passes. A longer one gets a retry: the
//! host asks the model again with the answer and the rendered
//! `retry_prompt`, and the new answer is judged from the start of the
//! chain — at most `max_retries` times per answer (capped at the host's 10).
//! When the retries are used up (at once with `max_retries: 0`), the
//! answer is **never blocked**: it is shown as it is, with the notice
//! `Note: response exceeds <max> character limit (<len> chars) after <N> retry attempts.`
//!
//! `retry_prompt` placeholders: `{length}` (the length of the answer being
//! retried — Nexus kept the first answer's length on every attempt),
//! `{limit}`, `{error}` (`response is <n> characters (limit: <max>)`) and
//! `{content}`; rendered in one pass, unknown ones kept as they are.
//!
//! The retries a conversation asked for in the current turn are counted
//! here (the host tells an `output` gate nothing about its retries), for
//! at most 256 conversations at a time.
//!
//! Configuration (JSON, every key optional): `max_chars` (≥ 1, default
//! 5000), `max_retries` (default 2), `retry_prompt` (default
//! [`DEFAULT_RETRY_PROMPT`]).

mod gate;

pub use gate::{Config, OutputLength, DEFAULT_RETRY_PROMPT};

chimera_plugin_api::export_packs!(OutputLength);
