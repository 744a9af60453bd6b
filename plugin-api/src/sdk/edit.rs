//! Partial edits: a replacement that names only what changed.
//!
//! A pack that changes 3 of 20 messages hands back those 3, by index; the
//! host keeps the other 17 as they are. Nothing unchanged is copied into the
//! pack's answer, converted across the boundary, or converted back.
//!
//! On the wire this is data in the existing slots (see the ABI's growth
//! rule): the edited messages in `SeamValue::messages`, and
//! `SeamValue::extension_json = {"edit": {"messages": [i, …], "set": [field, …]}}`
//! saying which message each one replaces and which other fields are set.
//! A host advertises that it reads edits in its session view
//! ([`HOST_TAKES_EDITS`]); for a host that does not, the SDK expands the edit
//! into a whole replacement itself, so a pack built with edits still loads
//! and behaves the same in an older host.

use super::inputs::{Messages, RequestRef};
use super::values::{messages_into_abi, HeaderList, Message};
use crate::abi::{RequestValue, SeamValue, SessionView};
use abi_stable::std_types::{ROption, RString};

/// What a host puts in its session view's `extension_json` when it reads
/// partial edits: the SDK looks for this marker.
pub const HOST_TAKES_EDITS: &str = "\"edits\"";

/// The session view extension of a host that reads edits and says nothing
/// else (checked first, before searching for [`HOST_TAKES_EDITS`]).
pub const HOST_SESSION_EXTENSION: &str = r#"{"capabilities":["edits"]}"#;

/// A partial edit of the `provider_request` envelope: the messages that
/// change (by index into [`RequestRef::messages`]) and, optionally, new
/// headers. Everything else is kept as the host has it.
///
/// ```
/// use chimera_plugin_api::prelude::*;
///
/// fn scrub(request: RequestRef<'_>) -> Option<RequestEdit> {
///     let mut edit = RequestEdit::new();
///     for (index, message) in request.messages().iter().enumerate() {
///         if message.content().contains("sk-") {
///             let mut owned = message.to_owned();
///             owned.content = owned.content.replace("sk-", "[redacted]-");
///             edit.message(index, owned);
///         }
///     }
///     (!edit.is_empty()).then_some(edit)
/// }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestEdit {
    messages: MessagesEdit,
    headers: Option<HeaderList>,
}

impl RequestEdit {
    /// An edit that changes nothing yet.
    #[must_use]
    pub fn new() -> Self {
        RequestEdit::default()
    }

    /// Replaces message `index` with `message`.
    pub fn message(&mut self, index: usize, message: Message) -> &mut Self {
        self.messages.message(index, message);
        self
    }

    /// Sends these headers with this call instead of the current ones.
    pub fn headers(&mut self, headers: Vec<(String, String)>) -> &mut Self {
        self.headers = Some(headers);
        self
    }

    /// True when nothing is changed: answer `Decision::Allow` instead.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty() && self.headers.is_none()
    }

    /// The edit as the ABI carries it to `session`'s host: sparse when the
    /// host reads edits, else expanded over `current` into a whole envelope.
    pub(crate) fn into_abi(
        self,
        session: &SessionView<'_>,
        current: RequestRef<'_>,
    ) -> Result<SeamValue, String> {
        if !host_takes_edits(session) {
            let mut whole = current.to_owned();
            whole.messages = self.messages.expand(current.messages())?;
            if let Some(headers) = self.headers {
                whole.headers = Some(headers);
            }
            return Ok(whole.into_abi());
        }
        let mut set = Vec::new();
        let headers = self.headers.map(|headers| {
            set.push("\"headers\"");
            super::values::headers_into_abi(headers)
        });
        let (indices, messages) = self.messages.split(current.messages().len())?;
        Ok(SeamValue {
            messages: ROption::RSome(messages_into_abi(messages)),
            request: ROption::RSome(RequestValue {
                model: RString::new(),
                tools_json: RString::new(),
                kwargs_json: RString::new(),
                headers: headers.into(),
            }),
            extension_json: ROption::RSome(edit_marker(&indices, &set).into()),
            ..SeamValue::default()
        })
    }
}

/// A partial edit of the `context` seam's message list: the messages that
/// change, by index. The list keeps its length; to drop or add messages,
/// answer a whole list instead.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessagesEdit {
    messages: Vec<(usize, Message)>,
}

impl MessagesEdit {
    /// An edit that changes nothing yet.
    #[must_use]
    pub fn new() -> Self {
        MessagesEdit::default()
    }

    /// Replaces message `index` with `message` (a later call for the same
    /// index wins).
    pub fn message(&mut self, index: usize, message: Message) -> &mut Self {
        match self.messages.iter_mut().find(|(i, _)| *i == index) {
            Some(slot) => slot.1 = message,
            None => self.messages.push((index, message)),
        }
        self
    }

    /// True when nothing is changed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The edit as the ABI carries it (see [`RequestEdit`]).
    pub(crate) fn into_abi(
        self,
        session: &SessionView<'_>,
        current: Messages<'_>,
    ) -> Result<SeamValue, String> {
        if !host_takes_edits(session) {
            return Ok(SeamValue {
                messages: ROption::RSome(messages_into_abi(self.expand(current)?)),
                ..SeamValue::default()
            });
        }
        let (indices, messages) = self.split(current.len())?;
        Ok(SeamValue {
            messages: ROption::RSome(messages_into_abi(messages)),
            extension_json: ROption::RSome(edit_marker(&indices, &[]).into()),
            ..SeamValue::default()
        })
    }

    /// The indices and the messages, in index order; every index must be
    /// one of the `len` messages.
    fn split(mut self, len: usize) -> Result<(Vec<usize>, Vec<Message>), String> {
        if let Some((index, _)) = self.messages.iter().find(|(i, _)| *i >= len) {
            return Err(format!(
                "the edit replaces message {index}, but there are only {len} messages"
            ));
        }
        self.messages.sort_by_key(|(i, _)| *i);
        Ok(self.messages.into_iter().unzip())
    }

    /// The whole list: `current` with the edited messages in place.
    fn expand(self, current: Messages<'_>) -> Result<Vec<Message>, String> {
        let (indices, edited) = self.split(current.len())?;
        let mut edited = indices.into_iter().zip(edited).peekable();
        Ok(current
            .iter()
            .enumerate()
            .map(|(at, message)| match edited.next_if(|(i, _)| *i == at) {
                Some((_, replacement)) => replacement,
                None => message.to_owned(),
            })
            .collect())
    }
}

fn host_takes_edits(session: &SessionView<'_>) -> bool {
    let text = session.extension_json.as_str();
    text == HOST_SESSION_EXTENSION || text.contains(HOST_TAKES_EDITS)
}

/// `{"edit":{"messages":[…],"set":[…]}}`.
fn edit_marker(indices: &[usize], set: &[&str]) -> String {
    use std::fmt::Write as _;
    let mut marker = String::with_capacity(40 + 4 * indices.len());
    marker.push_str(r#"{"edit":{"messages":["#);
    for (n, index) in indices.iter().enumerate() {
        if n > 0 {
            marker.push(',');
        }
        let _ = write!(marker, "{index}");
    }
    marker.push_str(r#"],"set":["#);
    marker.push_str(&set.join(","));
    marker.push_str("]}}");
    marker
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_marker_lists_the_indices_and_the_fields_set() {
        assert_eq!(
            edit_marker(&[3, 8], &["\"headers\""]),
            r#"{"edit":{"messages":[3,8],"set":["headers"]}}"#
        );
        assert_eq!(
            edit_marker(&[], &[]),
            r#"{"edit":{"messages":[],"set":[]}}"#
        );
    }

    #[test]
    fn a_later_edit_of_the_same_message_wins_and_indices_come_out_in_order() {
        let mut edit = MessagesEdit::new();
        let text = |t: &str| Message {
            content: t.to_owned(),
            ..Message::default()
        };
        edit.message(5, text("a"))
            .message(1, text("b"))
            .message(5, text("c"));
        let (indices, messages) = edit.split(6).unwrap();
        assert_eq!(indices, [1, 5]);
        assert_eq!(messages[1].content, "c");
        let mut edit = MessagesEdit::new();
        edit.message(6, text("x"));
        assert!(edit.split(6).unwrap_err().contains("only 6 messages"));
    }
}
