//! The `ReAct` loop: one user turn, provider call by provider call.
//!
//! Headers a `provider_request` interceptor replaces travel with that one
//! call ([`ProviderCall::headers`]); the provider itself is never changed, so
//! sessions sharing a provider across threads cannot send each other's
//! headers, and nothing needs putting back after a call.

use super::events::AgentEvent;
use super::session::{AgentSession, EndReason, RunResult};
use super::stream::Assembler;
use crate::interception::Interceptors;
use crate::providers::{ModelResponse, Provider, ProviderCall};
use crate::types::{Headers, Message, ProviderRequest, ToolList};
use std::sync::Arc;

/// What the pre-provider seams changed for one call; `None` fields mean
/// "as the session has it" (the durable history, the session's tools).
#[derive(Default)]
struct Outgoing {
    messages: Option<Vec<Message>>,
    tools: Option<ToolList>,
    kwargs: serde_json::Map<String, serde_json::Value>,
    /// Headers for this call only, when an interceptor replaced the
    /// envelope and the provider has a header surface.
    headers: Option<Headers>,
}

impl AgentSession {
    /// Runs one user turn to its end: a final answer, a pre-provider block, a
    /// provider error, or `max_steps` provider calls without an answer.
    pub fn run_turn(&mut self, input: &str) -> RunResult {
        self.facts.turn_index = self.turns;
        self.turns += 1;
        self.facts.provider_calls_this_turn = 0;
        self.facts.tool_calls_this_turn = 0;
        self.history.push(Message::user(input));
        self.bus.emit(|| AgentEvent::User {
            content: input.to_owned(),
        });
        let bundle = self.effective_interceptors();
        let result = self.run_steps(bundle.as_ref());
        self.bus.emit(|| AgentEvent::RunEnd {
            success: result.success,
            output: result.output.clone(),
            reason: result.reason.to_string(),
        });
        result
    }

    fn run_steps(&mut self, bundle: Option<&Arc<Interceptors>>) -> RunResult {
        let tools = self.tool_list.clone();
        for _ in 0..self.max_steps {
            for middleware in &self.hooks.before_model {
                middleware(&mut self.history);
            }
            let response = match self.call_provider(bundle.map(Arc::as_ref), &tools) {
                Ok(response) => response,
                Err(end) => return end,
            };
            let assistant =
                Message::assistant(response.content.clone(), response.tool_calls.clone());
            self.history.push(assistant);
            self.bus.emit(|| AgentEvent::Assistant {
                content: response.content.clone(),
                tool_calls: response.tool_calls.clone(),
            });
            if response.tool_calls.is_empty() {
                return RunResult::completed(response.content);
            }
            for call in &response.tool_calls {
                self.settle_call(call, bundle);
            }
        }
        let error = format!(
            "stopped after {} provider calls without a final answer",
            self.max_steps
        );
        RunResult::failed(
            EndReason::MaxSteps {
                steps: self.max_steps,
            },
            error,
        )
    }

    /// Context → `provider_request` → the wire, the call carrying the headers
    /// the seam chose. `Err` ends the run (a block or a provider failure).
    fn call_provider(
        &mut self,
        bundle: Option<&Interceptors>,
        tools: &ToolList,
    ) -> Result<ModelResponse, RunResult> {
        let outgoing = self.outgoing(bundle, tools).map_err(|reason| {
            let text = format!("Blocked by interceptor: {reason}");
            RunResult::failed(EndReason::InterceptorBlocked { reason }, text)
        })?;
        let provider: Arc<dyn Provider> = Arc::clone(&self.provider);
        let call = ProviderCall {
            messages: outgoing.messages.as_deref().unwrap_or(&self.history),
            tools: outgoing.tools.as_ref().unwrap_or(tools),
            kwargs: &outgoing.kwargs,
            headers: outgoing.headers.as_ref(),
        };
        let outcome = if self.stream {
            let mut assembler = Assembler::default();
            let bus = &self.bus;
            provider
                .stream(&call, &mut |delta| {
                    if let Some(text) = assembler.push(delta) {
                        bus.publish(AgentEvent::AssistantDelta { content: text });
                    }
                })
                .map(|()| assembler.finish())
        } else {
            provider.complete(&call)
        };
        self.facts.provider_calls_this_turn += 1;
        match outcome {
            Ok(response) => {
                self.facts.input_tokens += response.usage.input_tokens;
                self.facts.output_tokens += response.usage.output_tokens;
                Ok(response)
            }
            Err(error) => {
                let text = error.to_string();
                Err(RunResult::failed(EndReason::ProviderError(error), text))
            }
        }
    }

    /// Runs the two pre-provider seams. With no bundle, or both chains
    /// empty, nothing runs and nothing is emitted. Nothing is copied either:
    /// when the context seam keeps the history, the history itself is moved
    /// into the envelope for the `provider_request` chain and moved back.
    fn outgoing(
        &mut self,
        bundle: Option<&Interceptors>,
        tools: &ToolList,
    ) -> Result<Outgoing, String> {
        let Some(bundle) =
            bundle.filter(|b| !b.context.is_empty() || !b.provider_request.is_empty())
        else {
            return Ok(Outgoing::default());
        };
        let context = self.run_seam(&bundle.context, &(), &self.history);
        if let Some(reason) = context.blocked {
            return Err(reason);
        }
        if bundle.provider_request.is_empty() {
            return Ok(Outgoing {
                messages: context.replaced,
                ..Outgoing::default()
            });
        }
        let lent = context.replaced.is_none();
        let surface = self.provider.request_headers();
        let has_surface = surface.is_some();
        let envelope = ProviderRequest {
            model: self.provider.model().to_owned(),
            messages: context
                .replaced
                .unwrap_or_else(|| std::mem::take(&mut self.history)),
            tools: tools.clone(),
            kwargs: serde_json::Map::new(),
            headers: surface,
        };
        let request = self.run_seam(&bundle.provider_request, &(), &envelope);
        let (sent, keep) = match request.replaced {
            Some(replaced) => (replaced, Some(envelope.messages)),
            None if lent => {
                let ProviderRequest { messages, .. } = envelope;
                self.history = messages;
                return request.blocked.map_or_else(|| Ok(Outgoing::default()), Err);
            }
            None => (envelope, None),
        };
        if let Some(history) = keep.filter(|_| lent) {
            self.history = history;
        }
        if let Some(reason) = request.blocked {
            return Err(reason);
        }
        Ok(Outgoing {
            messages: Some(sent.messages),
            tools: Some(sent.tools),
            kwargs: sent.kwargs,
            // Without a surface a header replacement is a no-op.
            headers: sent.headers.filter(|_| has_surface),
        })
    }
}
