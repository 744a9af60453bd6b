//! One file per seam: its value type, how a chain on it fails, how its input
//! is viewed across the ABI and how a pack's replacement comes back.

mod context;
mod edit;
mod model_response;
mod output;
mod provider_request;
mod stream_chunk;
mod tool_call;
mod tool_result;
mod views;

pub(crate) use edit::{SESSION_EXTENSION, SESSION_EXTENSION_GATE_RETRY};
pub use model_response::ReplyFacts;
pub use stream_chunk::StreamFacts;
pub use tool_result::withheld as withheld_result;

use crate::interception::{InterceptResult, Interceptor};
use crate::types::{Message, ProviderRequest, ToolCall, ToolResult};
use chimera_plugin_api::abi::{self, SeamInput, SeamValue, SessionView};

mod sealed {
    use crate::interception::InterceptResult;
    use chimera_plugin_api::abi::{self, SeamInput, SeamValue, SessionView};

    /// What the seam table says of a seam: its ABI identifier, its value,
    /// what comes before the value, and how a host closure is called.
    /// Written by [`seams!`](super::seams), never by hand.
    pub trait SeamShape {
        /// The ABI identifier.
        const SEAM: abi::Seam;
        /// The replacement type's name, for `replace value must be X` errors.
        const EXPECTED: &'static str;
        /// The value the chain decides on.
        type Value: Decided;
        /// What the chain receives before the value (the call, for `tool_result`).
        type Lead: ?Sized;
        /// The host closure type.
        type HostFn: ?Sized + Send + Sync;

        /// Runs a host closure.
        fn call_host(
            f: &Self::HostFn,
            lead: &Self::Lead,
            value: &Self::Value,
        ) -> InterceptResult<Self::Value>;
    }

    /// What a value type brings to every seam that decides on it: how a
    /// pack's whole replacement becomes one, and what a replacement
    /// changed. Implemented once per type, beside the seam that owns it
    /// (the text seams share `String`'s).
    pub trait Decided: Clone + Send + Sync + 'static {
        /// A pack's whole replacement as a value (`current` is the value
        /// it replaces), or why it does not fit.
        fn from_replacement(value: SeamValue, current: &Self) -> Result<Self, Invalid>;

        /// What a replacement changed, for the audit log: per changed
        /// span its old position, the length removed and the text
        /// inserted, never the removed text.
        fn changes(before: &Self, after: &Self) -> crate::interception::Changes;
    }

    /// The ABI side of a seam: how its value crosses to a pack and back,
    /// written once per seam in its own file. Public only in name (this
    /// module is private), so the seams' implementations are the only ones
    /// and none of this is API.
    pub trait SeamAbi: SeamShape {
        /// Lends `value` to `f` as the ABI's borrowed input.
        fn with_input<R>(
            lead: &Self::Lead,
            value: &Self::Value,
            session: &SessionView<'_>,
            f: impl FnOnce(&SeamInput<'_>) -> R,
        ) -> R;

        /// A pack's replacement as a host value, or why it does not fit:
        /// by default the value type's own reading of a whole replacement.
        fn from_abi(
            _lead: &Self::Lead,
            value: SeamValue,
            current: &Self::Value,
        ) -> Result<Self::Value, Invalid> {
            Decided::from_replacement(value, current)
        }

        /// Fixes up any replacement before it is adopted (the tool call keeps its id).
        fn adopt(replacement: Self::Value, _current: &Self::Value) -> Self::Value {
            replacement
        }

        /// The value an operator's `edit` answer makes of `current`
        /// (`payload` is the answer's JSON), or why there is none.
        fn edited(_current: &Self::Value, _payload: &str) -> Result<Self::Value, String> {
            Err(format!("an edit is not offered on {}", Self::SEAM))
        }

        /// What a replacement changed, for the audit log (the value
        /// type's [`Decided::changes`]).
        fn changes(before: &Self::Value, after: &Self::Value) -> crate::interception::Changes {
            Decided::changes(before, after)
        }

        /// `(tool_name, call_id)` for events; empty on non-tool seams.
        fn tool_ids<'a>(_lead: &'a Self::Lead, _value: &'a Self::Value) -> (&'a str, &'a str) {
            ("", "")
        }
    }

    /// A replacement that does not fit the seam.
    pub enum Invalid {
        /// The expected slot was empty; what was there instead.
        WrongType(String),
        /// The slot was there but its content is unusable.
        Malformed(String),
    }
}
pub(crate) use sealed::{Decided, Invalid, SeamAbi, SeamShape};

/// A seam, as generic host code names it: one of the markers the seam
/// table below defines. Sealed: those are the only implementations.
/// `S::Value` is the value its chain decides on (a `ToolCall`, a
/// `ToolResult`, the message list, the request envelope, a text).
pub trait SeamSpec: SeamAbi + Sized + Send + Sync + 'static {
    /// The canonical name (`tool_call`).
    const NAME: &'static str;
    /// `true` when an interceptor failure blocks (only `tool_call`): the
    /// seam fails closed; the others skip the failing interceptor.
    const FAIL_CLOSED: bool = false;
    /// `true` on the seam whose interceptors may answer *hold*
    /// (`stream_chunk`); elsewhere a hold is an unknown decision.
    const HOLDS: bool = false;
    /// `true` on the seam whose interceptors may answer *retry* (`output`);
    /// elsewhere a retry is an unknown decision.
    const RETRIES: bool = false;
    /// `true` on the seam whose interceptors may *pause* the turn with a
    /// retry-after (`provider_request`).
    const PAUSES: bool = false;
    /// `true` on the seams whose interceptors may *ask* an operator
    /// (`tool_call`, `provider_request`).
    const ASKS: bool = false;
    /// `true` on the seam whose interceptors may give an allowed value a
    /// deadline (`tool_call`).
    const DEADLINES: bool = false;
}

/// The seam table: one row per seam makes its marker type, its
/// [`SeamSpec`] (name and the answers it takes beyond allow / replace /
/// block), its shape (ABI identifier, value, lead, host closure) and the
/// host-closure constructor on [`Interceptor`]. How the value crosses the
/// ABI is the seam's own file ([`SeamAbi`]). A new seam is a row here and
/// that one impl.
macro_rules! seams {
    ($(
        $(#[$doc:meta])*
        $marker:ident {
            name: $name:literal,
            abi: $seam:ident,
            expects: $expected:literal,
            value: $value:ty,
            lead: $lead:ty,
            host: $ctor:ident($($arg:ty),+) => |$f:ident, $l:pat_param, $v:pat_param| $call:expr,
            answers: [$($flag:ident),*] $(,)?
        }
    )*) => {$(
        $(#[$doc])*
        pub struct $marker;

        impl SeamSpec for $marker {
            const NAME: &'static str = $name;
            $(const $flag: bool = true;)*
        }

        impl sealed::SeamShape for $marker {
            const SEAM: abi::Seam = abi::Seam::$seam;
            const EXPECTED: &'static str = $expected;
            type Value = $value;
            type Lead = $lead;
            type HostFn = dyn Fn($($arg),+) -> InterceptResult<$value> + Send + Sync;

            fn call_host($f: &Self::HostFn, $l: &$lead, $v: &$value) -> InterceptResult<$value> {
                $call
            }
        }

        impl Interceptor<$marker> {
            #[doc = concat!(
                "A host interceptor on `", $name, "`: a closure over what the seam ",
                "sees, answering allow, replace or block."
            )]
            pub fn $ctor<F>(name: impl Into<String>, f: F) -> Self
            where
                F: Fn($($arg),+) -> InterceptResult<$value> + Send + Sync + 'static,
            {
                let f: Box<<$marker as sealed::SeamShape>::HostFn> = Box::new(f);
                Interceptor::host(name, f)
            }
        }
    )*};
}

seams! {
    /// The `context` seam: the messages about
    /// to be sent, before each provider call.
    ContextSeam {
        name: "context",
        abi: CONTEXT,
        expects: "Messages",
        value: Vec<Message>,
        lead: (),
        host: context(&[Message]) => |f, (), messages| f(messages),
        answers: [],
    }
    /// The `provider_request` seam: the request envelope, before the wire.
    ProviderRequestSeam {
        name: "provider_request",
        abi: PROVIDER_REQUEST,
        expects: "ProviderRequest",
        value: ProviderRequest,
        lead: (),
        host: provider_request(&ProviderRequest) => |f, (), request| f(request),
        answers: [ASKS, PAUSES],
    }
    /// The `tool_call` seam: each proposed call, before hooks and the
    /// permission policy. Fails closed.
    ToolCallSeam {
        name: "tool_call",
        abi: TOOL_CALL,
        expects: "ToolCall",
        value: ToolCall,
        lead: (),
        host: tool_call(&ToolCall) => |f, (), call| f(call),
        answers: [FAIL_CLOSED, ASKS, DEADLINES],
    }
    /// The `tool_result` seam: what an executed tool returned, before
    /// truncation and hooks. The call leads.
    ToolResultSeam {
        name: "tool_result",
        abi: TOOL_RESULT,
        expects: "ToolResult",
        value: ToolResult,
        lead: ToolCall,
        host: tool_result(&ToolCall, &ToolResult) => |f, call, result| f(call, result),
        answers: [],
    }
    /// The `model_response` seam: each model reply before it enters the
    /// conversation. Its facts (tool calls, streamed) lead.
    ModelResponseSeam {
        name: "model_response",
        abi: MODEL_RESPONSE,
        expects: "Text",
        value: String,
        lead: ReplyFacts,
        host: model_response(&ReplyFacts, &str) => |f, facts, text| f(facts, text),
        answers: [],
    }
    /// The `output` seam: the final answer before the user sees it.
    OutputSeam {
        name: "output",
        abi: OUTPUT,
        expects: "Text",
        value: String,
        lead: (),
        host: output(&str) => |f, (), answer| f(answer),
        answers: [RETRIES],
    }
    /// The `stream_chunk` seam: each streamed delta before it is released.
    /// The stream's facts lead; the value is the turn's text so far (a
    /// replacement is the whole new text, the released part kept as it is).
    StreamChunkSeam {
        name: "stream_chunk",
        abi: STREAM_CHUNK,
        expects: "Text (the new candidate)",
        value: String,
        lead: StreamFacts,
        host: stream_chunk(&StreamFacts, &str) => |f, facts, text| f(facts, text),
        answers: [HOLDS],
    }
}

/// The text seams' value (`model_response`, `output`, `stream_chunk`): a
/// replacement is the `text` slot.
impl Decided for String {
    fn from_replacement(value: SeamValue, _current: &String) -> Result<String, Invalid> {
        text_replacement(value)
    }

    fn changes(before: &String, after: &String) -> crate::interception::Changes {
        crate::interception::Differ::text_changes(before, after)
    }
}

/// A pack's text replacement: the `text` slot, or which slots it filled
/// instead.
pub(crate) fn text_replacement(value: SeamValue) -> Result<String, Invalid> {
    let described = describe(&value);
    text_from_abi(value).ok_or(Invalid::WrongType(described))
}

/// Describes which slots of a pack's replacement are filled, for
/// `replace value must be X, got Y`.
pub(crate) fn describe(value: &SeamValue) -> String {
    let slots = [
        (value.messages.is_some(), "Messages"),
        (value.request.is_some(), "ProviderRequest"),
        (value.tool_call.is_some(), "ToolCall"),
        (value.tool_result.is_some(), "ToolResult"),
        (value.text.is_some(), "Text"),
        (value.extension_json.is_some(), "Extension"),
    ];
    let filled: Vec<&str> = slots
        .iter()
        .filter(|(set, _)| *set)
        .map(|(_, name)| *name)
        .collect();
    if filled.is_empty() {
        "nothing".to_owned()
    } else {
        filled.join("+")
    }
}

/// A pack's text replacement (`model_response`, `output`), if it filled
/// the `text` slot.
pub(crate) fn text_from_abi(value: SeamValue) -> Option<String> {
    value
        .text
        .into_option()
        .map(abi_stable::std_types::RString::into_string)
}

/// A `SeamInput` with every slot empty but the seam and the session.
pub(crate) fn empty_input<'a>(seam: abi::Seam, session: &'a SessionView<'a>) -> SeamInput<'a> {
    use abi_stable::std_types::{ROption, RSlice, RStr};
    SeamInput {
        seam,
        session,
        messages: RSlice::EMPTY,
        request: ROption::RNone,
        tool_call: ROption::RNone,
        tool_result: ROption::RNone,
        text: RStr::from_str(""),
        extension_json: RStr::from_str(""),
    }
}
