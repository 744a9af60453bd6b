//! stop-words' configuration.

use serde::Deserialize;

/// The notice (and substitute reply) of every block, by default.
pub const DEFAULT_MESSAGE: &str = "Content blocked: contains prohibited terms.";

/// The configuration; unknown keys are refused.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Banned words (a list, or one string).
    #[serde(deserialize_with = "gate_kit::one_or_many")]
    pub words: Vec<String>,
    /// Files of banned words, one per line.
    #[serde(deserialize_with = "gate_kit::one_or_many")]
    pub word_files: Vec<String>,
    /// Match case exactly.
    pub case_sensitive: bool,
    /// The notice of every block.
    pub message: String,
    /// Also judge each model reply (`model_response`).
    pub scan_llm_responses: bool,
    /// Also judge streamed text (`stream_chunk`); `None`: as
    /// `scan_llm_responses`.
    pub scan_stream: Option<bool>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            words: Vec::new(),
            word_files: Vec::new(),
            case_sensitive: false,
            message: DEFAULT_MESSAGE.to_owned(),
            scan_llm_responses: false,
            scan_stream: None,
        }
    }
}
