//! A chat-completions request read into views (every message of every
//! role, every text part, every tool call's arguments, every tool's
//! description) and written back with what the seams changed.
//!
//! | wire | what the seams see | place |
//! |---|---|---|
//! | `system` / `developer` message | a system message | its `content` |
//! | `user`, `assistant`, `tool` (`function`) message | that role | its `content` |
//! | a `content` array | blocks: `text` parts (and `refusal` parts) as text blocks, others (`image_url`, `input_audio`, `file`, …) as blocks with no text, not judged | each part's `text` / `refusal` |
//! | an assistant's `refusal` | a text block after its content | `refusal` |
//! | an assistant's `tool_calls` | tool calls | each `function.arguments` |
//! | `tools` (`function` tools) | tools: name, description, parameters | each `function.description` |
//! | every other member | the envelope's `kwargs` | the member's value |
//!
//! An unknown role, a part or a call that is not an object, or a member of
//! the wrong type is a 400 naming it: what cannot be read is never
//! forwarded.

use super::super::request_views::{Member, RequestFormat, RequestViews, ToolFormat, ToolKinds};
use super::super::views::{self, ArgsSlot, Placed, Slot};
use crate::agent::RelayRequest;
use crate::jsondoc::{Kind, Node};
use crate::types::{ContentBlock, Message, Role, ToolCall, ToolSchema};
use serde_json::{json, Value};
use std::borrow::Cow;

impl RequestFormat for super::OpenAi {
    const TOOLS: ToolFormat = ToolFormat {
        kinds: ToolKinds::Typed(&[("function", "parameters")]),
        within: Some("function"),
        no_name: "a tool needs `function.name`",
    };
    const MEMBERS: &'static [&'static str] = &["model", "messages", "tools"];

    /// Each of the `messages` (at least one).
    fn messages(src: &[u8], root: &Node) -> Result<(Vec<Message>, Vec<Placed>), String> {
        let wire_messages = match root.get(src, "messages").map(|n| (n, n.as_array())) {
            Some((_, Some(messages))) if !messages.is_empty() => messages,
            Some(_) => return Err("`messages` must be a non-empty array".to_owned()),
            None => return Err("`messages` is required".to_owned()),
        };
        let mut messages = Vec::with_capacity(wire_messages.len());
        let mut placed = Vec::with_capacity(wire_messages.len());
        for (index, wire) in wire_messages.iter().enumerate() {
            let (message, place) = message_of(src, wire, index)
                .map_err(|error| format!("messages[{index}]: {error}"))?;
            messages.push(message);
            placed.push(place);
        }
        Ok((messages, placed))
    }

    /// `messages` re-encoded, each message the seams left as it was
    /// keeping its bytes.
    fn reshape(
        read: &RequestViews<Self>,
        src: &[u8],
        root: &Node,
        judged: &RelayRequest,
    ) -> Vec<Member> {
        vec![read.kept_or_encoded(src, root, "messages", &judged.messages, wire_message)]
    }

    fn tool(tool: &ToolSchema) -> Value {
        crate::providers::openai_tool(tool)
    }
}

/// One wire message as a host message and the places of its texts.
fn message_of(src: &[u8], wire: &Node, index: usize) -> Result<(Message, Placed), String> {
    if wire.as_object().is_none() {
        return Err("a message must be an object".to_owned());
    }
    let role = match wire.get(src, "role").and_then(|r| r.text(src)).as_deref() {
        Some("system" | "developer") => Role::System,
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("tool" | "function") => Role::Tool,
        Some(other) => {
            return Err(format!(
                "unknown role '{}'",
                super::super::wire::one_word(other)
            ))
        }
        None => return Err("`role` is required".to_owned()),
    };
    let mut message = Message::user(String::new());
    message.role = role;
    let mut place = Placed {
        wire: index,
        ..Placed::default()
    };
    match wire.get(src, "content") {
        None => {}
        Some(node) if node.is_null() => {}
        Some(node) => match &node.kind {
            Kind::String { .. } => {
                message.content = views::text(src, node).unwrap_or_default();
                place.slots.push(Slot::Content(node.span.clone()));
            }
            Kind::Array(parts) => {
                for (at, part) in parts.iter().enumerate() {
                    let (block, slot) = part_of(src, part, message.blocks.len())
                        .map_err(|error| format!("content[{at}]: {error}"))?;
                    message.blocks.push(block);
                    place.slots.extend(slot);
                }
            }
            _ => return Err("`content` must be a string, an array of parts or null".to_owned()),
        },
    }
    if let Some(refusal) = wire.get(src, "refusal").filter(|n| !n.is_null()) {
        let text = views::text(src, refusal).ok_or("`refusal` must be a string")?;
        if message.blocks.is_empty() {
            // The content moves into a block of its own, so both are texts
            // of one kind.
            let content = std::mem::take(&mut message.content);
            if let Some(Slot::Content(span)) = place.slots.pop() {
                message.blocks.push(ContentBlock::text(content));
                place.slots.push(Slot::Block(0, span));
            }
        }
        place
            .slots
            .push(Slot::Block(message.blocks.len(), refusal.span.clone()));
        message.blocks.push(ContentBlock::text(text));
    }
    if let Some(calls) = wire.get(src, "tool_calls").filter(|n| !n.is_null()) {
        let calls = calls.as_array().ok_or("`tool_calls` must be an array")?;
        for (at, call) in calls.iter().enumerate() {
            let (call, slot) =
                call_of(src, call).map_err(|error| format!("tool_calls[{at}]: {error}"))?;
            message.tool_calls.push(call);
            place.calls.push(slot);
        }
    }
    if role == Role::Tool {
        let id = wire
            .get(src, "tool_call_id")
            .or_else(|| wire.get(src, "name"))
            .and_then(|n| n.text(src))
            .ok_or("a tool message needs `tool_call_id`")?;
        message.tool_call_id = Some(id.into_owned());
    }
    message.name = wire
        .get(src, "name")
        .filter(|_| role != Role::Tool)
        .and_then(|n| n.text(src))
        .map(Cow::into_owned);
    Ok((message, place))
}

/// One content part: a text block (a `text` or `refusal` part) with its
/// place, or a block with no text (any other part, kept as written).
fn part_of(src: &[u8], part: &Node, index: usize) -> Result<(ContentBlock, Option<Slot>), String> {
    if part.as_object().is_none() {
        return Err("a content part must be an object".to_owned());
    }
    let kind = part
        .get(src, "type")
        .and_then(|t| t.text(src))
        .ok_or("a content part needs a `type`")?;
    let field = match kind.as_ref() {
        "text" => Some("text"),
        "refusal" => Some("refusal"),
        _ => None,
    };
    if let Some(field) = field {
        let node = part
            .get(src, field)
            .ok_or_else(|| format!("a {kind} part needs `{field}`"))?;
        let text = views::text(src, node).ok_or_else(|| format!("`{field}` must be a string"))?;
        return Ok((
            ContentBlock::text(text),
            Some(Slot::Block(index, node.span.clone())),
        ));
    }
    Ok((views::opaque_block(src, part, &kind), None))
}

/// One tool call of an assistant message, and where its arguments live.
fn call_of(src: &[u8], call: &Node) -> Result<(ToolCall, ArgsSlot), String> {
    let id = call
        .get(src, "id")
        .and_then(|n| n.text(src))
        .ok_or("a tool call needs an `id`")?;
    let function = call
        .get(src, "function")
        .ok_or("a tool call needs `function`")?;
    let name = function
        .get(src, "name")
        .and_then(|n| n.text(src))
        .ok_or("a tool call needs `function.name`")?;
    let arguments = function
        .get(src, "arguments")
        .ok_or("a tool call needs `function.arguments`")?;
    let text = views::text(src, arguments).ok_or("`function.arguments` must be a string")?;
    Ok((
        ToolCall {
            id: id.into_owned(),
            name: name.into_owned(),
            arguments: views::arguments_of(&text),
        },
        ArgsSlot::Text(arguments.span.clone()),
    ))
}

/// A host message in the wire's shape (for a message the seams added):
/// its calls' arguments as the model wrote them.
fn wire_message(message: &Message) -> Value {
    crate::providers::chat_message(
        message,
        wire_part,
        &message.tool_calls,
        views::arguments_text,
    )
}

/// A block as the wire's content part: a text part, or any other as the
/// client wrote it.
fn wire_part(block: &ContentBlock) -> Value {
    match block.kind.as_str() {
        "text" => json!({"type": "text", "text": block.text}),
        _ => block
            .data
            .as_deref()
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
            .unwrap_or(Value::Null),
    }
}
