//! What a turn comes to: the run's result and why it ended, and the
//! shapes one step of a loop hands back. A leaf: it imports nothing else
//! of the agent.

use crate::providers::ProviderError;
use crate::types::ToolCall;
use std::fmt;

/// How a run (one user turn) ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunResult {
    /// True when the model gave a final answer.
    pub success: bool,
    /// The final answer, or the error text on failure.
    pub output: String,
    /// The error text on failure.
    pub error: Option<String>,
    /// Why the run ended, with what the failure knows (the provider error
    /// keeps its HTTP status and whether retrying could help).
    pub reason: EndReason,
    /// The interceptor (`<pack>/<name>`) whose veto the user was shown
    /// instead of an answer: a block on `stream_chunk`, `model_response`
    /// or `output` that replaced the final answer, or on `context` /
    /// `provider_request` that ended the run before the model was asked.
    /// `None` when what the run ended with is the model's own (an answer,
    /// perhaps redacted) or a failure no gate chose.
    pub vetoed_by: Option<String>,
}

/// Why a run ended. Displays as the `run_end` event's `reason`:
/// `completed`, `interceptor_blocked: <reason>`, `provider_error`,
/// `max_steps`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndReason {
    /// The model gave a final answer.
    Completed,
    /// A pre-provider seam (`context`, `provider_request`) blocked: the
    /// provider was not called.
    InterceptorBlocked {
        /// The blocking interceptor's reason.
        reason: String,
    },
    /// The provider call failed.
    ProviderError(ProviderError),
    /// The `output` seam blocked the final answer: the user was shown the
    /// notice (or the reason) instead.
    OutputBlocked {
        /// The blocking interceptor's reason.
        reason: String,
    },
    /// This many provider calls were made without a final answer.
    MaxSteps {
        /// The session's step limit.
        steps: usize,
    },
}

impl fmt::Display for EndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndReason::Completed => f.write_str("completed"),
            EndReason::InterceptorBlocked { reason } => write!(f, "interceptor_blocked: {reason}"),
            EndReason::ProviderError(_) => f.write_str("provider_error"),
            EndReason::OutputBlocked { reason } => write!(f, "output_blocked: {reason}"),
            EndReason::MaxSteps { .. } => f.write_str("max_steps"),
        }
    }
}

impl RunResult {
    /// A final answer.
    pub(crate) fn completed(output: String) -> Self {
        RunResult {
            success: true,
            output,
            error: None,
            reason: EndReason::Completed,
            vetoed_by: None,
        }
    }

    /// A failure whose error text (and output) is `text`.
    pub(crate) fn failed(reason: EndReason, text: String) -> Self {
        RunResult {
            success: false,
            output: text.clone(),
            error: Some(text),
            reason,
            vetoed_by: None,
        }
    }

    /// This result, vetoed by `interceptor` (when known).
    #[must_use]
    pub(crate) fn vetoed(mut self, interceptor: Option<String>) -> Self {
        self.vetoed_by = interceptor;
        self
    }
}

/// A reply after the `model_response` seam.
pub(crate) struct Judged {
    pub(crate) content: String,
    pub(crate) tool_calls: Vec<ToolCall>,
    /// The reply is a substitute (a block on `model_response` or
    /// `stream_chunk`) by this interceptor: no later seam judges it again.
    pub(crate) veto: Option<String>,
}

impl Judged {
    /// True when the reply is a gate's substitute, not the model's.
    pub(crate) fn vetoed(&self) -> bool {
        self.veto.is_some()
    }
}

/// What one step of a loop came to.
pub(crate) enum Stepped {
    /// The model answered without calling tools (or the reply is a
    /// substitute): the reply, not yet recorded.
    Answered(Judged),
    /// It called tools, and each call was settled.
    Acted {
        /// How many of the calls actually ran (not refused at the gate).
        executed: usize,
    },
}

/// The run a pre-provider block by `by` ends with.
pub(crate) fn blocked_run(reason: String, by: Option<String>) -> RunResult {
    let text = format!("Blocked by interceptor: {reason}");
    RunResult::failed(EndReason::InterceptorBlocked { reason }, text).vetoed(by)
}

/// What a block shows the user: the notice that came with it, else the reason.
pub(super) fn shown_for_block(reason: String, notice: Option<String>) -> String {
    notice.unwrap_or(reason)
}
