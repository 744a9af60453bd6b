//! Anthropic's Messages API: tools, system prompt, usage, streaming. It exposes no
//! per-request header surface (its headers belong to the client), so the
//! `provider_request` seam sees none, and headers a call carries are
//! ignored.
//!
//! A turn whose content is one plain text block is sent as a string (the API
//! takes both forms; some gateways only the string); a turn of several
//! blocks, or of one that is not plain text, is sent as blocks.

use super::http::{HttpSettings, Reply, RetryObserver, Transport};
use super::{
    content_part, DeltaSink, ModelResponse, Provider, ProviderCall, ProviderError, StreamDelta,
    Usage,
};
use crate::types::{Arguments, Message, Role, ToolCall};
use serde_json::{json, Map, Value};

/// The API version sent in `anthropic-version`.
const API_VERSION: &str = "2023-06-01";

/// How to reach the Messages API.
#[derive(Debug, Clone)]
pub struct AnthropicConfig {
    /// Base URL (`https://api.anthropic.com`); `/v1/messages` is appended.
    pub base_url: String,
    /// The model to ask for (`gpt-4o-mini`); also what the envelope's
    /// `model` shows.
    pub model: String,
    /// The API key (`x-api-key`).
    pub api_key: Option<String>,
    /// `max_tokens` when the request's kwargs do not set it.
    pub max_tokens: u64,
    /// Timeouts, retries and size limits of its HTTP client.
    pub http: HttpSettings,
}

/// A provider for the Anthropic Messages API (no header surface: its key
/// travels outside anything a seam sees).
pub struct AnthropicProvider {
    config: AnthropicConfig,
    transport: Transport,
}

http_provider_new!(AnthropicProvider, AnthropicConfig);

impl AnthropicProvider {
    /// POSTs `call` to the Messages endpoint, streamed or whole.
    async fn send(&self, call: &ProviderCall<'_>, stream: bool) -> Result<Reply, ProviderError> {
        let url = format!("{}/v1/messages", self.config.base_url.trim_end_matches('/'));
        let mut headers = vec![("anthropic-version".to_owned(), API_VERSION.to_owned())];
        if let Some(key) = &self.config.api_key {
            headers.push(("x-api-key".to_owned(), key.clone()));
        }
        let mut body = self.body(call);
        if stream {
            body["stream"] = json!(true);
        }
        self.transport.post(&url, &headers, &body).await
    }

    fn body(&self, call: &ProviderCall<'_>) -> Value {
        let mut body = Map::new();
        body.insert(
            "model".into(),
            json!(call.model.unwrap_or(&self.config.model)),
        );
        body.insert("max_tokens".into(), json!(self.config.max_tokens));
        let system: Vec<&str> = call
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(|m| m.content.as_str())
            .collect();
        if !system.is_empty() {
            body.insert("system".into(), json!(system.join("\n\n")));
        }
        body.insert("messages".into(), Value::Array(messages(call.messages)));
        if !call.tools.is_empty() {
            let tools: Vec<Value> = call
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        for (key, value) in call.kwargs {
            body.insert(key.clone(), value.clone());
        }
        Value::Object(body)
    }
}

/// Conversation messages as Messages-API turns: a user message's content
/// blocks (or its text) become blocks, tool results become `tool_result`
/// blocks of a user turn, and consecutive turns of the same role are merged
/// (the API wants them alternating). A turn left with one plain text block
/// is sent as a string.
pub(crate) fn messages(conversation: &[Message]) -> Vec<Value> {
    let mut turns: Vec<(String, Vec<Value>)> = Vec::new();
    for message in conversation {
        let (role, blocks) = match message.role {
            Role::System => continue,
            Role::User if message.blocks.is_empty() => (
                "user",
                vec![json!({"type": "text", "text": message.content})],
            ),
            Role::User => ("user", message.blocks.iter().map(content_part).collect()),
            Role::Tool => (
                "user",
                vec![
                    json!({"type": "tool_result", "tool_use_id": message.tool_call_id.clone().unwrap_or_default(), "content": message.content}),
                ],
            ),
            Role::Assistant => {
                let mut blocks = Vec::new();
                if !message.content.is_empty() {
                    blocks.push(json!({"type": "text", "text": message.content}));
                }
                for call in &message.tool_calls {
                    let input = match call.arguments.parse() {
                        Value::Object(map) => Value::Object(map),
                        other => json!({ "value": other }),
                    };
                    blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
                }
                ("assistant", blocks)
            }
        };
        match turns.last_mut() {
            Some((last, existing)) if last == role => existing.extend(blocks),
            _ => turns.push((role.to_owned(), blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, blocks)| json!({"role": role, "content": content(blocks)}))
        .collect()
}

/// A turn's content: the text alone when it is one block holding nothing but
/// text, else the blocks.
fn content(blocks: Vec<Value>) -> Value {
    let plain_text = |block: &Map<String, Value>| {
        block.len() == 2
            && block.get("type").is_some_and(|kind| kind == "text")
            && block.get("text").is_some_and(Value::is_string)
    };
    match <[Value; 1]>::try_from(blocks) {
        Ok([Value::Object(mut block)]) if plain_text(&block) => {
            block.remove("text").unwrap_or_default()
        }
        Ok([other]) => Value::Array(vec![other]),
        Err(blocks) => Value::Array(blocks),
    }
}

fn parse_response(body: &Value) -> Result<ModelResponse, ProviderError> {
    let blocks = body["content"].as_array().ok_or_else(|| {
        ProviderError::msg("malformed response from the provider: no content blocks")
    })?;
    let mut response = ModelResponse::default();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => response
                .content
                .push_str(block["text"].as_str().unwrap_or_default()),
            Some("tool_use") => response.tool_calls.push(ToolCall {
                id: block["id"].as_str().unwrap_or_default().to_owned(),
                name: block["name"].as_str().unwrap_or_default().to_owned(),
                arguments: Arguments::from_value(&block["input"]),
            }),
            _ => {}
        }
    }
    response.usage = Usage {
        input_tokens: body["usage"]["input_tokens"].as_u64().unwrap_or(0),
        output_tokens: body["usage"]["output_tokens"].as_u64().unwrap_or(0),
    };
    Ok(response)
}

impl Provider for AnthropicProvider {
    http_provider_calls!();
}

/// The Messages API's event stream: text and tool-use blocks as they
/// arrive, usage from `message_start` and `message_delta`, until
/// `message_stop` or `[DONE]`; an `error` event fails the call with its
/// message.
async fn stream_reply(reply: Reply, on_delta: DeltaSink<'_>) -> Result<(), ProviderError> {
    let mut blocks = Blocks::default();
    reply
        .events(|event| blocks.data(&event.data, on_delta))
        .await
}

/// What a Messages stream has said so far: which content block indexes are
/// tool calls (and which call each is), and the usage.
#[derive(Default)]
struct Blocks {
    /// Content block index → tool call index, for `tool_use` blocks.
    calls: Vec<(u64, usize)>,
    usage: Usage,
}

impl Blocks {
    /// One event's data: `Ok(false)` at the end of the stream. Anthropic
    /// ends it with `message_stop`; servers that copy the chat-completions
    /// stream (mock servers, some proxies) end it with `data: [DONE]`, which
    /// ends it here too (the official SDK passes over it: it reads only
    /// named events). Any other data that is not JSON fails the call in
    /// one line.
    fn data(
        &mut self,
        data: &str,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<bool, ProviderError> {
        if data.trim() == "[DONE]" {
            on_delta(StreamDelta::Usage(self.usage));
            return Ok(false);
        }
        let data: Value = serde_json::from_str(data).map_err(|error| {
            ProviderError::msg(format!(
                "malformed response from the provider: a stream event is not JSON: {error}"
            ))
        })?;
        self.event(&data, on_delta)
    }

    /// One event: `Ok(false)` at `message_stop`.
    fn event(
        &mut self,
        data: &Value,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<bool, ProviderError> {
        let index = data["index"].as_u64().unwrap_or(0);
        match data["type"].as_str() {
            Some("message_start") => {
                let usage = &data["message"]["usage"];
                self.usage.input_tokens = usage["input_tokens"].as_u64().unwrap_or(0);
                self.usage.output_tokens = usage["output_tokens"].as_u64().unwrap_or(0);
            }
            Some("content_block_start") => {
                let block = &data["content_block"];
                match block["type"].as_str() {
                    Some("tool_use") => {
                        let call = self.calls.len();
                        self.calls.push((index, call));
                        on_delta(StreamDelta::ToolCall {
                            index: call,
                            id: block["id"].as_str().map(str::to_owned),
                            name: block["name"].as_str().map(str::to_owned),
                            arguments: String::new(),
                        });
                    }
                    Some("text") => {
                        if let Some(text) = block["text"].as_str().filter(|t| !t.is_empty()) {
                            on_delta(StreamDelta::Text(text.to_owned()));
                        }
                    }
                    _ => {}
                }
            }
            Some("content_block_delta") => {
                let delta = &data["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => {
                        if let Some(text) = delta["text"].as_str().filter(|t| !t.is_empty()) {
                            on_delta(StreamDelta::Text(text.to_owned()));
                        }
                    }
                    Some("input_json_delta") => {
                        if let Some(&(_, call)) = self.calls.iter().find(|(i, _)| *i == index) {
                            on_delta(StreamDelta::ToolCall {
                                index: call,
                                id: None,
                                name: None,
                                arguments: delta["partial_json"]
                                    .as_str()
                                    .unwrap_or_default()
                                    .to_owned(),
                            });
                        }
                    }
                    _ => {}
                }
            }
            Some("message_delta") => {
                if let Some(output) = data["usage"]["output_tokens"].as_u64() {
                    self.usage.output_tokens = output;
                }
            }
            Some("message_stop") => {
                on_delta(StreamDelta::Usage(self.usage));
                return Ok(false);
            }
            Some("error") => {
                let message = data["error"]["message"]
                    .as_str()
                    .unwrap_or("an error event");
                return Err(ProviderError::msg(format!(
                    "the provider's stream reported an error: {message}"
                )));
            }
            _ => {}
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ContentBlock;

    #[test]
    fn tool_results_join_one_user_turn_and_roles_alternate() {
        let conversation = vec![
            Message::system("be brief"),
            Message::user("list files"),
            Message::assistant(
                "",
                vec![
                    ToolCall::new("t1", "bash", json!({"command": "ls"})),
                    ToolCall::new("t2", "bash", json!({"command": "pwd"})),
                ],
            ),
            Message::tool("t1", "a.txt"),
            Message::tool("t2", "/work"),
        ];
        let turns = messages(&conversation);
        assert_eq!(turns.len(), 3);
        assert_eq!(
            turns[1]["content"][1],
            json!({"type": "tool_use", "id": "t2", "name": "bash", "input": {"command": "pwd"}})
        );
        assert_eq!(turns[2]["role"], "user");
        assert_eq!(turns[2]["content"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn a_turn_of_one_plain_text_block_is_a_string_and_any_other_turn_is_blocks() {
        let image: ContentBlock = serde_json::from_value(
            json!({"type": "image", "data": {"source": {"type": "url", "url": "https://x/y.png"}}}),
        )
        .unwrap();
        let with_blocks = |blocks: Vec<ContentBlock>| Message {
            blocks,
            ..Message::user("")
        };
        let cases = [
            (vec![Message::user("hello")], json!("hello")),
            (
                vec![with_blocks(vec![ContentBlock::text("one block")])],
                json!("one block"),
            ),
            (
                vec![Message::user("first"), Message::user("second")],
                json!([{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]),
            ),
            (
                vec![with_blocks(vec![image.clone()])],
                json!([{"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}]),
            ),
            (
                vec![with_blocks(vec![ContentBlock::text("look"), image])],
                json!([
                    {"type": "text", "text": "look"},
                    {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}
                ]),
            ),
            (
                vec![Message::tool("t1", "a.txt")],
                json!([{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}]),
            ),
        ];
        for (conversation, expected) in cases {
            assert_eq!(
                messages(&conversation)[0]["content"],
                expected,
                "{conversation:?}"
            );
        }
        let assistant = messages(&[Message::assistant("sure", Vec::new())]);
        assert_eq!(
            assistant[0],
            json!({"role": "assistant", "content": "sure"})
        );
    }

    #[test]
    fn a_messages_stream_yields_text_tool_calls_and_usage_in_order() {
        let events = [
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 25, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me "}}),
            json!({"type": "ping"}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "look."}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"command\":"}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": " \"ls\"}"}}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 15}}),
            json!({"type": "message_stop"}),
        ];
        let mut blocks = Blocks::default();
        let mut deltas = Vec::new();
        let mut go_on = Vec::new();
        for event in &events {
            go_on.push(blocks.event(event, &mut |d| deltas.push(d)).unwrap());
        }
        assert_eq!(go_on.last(), Some(&false), "message_stop ends the stream");
        assert_eq!(
            deltas,
            [
                StreamDelta::Text("Let me ".into()),
                StreamDelta::Text("look.".into()),
                StreamDelta::ToolCall {
                    index: 0,
                    id: Some("toolu_1".into()),
                    name: Some("bash".into()),
                    arguments: String::new()
                },
                StreamDelta::ToolCall {
                    index: 0,
                    id: None,
                    name: None,
                    arguments: "{\"command\":".into()
                },
                StreamDelta::ToolCall {
                    index: 0,
                    id: None,
                    name: None,
                    arguments: " \"ls\"}".into()
                },
                StreamDelta::Usage(Usage {
                    input_tokens: 25,
                    output_tokens: 15
                }),
            ]
        );
        let error = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        assert_eq!(
            Blocks::default()
                .event(&error, &mut |_| {})
                .unwrap_err()
                .to_string(),
            "the provider's stream reported an error: Overloaded"
        );
    }

    #[test]
    fn done_ends_a_messages_stream_and_any_other_data_that_is_not_json_fails_in_one_line() {
        let mut blocks = Blocks::default();
        let mut deltas = Vec::new();
        let start = json!({"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}})
            .to_string();
        let text = json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}})
            .to_string();
        for data in [start.as_str(), text.as_str()] {
            assert!(blocks.data(data, &mut |d| deltas.push(d)).unwrap());
        }
        assert!(
            !blocks.data("[DONE]", &mut |d| deltas.push(d)).unwrap(),
            "[DONE] ends the stream"
        );
        assert_eq!(
            deltas,
            [
                StreamDelta::Text("hi".into()),
                StreamDelta::Usage(Usage {
                    input_tokens: 3,
                    output_tokens: 1
                }),
            ]
        );
        for not_json in ["[DONE", "[done]", "data: {}", "{\"type\": \"message_stop\""] {
            let error = Blocks::default()
                .data(not_json, &mut |_| {})
                .unwrap_err()
                .to_string();
            assert!(
                error.starts_with(
                    "malformed response from the provider: a stream event is not JSON: "
                ),
                "{not_json}: {error}"
            );
            assert_eq!(error.lines().count(), 1, "{not_json}: {error}");
        }
    }
}
