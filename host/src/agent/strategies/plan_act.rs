//! `plan-act`: a plan phase with the read-only tools, then an act phase
//! with every tool.
//!
//! ```text
//!  user: <request>
//!  user: <PLAN_PROMPT>        ReAct steps offered READ_ONLY_TOOLS, until a reply without tool calls
//!  assistant: <the plan>      a phase reply
//!  user: <ACT_PROMPT>         ReAct steps offered every tool, until the final answer → output seam
//! ```
//!
//! In the plan phase a call to a tool outside the read-only set is an
//! unknown tool (`Unknown tool: write_file`) — after it has passed the
//! `tool_call` seam, the hooks and the permission policy like any call.

use super::Budget;
use crate::agent::config::READ_ONLY_TOOLS;
use crate::agent::outcome::RunResult;
use crate::agent::session::AgentSession;
use crate::interception::Interceptors;
use std::sync::Arc;

/// What the plan phase asks.
const PLAN_PROMPT: &str = "Plan first: look into the request above with the read-only tools \
    you have (read_file, think, todo) and reply with a step-by-step plan. Change nothing yet.";

/// What the act phase asks.
const ACT_PROMPT: &str = "Now carry out your plan, with every tool you need, and give your \
    final answer when you are done.";

impl AgentSession {
    /// One `plan-act` turn (see the module docs).
    pub(super) async fn plan_act(
        &mut self,
        bundle: Option<&Arc<Interceptors>>,
        budget: &mut Budget,
    ) -> Result<RunResult, RunResult> {
        self.prompt(PLAN_PROMPT);
        let plan = self
            .until_reply_with_only(&READ_ONLY_TOOLS, bundle, budget)
            .await?;
        self.phase_reply(bundle, plan).await?;
        self.prompt(ACT_PROMPT);
        let tools = self.tool_list.clone();
        let answer = self
            .until_reply(bundle, &tools, budget, &mut |_, _| {})
            .await?;
        Ok(self.answer(bundle, answer).await)
    }
}
