//! The Anthropic Messages wire as the gateway speaks it to clients
//! (`POST /v1/messages`): a request body read into the loop's types, and a
//! relayed reply written back as a `message`, a Messages event stream, or
//! an `error`.

use super::wire::{one_word, shown_text, text_of, unsent, Head, Kind, Parsed, Refusal, Wire};
use crate::agent::{Relay, Reply};
use crate::types::{Arguments, Message, ToolCall, ToolList, ToolSchema};
use serde_json::{json, Value};
use std::fmt::Write as _;

/// `max_tokens` sent upstream when a request leaves it out (the Messages
/// API requires it; clients nearly always give it).
pub(super) const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The Messages wire.
pub(super) struct Anthropic;

impl Wire for Anthropic {
    const KIND: Kind = Kind::Anthropic;
    const NAME: &'static str = "messages";
    const ID_PREFIX: &'static str = "msg_";

    fn parse(body: &[u8]) -> Result<Parsed, String> {
        parse_request(body)
    }

    fn reply(reply: &Reply, head: &Head) -> Value {
        json!({
            "id": head.id,
            "type": "message",
            "role": "assistant",
            "model": head.model,
            "content": content_blocks(reply),
            "stop_reason": stop_reason(reply),
            "stop_sequence": null,
            "usage": {"input_tokens": reply.usage.input_tokens, "output_tokens": reply.usage.output_tokens},
        })
    }

    fn error(refusal: Refusal, message: &str) -> Value {
        let kind = match refusal {
            Refusal::BadRequest | Refusal::UnknownModel | Refusal::HeadersTooLarge => {
                "invalid_request_error"
            }
            Refusal::BadKey => "authentication_error",
            Refusal::Blocked => "permission_error",
            Refusal::TooLarge => "request_too_large",
            Refusal::Busy => "rate_limit_error",
            Refusal::Upstream => "api_error",
        };
        json!({"type": "error", "error": {"type": kind, "message": message}})
    }

    fn stream_start(head: &Head) -> String {
        let mut out = event(
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": head.id, "type": "message", "role": "assistant", "model": head.model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }}),
        );
        out.push_str(&event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ));
        out
    }

    fn stream_text(_head: &Head, text: &str) -> String {
        event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        )
    }

    fn stream_end(head: &Head, reply: &Reply, sent: &str, _include_usage: bool) -> String {
        let mut out = String::new();
        let unsent = unsent(reply, sent);
        if !unsent.is_empty() {
            out.push_str(&Self::stream_text(head, &unsent));
        }
        out.push_str(&event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": 0}),
        ));
        for (offset, call) in reply.tool_calls.iter().enumerate() {
            let index = offset + 1;
            out.push_str(&event(
                "content_block_start",
                &json!({"type": "content_block_start", "index": index, "content_block": {
                    "type": "tool_use", "id": call.id, "name": call.name, "input": {}}}),
            ));
            out.push_str(&event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": {
                    "type": "input_json_delta", "partial_json": input_of(call).to_string()}}),
            ));
            out.push_str(&event(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            ));
        }
        out.push_str(&event(
            "message_delta",
            &json!({"type": "message_delta",
                "delta": {"stop_reason": stop_reason(reply), "stop_sequence": null},
                "usage": {"output_tokens": reply.usage.output_tokens}}),
        ));
        out.push_str(&event("message_stop", &json!({"type": "message_stop"})));
        out
    }

    fn stream_error(message: &str) -> String {
        event(
            "error",
            &json!({"type": "error", "error": {"type": "api_error", "message": message}}),
        )
    }
}

/// One server-sent event.
fn event(name: &str, data: &Value) -> String {
    let mut out = String::new();
    let _ = write!(out, "event: {name}\ndata: {data}\n\n");
    out
}

/// Why the reply ended, in the wire's words: a veto is a `refusal`.
fn stop_reason(reply: &Reply) -> &'static str {
    if reply.vetoed_by.is_some() {
        "refusal"
    } else if reply.tool_calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
}

/// A call's arguments as a `tool_use` block's `input` (an object).
fn input_of(call: &ToolCall) -> Value {
    match call.arguments.parse() {
        Value::Object(map) => Value::Object(map),
        other => json!({ "value": other }),
    }
}

/// The reply's content blocks: its text (refusal lines included), then
/// each tool call the client may run.
fn content_blocks(reply: &Reply) -> Vec<Value> {
    let mut blocks = Vec::new();
    let text = shown_text(reply);
    if !text.is_empty() || reply.tool_calls.is_empty() {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for call in &reply.tool_calls {
        blocks.push(
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input_of(call)}),
        );
    }
    blocks
}

/// Reads a Messages request body.
fn parse_request(body: &[u8]) -> Result<Parsed, String> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| format!("the request body is not JSON: {error}"))?;
    let Value::Object(mut body) = value else {
        return Err("the request body is not a JSON object".to_owned());
    };
    let model = match body.remove("model") {
        Some(Value::String(model)) if !model.is_empty() => model,
        Some(_) => return Err("model: must be a non-empty string".to_owned()),
        None => return Err("model: Field required".to_owned()),
    };
    let mut messages = Vec::new();
    match body.remove("system") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => messages.push(Message::system(text)),
        Some(Value::Array(blocks)) => {
            messages.push(Message::system(
                text_of(&blocks, "content blocks").map_err(|e| format!("system: {e}"))?,
            ));
        }
        Some(_) => return Err("system: must be a string or an array of text blocks".to_owned()),
    }
    match body.remove("messages") {
        Some(Value::Array(turns)) if !turns.is_empty() => {
            for (index, turn) in turns.iter().enumerate() {
                messages_of(turn, &mut messages).map_err(|e| format!("messages.{index}: {e}"))?;
            }
        }
        Some(_) => return Err("messages: must be a non-empty array".to_owned()),
        None => return Err("messages: Field required".to_owned()),
    }
    let tools = match body.remove("tools") {
        None | Some(Value::Null) => ToolList::default(),
        Some(Value::Array(tools)) => ToolList::new(
            tools
                .iter()
                .enumerate()
                .map(|(index, tool)| tool_of(tool).map_err(|e| format!("tools.{index}: {e}")))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => return Err("tools: must be an array".to_owned()),
    };
    let stream = match body.remove("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(stream)) => stream,
        Some(_) => return Err("stream: must be a boolean".to_owned()),
    };
    Ok(Parsed {
        model,
        include_usage: true,
        relay: Relay {
            messages,
            tools,
            kwargs: body,
            stream,
        },
    })
}

/// One turn as the loop's messages: a user turn's `tool_result` blocks
/// become tool messages (in order, before its text), an assistant turn's
/// `tool_use` blocks its tool calls.
fn messages_of(turn: &Value, into: &mut Vec<Message>) -> Result<(), String> {
    let role = turn["role"].as_str().ok_or("role: Field required")?;
    let blocks: Vec<Value> = match &turn["content"] {
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Array(blocks) => blocks.clone(),
        _ => return Err("content: must be a string or an array of blocks".to_owned()),
    };
    match role {
        "user" => {
            let mut text = Vec::new();
            for block in &blocks {
                if block["type"] == "tool_result" {
                    let id = block["tool_use_id"]
                        .as_str()
                        .ok_or("a tool_result block needs `tool_use_id`")?;
                    let content = match &block["content"] {
                        Value::String(text) => text.clone(),
                        Value::Array(parts) => text_of(parts, "content blocks")?,
                        Value::Null => String::new(),
                        _ => {
                            return Err(
                                "tool_result content: must be a string or text blocks".to_owned()
                            )
                        }
                    };
                    into.push(Message::tool(id, content));
                } else {
                    text.push(block.clone());
                }
            }
            if !text.is_empty() {
                into.push(Message::user(text_of(&text, "content blocks")?));
            }
        }
        "assistant" => {
            let mut text = Vec::new();
            let mut calls = Vec::new();
            for block in &blocks {
                if block["type"] == "tool_use" {
                    let id = block["id"]
                        .as_str()
                        .ok_or("a tool_use block needs an `id`")?;
                    let name = block["name"]
                        .as_str()
                        .ok_or("a tool_use block needs a `name`")?;
                    calls.push(ToolCall {
                        id: id.to_owned(),
                        name: name.to_owned(),
                        arguments: Arguments::from_value(&block["input"]),
                    });
                } else {
                    text.push(block.clone());
                }
            }
            into.push(Message::assistant(text_of(&text, "content blocks")?, calls));
        }
        other => return Err(format!("role: unknown role '{}'", one_word(other))),
    }
    Ok(())
}

fn tool_of(tool: &Value) -> Result<ToolSchema, String> {
    let name = tool["name"].as_str().ok_or("name: Field required")?;
    Ok(ToolSchema {
        name: name.to_owned(),
        description: tool["description"].as_str().unwrap_or_default().to_owned(),
        parameters: match &tool["input_schema"] {
            Value::Null => json!({"type": "object", "properties": {}}),
            schema => schema.clone(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Role;

    #[test]
    fn a_messages_request_is_read_with_its_system_tool_uses_and_results() {
        let body = br#"{"model":"claude","max_tokens":100,"system":"be brief",
            "messages":[{"role":"user","content":"hi"},
              {"role":"assistant","content":[{"type":"text","text":"let me look"},
                {"type":"tool_use","id":"t1","name":"f","input":{"a":1}}]},
              {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"42"},
                {"type":"text","text":"and?"}]}],
            "tools":[{"name":"f","input_schema":{"type":"object"}}]}"#;
        let parsed = parse_request(body).unwrap();
        let roles: Vec<Role> = parsed.relay.messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::System,
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::User
            ]
        );
        assert_eq!(
            parsed.relay.messages[2].tool_calls[0].arguments.parse(),
            json!({"a": 1})
        );
        assert_eq!(parsed.relay.messages[3].tool_call_id.as_deref(), Some("t1"));
        assert_eq!(parsed.relay.kwargs["max_tokens"], 100);
    }

    #[test]
    fn a_malformed_messages_request_is_refused_with_the_field_named() {
        for (body, says) in [
            (
                &br#"{"messages":[{"role":"user","content":"x"}]}"#[..],
                "model: Field required",
            ),
            (
                br#"{"model":"m","messages":[{"role":"user","content":[{"type":"image"}]}]}"#,
                "messages.0: content blocks of type 'image'",
            ),
            (
                br#"{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result"}]}]}"#,
                "needs `tool_use_id`",
            ),
            (
                br#"{"model":"m","messages":[{"role":"robot","content":"x"}]}"#,
                "unknown role 'robot'",
            ),
        ] {
            let error = parse_request(body).unwrap_err();
            assert!(error.contains(says), "{error} should say {says}");
        }
    }

    #[test]
    fn a_judged_reply_is_a_message_with_text_and_tool_use_blocks() {
        let reply = Reply {
            content: "ok".to_owned(),
            tool_calls: vec![ToolCall::new("t1", "f", json!({"a": 1}))],
            ..Reply::default()
        };
        let head = Head {
            id: "msg_1".to_owned(),
            model: "claude".to_owned(),
            created: 0,
        };
        let body = Anthropic::reply(&reply, &head);
        assert_eq!(body["stop_reason"], "tool_use");
        assert_eq!(body["content"][1]["input"], json!({"a": 1}));
        let stream = Anthropic::stream_end(&head, &reply, "ok", true);
        assert!(stream.contains(r#""partial_json":"{\"a\":1}""#), "{stream}");
        assert!(stream.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
    }
}
