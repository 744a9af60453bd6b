//! The `tool_result` seam: after a tool actually executed, before truncation,
//! the transcript, `PostToolUse` hooks and events. Never for denied, blocked or
//! unknown calls. Fail-open. A block withholds the output: the result becomes
//! a *successful* `[tool result withheld by interceptor: <reason>]`.

use super::views::{tool_call_view, tool_result_from_abi, tool_result_view};
use super::{empty_input, Invalid, SeamAbi, SeamSpec};
use crate::interception::{InterceptResult, Interceptor};
use crate::types::{ToolCall, ToolResult};
use abi_stable::std_types::ROption;
use chimera_plugin_api::abi::{self, SeamInput, SeamValue, SessionView};

/// Marker for the `tool_result` seam.
pub struct ToolResultSeam;

type HostFn = dyn Fn(&ToolCall, &ToolResult) -> InterceptResult<ToolResult> + Send + Sync;

impl SeamSpec for ToolResultSeam {
    const NAME: &'static str = "tool_result";
    const FAIL_CLOSED: bool = false;
}

impl SeamAbi for ToolResultSeam {
    const SEAM: abi::Seam = abi::Seam::TOOL_RESULT;
    const EXPECTED: &'static str = "ToolResult";
    type Value = ToolResult;
    type Lead = ToolCall;
    type HostFn = HostFn;

    fn call_host(f: &HostFn, call: &ToolCall, value: &ToolResult) -> InterceptResult<ToolResult> {
        f(call, value)
    }

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

    fn changes(before: &ToolResult, after: &ToolResult) -> crate::audit::Changes {
        crate::audit::Differ::of(|d| d.tool_result(before, after))
    }

    fn from_abi(
        _lead: &Self::Lead,
        value: SeamValue,
        _current: &ToolResult,
    ) -> Result<ToolResult, Invalid> {
        let described = super::describe(&value);
        match value.tool_result.into_option() {
            Some(result) => tool_result_from_abi(result).map_err(Invalid::Malformed),
            None => Err(Invalid::WrongType(described)),
        }
    }

    fn tool_ids<'a>(call: &'a ToolCall, _value: &'a ToolResult) -> (&'a str, &'a str) {
        (&call.name, &call.id)
    }
}

impl Interceptor<ToolResultSeam> {
    /// A host interceptor on `tool_result`.
    pub fn tool_result<F>(name: impl Into<String>, f: F) -> Self
    where
        F: Fn(&ToolCall, &ToolResult) -> InterceptResult<ToolResult> + Send + Sync + 'static,
    {
        let f: Box<HostFn> = Box::new(f);
        Interceptor::host(name, f)
    }
}

/// The result recorded when a `tool_result` interceptor blocks.
#[must_use]
pub fn withheld(reason: &str) -> ToolResult {
    ToolResult::ok(format!("[tool result withheld by interceptor: {reason}]"))
}
