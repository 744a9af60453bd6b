//! PLACEHOLDER until the tools land: `todo`.

use super::{Tool, ToolContext};
use crate::types::ToolResult;

/// `todo`.
#[derive(Default)]
pub struct TodoTool;

impl Tool for TodoTool {
    fn name(&self) -> &str {
        "todo"
    }
    fn description(&self) -> &str {
        "todo"
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn execute(&self, _arguments: &serde_json::Value, _cx: &ToolContext<'_>) -> ToolResult {
        ToolResult::err("todo is not available yet")
    }
}
