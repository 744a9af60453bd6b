//! `retry`: a failed `ReAct` run, run again with a fresh context.
//!
//! A run fails when it is blocked (before the model, or its answer on the
//! `output` seam) or runs out of steps; a provider error is not retried
//! (the provider layer has already retried what can recover). A fresh
//! attempt starts where the turn started: the failed attempt's messages
//! leave the durable history (the turns before this one stay), and the
//! model is sent one user message, the original request plus
//!
//! ```text
//! Previous attempt (#1) scored 0%. Output was: <what the user was shown>
//! ```
//!
//! Every attempt is the same session's `ReAct` loop, so it runs under the
//! whole configuration of the turn — the merged chains, the hooks, the
//! permission policy and the approver — and gets its own `max_steps`.

use crate::agent::outcome::{EndReason, RunResult};
use crate::agent::session::AgentSession;
use crate::interception::Interceptors;
use std::sync::Arc;

/// The fresh attempt's user message after attempt `number` failed with
/// `output`.
fn retry_prompt(input: &str, number: usize, output: &str) -> String {
    format!("{input}\n\nPrevious attempt (#{number}) scored 0%. Output was: {output}")
}

impl AgentSession {
    /// One `retry` turn (see the module docs); `start` is where the turn's
    /// user message is in the history.
    pub(super) async fn retry(
        &mut self,
        bundle: Option<&Arc<Interceptors>>,
        input: &str,
        start: usize,
        attempts: usize,
    ) -> RunResult {
        let mut result = self.run_steps(bundle).await;
        for number in 1..attempts.max(1) {
            if result.success || matches!(result.reason, EndReason::ProviderError(_)) {
                break;
            }
            tracing::info!(attempt = number + 1, of = attempts, reason = %result.reason, "retry strategy: a fresh attempt");
            self.history.truncate(start);
            self.prompt(retry_prompt(input, number, &result.output));
            result = self.run_steps(bundle).await;
        }
        result
    }
}
