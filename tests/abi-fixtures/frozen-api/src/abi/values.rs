//! Owned values: what an interceptor hands back inside a replace decision.
//! They mirror the views field for field.

use abi_stable::std_types::{ROption, RString, RVec};
use abi_stable::StableAbi;

/// An owned tool call. The host always restores the original id, whatever
/// `id` holds.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default)]
pub struct ToolCallValue {
    /// Ignored by the host on replacement (the original id is kept).
    pub id: RString,
    /// Tool name.
    pub name: RString,
    /// Arguments as JSON text (an object).
    pub arguments_json: RString,
}

/// An owned content block.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default)]
pub struct BlockValue {
    /// Block kind.
    pub kind: RString,
    /// Text of a `text` block.
    pub text: RString,
    /// Other fields as JSON text.
    pub data_json: RString,
}

/// An owned message.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default)]
pub struct MessageValue {
    /// Role.
    pub role: RString,
    /// Text content.
    pub content: RString,
    /// Content blocks.
    pub blocks: RVec<BlockValue>,
    /// Tool calls.
    pub tool_calls: RVec<ToolCallValue>,
    /// The call a tool message answers.
    pub tool_call_id: RString,
    /// Author name.
    pub name: RString,
}

/// An owned header.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default)]
pub struct HeaderValue {
    /// Name.
    pub name: RString,
    /// Value.
    pub value: RString,
}

/// An owned envelope, apart from its messages ([`SeamValue::messages`]).
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default)]
pub struct RequestValue {
    /// Model name (informational: replacing it does not switch providers).
    pub model: RString,
    /// Tool schemas as a JSON array.
    pub tools_json: RString,
    /// Extra call options as a JSON object.
    pub kwargs_json: RString,
    /// Headers for this call only; `RNone` keeps the provider's own.
    pub headers: ROption<RVec<HeaderValue>>,
}

/// An owned tool result.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default)]
pub struct ToolResultValue {
    /// Output text.
    pub output: RString,
    /// Error text, when failed.
    pub error: ROption<RString>,
    /// Metadata as a JSON object.
    pub metadata_json: RString,
}

/// A replacement. Fill the slots of the seam being replaced (the table on
/// [`SeamInput`](super::SeamInput)); a missing slot is an invalid replacement,
/// which the host treats as an interceptor error.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default)]
pub struct SeamValue {
    /// New message list (`context`), or the envelope's messages (`provider_request`).
    pub messages: ROption<RVec<MessageValue>>,
    /// New envelope (`provider_request`).
    pub request: ROption<RequestValue>,
    /// New call (`tool_call`).
    pub tool_call: ROption<ToolCallValue>,
    /// New result (`tool_result`).
    pub tool_result: ROption<ToolResultValue>,
    /// Text for later seams.
    pub text: ROption<RString>,
    /// Anything else for later seams, as JSON.
    pub extension_json: ROption<RString>,
}
