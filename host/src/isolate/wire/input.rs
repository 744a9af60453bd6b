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

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::isolate::wire::message::{call, decode_from_host, FromHost};
    use crate::isolate::wire::value::tests::message;
    use abi_stable::std_types::RVec;
    use chimera_plugin_api::abi::HeaderValue;

    /// An input with every slot filled.
    pub(in crate::isolate::wire) fn full_input() -> OwnedInput {
        OwnedInput {
            session_id: "s1".to_owned(),
            counters: [1, 2, 3, 4, 5],
            session_extension: "{\"x\":1}".to_owned(),
            messages: vec![message("user", "hi ✓"), message("assistant", "")],
            request: Some(RequestValue {
                model: "m".into(),
                tools_json: "[]".into(),
                kwargs_json: "{}".into(),
                headers: ROption::RSome(RVec::from(vec![HeaderValue {
                    name: "k".into(),
                    value: "v".into(),
                }])),
            }),
            tool_call: Some(ToolCallValue {
                id: "c".into(),
                name: "write_file".into(),
                arguments_json: "{}".into(),
            }),
            tool_result: Some(ToolResultValue {
                output: "out".into(),
                error: ROption::RSome("err".into()),
                metadata_json: "{}".into(),
            }),
            text: "text".to_owned(),
            extension_json: "{\"released\":0}".to_owned(),
        }
    }

    /// Encodes `input` as a call on `seam`, decodes it, and returns what
    /// the child would see.
    fn through_the_wire(input: &OwnedInput, seam: Seam) -> (u64, u32, Vec<u32>, OwnedInput) {
        let mut buf = Vec::new();
        let frame = input.with_view(seam, |view| call(&mut buf, 7, &[0, 2], view).to_vec());
        assert_eq!(
            u32::from_le_bytes(frame[..4].try_into().unwrap()) as usize,
            frame.len() - 4
        );
        match decode_from_host(&frame[4..]).unwrap() {
            FromHost::Call {
                seq,
                seam,
                indices,
                input,
            } => (seq, seam, indices, *input),
            other => panic!("{other:?}"),
        }
    }

    fn same(a: &OwnedInput, b: &OwnedInput) -> bool {
        format!("{a:?}") == format!("{b:?}")
    }

    #[test]
    fn a_call_round_trips_every_field_of_its_input() {
        let input = full_input();
        let (seq, seam, indices, back) = through_the_wire(&input, Seam::TOOL_RESULT);
        assert_eq!((seq, seam, indices), (7, 3, vec![0, 2]));
        assert!(same(&input, &back), "{input:?}\n{back:?}");
    }

    #[test]
    fn each_seam_sends_only_the_slots_it_fills() {
        let full = full_input();
        let only = |f: &dyn Fn(&mut OwnedInput)| {
            let mut input = OwnedInput {
                session_id: full.session_id.clone(),
                counters: full.counters,
                session_extension: full.session_extension.clone(),
                ..OwnedInput::default()
            };
            f(&mut input);
            input
        };
        let cases: Vec<(Seam, OwnedInput)> = vec![
            (
                Seam::CONTEXT,
                only(&|i| i.messages.clone_from(&full.messages)),
            ),
            (
                Seam::PROVIDER_REQUEST,
                only(&|i| {
                    i.messages.clone_from(&full.messages);
                    i.request.clone_from(&full.request);
                }),
            ),
            (
                Seam::TOOL_CALL,
                only(&|i| i.tool_call.clone_from(&full.tool_call)),
            ),
            (
                Seam::TOOL_RESULT,
                only(&|i| {
                    i.tool_call.clone_from(&full.tool_call);
                    i.tool_result.clone_from(&full.tool_result);
                }),
            ),
            (
                Seam::MODEL_RESPONSE,
                only(&|i| {
                    i.messages.clone_from(&full.messages);
                    i.text.clone_from(&full.text);
                    i.extension_json = "{\"streamed\":false}".to_owned();
                }),
            ),
            (Seam::OUTPUT, only(&|i| i.text.clone_from(&full.text))),
            (
                Seam::STREAM_CHUNK,
                only(&|i| {
                    i.text.clone_from(&full.text);
                    i.extension_json.clone_from(&full.extension_json);
                }),
            ),
        ];
        for (seam, input) in cases {
            let (_, got_seam, _, back) = through_the_wire(&input, seam);
            assert_eq!(got_seam, seam.0);
            assert!(same(&input, &back), "{seam}: {input:?}\n{back:?}");
        }
        // A tool_call input is small: no messages, no request travel.
        let mut buf = Vec::new();
        let small = only(&|i| i.tool_call.clone_from(&full.tool_call));
        let len = small.with_view(Seam::TOOL_CALL, |v| call(&mut buf, 1, &[0], v).len());
        assert!(len < 120, "{len} bytes");
    }
}
