//! PLACEHOLDER until the tools land: `write_file`.

use super::{Tool, ToolContext};
use crate::types::ToolResult;

/// `write_file`.
pub struct WriteFileTool;

impl Tool for WriteFileTool {
    fn name(&self) -> &str {
        "write_file"
    }
    fn description(&self) -> &str {
        "write_file"
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn execute(&self, _arguments: &serde_json::Value, _cx: &ToolContext<'_>) -> ToolResult {
        ToolResult::err("write_file is not available yet")
    }
}
