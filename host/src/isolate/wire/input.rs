//! The per-seam codec of a call's input: the session, then a presence byte
//! saying which slots the seam filled (messages, request, tool call, tool
//! result, text, extension JSON) and only those slots; and the owned input
//! the child decodes it into, lent to its interceptors as a [`SeamInput`].

use super::frame::{Dec, Frame, WireError};
use super::value::Encode;
use abi_stable::std_types::{ROption, RSlice, RStr, RString};
use chimera_plugin_api::abi::{
    BlockView, HeaderView, MessageValue, MessageView, RequestValue, RequestView, Seam, SeamInput,
    SessionView, ToolCallValue, ToolCallView, ToolResultValue, ToolResultView,
};

/// Presence bits of a call's input.
mod has {
    pub(super) const MESSAGES: u8 = 1;
    pub(super) const REQUEST: u8 = 2;
    pub(super) const TOOL_CALL: u8 = 4;
    pub(super) const TOOL_RESULT: u8 = 8;
    pub(super) const TEXT: u8 = 16;
    pub(super) const EXTENSION: u8 = 32;
}

/// An input as the child receives it: owned, rebuilt into a
/// [`SeamInput`] view by [`OwnedInput::with_view`].
#[derive(Debug, Clone, Default)]
pub(crate) struct OwnedInput {
    pub(crate) session_id: String,
    pub(crate) counters: [u64; 5],
    pub(crate) session_extension: String,
    pub(crate) messages: Vec<MessageValue>,
    pub(crate) request: Option<RequestValue>,
    pub(crate) tool_call: Option<ToolCallValue>,
    pub(crate) tool_result: Option<ToolResultValue>,
    pub(crate) text: String,
    pub(crate) extension_json: String,
}

impl Frame<'_> {
    /// The session, the presence byte and the slots `input` fills.
    pub(super) fn input(&mut self, input: &SeamInput<'_>) {
        let s = input.session;
        self.str(s.session_id.as_str());
        for n in [
            s.turn_index,
            s.provider_calls_this_turn,
            s.tool_calls_this_turn,
            s.input_tokens,
            s.output_tokens,
        ] {
            self.u64(n);
        }
        self.str(s.extension_json.as_str());
        let mut flags = 0;
        if !input.messages.is_empty() {
            flags |= has::MESSAGES;
        }
        if input.request.is_some() {
            flags |= has::REQUEST;
        }
        if input.tool_call.is_some() {
            flags |= has::TOOL_CALL;
        }
        if input.tool_result.is_some() {
            flags |= has::TOOL_RESULT;
        }
        if !input.text.is_empty() {
            flags |= has::TEXT;
        }
        if !input.extension_json.is_empty() {
            flags |= has::EXTENSION;
        }
        self.u8(flags);
        if flags & has::MESSAGES != 0 {
            self.list(&input.messages);
        }
        if let ROption::RSome(r) = input.request {
            r.encode(self);
        }
        if let ROption::RSome(c) = input.tool_call {
            c.encode(self);
        }
        if let ROption::RSome(r) = input.tool_result {
            self.result_fields(
                r.output.as_str(),
                r.error.map(|e| e.as_str()).into_option(),
                r.metadata_json.as_str(),
            );
        }
        if flags & has::TEXT != 0 {
            self.str(input.text.as_str());
        }
        if flags & has::EXTENSION != 0 {
            self.str(input.extension_json.as_str());
        }
    }
}

impl Dec<'_> {
    /// What [`Frame::input`] wrote.
    pub(super) fn input(&mut self) -> Result<Box<OwnedInput>, WireError> {
        let mut input = Box::new(OwnedInput {
            session_id: self.str()?,
            ..OwnedInput::default()
        });
        for slot in &mut input.counters {
            *slot = self.u64()?;
        }
        input.session_extension = self.str()?;
        let flags = self.u8()?;
        if flags & !0x3f != 0 {
            return Err(WireError::Malformed("unknown input slots"));
        }
        if flags & has::MESSAGES != 0 {
            input.messages = self.messages()?;
        }
        if flags & has::REQUEST != 0 {
            input.request = Some(self.request()?);
        }
        if flags & has::TOOL_CALL != 0 {
            input.tool_call = Some(self.call()?);
        }
        if flags & has::TOOL_RESULT != 0 {
            input.tool_result = Some(self.result()?);
        }
        if flags & has::TEXT != 0 {
            input.text = self.str()?;
        }
        if flags & has::EXTENSION != 0 {
            input.extension_json = self.str()?;
        }
        Ok(input)
    }
}

impl OwnedInput {
    /// Lends the input to `f` as the ABI's borrowed view, on `seam`.
    pub(crate) fn with_view<R>(&self, seam: Seam, f: impl FnOnce(&SeamInput<'_>) -> R) -> R {
        let [turn_index, provider_calls_this_turn, tool_calls_this_turn, input_tokens, output_tokens] =
            self.counters;
        let session = SessionView {
            session_id: RStr::from_str(&self.session_id),
            turn_index,
            provider_calls_this_turn,
            tool_calls_this_turn,
            input_tokens,
            output_tokens,
            extension_json: RStr::from_str(&self.session_extension),
        };
        let blocks: Vec<Vec<BlockView<'_>>> = self
            .messages
            .iter()
            .map(|m| {
                m.blocks
                    .iter()
                    .map(|b| BlockView {
                        kind: b.kind.as_rstr(),
                        text: b.text.as_rstr(),
                        data_json: b.data_json.as_rstr(),
                    })
                    .collect()
            })
            .collect();
        let calls: Vec<Vec<ToolCallView<'_>>> = self
            .messages
            .iter()
            .map(|m| m.tool_calls.iter().map(call_view).collect())
            .collect();
        let messages: Vec<MessageView<'_>> = self
            .messages
            .iter()
            .zip(blocks.iter().zip(&calls))
            .map(|(m, (blocks, calls))| MessageView {
                role: m.role.as_rstr(),
                content: m.content.as_rstr(),
                blocks: RSlice::from_slice(blocks),
                tool_calls: RSlice::from_slice(calls),
                tool_call_id: m.tool_call_id.as_rstr(),
                name: m.name.as_rstr(),
            })
            .collect();
        let headers: Option<Vec<HeaderView<'_>>> = self.request.as_ref().and_then(|r| {
            r.headers.as_ref().into_option().map(|h| {
                h.iter()
                    .map(|h| HeaderView {
                        name: h.name.as_rstr(),
                        value: h.value.as_rstr(),
                    })
                    .collect()
            })
        });
        let request = self.request.as_ref().map(|r| RequestView {
            model: r.model.as_rstr(),
            tools_json: r.tools_json.as_rstr(),
            kwargs_json: r.kwargs_json.as_rstr(),
            headers: headers.as_deref().map(RSlice::from_slice).into(),
        });
        let tool_call = self.tool_call.as_ref().map(call_view);
        let tool_result = self.tool_result.as_ref().map(|r| ToolResultView {
            output: r.output.as_rstr(),
            error: r.error.as_ref().map(RString::as_rstr),
            metadata_json: r.metadata_json.as_rstr(),
        });
        f(&SeamInput {
            seam,
            session: &session,
            messages: RSlice::from_slice(&messages),
            request: request.as_ref().into(),
            tool_call: tool_call.as_ref().into(),
            tool_result: tool_result.as_ref().into(),
            text: RStr::from_str(&self.text),
            extension_json: RStr::from_str(&self.extension_json),
        })
    }
}

fn call_view(c: &ToolCallValue) -> ToolCallView<'_> {
    ToolCallView {
        id: c.id.as_rstr(),
        name: c.name.as_rstr(),
        arguments_json: c.arguments_json.as_rstr(),
    }
}
