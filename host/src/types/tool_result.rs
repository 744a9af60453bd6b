//! What a tool returns.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// A tool's result: output text, and an error when it failed.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct ToolResult {
    /// Output text.
    pub output: String,
    /// Error text; `Some` means the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Free-form metadata (a JSON object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Box<RawValue>>,
}

impl ToolResult {
    /// A successful result.
    pub fn ok(output: impl Into<String>) -> Self {
        ToolResult {
            output: output.into(),
            ..ToolResult::default()
        }
    }

    /// A failed result with empty output.
    pub fn err(error: impl Into<String>) -> Self {
        ToolResult {
            error: Some(error.into()),
            ..ToolResult::default()
        }
    }

    /// A failed result that keeps the output produced before the failure
    /// (a command's output beside its exit status); the transcript shows
    /// the error line, then the output.
    pub fn failed(error: impl Into<String>, output: impl Into<String>) -> Self {
        ToolResult {
            output: output.into(),
            error: Some(error.into()),
            metadata: None,
        }
    }

    /// True when the call failed.
    #[must_use]
    pub fn is_error(&self) -> bool {
        self.error.is_some()
    }

    /// The metadata as JSON text (`{}` when none).
    pub fn metadata_json(&self) -> &str {
        self.metadata.as_deref().map_or("{}", RawValue::get)
    }

    /// The text the conversation records: the output on success; the error
    /// (then the output, if any, on the next line) on failure.
    #[must_use]
    pub fn transcript_text(&self) -> String {
        match &self.error {
            None => self.output.clone(),
            Some(error) if self.output.is_empty() => error.clone(),
            Some(error) => format!("{error}\n{}", self.output),
        }
    }
}

impl PartialEq for ToolResult {
    fn eq(&self, other: &Self) -> bool {
        self.output == other.output
            && self.error == other.error
            && self.metadata_json() == other.metadata_json()
    }
}
