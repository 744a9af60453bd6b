//! The codec of the ABI's values: tool calls, messages (with their blocks
//! and tool calls), requests (with their headers), tool results and
//! decisions (with a replacement value). A borrowed view and its owned
//! value encode to the same bytes; both decode to the owned value.

use super::frame::{Dec, Frame, WireError};
use abi_stable::std_types::{RBox, RString, RVec};
use chimera_plugin_api::abi::{
    BlockValue, BlockView, Decision, DecisionKind, HeaderValue, HeaderView, MessageValue,
    MessageView, RequestValue, RequestView, SeamValue, ToolCallValue, ToolCallView,
    ToolResultValue,
};

/// Something that writes itself into a frame.
pub(super) trait Encode {
    /// Appends `self`'s fields to `f`.
    fn encode(&self, f: &mut Frame<'_>);
}

/// Implements [`Encode`] once for a view and its owned value: they spell
/// their fields alike (`as_str`, `iter`, `as_ref` work on both), so one
/// body serves the pair.
macro_rules! encode_alike {
    ($view:ty, $value:ty, |$f:ident, $v:ident| $body:block) => {
        impl Encode for $view {
            fn encode(&self, $f: &mut Frame<'_>) {
                let $v = self;
                $body
            }
        }
        impl Encode for $value {
            fn encode(&self, $f: &mut Frame<'_>) {
                let $v = self;
                $body
            }
        }
    };
}

encode_alike!(ToolCallView<'_>, ToolCallValue, |f, c| {
    f.str(c.id.as_str());
    f.str(c.name.as_str());
    f.str(c.arguments_json.as_str());
});

encode_alike!(BlockView<'_>, BlockValue, |f, b| {
    f.str(b.kind.as_str());
    f.str(b.text.as_str());
    f.str(b.data_json.as_str());
});

encode_alike!(HeaderView<'_>, HeaderValue, |f, h| {
    f.str(h.name.as_str());
    f.str(h.value.as_str());
});

encode_alike!(MessageView<'_>, MessageValue, |f, m| {
    f.str(m.role.as_str());
    f.str(m.content.as_str());
    f.list(&m.blocks);
    f.list(&m.tool_calls);
    f.str(m.tool_call_id.as_str());
    f.str(m.name.as_str());
});

encode_alike!(RequestView<'_>, RequestValue, |f, r| {
    f.str(r.model.as_str());
    f.str(r.tools_json.as_str());
    f.str(r.kwargs_json.as_str());
    f.opt(r.headers.as_ref().into_option(), |f, h| f.list(h));
});

impl Frame<'_> {
    /// A count, then each item.
    pub(super) fn list<T: Encode>(&mut self, items: &[T]) {
        self.len(items.len());
        for item in items {
            item.encode(self);
        }
    }

    /// A tool result's fields, from a view or a value.
    pub(super) fn result_fields(&mut self, output: &str, error: Option<&str>, metadata: &str) {
        self.str(output);
        self.opt_str(error);
        self.str(metadata);
    }

    pub(super) fn decision(&mut self, d: &Decision) {
        self.u32(d.kind.0);
        self.str(d.reason.as_str());
        self.opt(d.value.as_ref().into_option(), |f, v| {
            f.opt(v.messages.as_ref().into_option(), |f, m| f.list(m));
            f.opt(v.request.as_ref().into_option(), |f, r| r.encode(f));
            f.opt(v.tool_call.as_ref().into_option(), |f, c| c.encode(f));
            f.opt(v.tool_result.as_ref().into_option(), |f, r| {
                f.result_fields(
                    r.output.as_str(),
                    r.error.as_ref().map(RString::as_str).into_option(),
                    r.metadata_json.as_str(),
                );
            });
            f.opt_str(v.text.as_ref().map(RString::as_str).into_option());
            f.opt_str(v.extension_json.as_ref().map(RString::as_str).into_option());
        });
    }
}

impl Dec<'_> {
    pub(super) fn call(&mut self) -> Result<ToolCallValue, WireError> {
        Ok(ToolCallValue {
            id: self.rstr()?,
            name: self.rstr()?,
            arguments_json: self.rstr()?,
        })
    }

    fn message(&mut self) -> Result<MessageValue, WireError> {
        let role = self.rstr()?;
        let content = self.rstr()?;
        let blocks = self.list(12, |d| {
            Ok(BlockValue {
                kind: d.rstr()?,
                text: d.rstr()?,
                data_json: d.rstr()?,
            })
        })?;
        let tool_calls = self.list(12, Self::call)?;
        Ok(MessageValue {
            role,
            content,
            blocks: RVec::from(blocks),
            tool_calls: RVec::from(tool_calls),
            tool_call_id: self.rstr()?,
            name: self.rstr()?,
        })
    }

    pub(super) fn messages(&mut self) -> Result<Vec<MessageValue>, WireError> {
        self.list(26, Self::message)
    }

    pub(super) fn request(&mut self) -> Result<RequestValue, WireError> {
        let model = self.rstr()?;
        let tools_json = self.rstr()?;
        let kwargs_json = self.rstr()?;
        let headers = self.opt(|d| {
            d.list(8, |d| {
                Ok(HeaderValue {
                    name: d.rstr()?,
                    value: d.rstr()?,
                })
            })
        })?;
        Ok(RequestValue {
            model,
            tools_json,
            kwargs_json,
            headers: headers.map(RVec::from).into(),
        })
    }

    pub(super) fn result(&mut self) -> Result<ToolResultValue, WireError> {
        Ok(ToolResultValue {
            output: self.rstr()?,
            error: self.opt_str()?.map(RString::from).into(),
            metadata_json: self.rstr()?,
        })
    }

    pub(super) fn decision(&mut self) -> Result<Decision, WireError> {
        let kind = DecisionKind(self.u32()?);
        let reason = self.rstr()?;
        let value = self.opt(|d| {
            Ok(RBox::new(SeamValue {
                messages: d.opt(Self::messages)?.map(RVec::from).into(),
                request: d.opt(Self::request)?.into(),
                tool_call: d.opt(Self::call)?.into(),
                tool_result: d.opt(Self::result)?.into(),
                text: d.opt_str()?.map(RString::from).into(),
                extension_json: d.opt_str()?.map(RString::from).into(),
            }))
        })?;
        Ok(Decision {
            kind,
            reason,
            value: value.into(),
        })
    }
}
