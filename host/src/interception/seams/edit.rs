//! Partial edits coming back from a pack: the messages that changed, by
//! index, and which other fields are set. Everything else is the current
//! value, kept as it is (see the SDK's `RequestEdit`).

use super::views::message_from_abi;
use super::Invalid;
use crate::types::Message;
use abi_stable::std_types::RVec;
use chimera_plugin_api::abi::{MessageValue, SeamValue};
use serde::Deserialize;

/// What this host tells packs in the session view: it reads partial edits.
pub(crate) const SESSION_EXTENSION: &str = r#"{"capabilities":["edits"]}"#;

#[derive(Deserialize)]
struct Extension {
    edit: Option<Edit>,
}

/// Which messages an edit replaces, and the other fields it sets.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Edit {
    messages: Vec<usize>,
    #[serde(default)]
    set: Vec<Field>,
}

/// A field other than the messages that an edit may set.
#[derive(Deserialize, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Field {
    /// The request's headers.
    Headers,
}

impl Edit {
    /// The edit `value` carries, if it is one.
    pub(crate) fn of(value: &SeamValue) -> Result<Option<Edit>, Invalid> {
        let Some(text) = value.extension_json.as_ref().into_option() else {
            return Ok(None);
        };
        if !text.as_str().contains("\"edit\"") {
            return Ok(None);
        }
        serde_json::from_str::<Extension>(text.as_str())
            .map(|extension| extension.edit)
            .map_err(|error| Invalid::Malformed(format!("the edit is not understood: {error}")))
    }

    /// True when the edit sets `field`.
    pub(crate) fn sets(&self, field: Field) -> bool {
        self.set.contains(&field)
    }

    /// `current` with the edited messages in place: `values[k]` replaces
    /// message `messages[k]`, whose indices must be distinct and in range.
    pub(crate) fn apply(
        &self,
        current: &[Message],
        values: Option<RVec<MessageValue>>,
    ) -> Result<Vec<Message>, Invalid> {
        let values = values.unwrap_or_default();
        if values.len() != self.messages.len() {
            return Err(Invalid::Malformed(format!(
                "the edit names {} messages but carries {}",
                self.messages.len(),
                values.len()
            )));
        }
        let mut replacements: Vec<Option<Message>> = vec![None; current.len()];
        for (&index, value) in self.messages.iter().zip(values) {
            let slot = replacements.get_mut(index).ok_or_else(|| {
                Invalid::Malformed(format!(
                    "the edit replaces message {index}, but there are only {} messages",
                    current.len()
                ))
            })?;
            if slot.is_some() {
                return Err(Invalid::Malformed(format!(
                    "the edit replaces message {index} twice"
                )));
            }
            *slot = Some(message_from_abi(value).map_err(Invalid::Malformed)?);
        }
        Ok(current
            .iter()
            .zip(replacements)
            .map(|(message, replacement)| replacement.unwrap_or_else(|| message.clone()))
            .collect())
    }
}
