//! Strategies: the loops a turn can run, each on the `ReAct` machinery.
//!
//! A strategy decides *which* calls a turn makes — a plan first, several
//! candidates, a reflection, a fresh attempt — never *how* it makes them.
//! Every strategy makes each conversation call through the one call site
//! the `ReAct` loop uses (before-model middleware → `context` →
//! `provider_request` → the wire, headers per call → `model_response`),
//! settles each tool call through the one gate (`tool_call` → `PreToolUse`
//! hooks → permission policy → execute → `tool_result`; an approval covers
//! exactly one call), and passes its final answer through the `output`
//! seam, gate retries included. So a policy that holds in `ReAct` holds in
//! every strategy. The one call that bypasses the seams, tree-of-thought's
//! evaluator, is described in [`Strategy::TreeOfThought`](super::Strategy::TreeOfThought).
//!
//! Shared rules:
//!
//! * `max_steps` caps the steps of the whole turn, over every phase (a
//!   step is one model reply, or tree-of-thought's set of candidates);
//!   `retry` gives each attempt its own.
//! * The prompts a strategy adds (a plan request, a step, a reflection)
//!   are user messages in the durable history: the model reads them as
//!   instructions, and every seam sees them like any other message. A gate
//!   that re-arms on a new user message (plan-gate) re-arms on them too:
//!   no strategy opens a gate on the model's behalf.
//! * A reply the `model_response` seam blocked (a substitute) ends the
//!   turn in every strategy, as in `ReAct`.
//! * A turn blocked before any provider call leaves nothing in the
//!   conversation: its input and the prompts the strategy added go.

mod plan_act;
mod plan_and_execute;
mod reflexion;
mod retry;
mod tree_of_thought;

use super::config::Strategy;
use super::events::AgentEvent;
use super::outcome::{EndReason, Judged, RunResult, Stepped};
use super::session::AgentSession;
use crate::interception::Interceptors;
use crate::tools::ToolSet;
use crate::types::{Message, ToolList};
use std::sync::Arc;

/// Steps a turn has left: `max_steps` caps the steps of the whole turn,
/// over all its phases.
pub(super) struct Budget(usize);

impl Budget {
    /// Takes one step; false when none is left.
    fn take(&mut self) -> bool {
        let left = self.0 > 0;
        self.0 = self.0.saturating_sub(1);
        left
    }
}

impl AgentSession {
    /// Runs this turn's strategy, the turn's user message (`input`) being
    /// the last message of the history.
    pub(crate) async fn run_strategy(
        &mut self,
        bundle: Option<&Arc<Interceptors>>,
        input: &str,
    ) -> RunResult {
        let strategy = self.config.strategy.clone();
        if strategy == Strategy::React {
            return self.run_steps(bundle).await;
        }
        let start = self.history.len().saturating_sub(1);
        let mut budget = Budget(self.config.max_steps);
        let ended = match strategy {
            Strategy::PlanAndExecute { max_plan_steps } => {
                self.plan_and_execute(bundle, &mut budget, max_plan_steps)
                    .await
            }
            Strategy::Reflexion { reflect_every } => {
                self.reflexion(bundle, &mut budget, reflect_every).await
            }
            Strategy::TreeOfThought { candidates } => {
                self.tree_of_thought(bundle, &mut budget, candidates).await
            }
            Strategy::PlanAct => self.plan_act(bundle, &mut budget).await,
            Strategy::Retry { attempts } => Ok(self.retry(bundle, input, start, attempts).await),
            Strategy::React => Ok(self.run_steps(bundle).await),
        };
        let result = ended.unwrap_or_else(|end| end);
        // Blocked before the model saw anything: only the input is left,
        // for the turn to remove.
        if matches!(result.reason, EndReason::InterceptorBlocked { .. })
            && self.facts.provider_calls_this_turn == 0
        {
            self.history.truncate(start);
            self.history.push(Message::user(input));
        }
        result
    }

    /// `ReAct` steps offering `tools` until the model replies without tool
    /// calls: that reply, not yet recorded. After each step that called
    /// tools, `acted` is told how many of them ran. `Err` ends the turn (a
    /// block, a provider failure, or the budget used up).
    pub(super) async fn until_reply(
        &mut self,
        bundle: Option<&Arc<Interceptors>>,
        tools: &ToolList,
        budget: &mut Budget,
        acted: &mut (dyn FnMut(&mut AgentSession, usize) + Send),
    ) -> Result<Judged, RunResult> {
        while budget.take() {
            match self.step(bundle, tools).await? {
                Stepped::Answered(judged) => return Ok(judged),
                Stepped::Acted { executed } => acted(self, executed),
            }
        }
        Err(self.out_of_steps())
    }

    /// A reply that ends a phase but not the turn (a plan, a step's
    /// report): recorded as one assistant message with one `assistant`
    /// event. It is not a final answer, so the `output` seam does not
    /// judge it. A substitute (the `model_response` seam blocked the
    /// reply) ends the turn instead, as the final answer.
    pub(super) async fn phase_reply(
        &mut self,
        bundle: Option<&Arc<Interceptors>>,
        judged: Judged,
    ) -> Result<String, RunResult> {
        if judged.vetoed() {
            return Err(self.answer(bundle, judged).await);
        }
        let content = judged.content;
        self.history
            .push(Message::assistant(content.clone(), Vec::new()));
        self.bus.emit(|| AgentEvent::Assistant {
            content: content.clone(),
            tool_calls: Vec::new(),
            finish_reason: None,
        });
        Ok(content)
    }

    /// A prompt the strategy adds: a user message in the durable history.
    pub(super) fn prompt(&mut self, text: impl Into<String>) {
        self.history.push(Message::user(text));
    }

    /// A phase's [`until_reply`](Self::until_reply) with only the
    /// session's tools named in `names`: they are the tools offered and the
    /// only ones a call can run (any other is an unknown tool), every call
    /// still passing the whole gate. The session's tools are back afterwards.
    pub(super) async fn until_reply_with_only(
        &mut self,
        names: &[&str],
        bundle: Option<&Arc<Interceptors>>,
        budget: &mut Budget,
    ) -> Result<Judged, RunResult> {
        let mut only = ToolSet::new();
        for name in names {
            if let Some(tool) = self.tools.get(name) {
                only.insert(Arc::clone(tool));
            }
        }
        let offered = ToolList::new(only.schemas());
        let all = std::mem::replace(&mut self.tools, only);
        let result = self
            .until_reply(bundle, &offered, budget, &mut |_, _| {})
            .await;
        self.tools = all;
        result
    }
}
