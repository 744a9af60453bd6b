//! The observational record of every non-trivial decision.

use serde::Serialize;
use std::fmt;

/// Which decision an [`InterceptorEvent`] records. The transcript carries
/// only blocks, replacements and errors; the other decisions reach the
/// audit log alone (see [`crate::audit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EventDecision {
    /// The chain stopped.
    Blocked,
    /// The value was substituted.
    Replaced,
    /// The interceptor failed (error, panic, invalid replacement, unknown kind).
    Error,
    /// Audit log only: the value passed as it was (with a deadline, for a
    /// tool call given one).
    Allowed,
    /// Audit log only: the interceptor asks the operator.
    Ask,
    /// Audit log only: an `output` interceptor asks the model again.
    Retry,
    /// Audit log only: a `provider_request` interceptor paused the turn.
    Pause,
    /// Audit log only: a `stream_chunk` interceptor started holding
    /// streamed text beyond the trailing word.
    Hold,
    /// Audit log only: that hold ended (the reason says how).
    #[serde(rename = "hold_end")]
    HoldEnd,
}

impl fmt::Display for EventDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EventDecision::Blocked => "blocked",
            EventDecision::Replaced => "replaced",
            EventDecision::Error => "error",
            EventDecision::Allowed => "allowed",
            EventDecision::Ask => "ask",
            EventDecision::Retry => "retry",
            EventDecision::Pause => "pause",
            EventDecision::Hold => "hold",
            EventDecision::HoldEnd => "hold_end",
        })
    }
}

/// One block / replace / error decision, as published on the event bus
/// (`type: "interceptor"` in the JSON transcript). A decision of an
/// interceptor in monitor mode ([`PackMode::Monitor`](super::PackMode))
/// carries `monitor: true`: it was recorded, not enacted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InterceptorEvent {
    /// `context`, `provider_request`, `tool_call` or `tool_result`.
    pub seam: &'static str,
    /// What happened.
    pub decision: EventDecision,
    /// The block reason as given; `<interceptor>: <error text>` for errors;
    /// empty for replacements.
    pub reason: String,
    /// Tool seams only: the name of the call the chain started with.
    pub tool_name: String,
    /// Tool seams only: its call id.
    pub call_id: String,
    /// Display name of the deciding interceptor (`<pack>/<name>` for packs).
    pub interceptor: String,
    /// True when the interceptor runs in monitor mode: the decision is
    /// what it *would* have done, and nothing was blocked or changed.
    /// Serialised only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub monitor: bool,
}
