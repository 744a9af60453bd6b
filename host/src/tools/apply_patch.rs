//! PLACEHOLDER until the tools land: `apply_patch`.

use super::{Tool, ToolContext};
use crate::types::ToolResult;

/// `apply_patch`.
pub struct ApplyPatchTool;

impl Tool for ApplyPatchTool {
    fn name(&self) -> &str {
        "apply_patch"
    }
    fn description(&self) -> &str {
        "apply_patch"
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn execute(&self, _arguments: &serde_json::Value, _cx: &ToolContext<'_>) -> ToolResult {
        ToolResult::err("apply_patch is not available yet")
    }
}
