//! A Responses request read into views (the `instructions`, every `input`
//! item the model reads as text, every proposed call's arguments, every
//! tool's description) and written back with what the seams changed.
//!
//! | wire | what the seams see | place |
//! |---|---|---|
//! | `instructions` | a system message, first | the string |
//! | `input` as a string | a user message | the string |
//! | a `message` item (`type` may be left out) of role `system` / `developer`, `user`, `assistant` | that role: its `content` string, or its parts (`input_text`, `output_text`, `refusal` as text blocks; `input_image`, `input_file`, … as blocks with no text, not judged) | the string, or each part's `text` / `refusal` |
//! | a `function_call` / `custom_tool_call` item | an assistant message with one tool call (id: `call_id`) | its `arguments` / `input` |
//! | a `function_call_output` / `custom_tool_call_output` item | a tool message (`tool_call_id` = `call_id`): its `output` string, or its parts as above | the string, or each text part |
//! | `reasoning` (with `encrypted_content`), `item_reference`, built-in tools' items (web search, file search, computer use, code interpreter, shell, MCP, image generation) and unknown item types | a message holding one block of that type, no text, not judged (the audit line names them): the model's own items as the assistant's, the others as the user's | — |
//! | `tools` (`function`, `custom`) | tools: name, description, parameters (a custom tool's `format`) | each `description` |
//! | a built-in tool (`web_search`, `mcp`, …) | a tool named by its type, its whole value its parameters | — |
//! | every other member (`previous_response_id`, `store`, `reasoning`, `include`, …) | the envelope's `kwargs` | the member's value |
//!
//! An item or a part that is not an object, one without the members its
//! type needs, or a member of the wrong type is a 400 naming it: what
//! cannot be read is never forwarded.

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
    /// Where each message's texts live (`instructions`' is `wire:
    /// INSTRUCTIONS`).
    pub(in crate::gateway) placed: Vec<Placed>,
    /// Where each tool lives.
    pub(in crate::gateway) tools: Vec<PlacedTool>,
    /// The response this one continues (`previous_response_id`).
    pub(in crate::gateway) previous: Option<String>,
}

/// The `wire` of the `instructions`' message.
const INSTRUCTIONS: usize = usize::MAX;

/// Reads a Responses request (`root` parsed from `src`).
///
/// # Errors
///
/// One line naming the member that is missing or not what the wire says.
pub(in crate::gateway) fn read(src: &[u8], root: &Node) -> Result<Read, String> {
    let members = root
        .as_object()
        .ok_or("the request body is not a JSON object")?;
    let model = views::model_of(src, root)?;
    let mut messages = Vec::new();
    let mut placed = Vec::new();
    if let Some(node) = root.get(src, "instructions").filter(|n| !n.is_null()) {
        let text = views::text(src, node).ok_or("`instructions` must be a string")?;
        messages.push(Message {
            role: Role::System,
            ..Message::user(text)
        });
        placed.push(Placed {
            wire: INSTRUCTIONS,
            slots: vec![Slot::Content(node.span.clone())],
            calls: Vec::new(),
        });
    }
    match root.get(src, "input").map(|n| &n.kind) {
        Some(Kind::String { .. }) => {
            let node = root.get(src, "input").unwrap_or(root);
            messages.push(Message::user(views::text(src, node).unwrap_or_default()));
            placed.push(Placed {
                wire: 0,
                slots: vec![Slot::Content(node.span.clone())],
                calls: Vec::new(),
            });
        }
        Some(Kind::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
                let (message, place) =
                    item_of(src, item, index).map_err(|e| format!("input[{index}]: {e}"))?;
                messages.push(message);
                placed.push(place);
            }
        }
        Some(_) => return Err("`input` must be a string or an array of items".to_owned()),
        None => {}
    }
    let (tools, tool_places) = views::tools_of(src, root, tool_of)?;
    views::check_stream(src, root)?;
    let previous = match root.get(src, "previous_response_id") {
        Some(node) if !node.is_null() => {
            Some(views::text(src, node).ok_or("`previous_response_id` must be a string")?)
        }
        _ => None,
    };
    Ok(Read {
        request: RelayRequest {
            model,
            messages,
            tools: ToolList::new(tools),
            kwargs: views::kwargs_of(src, members, &["model", "instructions", "input", "tools"]),
            headers: crate::types::Headers::default(),
        },
        placed,
        tools: tool_places,
        previous,
    })
}

/// The item types the model itself writes: an item of one of them that
/// the gateway does not read is the assistant's, any other the user's.
const MODEL_ITEMS: &[&str] = &[
    "reasoning",
    "web_search_call",
    "file_search_call",
    "computer_call",
    "code_interpreter_call",
    "image_generation_call",
    "local_shell_call",
    "shell_call",
    "apply_patch_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "compaction",
];

/// One input item as a host message and the places of its texts.
fn item_of(src: &[u8], item: &Node, index: usize) -> Result<(Message, Placed), String> {
    if item.as_object().is_none() {
        return Err("an item must be an object".to_owned());
    }
    let kind = match item.get(src, "type") {
        Some(node) => node.text(src).ok_or("`type` must be a string")?,
        None if item.get(src, "role").is_some() => Cow::Borrowed("message"),
        None => return Err("an item needs a `type`".to_owned()),
    };
    let mut place = Placed {
        wire: index,
        ..Placed::default()
    };
    let mut message = Message::user(String::new());
    match kind.as_ref() {
        "message" => {
            message.role = match item.get(src, "role").and_then(|r| r.text(src)).as_deref() {
                Some("system" | "developer") => Role::System,
                Some("user") => Role::User,
                Some("assistant") => Role::Assistant,
                Some(other) => {
                    return Err(format!(
                        "unknown role '{}'",
                        super::super::wire::one_word(other)
                    ))
                }
                None => return Err("a message needs a `role`".to_owned()),
            };
            let content = item
                .get(src, "content")
                .ok_or("a message needs `content`")?;
            content_of(src, content, &mut message, &mut place, "content")?;
        }
        "function_call" | "custom_tool_call" => {
            let field = if kind == "function_call" {
                "arguments"
            } else {
                "input"
            };
            let call_id = member_text(src, item, "call_id")?;
            let name = member_text(src, item, "name")?;
            let node = item
                .get(src, field)
                .ok_or_else(|| format!("a {kind} needs `{field}`"))?;
            let text =
                views::text(src, node).ok_or_else(|| format!("`{field}` must be a string"))?;
            message.role = Role::Assistant;
            message.tool_calls.push(ToolCall {
                id: call_id,
                name,
                arguments: views::arguments_of(&text),
            });
            place.calls.push(ArgsSlot::Text(node.span.clone()));
        }
        "function_call_output" | "custom_tool_call_output" => {
            message.role = Role::Tool;
            message.tool_call_id = Some(member_text(src, item, "call_id")?);
            let output = item
                .get(src, "output")
                .ok_or("a call output needs `output`")?;
            content_of(src, output, &mut message, &mut place, "output")?;
        }
        other => {
            if MODEL_ITEMS.contains(&other) {
                message.role = Role::Assistant;
            }
            message.blocks.push(views::opaque_block(src, item, other));
        }
    }
    Ok((message, place))
}

/// A member of `item` that must be a string.
fn member_text(src: &[u8], item: &Node, name: &str) -> Result<String, String> {
    item.get(src, name)
        .and_then(|n| views::text(src, n))
        .ok_or_else(|| format!("`{name}` must be a string"))
}

/// A message's `content` (or an output's `output`): a string, or parts.
fn content_of(
    src: &[u8],
    node: &Node,
    message: &mut Message,
    place: &mut Placed,
    field: &str,
) -> Result<(), String> {
    match &node.kind {
        Kind::String { .. } => {
            message.content = views::text(src, node).unwrap_or_default();
            place.slots.push(Slot::Content(node.span.clone()));
        }
        Kind::Array(parts) => {
            for (at, part) in parts.iter().enumerate() {
                part_of(src, part, message, place).map_err(|e| format!("{field}[{at}]: {e}"))?;
            }
        }
        _ => return Err(format!("`{field}` must be a string or an array of parts")),
    }
    Ok(())
}

/// One content part: a text block (`input_text`, `output_text`, `text`,
/// `refusal`) with its place, or a block with no text.
fn part_of(
    src: &[u8],
    part: &Node,
    message: &mut Message,
    place: &mut Placed,
) -> Result<(), String> {
    if part.as_object().is_none() {
        return Err("a part must be an object".to_owned());
    }
    let kind = part
        .get(src, "type")
        .and_then(|t| t.text(src))
        .ok_or("a part needs a `type`")?;
    let field = match kind.as_ref() {
        "input_text" | "output_text" | "text" | "summary_text" => "text",
        "refusal" => "refusal",
        other => {
            message.blocks.push(views::opaque_block(src, part, other));
            return Ok(());
        }
    };
    let node = part
        .get(src, field)
        .ok_or_else(|| format!("a {kind} part needs `{field}`"))?;
    let text = views::text(src, node).ok_or_else(|| format!("`{field}` must be a string"))?;
    place
        .slots
        .push(Slot::Block(message.blocks.len(), node.span.clone()));
    message.blocks.push(ContentBlock::text(text));
    Ok(())
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
    if !matches!(kind.as_deref(), Some("function" | "custom")) {
        // A built-in tool: its type is its name; the rest is the
        // upstream's to read.
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
    let name = member_text(src, tool, "name")?;
    let description = match tool.get(src, "description") {
        Some(node) if !node.is_null() => {
            place.description = Some(node.span.clone());
            views::text(src, node).ok_or("`description` must be a string")?
        }
        _ => String::new(),
    };
    let schema = if kind.as_deref() == Some("function") {
        "parameters"
    } else {
        "format"
    };
    let parameters = tool.get(src, schema).map_or_else(
        || json!({"type": "object", "properties": {}}),
        |p| p.to_value(src),
    );
    Ok((
        ToolSchema {
            name,
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
        // A new shape: the input re-encoded, each message the seams left
        // as it was keeping its bytes; the leading system messages are
        // the instructions when the client wrote some.
        let had_instructions = read.placed.first().is_some_and(|p| p.wire == INSTRUCTIONS);
        let leading = if had_instructions {
            judged
                .messages
                .iter()
                .take_while(|m| m.role == Role::System)
                .count()
        } else {
            0
        };
        if had_instructions {
            let text: Vec<String> = judged.messages[..leading]
                .iter()
                .map(views::joined_text)
                .collect();
            members.push((
                "instructions".to_owned(),
                (leading > 0)
                    .then(|| crate::jsondoc::string_literal(&text.join("\n")).into_bytes()),
            ));
        }
        let wire = root
            .get(src, "input")
            .and_then(Node::as_array)
            .unwrap_or_default();
        let items: Vec<Vec<u8>> = judged.messages[leading..]
            .iter()
            .map(|message| {
                before
                    .messages
                    .iter()
                    .position(|old| old == message)
                    .and_then(|at| wire.get(read.placed[at].wire))
                    .map_or_else(
                        || wire_item(message).to_string().into_bytes(),
                        |node| node.raw(src).to_vec(),
                    )
            })
            .collect();
        members.push(("input".to_owned(), Some(crate::jsondoc::array_from(items))));
    }
    if !views::write_tools(&mut splice, &before.tools, &judged.tools, &read.tools) {
        let array = views::tools_array(src, &before.tools, &judged.tools, &read.tools, |tool| {
            json!({"type": "function", "name": tool.name, "description": tool.description, "parameters": tool.parameters})
                .to_string()
                .into_bytes()
        });
        members.push((
            "tools".to_owned(),
            (!judged.tools.is_empty()).then_some(array),
        ));
    }
    views::write_members(src, root, splice, &members)
}

/// A host message as the wire's item (for a message the seams added or
/// changed in shape): a call as a `function_call`, a tool message as a
/// `function_call_output`, any other as a `message`.
fn wire_item(message: &Message) -> Value {
    if let Some(call) = message.tool_calls.first() {
        return json!({"type": "function_call", "call_id": call.id, "name": call.name,
            "arguments": views::arguments_text(&call.arguments)});
    }
    if let Some(id) = &message.tool_call_id {
        return json!({"type": "function_call_output", "call_id": id, "output": views::joined_text(message)});
    }
    if let Some(raw) = message
        .blocks
        .iter()
        .find(|b| b.kind != "text")
        .filter(|_| message.blocks.len() == 1)
        .and_then(|b| b.data.as_deref())
    {
        if let Ok(item) = serde_json::from_str::<Value>(raw.get()) {
            return item;
        }
    }
    let role = match message.role {
        Role::System => "developer",
        Role::Assistant => "assistant",
        Role::User | Role::Tool => "user",
    };
    let mut out = Map::new();
    out.insert("type".into(), json!("message"));
    out.insert("role".into(), json!(role));
    out.insert("content".into(), json!(views::joined_text(message)));
    Value::Object(out)
}
