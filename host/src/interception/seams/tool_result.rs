//! The `tool_result` seam: after a tool actually executed, before truncation,
//! the transcript, `PostToolUse` hooks and events. Never for denied, blocked or
//! unknown calls. Fail-open. A block withholds the output: the result becomes
//! a *successful* `[tool result withheld by interceptor: <reason>]`.

use super::views::{tool_call_view, tool_result_from_abi, tool_result_view};
use super::{empty_input, Decided, Invalid, SeamAbi, SeamShape, ToolResultSeam};
use crate::types::{ToolCall, ToolResult};
use abi_stable::std_types::ROption;
use chimera_plugin_api::abi::{SeamInput, SeamValue, SessionView};

impl Decided for ToolResult {
    fn from_replacement(value: SeamValue, _current: &ToolResult) -> Result<ToolResult, Invalid> {
        let described = super::describe(&value);
        match value.tool_result.into_option() {
            Some(result) => tool_result_from_abi(result).map_err(Invalid::Malformed),
            None => Err(Invalid::WrongType(described)),
        }
    }

    fn changes(before: &ToolResult, after: &ToolResult) -> crate::interception::Changes {
        crate::interception::Differ::of(|d| d.tool_result(before, after))
    }
}

impl SeamAbi for ToolResultSeam {
    fn with_input<R>(
        call: &ToolCall,
        value: &ToolResult,
        session: &SessionView<'_>,
        f: impl FnOnce(&SeamInput<'_>) -> R,
    ) -> R {
        let call = tool_call_view(call);
        let result = tool_result_view(value);
        f(&SeamInput {
            tool_call: ROption::RSome(&call),
            tool_result: ROption::RSome(&result),
            ..empty_input(Self::SEAM, session)
        })
    }

    fn tool_ids<'a>(call: &'a ToolCall, _value: &'a ToolResult) -> (&'a str, &'a str) {
        (&call.name, &call.id)
    }
}

/// The result recorded when a `tool_result` interceptor blocks.
#[must_use]
pub fn withheld(reason: &str) -> ToolResult {
    ToolResult::ok(format!("[tool result withheld by interceptor: {reason}]"))
}
