//! PLACEHOLDER until the tools land: `edit_file`.

use super::{Tool, ToolContext};
use crate::types::ToolResult;

/// `edit_file`.
pub struct EditFileTool;

impl Tool for EditFileTool {
    fn name(&self) -> &str {
        "edit_file"
    }
    fn description(&self) -> &str {
        "edit_file"
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn execute(&self, _arguments: &serde_json::Value, _cx: &ToolContext<'_>) -> ToolResult {
        ToolResult::err("edit_file is not available yet")
    }
}
