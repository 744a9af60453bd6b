//! Model providers: the trait the loop calls, the scripted model (the
//! embedded default), and real providers: OpenAI-compatible chat
//! completions (with streaming) and Anthropic's Messages API.
//!
//! Headers belong to the call, not to the provider. A provider with a
//! per-request header surface keeps its configured headers unchanged for its
//! whole life and reports them through [`Provider::request_headers`]; the
//! `provider_request` seam's envelope is seeded with a copy. When a seam
//! replaces them, the replacement travels in that one call's
//! [`ProviderCall::headers`] and nowhere else, so sessions on different
//! threads sharing one provider never see each other's headers, and there is
//! nothing to put back after a call, whether it succeeded, failed or
//! panicked. A provider without a surface ignores the call's headers.

/// The calls every HTTP provider writes alike, for its `impl Provider`:
/// the model is its config's, the blocking calls block on the async ones,
/// a whole reply is the module's `parse_response` of the body its `send`
/// got, and a stream is the module's `stream_reply` of the streamed one.
macro_rules! http_provider_calls {
    () => {
        fn model(&self) -> &str {
            &self.config.model
        }

        fn complete(
            &self,
            call: &$crate::providers::ProviderCall<'_>,
        ) -> Result<$crate::providers::ModelResponse, $crate::providers::ProviderError> {
            $crate::providers::block_on_complete(self, call)
        }

        fn stream(
            &self,
            call: &$crate::providers::ProviderCall<'_>,
            on_delta: &mut dyn FnMut($crate::providers::StreamDelta),
        ) -> Result<(), $crate::providers::ProviderError> {
            $crate::providers::block_on_stream(self, call, on_delta)
        }

        fn complete_async<'a>(
            &'a self,
            call: &'a $crate::providers::ProviderCall<'a>,
        ) -> $crate::providers::ProviderFuture<'a, $crate::providers::ModelResponse> {
            Box::pin(async move {
                let reply = self.send(call, false).await?;
                parse_response(&reply.json().await?)
            })
        }

        fn stream_async<'a>(
            &'a self,
            call: &'a $crate::providers::ProviderCall<'a>,
            on_delta: $crate::providers::DeltaSink<'a>,
        ) -> $crate::providers::ProviderFuture<'a, ()> {
            Box::pin(async move {
                let reply = self.send(call, true).await?;
                stream_reply(reply, on_delta).await
            })
        }
    };
}

/// An HTTP provider's constructors: `new` over its config's transport
/// settings, and `with_retry_observer`.
macro_rules! http_provider_new {
    ($provider:ident, $config:ty) => {
        impl $provider {
            /// A provider for `config`.
            #[must_use]
            pub fn new(config: $config) -> Self {
                $provider {
                    transport: Transport::new(config.http),
                    config,
                }
            }

            /// The same provider, telling `observer` of each retry wait
            /// before it begins (a 429 or 5xx answered, `Retry-After`
            /// honoured).
            #[must_use]
            pub fn with_retry_observer(mut self, observer: RetryObserver) -> Self {
                self.transport.observe_retries(observer);
                self
            }
        }
    };
}

mod anthropic;
mod assemble;
mod http;
mod openai;
mod scripted;
pub(crate) mod sse;

pub(crate) use anthropic::messages as anthropic_turns;
pub use anthropic::{AnthropicConfig, AnthropicProvider};
pub(crate) use assemble::Assembler;
pub use http::{HttpSettings, RetryObserver, RetryPolicy, RetryWait};
pub(crate) use openai::{arguments_from_text, chat_message, tool as openai_tool};
pub use openai::{OpenAiConfig, OpenAiProvider};
pub use scripted::{RecordedRequest, ScriptError, ScriptedModel};
use std::future::Future;
use std::pin::Pin;

use crate::types::{ContentBlock, Headers, Message, ToolCall, ToolSchema};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// What the loop sends: the post-seam messages, tools, extra options and
/// headers.
#[derive(Debug, Clone, Copy)]
pub struct ProviderCall<'a> {
    /// The model for this call only, when a `provider_request` interceptor
    /// chose another one (a budget gate downgrading); `None`: the
    /// provider's own.
    pub model: Option<&'a str>,
    /// The messages to send, after the `context` and `provider_request` seams.
    pub messages: &'a [Message],
    /// The tools to offer the model (empty: none).
    pub tools: &'a [ToolSchema],
    /// Extra options, passed verbatim.
    pub kwargs: &'a serde_json::Map<String, Value>,
    /// The header surface's headers for this call only; `None` means the
    /// provider's own. A provider without a header surface ignores them.
    pub headers: Option<&'a Headers>,
}

impl<'a> ProviderCall<'a> {
    /// The headers this call carries: its own when it has some, else `own`
    /// (the provider's configured surface).
    #[must_use]
    pub fn headers_or(&self, own: &'a Headers) -> &'a Headers {
        self.headers.unwrap_or(own)
    }
}

/// Token usage of one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens the provider reported for the call.
    #[serde(default)]
    pub input_tokens: u64,
    /// Completion tokens the provider reported for the call.
    #[serde(default)]
    pub output_tokens: u64,
}

/// A model's reply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelResponse {
    /// The reply's text (empty when it only calls tools).
    pub content: String,
    /// The tool calls it proposes, arguments as the model's raw JSON text.
    pub tool_calls: Vec<ToolCall>,
    /// Tokens the provider reported (zero when it reported none).
    pub usage: Usage,
}

/// One piece of a streamed reply, as the provider received it. Text and
/// tool-call arguments may be split anywhere; the loop assembles them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamDelta {
    /// More reply text.
    Text(String),
    /// A piece of the tool call at `index` (id and name arrive once, the
    /// arguments' JSON text in pieces).
    ToolCall {
        /// Position of the call in the reply.
        index: usize,
        /// The call id, when this piece carries it.
        id: Option<String>,
        /// The tool name, when this piece carries it.
        name: Option<String>,
        /// A piece of the arguments' JSON text.
        arguments: String,
    },
    /// Usage, usually last.
    Usage(Usage),
}

/// A provider failure: one line of text, plus what the transport knew about
/// it — the HTTP status when the provider answered with one, and whether the
/// failure is transient (a later attempt may succeed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderError {
    message: String,
    status: Option<u16>,
    retryable: bool,
}

impl ProviderError {
    /// An error with this text, no HTTP status, not retryable.
    pub fn msg(text: impl Into<String>) -> Self {
        ProviderError {
            message: text.into(),
            status: None,
            retryable: false,
        }
    }

    /// An error about an HTTP answer with `status`.
    pub fn http(status: u16, retryable: bool, text: impl Into<String>) -> Self {
        ProviderError {
            message: text.into(),
            status: Some(status),
            retryable,
        }
    }

    /// The same error, marked transient or not.
    #[must_use]
    pub fn with_retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// The message (what `Display` shows, line breaks aside).
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The HTTP status the provider answered with, when it answered.
    #[must_use]
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// Whether the failure is transient: 429, a 5xx, a timeout, a dropped or
    /// refused connection. The transport has already spent its own retries
    /// on the statuses it retries; this says whether trying again later
    /// could help.
    #[must_use]
    pub fn retryable(&self) -> bool {
        self.retryable
    }
}

impl std::fmt::Display for ProviderError {
    /// The message on one line: each run of line breaks shows as a space.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut rest = self.message.as_str();
        while let Some(at) = rest.find(['\r', '\n']) {
            f.write_str(&rest[..at])?;
            f.write_str(" ")?;
            rest = rest[at..].trim_start_matches(['\r', '\n']);
        }
        f.write_str(rest)
    }
}

impl std::error::Error for ProviderError {}

/// What a provider's `async` methods return: a boxed future (the trait
/// stays usable as `dyn Provider`).
pub type ProviderFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, ProviderError>> + Send + 'a>>;

/// Where a streamed reply's pieces go: the loop's delta handler.
pub type DeltaSink<'a> = &'a mut (dyn FnMut(StreamDelta) + Send);

/// A model provider. Shared (`Arc<dyn Provider>`) so a sub-agent can use the
/// same provider as its parent.
///
/// The loop calls the `async` methods ([`complete_async`](Self::complete_async),
/// [`stream_async`](Self::stream_async)); by default they answer with the
/// blocking ones, inline, which suits a provider that answers at once (the
/// scripted model). A provider that waits on the network implements them
/// itself (the real providers do, over an async HTTP client), so an async
/// caller's executor is never blocked for the length of a model call.
pub trait Provider: Send + Sync {
    /// The model name, informational (shown in the request envelope).
    fn model(&self) -> &str;

    /// One completion.
    ///
    /// # Errors
    ///
    /// A [`ProviderError`] when no reply comes: the request fails or times out,
    /// the provider answers with an error status, or its reply cannot be read.
    /// [`ProviderError::retryable`] says whether a later attempt may succeed.
    fn complete(&self, call: &ProviderCall<'_>) -> Result<ModelResponse, ProviderError>;

    /// One completion, streamed: `on_delta` receives the pieces as they
    /// arrive. Providers that cannot stream answer with the whole reply as a
    /// few pieces (the default).
    ///
    /// # Errors
    ///
    /// As [`Provider::complete`], also when the stream breaks off after some
    /// pieces have reached `on_delta`.
    fn stream(
        &self,
        call: &ProviderCall<'_>,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), ProviderError> {
        replay_whole(self.complete(call)?, on_delta);
        Ok(())
    }

    /// One completion, without blocking the executor. The default runs
    /// [`complete`](Self::complete) inline.
    fn complete_async<'a>(
        &'a self,
        call: &'a ProviderCall<'a>,
    ) -> ProviderFuture<'a, ModelResponse> {
        Box::pin(std::future::ready(self.complete(call)))
    }

    /// One completion, streamed, without blocking the executor: `on_delta`
    /// receives the pieces as they arrive. The default runs
    /// [`stream`](Self::stream) inline.
    fn stream_async<'a>(
        &'a self,
        call: &'a ProviderCall<'a>,
        on_delta: DeltaSink<'a>,
    ) -> ProviderFuture<'a, ()> {
        Box::pin(std::future::ready(self.stream(call, on_delta)))
    }

    /// A copy of the configured per-request headers, when the provider has
    /// a header surface; `None` otherwise (the default). They never change:
    /// a call that carries headers of its own ([`ProviderCall::headers`])
    /// sends those instead, for that call only.
    fn request_headers(&self) -> Option<Headers> {
        None
    }
}

/// A content block as a chat-API content part: `{"type": "text", "text": …}`
/// for text, else the block's other fields with its `type`.
fn content_part(block: &ContentBlock) -> Value {
    if block.kind == "text" {
        return json!({"type": "text", "text": block.text});
    }
    let mut part: Value = serde_json::from_str(block.data_json()).unwrap_or_else(|_| json!({}));
    if let Some(map) = part.as_object_mut() {
        map.insert("type".into(), json!(block.kind));
    }
    part
}

/// A network provider's blocking [`Provider::complete`]: blocks on its
/// [`complete_async`](Provider::complete_async) (see
/// [`AgentSession::run_turn`](crate::agent::AgentSession::run_turn) for how
/// the blocking API is driven).
pub(crate) fn block_on_complete(
    provider: &dyn Provider,
    call: &ProviderCall<'_>,
) -> Result<ModelResponse, ProviderError> {
    crate::runtime::block_on(provider.complete_async(call))
}

/// A network provider's blocking [`Provider::stream`]: blocks on its
/// [`stream_async`](Provider::stream_async); the pieces reach `on_delta` on
/// the calling thread as they arrive.
pub(crate) fn block_on_stream(
    provider: &dyn Provider,
    call: &ProviderCall<'_>,
    on_delta: &mut dyn FnMut(StreamDelta),
) -> Result<(), ProviderError> {
    crate::runtime::block_on_streaming(
        |sink| crate::runtime::block_on(provider.stream_async(call, sink)),
        on_delta,
    )
}

/// Streams a whole `response` as deltas: its text in one piece, then each
/// tool call whole, then the usage.
pub(crate) fn replay_whole(mut response: ModelResponse, on_delta: &mut dyn FnMut(StreamDelta)) {
    let text = if response.content.is_empty() {
        Vec::new()
    } else {
        vec![std::mem::take(&mut response.content)]
    };
    replay(response, text, on_delta);
}

/// Streams a whole `response` as deltas: `text` (its content, taken out of
/// it, in these pieces), then each tool call whole, then the usage. For
/// providers that cannot stream.
pub(crate) fn replay(
    response: ModelResponse,
    text: Vec<String>,
    on_delta: &mut dyn FnMut(StreamDelta),
) {
    for piece in text {
        on_delta(StreamDelta::Text(piece));
    }
    for (index, tool_call) in response.tool_calls.into_iter().enumerate() {
        on_delta(StreamDelta::ToolCall {
            index,
            id: Some(tool_call.id),
            name: Some(tool_call.name),
            arguments: tool_call.arguments.as_str().to_owned(),
        });
    }
    on_delta(StreamDelta::Usage(response.usage));
}

#[cfg(test)]
mod tests {
    use super::ProviderError;

    #[test]
    fn a_provider_error_displays_on_one_line_and_keeps_its_status() {
        let plain = ProviderError::msg("no\nheader\r\nsurface");
        assert_eq!(plain.to_string(), "no header surface");
        assert_eq!((plain.status(), plain.retryable()), (None, false));
        let http = ProviderError::http(503, true, "busy");
        assert_eq!((http.status(), http.retryable()), (Some(503), true));
        assert_eq!(http.to_string(), "busy");
        assert!(ProviderError::msg("x").with_retryable(true).retryable());
    }
}
