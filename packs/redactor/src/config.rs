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

/// The default secret pattern. Its word boundaries are ASCII ones
/// (`(?-u:\b)`: a non-ASCII letter ends a word), so the regex engine
/// scans any text with its fast automaton: a Unicode `\b` sends text with
/// a non-ASCII byte to a slower engine, ten times slower per byte, which
/// a client can pick. A key that runs into a non-ASCII letter
/// (`sk-live12345678é`) is redacted too.
pub const DEFAULT_PATTERN: &str = r"(?-u:\b)(?:sk|key|token|secret)-[A-Za-z0-9_\-]{8,}(?-u:\b)";

impl Default for Config {
    fn default() -> Self {
        Config {
            pattern: DEFAULT_PATTERN.to_owned(),
            replacement: "[redacted]".to_owned(),
            headers: vec!["Authorization".to_owned()],
        }
    }
}
