//! Anthropic's Messages API: tools, system prompt, usage. It exposes no
//! per-request header surface (its headers belong to the client), so the
//! `provider_request` seam sees none, and headers a call carries are
//! ignored.
//!
//! A turn whose content is one plain text block is sent as a string (the API
//! takes both forms; some gateways only the string); a turn of several
//! blocks, or of one that is not plain text, is sent as blocks.

use super::http::{HttpSettings, RetryObserver, Transport};
use super::{
    content_part, replay_whole, DeltaSink, ModelResponse, Provider, ProviderCall, ProviderError,
    ProviderFuture, Usage,
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

impl AnthropicProvider {
    /// A provider for `config`.
    #[must_use]
    pub fn new(config: AnthropicConfig) -> Self {
        AnthropicProvider {
            transport: Transport::new(config.http),
            config,
        }
    }

    /// The same provider, telling `observer` of each retry wait before it
    /// begins (a 429 or 5xx answered, `Retry-After` honoured).
    #[must_use]
    pub fn with_retry_observer(mut self, observer: RetryObserver) -> Self {
        self.transport.observe_retries(observer);
        self
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
fn messages(conversation: &[Message]) -> Vec<Value> {
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
    fn model(&self) -> &str {
        &self.config.model
    }

    /// Blocks on [`complete_async`](Provider::complete_async) (see
    /// [`AgentSession::run_turn`](crate::agent::AgentSession::run_turn) for
    /// how the blocking API is driven).
    fn complete(&self, call: &ProviderCall<'_>) -> Result<ModelResponse, ProviderError> {
        crate::runtime::block_on(self.complete_async(call))
    }

    fn complete_async<'a>(
        &'a self,
        call: &'a ProviderCall<'a>,
    ) -> ProviderFuture<'a, ModelResponse> {
        Box::pin(async move {
            let url = format!("{}/v1/messages", self.config.base_url.trim_end_matches('/'));
            let mut headers = vec![("anthropic-version".to_owned(), API_VERSION.to_owned())];
            if let Some(key) = &self.config.api_key {
                headers.push(("x-api-key".to_owned(), key.clone()));
            }
            let reply = self
                .transport
                .post(&url, &headers, &self.body(call))
                .await?;
            parse_response(&reply.json().await?)
        })
    }

    /// The whole reply, as a few pieces (this provider does not stream),
    /// without blocking the executor.
    fn stream_async<'a>(
        &'a self,
        call: &'a ProviderCall<'a>,
        on_delta: DeltaSink<'a>,
    ) -> ProviderFuture<'a, ()> {
        Box::pin(async move {
            replay_whole(self.complete_async(call).await?, on_delta);
            Ok(())
        })
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
}
