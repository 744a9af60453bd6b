//! `think`: a scratchpad for planning; records nothing durable.

use super::{ToolContext, ToolError, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;

/// `think`: lets the model write down its reasoning or plan. Nothing is
/// stored or executed; the thought stays in the conversation only. It is the
/// plan tool of the plan-gate policy.
pub struct ThinkTool;

/// The arguments of `think` (the field docs are what the model reads).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ThinkArgs {
    /// Your reasoning or plan.
    pub thought: String,
}

impl TypedTool for ThinkTool {
    /// Inline under a deadline: it records a note.
    fn stops_by_deadline(&self) -> bool {
        true
    }

    type Args = ThinkArgs;

    fn name(&self) -> &str {
        "think"
    }

    fn description(&self) -> &str {
        "Think or plan before acting: write down your reasoning, a plan, or what you \
         learned. Nothing is executed or changed; the thought is only recorded in the \
         conversation."
    }

    /// The thought needs no keeping: the call that carries it is in the
    /// conversation already.
    fn run(&self, _arguments: ThinkArgs, _cx: &ToolContext<'_>) -> Result<String, ToolError> {
        Ok("Thought recorded.".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testing::{run, setup};
    use serde_json::json;

    #[test]
    fn a_thought_is_acknowledged_and_anything_else_refused() {
        let (_dir, ws) = setup();
        let r = run(&ThinkTool, &ws, json!({"thought": "first, read the code"}));
        assert_eq!(r.error, None);
        assert_eq!(r.output, "Thought recorded.");
        assert_eq!(
            run(&ThinkTool, &ws, json!({})).error.as_deref(),
            Some("missing required argument `thought` (a string)")
        );
        assert_eq!(
            run(&ThinkTool, &ws, json!({"thought": 1})).error.as_deref(),
            Some("argument `thought` must be a string, got 1")
        );
    }
}
