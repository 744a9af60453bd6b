//! The pack: the window behind a lock, a clock, and the texts.

use crate::config::{Config, Mode};
use crate::window::{Handover, Verdict, Window};
use chimera_plugin_api::prelude::*;
use chimera_plugin_api::sdk::{Scope, State};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Where the limiter reads the time: the system's monotonic clock, or a
/// test's own.
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Instant;
}

/// [`Instant::now`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// What the gate answers one request, texts rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Send it.
    Admit,
    /// Pause the turn for `wait`, then offer it again.
    Pause {
        /// How long.
        wait: Duration,
        /// `Rate limited: retry in <s>s` (or the queued form).
        reason: String,
        /// The rendered pause message.
        notice: String,
    },
    /// Queue full: block it.
    Reject {
        /// `Rate limited: queue full (max_pending=<n>)`.
        reason: String,
        /// `Rate limit queue full (<n> pending). Request rejected.`
        notice: String,
    },
}

/// The rate-limiter pack.
pub struct RateLimiter {
    window: Mutex<Window>,
    /// Requests per window, and the window (for the shared bucket).
    limit: u32,
    span: Duration,
    clock: Box<dyn Clock>,
    mode: Mode,
    max_pending: u32,
    pause_message: String,
}

impl RateLimiter {
    /// A limiter reading the time from `clock`.
    ///
    /// # Errors
    ///
    /// A `PackError` when `requests_per_minute` or `queue.max_pending` is 0,
    /// or `window_seconds` is not a positive number of seconds.
    pub fn with_clock(config: Config, clock: impl Clock) -> Result<Self, PackError> {
        config.validate()?;
        let window = Window::new(
            config.requests_per_minute,
            config.window()?,
            config.mode,
            config.queue.max_pending,
        );
        Ok(RateLimiter {
            window: Mutex::new(window),
            limit: config.requests_per_minute,
            span: config.window()?,
            clock: Box::new(clock),
            mode: config.mode,
            max_pending: config.queue.max_pending,
            pause_message: config.pause_message,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The answer to a request from conversation `session`, now.
    pub fn judge(&self, session: &str) -> Answer {
        let now = self.clock.now();
        let verdict = self.lock().offer(session, now);
        self.answer(verdict)
    }

    /// The answer to a request, from the host's shared token bucket: it
    /// holds `requests_per_minute` tokens and refills them over
    /// `window_seconds`, so every replica draws from one limit. A request
    /// that finds it empty is paused until a token would be there; in
    /// queue mode, one that would wait longer than `queue.max_pending`
    /// refills is refused, as a full queue. A store that refuses (down,
    /// and this pack fails closed) blocks the request with its line.
    fn judge_shared(&self, state: &State) -> Answer {
        let rate = f64::from(self.limit) / self.span.as_secs_f64();
        let taken = match state.take(Scope::Global, "requests", 1, rate, u64::from(self.limit)) {
            Ok(taken) => taken,
            Err(error) => {
                let reason = format!("rate-limiter: cannot count this request: {error}");
                return Answer::Reject {
                    notice: reason.clone(),
                    reason,
                };
            }
        };
        if taken.allowed {
            return self.answer(Verdict::Admit);
        }
        let refill = Duration::from_secs_f64(1.0 / rate);
        if self.mode == Mode::Queue && taken.wait > refill * self.max_pending {
            return self.answer(Verdict::QueueFull);
        }
        self.answer(Verdict::Wait { wait: taken.wait })
    }

    /// `verdict` with its texts.
    fn answer(&self, verdict: Verdict) -> Answer {
        match verdict {
            Verdict::Admit => Answer::Admit,
            Verdict::Wait { wait } => {
                let seconds = wait.as_secs() + 1;
                let reason = match self.mode {
                    Mode::Reject => format!("Rate limited: retry in {seconds}s"),
                    Mode::Queue => format!("Rate limited (queued): retry in ~{seconds}s"),
                };
                Answer::Pause {
                    wait,
                    reason,
                    notice: self
                        .pause_message
                        .replace("{seconds}", &seconds.to_string()),
                }
            }
            Verdict::QueueFull => Answer::Reject {
                reason: format!(
                    "Rate limited: queue full (max_pending={})",
                    self.max_pending
                ),
                notice: format!(
                    "Rate limit queue full ({} pending). Request rejected.",
                    self.max_pending
                ),
            },
        }
    }
}

impl Pack for RateLimiter {
    const NAME: &'static str = "rate-limiter";
    const VERSION: &'static str = "1.0.0";
    const DESCRIPTION: &'static str =
        "keeps provider calls within a number per sliding window by pausing the turn";
    const SEAMS: &'static [SeamKind] = &[SeamKind::ProviderRequest];
    type Config = Config;

    fn new(config: Config) -> Result<Self, PackError> {
        RateLimiter::with_clock(config, SystemClock)
    }

    /// The window, reservations included, so a hot-swapped build goes on
    /// counting where this one stopped.
    fn export_state(&self) -> Option<serde_json::Value> {
        let handover = self.lock().handover(self.clock.now());
        serde_json::to_value(handover).ok()
    }

    fn import_state(&self, state: serde_json::Value) -> Result<(), PackError> {
        let handover: Handover = serde_json::from_value(state)
            .map_err(|e| PackError::msg(format!("the earlier build's window: {e}")))?;
        self.lock().take_over(&handover, self.clock.now());
        Ok(())
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        let state = registrar.state();
        registrar.provider_request_gate("window", move |session, _| {
            let answer = if state.is_shared() {
                self.judge_shared(&state)
            } else {
                self.judge(session.id())
            };
            Ok(match answer {
                Answer::Admit => GateDecision::Allow,
                Answer::Pause {
                    wait,
                    reason,
                    notice,
                } => {
                    session.notice(notice);
                    GateDecision::RetryAfter { wait, reason }
                }
                Answer::Reject { reason, notice } => {
                    session.notice(notice);
                    GateDecision::Block(reason)
                }
            })
        });
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
