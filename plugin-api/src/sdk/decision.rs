//! The typed decision an SDK interceptor returns.

use std::fmt;

/// What an interceptor decides about one value of type `T`.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision<T> {
    /// Pass the value through unchanged; later interceptors still run. No event.
    Allow,
    /// Substitute the value; later interceptors see the substitute. Emits a
    /// `replaced` event.
    Replace(T),
    /// Stop the chain. What a block means is the seam's (a denied tool call, a
    /// withheld result, a run that ends before the provider call). Emits a
    /// `blocked` event.
    Block(String),
}

impl<T> Decision<T> {
    /// A block with `reason`.
    pub fn block(reason: impl Into<String>) -> Self {
        Decision::Block(reason.into())
    }
}

/// An interceptor failure. The seam's failure policy decides what follows:
/// `tool_call` blocks the call, the other seams skip the interceptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterceptError(String);

impl InterceptError {
    /// An error with this text.
    pub fn msg(text: impl Into<String>) -> Self {
        InterceptError(text.into())
    }

    /// The error text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for InterceptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: std::error::Error> From<E> for InterceptError {
    fn from(error: E) -> Self {
        InterceptError(error.to_string())
    }
}

/// What an interceptor closure returns: `?` works on any error type.
pub type InterceptResult<T> = Result<Decision<T>, InterceptError>;

/// What a `stream_chunk` interceptor answers for one [`Segment`](super::Segment).
/// To rewrite the text (redaction), register with
/// [`Registrar::stream_chunk_rewrite`](super::Registrar::stream_chunk_rewrite)
/// and answer a [`StreamRewrite`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamDecision {
    /// Release the whole candidate.
    Release,
    /// Withhold the text from this offset of [`Segment::full`](super::Segment::full)
    /// on (an offset inside the released part holds the whole candidate; one
    /// past the end holds nothing); it is offered again with the next delta.
    /// With several interceptors, the largest hold wins.
    HoldFrom(usize),
    /// Stop the stream: nothing more of this turn is published, and the
    /// reply is replaced by the notice (or this reason).
    Block(String),
}

/// What a `stream_chunk` closure returns.
pub type StreamResult = Result<StreamDecision, InterceptError>;

/// What a rewriting `stream_chunk` interceptor answers for one
/// [`Segment`](super::Segment)
/// ([`Registrar::stream_chunk_rewrite`](super::Registrar::stream_chunk_rewrite)):
/// everything a [`StreamDecision`] can say, and a rewrite of the candidate
/// (redaction). Marked non-exhaustive: later answers are added here.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamRewrite {
    /// Release the whole candidate.
    Release,
    /// Withhold from this offset of [`Segment::full`](super::Segment::full)
    /// on, as [`StreamDecision::HoldFrom`].
    HoldFrom(usize),
    /// Publish `candidate` in place of the segment's candidate (the text
    /// after [`Segment::released_offset`](super::Segment::released_offset));
    /// later interceptors, the release and every later delta see the
    /// rewritten text. `hold_from` is an offset into the rewritten full
    /// text (the released text, then `candidate`): the text from there on
    /// is withheld as with [`HoldFrom`](Self::HoldFrom); its length (or
    /// more) holds nothing. Released text is never rewritten: a match that
    /// began in it can only be blocked. A host that cannot rewrite streamed
    /// text ([`Segment::can_replace`](super::Segment::can_replace) is
    /// false) gets a block instead, so a rewrite never degrades into
    /// releasing the original.
    Replace {
        /// The new candidate.
        candidate: String,
        /// Where the hold starts in the rewritten full text.
        hold_from: usize,
    },
    /// Stop the stream, as [`StreamDecision::Block`].
    Block(String),
}

impl From<StreamDecision> for StreamRewrite {
    fn from(decision: StreamDecision) -> Self {
        match decision {
            StreamDecision::Release => StreamRewrite::Release,
            StreamDecision::HoldFrom(offset) => StreamRewrite::HoldFrom(offset),
            StreamDecision::Block(reason) => StreamRewrite::Block(reason),
        }
    }
}

/// What a rewriting `stream_chunk` closure returns.
pub type StreamRewriteResult = Result<StreamRewrite, InterceptError>;

/// What an `output` gate that can ask for a retry answers
/// ([`Registrar::output_gate`](super::Registrar::output_gate)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputDecision {
    /// Show the answer as it is.
    Allow,
    /// Show this text instead (redaction).
    Replace(String),
    /// Show the notice (or this reason), never the answer.
    Block(String),
    /// Ask the model again with feedback.
    Retry(Retry),
}

/// A retry request: the feedback the model gets, and the bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    /// The user message of the retry request (the assistant's current answer
    /// is the message before it; nothing else is sent).
    pub feedback: String,
    /// At most this many retries by this interceptor for one answer (a
    /// host may bound it further; this host allows at most 10).
    pub max: u32,
    /// What happens when they are used up.
    pub exhausted: Exhausted,
}

/// The outcome of a retry bound that is used up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exhausted {
    /// Accept the last answer (later interceptors still judge it).
    Allow,
    /// Block with this reason.
    Block(String),
}

/// What an `output_gate` closure returns.
pub type OutputResult = Result<OutputDecision, InterceptError>;

/// What a gate that can ask an operator answers
/// ([`Registrar::tool_call_gate`](super::Registrar::tool_call_gate),
/// [`Registrar::provider_request_gate`](super::Registrar::provider_request_gate)).
#[derive(Debug, Clone, PartialEq)]
pub enum GateDecision<T> {
    /// Pass the value through.
    Allow,
    /// Substitute the value.
    Replace(T),
    /// Stop the chain with a reason.
    Block(String),
    /// Ask the operator; their answer decides, and an edited value still
    /// passes the rest of the chain, the hooks and the permission policy.
    Ask(Ask),
    /// `provider_request` only (a rate limiter): pause the turn for `wait`
    /// (the host bounds it and shows `reason`), then the request is rebuilt
    /// and the seams run again. The turn waits; it does not fail.
    RetryAfter {
        /// How long to wait.
        wait: std::time::Duration,
        /// Why, for the user.
        reason: String,
    },
    /// `provider_request` only (a context-window gate): do not send this
    /// request; the host compacts the conversation — it keeps the system
    /// message and the last turns, and replaces the rest with a summary
    /// from one model call (source `compaction`, through the seams like any
    /// call) — then builds the request again and runs the seams once more.
    /// A second compaction for the same request blocks it with `reason`.
    ///
    /// ```
    /// # use chimera_plugin_api::prelude::*;
    /// # fn register(registrar: &mut Registrar) {
    /// registrar.provider_request_gate("window", |session, request| {
    ///     let chars: usize = request.messages().iter().map(|m| m.content().len()).sum();
    ///     if session.source() != "agent" || chars < 400_000 {
    ///         return Ok(GateDecision::Allow);
    ///     }
    ///     session.notice("Compacting the conversation...");
    ///     Ok(GateDecision::Compact { reason: format!("{chars} characters: near the window") })
    /// });
    /// # }
    /// ```
    Compact {
        /// Why, for the user and the events.
        reason: String,
    },
    /// `tool_call` only (a timeout gate): allow, and the call must finish
    /// within `within`. Past it the host records `on_timeout` as the call's
    /// error result, drops the late result and stops the tool (a shell
    /// command's whole process tree). With several deadlines the shortest
    /// wins.
    ///
    /// ```
    /// # use chimera_plugin_api::prelude::*;
    /// # use std::time::Duration;
    /// # fn register(registrar: &mut Registrar) {
    /// registrar.tool_call_gate("deadline", |_session, call| {
    ///     let within = if call.name() == "bash" { Duration::from_secs(30) } else { Duration::from_secs(5) };
    ///     Ok(GateDecision::AllowWithin {
    ///         within,
    ///         on_timeout: format!("tool {} ran longer than {within:?}", call.name()),
    ///     })
    /// });
    /// # }
    /// ```
    AllowWithin {
        /// How long the call may take.
        within: std::time::Duration,
        /// The error result recorded when it takes longer.
        on_timeout: String,
    },
}

/// A question for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    /// What to ask.
    pub prompt: String,
    /// Offer `edit` (the operator hands back replacement arguments, for a
    /// tool call) besides `allow` and `reject`.
    pub edit: bool,
    /// How long to wait for an answer (`None`: as long as it takes).
    pub timeout: Option<std::time::Duration>,
    /// The answer a timeout gives: true for `allow`, false for `reject`.
    pub default_allow: bool,
}

/// What a gate closure returns.
pub type GateResult<T> = Result<GateDecision<T>, InterceptError>;
