//! The `ReAct` loop: one user turn, provider call by provider call.
//!
//! Headers a `provider_request` interceptor replaces travel with that one
//! call ([`ProviderCall::headers`]); the provider itself is never changed, so
//! sessions sharing a provider across threads cannot send each other's
//! headers, and nothing needs putting back after a call.

use super::config::StreamPolicy;
use super::events::{AgentEvent, RunUsage};
use super::outcome::{blocked_run, shown_for_block, EndReason, Judged, RunResult, Stepped};
use super::session::AgentSession;
use super::stream::{StreamBlock, StreamGate};
use crate::interception::{
    ContentRole, Interceptors, ModelResponseInterceptor, PackMode, ReplyFacts, SeamName,
};
use crate::providers::{Assembler, ModelResponse, Provider, ProviderCall, Usage};
use crate::types::{Headers, Message, ProviderRequest, Role, ToolList};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// A model reply as the provider returned it, and what its stream's gate
/// decided.
pub(crate) struct Received {
    response: ModelResponse,
    streamed: bool,
    /// The `stream_chunk` seam blocked: the reason, the notice and who.
    stream_blocked: Option<StreamBlock>,
    /// The model the call went to, when a `provider_request` interceptor
    /// chose another one.
    pub(crate) model: Option<String>,
    /// The headers the call carried, when a `provider_request` interceptor
    /// chose them.
    pub(crate) headers: Option<Headers>,
}

impl Received {
    /// A reply the gateway read from the upstream itself.
    pub(crate) fn relayed(
        response: ModelResponse,
        streamed: bool,
        stream_blocked: Option<StreamBlock>,
    ) -> Self {
        Received {
            response,
            streamed,
            stream_blocked,
            model: None,
            headers: None,
        }
    }
}

/// The packs of `bundle` that judge whole replies (`model_response`,
/// `output`) but not streamed text, sorted, and a phrase for each
/// (`json-schema gates output but not stream_chunk`): what a stream cannot
/// show before their verdict. A monitored pack gates nothing.
pub(crate) fn whole_reply_gates(bundle: &Interceptors) -> (Vec<String>, Vec<String>) {
    let packs_on = |seam: SeamName| -> BTreeSet<String> {
        bundle
            .chain(seam)
            .iter()
            .filter(|i| {
                i.is_pack() && i.role() != ContentRole::Observes && i.mode() == PackMode::Enforce
            })
            .map(|i| i.name().split('/').next().unwrap_or_default().to_owned())
            .collect()
    };
    let streaming_gates = packs_on(SeamName::StreamChunk);
    let on_reply = packs_on(SeamName::ModelResponse);
    let on_output = packs_on(SeamName::Output);
    let packs: Vec<String> = on_reply
        .union(&on_output)
        .filter(|pack| !streaming_gates.contains(*pack))
        .cloned()
        .collect();
    let which = packs
        .iter()
        .map(|pack| {
            let seams: Vec<&str> = [
                (on_reply.contains(pack), "model_response"),
                (on_output.contains(pack), "output"),
            ]
            .into_iter()
            .filter_map(|(on, seam)| on.then_some(seam))
            .collect();
            format!("{pack} gates {} but not stream_chunk", seams.join(" and "))
        })
        .collect();
    (packs, which)
}

/// Why the pre-provider seams did not produce a request.
enum Halt {
    /// An interceptor blocked (the reason, the interceptor): the run ends.
    Blocked(String, Option<String>),
    /// A rate limiter asked the turn to wait.
    Paused {
        interceptor: String,
        wait: Duration,
        reason: String,
    },
    /// A context-window gate asked for the conversation to be compacted.
    Compact { interceptor: String, reason: String },
}

/// The longest one pause of a turn may last, whatever a pack asks for.
const MAX_PAUSE: Duration = Duration::from_secs(60);
/// The most pauses one provider call may wait out.
const MAX_PAUSES: u32 = 5;

/// The last provider-call id given out in this process.
pub(super) static CALL_IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// What the pre-provider seams changed for one call; `None` fields mean
/// "as the session has it" (the durable history, the session's tools).
#[derive(Default)]
pub(super) struct Outgoing {
    pub(super) messages: Option<Vec<Message>>,
    /// The model, when an interceptor sent the call to another one.
    pub(super) model: Option<String>,
    pub(super) tools: Option<ToolList>,
    /// The extra call options, when an interceptor replaced the envelope.
    pub(super) kwargs: Option<serde_json::Map<String, serde_json::Value>>,
    /// Headers for this call only, when an interceptor replaced the
    /// envelope and the provider has a header surface.
    pub(super) headers: Option<Headers>,
}

impl AgentSession {
    /// Runs one user turn to its end: a final answer, a pre-provider block, a
    /// provider error, or `max_steps` provider calls without an answer.
    ///
    /// This blocks the calling thread for the whole turn: it drives
    /// [`run_turn_async`](Self::run_turn_async), the one loop, to its end
    /// (on a shared background runtime; from inside a Tokio runtime, on a
    /// thread of its own while the caller waits). Async code should await
    /// [`run_turn_async`](Self::run_turn_async) instead.
    pub fn run_turn(&mut self, input: &str) -> RunResult {
        crate::runtime::block_on(self.run_turn_async(input))
    }

    /// [`run_turn`](Self::run_turn) without blocking: model calls, retry
    /// waits and rate-limit pauses wait asynchronously, approvals are
    /// awaited, and tools run on the runtime's blocking threads. It must be
    /// polled inside a Tokio runtime (any flavour); the future is `Send`,
    /// so it can be spawned on a multi-threaded one. Interceptors run
    /// inline: they are policy calls of microseconds.
    pub async fn run_turn_async(&mut self, input: &str) -> RunResult {
        self.facts.turn_index = self.turns;
        self.turns += 1;
        self.facts.provider_calls_this_turn = 0;
        self.facts.tool_calls_this_turn = 0;
        // A tool that went away (its MCP server died) is offered no more.
        if self.tools.offered_count() != self.tool_list.len() {
            self.tool_list = ToolList::new(self.tools.schemas());
        }
        self.history.push(Message::user(input));
        let used_before = self.ledger.total();
        self.bus.emit(|| AgentEvent::User {
            content: input.to_owned(),
        });
        let bundle = self.effective_interceptors();
        self.facts_read = bundle.is_some();
        self.refresh_facts();
        self.streaming = self.config.stream && !self.downgrade(bundle.as_deref());
        let result = self.run_strategy(bundle.as_ref(), input).await;
        // A turn blocked before the model saw anything of it leaves nothing
        // in the conversation: its input was refused, so a later turn's
        // request does not carry it (an input gate would refuse every later
        // turn for it).
        if matches!(result.reason, EndReason::InterceptorBlocked { .. })
            && self.facts.provider_calls_this_turn == 0
            && self
                .history
                .last()
                .is_some_and(|m| m.role == Role::User && m.content == input)
        {
            self.history.pop();
        }
        self.bus.emit(|| AgentEvent::RunEnd {
            success: result.success,
            output: result.output.clone(),
            reason: result.reason.to_string(),
            vetoed: result.vetoed_by.is_some(),
            vetoed_by: result.vetoed_by.clone(),
            usage: RunUsage::between(used_before, self.ledger.total()),
        });
        result
    }

    /// The `ReAct` loop: steps until a final answer, at most `max_steps`.
    pub(crate) async fn run_steps(&mut self, bundle: Option<&Arc<Interceptors>>) -> RunResult {
        let tools = self.tool_list.clone();
        for _ in 0..self.config.max_steps {
            match self.step(bundle, &tools).await {
                Ok(Stepped::Acted { .. }) => {}
                Ok(Stepped::Answered(judged)) => return self.answer(bundle, judged).await,
                Err(end) => return end,
            }
        }
        self.out_of_steps()
    }

    /// One step of any loop: the before-model middleware, one conversation
    /// call offering `tools`, its reply judged, and its tool calls settled.
    pub(crate) async fn step(
        &mut self,
        bundle: Option<&Arc<Interceptors>>,
        tools: &ToolList,
    ) -> Result<Stepped, RunResult> {
        self.before_model();
        let response = self.call_provider(bundle.map(Arc::as_ref), tools).await?;
        let judged = self.judge_reply(bundle.map(Arc::as_ref), response);
        Ok(self.act_on(bundle, judged).await)
    }

    /// The before-model middleware, on the durable history.
    pub(crate) fn before_model(&mut self) {
        for middleware in &self.hooks.before_model {
            middleware(&mut self.history);
        }
    }

    /// A judged reply with tool calls is recorded (one assistant message,
    /// one `assistant` event) and each call settled in order; a reply
    /// without any is handed back, not yet recorded.
    pub(crate) async fn act_on(
        &mut self,
        bundle: Option<&Arc<Interceptors>>,
        judged: Judged,
    ) -> Stepped {
        if judged.tool_calls.is_empty() {
            return Stepped::Answered(judged);
        }
        let Judged {
            content,
            tool_calls,
            veto,
        } = judged;
        let finish_reason = veto.is_some().then_some("vetoed");
        self.history
            .push(Message::assistant(content.clone(), tool_calls.clone()));
        self.bus.emit(|| AgentEvent::Assistant {
            content,
            tool_calls: tool_calls.clone(),
            finish_reason,
        });
        let mut executed = 0;
        for call in &tool_calls {
            if self.settle_call(call, bundle).await {
                executed += 1;
            }
        }
        Stepped::Acted { executed }
    }

    /// The final answer: recorded as the turn's last assistant message,
    /// then through the `output` seam (not for a substitute).
    pub(crate) async fn answer(
        &mut self,
        bundle: Option<&Arc<Interceptors>>,
        judged: Judged,
    ) -> RunResult {
        let Judged { content, veto, .. } = judged;
        let finish_reason = veto.is_some().then_some("vetoed");
        self.history
            .push(Message::assistant(content.clone(), Vec::new()));
        self.finish_answer(bundle.map(Arc::as_ref), content, veto, finish_reason)
            .await
    }

    /// The run a turn ends with when its steps ran out without an answer.
    pub(crate) fn out_of_steps(&self) -> RunResult {
        let error = format!(
            "stopped after {} provider calls without a final answer",
            self.config.max_steps
        );
        RunResult::failed(
            EndReason::MaxSteps {
                steps: self.config.max_steps,
            },
            error,
        )
    }

    /// Context → `provider_request` → the wire, the call carrying the headers
    /// the seam chose. `Err` ends the run (a block or a provider failure).
    pub(crate) async fn call_provider(
        &mut self,
        bundle: Option<&Interceptors>,
        tools: &ToolList,
    ) -> Result<Received, RunResult> {
        self.call_provider_with(bundle, tools, &serde_json::Map::new())
            .await
    }

    /// [`call_provider`](Self::call_provider) with extra call options
    /// (`kwargs`): the envelope the `provider_request` seam sees carries
    /// them, and the call sends them unless a replacement changed them.
    pub(crate) async fn call_provider_with(
        &mut self,
        bundle: Option<&Interceptors>,
        tools: &ToolList,
        kwargs: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Received, RunResult> {
        self.call_id = CALL_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        self.refresh_facts();
        let outgoing = self.outgoing_after_pauses(bundle, tools, kwargs).await?;
        let provider: Arc<dyn Provider> = Arc::clone(&self.provider);
        let model = outgoing
            .model
            .clone()
            .unwrap_or_else(|| provider.model().to_owned());
        if model != provider.model() {
            self.bus.emit(|| AgentEvent::ModelChanged {
                from: provider.model().to_owned(),
                to: model.clone(),
            });
        }
        let call = ProviderCall {
            model: outgoing.model.as_deref(),
            messages: outgoing.messages.as_deref().unwrap_or(&self.history),
            tools: outgoing.tools.as_ref().unwrap_or(tools),
            kwargs: outgoing.kwargs.as_ref().unwrap_or(kwargs),
            headers: outgoing.headers.as_ref(),
        };
        let streamed = self.streaming;
        let mut stream_blocked = None;
        let outcome = if streamed {
            let chain = bundle
                .map(|b| b.stream_chunk.as_slice())
                .filter(|c| !c.is_empty());
            let mut assembler = Assembler::default();
            let mut gate = chain.map_or_else(StreamGate::default, StreamGate::for_chain);
            let this = &*self;
            let mut on_delta = |delta| {
                let Some(text) = assembler.push(delta) else {
                    return;
                };
                match chain {
                    None => this
                        .bus
                        .publish(AgentEvent::AssistantDelta { content: text }),
                    Some(chain) => this.gated_delta(&mut gate, chain, &text, false),
                }
            };
            let streamed = provider.stream_async(&call, &mut on_delta).await;
            if let (Ok(()), Some(chain)) = (&streamed, chain) {
                self.gated_delta(&mut gate, chain, "", true);
            }
            let end = gate.finish();
            if let (Some(edge), Some(chain)) = (end.hold_end, chain) {
                self.publish_hold(chain, edge);
            }
            stream_blocked = end.blocked;
            streamed.map(|()| {
                let mut reply = assembler.finish();
                // What the user was shown is what the reply says: a
                // rewrite (a redaction) of the stream holds for it too.
                if let Some(text) = end.rewritten {
                    reply.content = text;
                }
                reply
            })
        } else {
            provider.complete_async(&call).await
        };
        self.facts.provider_calls_this_turn += 1;
        match outcome {
            Ok(response) => {
                self.charge(&model, response.usage);
                Ok(Received {
                    response,
                    streamed,
                    stream_blocked,
                    model: outgoing.model,
                    headers: outgoing.headers,
                })
            }
            Err(error) => {
                let text = error.to_string();
                Err(RunResult::failed(EndReason::ProviderError(error), text))
            }
        }
    }

    /// Charges one call's tokens to the current source, at `model`.
    pub(crate) fn charge(&mut self, model: &str, usage: Usage) {
        self.facts.input_tokens += usage.input_tokens;
        self.facts.output_tokens += usage.output_tokens;
        let before = self.ledger.cost_usd();
        self.ledger.charge(
            self.source,
            model,
            usage.input_tokens,
            usage.output_tokens,
            &self.prices,
        );
        self.last_call = Some(super::usage::LastCall {
            billed: None,
            charged_to: self.source,
            cost_usd: (self.ledger.cost_usd() - before).max(0.0),
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
        });
        self.refresh_facts();
    }

    /// The pre-provider seams, waiting out the pauses a rate limiter asks
    /// for: each wait is capped at [`MAX_PAUSE`] and shown (`turn_paused`),
    /// then the request is rebuilt from the history and the seams run
    /// again; after [`MAX_PAUSES`] pauses for one provider call the run ends
    /// with one line saying so. A block ends the run.
    pub(super) async fn outgoing_after_pauses(
        &mut self,
        bundle: Option<&Interceptors>,
        tools: &ToolList,
        kwargs: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Outgoing, RunResult> {
        let blocked = |reason, by: Option<&str>| blocked_run(reason, by.map(str::to_owned));
        let mut pauses = 0;
        let mut compacted = false;
        loop {
            match self.outgoing(bundle, tools, kwargs).await {
                Ok(outgoing) => return Ok(outgoing),
                Err(Halt::Blocked(reason, by)) => return Err(blocked(reason, by.as_deref())),
                Err(Halt::Compact {
                    interceptor,
                    reason,
                }) => {
                    if compacted {
                        return Err(blocked(
                            format!("{reason} (asked again right after a compaction)"),
                            Some(&interceptor),
                        ));
                    }
                    // Boxed: the summary call is a provider call, which
                    // comes back here (with a call id of its own: this
                    // call keeps its id when it is offered again).
                    let call = self.call_id;
                    Box::pin(self.compact(bundle, &interceptor, &reason)).await?;
                    self.call_id = call;
                    self.refresh_facts();
                    compacted = true;
                }
                Err(Halt::Paused {
                    interceptor,
                    wait,
                    reason,
                }) => {
                    pauses += 1;
                    if pauses > MAX_PAUSES {
                        return Err(blocked(
                            format!(
                                "{interceptor} paused the turn {MAX_PAUSES} times and asked for more: {reason}"
                            ),
                            Some(&interceptor),
                        ));
                    }
                    let wait = wait.min(MAX_PAUSE);
                    self.bus.emit(|| AgentEvent::TurnPaused {
                        interceptor,
                        wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                        reason,
                    });
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// The `model_response` seam on one reply: a replacement redacts the
    /// text and keeps the tool calls; a block (here, or earlier on the
    /// reply's stream) makes a substitute with no tool calls whose text is
    /// the notice or the reason.
    pub(crate) fn judge_reply(&self, bundle: Option<&Interceptors>, received: Received) -> Judged {
        let Received {
            response,
            streamed,
            stream_blocked,
            ..
        } = received;
        let chain = bundle.map_or(&[][..], |b| b.model_response.as_slice());
        let facts = ReplyFacts {
            tool_calls: response.tool_calls,
            streamed,
        };
        // Observers (which count what a reply cost) see every reply, one a
        // stream gate cut or a gate here blocks included, before any gate.
        let observes = |i: &ModelResponseInterceptor| i.role() == ContentRole::Observes;
        let gates: Vec<ModelResponseInterceptor>;
        let chain = if chain.iter().any(observes) {
            let observers: Vec<_> = chain.iter().filter(|i| observes(i)).cloned().collect();
            self.run_seam(&observers, &facts, &response.content);
            gates = chain.iter().filter(|i| !observes(i)).cloned().collect();
            &gates[..]
        } else {
            chain
        };
        if let Some(block) = stream_blocked {
            return Judged {
                content: shown_for_block(block.reason, block.notice),
                tool_calls: Vec::new(),
                veto: Some(block.by),
            };
        }
        if chain.is_empty() {
            return Judged {
                content: response.content,
                tool_calls: facts.tool_calls,
                veto: None,
            };
        }
        let outcome = self.run_seam(chain, &facts, &response.content);
        let notice = outcome.notices.last().map(|n| n.text.clone());
        if let Some(reason) = outcome.blocked {
            return Judged {
                content: shown_for_block(reason, notice),
                tool_calls: Vec::new(),
                veto: Some(outcome.blocked_by.unwrap_or_default()),
            };
        }
        Judged {
            content: outcome.replaced.unwrap_or(response.content),
            tool_calls: facts.tool_calls,
            veto: None,
        }
    }

    /// True when streaming must be off for this run: a pack gates whole
    /// replies (`model_response` or `output`) but not streamed text, so what
    /// streamed before its verdict could not be taken back. A pack with a
    /// `stream_chunk` interceptor judges the stream itself and keeps it on.
    /// Says so once — one log line naming each such pack and the seams it
    /// gates, and one `streaming_downgraded` event — and again only when
    /// the packs change (a hot swap). `--stream-policy allow` (and a run
    /// that does not stream) keeps streaming as it is.
    pub(super) fn downgrade(&mut self, bundle: Option<&Interceptors>) -> bool {
        let Some(bundle) = bundle.filter(|_| self.config.stream) else {
            return false;
        };
        let (unsafe_packs, which) = whole_reply_gates(bundle);
        let allow = self.config.stream_policy == StreamPolicy::Allow;
        if unsafe_packs.is_empty() {
            return false;
        }
        // A relayed exchange says nothing per request: the gateway said it
        // once, at start-up.
        if self.relay.is_none() && self.stream_said.as_ref() != Some(&unsafe_packs) {
            if allow {
                tracing::warn!(
                    "streaming left on: {} (a block cannot take back text already streamed)",
                    which.join("; ")
                );
            } else {
                tracing::warn!(
                    "streaming disabled: {} (--stream-policy allow keeps it on)",
                    which.join("; ")
                );
                let packs = unsafe_packs.clone();
                self.bus.emit(|| AgentEvent::StreamingDowngraded { packs });
            }
            self.stream_said = Some(unsafe_packs);
        }
        !allow
    }

    /// Runs the two pre-provider seams. With no bundle, or both chains
    /// empty, nothing runs and nothing is emitted. Nothing is copied either:
    /// when the context seam keeps the history, the history itself is moved
    /// into the envelope for the `provider_request` chain and moved back.
    async fn outgoing(
        &mut self,
        bundle: Option<&Interceptors>,
        tools: &ToolList,
        kwargs: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Outgoing, Halt> {
        let Some(bundle) =
            bundle.filter(|b| !b.context.is_empty() || !b.provider_request.is_empty())
        else {
            return Ok(Outgoing::default());
        };
        let context = self.run_seam(&bundle.context, &(), &self.history);
        if let Some(reason) = context.blocked {
            return Err(Halt::Blocked(reason, context.blocked_by));
        }
        if bundle.provider_request.is_empty() {
            return Ok(Outgoing {
                messages: context.replaced,
                ..Outgoing::default()
            });
        }
        let lent = context.replaced.is_none();
        let (base_model, surface) = match &self.relay {
            Some(relay) => (relay.model.clone(), relay.headers.clone()),
            None => (
                self.provider.model().to_owned(),
                self.provider.request_headers(),
            ),
        };
        let has_surface = surface.is_some();
        let envelope = ProviderRequest {
            model: base_model.clone(),
            messages: context
                .replaced
                .unwrap_or_else(|| std::mem::take(&mut self.history)),
            tools: tools.clone(),
            kwargs: kwargs.clone(),
            headers: surface,
        };
        let request = self
            .run_asking_seam(&bundle.provider_request, &(), &envelope)
            .await;
        let halt = match (request.blocked, request.pause, request.compact) {
            (Some(reason), _, _) => Some(Halt::Blocked(reason, request.blocked_by.clone())),
            (None, Some(pause), _) => {
                let (interceptor, wait, reason) = *pause;
                Some(Halt::Paused {
                    interceptor,
                    wait,
                    reason,
                })
            }
            (None, None, Some(compact)) => {
                let (interceptor, reason) = *compact;
                Some(Halt::Compact {
                    interceptor,
                    reason,
                })
            }
            (None, None, None) => None,
        };
        let (sent, keep) = match request.replaced {
            Some(replaced) => (replaced, Some(envelope.messages)),
            None if lent => {
                let ProviderRequest { messages, .. } = envelope;
                self.history = messages;
                return halt.map_or_else(|| Ok(Outgoing::default()), Err);
            }
            None => (envelope, None),
        };
        if let Some(history) = keep.filter(|_| lent) {
            self.history = history;
        }
        if let Some(halt) = halt {
            return Err(halt);
        }
        let model = (sent.model != base_model).then_some(sent.model);
        Ok(Outgoing {
            messages: Some(sent.messages),
            model,
            tools: Some(sent.tools),
            kwargs: Some(sent.kwargs),
            // Without a surface a header replacement is a no-op.
            headers: sent.headers.filter(|_| has_surface),
        })
    }
}
