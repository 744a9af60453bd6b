//! MCP (the Model Context Protocol) under the same seams: `chimera mcp
//! guard CMD ARGS…` is an MCP server on standard input and output that
//! starts the MCP server `CMD` and relays every message between the two,
//! judging each one whole before it goes on. Any MCP client (Claude Code,
//! Codex, Cursor) puts compiled policies in front of any stdio MCP server
//! by changing the command it starts.
//!
//! ```text
//!  client ── any message ──▶ frame ─▶ parse whole ─┬─ cannot ─▶ a JSON-RPC error, never sent
//!                                                  ├─ tools/call (any form) ─▶ tool_call chain,
//!                                                  │   permission policy, pins ─▶ refused or sent as judged
//!                                                  └─ anything else ─▶ as it came
//!  client ◀── judged ◀── frame ◀── parse whole ◀── server
//!      a call's answer (result or error) ─▶ tool_result on what a model reads of it
//!      tools/list ─▶ each tool on provider_request (a relayed request offering it), then the pins
//!      initialize's instructions ─▶ provider_request
//!      any other answer, request, notification ─▶ tool_result on its strings
//!      an answer to no request in flight, or one that cannot be read ─▶ withheld
//! ```
//!
//! Both sides are read as the most permissive peer reads them
//! ([`frame`]: a stream of JSON values, a message spread over lines or two
//! on one line; [`message`]: lone surrogates, nesting to
//! [`MAX_DEPTH`], batches), and what is forwarded is what was judged: the
//! message's own bytes with the judged texts spliced in where they live
//! (lone surrogates written as U+FFFD, line breaks as spaces). What a
//! model reads of a message is [`view`]'s, the same text `chimera run`'s
//! MCP tools record. A judgement that cannot be made (a pack failing, past
//! its deadline) withholds what it judged. A question (an `ask`) takes its
//! default answer: there is no terminal on an MCP server's standard
//! input. A server pinned by `chimera mcp pin` ([`pin`]) has each listed
//! tool held to its pin: a drifted, new or renamed tool is withheld from
//! the listing and its calls refused. When the server ends, each request
//! it did not answer is answered with an error saying so, and the guard
//! exits naming how the server ended. A frame longer than [`MAX_LINE`]
//! ends the session with one line on standard error.
//!
//! The other way round, [`McpServers`] makes MCP servers' tools tools of a
//! session (`chimera run`'s `[mcp.servers.NAME]` and `--mcp`): each is
//! started or reached through the official SDK, `rmcp`, its tools offered
//! as `NAME__tool` ([`McpTool`]) under the same seams and policy as a
//! built-in tool; a server that fails is one line, and its tools go away.

mod answers;
mod calls;
mod connection;
mod error;
mod frame;
mod guard;
mod http;
mod judge;
mod message;
pub mod pin;
mod servers;
mod stdio;
mod tool;
mod view;
mod wire;

pub use error::{GuardError, MAX_LINE};
pub use guard::guard;
pub use http::{serve_http, HttpGuardError};
pub use judge::Rules;
pub use message::MAX_DEPTH;
pub use servers::{
    check_name, McpServers, ServerSpec, ServerSpecError, Transport, DEFAULT_CALL_TIMEOUT,
    DEFAULT_STARTUP_TIMEOUT, MAX_SERVER_NAME,
};
pub use tool::{McpTool, MAX_DESCRIPTION_CHARS, MAX_RESULT_BYTES, MAX_SCHEMA_BYTES, MAX_TOOLS};
