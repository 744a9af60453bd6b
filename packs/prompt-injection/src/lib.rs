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
//! Behind a gateway (`chimera serve`: the session view says the
//! conversation is relayed) the client wrote the whole history, and any of
//! it may carry an injection, so every text of every message of every role
//! is judged on every request, and each tool's name and description too.
//!
//! All patterns — the eleven defaults in [`DEFAULT_PATTERNS`] and the
//! configured ones — are one `RegexSet`: one pass over each text. Every
//! pattern has a name, and a reason shows the name, never the regular
//! expression (a user reads the reason; a regex tells them nothing and
//! shows how to slip past it). On a match:
//!
//! * `action: "block"`: the request is blocked with
//!   `Prompt injection detected: <name>` (the name of the first matching
//!   pattern, in list order: the defaults, then the configured ones) and
//!   the notice `message`;
//! * `action: "warn"`: the request goes on, with the notice
//!   `Warning: potential prompt injection detected in input.`
//!
//! ## The default patterns
//!
//! | name | matches (any case unless said) |
//! |---|---|
//! | `ignore-previous-instructions` | `ignore (all) previous/prior/above instructions` |
//! | `you-are-now` | `you are now ` |
//! | `system-prompt` | `system prompt:` |
//! | `disregard-previous` | `disregard (all) previous/prior/earlier` |
//! | `new-instructions` | `new instruction(s):` |
//! | `override-safety` | `override system/safety/previous` |
//! | `inst-token` | `[INST]` (this case only) |
//! | `im-start-token` | `<\|im_start\|>` |
//! | `system-token` | `<\|system\|>` |
//! | `pretend-you-are` | `pretend you are` |
//! | `no-restrictions` | `act as if you (have) no restrictions/rules/guidelines` |
//! | `hidden-instructions` | a tag such as `<IMPORTANT>`, `<system>`, `</instructions>` |
//! | `conceal-from-user` | `do not / don't / never tell/mention/reveal/… … user/human` |
//! | `read-credentials` | `read/cat/send/… … ~/.ssh, id_rsa, .aws/credentials, mcp.json, /etc/passwd, .netrc` |
//! | `invisible-characters` | a Unicode tag character or bidirectional control (but the England, Scotland and Wales flags) |
//!
//! ## Configuration
//!
//! JSON, every key optional: `action` (`block` | `warn`, default `block`),
//! `message` (default `Input blocked: potential prompt injection
//! detected.`), `patterns` (extra patterns added to the defaults: one, or
//! a list; each a regular expression, or a table `{pattern, name}` whose
//! `name` is optional), `patterns_file` (a path, `~/` expanded: one
//! regular expression per line, blank and `#` lines skipped; at most
//! 1 MiB, UTF-8).
//!
//! A configured pattern without a name is named `custom-<n>`, `<n>` its
//! position (from 1) among the configured patterns: the `patterns`
//! entries (named or not), then the `patterns_file` lines, which carry no
//! names and continue that numbering. With `"patterns": ["(?i)sudo",
//! {"pattern": "(?i)dev mode", "name": "dev-mode"}]` and a file of two
//! lines, those lines are `custom-3` and `custom-4`. A name is 1 to 64 of
//! `A-Z a-z 0-9 _ - .`, not a default pattern's, and given to one pattern
//! only.
//!
//! A bad name, an invalid pattern (named by its name, and by its line in
//! `patterns_file`), or an unreadable file refuses the load with one line
//! (Nexus logged and skipped an invalid pattern: a gate that silently
//! checks less than it was told to is not what its user asked for).

mod config;
mod gate;

pub use config::{
    check_name, custom_name, Action, Config, CustomPattern, DefaultPattern, DEFAULT_MESSAGE,
    DEFAULT_PATTERNS, WARNING,
};
pub use gate::PromptInjection;

chimera_plugin_api::export_packs!(PromptInjection);
