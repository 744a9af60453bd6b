//! PLACEHOLDER until the tools land: `bash`.

use super::{Tool, ToolContext};
use crate::types::ToolResult;

/// `bash`.
#[derive(Default)]
pub struct BashTool;

impl Tool for BashTool {
    fn name(&self) -> &str {
        "bash"
    }
    fn description(&self) -> &str {
        "bash"
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn execute(&self, _arguments: &serde_json::Value, _cx: &ToolContext<'_>) -> ToolResult {
        ToolResult::err("bash is not available yet")
    }
}
