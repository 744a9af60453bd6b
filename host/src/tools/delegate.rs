//! `delegate`: hands a task to a sub-agent and returns its final answer.

use super::{Tool, ToolContext};
use crate::types::ToolResult;
use std::sync::Arc;

/// Runs a task to completion in a fresh conversation.
pub trait SubAgent: Send + Sync {
    /// The sub-agent's final answer, or `Err((output, error))`. `cx` is the
    /// delegating call's context: its id, and what the calling session
    /// handed down with it (see [`ToolContext::extensions`]).
    fn run(&self, task: &str, cx: &ToolContext<'_>) -> Result<String, (String, String)>;
}

/// The `delegate` tool.
pub struct DelegateTool {
    name: String,
    agent: Arc<dyn SubAgent>,
}

impl DelegateTool {
    /// A `delegate` tool running tasks on `agent`.
    pub fn new(agent: Arc<dyn SubAgent>) -> Self {
        DelegateTool::named("delegate", agent)
    }

    /// The same tool under another name (delegate-spawner's `delegate_tool`).
    pub fn named(name: impl Into<String>, agent: Arc<dyn SubAgent>) -> Self {
        DelegateTool {
            name: name.into(),
            agent,
        }
    }
}

impl Tool for DelegateTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        "Delegate a task to a sub-agent."
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {"task": {"type": "string", "description": "What the sub-agent should do."}},
            "required": ["task"]
        })
    }

    fn execute(&self, arguments: &serde_json::Value, cx: &ToolContext<'_>) -> ToolResult {
        let Some(task) = arguments.get("task").and_then(|t| t.as_str()) else {
            return ToolResult::err("missing required argument `task` (a string)");
        };
        match self.agent.run(task, cx) {
            Ok(output) => ToolResult::ok(output),
            Err((output, error)) => ToolResult {
                output,
                error: Some(error),
                metadata: None,
            },
        }
    }
}
