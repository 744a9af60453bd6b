//! The final answer: the `output` seam and its gate retries. A retry asks
//! the model again with exactly the current answer and the feedback,
//! marked as a gate retry, and judges the new answer from the start; the
//! asking interceptor's bound (at most [`MAX_GATE_RETRIES`]) ends it.

use super::events::AgentEvent;
use super::outcome::{shown_for_block, EndReason, Judged, RunResult};
use super::session::AgentSession;
use super::usage::CallSource;
use crate::interception::{Interceptors, OutputSeam};
use crate::types::{Message, Role};
use std::collections::BTreeMap;

/// The most retries one `output` interceptor may ask for one answer,
/// whatever bound it states (each is a provider call).
const MAX_GATE_RETRIES: u32 = 10;

impl AgentSession {
    /// The final answer: the `output` seam (not for a substitute), then the
    /// `assistant` event with what the user is shown, and the run's result.
    /// A retry asks the model again with exactly the current answer and the
    /// feedback (through the pre-provider seams, marked as a gate retry) and
    /// judges the new answer from the start, until the asking interceptor's
    /// bound is used up; then its exhaustion outcome stands in for it.
    pub(super) async fn finish_answer(
        &mut self,
        bundle: Option<&Interceptors>,
        content: String,
        veto: Option<String>,
        finish_reason: Option<&'static str>,
    ) -> RunResult {
        let chain = bundle
            .map(|b| b.output.clone())
            .filter(|c| !c.is_empty() && veto.is_none());
        let Some(chain) = chain else {
            self.bus.emit(|| AgentEvent::Assistant {
                content: content.clone(),
                tool_calls: Vec::new(),
                finish_reason,
            });
            return RunResult::completed(content).vetoed(veto);
        };
        let mut content = content;
        // Per asking interceptor: retries used, and its bound.
        let mut retries: BTreeMap<String, (u32, u32)> = BTreeMap::new();
        loop {
            let spent = |name: &str| retries.get(name).is_some_and(|(used, max)| used >= max);
            let outcome = self.run_chain(&chain, &(), &content, &spent);
            self.publish_notices::<OutputSeam>(&outcome);
            let notice = outcome.notices.last().map(|n| n.text.clone());
            if let Some(reason) = outcome.blocked {
                let shown = shown_for_block(reason.clone(), notice);
                self.bus.emit(|| AgentEvent::Assistant {
                    content: shown.clone(),
                    tool_calls: Vec::new(),
                    finish_reason: Some("vetoed"),
                });
                return RunResult::failed(EndReason::OutputBlocked { reason }, shown)
                    .vetoed(outcome.blocked_by);
            }
            if let Some(retry) = outcome.retry {
                let (interceptor, ask) = *retry;
                // The pack's bound, within the host's.
                let max = ask.max.min(MAX_GATE_RETRIES);
                let entry = retries.entry(interceptor.clone()).or_insert((0, max));
                entry.1 = max;
                if entry.0 >= max {
                    continue;
                }
                entry.0 += 1;
                let attempt = entry.0;
                self.bus.emit(|| AgentEvent::GateRetry {
                    interceptor,
                    attempt,
                    max,
                    feedback: ask.feedback.clone(),
                });
                match self.gate_retry(bundle, &content, &ask.feedback).await {
                    Ok(Judged {
                        content: retried,
                        veto: None,
                        ..
                    }) => {
                        self.replace_last_answer(&retried);
                        content = retried;
                        continue;
                    }
                    Ok(substitute) => {
                        self.replace_last_answer(&substitute.content);
                        // Boxed: an async function calling itself.
                        return Box::pin(self.finish_answer(
                            None,
                            substitute.content,
                            substitute.veto,
                            Some("vetoed"),
                        ))
                        .await;
                    }
                    Err(end) => return end,
                }
            }
            let shown = outcome.replaced.unwrap_or(content);
            self.bus.emit(|| AgentEvent::Assistant {
                content: shown.clone(),
                tool_calls: Vec::new(),
                finish_reason,
            });
            return RunResult::completed(shown);
        }
    }

    /// One gate retry: the model is sent exactly `[assistant: content, user:
    /// feedback]`, through the `context` and `provider_request` seams (so a
    /// retry cannot bypass redaction), not streamed, with the session facts
    /// marking it as a gate retry; the reply passes `model_response`.
    async fn gate_retry(
        &mut self,
        bundle: Option<&Interceptors>,
        content: &str,
        feedback: &str,
    ) -> Result<Judged, RunResult> {
        let asked = vec![
            Message::assistant(content, Vec::new()),
            Message::user(feedback),
        ];
        let history = std::mem::replace(&mut self.history, asked);
        let streaming = std::mem::replace(&mut self.streaming, false);
        self.source = CallSource::GateRetry;
        let tools = self.tool_list.clone();
        let received = self.call_provider(bundle, &tools).await;
        self.source = CallSource::Agent;
        self.refresh_facts();
        self.streaming = streaming;
        self.history = history;
        let mut judged = self.judge_reply(bundle, received?);
        // A retry answers the question again; it does not get to call tools.
        judged.tool_calls.clear();
        Ok(judged)
    }

    /// The durable history's final answer becomes `content` (a gate retry's
    /// answer replaces the one it corrects: one assistant message per reply
    /// the user sees).
    fn replace_last_answer(&mut self, content: &str) {
        if let Some(last) = self
            .history
            .iter_mut()
            .rev()
            .find(|m| m.role == Role::Assistant)
        {
            content.clone_into(&mut last.content);
        }
    }
}
