//! Collecting a pack's interceptors, and erasing them to ABI trait objects.

use super::decision::{Decision, InterceptResult};
use super::edit::{MessagesEdit, RequestEdit};
use super::guard;
use super::inputs::{Messages, RequestRef, Session, ToolCallRef, ToolResultRef};
use super::pack::SeamKind;
use super::values::{messages_into_abi, Message, Request, ToolCall, ToolResult};
use crate::abi::{
    self, InterceptorAbi, InterceptorAbi_TO, InterceptorBox, Registration, SeamInput, SeamValue,
};
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{ROption, RString};

/// Where a pack registers its interceptors: any number per seam, each with a
/// name, run in registration order.
///
/// Every closure gets the [`Session`] and the seam's typed input, and answers
/// an [`InterceptResult`]: `Ok(Decision::Allow)`, `Ok(Decision::Replace(v))`,
/// `Ok(Decision::Block(reason))`, or `Err(e)` for a failure the seam's failure
/// policy handles. A panic counts as a failure.
pub struct Registrar {
    pub(crate) entries: Vec<(SeamKind, String, InterceptorBox)>,
}

impl Registrar {
    pub(crate) fn new() -> Self {
        Registrar {
            entries: Vec::new(),
        }
    }

    /// Registers on `context`: sees the message list about to be sent; a
    /// replacement shapes this call only.
    pub fn context<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, Messages<'_>) -> InterceptResult<Vec<Message>> + Send + Sync + 'static,
    {
        self.push(SeamKind::Context, name, move |input| {
            decide(
                || f(Session(input.session), Messages(input.messages)),
                |messages| {
                    Ok(SeamValue {
                        messages: ROption::RSome(messages_into_abi(messages)),
                        ..SeamValue::default()
                    })
                },
            )
        });
    }

    /// Registers on `provider_request`: sees the whole envelope; a
    /// replacement shapes this call only (replaced headers travel with it;
    /// the provider's own are never changed).
    pub fn provider_request<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, RequestRef<'_>) -> InterceptResult<Request> + Send + Sync + 'static,
    {
        self.push(SeamKind::ProviderRequest, name, move |input| {
            let Some(view) = input.request.into_option() else {
                return missing("request envelope");
            };
            let request = RequestRef {
                messages: Messages(input.messages),
                view,
            };
            decide(
                || f(Session(input.session), request),
                |request| Ok(Request::into_abi(request)),
            )
        });
    }

    /// Registers on `context` with a partial edit: the closure answers only
    /// the messages it changes ([`MessagesEdit`]); the rest stay as they are
    /// without being copied. The way to write an edit of a few messages.
    pub fn context_edit<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, Messages<'_>) -> InterceptResult<MessagesEdit> + Send + Sync + 'static,
    {
        self.push(SeamKind::Context, name, move |input| {
            let messages = Messages(input.messages);
            decide(
                || f(Session(input.session), messages),
                |edit| edit.into_abi(input.session, messages),
            )
        });
    }

    /// Registers on `provider_request` with a partial edit: the closure
    /// answers only the messages (and headers) it changes
    /// ([`RequestEdit`]); everything else is kept without being copied. The
    /// way to write a scrub that touches a few messages of a long envelope.
    pub fn provider_request_edit<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, RequestRef<'_>) -> InterceptResult<RequestEdit> + Send + Sync + 'static,
    {
        self.push(SeamKind::ProviderRequest, name, move |input| {
            let Some(view) = input.request.into_option() else {
                return missing("request envelope");
            };
            let request = RequestRef {
                messages: Messages(input.messages),
                view,
            };
            decide(
                || f(Session(input.session), request),
                |edit| edit.into_abi(input.session, request),
            )
        });
    }

    /// Registers on `tool_call`: sees each proposed call before permission
    /// checks. This seam fails closed: an error blocks the call.
    pub fn tool_call<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, ToolCallRef<'_>) -> InterceptResult<ToolCall> + Send + Sync + 'static,
    {
        self.push(SeamKind::ToolCall, name, move |input| {
            let Some(call) = input.tool_call.into_option() else {
                return missing("tool call");
            };
            decide(
                || f(Session(input.session), ToolCallRef(call)),
                |call| {
                    Ok(SeamValue {
                        tool_call: ROption::RSome(call.into_abi()),
                        ..SeamValue::default()
                    })
                },
            )
        });
    }

    /// Registers on `tool_result`: sees the effective call and the result of
    /// a tool that actually ran.
    pub fn tool_result<F>(&mut self, name: &str, f: F)
    where
        F: Fn(Session<'_>, ToolCallRef<'_>, ToolResultRef<'_>) -> InterceptResult<ToolResult>
            + Send
            + Sync
            + 'static,
    {
        self.push(SeamKind::ToolResult, name, move |input| {
            let (Some(call), Some(result)) = (
                input.tool_call.into_option(),
                input.tool_result.into_option(),
            ) else {
                return missing("tool call and result");
            };
            decide(
                || {
                    f(
                        Session(input.session),
                        ToolCallRef(call),
                        ToolResultRef(result),
                    )
                },
                |result| {
                    Ok(SeamValue {
                        tool_result: ROption::RSome(result.into_abi()),
                        ..SeamValue::default()
                    })
                },
            )
        });
    }

    /// Erases `f` straight into the ABI trait object: the host's call
    /// reaches the closure through one vtable, with no second indirection.
    fn push<F>(&mut self, seam: SeamKind, name: &str, f: F)
    where
        F: Fn(&SeamInput<'_>) -> abi::Decision + Send + Sync + 'static,
    {
        let interceptor = InterceptorAbi_TO::from_value(Typed(f), TD_Opaque);
        self.entries.push((seam, name.to_owned(), interceptor));
    }

    pub(crate) fn into_registrations(self) -> Vec<Registration> {
        self.entries
            .into_iter()
            .map(|(seam, name, interceptor)| Registration {
                seam: seam.seam(),
                name: RString::from(name),
                interceptor,
            })
            .collect()
    }
}

fn missing(what: &str) -> abi::Decision {
    abi::Decision::error(format!("the host sent no {what} for this seam"))
}

/// Runs the pack's closure under `catch_unwind` and turns its answer into
/// the ABI's decision inside the same guard, so a panic anywhere — in the
/// closure or while its replacement is converted — is an error decision.
///
/// The guard itself only carries a flag out: the common allow is built
/// after it, straight into the return value. (A whole decision carried
/// out of `catch_unwind` is copied from memory just written, and that
/// copy stalls on store forwarding: measured at a third of a call.)
fn decide<T>(
    body: impl FnOnce() -> InterceptResult<T>,
    into_value: impl FnOnce(T) -> Result<SeamValue, String>,
) -> abi::Decision {
    let mut other: Option<abi::Decision> = None;
    let allowed = guard::catch(|| match body() {
        Ok(Decision::Allow) => true,
        Ok(Decision::Block(reason)) => {
            other = Some(abi::Decision::block(reason));
            false
        }
        Ok(Decision::Replace(value)) => {
            other = Some(match into_value(value) {
                Ok(value) => abi::Decision::replace(value),
                Err(error) => abi::Decision::error(error),
            });
            false
        }
        Err(error) => {
            other = Some(abi::Decision::error(error.as_str()));
            false
        }
    });
    // Matched one at a time: moving both into a tuple would copy them.
    match allowed {
        Ok(true) => abi::Decision::allow(),
        Ok(false) => other.unwrap_or_else(|| abi::Decision::error("no decision was made")),
        Err(panic) => abi::Decision::error(panic),
    }
}

/// A registered closure as the ABI's interceptor.
struct Typed<F>(F);

impl<F> InterceptorAbi for Typed<F>
where
    F: Fn(&SeamInput<'_>) -> abi::Decision + Send + Sync + 'static,
{
    fn intercept(&self, input: &SeamInput<'_>) -> abi::Decision {
        (self.0)(input)
    }
}
