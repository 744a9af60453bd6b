//! Model providers: the trait the loop calls, and the scripted model that is
//! the embedded default.

mod scripted;

pub use scripted::{RecordedRequest, ScriptError, ScriptedModel};

use crate::types::{Headers, Message, ToolCall, ToolSchema};
use serde::{Deserialize, Serialize};

/// What the loop sends: the post-seam messages, tools and extra options.
#[derive(Debug, Clone, Copy)]
pub struct ProviderCall<'a> {
    /// Messages to send.
    pub messages: &'a [Message],
    /// Tools offered.
    pub tools: &'a [ToolSchema],
    /// Extra options, passed verbatim.
    pub kwargs: &'a serde_json::Map<String, serde_json::Value>,
}

/// Token usage of one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens read.
    #[serde(default)]
    pub input_tokens: u64,
    /// Tokens written.
    #[serde(default)]
    pub output_tokens: u64,
}

/// A model's reply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelResponse {
    /// Text content.
    pub content: String,
    /// Tool calls proposed.
    pub tool_calls: Vec<ToolCall>,
    /// Usage reported.
    pub usage: Usage,
}

/// A provider failure, one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ProviderError(pub String);

impl ProviderError {
    /// An error with this text.
    pub fn msg(text: impl Into<String>) -> Self {
        ProviderError(text.into())
    }
}

/// A model provider. Shared (`Arc<dyn Provider>`) so a sub-agent can use the
/// same provider as its parent.
pub trait Provider: Send + Sync {
    /// The model name, informational (shown in the request envelope).
    fn model(&self) -> &str;

    /// One completion.
    fn complete(&self, call: &ProviderCall<'_>) -> Result<ModelResponse, ProviderError>;

    /// A copy of the per-request headers, when the provider has a header
    /// surface; `None` otherwise (the default).
    fn request_headers(&self) -> Option<Headers> {
        None
    }

    /// Replaces the per-request headers. Providers without a header surface
    /// refuse (the default); the loop then leaves them alone.
    fn set_request_headers(&self, headers: Headers) -> Result<(), ProviderError> {
        let _ = headers;
        Err(ProviderError::msg("this provider has no header surface"))
    }
}
