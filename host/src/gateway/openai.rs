//! The `OpenAI` chat-completions wire as the gateway speaks it to clients:
//! a request body read into the loop's types (hostile until checked:
//! every field's type is checked, nothing is guessed), and a relayed
//! reply written back as a `chat.completion`, a stream of
//! `chat.completion.chunk`s, or an `error` object.

use super::wire::{one_word, shown_text, text_of, unsent, Head, Kind, Parsed, Refusal, Wire};
use crate::agent::{Relay, Reply};
use crate::types::{Arguments, Message, Role, ToolCall, ToolList, ToolSchema};
use serde_json::{json, Map, Value};
use std::fmt::Write as _;

/// The chat-completions wire (`POST /v1/chat/completions`).
pub(super) struct OpenAi;

impl Wire for OpenAi {
    const KIND: Kind = Kind::OpenAi;
    const NAME: &'static str = "chat completions";
    const ID_PREFIX: &'static str = "chatcmpl-";

    fn parse(body: &[u8]) -> Result<Parsed, String> {
        parse_request(body)
    }

    fn reply(reply: &Reply, head: &Head) -> Value {
        completion(reply, head)
    }

    fn error(refusal: Refusal, message: &str) -> Value {
        let (kind, code) = match refusal {
            Refusal::BadRequest => ("invalid_request_error", None),
            Refusal::BadKey => ("authentication_error", Some("invalid_api_key")),
            Refusal::Blocked => ("permission_error", Some("blocked_by_policy")),
            Refusal::UnknownModel => ("invalid_request_error", Some("model_not_found")),
            Refusal::TooLarge => ("invalid_request_error", Some("body_too_large")),
            Refusal::HeadersTooLarge => ("invalid_request_error", Some("headers_too_large")),
            Refusal::Busy => ("rate_limit_error", Some("gateway_busy")),
            Refusal::Upstream => ("upstream_error", Some("upstream_failed")),
        };
        error_body(message, kind, code)
    }

    fn stream_start(head: &Head) -> String {
        chunk(head, &json!({"role": "assistant", "content": ""}), None)
    }

    fn stream_text(head: &Head, text: &str) -> String {
        chunk(head, &json!({"content": text}), None)
    }

    fn stream_end(head: &Head, reply: &Reply, sent: &str, include_usage: bool) -> String {
        closing_chunks(head, reply, sent, include_usage)
    }

    fn stream_error(message: &str) -> String {
        let body = error_body(message, "upstream_error", Some("upstream_failed"));
        format!("data: {body}\n\n")
    }
}

/// Reads a chat-completions request body.
fn parse_request(body: &[u8]) -> Result<Parsed, String> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| format!("the request body is not JSON: {error}"))?;
    let Value::Object(mut body) = value else {
        return Err("the request body is not a JSON object".to_owned());
    };
    let model = match body.remove("model") {
        Some(Value::String(model)) if !model.is_empty() => model,
        Some(_) => return Err("`model` must be a non-empty string".to_owned()),
        None => return Err("`model` is required".to_owned()),
    };
    let messages = match body.remove("messages") {
        Some(Value::Array(messages)) if !messages.is_empty() => messages
            .iter()
            .enumerate()
            .map(|(index, message)| {
                message_of(message).map_err(|error| format!("messages[{index}]: {error}"))
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err("`messages` must be a non-empty array".to_owned()),
        None => return Err("`messages` is required".to_owned()),
    };
    let tools = match body.remove("tools") {
        None | Some(Value::Null) => ToolList::default(),
        Some(Value::Array(tools)) => ToolList::new(
            tools
                .iter()
                .enumerate()
                .map(|(index, tool)| {
                    tool_of(tool).map_err(|error| format!("tools[{index}]: {error}"))
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => return Err("`tools` must be an array".to_owned()),
    };
    let stream = match body.remove("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(stream)) => stream,
        Some(_) => return Err("`stream` must be a boolean".to_owned()),
    };
    let include_usage = body
        .remove("stream_options")
        .is_some_and(|options| options["include_usage"] == json!(true));
    Ok(Parsed {
        model,
        include_usage,
        relay: Relay {
            messages,
            tools,
            kwargs: body,
            stream,
        },
    })
}

fn message_of(value: &Value) -> Result<Message, String> {
    let role = match value["role"].as_str() {
        Some("system" | "developer") => Role::System,
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("tool") => Role::Tool,
        Some(other) => return Err(format!("unknown role '{}'", one_word(other))),
        None => return Err("`role` is required".to_owned()),
    };
    let content = match &value["content"] {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Array(parts) => text_of(parts, "content parts")?,
        _ => return Err("`content` must be a string or an array of parts".to_owned()),
    };
    let tool_calls = match &value["tool_calls"] {
        Value::Null => Vec::new(),
        Value::Array(calls) => calls
            .iter()
            .enumerate()
            .map(|(index, call)| {
                call_of(call).map_err(|error| format!("tool_calls[{index}]: {error}"))
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err("`tool_calls` must be an array".to_owned()),
    };
    let mut message = match role {
        Role::System => Message::system(content),
        Role::User => Message::user(content),
        Role::Assistant => Message::assistant(content, tool_calls),
        Role::Tool => match value["tool_call_id"].as_str() {
            Some(id) => Message::tool(id, content),
            None => return Err("a tool message needs `tool_call_id`".to_owned()),
        },
    };
    message.name = value["name"].as_str().map(str::to_owned);
    Ok(message)
}

fn call_of(value: &Value) -> Result<ToolCall, String> {
    let id = value["id"].as_str().ok_or("a tool call needs an `id`")?;
    let function = &value["function"];
    let name = function["name"]
        .as_str()
        .ok_or("a tool call needs `function.name`")?;
    let arguments = match &function["arguments"] {
        Value::String(text) => Arguments::from_json(text)
            .map_err(|error| format!("`function.arguments` is not JSON: {error}"))?,
        Value::Null => Arguments::empty(),
        _ => return Err("`function.arguments` must be a string of JSON".to_owned()),
    };
    Ok(ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments,
    })
}

fn tool_of(value: &Value) -> Result<ToolSchema, String> {
    if value["type"].as_str() != Some("function") {
        return Err("only tools of type 'function' are supported".to_owned());
    }
    let function = &value["function"];
    let name = function["name"]
        .as_str()
        .ok_or("a tool needs `function.name`")?;
    Ok(ToolSchema {
        name: name.to_owned(),
        description: function["description"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        parameters: match &function["parameters"] {
            Value::Null => json!({"type": "object", "properties": {}}),
            parameters => parameters.clone(),
        },
    })
}

/// The calls of a reply in the wire's shape.
fn calls_json(calls: &[ToolCall]) -> Vec<Value> {
    calls
        .iter()
        .map(|call| {
            json!({
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments.as_str()},
            })
        })
        .collect()
}

/// Why the reply ended, in the wire's words.
fn finish_reason(reply: &Reply) -> &'static str {
    if reply.vetoed_by.is_some() {
        "content_filter"
    } else if reply.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

fn usage_json(reply: &Reply) -> Value {
    let usage = reply.usage;
    json!({
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    })
}

/// A whole reply as a `chat.completion`.
fn completion(reply: &Reply, head: &Head) -> Value {
    let text = shown_text(reply);
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert(
        "content".into(),
        if text.is_empty() && !reply.tool_calls.is_empty() {
            Value::Null
        } else {
            json!(text)
        },
    );
    if !reply.tool_calls.is_empty() {
        message.insert("tool_calls".into(), json!(calls_json(&reply.tool_calls)));
    }
    json!({
        "id": head.id,
        "object": "chat.completion",
        "created": head.created,
        "model": head.model,
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": finish_reason(reply),
            "logprobs": null,
        }],
        "usage": usage_json(reply),
    })
}

/// One `chat.completion.chunk` as an SSE event.
fn chunk(head: &Head, delta: &Value, finish_reason: Option<&str>) -> String {
    let body = json!({
        "id": head.id,
        "object": "chat.completion.chunk",
        "created": head.created,
        "model": head.model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": null}],
    });
    format!("data: {body}\n\n")
}

/// The chunks that close a stream once the reply is judged: the tool calls
/// (each whole), any text not yet sent (a gate's notice, refusal lines),
/// the finish reason, the usage when asked for, and `[DONE]`.
fn closing_chunks(head: &Head, reply: &Reply, sent: &str, include_usage: bool) -> String {
    let mut out = String::new();
    let unsent = unsent(reply, sent);
    if !unsent.is_empty() {
        out.push_str(&chunk(head, &json!({"content": unsent}), None));
    }
    for (index, call) in calls_json(&reply.tool_calls).into_iter().enumerate() {
        let mut call = call;
        call["index"] = json!(index);
        out.push_str(&chunk(head, &json!({"tool_calls": [call]}), None));
    }
    out.push_str(&chunk(head, &json!({}), Some(finish_reason(reply))));
    if include_usage {
        let body = json!({
            "id": head.id,
            "object": "chat.completion.chunk",
            "created": head.created,
            "model": head.model,
            "choices": [],
            "usage": usage_json(reply),
        });
        let _ = write!(out, "data: {body}\n\n");
    }
    out.push_str("data: [DONE]\n\n");
    out
}

/// An error object: `{"error": {"message", "type", "param", "code"}}`.
fn error_body(message: &str, kind: &str, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_read_into_messages_tools_and_the_rest_as_options() {
        let body = br#"{"model":"m","temperature":0.2,"stream":true,
            "stream_options":{"include_usage":true},
            "messages":[{"role":"system","content":"be brief"},
              {"role":"user","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}]},
              {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
              {"role":"tool","tool_call_id":"c1","content":"42"}],
            "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}"#;
        let request = parse_request(body).unwrap();
        assert_eq!(request.model, "m");
        assert!(request.include_usage && request.relay.stream);
        let messages = &request.relay.messages;
        assert_eq!(messages[1].content, "hi there");
        assert_eq!(messages[2].tool_calls[0].arguments.as_str(), r#"{"a":1}"#);
        assert_eq!(messages[3].tool_call_id.as_deref(), Some("c1"));
        assert!(request.relay.tools.json().contains(r#""name":"f""#));
        assert_eq!(
            request.relay.kwargs.keys().collect::<Vec<_>>(),
            ["temperature"]
        );
    }

    #[test]
    fn a_malformed_request_is_refused_with_the_field_named() {
        for (body, says) in [
            (&b"not json"[..], "not JSON"),
            (b"[1]", "not a JSON object"),
            (br#"{"messages":[{"role":"user","content":"x"}]}"#, "`model` is required"),
            (br#"{"model":"m","messages":[]}"#, "non-empty array"),
            (br#"{"model":"m","messages":[{"role":"boss","content":"x"}]}"#, "messages[0]: unknown role 'boss'"),
            (br#"{"model":"m","messages":[{"role":"user","content":[{"type":"image_url"}]}]}"#, "'image_url' are not supported"),
            (br#"{"model":"m","messages":[{"role":"tool","content":"x"}]}"#, "needs `tool_call_id`"),
            (br#"{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":"{"}}]}]}"#, "tool_calls[0]: `function.arguments` is not JSON"),
            (br#"{"model":"m","stream":"yes","messages":[{"role":"user","content":"x"}]}"#, "`stream` must be a boolean"),
        ] {
            let error = parse_request(body).unwrap_err();
            assert!(error.contains(says), "{error} should say {says}");
        }
    }

    #[test]
    fn a_judged_reply_is_written_with_refusals_and_the_finish_reason() {
        let reply = Reply {
            content: String::new(),
            tool_calls: vec![ToolCall::new("c1", "f", json!({"a": 1}))],
            refused: vec![(
                ToolCall::new("c2", "rm", json!({})),
                "Blocked by interceptor: no rm".to_owned(),
            )],
            ..Reply::default()
        };
        let head = Head {
            id: "chatcmpl-1".to_owned(),
            model: "m".to_owned(),
            created: 7,
        };
        let body = completion(&reply, &head);
        let choice = &body["choices"][0];
        assert_eq!(choice["finish_reason"], "tool_calls");
        assert_eq!(
            choice["message"]["content"],
            "Blocked by interceptor: no rm"
        );
        assert_eq!(choice["message"]["tool_calls"][0]["id"], "c1");
        assert_eq!(choice["message"]["tool_calls"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn a_stream_closes_with_what_was_not_sent_then_done() {
        let head = Head {
            id: "x".to_owned(),
            model: "m".to_owned(),
            created: 1,
        };
        let reply = Reply {
            content: "hello world".to_owned(),
            ..Reply::default()
        };
        let closing = closing_chunks(&head, &reply, "hello", false);
        assert!(closing.contains(r#""content":" world""#), "{closing}");
        assert!(closing.ends_with("data: [DONE]\n\n"));
        let vetoed = Reply {
            content: "Content safety: email".to_owned(),
            vetoed_by: Some("content-safety/stream".to_owned()),
            ..Reply::default()
        };
        let closing = closing_chunks(&head, &vetoed, "reach ", false);
        assert!(
            closing.contains(r#""content":"\nContent safety: email""#),
            "{closing}"
        );
        assert!(closing.contains(r#""finish_reason":"content_filter""#));
    }
}
