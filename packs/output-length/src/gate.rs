//! The configuration and the length check.

use chimera_plugin_api::prelude::*;
use gate_kit::{render, PerTurn, HOST_MAX_RETRIES};
use serde::Deserialize;
use std::sync::Arc;

/// The retry prompt, by default.
pub const DEFAULT_RETRY_PROMPT: &str = "Your response was {length} characters, exceeding the {limit} character limit. Please provide a more concise response that covers the same key points in fewer characters.";

/// The configuration; unknown keys are refused.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The longest answer, in characters.
    pub max_chars: usize,
    /// Retries per answer before it is let through with a note.
    pub max_retries: u32,
    /// What the model is told on a retry.
    pub retry_prompt: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_chars: 5000,
            max_retries: 2,
            retry_prompt: DEFAULT_RETRY_PROMPT.to_owned(),
        }
    }
}

/// The loaded gate.
#[derive(Debug)]
pub struct OutputLength {
    config: Config,
    /// Retries asked for this turn, per conversation.
    retries: PerTurn<u32>,
}

impl OutputLength {
    /// The retry feedback for an answer of `length` characters.
    #[must_use]
    pub fn feedback(&self, answer: &str, length: usize) -> String {
        let limit = self.config.max_chars;
        let error = format!("response is {length} characters (limit: {limit})");
        render(
            &self.config.retry_prompt,
            &[
                ("length", &length.to_string()),
                ("limit", &limit.to_string()),
                ("error", &error),
                ("content", answer),
            ],
        )
    }

    /// The note on an answer let through after `retries` retries.
    #[must_use]
    pub fn note(&self, length: usize, retries: u32) -> String {
        format!(
            "Note: response exceeds {} character limit ({length} chars) after {retries} retry attempts.",
            self.config.max_chars
        )
    }
}

impl Pack for OutputLength {
    const NAME: &'static str = "output-length";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "asks for a shorter answer when it is too long, then lets it through with a note";
    const SEAMS: &'static [SeamKind] = &[SeamKind::Output];
    type Config = Config;

    fn new(config: Config) -> Result<Self, PackError> {
        if config.max_chars == 0 {
            return Err(PackError::msg("max_chars must be at least 1"));
        }
        Ok(OutputLength {
            config,
            retries: PerTurn::new(),
        })
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        let max = self.config.max_retries.min(HOST_MAX_RETRIES);
        registrar.output_gate("length", move |session, answer| {
            let length = answer.chars().count();
            if length <= self.config.max_chars {
                return Ok(OutputDecision::Allow);
            }
            let used = self.retries.get(session);
            if used >= max {
                session.notice(self.note(length, used));
                return Ok(OutputDecision::Allow);
            }
            self.retries.update(session, |used| *used += 1);
            Ok(OutputDecision::Retry(Retry {
                feedback: self.feedback(answer, length),
                max,
                exhausted: Exhausted::Allow,
            }))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(config: serde_json::Value) -> OutputLength {
        OutputLength::new(serde_json::from_value(config).unwrap()).unwrap()
    }

    #[test]
    fn the_default_prompt_names_the_length_and_the_limit() {
        let gate = gate(serde_json::json!({"max_chars": 10}));
        assert_eq!(
            gate.feedback("x", 20),
            "Your response was 20 characters, exceeding the 10 character limit. Please provide a more concise response that covers the same key points in fewer characters."
        );
    }

    #[test]
    fn a_custom_prompt_gets_the_error_and_the_content() {
        let gate = gate(serde_json::json!({"max_chars": 3, "retry_prompt": "{error} | {content}"}));
        assert_eq!(
            gate.feedback("abcd", 4),
            "response is 4 characters (limit: 3) | abcd"
        );
    }

    #[test]
    fn the_note_names_limit_length_and_retries() {
        let gate = gate(serde_json::json!({"max_chars": 10, "max_retries": 0}));
        assert_eq!(
            gate.note(20, 0),
            "Note: response exceeds 10 character limit (20 chars) after 0 retry attempts."
        );
    }

    #[test]
    fn a_zero_limit_refuses_the_load() {
        let config = serde_json::from_value(serde_json::json!({"max_chars": 0})).unwrap();
        let error = OutputLength::new(config).unwrap_err();
        assert_eq!(error.to_string(), "max_chars must be at least 1");
    }
}
