//! The provider request envelope.

use super::Message;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, as the model reads it.
    pub description: String,
    /// JSON Schema of its arguments (an object schema).
    pub parameters: serde_json::Value,
}

/// The tools offered on one request: an immutable, shared list (cloning is
/// a reference-count bump) that keeps its JSON rendering once made, so the
/// `provider_request` seam does not re-serialise the schemas on every call.
#[derive(Clone, Default)]
pub struct ToolList(Arc<ToolListInner>);

#[derive(Default)]
struct ToolListInner {
    schemas: Vec<ToolSchema>,
    json: OnceLock<String>,
}

impl ToolList {
    /// A list of these schemas.
    #[must_use]
    pub fn new(schemas: Vec<ToolSchema>) -> Self {
        ToolList(Arc::new(ToolListInner {
            schemas,
            json: OnceLock::new(),
        }))
    }

    /// The schemas as a JSON array (rendered once).
    #[must_use]
    pub fn json(&self) -> &str {
        self.0.json.get_or_init(|| {
            serde_json::to_string(&self.0.schemas).unwrap_or_else(|_| "[]".to_owned())
        })
    }
}

impl Deref for ToolList {
    type Target = [ToolSchema];

    fn deref(&self) -> &[ToolSchema] {
        &self.0.schemas
    }
}

impl From<Vec<ToolSchema>> for ToolList {
    fn from(schemas: Vec<ToolSchema>) -> Self {
        ToolList::new(schemas)
    }
}

impl PartialEq for ToolList {
    fn eq(&self, other: &Self) -> bool {
        self.0.schemas == other.0.schemas
    }
}

impl std::fmt::Debug for ToolList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for ToolList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.schemas.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ToolList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<ToolSchema>::deserialize(deserializer).map(ToolList::new)
    }
}

/// Request headers in the provider's order. Names compare ASCII
/// case-insensitively.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Headers(pub Vec<(String, String)>);

impl Headers {
    /// The value of the first header named `name`.
    #[must_use]
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
    pub tools: ToolList,
    /// Extra call options, passed verbatim (`{"temperature": 0.7}`).
    pub kwargs: serde_json::Map<String, serde_json::Value>,
    /// A copy of the provider's per-request headers; `None` when the provider
    /// has no header surface (replacing them is then a no-op).
    pub headers: Option<Headers>,
}
