//! rate-limiter's configuration.

use chimera_plugin_api::prelude::PackError;
use serde::Deserialize;
use std::time::Duration;

/// What a full window does to a request.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Pause it until its slot (every waiting request gets one).
    #[default]
    Reject,
    /// Queue it (at most `queue.max_pending` waiting, drained one per
    /// `window / requests_per_minute`); a full queue blocks it.
    Queue,
}

/// Whose requests share a window.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// One window for everything the process serves: a limit in front of
    /// the one provider they all call.
    #[default]
    Global,
    /// A window per client: behind a gateway, per client key (requests
    /// that present none share one window); elsewhere, per session. One
    /// client over its limit never delays another.
    Key,
}

/// `{"mode": .., "scope": .., "requests_per_minute": .., "window_seconds": ..,
/// "pause_message": .., "queue": {"max_pending": ..}}`; unknown keys are
/// refused.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `reject` (default) or `queue`.
    pub mode: Mode,
    /// `global` (default) or `key`.
    pub scope: Scope,
    /// Requests admitted per window (the name is Nexus's; the window is
    /// `window_seconds` long). At least 1.
    pub requests_per_minute: u32,
    /// The sliding window, in seconds (fractions allowed: `0.2` is 200 ms).
    pub window_seconds: f64,
    /// The notice a pause shows; `{seconds}` is the wait in whole seconds
    /// plus one.
    pub pause_message: String,
    /// Queue mode's bound.
    pub queue: Queue,
}

/// `queue: {"max_pending": ..}`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Queue {
    /// The most requests waiting at once in queue mode. At least 1.
    pub max_pending: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::Reject,
            scope: Scope::Global,
            requests_per_minute: 60,
            window_seconds: 60.0,
            pause_message: "Rate limit reached. Pausing for {seconds}s...".to_owned(),
            queue: Queue::default(),
        }
    }
}

impl Default for Queue {
    fn default() -> Self {
        Queue { max_pending: 100 }
    }
}

impl Config {
    /// The window as a duration; anything but a positive, finite number of
    /// seconds is one line.
    pub(crate) fn window(&self) -> Result<Duration, PackError> {
        Duration::try_from_secs_f64(self.window_seconds)
            .ok()
            .filter(|w| !w.is_zero())
            .ok_or_else(|| {
                PackError::msg(format!(
                    "window_seconds must be a positive number of seconds, not {}",
                    self.window_seconds
                ))
            })
    }

    /// Checks the bounds the types do not.
    pub(crate) fn validate(&self) -> Result<(), PackError> {
        if self.requests_per_minute == 0 {
            return Err(PackError::msg("requests_per_minute must be at least 1"));
        }
        if self.queue.max_pending == 0 {
            return Err(PackError::msg("queue.max_pending must be at least 1"));
        }
        Ok(())
    }
}
