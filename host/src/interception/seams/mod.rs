//! One file per seam: its value type, how a chain on it fails, how its input
//! is viewed across the ABI and how a pack's replacement comes back.

mod context;
mod provider_request;
mod tool_call;
mod tool_result;
mod views;

pub use context::ContextSeam;
pub use provider_request::ProviderRequestSeam;
pub use tool_call::ToolCallSeam;
pub use tool_result::{withheld as withheld_result, ToolResultSeam};

use super::decision::InterceptResult;
use chimera_plugin_api::abi::{self, SeamInput, SeamValue, SessionView};

mod sealed {
    pub trait Sealed {}
}
pub(crate) use sealed::Sealed;

/// A replacement that does not fit the seam. Public only because the sealed
/// [`SeamSpec`] names it; it is not reachable from outside the crate.
#[doc(hidden)]
#[allow(
    unreachable_pub,
    reason = "named by the sealed SeamSpec trait, never exported"
)]
pub enum Invalid {
    /// The expected slot was empty; what was there instead.
    WrongType(String),
    /// The slot was there but its content is unusable.
    Malformed(String),
}

/// The static description of a seam. Sealed: the four seams below are the
/// only implementations.
pub trait SeamSpec: Sealed + Sized + Send + Sync + 'static {
    /// The ABI identifier.
    const SEAM: abi::Seam;
    /// The canonical name (`tool_call`).
    const NAME: &'static str;
    /// `true` when an interceptor failure blocks (only `tool_call`).
    const FAIL_CLOSED: bool;
    /// The replacement type's name, for error messages.
    const EXPECTED: &'static str;
    /// The value the chain decides on.
    type Value: Clone + Send + Sync + 'static;
    /// What the chain receives before the value (the call, for `tool_result`).
    type Lead: ?Sized;
    /// The host closure type.
    type HostFn: ?Sized + Send + Sync;

    #[doc(hidden)]
    fn call_host(
        f: &Self::HostFn,
        lead: &Self::Lead,
        value: &Self::Value,
    ) -> InterceptResult<Self::Value>;

    #[doc(hidden)]
    fn with_input<R>(
        lead: &Self::Lead,
        value: &Self::Value,
        session: &SessionView<'_>,
        f: impl FnOnce(&SeamInput<'_>) -> R,
    ) -> R;

    #[doc(hidden)]
    fn from_abi(value: SeamValue, current: &Self::Value) -> Result<Self::Value, Invalid>;

    /// Fixes up any replacement before it is adopted (the tool call keeps its id).
    #[doc(hidden)]
    fn adopt(replacement: Self::Value, _current: &Self::Value) -> Self::Value {
        replacement
    }

    /// `(tool_name, call_id)` for events; empty on non-tool seams.
    #[doc(hidden)]
    fn tool_ids<'a>(_lead: &'a Self::Lead, _value: &'a Self::Value) -> (&'a str, &'a str) {
        ("", "")
    }
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
