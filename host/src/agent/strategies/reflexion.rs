//! `reflexion`: `ReAct` with a reflection prompt every `reflect_every`
//! executed actions.
//!
//! Only actions that ran count: a call refused at the gate (an interceptor
//! block, a hook, the permission policy, an unknown tool) is not an action,
//! so a step whose calls were all refused never prompts a reflection. (A
//! reflection after such a step would be a new user message with nothing
//! to reflect on — and would re-arm a plan gate for nothing.)

use super::Budget;
use crate::agent::outcome::RunResult;
use crate::agent::session::AgentSession;
use crate::interception::Interceptors;
use std::sync::Arc;

/// The reflection prompt.
const REFLECTION_PROMPT: &str = "Pause and reflect on your last actions: what did they achieve, \
    what went wrong, and what will you do differently? Then carry on with the task.";

/// True when `executed` more actions, after `before`, reach another
/// multiple of `every`.
fn reflects(before: usize, executed: usize, every: usize) -> bool {
    let every = every.max(1);
    executed > 0 && (before + executed) / every > before / every
}

impl AgentSession {
    /// One `reflexion` turn (see the module docs).
    pub(super) async fn reflexion(
        &mut self,
        bundle: Option<&Arc<Interceptors>>,
        budget: &mut Budget,
        reflect_every: usize,
    ) -> Result<RunResult, RunResult> {
        let tools = self.tool_list.clone();
        let mut actions = 0;
        let answer = self
            .until_reply(bundle, &tools, budget, &mut |session, executed| {
                if reflects(actions, executed, reflect_every) {
                    session.prompt(REFLECTION_PROMPT);
                }
                actions += executed;
            })
            .await?;
        Ok(self.answer(bundle, answer).await)
    }
}

#[cfg(test)]
mod tests {
    use super::reflects;

    #[test]
    fn a_reflection_comes_when_executed_actions_reach_a_multiple() {
        assert!(!reflects(0, 0, 3), "nothing ran: no reflection");
        assert!(!reflects(3, 0, 3), "nothing ran since the last one");
        assert!(!reflects(0, 2, 3));
        assert!(reflects(2, 1, 3));
        assert!(reflects(2, 5, 3), "crossing a multiple counts");
        assert!(reflects(0, 1, 1));
        assert!(reflects(0, 1, 0), "0 is read as 1");
    }
}
