//! # stop-words
//!
//! Blocks banned words. A word matches a whole token only: the text is
//! split into tokens of `[A-Za-z0-9'_-]`, and a banned word matches a token
//! equal to it (ASCII case-insensitively unless `case_sensitive`), so
//! `FORBIDDEN_WORD` does not match `forbidden`, and neither does `forbid`.
//! The words are one hash set; each token costs one lookup.
//!
//! * `provider_request`: the new input of the turn — the user messages
//!   after the last assistant message (content and text blocks) — never
//!   the history, so a banned word in an earlier turn does not block the
//!   turns after it (Nexus re-scanned every user message on every request).
//!   System and assistant messages are not scanned, and neither are the
//!   calls the host makes for itself: a gate retry (its user message is a
//!   gate's feedback) and a compaction summary (the history's transcript).
//!   A match blocks with `Input contains prohibited term: "<word>"`.
//!   Behind a gateway (a relayed conversation: the client wrote the whole
//!   history) every message of every role is scanned on every request,
//!   and each tool's name and description too.
//! * `output`: the final answer; a match blocks with
//!   `Output contains prohibited term: "<word>"`. The host never offers a
//!   substitute reply (a gate's refusal) here again.
//! * `model_response` (with `scan_llm_responses`): each reply's text (tool
//!   arguments are `tool_call`'s business); a match blocks with
//!   `Response contains prohibited term: "<word>"`, and the host publishes
//!   one substitute without tool calls whose text is `message`.
//! * `stream_chunk` (with `scan_stream`): the trailing run of word bytes is
//!   held on every offer (`forb` may become `forbidden`) — unless it is
//!   already longer than every banned word, when it can never become one
//!   and is released; the text from the start of the word straddling the
//!   released boundary on is scanned (a straddling run longer than every
//!   word is skipped), so the cost is linear in the stream, even one long
//!   token, and a released word is never reported again; a match blocks
//!   the stream with the `Response ...` reason (the reply becomes
//!   `message`).
//!
//! Every block carries the notice `message`. The `"<word>"` of a reason is
//! the configured word, quoted (lower-cased unless `case_sensitive`); the
//! blocked text is never quoted. A word given a name is shown by its name
//! instead, unquoted — `Input contains prohibited term: codename` — so an
//! operator with a confidential list keeps its terms out of what users
//! see (reasons, events, audit lines).
//!
//! ## Configuration
//!
//! JSON, every key optional: `words` (one, or a list; each a word, or a
//! table `{word, name}`), `word_files` (one, or a list; each a path, or a
//! table `{path, name}`; `~/` expanded; one word per line, blank and `#`
//! lines skipped; at most 1 MiB each, UTF-8; an unreadable file refuses
//! the load with one line), `case_sensitive` (default false), `message`
//! (default `Content blocked: contains prohibited terms.`),
//! `scan_llm_responses` (default false), `scan_stream` (default
//! `scan_llm_responses`).
//!
//! A line of a word file carries no name of its own: a file's `name`
//! stands for every word in it, and the words of a file given as a bare
//! path are shown as themselves. A name is 1 to 64 of `A-Z a-z 0-9 _ -
//! .`; several words may share one (a category). A word listed twice with
//! different names (or once named and once bare) refuses the load: it
//! could not be both hidden and shown. So does a bad name, and a word that
//! is not one token (`two words`, `café`), which could never match. An
//! empty list never blocks: the pack then registers nothing and logs
//! nothing.

mod config;
mod gate;
mod tokens;

pub use config::{check_name, Config, Named, DEFAULT_MESSAGE};
pub use gate::{Found, StopWords};
pub use tokens::{hold_from, is_word_byte, scan_from, tokens};

chimera_plugin_api::export_packs!(StopWords);
