//! The configuration and the cap.

use chimera_plugin_api::prelude::*;
use gate_kit::PerTurn;
use serde::Deserialize;
use std::sync::Arc;

/// The configuration; unknown keys are refused.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Requests allowed per user turn.
    pub max_iterations: u64,
    /// The request number that gets a warning (0: none).
    pub warning_at: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_iterations: 25,
            warning_at: 0,
        }
    }
}

/// What the cap says about request number `n` of a turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It goes.
    Pass,
    /// It goes, with this warning.
    Warn(String),
    /// It is blocked: the reason and the notice.
    Stop(String, String),
}

/// The loaded gate.
#[derive(Debug)]
pub struct EndlessLoop {
    config: Config,
    /// Whether this turn's warning was given.
    warned: PerTurn<bool>,
}

impl EndlessLoop {
    /// The verdict on request number `n` (counting from 1) of a turn.
    #[must_use]
    pub fn verdict(&self, n: u64) -> Verdict {
        let Config {
            max_iterations: max,
            warning_at,
        } = self.config;
        if n > max {
            return Verdict::Stop(
                format!("Maximum iterations reached ({max})"),
                format!(
                    "I've reached the maximum number of iterations ({max}). Stopping to prevent an endless loop."
                ),
            );
        }
        if warning_at != 0 && n == warning_at {
            return Verdict::Warn(format!(
                "Warning: {n} iterations used, {} remaining before limit.",
                max - n
            ));
        }
        Verdict::Pass
    }
}

impl Pack for EndlessLoop {
    const NAME: &'static str = "endless-loop";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "caps the model requests of one user turn";
    const SEAMS: &'static [SeamKind] = &[SeamKind::ProviderRequest];
    type Config = Config;

    fn new(config: Config) -> Result<Self, PackError> {
        if config.max_iterations == 0 {
            return Err(PackError::msg("max_iterations must be at least 1"));
        }
        if config.warning_at > config.max_iterations {
            return Err(PackError::msg(format!(
                "warning_at ({}) must be at most max_iterations ({})",
                config.warning_at, config.max_iterations
            )));
        }
        Ok(EndlessLoop {
            config,
            warned: PerTurn::new(),
        })
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        registrar.provider_request("cap", move |session, _request| {
            if session.is_gate_retry() {
                return Ok(Decision::Allow);
            }
            match self.verdict(session.provider_calls_this_turn() + 1) {
                Verdict::Pass => {}
                Verdict::Warn(text) => {
                    if !self.warned.get(session) {
                        self.warned.update(session, |warned| *warned = true);
                        session.notice(text);
                    }
                }
                Verdict::Stop(reason, notice) => {
                    session.notice(notice);
                    return Ok(Decision::Block(reason));
                }
            }
            Ok(Decision::Allow)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(config: serde_json::Value) -> Result<EndlessLoop, PackError> {
        EndlessLoop::new(serde_json::from_value(config).unwrap())
    }

    #[test]
    fn exactly_max_requests_pass_and_the_next_is_stopped() {
        let gate = gate(serde_json::json!({"max_iterations": 3})).unwrap();
        assert_eq!(gate.verdict(3), Verdict::Pass);
        assert_eq!(
            gate.verdict(4),
            Verdict::Stop(
                "Maximum iterations reached (3)".into(),
                "I've reached the maximum number of iterations (3). Stopping to prevent an endless loop.".into()
            )
        );
    }

    #[test]
    fn the_warning_names_the_request_and_what_remains() {
        let gate = gate(serde_json::json!({"max_iterations": 5, "warning_at": 3})).unwrap();
        assert_eq!(gate.verdict(2), Verdict::Pass);
        assert_eq!(
            gate.verdict(3),
            Verdict::Warn("Warning: 3 iterations used, 2 remaining before limit.".into())
        );
    }

    #[test]
    fn a_cap_that_could_never_work_refuses_the_load() {
        let zero = gate(serde_json::json!({"max_iterations": 0})).unwrap_err();
        assert_eq!(zero.to_string(), "max_iterations must be at least 1");
        let late = gate(serde_json::json!({"max_iterations": 2, "warning_at": 3})).unwrap_err();
        assert_eq!(
            late.to_string(),
            "warning_at (3) must be at most max_iterations (2)"
        );
    }
}
