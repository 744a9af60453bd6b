//! One exchange relayed for a client that runs its own agent: the seams
//! of a turn applied to a request and its reply, without executing
//! anything. A gateway (`chimera serve`) hands the client's conversation
//! here and gets back what to answer.
//!
//! ```text
//!  client's messages ─▶ tool_result (each tool result in them, once per session)
//!                    ─▶ context ─▶ provider_request ─▶ the upstream (streamed or not)
//!                    ─▶ stream_chunk (each delta) ─▶ model_response
//!  tool calls        ─▶ tool_call (each: refused, rewritten with its id kept, or passed)
//!  an answer         ─▶ output (gate retries ask the upstream again)
//! ```
//!
//! It is the loop's own machinery — [`call_provider`](AgentSession::call_provider),
//! `judge_reply`, the tool gate, `finish_answer` — so a pack behaves the
//! same behind the gateway as inside `chimera run`; what differs is that
//! tools are the client's to run, so a step ends where the loop would
//! execute them.

use super::outcome::{EndReason, Judged};
use super::session::AgentSession;
use super::tool_step::Gate;
use super::usage::Ledger;
use crate::interception::Interceptors;
use crate::providers::{ProviderError, Usage};
use crate::types::{Message, Role, ToolCall, ToolList, ToolResult};
use std::sync::Arc;

/// One request to relay.
#[derive(Debug, Clone, Default)]
pub struct Relay {
    /// The client's conversation, as it sent it.
    pub messages: Vec<Message>,
    /// The tools the client offers the model.
    pub tools: ToolList,
    /// Every other option of the request (`temperature`, `max_tokens`, …),
    /// sent on as given unless a `provider_request` replacement changes it.
    pub kwargs: serde_json::Map<String, serde_json::Value>,
    /// The client asked for a stream: text is published
    /// (`assistant_delta`) as the `stream_chunk` seam releases it.
    pub stream: bool,
}

/// How a relayed exchange ended.
#[derive(Debug, Clone)]
pub enum Relayed {
    /// The reply for the client.
    Reply(Reply),
    /// A seam before the upstream refused the request: nothing was sent.
    Blocked {
        /// The block's reason.
        reason: String,
        /// The interceptor that blocked (`<pack>/<name>`), when one did.
        by: Option<String>,
    },
    /// The upstream failed (after the transport's retries).
    Failed(ProviderError),
}

/// A judged reply.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    /// Its text: the model's (perhaps redacted), or a gate's notice.
    pub content: String,
    /// The tool calls the client may run, after the `tool_call` seam (a
    /// rewritten call keeps its id).
    pub tool_calls: Vec<ToolCall>,
    /// The calls the `tool_call` seam refused, each with the line saying
    /// why (`Blocked by interceptor: …`).
    pub refused: Vec<(ToolCall, String)>,
    /// The interceptor whose veto `content` is, when a gate refused the
    /// model's text (`stream_chunk`, `model_response` or `output`).
    pub vetoed_by: Option<String>,
    /// Tokens the upstream reported for this exchange (gate retries
    /// included).
    pub usage: Usage,
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

    /// Relays one exchange (see the module docs) as the conversation's
    /// next turn. The session's facts and ledger carry what the
    /// conversation did before; the history becomes the client's messages,
    /// with each tool result as the `tool_result` seam left it.
    pub async fn relay(&mut self, relay: Relay) -> Relayed {
        self.facts.turn_index = self.turns;
        self.turns += 1;
        self.facts.provider_calls_this_turn = 0;
        self.facts.tool_calls_this_turn = 0;
        let bundle = self.effective_interceptors();
        let Relay {
            messages,
            tools,
            kwargs,
            stream,
        } = relay;
        self.history = messages;
        if let Some(bundle) = bundle.as_deref() {
            self.judge_tool_results(bundle);
        }
        self.config.stream = stream;
        self.streaming = stream && !self.downgrade(bundle.as_deref());
        let used_before = self.ledger.total();
        let received = match self
            .call_provider_with(bundle.as_deref(), &tools, &kwargs)
            .await
        {
            Ok(received) => received,
            Err(run) => return ended(run),
        };
        let judged = self.judge_reply(bundle.as_deref(), received);
        let mut reply = if judged.tool_calls.is_empty() || judged.vetoed() {
            match self.relay_answer(bundle.as_ref(), judged).await {
                Ok(reply) => reply,
                Err(end) => return end,
            }
        } else {
            self.relay_calls(bundle.as_ref(), judged).await
        };
        let spent = self.ledger.total();
        reply.usage = Usage {
            input_tokens: spent.input_tokens.saturating_sub(used_before.input_tokens),
            output_tokens: spent
                .output_tokens
                .saturating_sub(used_before.output_tokens),
        };
        Relayed::Reply(reply)
    }

    /// A reply that proposes tool calls: each passes the tool gate (the
    /// `tool_call` seam; an operator's question takes its default answer).
    async fn relay_calls(&mut self, bundle: Option<&Arc<Interceptors>>, judged: Judged) -> Reply {
        let mut reply = Reply {
            content: judged.content,
            ..Reply::default()
        };
        for call in judged.tool_calls {
            self.facts.tool_calls_this_turn += 1;
            match self.gate(&call, bundle.map(Arc::as_ref)).await {
                Gate::Run(effective, _) => reply.tool_calls.push(effective),
                Gate::Refuse(effective, line) => reply.refused.push((effective, line)),
            }
        }
        reply
    }

    /// A final answer: the `output` seam, gate retries included.
    async fn relay_answer(
        &mut self,
        bundle: Option<&Arc<Interceptors>>,
        judged: Judged,
    ) -> Result<Reply, Relayed> {
        let Judged { content, veto, .. } = judged;
        self.history
            .push(Message::assistant(content.clone(), Vec::new()));
        let finish_reason = veto.is_some().then_some("vetoed");
        let run = self
            .finish_answer(bundle.map(Arc::as_ref), content, veto, finish_reason)
            .await;
        match run.reason {
            EndReason::Completed | EndReason::OutputBlocked { .. } => Ok(Reply {
                content: run.output,
                vetoed_by: run.vetoed_by,
                ..Reply::default()
            }),
            _ => Err(ended(run)),
        }
    }

    /// Runs the `tool_result` seam over each tool result in the history,
    /// the call it answers (from the assistant message before it) leading;
    /// a withheld or rewritten result replaces the client's text.
    fn judge_tool_results(&mut self, bundle: &Interceptors) {
        if bundle.tool_result.is_empty() {
            return;
        }
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
            let result = ToolResult::ok(message.content.clone());
            let judged = self.result_seam(bundle, &call, result);
            let text = judged.transcript_text();
            if text != self.history[index].content {
                self.history[index].content = text;
                self.history[index].blocks.clear();
            }
        }
    }
}

/// The relay's end for a run that ended before an answer.
fn ended(run: super::RunResult) -> Relayed {
    match run.reason {
        EndReason::ProviderError(error) => Relayed::Failed(error),
        EndReason::InterceptorBlocked { reason } | EndReason::OutputBlocked { reason } => {
            Relayed::Blocked {
                reason,
                by: run.vetoed_by,
            }
        }
        _ => Relayed::Blocked {
            reason: run.output,
            by: run.vetoed_by,
        },
    }
}
