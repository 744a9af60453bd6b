//! `plan-and-execute`: a plan first, then each of its steps in a `ReAct`
//! phase of its own, then the final answer.
//!
//! ```text
//!  user: <request>
//!  user: <PLAN_PROMPT>                 one call, offered no tools
//!  assistant: 1. … 2. …                the plan (a phase reply)
//!  user: Step 1 of 2: …                ReAct steps until a reply without tool calls
//!  …
//!  user: <FINAL_PROMPT>                ReAct steps until the final answer → output seam
//! ```

use super::Budget;
use crate::agent::outcome::RunResult;
use crate::agent::session::AgentSession;
use crate::interception::Interceptors;
use std::sync::Arc;

/// What the plan call asks.
const PLAN_PROMPT: &str = "Before you act, write a numbered plan for the request above: one \
    short step per line (\"1. …\"). Do not call any tools yet; reply with the plan only.";

/// What the last phase asks.
const FINAL_PROMPT: &str =
    "Every step of the plan is done. Now give your final answer to the original request.";

/// The prompt of one plan step.
fn step_prompt(number: usize, of: usize, step: &str) -> String {
    format!(
        "Step {number} of {of} of your plan: {step}\nCarry out this step now, with the tools \
         it needs, then reply briefly with what you did."
    )
}

/// The text of a plan line (`1. …`, `2) …`, `- …`, `* …`), if it is one.
fn step_text(line: &str) -> Option<&str> {
    let line = line.trim_start();
    let numbered = line.trim_start_matches(|c: char| c.is_ascii_digit());
    let rest = if let Some(rest) = line.strip_prefix(['-', '*', '•']) {
        rest
    } else if numbered.len() < line.len() {
        numbered.strip_prefix(['.', ')'])?
    } else {
        return None;
    };
    let text = rest.trim();
    (rest.starts_with(char::is_whitespace) && !text.is_empty()).then_some(text)
}

/// The steps of `plan`, at most `max` (the rest joined into the last); a
/// plan with no step lines is one step.
fn plan_steps(plan: &str, max: usize) -> Vec<String> {
    let mut steps: Vec<String> = plan
        .lines()
        .filter_map(step_text)
        .map(str::to_owned)
        .collect();
    if steps.is_empty() {
        return vec!["the plan above, as a whole".to_owned()];
    }
    let max = max.max(1);
    if steps.len() > max {
        let rest = steps.split_off(max - 1);
        steps.push(rest.join("; "));
    }
    steps
}

impl AgentSession {
    /// One `plan-and-execute` turn (see the module docs).
    pub(super) async fn plan_and_execute(
        &mut self,
        bundle: Option<&Arc<Interceptors>>,
        budget: &mut Budget,
        max_plan_steps: usize,
    ) -> Result<RunResult, RunResult> {
        self.prompt(PLAN_PROMPT);
        let plan = self.until_reply_with_only(&[], bundle, budget).await?;
        let plan = self.phase_reply(bundle, plan).await?;
        let steps = plan_steps(&plan, max_plan_steps);
        let tools = self.tool_list.clone();
        for (index, step) in steps.iter().enumerate() {
            self.prompt(step_prompt(index + 1, steps.len(), step));
            let report = self
                .until_reply(bundle, &tools, budget, &mut |_, _| {})
                .await?;
            self.phase_reply(bundle, report).await?;
        }
        self.prompt(FINAL_PROMPT);
        let answer = self
            .until_reply(bundle, &tools, budget, &mut |_, _| {})
            .await?;
        Ok(self.answer(bundle, answer).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_lines_become_steps_and_the_rest_is_not_a_step() {
        let plan = "Here is my plan:\n1. Read the file\n2) Fix the bug\n- Run the tests\n\
                    1.5 litres is not a step\n* \n3.\nDone.";
        assert_eq!(
            plan_steps(plan, 8),
            ["Read the file", "Fix the bug", "Run the tests"]
        );
        assert_eq!(
            plan_steps(plan, 2),
            ["Read the file", "Fix the bug; Run the tests"]
        );
        assert_eq!(plan_steps("just do it", 8), ["the plan above, as a whole"]);
    }
}
