//! PLACEHOLDER until the tools land: `replace_in_file`.

use super::{Tool, ToolContext};
use crate::types::ToolResult;

/// `replace_in_file`.
pub struct ReplaceInFileTool;

impl Tool for ReplaceInFileTool {
    fn name(&self) -> &str {
        "replace_in_file"
    }
    fn description(&self) -> &str {
        "replace_in_file"
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn execute(&self, _arguments: &serde_json::Value, _cx: &ToolContext<'_>) -> ToolResult {
        ToolResult::err("replace_in_file is not available yet")
    }
}
