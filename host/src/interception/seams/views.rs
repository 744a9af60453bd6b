//! Host values ↔ ABI views and values. Views borrow; building one allocates
//! only the slices that hold them, once per chain run.

use crate::types::{Arguments, ContentBlock, Message, Role, ToolCall, ToolResult};
use abi_stable::std_types::{ROption, RSlice, RStr};
use chimera_plugin_api::abi::{
    BlockView, MessageValue, MessageView, ToolCallValue, ToolCallView, ToolResultValue,
    ToolResultView,
};
use serde_json::value::RawValue;

fn rstr(text: &str) -> RStr<'_> {
    RStr::from_str(text)
}

pub(crate) fn tool_call_view(call: &ToolCall) -> ToolCallView<'_> {
    ToolCallView {
        id: rstr(&call.id),
        name: rstr(&call.name),
        arguments_json: rstr(call.arguments.as_str()),
    }
}

pub(crate) fn tool_result_view(result: &ToolResult) -> ToolResultView<'_> {
    ToolResultView {
        output: rstr(&result.output),
        error: result.error.as_deref().map(rstr).into(),
        metadata_json: rstr(result.metadata_json()),
    }
}

fn block_view(block: &ContentBlock) -> BlockView<'_> {
    BlockView {
        kind: rstr(&block.kind),
        text: rstr(&block.text),
        data_json: rstr(block.data_json()),
    }
}

/// Runs `f` over views of `messages`. Tool calls and blocks of all messages
/// live in two flat vectors the message views slice into.
pub(crate) fn with_message_views<R>(
    messages: &[Message],
    f: impl FnOnce(RSlice<'_, MessageView<'_>>) -> R,
) -> R {
    let calls: Vec<ToolCallView<'_>> = messages
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(tool_call_view))
        .collect();
    let blocks: Vec<BlockView<'_>> = messages
        .iter()
        .flat_map(|m| m.blocks.iter().map(block_view))
        .collect();
    let (mut call_at, mut block_at) = (0, 0);
    let views: Vec<MessageView<'_>> = messages
        .iter()
        .map(|m| {
            let own_calls = &calls[call_at..call_at + m.tool_calls.len()];
            let own_blocks = &blocks[block_at..block_at + m.blocks.len()];
            call_at += m.tool_calls.len();
            block_at += m.blocks.len();
            MessageView {
                role: rstr(m.role.as_str()),
                content: rstr(&m.content),
                blocks: RSlice::from_slice(own_blocks),
                tool_calls: RSlice::from_slice(own_calls),
                tool_call_id: rstr(m.tool_call_id.as_deref().unwrap_or("")),
                name: rstr(m.name.as_deref().unwrap_or("")),
            }
        })
        .collect();
    f(RSlice::from_slice(&views))
}

/// JSON text to an optional raw value: empty text and `{}` mean "none".
fn optional_raw(text: &str, what: &str) -> Result<Option<Box<RawValue>>, String> {
    match text.trim() {
        "" | "{}" => Ok(None),
        _ => RawValue::from_string(text.to_owned())
            .map(Some)
            .map_err(|error| format!("{what} is not JSON: {error}")),
    }
}

fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

pub(crate) fn tool_call_from_abi(value: ToolCallValue) -> Result<ToolCall, String> {
    let arguments = Arguments::from_json(value.arguments_json.as_str())
        .map_err(|error| format!("tool call arguments are not JSON: {error}"))?;
    Ok(ToolCall {
        id: value.id.into_string(),
        name: value.name.into_string(),
        arguments,
    })
}

pub(crate) fn tool_result_from_abi(value: ToolResultValue) -> Result<ToolResult, String> {
    Ok(ToolResult {
        metadata: optional_raw(value.metadata_json.as_str(), "result metadata")?,
        output: value.output.into_string(),
        error: value
            .error
            .map(abi_stable::std_types::RString::into_string)
            .into_option(),
    })
}

pub(crate) fn message_from_abi(value: MessageValue) -> Result<Message, String> {
    let role = Role::parse(value.role.as_str())
        .ok_or_else(|| format!("unknown message role '{}'", value.role))?;
    let blocks = value
        .blocks
        .into_iter()
        .map(|block| {
            Ok(ContentBlock {
                data: optional_raw(block.data_json.as_str(), "block data")?,
                kind: block.kind.into_string(),
                text: block.text.into_string(),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let tool_calls = value
        .tool_calls
        .into_iter()
        .map(tool_call_from_abi)
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Message {
        role,
        content: value.content.into_string(),
        blocks,
        tool_calls,
        tool_call_id: non_empty(value.tool_call_id.into_string()),
        name: non_empty(value.name.into_string()),
    })
}

pub(crate) fn messages_from_abi(
    values: ROption<abi_stable::std_types::RVec<MessageValue>>,
) -> Option<Result<Vec<Message>, String>> {
    values
        .into_option()
        .map(|values| values.into_iter().map(message_from_abi).collect())
}
