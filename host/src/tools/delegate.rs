//! `delegate`: hands a task to a sub-agent and returns its final answer.

use super::{ToolContext, ToolError, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;
use std::sync::Arc;

/// Runs a task to completion in a fresh conversation.
pub trait SubAgent: Send + Sync {
    /// The sub-agent's final answer, or `Err((output, error))`. `cx` is the
    /// delegating call's context: its id, and what the calling session
    /// handed down with it (see [`ToolContext::extensions`]).
    ///
    /// # Errors
    ///
    /// `(output, error)` when the sub-agent does not finish: what it had
    /// written so far, and the line saying why. The `delegate` call fails with
    /// them as `ToolError::Failed`.
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

/// The arguments of `delegate` (the field docs are what the model reads).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DelegateArgs {
    /// What the sub-agent should do.
    pub task: String,
}

impl TypedTool for DelegateTool {
    type Args = DelegateArgs;

    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        "Delegate a task to a sub-agent."
    }

    /// The sub-agent's answer; when it fails, its error line with the
    /// output it had.
    fn run(&self, arguments: DelegateArgs, cx: &ToolContext<'_>) -> Result<String, ToolError> {
        self.agent
            .run(&arguments.task, cx)
            .map_err(|(output, message)| ToolError::Failed { message, output })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testing::{run, setup};
    use serde_json::json;

    /// Answers `did <task>`, or fails with partial output on `fail`.
    struct Echoing;

    impl SubAgent for Echoing {
        fn run(&self, task: &str, _cx: &ToolContext<'_>) -> Result<String, (String, String)> {
            match task {
                "fail" => Err((
                    "half done".to_owned(),
                    "sub-agent failed: out of steps".to_owned(),
                )),
                task => Ok(format!("did {task}")),
            }
        }
    }

    #[test]
    fn the_task_goes_to_the_sub_agent_and_its_failure_keeps_its_output() {
        let (_dir, ws) = setup();
        let tool = DelegateTool::named("spawn", Arc::new(Echoing));
        assert_eq!(run(&tool, &ws, json!({"task": "it"})).output, "did it");
        let failed = run(&tool, &ws, json!({"task": "fail"}));
        assert_eq!(
            failed.transcript_text(),
            "sub-agent failed: out of steps\nhalf done"
        );
        assert_eq!(
            run(&tool, &ws, json!({})).error.as_deref(),
            Some("missing required argument `task` (a string)")
        );
        assert_eq!(
            run(&tool, &ws, json!({"task": "it", "model": "big"}))
                .error
                .as_deref(),
            Some("unknown argument `model`; expected `task`")
        );
    }
}
