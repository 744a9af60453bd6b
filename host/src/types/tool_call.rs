//! A tool call proposed by the model.

use super::Arguments;
use serde::{Deserialize, Serialize};

/// A tool call as proposed by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Call id, unique within a response; tool messages are keyed by it.
    pub id: String,
    /// Tool name as dispatched.
    pub name: String,
    /// Arguments, as the model's raw JSON text.
    #[serde(default)]
    pub arguments: Arguments,
}

impl ToolCall {
    /// A call with arguments serialised from `arguments`.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: serde_json::Value,
    ) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: Arguments::from_value(&arguments),
        }
    }
}
