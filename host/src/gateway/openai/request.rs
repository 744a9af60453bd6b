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

use super::super::request_views::{Document, Member, RequestFormat, ToolFormat, ToolKinds};
use super::super::views::{self, ArgsSlot, Placed, Slot};
use crate::jsondoc::Node;
use crate::types::{ContentBlock, Message, Role, ToolSchema};
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
    fn reshape(doc: &Document<'_, Self>, judged: &[Message]) -> Vec<Member> {
        vec![doc.kept_or_encoded("messages", judged, wire_message)]
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
        Some(node) => views::read_content(
            src,
            node,
            "content",
            (&mut message, &mut place),
            |part, index| views::part_of(src, part, "content part", part_field, index),
            || "`content` must be a string, an array of parts or null".to_owned(),
        )?,
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
            let (call, arguments) = super::reply::call_of(src, call, "tool call")
                .map_err(|error| format!("tool_calls[{at}]: {error}"))?;
            message.tool_calls.push(call);
            place.calls.push(ArgsSlot::Text(arguments));
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

/// Which member of a content part holds its text, for the parts the
/// seams read.
fn part_field(kind: &str) -> Option<&'static str> {
    match kind {
        "text" => Some("text"),
        "refusal" => Some("refusal"),
        _ => None,
    }
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
