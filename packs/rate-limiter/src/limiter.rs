//! The pack: the window behind a lock, a clock, and the texts.

use crate::config::{Config, Mode, Scope as Bucketing};
use crate::shared::{Shared, SharedSlots, Tickets};
use crate::window::{Handover, Verdict, Window};
use chimera_plugin_api::prelude::*;
use chimera_plugin_api::sdk::State;
use std::collections::HashMap;
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

/// The windows of `scope = "key"`, one per client; idle ones are swept
/// whenever the map has doubled since the last sweep.
#[derive(Debug, Default)]
struct Keyed {
    windows: HashMap<String, Window>,
    sweep_at: usize,
}

/// The window a request of conversation `session` draws from with
/// `scope = "key"`: behind a gateway (`relayed`), its client key's — the
/// `key-<hash>` of the session ids `key-<hash>` and `key-<hash>/NAME` —
/// or, for a request that presents no key, the one window they share
/// (named `""`); elsewhere, the session's own.
#[must_use]
pub fn bucket(session: &str, relayed: bool) -> &str {
    if !relayed {
        return session;
    }
    if session.starts_with("key-") {
        session.split('/').next().unwrap_or(session)
    } else {
        ""
    }
}

/// The rate-limiter pack.
pub struct RateLimiter {
    window: Mutex<Window>,
    keyed: Mutex<Keyed>,
    scope: Bucketing,
    /// Requests per window, and the window (for the shared slots).
    limit: u32,
    span: Duration,
    /// The tickets of the calls paused on the shared slots.
    tickets: Tickets,
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
            keyed: Mutex::new(Keyed::default()),
            scope: config.scope,
            limit: config.requests_per_minute,
            span: config.window()?,
            tickets: Tickets::default(),
            clock: Box::new(clock),
            mode: config.mode,
            max_pending: config.queue.max_pending,
            pause_message: config.pause_message,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn keyed(&self) -> std::sync::MutexGuard<'_, Keyed> {
        self.keyed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The answer to a request from conversation `session`, now.
    pub fn judge(&self, session: &str) -> Answer {
        self.judge_as(session, false)
    }

    /// The answer to a request from conversation `session`, now;
    /// `relayed`: a gateway's (whose session ids name the client's key).
    /// With `scope = "key"` the request draws from its client's window
    /// (see [`bucket`]), where a full window reserves one slot per client.
    pub fn judge_as(&self, session: &str, relayed: bool) -> Answer {
        let now = self.clock.now();
        let verdict = match self.scope {
            Bucketing::Global => self.lock().offer(session, now),
            Bucketing::Key => {
                let bucket = bucket(session, relayed);
                let mut keyed = self.keyed();
                let verdict = keyed
                    .windows
                    .entry(bucket.to_owned())
                    .or_insert_with(|| self.new_window())
                    .offer(bucket, now);
                if keyed.windows.len() >= keyed.sweep_at {
                    keyed.windows.retain(|_, window| !window.is_idle(now));
                    keyed.sweep_at = (keyed.windows.len() * 2).max(64);
                }
                verdict
            }
        };
        self.answer(verdict)
    }

    /// An empty window of this configuration.
    fn new_window(&self) -> Window {
        Window::new(self.limit, self.span, self.mode, self.max_pending)
    }

    /// The answer to call `call` (drawing from `bucket`'s limit with
    /// `scope = "key"`), from the slots every replica shares in the host's
    /// store (see [`shared`](crate::shared)): admitted when its slot is
    /// free, else paused until it would be; in queue mode, one that would
    /// wait longer than `queue.max_pending` drains is refused, as a full
    /// queue. A store that refuses (down, and this pack fails closed)
    /// blocks the request with its line.
    fn judge_shared(&self, state: &State, bucket: &str, call: Option<u64>) -> Answer {
        let bucket = match self.scope {
            Bucketing::Global => "",
            Bucketing::Key => bucket,
        };
        let slots = SharedSlots { state, bucket };
        let verdict = match self.tickets.judge(&slots, call, self.limit, self.span) {
            Ok(verdict) => verdict,
            Err(error) => {
                let reason = format!("rate-limiter: cannot count this request: {error}");
                return Answer::Reject {
                    notice: reason.clone(),
                    reason,
                };
            }
        };
        let Shared::Wait(wait) = verdict else {
            return self.answer(Verdict::Admit);
        };
        let drain = self.span / self.limit.max(1);
        if self.mode == Mode::Queue && wait > drain * self.max_pending {
            return self.answer(Verdict::QueueFull);
        }
        self.answer(Verdict::Wait { wait })
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
        let now = self.clock.now();
        let mut handover = self.lock().handover(now);
        handover.keys = self
            .keyed()
            .windows
            .iter()
            .map(|(key, window)| (key.clone(), window.handover(now)))
            .collect();
        serde_json::to_value(handover).ok()
    }

    fn import_state(&self, state: serde_json::Value) -> Result<(), PackError> {
        let handover: Handover = serde_json::from_value(state)
            .map_err(|e| PackError::msg(format!("the earlier build's window: {e}")))?;
        let now = self.clock.now();
        self.lock().take_over(&handover, now);
        self.keyed().windows = handover
            .keys
            .iter()
            .map(|(key, window)| {
                let mut taken = self.new_window();
                taken.take_over(window, now);
                (key.clone(), taken)
            })
            .collect();
        Ok(())
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        let state = registrar.state();
        registrar.provider_request_gate("window", move |session, _| {
            let relayed = session.is_relayed();
            let answer = if state.is_shared() {
                self.judge_shared(&state, bucket(session.id(), relayed), session.call_id())
            } else {
                self.judge_as(session.id(), relayed)
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
