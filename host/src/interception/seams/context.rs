//! The `context` seam: before every provider call, after durable
//! before-model middleware. Sees the messages about to be sent; a replacement
//! shapes only this call's payload (the durable conversation is untouched). A
//! block means no provider call and the run ends. Fail-open.

use super::edit::Edit;
use super::views::{messages_from_abi, with_message_views};
use super::{empty_input, ContextSeam, Decided, Invalid, SeamAbi, SeamShape};
use crate::types::Message;
use chimera_plugin_api::abi::{SeamInput, SeamValue, SessionView};

impl SeamAbi for ContextSeam {
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

    fn from_abi(
        _lead: &Self::Lead,
        value: SeamValue,
        current: &Vec<Message>,
    ) -> Result<Vec<Message>, Invalid> {
        if let Some(edit) = Edit::of(&value)? {
            return edit.apply(current, value.messages.into_option());
        }
        Decided::from_replacement(value, current)
    }
}

impl Decided for Vec<Message> {
    fn from_replacement(
        value: SeamValue,
        _current: &Vec<Message>,
    ) -> Result<Vec<Message>, Invalid> {
        let described = super::describe(&value);
        match messages_from_abi(value.messages) {
            Some(messages) => messages.map_err(Invalid::Malformed),
            None => Err(Invalid::WrongType(described)),
        }
    }

    fn changes(before: &Vec<Message>, after: &Vec<Message>) -> crate::interception::Changes {
        crate::interception::Differ::of(|d| d.messages(before, after))
    }
}
