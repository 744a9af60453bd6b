//! Gate state that outlives one process: atomic counters over a window
//! and token buckets, kept in process or in a shared store (Redis), so
//! several gateway replicas behind one load balancer enforce one budget,
//! one rate limit, one loop cap.
//!
//! # Operations
//!
//! | operation | what it does, atomically |
//! |---|---|
//! | `incr_by(key, n, window)` | adds `n` to the counter of the current window and returns the new total; a window of zero is one counter that never rolls over (it lapses after [`IDLE_TTL`] unused) |
//! | `get(key, window)` | the current window's total (0 when none) |
//! | `add(key, n, window)` | `incr_by` without waiting for the total: with Redis the command is sent and its answer read on the connection's next use, so the caller pays no round trip |
//! | `take(key, n, rate, burst)` | takes `n` tokens from a bucket that holds at most `burst` and refills `rate` a second; says whether they were there and, if not, how long until they would be |
//!
//! A window is fixed, not sliding: the counter of `key` for window `w` is
//! the one numbered `now / w`, so every replica counts into the same one.
//! With Redis, `now` is the Redis server's clock (its `TIME`), so replicas
//! agree however their clocks drift, and each operation is one script: one
//! round trip.
//!
//! # When the store is down
//!
//! An operation waits at most the store's timeout. After a failure the
//! store is marked down for a second: operations in that second fail at
//! once (no request pays a timeout per call during an outage) and the
//! next one after it reconnects. [`StateService`] turns a failure into the
//! caller's policy: `FailPolicy::Closed` refuses (the caller says why),
//! `FailPolicy::Open` counts in process instead; it says one warning when an
//! outage begins and one line when it ends, never one per request, and
//! counts operations, failures and fallbacks for the metrics.

mod memory;
mod offer;
mod op;
mod redis;
mod service;

pub use memory::MemoryStore;
pub use offer::{offer, GateState, OfferRefused};
pub(crate) use op::{served, AnswersState, At, StateAnswer, StateKind};
pub use redis::RedisStore;
pub use service::{Counted, FailPolicy, Health, StateService};

use std::time::Duration;

/// How long a counter with no window, or a bucket, lives unused.
pub const IDLE_TTL: Duration = Duration::from_secs(24 * 3600);

/// The longest key taken (bytes, after scoping).
pub const KEY_CAP: usize = 512;

/// What a `take` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Take {
    /// The tokens were there and are taken.
    pub allowed: bool,
    /// When not: how long until they would be.
    pub wait: Duration,
    /// Whole tokens left in the bucket.
    pub remaining: u64,
}

/// Why a state operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// The store cannot be reached, or failed the operation.
    #[error("the state store is unavailable: {0}")]
    Unavailable(String),
    /// The operation's arguments are out of range (a key too long, a rate
    /// that is not a positive number).
    #[error("{0}")]
    Invalid(String),
}

/// A place gate state is kept.
pub trait StateStore: Send + Sync {
    /// Adds `n` to `key`'s counter for the current `window` (zero: no
    /// window); the new total.
    ///
    /// # Errors
    ///
    /// `StateError::Unavailable` when the store failed or timed out.
    fn incr_by(&self, key: &str, n: i64, window: Duration) -> Result<i64, StateError>;

    /// `key`'s total for the current `window` (0 when none).
    ///
    /// # Errors
    ///
    /// `StateError::Unavailable` when the store failed or timed out.
    fn get(&self, key: &str, window: Duration) -> Result<i64, StateError>;

    /// Takes `n` tokens from `key`'s bucket (at most `burst`, refilled
    /// `rate` a second).
    ///
    /// # Errors
    ///
    /// `StateError::Unavailable` when the store failed or timed out;
    /// `StateError::Invalid` for a rate that is not above zero.
    fn take(&self, key: &str, n: u64, rate: f64, burst: u64) -> Result<Take, StateError>;

    /// Adds `n` to `key`'s counter like [`StateStore::incr_by`], without
    /// waiting for the total: a store that can send it and read the answer
    /// later does (Redis), so the caller pays no round trip.
    ///
    /// # Errors
    ///
    /// `StateError::Unavailable` when the store failed (now, or an earlier
    /// add's answer says so).
    fn add(&self, key: &str, n: i64, window: Duration) -> Result<(), StateError> {
        self.incr_by(key, n, window).map(|_| ())
    }

    /// One line naming the store (`in process`, `redis://host:port`).
    fn describe(&self) -> String;

    /// Whether other processes count into the same store.
    fn is_shared(&self) -> bool {
        true
    }
}

/// The key a pack's `key` is kept under: `chimera:<pack>:<scope>:<key>`,
/// each part with `%` and `:` escaped, so no pack reaches another's keys
/// and no scope another's.
///
/// # Errors
///
/// `StateError::Invalid` when the result is over [`KEY_CAP`] bytes.
pub fn scoped_key(pack: &str, scope: &str, key: &str) -> Result<String, StateError> {
    let escape = |part: &str| part.replace('%', "%25").replace(':', "%3A");
    let scoped = format!("chimera:{}:{}:{}", escape(pack), escape(scope), escape(key));
    if scoped.len() > KEY_CAP {
        return Err(StateError::Invalid(format!(
            "a state key is at most {KEY_CAP} bytes with its pack and scope (this one is {})",
            scoped.len()
        )));
    }
    Ok(scoped)
}

/// Checks a bucket's rate.
fn check_rate(rate: f64) -> Result<(), StateError> {
    if rate.is_finite() && rate > 0.0 {
        Ok(())
    } else {
        Err(StateError::Invalid(format!(
            "a token bucket's rate must be a number above 0 (got {rate})"
        )))
    }
}

/// A window as whole milliseconds (at least 1 when not zero).
fn window_ms(window: Duration) -> u64 {
    if window.is_zero() {
        0
    } else {
        u64::try_from(window.as_millis()).unwrap_or(u64::MAX).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scoped_key_cannot_reach_another_packs_or_scopes_keys() {
        assert_eq!(
            scoped_key("budget", "key-ab/chat", "spent").unwrap(),
            "chimera:budget:key-ab/chat:spent"
        );
        // A scope with a colon cannot pose as a pack boundary.
        let forged = scoped_key("a", "b:c", "d").unwrap();
        assert_ne!(forged, scoped_key("a:b", "c", "d").unwrap());
        assert_eq!(forged, "chimera:a:b%3Ac:d");
        assert!(scoped_key("a", "b", &"k".repeat(KEY_CAP)).is_err());
    }
}
