//! A Messages request read into views (every text the model will read:
//! each `system` block, every message of every role, tool results with
//! their nested content, tool descriptions) and written back with what the
//! seams changed. `cache_control`, `thinking` blocks and their
//! signatures, images, documents, server tools, `is_error` and every
//! field the gateway does not know stay exactly as the client wrote them.
//!
//! | wire | what the seams see | place |
//! |---|---|---|
//! | top-level `system` (a string, or text blocks) | a system message, first | the string, or each block's `text` |
//! | a `system` message (Claude Code sends them mid-conversation) | a system message | its text |
//! | a `user` message | a user message: its text, or its blocks (`text` judged; `image`, `document`, … kept, not judged) | the string, or each text block's `text` |
//! | a `tool_result` block | a tool message (`tool_call_id` = `tool_use_id`), its content a string or blocks | the string, or each text block's `text` |
//! | an `assistant` message | an assistant message: `text` blocks judged; `thinking`, `redacted_thinking` and server-tool blocks kept as blocks with no text; `tool_use` blocks as tool calls | each text block's `text`; each call's `input` |
//! | `tools` | tools: name, description, `input_schema` (a server tool: its name) | each `description` |
//! | every other member | the envelope's `kwargs` | the member's value |

use super::super::request_views::{Document, Member, RequestFormat, ToolFormat, ToolKinds};
use super::super::views::{self, ArgsSlot, Placed, Slot};
use crate::jsondoc::Node;
use crate::types::{Arguments, ContentBlock, Message, Role, ToolCall, ToolSchema};
use serde_json::{json, Value};

/// The `wire` of the top-level `system`'s message.
const SYSTEM: usize = usize::MAX;

impl RequestFormat for super::Anthropic {
    const TOOLS: ToolFormat = ToolFormat {
        kinds: ToolKinds::Untyped("input_schema"),
        within: None,
        no_name: "a tool needs a `name`",
    };
    const MEMBERS: &'static [&'static str] = &["model", "system", "messages", "tools"];

    /// The top-level `system` (a system message, first; its place's
    /// `wire` is `SYSTEM`) and each of the `messages`.
    fn messages(src: &[u8], root: &Node) -> Result<(Vec<Message>, Vec<Placed>), String> {
        let mut messages = Vec::new();
        let mut placed = Vec::new();
        if let Some(system) = root.get(src, "system").filter(|n| !n.is_null()) {
            let (message, place) = content_of(src, system, Role::System, SYSTEM, "text blocks")
                .map_err(|e| format!("system: {e}"))?;
            messages.push(message);
            placed.push(place);
        }
        let wire = match root.get(src, "messages").map(|n| (n, n.as_array())) {
            Some((_, Some(list))) => list,
            Some(_) => return Err("`messages` must be an array".to_owned()),
            None => return Err("`messages` is required".to_owned()),
        };
        for (index, message) in wire.iter().enumerate() {
            turn_of(src, message, index, &mut messages, &mut placed)
                .map_err(|e| format!("messages[{index}]: {e}"))?;
        }
        Ok((messages, placed))
    }

    /// The conversation re-encoded (a compaction): its leading system
    /// messages as the top-level `system`, the rest as `messages`.
    fn reshape(_doc: &Document<'_, Self>, judged: &[Message]) -> Vec<Member> {
        let system: Vec<Value> = judged
            .iter()
            .take_while(|m| m.role == Role::System)
            .map(|m| json!({"type": "text", "text": views::joined_text(m)}))
            .collect();
        let rest: Vec<Message> = judged.iter().skip(system.len()).cloned().collect();
        vec![
            (
                "system".to_owned(),
                (!system.is_empty()).then(|| Value::Array(system).to_string().into_bytes()),
            ),
            (
                "messages".to_owned(),
                Some(
                    Value::Array(crate::providers::anthropic_turns(&rest))
                        .to_string()
                        .into_bytes(),
                ),
            ),
        ]
    }

    fn tool(tool: &ToolSchema) -> Value {
        json!({"name": tool.name, "description": tool.description, "input_schema": tool.parameters})
    }
}

/// One wire message: its host messages (a user message's `tool_result`
/// blocks become tool messages of their own, in block order).
fn turn_of(
    src: &[u8],
    wire: &Node,
    index: usize,
    messages: &mut Vec<Message>,
    placed: &mut Vec<Placed>,
) -> Result<(), String> {
    if wire.as_object().is_none() {
        return Err("a message must be an object".to_owned());
    }
    let role = match wire.get(src, "role").and_then(|r| r.text(src)).as_deref() {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("system") => Role::System,
        Some(other) => {
            return Err(format!(
                "unknown role '{}'",
                super::super::wire::one_word(other)
            ))
        }
        None => return Err("`role` is required".to_owned()),
    };
    let content = wire.get(src, "content").ok_or("`content` is required")?;
    let Some(blocks) = content.as_array() else {
        let (message, place) = content_of(src, content, role, index, "content blocks")?;
        messages.push(message);
        placed.push(place);
        return Ok(());
    };
    // Consecutive blocks that are not tool results make one message.
    let mut current: Option<(Message, Placed)> = None;
    for (at, block) in blocks.iter().enumerate() {
        let kind = block_kind(src, block).map_err(|e| format!("content[{at}]: {e}"))?;
        if role == Role::User && kind == "tool_result" {
            if let Some(done) = current.take() {
                messages.push(done.0);
                placed.push(done.1);
            }
            let (message, place) =
                tool_result_of(src, block, index).map_err(|e| format!("content[{at}]: {e}"))?;
            messages.push(message);
            placed.push(place);
            continue;
        }
        let (message, place) = current.get_or_insert_with(|| {
            let mut message = Message::user(String::new());
            message.role = role;
            (
                message,
                Placed {
                    wire: index,
                    ..Placed::default()
                },
            )
        });
        if role == Role::Assistant && kind == "tool_use" {
            let (call, slot) =
                tool_use_of(src, block).map_err(|e| format!("content[{at}]: {e}"))?;
            message.tool_calls.push(call);
            place.calls.push(slot);
            continue;
        }
        let (content_block, slot) = block_of(src, block, &kind, message.blocks.len())
            .map_err(|e| format!("content[{at}]: {e}"))?;
        message.blocks.push(content_block);
        place.slots.extend(slot);
    }
    if let Some(done) = current {
        messages.push(done.0);
        placed.push(done.1);
    }
    Ok(())
}

/// A block's `type`.
fn block_kind(src: &[u8], block: &Node) -> Result<String, String> {
    if block.as_object().is_none() {
        return Err("a content block must be an object".to_owned());
    }
    block
        .get(src, "type")
        .and_then(|t| t.text(src))
        .map(std::borrow::Cow::into_owned)
        .ok_or_else(|| "a content block needs a `type`".to_owned())
}

/// One block that is not a tool call or result: a text block (judged,
/// with its place), or any other kind kept as written with no text.
fn block_of(
    src: &[u8],
    block: &Node,
    kind: &str,
    index: usize,
) -> Result<(ContentBlock, Option<Slot>), String> {
    if kind == "text" {
        let node = block.get(src, "text").ok_or("a text block needs `text`")?;
        let text = views::text(src, node).ok_or("`text` must be a string")?;
        return Ok((
            ContentBlock::text(text),
            Some(Slot::Block(index, node.span.clone())),
        ));
    }
    Ok((views::opaque_block(src, block, kind), None))
}

/// A `content` (or `system`) that is a string or an array of blocks, as one
/// message of `role`.
fn content_of(
    src: &[u8],
    content: &Node,
    role: Role,
    wire: usize,
    what: &str,
) -> Result<(Message, Placed), String> {
    let mut message = Message::user(String::new());
    message.role = role;
    let mut place = Placed {
        wire,
        ..Placed::default()
    };
    views::read_content(
        src,
        content,
        "content",
        (&mut message, &mut place),
        |block, index| block_of(src, block, &block_kind(src, block)?, index),
        || format!("must be a string or an array of {what}"),
    )?;
    Ok((message, place))
}

/// A `tool_result` block as a tool message.
fn tool_result_of(src: &[u8], block: &Node, wire: usize) -> Result<(Message, Placed), String> {
    let id = block
        .get(src, "tool_use_id")
        .and_then(|n| n.text(src))
        .ok_or("a tool_result needs `tool_use_id`")?;
    let (mut message, place) = match block.get(src, "content").filter(|n| !n.is_null()) {
        Some(content) => content_of(src, content, Role::Tool, wire, "content blocks")?,
        None => (
            Message::tool(String::new(), String::new()),
            Placed {
                wire,
                ..Placed::default()
            },
        ),
    };
    message.role = Role::Tool;
    message.tool_call_id = Some(id.into_owned());
    Ok((message, place))
}

/// A `tool_use` block as a tool call, its `input` the arguments.
fn tool_use_of(src: &[u8], block: &Node) -> Result<(ToolCall, ArgsSlot), String> {
    let id = block
        .get(src, "id")
        .and_then(|n| n.text(src))
        .ok_or("a tool_use needs an `id`")?;
    let name = block
        .get(src, "name")
        .and_then(|n| n.text(src))
        .ok_or("a tool_use needs a `name`")?;
    let input = block.get(src, "input").ok_or("a tool_use needs `input`")?;
    let arguments = Arguments::from_json(&String::from_utf8_lossy(input.raw(src)))
        .map_err(|e| format!("`input` cannot be read: {e}"))?;
    Ok((
        ToolCall {
            id: id.into_owned(),
            name: name.into_owned(),
            arguments,
        },
        ArgsSlot::Object(input.span.clone()),
    ))
}
