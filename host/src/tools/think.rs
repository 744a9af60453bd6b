//! `think`: a scratchpad for planning; records nothing durable.

use super::args::required_str;
use super::{Tool, ToolContext};
use crate::types::ToolResult;

/// `think`: lets the model write down its reasoning or plan. Nothing is
/// stored or executed; the thought stays in the conversation only. It is the
/// plan tool of the plan-gate policy.
pub struct ThinkTool;

impl Tool for ThinkTool {
    fn name(&self) -> &str {
        "think"
    }

    fn description(&self) -> &str {
        "Think or plan before acting: write down your reasoning, a plan, or what you \
         learned. Nothing is executed or changed; the thought is only recorded in the \
         conversation."
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "thought": {
                    "type": "string",
                    "description": "Your reasoning or plan."
                }
            },
            "required": ["thought"],
            "additionalProperties": false
        })
    }

    fn execute(&self, arguments: &serde_json::Value, _cx: &ToolContext<'_>) -> ToolResult {
        match required_str(arguments, "thought") {
            Ok(_) => ToolResult::ok("Thought recorded."),
            Err(error) => ToolResult::err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Workspace;
    use serde_json::json;

    #[test]
    fn records_thoughts() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let cx = ToolContext::new(&ws);
        let r = ThinkTool.execute(&json!({"thought": "first, read the code"}), &cx);
        assert_eq!(r.error, None);
        assert_eq!(r.output, "Thought recorded.");
        assert!(ThinkTool.execute(&json!({}), &cx).is_error());
        assert!(ThinkTool.execute(&json!({"thought": 1}), &cx).is_error());
    }
}
