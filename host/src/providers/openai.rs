//! An OpenAI-compatible chat-completions provider (`OpenAI`, vLLM, llama.cpp's
//! server, Ollama, `LiteLLM` …), with streaming.
//!
//! Its extra headers are its per-request header surface: the
//! `provider_request` seam reads them and may replace them for one call (the
//! replacement arrives in that call's [`ProviderCall::headers`]; the
//! configured headers never change). The API key is *not* on that surface —
//! the transport adds `Authorization: Bearer` itself — so a redactor
//! scrubbing headers never breaks authentication.

use super::http::{HttpSettings, Reply, RetryObserver, Transport};
use super::{
    content_part, DeltaSink, ModelResponse, Provider, ProviderCall, ProviderError, StreamDelta,
    Usage,
};
use crate::types::{Arguments, ContentBlock, Headers, Message, Role, ToolCall, ToolSchema};
use serde_json::{json, Map, Value};

/// How to reach an OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Base URL, up to and including `/v1` (`https://api.openai.com/v1`).
    pub base_url: String,
    /// The model to ask for (`gpt-4o-mini`); also what the envelope's
    /// `model` shows.
    pub model: String,
    /// The API key, sent as `Authorization: Bearer …` (none for local servers).
    pub api_key: Option<String>,
    /// Extra headers: the per-request header surface, sent on every call
    /// that carries none of its own.
    pub headers: Headers,
    /// Timeouts, retries and size limits of its HTTP client.
    pub http: HttpSettings,
}

/// A provider for any server that speaks the chat-completions API, with
/// its extra headers as the header surface.
pub struct OpenAiProvider {
    config: OpenAiConfig,
    transport: Transport,
}

http_provider_new!(OpenAiProvider, OpenAiConfig);

impl OpenAiProvider {
    /// POSTs `call` to the chat-completions endpoint, streamed or whole.
    async fn send(&self, call: &ProviderCall<'_>, stream: bool) -> Result<Reply, ProviderError> {
        self.transport
            .post(
                &self.url(),
                &self.wire_headers(call),
                &self.body(call, stream),
            )
            .await
    }

    fn url(&self) -> String {
        format!(
            "{}/chat/completions",
            self.config.base_url.trim_end_matches('/')
        )
    }

    /// The call's surface headers, then the bearer key (which replaces any
    /// surface header of that name).
    fn wire_headers(&self, call: &ProviderCall<'_>) -> Vec<(String, String)> {
        let mut headers: Vec<(String, String)> = call
            .headers_or(&self.config.headers)
            .0
            .iter()
            .filter(|(name, _)| {
                self.config.api_key.is_none() || !name.eq_ignore_ascii_case("authorization")
            })
            .cloned()
            .collect();
        if let Some(key) = &self.config.api_key {
            headers.push(("Authorization".to_owned(), format!("Bearer {key}")));
        }
        headers
    }

    fn body(&self, call: &ProviderCall<'_>, stream: bool) -> Value {
        let mut body = Map::new();
        body.insert(
            "model".into(),
            json!(call.model.unwrap_or(&self.config.model)),
        );
        body.insert(
            "messages".into(),
            Value::Array(call.messages.iter().map(message).collect()),
        );
        if !call.tools.is_empty() {
            body.insert(
                "tools".into(),
                Value::Array(call.tools.iter().map(tool).collect()),
            );
        }
        for (key, value) in call.kwargs {
            body.insert(key.clone(), value.clone());
        }
        if stream {
            body.insert("stream".into(), json!(true));
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        Value::Object(body)
    }
}

/// A tool in the chat-completions shape (a `function` tool).
pub(crate) fn tool(schema: &ToolSchema) -> Value {
    json!({"type": "function", "function": {
        "name": schema.name, "description": schema.description, "parameters": schema.parameters,
    }})
}

/// A message as this provider sends it: an assistant's calls (with
/// `content: null` when it has no text), the others' left out.
fn message(message: &Message) -> Value {
    let calls: &[ToolCall] = if message.role == Role::Assistant {
        &message.tool_calls
    } else {
        &[]
    };
    let mut out = chat_message(message, content_part, calls, |a| a.as_str().to_owned());
    if !calls.is_empty() && message.content.is_empty() && message.blocks.is_empty() {
        out["content"] = Value::Null;
    }
    out
}

/// A message in the chat-completions shape: its `role`; its `content`, a
/// string or its blocks each as `part` writes one; `tool_calls` when
/// `calls` holds some, each one's arguments as `arguments` writes them;
/// `tool_call_id` and `name` when it has them.
pub(crate) fn chat_message(
    message: &Message,
    part: fn(&ContentBlock) -> Value,
    calls: &[ToolCall],
    arguments: fn(&Arguments) -> String,
) -> Value {
    let mut out = Map::new();
    out.insert("role".into(), json!(message.role.as_str()));
    if message.blocks.is_empty() {
        out.insert("content".into(), json!(message.content));
    } else {
        let parts = message.blocks.iter().map(part).collect();
        out.insert("content".into(), Value::Array(parts));
    }
    if !calls.is_empty() {
        let calls: Vec<Value> = calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments(&c.arguments)}}))
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

/// Arguments text from the model; text that is not JSON is kept as a JSON
/// string, so the tool (and the model) see what was sent.
pub(crate) fn arguments_from_text(text: &str) -> Arguments {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Arguments::empty();
    }
    Arguments::from_json(trimmed)
        .unwrap_or_else(|_| Arguments::from_value(&Value::String(text.to_owned())))
}

fn usage(value: &Value) -> Usage {
    Usage {
        input_tokens: value["prompt_tokens"].as_u64().unwrap_or(0),
        output_tokens: value["completion_tokens"].as_u64().unwrap_or(0),
    }
}

fn malformed(what: &str) -> ProviderError {
    ProviderError::msg(format!("malformed response from the provider: {what}"))
}

fn parse_response(body: &Value) -> Result<ModelResponse, ProviderError> {
    let message = body["choices"]
        .get(0)
        .map(|choice| &choice["message"])
        .filter(|m| m.is_object())
        .ok_or_else(|| malformed("no choices[0].message"))?;
    let content = match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => return Err(malformed("message content is neither text nor null")),
    };
    let mut tool_calls = Vec::new();
    for (i, call) in message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = call["function"]["name"]
            .as_str()
            .ok_or_else(|| malformed("a tool call has no function name"))?;
        let arguments = match &call["function"]["arguments"] {
            Value::String(text) => arguments_from_text(text),
            Value::Null => Arguments::empty(),
            other => Arguments::from_value(other),
        };
        tool_calls.push(ToolCall {
            id: call["id"]
                .as_str()
                .map_or_else(|| format!("call_{i}"), str::to_owned),
            name: name.to_owned(),
            arguments,
        });
    }
    Ok(ModelResponse {
        content,
        tool_calls,
        usage: usage(&body["usage"]),
    })
}

impl Provider for OpenAiProvider {
    http_provider_calls!();

    fn request_headers(&self) -> Option<Headers> {
        Some(self.config.headers.clone())
    }
}

/// A chat-completions event stream: each chunk's deltas as they arrive,
/// until `[DONE]`.
async fn stream_reply(reply: Reply, on_delta: DeltaSink<'_>) -> Result<(), ProviderError> {
    reply
        .events(|event| {
            if event.data.trim() == "[DONE]" {
                return Ok(false);
            }
            let chunk = serde_json::from_str::<Value>(&event.data)
                .map_err(|error| malformed(&format!("a stream event is not JSON: {error}")))?;
            deltas(&chunk, on_delta);
            Ok(true)
        })
        .await
}

/// The deltas of one streamed chunk.
fn deltas(chunk: &Value, on_delta: &mut dyn FnMut(StreamDelta)) {
    if let Some(delta) = chunk["choices"].get(0).map(|c| &c["delta"]) {
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            on_delta(StreamDelta::Text(text.to_owned()));
        }
        for (position, call) in delta["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            on_delta(StreamDelta::ToolCall {
                index: call["index"]
                    .as_u64()
                    .map_or(position, |i| usize::try_from(i).unwrap_or(position)),
                id: call["id"].as_str().map(str::to_owned),
                name: call["function"]["name"].as_str().map(str::to_owned),
                arguments: call["function"]["arguments"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            });
        }
    }
    if chunk["usage"].is_object() {
        on_delta(StreamDelta::Usage(usage(&chunk["usage"])));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_with_tool_calls_parses_and_bad_arguments_are_kept_as_text() {
        let body = json!({"choices": [{"message": {"content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}},
            {"id": "b", "type": "function", "function": {"name": "bash", "arguments": "{not json"}}
        ]}}], "usage": {"prompt_tokens": 7, "completion_tokens": 3}});
        let response = parse_response(&body).unwrap();
        assert_eq!(
            response.tool_calls[0].arguments.parse(),
            json!({"command": "ls"})
        );
        assert_eq!(response.tool_calls[1].arguments.parse(), json!("{not json"));
        assert_eq!(
            (response.usage.input_tokens, response.usage.output_tokens),
            (7, 3)
        );
        assert!(parse_response(&json!({"nope": 1}))
            .unwrap_err()
            .to_string()
            .contains("malformed response"));
    }
}
