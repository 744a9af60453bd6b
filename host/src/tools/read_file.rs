//! PLACEHOLDER until the tools land: `read_file`.

use super::{Tool, ToolContext};
use crate::types::ToolResult;

/// `read_file`.
pub struct ReadFileTool;

impl Tool for ReadFileTool {
    fn name(&self) -> &str {
        "read_file"
    }
    fn description(&self) -> &str {
        "read_file"
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn execute(&self, _arguments: &serde_json::Value, _cx: &ToolContext<'_>) -> ToolResult {
        ToolResult::err("read_file is not available yet")
    }
}
