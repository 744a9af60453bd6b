//! One exchange relayed for a client that runs its own agent: the seams
//! of a turn applied to views of a request and of its reply, without
//! executing anything. A gateway (`chimera serve`) reads the client's
//! document, hands the views here, writes back what the seams changed,
//! and forwards the rest as it came.
//!
//! ```text
//!  begin_exchange           the turn's counters; the merged chains, once
//!  judge_request  views ─▶ tool_result (each tool result in the history)
//!                       ─▶ context ─▶ provider_request (pauses waited)
//!                       ─▶ the request as the seams left it, or a refusal
//!  (the gateway forwards it and reads the reply)
//!  charge_upstream          what the upstream said the call cost
//!  stream_gate / offer      each streamed text ─▶ stream_chunk
//!  judge_choice   a reply  ─▶ model_response ─▶ tool_call (each proposed call:
//!                             passed, rewritten with its id kept, or refused)
//!                          ─▶ output, for an answer (gate retries ask the
//!                             upstream again through the session's provider)
//! ```
//!
//! It is the loop's own machinery — the pre-provider seams of
//! [`call_provider`](AgentSession::call_provider), `judge_reply`, the tool
//! gate, `finish_answer` — so a pack behaves the same behind the gateway
//! as inside `chimera run`; what differs is that tools are the client's to
//! run, so a reply ends where the loop would execute them, and that the
//! whole history is the client's to write: every message of every role is
//! judged on every request (the session view says `"relayed":true`).

use super::outcome::{EndReason, Judged};
use super::react::Received;
use super::session::{AgentSession, RelaySurface};
use super::stream::{Offered, StreamBlock, StreamGate};
use super::tool_step::Gate;
use super::usage::Ledger;
use crate::interception::Interceptors;
use crate::providers::{ModelResponse, Usage};
use crate::types::{Headers, Message, Role, ToolCall, ToolList, ToolResult};
use std::sync::Arc;

/// A request as the seams see it: views of the client's document.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RelayRequest {
    /// The model asked for.
    pub model: String,
    /// The whole conversation, every role, as the client sent it.
    pub messages: Vec<Message>,
    /// The tools the client offers the model (names, descriptions, schemas).
    pub tools: ToolList,
    /// Every other option of the request (`temperature`, `max_tokens`, …).
    pub kwargs: serde_json::Map<String, serde_json::Value>,
    /// The headers that go upstream (the client's, without its key), for
    /// `provider_request` interceptors to read and change.
    pub headers: Headers,
}

/// Why a relayed request or reply was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The block's reason.
    pub reason: String,
    /// The interceptor that blocked (`<pack>/<name>`), when one did.
    pub by: Option<String>,
}

/// One exchange under way: the chains merged when it began, used by every
/// seam of the exchange (a hot swap takes effect at the next one).
#[derive(Clone, Default)]
pub struct Exchange {
    bundle: Option<Arc<Interceptors>>,
    /// The chains without the `model_response` observers, for the
    /// upstream's reply: its observers see the call once, when it ends
    /// ([`AgentSession::end_call`]), not once per choice.
    replies: Option<Arc<Interceptors>>,
}

/// How the upstream call of a relayed exchange ended, for what it is
/// charged (what `model_response` observers read in `last_call`'s
/// `billed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallEnd {
    /// It never left: a gate blocked it, or the upstream could not be
    /// reached. Nothing was billed.
    NotSent,
    /// The upstream refused it (a status that is not a success): nothing
    /// was billed.
    Refused,
    /// It went, and what the upstream billed is not known: the reply broke
    /// off, could not be read, or reported no usage.
    Unknown,
    /// The upstream reported its usage, charged by
    /// [`AgentSession::charge_upstream`].
    Billed,
}

impl CallEnd {
    /// How `last_call` says it: `none`, `unknown` or `reported`.
    fn billed(self) -> &'static str {
        match self {
            CallEnd::NotSent | CallEnd::Refused => "none",
            CallEnd::Unknown => "unknown",
            CallEnd::Billed => "reported",
        }
    }
}

impl Exchange {
    /// True when no interceptor judges streamed text: a stream passes as
    /// it comes.
    #[must_use]
    pub fn streams_unjudged(&self) -> bool {
        self.bundle
            .as_ref()
            .is_none_or(|bundle| bundle.stream_chunk.is_empty())
    }
}

/// One choice of a reply, as the upstream gave it.
#[derive(Debug, Clone, Default)]
pub struct Choice {
    /// Its text (for a stream: the text as the `stream_chunk` seam left
    /// it, everything shown and anything still held).
    pub content: String,
    /// The tool calls it proposes, as proposed.
    pub tool_calls: Vec<ToolCall>,
    /// The `stream_chunk` seam blocked its stream.
    pub stream_blocked: Option<StreamBlock>,
    /// It was streamed.
    pub streamed: bool,
}

/// What became of one proposed tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum CallVerdict {
    /// The client may run it: as proposed, or as the `tool_call` seam
    /// rewrote it (the id is always the proposed one).
    Pass(ToolCall),
    /// Refused, with the line saying why (`Blocked by interceptor: …`).
    Refused(ToolCall, String),
}

/// A judged choice.
#[derive(Debug, Clone, Default)]
pub struct JudgedChoice {
    /// Its text: the model's (perhaps rewritten), or a gate's notice.
    pub content: String,
    /// The interceptor whose veto `content` is, when a gate refused the
    /// model's text (`stream_chunk`, `model_response` or `output`).
    pub vetoed_by: Option<String>,
    /// Each proposed call's fate, in order (none after a veto).
    pub calls: Vec<CallVerdict>,
    /// An `output` gate retry replaced the answer with another upstream
    /// reply's text.
    pub retried: bool,
}

impl JudgedChoice {
    /// The calls the client may run.
    pub fn passed(&self) -> impl Iterator<Item = &ToolCall> {
        self.calls.iter().filter_map(|verdict| match verdict {
            CallVerdict::Pass(call) => Some(call),
            CallVerdict::Refused(..) => None,
        })
    }
}

/// What a conversation carries from one relayed exchange to the next:
/// its turns so far and what it was charged. A gateway keeps one per
/// conversation and resumes a fresh session from it for each request, so
/// budgets and turn counts span the conversation while concurrent
/// requests of one conversation never wait for each other.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Carried {
    turns: u64,
    input_tokens: u64,
    output_tokens: u64,
    ledger: Ledger,
}

impl Carried {
    /// Adds what a session resumed from `start` did until it was `end`
    /// (so two requests relayed at once both count).
    pub fn absorb(&mut self, start: &Carried, end: &Carried) {
        self.turns += end.turns.saturating_sub(start.turns);
        self.input_tokens += end.input_tokens.saturating_sub(start.input_tokens);
        self.output_tokens += end.output_tokens.saturating_sub(start.output_tokens);
        self.ledger.add_since(&end.ledger, &start.ledger);
    }

    /// The turns relayed so far.
    #[must_use]
    pub fn turns(&self) -> u64 {
        self.turns
    }

    /// The charges so far.
    #[must_use]
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }
}

impl AgentSession {
    /// Resumes a conversation: its turns and charges become this
    /// session's, so the next relayed exchange is its next turn.
    pub fn resume(&mut self, carried: &Carried) {
        self.turns = carried.turns;
        self.facts.input_tokens = carried.input_tokens;
        self.facts.output_tokens = carried.output_tokens;
        self.ledger = carried.ledger.clone();
    }

    /// What this session carries into the conversation's next exchange.
    #[must_use]
    pub fn carried(&self) -> Carried {
        Carried {
            turns: self.turns,
            input_tokens: self.facts.input_tokens,
            output_tokens: self.facts.output_tokens,
            ledger: self.ledger.clone(),
        }
    }

    /// Begins the conversation's next exchange: a new turn, and the chains
    /// every seam of it runs (merged once).
    pub fn begin_exchange(&mut self) -> Exchange {
        self.facts.turn_index = self.turns;
        self.turns += 1;
        self.facts.provider_calls_this_turn = 0;
        self.facts.tool_calls_this_turn = 0;
        self.unjudged = std::sync::OnceLock::new();
        self.relay.get_or_insert_with(RelaySurface::default);
        let bundle = self.effective_interceptors();
        self.facts_read = bundle.is_some();
        // The facts are rendered where a chain first reads them: the
        // history's tool results (when a pack judges them), then the
        // request once its call has a number.
        let observes = |i: &crate::interception::ModelResponseInterceptor| {
            i.role() == crate::interception::ContentRole::Observes
        };
        let replies = match &bundle {
            Some(all) if all.model_response.iter().any(observes) => {
                let mut judging = Interceptors::clone(all);
                judging.model_response.retain(|i| !observes(i));
                Some(Arc::new(judging))
            }
            other => other.clone(),
        };
        Exchange { bundle, replies }
    }

    /// Ends the exchange's upstream call, numbered `call` (what the
    /// session said when its request was judged): the `model_response`
    /// observers see it once, with `last_call` saying what it was charged
    /// (`charge`, what [`charge_upstream`](Self::charge_upstream) left in
    /// `last_call`; nothing when `end` is not [`CallEnd::Billed`]) and
    /// how (`"billed"`: `reported`, `none` or `unknown`), and the reply's
    /// text empty. So a pack that reserved what the call would cost when
    /// it was judged settles it however the exchange ended: answered, the
    /// client gone, refused upstream, or blocked by a gate after it.
    pub fn end_call(
        &mut self,
        exchange: &Exchange,
        call: u64,
        charge: Option<super::usage::LastCall>,
        end: CallEnd,
    ) {
        let Some(bundle) = exchange.bundle.as_deref() else {
            return;
        };
        let observers: Vec<_> = bundle
            .model_response
            .iter()
            .filter(|i| i.role() == crate::interception::ContentRole::Observes)
            .cloned()
            .collect();
        if observers.is_empty() || call == 0 {
            return;
        }
        let mut last = match (end, charge) {
            (CallEnd::Billed, Some(charge)) => charge,
            _ => super::usage::LastCall::NOTHING,
        };
        last.billed = Some(end.billed());
        self.call_id = call;
        self.last_call = Some(last);
        self.refresh_facts();
        let facts = crate::interception::ReplyFacts {
            tool_calls: Vec::new(),
            streamed: false,
        };
        self.run_seam(&observers, &facts, &String::new());
    }

    /// The request seams on `request` (see the module docs): the request
    /// as they left it — every part a replacement did not touch is the
    /// very same value — or the refusal of the first that blocked.
    ///
    /// # Errors
    ///
    /// [`Refused`] when a seam blocked (or a rate limiter's pauses ran out).
    pub async fn judge_request(
        &mut self,
        exchange: &Exchange,
        request: RelayRequest,
    ) -> Result<RelayRequest, Refused> {
        let RelayRequest {
            model,
            messages,
            tools,
            kwargs,
            headers,
        } = request;
        self.history = messages;
        let Some(bundle) = exchange.bundle.as_deref() else {
            return Ok(RelayRequest {
                model,
                messages: std::mem::take(&mut self.history),
                tools,
                kwargs,
                headers,
            });
        };
        self.judge_tool_results(bundle);
        // A provider call of its own, as the loop's are: a request paused
        // and offered again keeps its number.
        self.call_id =
            super::react::CALL_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        self.relay = Some(RelaySurface {
            model: model.clone(),
            headers: Some(headers.clone()),
        });
        self.refresh_facts();
        let outgoing = self
            .outgoing_after_pauses(Some(bundle), &tools, &kwargs)
            .await;
        let outgoing = outgoing.map_err(|run| Refused {
            reason: run.output,
            by: run.vetoed_by,
        })?;
        Ok(RelayRequest {
            model: outgoing.model.unwrap_or(model),
            messages: outgoing.messages.unwrap_or_else(|| self.history.clone()),
            tools: outgoing.tools.unwrap_or(tools),
            kwargs: outgoing.kwargs.unwrap_or(kwargs),
            headers: outgoing.headers.unwrap_or(headers),
        })
    }

    /// Records in the audit log (when one listens) that the parts named
    /// by `parts` (`image ×2, document`) of what passed `seam` were not
    /// judged: no pack reads them.
    pub fn note_unjudged(&self, seam: &'static str, parts: &str) {
        if parts.is_empty() || !self.bus.is_audited() {
            return;
        }
        self.bus
            .publish_audit(gateway_record(seam, format!("not judged: {parts}")));
    }

    /// What records, in the audit log (when one listens), that the gateway
    /// retried its upstream call itself: called with the status it retried
    /// and which retry it is.
    pub fn retry_recorder(&self) -> impl Fn(u16, u32) + Send + Sync + 'static {
        let bus = self.bus.clone();
        move |status, attempt| {
            if !bus.is_audited() {
                return;
            }
            bus.publish_audit(gateway_record(
                "provider_request",
                format!("the upstream answered {status}: retry {attempt}"),
            ));
        }
    }

    /// Charges one upstream call of this exchange: `usage` at `model`.
    pub fn charge_upstream(&mut self, model: &str, usage: Usage) {
        self.facts.provider_calls_this_turn += 1;
        self.charge(model, usage);
    }

    /// A stream gate for the exchange's `stream_chunk` chain (one per
    /// streamed text: each choice, each text block).
    #[must_use]
    pub fn stream_gate(&self, exchange: &Exchange) -> StreamGate {
        exchange
            .bundle
            .as_deref()
            .map_or_else(StreamGate::default, |b| {
                StreamGate::for_chain(&b.stream_chunk)
            })
    }

    /// Offers `delta` (or, with `last`, what is held) to the exchange's
    /// `stream_chunk` chain through `gate`: what to release, as a range of
    /// the gate's text. Holds, retracts and notices are published as in
    /// the loop; the released text is the caller's to send.
    pub fn offer(
        &self,
        exchange: &Exchange,
        gate: &mut StreamGate,
        delta: &str,
        last: bool,
    ) -> Offered {
        match exchange
            .bundle
            .as_deref()
            .map(|b| b.stream_chunk.as_slice())
        {
            Some(chain) if !chain.is_empty() => self.stream_offer(gate, chain, delta, last),
            _ => gate.offer(delta, last, |_, _| {
                crate::interception::ChainOutcome::default()
            }),
        }
    }

    /// Ends a stream gate: a hold still under way ends (`ended`); the
    /// block, if any, and the rewritten text.
    #[must_use]
    pub fn finish_stream(&self, exchange: &Exchange, gate: StreamGate) -> super::StreamEnd {
        let mut end = gate.finish();
        if let (Some(edge), Some(chain)) = (
            end.hold_end.take(),
            exchange
                .bundle
                .as_deref()
                .map(|b| b.stream_chunk.as_slice()),
        ) {
            self.publish_hold(chain, edge);
        }
        end
    }

    /// Publishes a hold's start that [`offer`](Self::offer) returned (after
    /// the text it released was sent).
    pub fn publish_hold_edge(&self, exchange: &Exchange, edge: super::stream::HoldEdge) {
        if let Some(bundle) = exchange.bundle.as_deref() {
            self.publish_hold(&bundle.stream_chunk, edge);
        }
    }

    /// Whether a streamed reply must be held whole until it is judged:
    /// `policy` is `Downgrade` and a pack gates whole replies
    /// (`model_response`, `output`) without judging streamed text (said
    /// once per pack set: one log line, one `streaming_downgraded` event).
    pub fn hold_stream(&mut self, exchange: &Exchange, policy: super::StreamPolicy) -> bool {
        self.config.stream = true;
        self.config.stream_policy = policy;
        self.downgrade(exchange.bundle.as_deref())
    }

    /// Text the upstream wrote outside a reply (an error's message) judged
    /// as a reply's text is, by `model_response` and then `output`: the
    /// text as they left it, or the notice of the first that blocked. A
    /// retry asked for by `output` is not made (an error is not an answer
    /// to ask again).
    #[must_use]
    pub fn judge_text(&self, exchange: &Exchange, text: &str) -> String {
        let Some(bundle) = exchange.replies.as_deref() else {
            return text.to_owned();
        };
        let facts = crate::interception::ReplyFacts {
            tool_calls: Vec::new(),
            streamed: false,
        };
        let mut current = text.to_owned();
        let reply = self.run_seam(&bundle.model_response, &facts, &current);
        if let Some(reason) = reply.blocked {
            return reply.notices.last().map_or(reason, |n| n.text.clone());
        }
        if let Some(replaced) = reply.replaced {
            current = replaced;
        }
        let output = self.run_seam(&bundle.output, &(), &current);
        if let Some(reason) = output.blocked {
            return output.notices.last().map_or(reason, |n| n.text.clone());
        }
        output.replaced.unwrap_or(current)
    }

    /// The reply seams on one choice (see the module docs).
    pub async fn judge_choice(&mut self, exchange: &Exchange, choice: Choice) -> JudgedChoice {
        let bundle = exchange.bundle.clone();
        let received = Received::relayed(
            ModelResponse {
                content: choice.content,
                tool_calls: choice.tool_calls,
                usage: Usage::default(),
            },
            choice.streamed,
            choice.stream_blocked,
        );
        let judged = self.judge_reply(exchange.replies.as_deref(), received);
        if judged.tool_calls.is_empty() || judged.vetoed() {
            self.relay_answer(bundle.as_ref(), judged).await
        } else {
            self.relay_calls(bundle.as_ref(), judged).await
        }
    }

    /// A reply that proposes tool calls: each passes the tool gate (the
    /// `tool_call` seam; an operator's question takes its default answer).
    async fn relay_calls(
        &mut self,
        bundle: Option<&Arc<Interceptors>>,
        judged: Judged,
    ) -> JudgedChoice {
        // The text beside the calls is what the client shows its user: it
        // passes the output seam too (no gate retry: it is no answer).
        let content = match bundle
            .map(|b| b.output.as_slice())
            .filter(|c| !c.is_empty())
        {
            Some(chain) if !judged.content.is_empty() => {
                let output = self.run_seam(chain, &(), &judged.content);
                match output.blocked {
                    Some(reason) => output.notices.last().map_or(reason, |n| n.text.clone()),
                    None => output.replaced.unwrap_or(judged.content),
                }
            }
            _ => judged.content,
        };
        let mut choice = JudgedChoice {
            content,
            ..JudgedChoice::default()
        };
        for call in judged.tool_calls {
            self.facts.tool_calls_this_turn += 1;
            choice
                .calls
                .push(match self.gate(&call, bundle.map(Arc::as_ref)).await {
                    Gate::Run(effective, _) => CallVerdict::Pass(effective),
                    Gate::Refuse(effective, line) => CallVerdict::Refused(effective, line),
                });
        }
        choice
    }

    /// A final answer: the `output` seam, gate retries included. A run
    /// that ends otherwise (a retry's upstream call failed) keeps the text
    /// the client would have had, vetoed by the gate that asked.
    async fn relay_answer(
        &mut self,
        bundle: Option<&Arc<Interceptors>>,
        judged: Judged,
    ) -> JudgedChoice {
        let Judged { content, veto, .. } = judged;
        self.history
            .push(Message::assistant(content.clone(), Vec::new()));
        let finish_reason = veto.is_some().then_some("vetoed");
        let calls_before = self.facts.provider_calls_this_turn;
        let run = self
            .finish_answer(bundle.map(Arc::as_ref), content, veto, finish_reason)
            .await;
        let retried = self.facts.provider_calls_this_turn > calls_before;
        match run.reason {
            EndReason::Completed | EndReason::OutputBlocked { .. } => JudgedChoice {
                content: run.output,
                vetoed_by: run.vetoed_by,
                calls: Vec::new(),
                retried,
            },
            _ => JudgedChoice {
                vetoed_by: Some(run.vetoed_by.unwrap_or_default()),
                content: run.output,
                calls: Vec::new(),
                retried,
            },
        }
    }

    /// Runs the `tool_result` seam over each tool result in the history,
    /// the call it answers (from the assistant message before it) leading;
    /// a withheld or rewritten result replaces the client's text.
    fn judge_tool_results(&mut self, bundle: &Interceptors) {
        if bundle.tool_result.is_empty() {
            return;
        }
        // Read as they stand before this request's call has a number.
        self.refresh_facts();
        for index in 0..self.history.len() {
            let message = &self.history[index];
            if message.role != Role::Tool {
                continue;
            }
            let id = message.tool_call_id.clone().unwrap_or_default();
            let call = self.history[..index]
                .iter()
                .rev()
                .filter(|m| m.role == Role::Assistant)
                .flat_map(|m| m.tool_calls.iter())
                .find(|c| c.id == id)
                .cloned()
                .unwrap_or_else(|| ToolCall {
                    id: id.clone(),
                    name: String::new(),
                    arguments: crate::types::Arguments::empty(),
                });
            // A result of several parts: each text part is judged on its
            // own, so a rewrite lands where its text is.
            if message.blocks.is_empty() {
                let text = message.content.clone();
                if let Some(judged) = self.judged_result(bundle, &call, text) {
                    self.history[index].content = judged;
                }
            } else {
                for part in 0..message.blocks.len() {
                    let block = &self.history[index].blocks[part];
                    if block.kind != "text" {
                        continue;
                    }
                    let text = block.text.clone();
                    if let Some(judged) = self.judged_result(bundle, &call, text) {
                        self.history[index].blocks[part].text = judged;
                    }
                }
            }
        }
    }

    /// The `tool_result` seam on one text of a result of `call`: its new
    /// text, when the seam changed it.
    fn judged_result(
        &self,
        bundle: &Interceptors,
        call: &ToolCall,
        text: String,
    ) -> Option<String> {
        let judged = self.result_seam(bundle, call, ToolResult::ok(text.clone()));
        let after = judged.transcript_text();
        (after != text).then_some(after)
    }
}

/// An audit record of the gateway's own (an `allowed` line of interceptor
/// `gateway` on `seam`, saying `reason`).
fn gateway_record(seam: &'static str, reason: String) -> crate::interception::AuditRecord {
    crate::interception::AuditRecord {
        event: crate::interception::InterceptorEvent {
            seam,
            decision: crate::interception::EventDecision::Allowed,
            reason,
            tool_name: String::new(),
            call_id: String::new(),
            interceptor: "gateway".to_owned(),
            monitor: false,
        },
        from_pack: false,
        changes: None,
        depth: 0,
        parent_call_id: None,
    }
}
