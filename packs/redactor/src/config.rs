//! redactor's configuration.

use serde::Deserialize;

/// `{"pattern": "...", "replacement": "...", "headers": [...]}`; unknown keys
/// are refused.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The secret pattern (regular expression).
    pub pattern: String,
    /// What replaces each match (literally).
    pub replacement: String,
    /// Headers replaced wholesale (names compared case-insensitively).
    pub headers: Vec<String>,
}

/// The default secret pattern.
pub const DEFAULT_PATTERN: &str = r"\b(?:sk|key|token|secret)-[A-Za-z0-9_\-]{8,}\b";

impl Default for Config {
    fn default() -> Self {
        Config {
            pattern: DEFAULT_PATTERN.to_owned(),
            replacement: "[redacted]".to_owned(),
            headers: vec!["Authorization".to_owned()],
        }
    }
}
