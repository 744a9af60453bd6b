//! Conversation messages.

use super::ToolCall;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::fmt;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool's result.
    Tool,
}

impl Role {
    /// The role's wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// Parses a wire name.
    #[must_use]
    pub fn parse(name: &str) -> Option<Role> {
        [Role::System, Role::User, Role::Assistant, Role::Tool]
            .into_iter()
            .find(|role| role.as_str() == name)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One block of a multimodal message. A multimodal message also carries its
/// text in [`Message::content`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContentBlock {
    /// `text`, `image`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// Text of a `text` block.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// Any other fields (an image's source, ...), as a JSON object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Box<RawValue>>,
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock {
            kind: "text".to_owned(),
            text: text.into(),
            data: None,
        }
    }

    /// The other fields as JSON text (`{}` when none).
    pub fn data_json(&self) -> &str {
        self.data.as_deref().map_or("{}", RawValue::get)
    }
}

impl PartialEq for ContentBlock {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.text == other.text && self.data_json() == other.data_json()
    }
}

/// A conversation message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Author.
    pub role: Role,
    /// Text content.
    #[serde(default)]
    pub content: String,
    /// Content blocks of a multimodal message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<ContentBlock>,
    /// Tool calls of an assistant message, as the model proposed them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a tool message: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Optional author name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Message {
    fn new(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
            blocks: Vec::new(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message::new(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message::new(Role::User, content)
    }

    /// An assistant message, with the tool calls it proposes.
    pub fn assistant(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Message {
            tool_calls,
            ..Message::new(Role::Assistant, content)
        }
    }

    /// A tool message answering `call_id`.
    pub fn tool(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            tool_call_id: Some(call_id.into()),
            ..Message::new(Role::Tool, content)
        }
    }
}
