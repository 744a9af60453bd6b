//! Owned values a pack hands back in [`Decision::Replace`](super::Decision::Replace).

use crate::abi::{
    BlockValue, HeaderValue, MessageValue, RequestValue, SeamValue, ToolCallValue, ToolResultValue,
};
use abi_stable::std_types::{ROption, RString, RVec};

/// An owned tool call. On the `tool_call` seam the host keeps the original
/// call id whatever `id` says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolCall {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments as JSON text (an object).
    pub arguments_json: String,
}

impl ToolCall {
    /// A call to `name` with `arguments` (serialised once, here).
    pub fn new(name: impl Into<String>, arguments: &serde_json::Value) -> Self {
        ToolCall {
            id: String::new(),
            name: name.into(),
            arguments_json: arguments.to_string(),
        }
    }

    pub(crate) fn into_abi(self) -> ToolCallValue {
        ToolCallValue {
            id: self.id.into(),
            name: self.name.into(),
            arguments_json: self.arguments_json.into(),
        }
    }
}

/// An owned content block.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Block {
    /// `text`, `image`, ...
    pub kind: String,
    /// Text of a text block.
    pub text: String,
    /// Other fields as JSON text.
    pub data_json: String,
}

/// An owned message.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Text content.
    pub content: String,
    /// Content blocks of a multimodal message.
    pub blocks: Vec<Block>,
    /// Tool calls of an assistant message.
    pub tool_calls: Vec<ToolCall>,
    /// For a tool message, the call it answers.
    pub tool_call_id: Option<String>,
    /// Author name.
    pub name: Option<String>,
}

impl Message {
    pub(crate) fn into_abi(self) -> MessageValue {
        MessageValue {
            role: self.role.into(),
            content: self.content.into(),
            blocks: self
                .blocks
                .into_iter()
                .map(|b| BlockValue {
                    kind: b.kind.into(),
                    text: b.text.into(),
                    data_json: b.data_json.into(),
                })
                .collect(),
            tool_calls: self
                .tool_calls
                .into_iter()
                .map(ToolCall::into_abi)
                .collect(),
            tool_call_id: self.tool_call_id.unwrap_or_default().into(),
            name: self.name.unwrap_or_default().into(),
        }
    }
}

pub(crate) fn messages_into_abi(messages: Vec<Message>) -> RVec<MessageValue> {
    messages.into_iter().map(Message::into_abi).collect()
}

/// An owned provider request envelope.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    /// The model the call goes to: a replacement that changes it sends this
    /// call to another model (a budget gate downgrading).
    pub model: String,
    /// Messages to send.
    pub messages: Vec<Message>,
    /// Tool schemas as JSON text (an array).
    pub tools_json: String,
    /// Extra call options as JSON text (an object), passed verbatim.
    pub kwargs_json: String,
    /// Headers for this call only; `None` leaves the provider's headers alone.
    pub headers: Option<Vec<(String, String)>>,
}

/// Headers as `(name, value)` pairs, in order.
pub(crate) type HeaderList = Vec<(String, String)>;

pub(crate) fn headers_into_abi(headers: HeaderList) -> RVec<HeaderValue> {
    headers
        .into_iter()
        .map(|(name, value)| HeaderValue {
            name: name.into(),
            value: value.into(),
        })
        .collect()
}

impl Request {
    pub(crate) fn into_abi(self) -> SeamValue {
        let headers = self.headers.map(headers_into_abi);
        SeamValue {
            messages: ROption::RSome(messages_into_abi(self.messages)),
            request: ROption::RSome(RequestValue {
                model: self.model.into(),
                tools_json: self.tools_json.into(),
                kwargs_json: self.kwargs_json.into(),
                headers: headers.into(),
            }),
            ..SeamValue::default()
        }
    }
}

/// An owned tool result.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolResult {
    /// Output text.
    pub output: String,
    /// Error text, when failed.
    pub error: Option<String>,
    /// Metadata as JSON text.
    pub metadata_json: String,
}

impl ToolResult {
    pub(crate) fn into_abi(self) -> ToolResultValue {
        ToolResultValue {
            output: self.output.into(),
            error: self.error.map(RString::from).into(),
            metadata_json: self.metadata_json.into(),
        }
    }
}
