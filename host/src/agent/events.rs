//! The observational event bus: subscribers watch, they cannot change what
//! happens. Carries the transcript events and the interceptor events.

use super::usage::SourceUsage;
use crate::interception::AuditRecord;
use crate::interception::InterceptorEvent;
use crate::types::ToolCall;
use serde::Serialize;
use std::sync::{Arc, RwLock};

/// Something that happened, as the `--json` transcript prints it (one object
/// per line, tagged by `type`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A user turn began.
    User {
        /// What the user said.
        content: String,
    },
    /// The model answered (tool calls as it proposed them).
    Assistant {
        /// The reply's text (empty when it only calls tools).
        content: String,
        /// The calls it proposed, before any seam changed them.
        tool_calls: Vec<ToolCall>,
        /// `vetoed` when the `model_response` or `stream_chunk` seam blocked
        /// the reply and this is its substitute (no tool calls, the notice
        /// or the reason as text); absent otherwise.
        #[serde(skip_serializing_if = "Option::is_none")]
        finish_reason: Option<&'static str>,
    },
    /// A user-facing notice an interceptor attached to its decision. Shown
    /// to the user; never sent to the model.
    Notice {
        /// The seam the interceptor ran on.
        seam: &'static str,
        /// Its display name (`<pack>/<name>`).
        interceptor: String,
        /// The notice.
        text: String,
    },
    /// A `provider_request` interceptor (a rate limiter) paused the turn:
    /// the host waits, then rebuilds the request and runs the seams again.
    TurnPaused {
        /// The interceptor (`<pack>/<name>`).
        interceptor: String,
        /// How long the turn waits (capped by the host), in milliseconds.
        wait_ms: u64,
        /// Why.
        reason: String,
    },
    /// A compaction started or finished: a `provider_request` interceptor
    /// (a context-window gate) asked for the conversation to be shortened.
    Compaction {
        /// `started` or `finished`.
        phase: &'static str,
        /// The interceptor that asked (`<pack>/<name>`).
        interceptor: String,
        /// Why it asked.
        reason: String,
        /// Messages replaced by the summary.
        summarised: usize,
        /// Messages kept as they were (the last turns).
        kept: usize,
    },
    /// A `provider_request` interceptor sent this call to another model (a
    /// budget gate downgrading); the `interceptor` event before it names
    /// which one.
    ModelChanged {
        /// The model the provider would have called.
        from: String,
        /// The model called instead.
        to: String,
    },
    /// An interceptor or the permission policy (`--ask`) asks the operator
    /// (a terminal prompt, an answers file, `--yes`, `--no`).
    ApprovalRequested {
        /// The seam it runs on; `permission` for the permission policy.
        seam: &'static str,
        /// Its display name (`<pack>/<name>`); `permission-policy` for the
        /// permission policy.
        interceptor: String,
        /// What it asks about: the tool name, or `provider request`.
        subject: String,
        /// The question.
        prompt: String,
        /// The choices offered.
        choices: Vec<String>,
    },
    /// The operator answered (`allow`, `reject` or `edit`).
    ApprovalAnswered {
        /// The seam.
        seam: &'static str,
        /// The asking interceptor.
        interceptor: String,
        /// The answer.
        answer: &'static str,
        /// What was asked about (the question's `subject`).
        subject: String,
        /// Where the answer came from ([`Approver::source`](super::Approver::source):
        /// `terminal`, `no_terminal`, `approvals_file`, `yes`, `no`, or
        /// what an embedder's approver says).
        source: String,
    },
    /// An `output` interceptor asked the model again: the request carries
    /// exactly the current answer and this feedback.
    GateRetry {
        /// The interceptor that asked (`<pack>/<name>`).
        interceptor: String,
        /// Which of its retries this is (1-based).
        attempt: u32,
        /// Its bound.
        max: u32,
        /// The feedback sent as the user message.
        feedback: String,
    },
    /// The `stream_chunk` seam blocked a stream after some of it was shown:
    /// a display should take back the released text. Nothing more of the
    /// turn's stream is published.
    StreamRetract {
        /// Bytes of reply text already released when the block came.
        released: usize,
        /// The block reason.
        reason: String,
    },
    /// A `stream_chunk` gate started holding streamed text beyond the
    /// ordinary trailing-word lag (held text that spans a separator: a
    /// phrase that may become a match). A display may show "checking…"
    /// until the `stream_hold_end` that follows.
    StreamHold {
        /// The holding interceptor (`<pack>/<name>`).
        gate: String,
        /// Bytes held.
        held: usize,
    },
    /// The hold a `stream_hold` announced ended.
    StreamHoldEnd {
        /// The interceptor that held (`<pack>/<name>`).
        gate: String,
        /// Bytes held when it ended.
        held: usize,
        /// `released` (the gate let the text go), `blocked` (the stream was
        /// blocked) or `ended` (the stream ended while it was held).
        outcome: &'static str,
    },
    /// Streaming was turned off for this run: these packs gate whole replies
    /// (`model_response` or `output`) but not streamed text (`stream_chunk`),
    /// so text streamed before their verdict could not be taken back.
    /// `--stream-policy allow` keeps streaming on.
    StreamingDowngraded {
        /// The packs, sorted.
        packs: Vec<String>,
    },
    /// A piece of the model's reply text, as it streams in (`--stream`).
    /// The `assistant` event that follows carries the whole reply.
    AssistantDelta {
        /// Text released since the previous delta.
        content: String,
    },
    /// A tool call was settled: executed, denied or blocked.
    ToolResult {
        /// The call it answers.
        call_id: String,
        /// The tool name (the effective call's).
        name: String,
        /// What the conversation records.
        content: String,
        /// True when the call failed, was denied or blocked.
        is_error: bool,
    },
    /// A call ran past the deadline a `tool_call` interceptor gave it: the
    /// host stopped waiting and recorded the interceptor's error text.
    ToolTimeout {
        /// The call.
        call_id: String,
        /// The tool.
        name: String,
        /// The deadline, in milliseconds.
        timeout_ms: u64,
        /// The interceptor that set it (`<pack>/<name>`).
        interceptor: String,
        /// The turn it happened in (zero-based).
        turn: u64,
    },
    /// A timed-out call's real result came in after all and was dropped.
    LateResultSuppressed {
        /// The call.
        call_id: String,
        /// Why (`tool <name> already timed out; suppressing late result`).
        reason: String,
    },
    /// An interceptor blocked, replaced or failed.
    Interceptor(InterceptorEvent),
    /// A pack was loaded.
    PackLoaded {
        /// The entry-point name it was loaded by (`plan-gate`).
        name: String,
        /// The version the pack reports.
        version: String,
        /// The pack file, or `null` for a pack linked into the host.
        path: Option<String>,
    },
    /// A pack was hot-swapped to a new build.
    PackReloaded {
        /// The entry-point name.
        name: String,
        /// The version the new build reports.
        version: String,
        /// The pack file the new build was read from.
        path: Option<String>,
    },
    /// A reload failed; the previous version keeps running.
    PackReloadFailed {
        /// The entry-point name (or the file, when no name is known).
        name: String,
        /// Why the new build was refused, in one line.
        error: String,
    },
    /// A pack was quarantined: its interceptors are no longer called and its
    /// seams follow their failure policy.
    PackQuarantined {
        /// The pack's entry-point name.
        name: String,
        /// What tripped it (`20 interceptor errors within 60 s`, …).
        reason: String,
    },
    /// An interceptor call ran over its time budget (measured when it
    /// returned; native code cannot be preempted).
    InterceptorSlow {
        /// The seam it ran on (`tool_call`).
        seam: String,
        /// Its qualified name (`<pack>/<name>`).
        interceptor: String,
        /// How long it took, in milliseconds.
        elapsed_ms: u64,
        /// The budget, in milliseconds.
        budget_ms: u64,
    },
    /// A run (one user turn) ended. In JSON: `{"type": "run_end", "success",
    /// "output", "reason", "usage": {"turn": {…}, "session": {…}}}`, each
    /// usage object `{"input_tokens", "output_tokens", "cost_usd"}`.
    RunEnd {
        /// Whether it ended with a final answer.
        success: bool,
        /// The final answer, or the error text.
        output: String,
        /// `completed`, `interceptor_blocked: <reason>`, `provider_error`, `max_steps`.
        reason: String,
        /// True when what the run ended with is a gate's veto, not the
        /// model's answer: a block on `stream_chunk`, `model_response`,
        /// `output`, `context` or `provider_request` (`success` still says
        /// whether the run completed).
        vetoed: bool,
        /// The vetoing interceptor (`<pack>/<name>`); absent when not vetoed.
        #[serde(skip_serializing_if = "Option::is_none")]
        vetoed_by: Option<String>,
        /// The tokens the provider reported and their price (USD, by the
        /// session's price table; 0 for a model it has no price for): this
        /// turn's provider calls (gate retries and compactions included),
        /// and the whole session's so far.
        usage: RunUsage,
    },
    /// An event of a sub-agent (the `delegate` tool's session). In JSON it is
    /// the inner event's object with two more fields, `depth` (1 for a
    /// sub-agent of the top-level session) and `parent_call_id` (the
    /// delegating call).
    #[serde(untagged)]
    Nested(NestedEvent),
}

/// The usage a `run_end` event reports: the turn's and the session's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RunUsage {
    /// What this turn's provider calls used.
    pub turn: SourceUsage,
    /// What the session's provider calls used so far, this turn included.
    pub session: SourceUsage,
}

impl RunUsage {
    /// The usage of a turn that began with the session at `before` and
    /// ended at `after`.
    #[must_use]
    pub fn between(before: SourceUsage, after: SourceUsage) -> Self {
        RunUsage {
            turn: SourceUsage {
                input_tokens: after.input_tokens.saturating_sub(before.input_tokens),
                output_tokens: after.output_tokens.saturating_sub(before.output_tokens),
                cost_usd: (after.cost_usd - before.cost_usd).max(0.0),
            },
            session: after,
        }
    }
}

/// A sub-agent's event, as its parent session publishes it.
#[derive(Debug, Clone, PartialEq)]
pub struct NestedEvent {
    /// How many delegations deep the session that published it is.
    pub depth: u32,
    /// The call that started that session.
    pub parent_call_id: String,
    /// What the sub-agent's session published.
    pub event: Box<AgentEvent>,
}

/// The inner event's object plus `depth` and `parent_call_id`. (Written
/// out rather than `#[serde(flatten)]`, which recurses without end through
/// an enum that contains itself.)
impl Serialize for NestedEvent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = match serde_json::to_value(&*self.event) {
            Ok(serde_json::Value::Object(object)) => object,
            Ok(_) => serde_json::Map::new(),
            Err(error) => return Err(serde::ser::Error::custom(error)),
        };
        object.insert("depth".to_owned(), self.depth.into());
        object.insert(
            "parent_call_id".to_owned(),
            self.parent_call_id.clone().into(),
        );
        object.serialize(serializer)
    }
}

impl AgentEvent {
    pub(crate) fn nested(depth: u32, parent_call_id: &str, event: AgentEvent) -> AgentEvent {
        AgentEvent::Nested(NestedEvent {
            depth,
            parent_call_id: parent_call_id.to_owned(),
            event: Box::new(event),
        })
    }
}

type Listener<E> = Arc<dyn Fn(&E) + Send + Sync>;
type Subscriber = Listener<AgentEvent>;
type Auditor = Listener<AuditRecord>;

/// Fan-out of [`AgentEvent`]s. Publishing is best effort: a panicking
/// subscriber never affects the run.
#[derive(Clone, Default)]
pub struct EventBus {
    subscribers: Arc<RwLock<Vec<Subscriber>>>,
    /// The audit channel's subscribers (see [`EventBus::subscribe_audit`]).
    auditors: Arc<RwLock<Vec<Auditor>>>,
}

impl EventBus {
    /// A bus with no subscribers.
    #[must_use]
    pub fn new() -> Self {
        EventBus::default()
    }

    /// Adds a subscriber.
    pub fn subscribe(&self, subscriber: impl Fn(&AgentEvent) + Send + Sync + 'static) {
        self.subscribers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::new(subscriber));
    }

    /// True when anyone subscribed: events are worth building.
    #[must_use]
    pub fn is_listened(&self) -> bool {
        !self
            .subscribers
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_empty()
    }

    /// Publishes the event `make` builds, building it only when anyone
    /// listens.
    pub fn emit(&self, make: impl FnOnce() -> AgentEvent) {
        if self.is_listened() {
            self.publish(make());
        }
    }

    /// Publishes `event` to every subscriber.
    pub fn publish(&self, event: AgentEvent) {
        deliver(&self.subscribers, &event);
    }

    /// Adds a subscriber to the audit channel: it receives every decision
    /// an interceptor makes, a sub-agent's too — allows, and each
    /// replacement with what it changed ([`AuditRecord`]) — which the
    /// subscribers of [`subscribe`](Self::subscribe) never see, and the
    /// permission policy's questions (an `ask` on seam `permission` by
    /// `permission-policy`). With none,
    /// the chains build nothing for it.
    pub fn subscribe_audit(&self, subscriber: impl Fn(&AuditRecord) + Send + Sync + 'static) {
        self.auditors
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::new(subscriber));
    }

    /// True when the audit channel has a subscriber.
    #[must_use]
    pub fn is_audited(&self) -> bool {
        !self
            .auditors
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_empty()
    }

    /// Publishes `record` on the audit channel.
    pub fn publish_audit(&self, record: AuditRecord) {
        deliver(&self.auditors, &record);
    }
}

/// Hands `event` to each of `subscribers`; a panicking one is skipped.
fn deliver<E>(subscribers: &RwLock<Vec<Listener<E>>>, event: &E) {
    let subscribers = subscribers
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    for subscriber in subscribers {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| subscriber(event)));
    }
}
