//! The `OpenAI` Responses wire as a loopback model speaks it: a `response`
//! object, or its event stream (`response.created` … `response.completed`,
//! every event numbered), for [`tool_model`](super::http::tool_model)'s
//! turns, and the reply an upstream makes of scripted items.

use super::http::{pieces, Reply, Turn};
use serde_json::{json, Value};

/// The encrypted reasoning a reply carries when the request asks for it
/// (`reasoning`, or `include: ["reasoning.encrypted_content"]`): what a
/// relay must pass on byte for byte.
pub const ENCRYPTED_REASONING: &str = "gAAAAABchimera-encrypted-reasoning==";

/// The text of every `function_call_output` (`custom_tool_call_output`)
/// item after the request's last other item, and how many outputs the
/// whole input holds.
pub fn results(body: &Value) -> (Vec<String>, usize) {
    let Some(items) = body["input"].as_array() else {
        return (Vec::new(), 0);
    };
    let is_output = |item: &Value| {
        matches!(
            item["type"].as_str(),
            Some("function_call_output" | "custom_tool_call_output")
        )
    };
    let text = |output: &Value| match output {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    };
    let last: Vec<String> = items
        .iter()
        .rev()
        .take_while(|item| is_output(item))
        .map(|item| text(&item["output"]))
        .collect();
    let all = items.iter().filter(|item| is_output(item)).count();
    (last.into_iter().rev().collect(), all)
}

/// The reply of [`tool_model`](super::http::tool_model)'s `turn` on the
/// Responses wire: a reasoning item when asked for, then a message, then
/// the call (a call turn).
pub(crate) fn reply(turn: &Turn<'_>, body: &Value) -> Reply {
    let model = body["model"].as_str().unwrap_or("chimera-test");
    let mut items = Vec::new();
    let reasoning = !body["reasoning"].is_null()
        || body["include"]
            .as_array()
            .is_some_and(|i| i.iter().any(|x| x == "reasoning.encrypted_content"));
    if reasoning {
        items.push(
            json!({"id": "rs_chimera_01", "type": "reasoning", "summary": [],
            "encrypted_content": ENCRYPTED_REASONING}),
        );
    }
    match turn {
        Turn::Text(text) => items.push(message("msg_chimera_01", text)),
        Turn::Call {
            id,
            tool,
            arguments,
        } => {
            items.push(message("msg_chimera_01", "I will use the tool."));
            items.push(json!({"id": format!("fc_{id}"), "type": "function_call",
                "status": "completed", "call_id": id, "name": tool,
                "arguments": arguments.to_string()}));
        }
    }
    scripted(model, &items, body["stream"] == true)
}

/// An assistant message item of one `output_text` part.
pub fn message(id: &str, text: &str) -> Value {
    json!({"id": id, "type": "message", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": text}]})
}

/// A `response` object of `model` holding `output` (`status` as given).
pub fn response(model: &str, output: &[Value], status: &str) -> Value {
    json!({"id": "resp_chimera_01", "object": "response", "created_at": 1_700_000_000,
        "status": status, "error": null, "incomplete_details": null, "instructions": null,
        "model": model, "output": output, "parallel_tool_calls": true, "tool_choice": "auto",
        "tools": [], "text": {"format": {"type": "text"}}, "metadata": {},
        "usage": if status == "in_progress" { Value::Null } else { json!({
            "input_tokens": 42, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 12, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 54}) }})
}

/// The reply an upstream makes of `items`: one `response` object, or
/// (`stream`) its events, each text and each call's arguments in three
/// deltas.
pub fn scripted(model: &str, items: &[Value], stream: bool) -> Reply {
    if !stream {
        return Reply::json(response(model, items, "completed"));
    }
    Reply::Stream(events(model, items))
}

/// The event stream of a response holding `items` (see [`scripted`]),
/// each event a chunk of its own.
pub fn events(model: &str, items: &[Value]) -> Vec<String> {
    events_in(model, items, 3)
}

/// [`events`], each text and each call's arguments in `deltas` deltas.
pub fn events_in(model: &str, items: &[Value], deltas: usize) -> Vec<String> {
    let mut events: Vec<Value> = vec![
        json!({"type": "response.created", "response": response(model, &[], "in_progress")}),
        json!({"type": "response.in_progress", "response": response(model, &[], "in_progress")}),
    ];
    for (index, item) in items.iter().enumerate() {
        events.extend(item_events_in(index, item, deltas));
    }
    events.push(
        json!({"type": "response.completed", "response": response(model, items, "completed")}),
    );
    numbered(events)
}

/// The events of one output item at `index` (each text in 3 deltas).
pub fn item_events(index: usize, item: &Value) -> Vec<Value> {
    item_events_in(index, item, 3)
}

/// [`item_events`], each text in `deltas` deltas.
pub fn item_events_in(index: usize, item: &Value, deltas: usize) -> Vec<Value> {
    let id = item["id"].clone();
    let mut events = Vec::new();
    match item["type"].as_str() {
        Some("message") => {
            let mut open = item.clone();
            open["status"] = json!("in_progress");
            open["content"] = json!([]);
            events.push(
                json!({"type": "response.output_item.added", "output_index": index, "item": open}),
            );
            for (at, part) in item["content"].as_array().into_iter().flatten().enumerate() {
                let text = part["text"].as_str().unwrap_or("");
                let mut empty = part.clone();
                empty["text"] = json!("");
                events.push(json!({"type": "response.content_part.added", "item_id": id,
                    "output_index": index, "content_index": at, "part": empty}));
                for piece in pieces(text, deltas) {
                    events.push(json!({"type": "response.output_text.delta", "item_id": id,
                        "output_index": index, "content_index": at, "delta": piece,
                        "logprobs": []}));
                }
                events.push(json!({"type": "response.output_text.done", "item_id": id,
                    "output_index": index, "content_index": at, "text": text, "logprobs": []}));
                events.push(json!({"type": "response.content_part.done", "item_id": id,
                    "output_index": index, "content_index": at, "part": part}));
            }
        }
        Some("function_call") => {
            let mut open = item.clone();
            open["status"] = json!("in_progress");
            open["arguments"] = json!("");
            events.push(
                json!({"type": "response.output_item.added", "output_index": index, "item": open}),
            );
            let arguments = item["arguments"].as_str().unwrap_or("");
            for piece in pieces(arguments, deltas) {
                events.push(json!({"type": "response.function_call_arguments.delta",
                    "item_id": id, "output_index": index, "delta": piece}));
            }
            events.push(json!({"type": "response.function_call_arguments.done",
                "item_id": id, "output_index": index, "arguments": arguments}));
        }
        _ => events.push(
            json!({"type": "response.output_item.added", "output_index": index, "item": item}),
        ),
    }
    events.push(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
    events
}

/// `events` numbered from 0 and written as server-sent events.
pub fn numbered(events: Vec<Value>) -> Vec<String> {
    events
        .into_iter()
        .enumerate()
        .map(|(seq, mut event)| {
            event["sequence_number"] = json!(seq);
            format!(
                "event: {}\ndata: {event}\n\n",
                event["type"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// An embeddings answer of one vector per input.
pub fn embeddings(body: &Value) -> Reply {
    let inputs = match &body["input"] {
        Value::Array(items) if items.iter().all(Value::is_string) => items.len(),
        _ => 1,
    };
    let data: Vec<Value> = (0..inputs)
        .map(|index| json!({"object": "embedding", "index": index, "embedding": [0.25, -0.5, 1.0]}))
        .collect();
    Reply::json(
        json!({"object": "list", "data": data, "model": body["model"],
        "usage": {"prompt_tokens": 5, "total_tokens": 5}}),
    )
}
