//! Seam identifiers: an open set of integers, so later hosts can add seams
//! without changing any layout.

use abi_stable::StableAbi;
use std::fmt;

/// One interception point of an agent turn.
///
/// A `#[repr(transparent)]` integer rather than an enum: new seams are new
/// constants, never a layout change (see the module docs, "Growing the ABI").
#[repr(transparent)]
#[derive(StableAbi, Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Seam(pub u32);

impl Seam {
    /// Before each provider call: the message list about to be sent.
    pub const CONTEXT: Seam = Seam(0);
    /// After `context`: the request envelope (model, messages, tools, kwargs, headers).
    pub const PROVIDER_REQUEST: Seam = Seam(1);
    /// Before each tool call runs, before permission checks.
    pub const TOOL_CALL: Seam = Seam(2);
    /// After a tool executed, before its result is recorded.
    pub const TOOL_RESULT: Seam = Seam(3);
    /// Each model reply, streamed or not, before it enters the conversation.
    /// A replacement (`text`) redacts the content and keeps the tool calls; a
    /// block publishes one substitute reply instead (no tool calls).
    pub const MODEL_RESPONSE: Seam = Seam(4);
    /// The final answer before the user sees it. A replacement (`text`)
    /// redacts; a block shows the notice (or the reason) instead; a retry
    /// asks the model again.
    pub const OUTPUT: Seam = Seam(5);
    /// Every streamed text delta before it is released. The answers are
    /// allow, hold (see [`Decision::hold`](crate::abi::Decision::hold)),
    /// block, and — when the host's stream facts say `"replace":true` — a
    /// rewrite of the unreleased candidate, held or not (see
    /// [`Decision::hold_replacing`](crate::abi::Decision::hold_replacing)).
    pub const STREAM_CHUNK: Seam = Seam(6);

    /// The seams this version of the ABI defines behaviour for, in bundle order.
    pub const KNOWN: [Seam; 7] = [
        Seam::PROVIDER_REQUEST,
        Seam::TOOL_CALL,
        Seam::TOOL_RESULT,
        Seam::CONTEXT,
        Seam::MODEL_RESPONSE,
        Seam::OUTPUT,
        Seam::STREAM_CHUNK,
    ];

    /// The seam's canonical name (`tool_call`, ...), or `None` for an id this
    /// version does not know.
    #[must_use]
    pub const fn name(self) -> Option<&'static str> {
        match self.0 {
            0 => Some("context"),
            1 => Some("provider_request"),
            2 => Some("tool_call"),
            3 => Some("tool_result"),
            4 => Some("model_response"),
            5 => Some("output"),
            6 => Some("stream_chunk"),
            _ => None,
        }
    }

    /// Parses a canonical seam name; `None` for anything else.
    pub fn from_name(name: &str) -> Option<Seam> {
        (0..=6).map(Seam).find(|seam| seam.name() == Some(name))
    }
}

impl fmt::Display for Seam {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "seam#{}", self.0),
        }
    }
}

impl fmt::Debug for Seam {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
