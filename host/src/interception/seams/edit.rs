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
pub(crate) const SESSION_EXTENSION: &str = chimera_plugin_api::sdk::HOST_SESSION_EXTENSION;

/// The same, during a gate retry (the request an `output` gate asked for).
pub(crate) const SESSION_EXTENSION_GATE_RETRY: &str =
    r#"{"capabilities":["edits"],"gate_retry":true}"#;

#[derive(Deserialize)]
struct Extension {
    edit: Option<Edit>,
}

/// Which messages an edit replaces, and the other fields it sets.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Edit {
    messages: Vec<usize>,
    #[serde(default)]
    set: Vec<Field>,
}

/// A field other than the messages that an edit may set.
#[derive(Debug, Deserialize, PartialEq, Eq, Clone, Copy)]
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
        if !text.as_str().starts_with("{\"edit\"") {
            return Ok(None);
        }
        if let Some(edit) = Edit::quick(text.as_str()) {
            return Ok(Some(edit));
        }
        serde_json::from_str::<Extension>(text.as_str())
            .map(|extension| extension.edit)
            .map_err(|error| Invalid::Malformed(format!("the edit is not understood: {error}")))
    }

    /// The SDK's own spelling, read without a JSON parser:
    /// `{"edit":{"messages":[3,8,12],"set":[]}}` or `…"set":["headers"]}}`.
    /// Anything else goes to the JSON parser.
    fn quick(text: &str) -> Option<Edit> {
        let rest = text.strip_prefix(r#"{"edit":{"messages":["#)?;
        let (list, rest) = rest.split_once(']')?;
        let set = match rest {
            r#","set":[]}}"# => Vec::new(),
            r#","set":["headers"]}}"# => vec![Field::Headers],
            _ => return None,
        };
        let messages = if list.is_empty() {
            Vec::new()
        } else {
            list.split(',')
                .map(|n| n.parse().ok())
                .collect::<Option<Vec<usize>>>()?
        };
        Some(Edit { messages, set })
    }

    /// True when the edit sets `field`.
    pub(crate) fn sets(&self, field: Field) -> bool {
        self.set.contains(&field)
    }

    /// `current` with the edited messages in place: `values[k]` replaces
    /// message `messages[k]`. The indices must be in range and strictly
    /// increasing (the SDK sends them sorted).
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
        if let Some((a, b)) = self.messages.windows(2).find_map(|pair| match pair {
            [a, b] if a >= b => Some((*a, *b)),
            _ => None,
        }) {
            return Err(Invalid::Malformed(format!(
                "the edit's message indices are not strictly increasing ({a} then {b})"
            )));
        }
        if let Some(&last) = self.messages.last().filter(|&&last| last >= current.len()) {
            return Err(Invalid::Malformed(format!(
                "the edit replaces message {last}, but there are only {} messages",
                current.len()
            )));
        }
        let mut edited = self.messages.iter().copied().zip(values).peekable();
        let mut messages = Vec::with_capacity(current.len());
        for (at, message) in current.iter().enumerate() {
            messages.push(match edited.next_if(|(index, _)| *index == at) {
                Some((_, value)) => message_from_abi(value).map_err(Invalid::Malformed)?,
                None => message.clone(),
            });
        }
        Ok(messages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi_stable::std_types::ROption;

    fn edit(extension: &str) -> Result<Option<Edit>, String> {
        let value = SeamValue {
            extension_json: ROption::RSome(extension.into()),
            ..SeamValue::default()
        };
        Edit::of(&value).map_err(|invalid| match invalid {
            Invalid::Malformed(text) | Invalid::WrongType(text) => text,
        })
    }

    #[test]
    fn the_quick_reading_and_the_json_parser_agree() {
        for text in [
            r#"{"edit":{"messages":[3,8,12],"set":["headers"]}}"#,
            r#"{"edit": {"set": ["headers"], "messages": [3, 8, 12]}}"#,
        ] {
            let parsed = edit(text).unwrap().unwrap();
            assert_eq!(parsed.messages, [3, 8, 12], "{text}");
            assert!(parsed.sets(Field::Headers), "{text}");
        }
        let parsed = edit(r#"{"edit":{"messages":[],"set":[]}}"#)
            .unwrap()
            .unwrap();
        assert!(parsed.messages.is_empty() && !parsed.sets(Field::Headers));
        assert!(edit(r#"{"hold": 3}"#).unwrap().is_none(), "not an edit");
        assert!(edit(r#"{"edit":{"messages":[1],"set":["model"]}}"#)
            .unwrap_err()
            .contains("not understood"));
    }

    #[test]
    fn indices_out_of_order_or_range_are_refused() {
        let current = vec![Message::user("a"), Message::user("b")];
        let value = |n: usize| -> Option<RVec<MessageValue>> {
            Some(
                (0..n)
                    .map(|_| MessageValue {
                        role: "user".into(),
                        content: "x".into(),
                        ..MessageValue::default()
                    })
                    .collect(),
            )
        };
        let refused = |messages: Vec<usize>| {
            let n = messages.len();
            match (Edit {
                messages,
                set: Vec::new(),
            })
            .apply(&current, value(n))
            {
                Err(Invalid::Malformed(text)) => text,
                _ => panic!("accepted"),
            }
        };
        assert!(refused(vec![1, 0]).contains("strictly increasing"));
        assert!(refused(vec![1, 1]).contains("strictly increasing"));
        assert!(refused(vec![2]).contains("only 2 messages"));
        let applied = (Edit {
            messages: vec![1],
            set: Vec::new(),
        })
        .apply(&current, value(1))
        .ok()
        .unwrap();
        assert_eq!(
            (applied[0].content.as_str(), applied[1].content.as_str()),
            ("a", "x")
        );
    }
}
