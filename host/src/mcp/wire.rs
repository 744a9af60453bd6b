//! The JSON-RPC pieces the guard writes itself (its answers, errors and
//! refusals), a message's members put back together, and its lines on
//! standard error.

use crate::jsondoc::{object_from, string_literal, Node, Splice};

/// One line on standard error, safe to print.
pub(super) fn say(line: &str) {
    eprintln!("mcp guard: {}", crate::types::terminal_safe(line));
}

/// A JSON-RPC answer to `id` (its raw JSON) with `member` (`result` or
/// `error`) holding `value` (raw JSON).
pub(super) fn answer(id: &[u8], member: &str, value: &[u8]) -> Vec<u8> {
    object_from([("jsonrpc", &b"\"2.0\""[..]), ("id", id), (member, value)])
}

/// A JSON-RPC error object.
pub(super) fn rpc_error(code: i32, message: &str) -> Vec<u8> {
    object_from([
        ("code", code.to_string().as_bytes()),
        ("message", string_literal(message).as_bytes()),
    ])
}

/// An MCP tool result saying `text` as an error; for a client on the
/// 2026-07-28 protocol (`modern`), tagged `"resultType": "complete"`, as
/// that revision asks of every result.
pub(super) fn error_result(text: &str, modern: bool) -> Vec<u8> {
    let item = object_from([
        ("type", &b"\"text\""[..]),
        ("text", string_literal(text).as_bytes()),
    ]);
    let content = crate::jsondoc::array_from([item]);
    let mut members = vec![("content", content.as_slice()), ("isError", b"true")];
    if modern {
        members.push(("resultType", b"\"complete\""));
    }
    object_from(members)
}

/// The `_meta` key a 2026-07-28 request names its protocol version by.
const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

/// Whether a request's `params` say it is on the 2026-07-28 protocol or
/// later (its `_meta` names a protocol version).
pub(super) fn is_modern(src: &[u8], params: Option<&Node>) -> bool {
    params
        .and_then(|p| p.get(src, "_meta"))
        .and_then(|meta| meta.get(src, PROTOCOL_VERSION_META))
        .is_some()
}

/// `member` of `src` with `splice`'s edits (all inside it) applied.
pub(super) fn render_member(src: &[u8], member: &Node, splice: &Splice) -> Option<Vec<u8>> {
    let rendered = splice.render(src).ok()?;
    let end = (member.span.end + rendered.len()).checked_sub(src.len())?;
    rendered.get(member.span.start..end).map(<[u8]>::to_vec)
}

/// The messages of one frame as they go on: a batch's members (those that
/// go on) as a batch, or the one message.
pub(super) fn reassemble(batch: bool, members: Vec<Vec<u8>>) -> Option<Vec<u8>> {
    if batch {
        (!members.is_empty()).then(|| crate::jsondoc::array_from(members))
    } else {
        members.into_iter().next()
    }
}
