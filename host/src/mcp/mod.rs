//! MCP (the Model Context Protocol) under the same seams: `chimera mcp
//! guard -- CMD ARGS…` is an MCP server on standard input and output that
//! starts the MCP server `CMD` and relays every message between the two,
//! judging each `tools/call` by the loaded packs' `tool_call` chain and
//! its result by their `tool_result` chain. Any MCP client (Claude Code,
//! Codex, Cursor) puts compiled policies in front of any stdio MCP server
//! by changing the command it starts.
//!
//! ```text
//!  client ── tools/call {name, arguments} ──▶ tool_call chain ─┬─ block ─▶ an error result, never sent
//!                                                             ├─ rewrite ─▶ the server gets the new call
//!                                                             └─ allow ──▶ the server gets it as sent
//!  client ◀── result {content, isError} ◀── tool_result chain (each text) ◀── server
//!  every other message (initialize, tools/list, notifications, …) ──▶ byte for byte, both ways
//! ```
//!
//! What the seams see of an MCP call: `tool_call` a call whose id is the
//! request's JSON-RPC id (as JSON text), whose name is the MCP tool's and
//! whose arguments are its `arguments` object; `tool_result` each text
//! item of the result as the output (an `isError` result as the error),
//! with that call leading, and so is every string of its
//! `structuredContent` (which carries the same data, and must stay as the
//! tool's output schema says). A block on `tool_call` answers the client
//! an error result (`isError: true`) whose text is the reason; a block on
//! `tool_result` replaces the whole result so. A tool result the server
//! sends for no call in flight (a second answer to one, or an answer to
//! none) would reach the client unjudged: it is dropped, with one line on
//! standard error. An operator's question (an `ask` decision) takes
//! its default answer: there is no terminal on an MCP server's standard
//! input. When the server ends, each call it did not answer is answered
//! with an error result saying so, and the guard exits naming how the
//! server ended. Messages are JSON-RPC, one per line (the MCP stdio transport);
//! a line that is not JSON passes through untouched (the other side
//! refuses it), and a line longer than [`MAX_LINE`] ends the session with
//! one line on standard error: it could not be judged whole.
//!
//! The other way round, [`McpServers`] makes MCP servers' tools tools of a
//! session (`chimera run`'s `[mcp.servers.NAME]` and `--mcp`): each is
//! started or reached through the official SDK, `rmcp`, its tools offered
//! as `NAME__tool` ([`McpTool`]) under the same seams and policy as a
//! built-in tool; a server that fails is one line, and its tools go away.

mod connection;
mod guard;
mod servers;
mod stdio;
mod tool;

pub use guard::{guard, GuardError, Rules, MAX_LINE};
pub use servers::{
    check_name, McpServers, ServerSpec, Transport, DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT,
    MAX_SERVER_NAME,
};
pub use tool::{McpTool, MAX_DESCRIPTION_CHARS, MAX_RESULT_BYTES, MAX_SCHEMA_BYTES, MAX_TOOLS};
