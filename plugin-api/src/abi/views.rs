//! Borrowed input views: what an interceptor sees. They point into the host's
//! own strings, so building one allocates nothing beyond a slice of views.

use super::seam::Seam;
use abi_stable::std_types::{ROption, RSlice, RStr};
use abi_stable::StableAbi;

/// A tool call as the model proposed it. `arguments_json` is the raw JSON
/// text the model sent, never re-serialised.
#[repr(C)]
#[derive(StableAbi, Copy, Clone, Debug)]
pub struct ToolCallView<'a> {
    /// The call id, unique within a response.
    pub id: RStr<'a>,
    /// The tool name as dispatched.
    pub name: RStr<'a>,
    /// The arguments as raw JSON text (an object).
    pub arguments_json: RStr<'a>,
}

/// One content block of a multimodal message.
#[repr(C)]
#[derive(StableAbi, Copy, Clone, Debug)]
pub struct BlockView<'a> {
    /// `text`, `image`, or a kind a later host defines.
    pub kind: RStr<'a>,
    /// The text of a `text` block; empty otherwise.
    pub text: RStr<'a>,
    /// Any other fields of the block as JSON text (`{}` when none).
    pub data_json: RStr<'a>,
}

/// One conversation message.
#[repr(C)]
#[derive(StableAbi, Copy, Clone, Debug)]
pub struct MessageView<'a> {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: RStr<'a>,
    /// The text content.
    pub content: RStr<'a>,
    /// Content blocks of a multimodal message (empty for plain text).
    pub blocks: RSlice<'a, BlockView<'a>>,
    /// Tool calls an assistant message carries.
    pub tool_calls: RSlice<'a, ToolCallView<'a>>,
    /// For a `tool` message: the call it answers; empty otherwise.
    pub tool_call_id: RStr<'a>,
    /// Optional author name; empty when absent.
    pub name: RStr<'a>,
}

/// One request header.
#[repr(C)]
#[derive(StableAbi, Copy, Clone, Debug)]
pub struct HeaderView<'a> {
    /// Header name as the provider holds it.
    pub name: RStr<'a>,
    /// Header value.
    pub value: RStr<'a>,
}

/// The provider request envelope, apart from its messages (those travel in
/// [`SeamInput::messages`]).
#[repr(C)]
#[derive(StableAbi, Copy, Clone, Debug)]
pub struct RequestView<'a> {
    /// The provider's model name (informational).
    pub model: RStr<'a>,
    /// The tool schemas offered, as a JSON array (`[]` when none).
    pub tools_json: RStr<'a>,
    /// Extra call options passed verbatim to the provider, as a JSON object.
    pub kwargs_json: RStr<'a>,
    /// The provider's per-request headers, or `RNone` when the provider has no
    /// header surface.
    pub headers: ROption<RSlice<'a, HeaderView<'a>>>,
}

/// A tool's result.
#[repr(C)]
#[derive(StableAbi, Copy, Clone, Debug)]
pub struct ToolResultView<'a> {
    /// The tool's output text.
    pub output: RStr<'a>,
    /// The error text, when the tool failed.
    pub error: ROption<RStr<'a>>,
    /// Result metadata as a JSON object (`{}` when none).
    pub metadata_json: RStr<'a>,
}

/// Facts the host maintains about the conversation, so a pack keys its state
/// by conversation and counts without parsing transcripts.
#[repr(C)]
#[derive(StableAbi, Copy, Clone, Debug)]
pub struct SessionView<'a> {
    /// Stable id of the conversation (unique within the process).
    pub session_id: RStr<'a>,
    /// Zero-based index of the current user turn.
    pub turn_index: u64,
    /// Provider calls made so far in this turn (the one about to happen is not counted).
    pub provider_calls_this_turn: u64,
    /// Tool calls processed so far in this turn.
    pub tool_calls_this_turn: u64,
    /// Input tokens reported by the provider so far in the session.
    pub input_tokens: u64,
    /// Output tokens reported by the provider so far in the session.
    pub output_tokens: u64,
    /// Facts added by later hosts, as a JSON object (`{}` when none).
    pub extension_json: RStr<'a>,
}

/// Everything one interceptor call receives. Which slots are filled depends on
/// the seam:
///
/// | seam | filled |
/// |---|---|
/// | `context` | `messages` |
/// | `provider_request` | `messages`, `request` |
/// | `tool_call` | `tool_call` |
/// | `tool_result` | `tool_call` (the effective call), `tool_result` |
/// | `model_response` | `messages` (the reply, one assistant message), `text` (its content), `extension_json` = `{"streamed":true\|false}` |
/// | `output` | `text` (the final answer) |
/// | `stream_chunk` | `text` (the turn's text so far), `extension_json` = `{"released":R,"delta":D,"final":B}`: the first `R` bytes are already shown, the last `D` are the new delta, `final` marks the check at the end of the stream |
///
/// On the four older seams `text` and `extension_json` are empty (see the
/// module docs for how the ABI grows).
#[repr(C)]
#[derive(StableAbi, Copy, Clone, Debug)]
pub struct SeamInput<'a> {
    /// The seam being run.
    pub seam: Seam,
    /// The conversation this call belongs to.
    pub session: &'a SessionView<'a>,
    /// Messages (context list, or the envelope's messages).
    pub messages: RSlice<'a, MessageView<'a>>,
    /// The envelope apart from its messages.
    pub request: ROption<&'a RequestView<'a>>,
    /// The tool call.
    pub tool_call: ROption<&'a ToolCallView<'a>>,
    /// The tool result.
    pub tool_result: ROption<&'a ToolResultView<'a>>,
    /// Free text for later seams.
    pub text: RStr<'a>,
    /// Further input for later seams, as JSON (`{}` or empty when unused).
    pub extension_json: RStr<'a>,
}
