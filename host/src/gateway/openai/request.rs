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

use super::super::views::{self, ArgsSlot, Placed, PlacedTool, Slot};
use crate::agent::RelayRequest;
use crate::jsondoc::{Kind, Node, Splice};
use crate::types::{ContentBlock, Message, Role, ToolCall, ToolList, ToolSchema};
use serde_json::{json, Map, Value};
use std::borrow::Cow;

/// A request read.
#[derive(Debug, Clone)]
pub(in crate::gateway) struct Read {
    /// What the seams see (the headers are the gateway's to fill in).
    pub(in crate::gateway) request: RelayRequest,
    /// Where each message's texts live.
    pub(in crate::gateway) placed: Vec<Placed>,
    /// Where each tool lives.
    pub(in crate::gateway) tools: Vec<PlacedTool>,
}

/// Reads a chat-completions request (`root` parsed from `src`).
///
/// # Errors
///
/// One line naming the member that is missing or not what the wire says.
pub(in crate::gateway) fn read(src: &[u8], root: &Node) -> Result<Read, String> {
    let Some(members) = root.as_object() else {
        return Err("the request body is not a JSON object".to_owned());
    };
    let model = views::model_of(src, root)?;
    let wire_messages = match root.get(src, "messages").map(|n| (n, n.as_array())) {
        Some((_, Some(messages))) if !messages.is_empty() => messages,
        Some(_) => return Err("`messages` must be a non-empty array".to_owned()),
        None => return Err("`messages` is required".to_owned()),
    };
    let mut messages = Vec::with_capacity(wire_messages.len());
    let mut placed = Vec::with_capacity(wire_messages.len());
    for (index, wire) in wire_messages.iter().enumerate() {
        let (message, place) =
            message_of(src, wire, index).map_err(|error| format!("messages[{index}]: {error}"))?;
        messages.push(message);
        placed.push(place);
    }
    let (tools, tool_places) = views::tools_of(src, root, tool_of)?;
    views::check_stream(src, root)?;
    let kwargs = views::kwargs_of(src, members, &["model", "messages", "tools"]);
    Ok(Read {
        request: RelayRequest {
            model,
            messages,
            tools: ToolList::new(tools),
            kwargs,
            headers: crate::types::Headers::default(),
        },
        placed,
        tools: tool_places,
    })
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

/// One tool, and where it lives.
fn tool_of(src: &[u8], tool: &Node) -> Result<(ToolSchema, PlacedTool), String> {
    if tool.as_object().is_none() {
        return Err("a tool must be an object".to_owned());
    }
    let kind = tool.get(src, "type").and_then(|t| t.text(src));
    let mut place = PlacedTool {
        value: tool.span.clone(),
        description: None,
    };
    if kind.as_deref() != Some("function") {
        // Another kind of tool (a custom one): its name, if any, is judged;
        // the rest is the upstream's to read.
        let name = kind.unwrap_or(Cow::Borrowed("tool")).into_owned();
        return Ok((
            ToolSchema {
                name,
                description: String::new(),
                parameters: tool.to_value(src),
            },
            place,
        ));
    }
    let function = tool.get(src, "function").ok_or("a tool needs `function`")?;
    let name = function
        .get(src, "name")
        .and_then(|n| n.text(src))
        .ok_or("a tool needs `function.name`")?;
    let description = match function.get(src, "description") {
        Some(node) if !node.is_null() => {
            place.description = Some(node.span.clone());
            views::text(src, node).ok_or("`function.description` must be a string")?
        }
        _ => String::new(),
    };
    let parameters = function.get(src, "parameters").map_or_else(
        || json!({"type": "object", "properties": {}}),
        |p| p.to_value(src),
    );
    Ok((
        ToolSchema {
            name: name.into_owned(),
            description,
            parameters,
        },
        place,
    ))
}

/// The request with the seams' changes written back (see the module docs).
///
/// # Errors
///
/// One line when the edits cannot be rendered (a bug, never the client's).
pub(in crate::gateway) fn write(
    src: &[u8],
    root: &Node,
    read: &Read,
    judged: &RelayRequest,
) -> Result<Vec<u8>, String> {
    let before = &read.request;
    let mut splice = Splice::new();
    let mut members = views::envelope_changes(before, judged);
    if views::all_same_shape(&before.messages, &judged.messages) {
        views::write_texts(
            &mut splice,
            &before.messages,
            &judged.messages,
            &read.placed,
        );
    } else {
        let wire = root
            .get(src, "messages")
            .and_then(Node::as_array)
            .unwrap_or_default();
        let parts: Vec<Vec<u8>> = judged
            .messages
            .iter()
            .map(|message| {
                before
                    .messages
                    .iter()
                    .position(|old| old == message)
                    .and_then(|at| wire.get(read.placed[at].wire))
                    .map_or_else(
                        || wire_message(message).to_string().into_bytes(),
                        |node| node.raw(src).to_vec(),
                    )
            })
            .collect();
        members.push((
            "messages".to_owned(),
            Some(crate::jsondoc::array_from(parts)),
        ));
    }
    if !views::write_tools(&mut splice, &before.tools, &judged.tools, &read.tools) {
        let array = views::tools_array(src, &before.tools, &judged.tools, &read.tools, |tool| {
            wire_tool(tool).to_string().into_bytes()
        });
        members.push((
            "tools".to_owned(),
            (!judged.tools.is_empty()).then_some(array),
        ));
    }
    views::write_members(src, root, splice, &members)
}

/// A host message in the wire's shape (for a message the seams added).
pub(in crate::gateway) fn wire_message(message: &Message) -> Value {
    let mut out = Map::new();
    out.insert("role".into(), json!(message.role.as_str()));
    if message.blocks.is_empty() {
        out.insert("content".into(), json!(message.content));
    } else {
        let parts: Vec<Value> = message
            .blocks
            .iter()
            .map(|block| match block.kind.as_str() {
                "text" => json!({"type": "text", "text": block.text}),
                _ => block
                    .data
                    .as_deref()
                    .and_then(|raw| serde_json::from_str(raw.get()).ok())
                    .unwrap_or(Value::Null),
            })
            .collect();
        out.insert("content".into(), Value::Array(parts));
    }
    if !message.tool_calls.is_empty() {
        let calls: Vec<Value> = message
            .tool_calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": views::arguments_text(&c.arguments)}}))
            .collect();
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(id) = &message.tool_call_id {
        out.insert("tool_call_id".into(), json!(id));
    }
    if let Some(name) = &message.name {
        out.insert("name".into(), json!(name));
    }
    Value::Object(out)
}

/// A tool in the wire's shape (for a tool the seams changed).
fn wire_tool(tool: &ToolSchema) -> Value {
    json!({"type": "function", "function": {
        "name": tool.name, "description": tool.description, "parameters": tool.parameters,
    }})
}
