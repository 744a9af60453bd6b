//! The configuration and the cap.

use crate::shared::Numbered;
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

/// What a turn remembers.
#[derive(Debug, Clone, Default)]
struct Turn {
    /// The calls already made this turn when each of the host's own
    /// requests (a compaction summary, a gate retry) was prepared.
    host_calls_at: Vec<u64>,
    /// Whether this turn's warning was given.
    warned: bool,
}

/// The number (from 1) of the agent request prepared when `calls_made`
/// provider calls were made this turn, the host's own requests having been
/// prepared at `host_calls_at`: each of those below `calls_made` was sent
/// (a blocked one ends the turn) and is not the agent's.
#[must_use]
pub fn request_number(calls_made: u64, host_calls_at: &[u64]) -> u64 {
    let host_calls = host_calls_at.iter().filter(|&&at| at < calls_made).count();
    calls_made - u64::try_from(host_calls).unwrap_or(calls_made) + 1
}

/// The loaded gate.
#[derive(Debug)]
pub struct EndlessLoop {
    config: Config,
    turns: PerTurn<Turn>,
    numbered: Numbered,
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
            turns: PerTurn::new(),
            numbered: Numbered::default(),
        })
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        let state = registrar.state();
        registrar.provider_request("cap", move |session, request| {
            let calls_made = session.provider_calls_this_turn();
            if !gate_kit::is_agent_call(session) {
                self.turns.update(session, |turn| {
                    if !turn.host_calls_at.contains(&calls_made) {
                        turn.host_calls_at.push(calls_made);
                    }
                });
                return Ok(Decision::Allow);
            }
            let turn = self.turns.get(session);
            let number = if state.is_shared() {
                match self.numbered.number(&state, session, request) {
                    Ok(number) => number,
                    Err(error) => {
                        return Ok(Decision::Block(format!(
                            "endless-loop: cannot count this request: {error}"
                        )))
                    }
                }
            } else {
                request_number(calls_made, &turn.host_calls_at)
            };
            match self.verdict(number) {
                Verdict::Pass => {}
                Verdict::Warn(text) => {
                    if !turn.warned {
                        self.turns.update(session, |turn| turn.warned = true);
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
    fn the_hosts_own_calls_do_not_number_agent_requests() {
        // No host calls: the n-th call made is request n + 1.
        assert_eq!(request_number(0, &[]), 1);
        assert_eq!(request_number(2, &[]), 3);
        // Request 2 asks for a compaction; the summary call is prepared
        // with one call made, and once it is made request 2 is built again:
        // it is still request 2.
        assert_eq!(request_number(1, &[]), 2);
        assert_eq!(request_number(2, &[1]), 2);
        assert_eq!(request_number(3, &[1]), 3);
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
