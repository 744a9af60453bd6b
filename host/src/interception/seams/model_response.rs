//! The `model_response` seam: each model reply, streamed or not, before it
//! enters the conversation. Fail-open. A replacement is the reply's new text
//! (the tool calls are kept: redaction); a block makes the loop publish one
//! substitute reply instead — no tool calls, finish reason `vetoed`, the
//! notice or the reason as its text — which no later seam judges again.

use super::views::tool_call_view;
use super::{empty_input, ModelResponseSeam, SeamAbi, SeamShape};
use crate::types::ToolCall;
use abi_stable::std_types::{RSlice, RStr};
use chimera_plugin_api::abi::{MessageView, SeamInput, SessionView};

/// What the `model_response` chain knows of a reply besides its text.
#[derive(Debug, Clone, Default)]
pub struct ReplyFacts {
    /// The tool calls the reply proposes (kept by a replacement).
    pub tool_calls: Vec<ToolCall>,
    /// True when the reply was streamed.
    pub streamed: bool,
}

impl SeamAbi for ModelResponseSeam {
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
}
