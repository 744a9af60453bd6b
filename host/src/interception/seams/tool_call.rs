//! The `tool_call` seam: before each proposed call runs — before `PreToolUse`
//! hooks and the permission policy. **Fail-closed.** A replacement may change
//! the name and arguments; the call id always stays the original. A block
//! denies the call (`Blocked by interceptor: <reason>`) and the run goes on.

use super::views::{tool_call_from_abi, tool_call_view};
use super::{empty_input, Decided, Invalid, SeamAbi, SeamShape, ToolCallSeam};
use crate::types::ToolCall;
use abi_stable::std_types::ROption;
use chimera_plugin_api::abi::{SeamInput, SeamValue, SessionView};

impl Decided for ToolCall {
    fn from_replacement(value: SeamValue, _current: &ToolCall) -> Result<ToolCall, Invalid> {
        let described = super::describe(&value);
        match value.tool_call.into_option() {
            Some(call) => tool_call_from_abi(call).map_err(Invalid::Malformed),
            None => Err(Invalid::WrongType(described)),
        }
    }

    fn changes(before: &ToolCall, after: &ToolCall) -> crate::interception::Changes {
        crate::interception::Differ::of(|d| d.tool_call(before, after))
    }
}

impl SeamAbi for ToolCallSeam {
    fn with_input<R>(
        _lead: &(),
        value: &ToolCall,
        session: &SessionView<'_>,
        f: impl FnOnce(&SeamInput<'_>) -> R,
    ) -> R {
        let call = tool_call_view(value);
        f(&SeamInput {
            tool_call: ROption::RSome(&call),
            ..empty_input(Self::SEAM, session)
        })
    }

    /// An edit is the call's new arguments (a JSON object); id and name stay.
    fn edited(current: &ToolCall, payload: &str) -> Result<ToolCall, String> {
        let arguments = crate::types::Arguments::from_json(payload)
            .map_err(|e| format!("the edited arguments are not JSON: {e}"))?;
        if !payload.trim_start().starts_with('{') {
            return Err("the edited arguments must be a JSON object".to_owned());
        }
        Ok(ToolCall {
            id: current.id.clone(),
            name: current.name.clone(),
            arguments,
        })
    }

    fn adopt(mut replacement: ToolCall, current: &ToolCall) -> ToolCall {
        replacement.id.clone_from(&current.id);
        replacement
    }

    fn tool_ids<'a>(_lead: &'a (), value: &'a ToolCall) -> (&'a str, &'a str) {
        (&value.name, &value.id)
    }
}
