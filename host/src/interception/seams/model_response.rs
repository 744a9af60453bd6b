//! The `model_response` seam: each model reply, streamed or not, before it
//! enters the conversation. Fail-open. A replacement is the reply's new text
//! (the tool calls are kept: redaction); a block makes the loop publish one
//! substitute reply instead — no tool calls, finish reason `vetoed`, the
//! notice or the reason as its text — which no later seam judges again.

use super::views::tool_call_view;
use super::{describe, empty_input, text_from_abi, Invalid, SeamAbi, SeamSpec};
use crate::interception::{InterceptResult, Interceptor};
use crate::types::ToolCall;
use abi_stable::std_types::{RSlice, RStr};
use chimera_plugin_api::abi::{self, MessageView, SeamInput, SeamValue, SessionView};

/// Marker for the `model_response` seam.
pub struct ModelResponseSeam;

/// What the `model_response` chain knows of a reply besides its text.
#[derive(Debug, Clone, Default)]
pub struct ReplyFacts {
    /// The tool calls the reply proposes (kept by a replacement).
    pub tool_calls: Vec<ToolCall>,
    /// True when the reply was streamed.
    pub streamed: bool,
}

type HostFn = dyn Fn(&ReplyFacts, &str) -> InterceptResult<String> + Send + Sync;

impl SeamSpec for ModelResponseSeam {
    const NAME: &'static str = "model_response";
    const FAIL_CLOSED: bool = false;
}

impl SeamAbi for ModelResponseSeam {
    const SEAM: abi::Seam = abi::Seam::MODEL_RESPONSE;
    const EXPECTED: &'static str = "Text";
    type Value = String;
    type Lead = ReplyFacts;
    type HostFn = HostFn;

    fn call_host(f: &HostFn, facts: &ReplyFacts, value: &String) -> InterceptResult<String> {
        f(facts, value)
    }

    fn with_input<R>(
        facts: &ReplyFacts,
        value: &String,
        session: &SessionView<'_>,
        f: impl FnOnce(&SeamInput<'_>) -> R,
    ) -> R {
        let calls: Vec<_> = facts.tool_calls.iter().map(tool_call_view).collect();
        let message = MessageView {
            role: RStr::from_str("assistant"),
            content: RStr::from_str(value),
            blocks: RSlice::EMPTY,
            tool_calls: RSlice::from_slice(&calls),
            tool_call_id: RStr::from_str(""),
            name: RStr::from_str(""),
        };
        let streamed = if facts.streamed {
            r#"{"streamed":true}"#
        } else {
            r#"{"streamed":false}"#
        };
        f(&SeamInput {
            messages: RSlice::from_slice(std::slice::from_ref(&message)),
            text: RStr::from_str(value),
            extension_json: RStr::from_str(streamed),
            ..empty_input(Self::SEAM, session)
        })
    }

    fn changes(before: &String, after: &String) -> crate::audit::Changes {
        crate::audit::Differ::text_changes(before, after)
    }

    fn from_abi(
        _lead: &Self::Lead,
        value: SeamValue,
        _current: &String,
    ) -> Result<String, Invalid> {
        let described = describe(&value);
        text_from_abi(value).ok_or(Invalid::WrongType(described))
    }
}

impl Interceptor<ModelResponseSeam> {
    /// A host interceptor on `model_response`: sees the reply's facts and
    /// text, answers a new text (tool calls kept) or a block.
    pub fn model_response<F>(name: impl Into<String>, f: F) -> Self
    where
        F: Fn(&ReplyFacts, &str) -> InterceptResult<String> + Send + Sync + 'static,
    {
        let f: Box<HostFn> = Box::new(f);
        Interceptor::host(name, f)
    }
}
