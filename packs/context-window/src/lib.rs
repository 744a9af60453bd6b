//! # context-window
//!
//! Asks the host to compact the conversation before a request that nears
//! the model's context window (`provider_request`).
//!
//! A request's size is estimated as ⌊characters of its message texts /
//! `chars_per_token`⌋ tokens; at ⌊`max_context_tokens` × `trigger_ratio`⌋
//! or more the request is not sent: the gate blocks it with
//!
//! ```text
//! Context window approaching limit (<estimate> / <max> estimated tokens), triggering compaction
//! ```
//!
//! and the notice `Context approaching limit (<estimate> estimated tokens).
//! Compacting conversation...`, asking for a compaction. The host keeps
//! the system message and the last turns, summarises the rest with one
//! model call, emits `compaction` events, and builds the request again
//! from the shorter history — once: asked again for the same request, the
//! host blocks it. Requests the host makes itself (the summary call, a gate
//! retry) are never judged; Nexus skipped every tagged request, its agent's
//! own included.
//!
//! Configuration: `max_context_tokens` (default 100000, at least 1),
//! `trigger_ratio` (default 0.85, strictly between 0 and 1),
//! `chars_per_token` (default 4.0, above 0). Out-of-range values refuse the
//! load (Nexus ignored them silently).

use chimera_plugin_api::prelude::*;
use serde::Deserialize;
use std::sync::Arc;

/// The configuration; unknown keys are refused.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The model's context window, in tokens.
    pub max_context_tokens: u64,
    /// The share of it from which the gate asks for a compaction.
    pub trigger_ratio: f64,
    /// Characters per token, for the estimate.
    pub chars_per_token: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_context_tokens: 100_000,
            trigger_ratio: 0.85,
            chars_per_token: 4.0,
        }
    }
}

/// The loaded gate.
#[derive(Debug)]
pub struct ContextWindow {
    config: Config,
    threshold: u64,
}

impl ContextWindow {
    /// The estimate of a request whose message texts have `chars` characters.
    #[must_use]
    pub fn estimate(&self, chars: usize) -> u64 {
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "an estimate, floored, of a positive ratio"
        )]
        let estimate = (chars as f64 / self.config.chars_per_token).floor() as u64;
        estimate
    }

    /// `Some((reason, notice))` when a request of `chars` characters must
    /// wait for a compaction.
    #[must_use]
    pub fn verdict(&self, chars: usize) -> Option<(String, String)> {
        let estimate = self.estimate(chars);
        (estimate >= self.threshold).then(|| {
            (
                format!(
                    "Context window approaching limit ({estimate} / {} estimated tokens), triggering compaction",
                    self.config.max_context_tokens
                ),
                format!(
                    "Context approaching limit ({estimate} estimated tokens). Compacting conversation..."
                ),
            )
        })
    }
}

impl Pack for ContextWindow {
    const NAME: &'static str = "context-window";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "asks the host to compact the conversation when a request nears the context window";
    const SEAMS: &'static [SeamKind] = &[SeamKind::ProviderRequest];
    type Config = Config;

    fn new(config: Config) -> Result<Self, PackError> {
        if config.max_context_tokens == 0 {
            return Err(PackError::msg("max_context_tokens must be at least 1"));
        }
        if !(config.trigger_ratio > 0.0 && config.trigger_ratio < 1.0) {
            return Err(PackError::msg(
                "trigger_ratio must be strictly between 0 and 1",
            ));
        }
        if !(config.chars_per_token.is_finite() && config.chars_per_token > 0.0) {
            return Err(PackError::msg("chars_per_token must be a number above 0"));
        }
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a token count times a ratio in (0, 1), floored"
        )]
        let threshold = (config.max_context_tokens as f64 * config.trigger_ratio).floor() as u64;
        Ok(ContextWindow { config, threshold })
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        registrar.provider_request_gate("window", move |session, request| {
            if !gate_kit::is_agent_call(session) {
                return Ok(GateDecision::Allow);
            }
            let chars = gate_kit::text_chars(request.messages());
            Ok(match self.verdict(chars) {
                Some((reason, notice)) => {
                    session.notice(notice);
                    GateDecision::Compact { reason }
                }
                None => GateDecision::Allow,
            })
        });
    }
}

chimera_plugin_api::export_packs!(ContextWindow);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gate(config: serde_json::Value) -> Result<ContextWindow, PackError> {
        ContextWindow::new(serde_json::from_value(config).map_err(PackError::from)?)
    }

    #[test]
    fn a_request_at_the_threshold_waits_for_a_compaction() {
        let gate = gate(json!({"max_context_tokens": 100})).unwrap();
        assert_eq!(gate.verdict(339), None, "84 estimated tokens, under 85");
        let (reason, notice) = gate.verdict(340).unwrap();
        assert_eq!(
            reason,
            "Context window approaching limit (85 / 100 estimated tokens), triggering compaction"
        );
        assert_eq!(
            notice,
            "Context approaching limit (85 estimated tokens). Compacting conversation..."
        );
    }

    #[test]
    fn settings_that_cannot_work_refuse_the_load() {
        let refused = |config| gate(config).unwrap_err().to_string();
        assert!(refused(json!({"trigger_ratio": 1.0})).contains("between 0 and 1"));
        assert!(refused(json!({"chars_per_token": 0})).contains("above 0"));
        assert!(refused(json!({"max_context_tokens": 0})).contains("at least 1"));
        assert!(refused(json!({"ratio": 0.5})).contains("unknown field"));
    }
}
