//! The provider request envelope.

use super::Message;
use serde::{Deserialize, Serialize};

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// Tool name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its arguments.
    pub parameters: serde_json::Value,
}

/// Request headers in the provider's order. Names compare ASCII
/// case-insensitively.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Headers(pub Vec<(String, String)>);

impl Headers {
    /// The value of the first header named `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Sets `name` (replacing the first header of that name, else appending).
    pub fn set(&mut self, name: &str, value: impl Into<String>) {
        let value = value.into();
        match self
            .0
            .iter_mut()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            Some(slot) => slot.1 = value,
            None => self.0.push((name.to_owned(), value)),
        }
    }

    /// `(name, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }
}

/// What is about to go on the wire: the envelope the `provider_request`
/// seam sees and may replace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderRequest {
    /// The provider's model name (informational: replacing it does not switch providers).
    pub model: String,
    /// The messages to send (after the context seam).
    pub messages: Vec<Message>,
    /// Tools offered.
    pub tools: Vec<ToolSchema>,
    /// Extra call options, passed verbatim (`{"temperature": 0.7}`).
    pub kwargs: serde_json::Map<String, serde_json::Value>,
    /// A copy of the provider's per-request headers; `None` when the provider
    /// has no header surface (replacing them is then a no-op).
    pub headers: Option<Headers>,
}
