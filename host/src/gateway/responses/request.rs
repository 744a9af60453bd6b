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

use super::super::request_views::{Document, Member, RequestFormat, ToolFormat, ToolKinds};
use super::super::views::{self, ArgsSlot, Placed, Slot};
use crate::jsondoc::{Kind, Node};
use crate::types::{Message, Role, ToolCall, ToolSchema};
use serde_json::{json, Map, Value};
use std::borrow::Cow;

/// The `wire` of the `instructions`' message.
const INSTRUCTIONS: usize = usize::MAX;

impl RequestFormat for super::Responses {
    const TOOLS: ToolFormat = ToolFormat {
        kinds: ToolKinds::Typed(&[("function", "parameters"), ("custom", "format")]),
        within: None,
        no_name: "`name` must be a string",
    };
    const MEMBERS: &'static [&'static str] = &["model", "instructions", "input", "tools"];

    /// The `instructions` (a system message, first; its place's `wire` is
    /// `INSTRUCTIONS`) and the `input`: a string, or each of its items.
    fn messages(src: &[u8], root: &Node) -> Result<(Vec<Message>, Vec<Placed>), String> {
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
        Ok((messages, placed))
    }

    /// `previous_response_id`.
    fn previous(src: &[u8], root: &Node) -> Result<Option<String>, String> {
        match root.get(src, "previous_response_id") {
            Some(node) if !node.is_null() => Ok(Some(
                views::text(src, node).ok_or("`previous_response_id` must be a string")?,
            )),
            _ => Ok(None),
        }
    }

    /// The input re-encoded, each message the seams left as it was
    /// keeping its bytes; the leading system messages are the
    /// instructions when the client wrote some.
    fn reshape(doc: &Document<'_, Self>, judged: &[Message]) -> Vec<Member> {
        let mut members = Vec::new();
        let had_instructions = doc
            .views
            .placed
            .first()
            .is_some_and(|p| p.wire == INSTRUCTIONS);
        let leading = if had_instructions {
            judged.iter().take_while(|m| m.role == Role::System).count()
        } else {
            0
        };
        if had_instructions {
            let text: Vec<String> = judged[..leading].iter().map(views::joined_text).collect();
            members.push((
                "instructions".to_owned(),
                (leading > 0)
                    .then(|| crate::jsondoc::string_literal(&text.join("\n")).into_bytes()),
            ));
        }
        members.push(doc.kept_or_encoded("input", &judged[leading..], wire_item));
        members
    }

    fn tool(tool: &ToolSchema) -> Value {
        json!({"type": "function", "name": tool.name, "description": tool.description, "parameters": tool.parameters})
    }
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
    views::read_content(
        src,
        node,
        field,
        (message, place),
        |part, index| views::part_of(src, part, "part", part_field, index),
        || format!("`{field}` must be a string or an array of parts"),
    )
}

/// Which member of a content part holds its text, for the parts the
/// seams read (`input_text`, `output_text`, `text`, `summary_text`,
/// `refusal`).
fn part_field(kind: &str) -> Option<&'static str> {
    match kind {
        "input_text" | "output_text" | "text" | "summary_text" => Some("text"),
        "refusal" => Some("refusal"),
        _ => None,
    }
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
