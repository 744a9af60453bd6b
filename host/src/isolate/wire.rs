//! The pack host's wire: compact, versioned, length-prefixed binary frames
//! over a Unix socket pair.
//!
//! ```text
//!  frame   = len:u32 LE (of kind + payload, at most MAX_FRAME) · kind:u8 · payload
//!  str     = len:u32 · UTF-8 bytes          opt<T> = 0 | 1 · T
//!  list<T> = count:u32 · T…                 (a count is checked against the bytes left)
//! ```
//!
//! Child → host: `Hello` (once, first), `Reply`, `State`, `Imported`,
//! `Failed` (the child could not start; one line). Host → child: `Call`,
//! `Export`, `Import`, `Shutdown`.
//!
//! A call carries only the input slots the seam filled: a presence byte
//! says which of messages, request, tool call, tool result, text and
//! extension JSON follow. Every length is bounded before anything is
//! allocated, every string is checked UTF-8, and an unknown kind is an
//! error: the other side may be hostile, and a bad frame is an error value,
//! never a panic.

use abi_stable::std_types::{RBox, ROption, RSlice, RStr, RString, RVec};
use chimera_plugin_api::abi::{
    BlockValue, BlockView, Decision, DecisionKind, HeaderValue, HeaderView, MessageValue,
    MessageView, RequestValue, RequestView, Seam, SeamInput, SeamValue, SessionView, ToolCallValue,
    ToolCallView, ToolResultValue, ToolResultView,
};
use rustix::io::Errno;
use rustix::net::RecvFlags;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The wire version the child announces in its hello.
pub(crate) const WIRE_VERSION: u8 = 1;

/// The largest frame either side accepts (checked before allocating).
pub(crate) const MAX_FRAME: u32 = 64 << 20;

/// Frame kinds.
mod kind {
    pub(super) const HELLO: u8 = 1;
    pub(super) const FAILED: u8 = 2;
    pub(super) const CALL: u8 = 3;
    pub(super) const REPLY: u8 = 4;
    pub(super) const EXPORT: u8 = 5;
    pub(super) const STATE: u8 = 6;
    pub(super) const IMPORT: u8 = 7;
    pub(super) const IMPORTED: u8 = 8;
    pub(super) const SHUTDOWN: u8 = 9;
}

/// Presence bits of a call's input.
mod has {
    pub(super) const MESSAGES: u8 = 1;
    pub(super) const REQUEST: u8 = 2;
    pub(super) const TOOL_CALL: u8 = 4;
    pub(super) const TOOL_RESULT: u8 = 8;
    pub(super) const TEXT: u8 = 16;
    pub(super) const EXTENSION: u8 = 32;
}

/// Why a frame was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WireError {
    /// The frame ended before a field did.
    #[error("truncated frame")]
    Truncated,
    /// A frame longer than [`MAX_FRAME`], or empty.
    #[error("frame length {0} out of bounds")]
    Length(u64),
    /// A string that is not UTF-8.
    #[error("a string is not UTF-8")]
    Utf8,
    /// A frame kind this side does not know (or did not expect here).
    #[error("unexpected frame kind {0}")]
    Kind(u8),
    /// A field that cannot be what it says (a flag other than 0/1, …).
    #[error("malformed frame: {0}")]
    Malformed(&'static str),
    /// Bytes left over after the message.
    #[error("trailing bytes after the message")]
    Trailing,
}

/// The child's first frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hello {
    /// [`WIRE_VERSION`] as the child speaks it.
    pub(crate) wire_version: u8,
    /// The pack's entry-point name.
    pub(crate) name: String,
    /// Its declared version.
    pub(crate) version: String,
    /// Its one-line description.
    pub(crate) description: String,
    /// `(seam, name)` of each interceptor, in registration order.
    pub(crate) registrations: Vec<(u32, String)>,
    /// Its answer to the failure-policy extension (empty: none).
    pub(crate) policy_json: String,
    /// One line per sandbox feature this kernel lacks.
    pub(crate) warnings: Vec<String>,
}

/// A message from the child.
#[derive(Debug)]
pub(crate) enum FromChild {
    /// The pack is loaded and ready.
    Hello(Hello),
    /// The pack could not be loaded; one line.
    Failed(String),
    /// The answer to call `seq`: `allowed` interceptors allowed, then
    /// `decision` (when one answered something else).
    Reply {
        seq: u64,
        allowed: u32,
        decision: Option<Decision>,
    },
    /// The exported state (empty: none).
    State { seq: u64, json: String },
    /// The import's outcome.
    Imported {
        seq: u64,
        outcome: Result<(), String>,
    },
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

/// A message from the host.
#[derive(Debug)]
pub(crate) enum FromHost {
    /// Run interceptors `indices` in order on `input`.
    Call {
        seq: u64,
        seam: u32,
        indices: Vec<u32>,
        input: Box<OwnedInput>,
    },
    /// Export the pack's state.
    Export { seq: u64 },
    /// Import state.
    Import { seq: u64, json: String },
    /// Exit.
    Shutdown,
}

// ---------------------------------------------------------------- encoding

/// Builds one frame in a reusable buffer.
pub(crate) struct Frame<'b> {
    buf: &'b mut Vec<u8>,
}

impl<'b> Frame<'b> {
    fn start(buf: &'b mut Vec<u8>, kind: u8) -> Self {
        buf.clear();
        buf.extend_from_slice(&[0, 0, 0, 0, kind]);
        Frame { buf }
    }

    fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    fn len(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }

    fn str(&mut self, s: &str) {
        self.len(s.len());
        self.buf.extend_from_slice(s.as_bytes());
    }

    fn opt_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.u8(1);
                self.str(s);
            }
            None => self.u8(0),
        }
    }

    fn call_view(&mut self, call: &ToolCallView<'_>) {
        self.str(call.id.as_str());
        self.str(call.name.as_str());
        self.str(call.arguments_json.as_str());
    }

    fn call_value(&mut self, call: &ToolCallValue) {
        self.str(call.id.as_str());
        self.str(call.name.as_str());
        self.str(call.arguments_json.as_str());
    }

    fn message_view(&mut self, m: &MessageView<'_>) {
        self.str(m.role.as_str());
        self.str(m.content.as_str());
        self.len(m.blocks.len());
        for b in m.blocks {
            self.str(b.kind.as_str());
            self.str(b.text.as_str());
            self.str(b.data_json.as_str());
        }
        self.len(m.tool_calls.len());
        for c in m.tool_calls {
            self.call_view(c);
        }
        self.str(m.tool_call_id.as_str());
        self.str(m.name.as_str());
    }

    fn message_value(&mut self, m: &MessageValue) {
        self.str(m.role.as_str());
        self.str(m.content.as_str());
        self.len(m.blocks.len());
        for b in &m.blocks {
            self.str(b.kind.as_str());
            self.str(b.text.as_str());
            self.str(b.data_json.as_str());
        }
        self.len(m.tool_calls.len());
        for c in &m.tool_calls {
            self.call_value(c);
        }
        self.str(m.tool_call_id.as_str());
        self.str(m.name.as_str());
    }

    fn request_view(&mut self, r: &RequestView<'_>) {
        self.str(r.model.as_str());
        self.str(r.tools_json.as_str());
        self.str(r.kwargs_json.as_str());
        match r.headers {
            ROption::RSome(headers) => {
                self.u8(1);
                self.len(headers.len());
                for h in headers {
                    self.str(h.name.as_str());
                    self.str(h.value.as_str());
                }
            }
            ROption::RNone => self.u8(0),
        }
    }

    fn request_value(&mut self, r: &RequestValue) {
        self.str(r.model.as_str());
        self.str(r.tools_json.as_str());
        self.str(r.kwargs_json.as_str());
        match &r.headers {
            ROption::RSome(headers) => {
                self.u8(1);
                self.len(headers.len());
                for h in headers {
                    self.str(h.name.as_str());
                    self.str(h.value.as_str());
                }
            }
            ROption::RNone => self.u8(0),
        }
    }

    fn result_fields(&mut self, output: &str, error: Option<&str>, metadata: &str) {
        self.str(output);
        self.opt_str(error);
        self.str(metadata);
    }

    fn decision(&mut self, d: &Decision) {
        self.u32(d.kind.0);
        self.str(d.reason.as_str());
        let Some(v) = d.value.as_ref().into_option() else {
            self.u8(0);
            return;
        };
        self.u8(1);
        match v.messages.as_ref().into_option() {
            Some(messages) => {
                self.u8(1);
                self.len(messages.len());
                for m in messages {
                    self.message_value(m);
                }
            }
            None => self.u8(0),
        }
        match v.request.as_ref().into_option() {
            Some(r) => {
                self.u8(1);
                self.request_value(r);
            }
            None => self.u8(0),
        }
        match v.tool_call.as_ref().into_option() {
            Some(c) => {
                self.u8(1);
                self.call_value(c);
            }
            None => self.u8(0),
        }
        match v.tool_result.as_ref().into_option() {
            Some(r) => {
                self.u8(1);
                self.result_fields(
                    r.output.as_str(),
                    r.error.as_ref().map(RString::as_str).into_option(),
                    r.metadata_json.as_str(),
                );
            }
            None => self.u8(0),
        }
        self.opt_str(v.text.as_ref().map(RString::as_str).into_option());
        self.opt_str(v.extension_json.as_ref().map(RString::as_str).into_option());
    }

    /// Writes the length prefix; the frame is ready to send.
    fn finish(self) -> &'b [u8] {
        let len = u32::try_from(self.buf.len() - 4).unwrap_or(u32::MAX);
        self.buf[..4].copy_from_slice(&len.to_le_bytes());
        self.buf
    }
}

/// The hello frame.
pub(crate) fn hello<'b>(buf: &'b mut Vec<u8>, hello: &Hello) -> &'b [u8] {
    let mut f = Frame::start(buf, kind::HELLO);
    f.u8(hello.wire_version);
    f.str(&hello.name);
    f.str(&hello.version);
    f.str(&hello.description);
    f.len(hello.registrations.len());
    for (seam, name) in &hello.registrations {
        f.u32(*seam);
        f.str(name);
    }
    f.str(&hello.policy_json);
    f.len(hello.warnings.len());
    for w in &hello.warnings {
        f.str(w);
    }
    f.finish()
}

/// The frame saying the child could not start.
pub(crate) fn failed<'b>(buf: &'b mut Vec<u8>, line: &str) -> &'b [u8] {
    let mut f = Frame::start(buf, kind::FAILED);
    f.str(line);
    f.finish()
}

/// A call frame: interceptors `indices` on `input`. Only the slots `input`
/// fills travel.
pub(crate) fn call<'b>(
    buf: &'b mut Vec<u8>,
    seq: u64,
    indices: &[u32],
    input: &SeamInput<'_>,
) -> &'b [u8] {
    let mut f = Frame::start(buf, kind::CALL);
    f.u64(seq);
    f.u32(input.seam.0);
    f.len(indices.len());
    for i in indices {
        f.u32(*i);
    }
    let s = input.session;
    f.str(s.session_id.as_str());
    for n in [
        s.turn_index,
        s.provider_calls_this_turn,
        s.tool_calls_this_turn,
        s.input_tokens,
        s.output_tokens,
    ] {
        f.u64(n);
    }
    f.str(s.extension_json.as_str());
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
    f.u8(flags);
    if flags & has::MESSAGES != 0 {
        f.len(input.messages.len());
        for m in input.messages {
            f.message_view(m);
        }
    }
    if let ROption::RSome(r) = input.request {
        f.request_view(r);
    }
    if let ROption::RSome(c) = input.tool_call {
        f.call_view(c);
    }
    if let ROption::RSome(r) = input.tool_result {
        f.result_fields(
            r.output.as_str(),
            r.error.map(|e| e.as_str()).into_option(),
            r.metadata_json.as_str(),
        );
    }
    if flags & has::TEXT != 0 {
        f.str(input.text.as_str());
    }
    if flags & has::EXTENSION != 0 {
        f.str(input.extension_json.as_str());
    }
    f.finish()
}

/// A reply frame.
pub(crate) fn reply<'b>(
    buf: &'b mut Vec<u8>,
    seq: u64,
    allowed: u32,
    decision: Option<&Decision>,
) -> &'b [u8] {
    let mut f = Frame::start(buf, kind::REPLY);
    f.u64(seq);
    f.u32(allowed);
    match decision {
        Some(d) => {
            f.u8(1);
            f.decision(d);
        }
        None => f.u8(0),
    }
    f.finish()
}

/// Asks for the pack's state.
pub(crate) fn export(buf: &mut Vec<u8>, seq: u64) -> &[u8] {
    let mut f = Frame::start(buf, kind::EXPORT);
    f.u64(seq);
    f.finish()
}

/// The pack's state.
pub(crate) fn state<'b>(buf: &'b mut Vec<u8>, seq: u64, json: &str) -> &'b [u8] {
    let mut f = Frame::start(buf, kind::STATE);
    f.u64(seq);
    f.str(json);
    f.finish()
}

/// Hands the pack state.
pub(crate) fn import<'b>(buf: &'b mut Vec<u8>, seq: u64, json: &str) -> &'b [u8] {
    let mut f = Frame::start(buf, kind::IMPORT);
    f.u64(seq);
    f.str(json);
    f.finish()
}

/// The import's outcome.
pub(crate) fn imported<'b>(buf: &'b mut Vec<u8>, seq: u64, outcome: Result<(), &str>) -> &'b [u8] {
    let mut f = Frame::start(buf, kind::IMPORTED);
    f.u64(seq);
    f.opt_str(outcome.err());
    f.finish()
}

/// Asks the child to exit.
pub(crate) fn shutdown(buf: &mut Vec<u8>) -> &[u8] {
    Frame::start(buf, kind::SHUTDOWN).finish()
}

// ---------------------------------------------------------------- decoding

/// Reads fields of one frame's payload.
struct Dec<'a> {
    buf: &'a [u8],
}

impl<'a> Dec<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.buf.len() < n {
            return Err(WireError::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, WireError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, WireError> {
        let b = self.take(8)?;
        let mut a = [0; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn flag(&mut self) -> Result<bool, WireError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(WireError::Malformed("a presence flag is not 0 or 1")),
        }
    }

    /// A count of elements each at least `min` bytes long: never more than
    /// the bytes left allow, so a hostile count allocates nothing.
    fn count(&mut self, min: usize) -> Result<usize, WireError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min) > self.buf.len() {
            return Err(WireError::Truncated);
        }
        Ok(n)
    }

    fn str(&mut self) -> Result<String, WireError> {
        let n = self.u32()? as usize;
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| WireError::Utf8)
    }

    fn rstr(&mut self) -> Result<RString, WireError> {
        self.str().map(RString::from)
    }

    fn opt_str(&mut self) -> Result<Option<String>, WireError> {
        if self.flag()? {
            self.str().map(Some)
        } else {
            Ok(None)
        }
    }

    fn call(&mut self) -> Result<ToolCallValue, WireError> {
        Ok(ToolCallValue {
            id: self.rstr()?,
            name: self.rstr()?,
            arguments_json: self.rstr()?,
        })
    }

    fn message(&mut self) -> Result<MessageValue, WireError> {
        let role = self.rstr()?;
        let content = self.rstr()?;
        let n = self.count(12)?;
        let mut blocks = RVec::with_capacity(n);
        for _ in 0..n {
            blocks.push(BlockValue {
                kind: self.rstr()?,
                text: self.rstr()?,
                data_json: self.rstr()?,
            });
        }
        let n = self.count(12)?;
        let mut tool_calls = RVec::with_capacity(n);
        for _ in 0..n {
            tool_calls.push(self.call()?);
        }
        Ok(MessageValue {
            role,
            content,
            blocks,
            tool_calls,
            tool_call_id: self.rstr()?,
            name: self.rstr()?,
        })
    }

    fn messages(&mut self) -> Result<RVec<MessageValue>, WireError> {
        let n = self.count(26)?;
        let mut messages = RVec::with_capacity(n);
        for _ in 0..n {
            messages.push(self.message()?);
        }
        Ok(messages)
    }

    fn request(&mut self) -> Result<RequestValue, WireError> {
        let model = self.rstr()?;
        let tools_json = self.rstr()?;
        let kwargs_json = self.rstr()?;
        let headers = if self.flag()? {
            let n = self.count(8)?;
            let mut headers = RVec::with_capacity(n);
            for _ in 0..n {
                headers.push(HeaderValue {
                    name: self.rstr()?,
                    value: self.rstr()?,
                });
            }
            ROption::RSome(headers)
        } else {
            ROption::RNone
        };
        Ok(RequestValue {
            model,
            tools_json,
            kwargs_json,
            headers,
        })
    }

    fn result(&mut self) -> Result<ToolResultValue, WireError> {
        Ok(ToolResultValue {
            output: self.rstr()?,
            error: self.opt_str()?.map(RString::from).into(),
            metadata_json: self.rstr()?,
        })
    }

    fn decision(&mut self) -> Result<Decision, WireError> {
        let kind = DecisionKind(self.u32()?);
        let reason = self.rstr()?;
        let value = if self.flag()? {
            let messages = if self.flag()? {
                ROption::RSome(self.messages()?)
            } else {
                ROption::RNone
            };
            let request = if self.flag()? {
                ROption::RSome(self.request()?)
            } else {
                ROption::RNone
            };
            let tool_call = if self.flag()? {
                ROption::RSome(self.call()?)
            } else {
                ROption::RNone
            };
            let tool_result = if self.flag()? {
                ROption::RSome(self.result()?)
            } else {
                ROption::RNone
            };
            ROption::RSome(RBox::new(SeamValue {
                messages,
                request,
                tool_call,
                tool_result,
                text: self.opt_str()?.map(RString::from).into(),
                extension_json: self.opt_str()?.map(RString::from).into(),
            }))
        } else {
            ROption::RNone
        };
        Ok(Decision {
            kind,
            reason,
            value,
        })
    }

    fn end(&self) -> Result<(), WireError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(WireError::Trailing)
        }
    }
}

/// Decodes a frame (kind and payload, without the length) from the child.
pub(crate) fn decode_from_child(frame: &[u8]) -> Result<FromChild, WireError> {
    let (&k, payload) = frame.split_first().ok_or(WireError::Truncated)?;
    let mut d = Dec { buf: payload };
    let message = match k {
        kind::HELLO => {
            let wire_version = d.u8()?;
            let name = d.str()?;
            let version = d.str()?;
            let description = d.str()?;
            let n = d.count(8)?;
            let mut registrations = Vec::with_capacity(n);
            for _ in 0..n {
                registrations.push((d.u32()?, d.str()?));
            }
            let policy_json = d.str()?;
            let n = d.count(4)?;
            let mut warnings = Vec::with_capacity(n);
            for _ in 0..n {
                warnings.push(d.str()?);
            }
            FromChild::Hello(Hello {
                wire_version,
                name,
                version,
                description,
                registrations,
                policy_json,
                warnings,
            })
        }
        kind::FAILED => FromChild::Failed(d.str()?),
        kind::REPLY => {
            let seq = d.u64()?;
            let allowed = d.u32()?;
            let decision = if d.flag()? { Some(d.decision()?) } else { None };
            FromChild::Reply {
                seq,
                allowed,
                decision,
            }
        }
        kind::STATE => FromChild::State {
            seq: d.u64()?,
            json: d.str()?,
        },
        kind::IMPORTED => FromChild::Imported {
            seq: d.u64()?,
            outcome: match d.opt_str()? {
                None => Ok(()),
                Some(error) => Err(error),
            },
        },
        other => return Err(WireError::Kind(other)),
    };
    d.end()?;
    Ok(message)
}

/// Decodes a frame (kind and payload, without the length) from the host.
pub(crate) fn decode_from_host(frame: &[u8]) -> Result<FromHost, WireError> {
    let (&k, payload) = frame.split_first().ok_or(WireError::Truncated)?;
    let mut d = Dec { buf: payload };
    let message = match k {
        kind::CALL => {
            let seq = d.u64()?;
            let seam = d.u32()?;
            let n = d.count(4)?;
            let mut indices = Vec::with_capacity(n);
            for _ in 0..n {
                indices.push(d.u32()?);
            }
            let mut input = Box::new(OwnedInput {
                session_id: d.str()?,
                ..OwnedInput::default()
            });
            for slot in &mut input.counters {
                *slot = d.u64()?;
            }
            input.session_extension = d.str()?;
            let flags = d.u8()?;
            if flags & !0x3f != 0 {
                return Err(WireError::Malformed("unknown input slots"));
            }
            if flags & has::MESSAGES != 0 {
                input.messages = d.messages()?.into_vec();
            }
            if flags & has::REQUEST != 0 {
                input.request = Some(d.request()?);
            }
            if flags & has::TOOL_CALL != 0 {
                input.tool_call = Some(d.call()?);
            }
            if flags & has::TOOL_RESULT != 0 {
                input.tool_result = Some(d.result()?);
            }
            if flags & has::TEXT != 0 {
                input.text = d.str()?;
            }
            if flags & has::EXTENSION != 0 {
                input.extension_json = d.str()?;
            }
            FromHost::Call {
                seq,
                seam,
                indices,
                input,
            }
        }
        kind::EXPORT => FromHost::Export { seq: d.u64()? },
        kind::IMPORT => FromHost::Import {
            seq: d.u64()?,
            json: d.str()?,
        },
        kind::SHUTDOWN => FromHost::Shutdown,
        other => return Err(WireError::Kind(other)),
    };
    d.end()?;
    Ok(message)
}

/// Why reading a frame failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    /// The socket failed, timed out, or closed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The length prefix is out of bounds.
    #[error(transparent)]
    Wire(#[from] WireError),
}

/// Reads one frame (kind and payload) into `buf`. The length is checked
/// against [`MAX_FRAME`] before anything is allocated.
pub(crate) fn read_frame(reader: &mut impl Read, buf: &mut Vec<u8>) -> Result<(), ReadError> {
    let mut len = [0; 4];
    reader.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len);
    if len == 0 || len > MAX_FRAME {
        return Err(WireError::Length(u64::from(len)).into());
    }
    buf.clear();
    buf.resize(len as usize, 0);
    reader.read_exact(buf)?;
    Ok(())
}

/// Sends a frame built by one of the encoders.
pub(crate) fn write_frame(writer: &mut impl Write, frame: &[u8]) -> io::Result<()> {
    if frame.len() - 4 > MAX_FRAME as usize {
        return Err(io::Error::other("frame too large for the pack host wire"));
    }
    writer.write_all(frame)
}

// ---------------------------------------------------------------- spinning

/// How long the host polls for a reply before it blocks: most calls are
/// answered well within this, and a blocking read that has to be woken
/// costs tens of microseconds on a virtual machine.
pub(crate) const HOST_SPIN: Duration = Duration::from_micros(50);

/// How long the child polls for the next call after each answer before it
/// blocks: the interceptors of one chain run, or of back-to-back seams,
/// then never wait for a wake-up. It is also the most CPU time an idle
/// child burns per call.
pub(crate) const CHILD_SPIN: Duration = Duration::from_micros(100);

/// `wanted`, or nothing on a machine (or a CPU set) of one processor: there
/// a poller only keeps the other side from running.
pub(crate) fn spin_budget(wanted: Duration) -> Duration {
    static SEVERAL_CPUS: OnceLock<bool> = OnceLock::new();
    let several = *SEVERAL_CPUS
        .get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1));
    if several {
        wanted
    } else {
        Duration::ZERO
    }
}

/// Reads what `socket` has without blocking, polling until `until`: what
/// the read returned (`Ok(0)` is the end of the stream), or `None` if
/// nothing arrived by then. Each round is one non-blocking `recv` and a
/// `sched_yield`: a poller gives way to whatever else is runnable on its
/// processor (the other pack hosts of a chain, the host's own threads), so
/// it only uses time nobody else wants.
pub(crate) fn poll_read(
    socket: impl AsFd,
    buf: &mut [u8],
    until: Instant,
) -> Option<io::Result<usize>> {
    loop {
        match rustix::net::recv(&socket, &mut *buf, RecvFlags::DONTWAIT) {
            Ok((n, _)) => return Some(Ok(n)),
            Err(Errno::AGAIN | Errno::INTR) => {}
            Err(e) => return Some(Err(e.into())),
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::yield_now();
    }
}

/// A socket read that polls for [`Spinning::spin`] before each blocking
/// read: the child's reader between calls.
pub(crate) struct Spinning<S> {
    /// The socket.
    pub(crate) socket: S,
    /// How long each read polls before it blocks.
    pub(crate) spin: Duration,
}

impl<S: AsFd + Read> Read for Spinning<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.spin.is_zero() && !buf.is_empty() {
            if let Some(got) = poll_read(&self.socket, buf, Instant::now() + self.spin) {
                return got;
            }
        }
        self.socket.read(buf)
    }
}

// ---------------------------------------------------------------- views

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
mod tests {
    use super::*;

    fn message(role: &str, content: &str) -> MessageValue {
        MessageValue {
            role: role.into(),
            content: content.into(),
            blocks: RVec::from(vec![BlockValue {
                kind: "text".into(),
                text: "b".into(),
                data_json: "{}".into(),
            }]),
            tool_calls: RVec::from(vec![ToolCallValue {
                id: "c1".into(),
                name: "bash".into(),
                arguments_json: "{\"cmd\":\"ls\"}".into(),
            }]),
            tool_call_id: "t".into(),
            name: "n".into(),
        }
    }

    fn full_input() -> OwnedInput {
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

    fn decisions() -> Vec<Decision> {
        vec![
            Decision::allow(),
            Decision::block("no ✗"),
            Decision::error("broke"),
            Decision::hold(12),
            Decision::allow().with_notice("heads up"),
            Decision::retry("again", 2, Some("enough")),
            Decision::ask("ok?", &["allow", "reject"], Some(5), "reject"),
            Decision::replace(SeamValue {
                messages: ROption::RSome(RVec::from(vec![message("user", "x")])),
                request: ROption::RSome(RequestValue {
                    model: "m".into(),
                    tools_json: "[]".into(),
                    kwargs_json: "{}".into(),
                    headers: ROption::RNone,
                }),
                tool_call: ROption::RSome(ToolCallValue::default()),
                tool_result: ROption::RSome(ToolResultValue {
                    output: "o".into(),
                    error: ROption::RNone,
                    metadata_json: "{}".into(),
                }),
                text: ROption::RSome("t".into()),
                extension_json: ROption::RNone,
            })
            .with_notice("redacted"),
        ]
    }

    #[test]
    fn a_reply_round_trips_every_decision_with_its_value_and_notice() {
        let mut buf = Vec::new();
        for decision in decisions() {
            let frame = reply(&mut buf, 9, 2, Some(&decision)).to_vec();
            let FromChild::Reply {
                seq,
                allowed,
                decision: Some(back),
            } = decode_from_child(&frame[4..]).unwrap()
            else {
                panic!("a reply");
            };
            assert_eq!((seq, allowed), (9, 2));
            assert_eq!(format!("{decision:?}"), format!("{back:?}"));
            assert_eq!(decision.notice(), back.notice());
        }
        let frame = reply(&mut buf, 1, 3, None).to_vec();
        assert!(matches!(
            decode_from_child(&frame[4..]).unwrap(),
            FromChild::Reply {
                seq: 1,
                allowed: 3,
                decision: None
            }
        ));
    }

    #[test]
    fn hello_state_and_import_frames_round_trip() {
        let sent = Hello {
            wire_version: WIRE_VERSION,
            name: "fixture".to_owned(),
            version: "0.1.0".to_owned(),
            description: "d".to_owned(),
            registrations: vec![(2, "tool_call".to_owned()), (6, "gate".to_owned())],
            policy_json: "{\"fail_closed\":[]}".to_owned(),
            warnings: vec!["no landlock".to_owned()],
        };
        let mut buf = Vec::new();
        let frame = hello(&mut buf, &sent).to_vec();
        let FromChild::Hello(back) = decode_from_child(&frame[4..]).unwrap() else {
            panic!("a hello");
        };
        assert_eq!(back, sent);
        let frame = state(&mut buf, 4, "{\"n\":1}").to_vec();
        assert!(matches!(
            decode_from_child(&frame[4..]).unwrap(),
            FromChild::State { seq: 4, json } if json == "{\"n\":1}"
        ));
        let frame = imported(&mut buf, 5, Err("bad")).to_vec();
        assert!(matches!(
            decode_from_child(&frame[4..]).unwrap(),
            FromChild::Imported { seq: 5, outcome: Err(e) } if e == "bad"
        ));
        let frame = import(&mut buf, 6, "{}").to_vec();
        assert!(matches!(
            decode_from_host(&frame[4..]).unwrap(),
            FromHost::Import { seq: 6, json } if json == "{}"
        ));
        let frame = export(&mut buf, 8).to_vec();
        assert!(matches!(
            decode_from_host(&frame[4..]).unwrap(),
            FromHost::Export { seq: 8 }
        ));
        let frame = shutdown(&mut buf).to_vec();
        assert!(matches!(
            decode_from_host(&frame[4..]).unwrap(),
            FromHost::Shutdown
        ));
    }

    #[test]
    fn every_truncation_of_a_frame_is_an_error_not_a_panic() {
        let mut buf = Vec::new();
        let input = full_input();
        let call_frame = input.with_view(Seam::PROVIDER_REQUEST, |v| {
            call(&mut buf, 1, &[0], v).to_vec()
        });
        for cut in 0..call_frame.len() - 4 {
            assert!(decode_from_host(&call_frame[4..4 + cut]).is_err(), "{cut}");
        }
        for decision in decisions() {
            let frame = reply(&mut buf, 1, 0, Some(&decision)).to_vec();
            for cut in 0..frame.len() - 4 {
                assert!(decode_from_child(&frame[4..4 + cut]).is_err());
            }
        }
    }

    #[test]
    fn hostile_frames_are_refused_with_an_error() {
        // Unknown kinds, on either side.
        assert_eq!(decode_from_child(&[200]).unwrap_err(), WireError::Kind(200));
        assert_eq!(decode_from_host(&[0]).unwrap_err(), WireError::Kind(0));
        // A frame for the other direction is an unknown kind here.
        assert!(decode_from_child(&[kind::CALL, 0]).is_err());
        // Bad UTF-8 in a string.
        let mut frame = vec![kind::FAILED];
        frame.extend_from_slice(&2u32.to_le_bytes());
        frame.extend_from_slice(&[0xff, 0xfe]);
        assert_eq!(decode_from_child(&frame).unwrap_err(), WireError::Utf8);
        // A string length far beyond the frame.
        let mut frame = vec![kind::FAILED];
        frame.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode_from_child(&frame).unwrap_err(), WireError::Truncated);
        // A huge element count allocates nothing: refused up front.
        let mut frame = vec![kind::REPLY];
        frame.extend_from_slice(&1u64.to_le_bytes());
        frame.extend_from_slice(&0u32.to_le_bytes());
        frame.push(1); // a decision
        frame.extend_from_slice(&1u32.to_le_bytes()); // REPLACE
        frame.extend_from_slice(&0u32.to_le_bytes()); // reason ""
        frame.push(1); // a value
        frame.push(1); // messages
        frame.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode_from_child(&frame).unwrap_err(), WireError::Truncated);
        // A presence flag that is neither 0 nor 1.
        let mut frame = vec![kind::IMPORTED];
        frame.extend_from_slice(&1u64.to_le_bytes());
        frame.push(7);
        assert!(matches!(
            decode_from_child(&frame).unwrap_err(),
            WireError::Malformed(_)
        ));
        // Trailing bytes.
        let mut buf = Vec::new();
        let mut frame = reply(&mut buf, 1, 0, None)[4..].to_vec();
        frame.push(0);
        assert_eq!(decode_from_child(&frame).unwrap_err(), WireError::Trailing);
        // An empty frame.
        assert!(decode_from_child(&[]).is_err());
    }

    #[test]
    fn a_length_prefix_beyond_the_cap_is_refused_before_allocating() {
        let mut bytes = (MAX_FRAME + 1).to_le_bytes().to_vec();
        bytes.extend_from_slice(&[kind::REPLY; 16]);
        let mut buf = Vec::new();
        let error = read_frame(&mut bytes.as_slice(), &mut buf).unwrap_err();
        assert!(matches!(error, ReadError::Wire(WireError::Length(_))));
        assert!(buf.capacity() < 1024);
        let zero = 0u32.to_le_bytes();
        assert!(read_frame(&mut zero.as_slice(), &mut buf).is_err());
        // A frame cut short by the peer is an I/O error (EOF).
        let mut short = 10u32.to_le_bytes().to_vec();
        short.push(kind::REPLY);
        assert!(matches!(
            read_frame(&mut short.as_slice(), &mut buf).unwrap_err(),
            ReadError::Io(_)
        ));
    }

    #[test]
    fn polling_reads_what_arrived_gives_up_at_its_deadline_and_sees_the_end() {
        use std::os::unix::net::UnixStream;
        let (mut a, b) = UnixStream::pair().unwrap();
        let mut buf = [0; 8];
        let started = Instant::now();
        let until = started + Duration::from_millis(5);
        assert!(poll_read(&b, &mut buf, until).is_none());
        assert!(started.elapsed() >= Duration::from_millis(5));
        a.write_all(b"hi").unwrap();
        let mut spinning = Spinning {
            socket: b,
            spin: Duration::from_millis(5),
        };
        assert_eq!(spinning.read(&mut buf).unwrap(), 2);
        assert_eq!(&buf[..2], b"hi");
        drop(a);
        assert_eq!(spinning.read(&mut buf).unwrap(), 0);
        // No spin budget at all: a plain blocking read.
        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(b"x").unwrap();
        let mut blocking = Spinning {
            socket: b,
            spin: Duration::ZERO,
        };
        assert_eq!(blocking.read(&mut buf).unwrap(), 1);
    }
}
