//! The `context` seam: before every provider call, after durable
//! before-model middleware. Sees the messages about to be sent; a replacement
//! shapes only this call's payload (the durable conversation is untouched). A
//! block means no provider call and the run ends. Fail-open.

use super::edit::Edit;
use super::views::{messages_from_abi, with_message_views};
use super::{empty_input, Invalid, SeamAbi, SeamSpec};
use crate::interception::{InterceptResult, Interceptor};
use crate::types::Message;
use chimera_plugin_api::abi::{self, SeamInput, SeamValue, SessionView};

/// Marker for the `context` seam.
pub struct ContextSeam;

type HostFn = dyn Fn(&[Message]) -> InterceptResult<Vec<Message>> + Send + Sync;

impl SeamSpec for ContextSeam {
    const NAME: &'static str = "context";
    const FAIL_CLOSED: bool = false;
}

impl SeamAbi for ContextSeam {
    const SEAM: abi::Seam = abi::Seam::CONTEXT;
    const EXPECTED: &'static str = "Messages";
    type Value = Vec<Message>;
    type Lead = ();
    type HostFn = HostFn;

    fn call_host(f: &HostFn, _lead: &(), value: &Vec<Message>) -> InterceptResult<Vec<Message>> {
        f(value)
    }

    fn with_input<R>(
        _lead: &(),
        value: &Vec<Message>,
        session: &SessionView<'_>,
        f: impl FnOnce(&SeamInput<'_>) -> R,
    ) -> R {
        with_message_views(value, |messages| {
            f(&SeamInput {
                messages,
                ..empty_input(Self::SEAM, session)
            })
        })
    }

    fn changes(before: &Vec<Message>, after: &Vec<Message>) -> crate::audit::Changes {
        crate::audit::Differ::of(|d| d.messages(before, after))
    }

    fn from_abi(
        _lead: &Self::Lead,
        value: SeamValue,
        current: &Vec<Message>,
    ) -> Result<Vec<Message>, Invalid> {
        if let Some(edit) = Edit::of(&value)? {
            return edit.apply(current, value.messages.into_option());
        }
        let described = super::describe(&value);
        match messages_from_abi(value.messages) {
            Some(messages) => messages.map_err(Invalid::Malformed),
            None => Err(Invalid::WrongType(described)),
        }
    }
}

impl Interceptor<ContextSeam> {
    /// A host interceptor on `context`.
    pub fn context<F>(name: impl Into<String>, f: F) -> Self
    where
        F: Fn(&[Message]) -> InterceptResult<Vec<Message>> + Send + Sync + 'static,
    {
        let f: Box<HostFn> = Box::new(f);
        Interceptor::host(name, f)
    }
}
