//! The seams an SDK pack names: a leaf the trait, the registrar and the
//! export code all read.

use crate::abi::Seam;

/// The seams an SDK pack can register on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SeamKind {
    /// Before each provider call: the outgoing message list (ephemeral rewrite).
    Context,
    /// After `context`: the whole request envelope.
    ProviderRequest,
    /// Before each tool call, before permission checks (fail-closed).
    ToolCall,
    /// After a tool executed, before its result is recorded.
    ToolResult,
    /// Each model reply, before it enters the conversation.
    ModelResponse,
    /// The final answer, before the user sees it.
    Output,
    /// Each streamed text delta, before it is released.
    StreamChunk,
}

impl SeamKind {
    /// The ABI identifier of this seam.
    #[must_use]
    pub const fn seam(self) -> Seam {
        match self {
            SeamKind::Context => Seam::CONTEXT,
            SeamKind::ProviderRequest => Seam::PROVIDER_REQUEST,
            SeamKind::ToolCall => Seam::TOOL_CALL,
            SeamKind::ToolResult => Seam::TOOL_RESULT,
            SeamKind::ModelResponse => Seam::MODEL_RESPONSE,
            SeamKind::Output => Seam::OUTPUT,
            SeamKind::StreamChunk => Seam::STREAM_CHUNK,
        }
    }
}
