//! The limit shared by every replica of a gateway, in the host's store:
//! `requests_per_minute` slots, each of which admits one request per
//! window — so no window-long span, anywhere, holds more than the limit,
//! exactly as the in-process window.
//!
//! A request draws a *ticket* (one atomic `incr_by` of a global counter)
//! and its ticket names its slot: ticket `t` is slot `t mod limit`. The
//! slot is a token bucket that holds one token and refills it over one
//! window and a millisecond (one `take`): a request is admitted when its
//! slot's token is there, and otherwise paused until it would be. A paused
//! request keeps its ticket (by the host's call id) and so its slot.
//!
//! Why not one bucket of `limit` tokens refilled over the window: a bucket
//! refills continuously, so a full bucket emptied at once admits one more
//! request each `window / limit` after — `limit` and more in the first
//! window (two replicas at 4 a minute admitted 5 of 8 requests within 20
//! seconds). A slot of one token refilled over a whole window admits one
//! request per window, so `limit` slots admit `limit` per window.
//!
//! Tickets are handed out in arrival order, so the slots are used in turn
//! and the next ticket's slot is the one used longest ago: the earliest a
//! window's worth of requests allows. A ticket whose request never comes
//! back (its client left while it was paused) leaves its slot's token for
//! the next ticket of that slot; the limit then admits less, never more.

use chimera_plugin_api::sdk::{Scope, State, StateError, Taken, Window};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The global counter tickets are drawn from.
const TICKETS: &str = "tickets";

/// Paused calls remembered with their ticket before the memory is cleared
/// (a call whose client left while paused never claims its ticket).
const MAX_PAUSED: usize = 10_000;

/// What the shared limit needs of the host's store: a ticket and a take.
pub(crate) trait Slots {
    /// The next ticket (1, 2, …).
    fn ticket(&self) -> Result<i64, StateError>;
    /// Takes slot `slot`'s one token, which refills at `rate` a second.
    fn take(&self, slot: u64, rate: f64) -> Result<Taken, StateError>;
}

/// The slots of one limit in the host's store: the global limit's
/// (`bucket` empty), or one client's with `scope = "key"`.
pub(crate) struct SharedSlots<'a> {
    /// The host's store.
    pub(crate) state: &'a State,
    /// Whose limit: `""` for the global one, else a client's key.
    pub(crate) bucket: &'a str,
}

impl SharedSlots<'_> {
    /// The store's key for `what` of this limit.
    fn key(&self, what: &str) -> String {
        if self.bucket.is_empty() {
            what.to_owned()
        } else {
            format!("{}/{what}", self.bucket)
        }
    }
}

impl Slots for SharedSlots<'_> {
    fn ticket(&self) -> Result<i64, StateError> {
        self.state
            .incr_by(Scope::Global, &self.key(TICKETS), 1, Window::None)
    }

    fn take(&self, slot: u64, rate: f64) -> Result<Taken, StateError> {
        let key = self.key(&format!("slot:{slot}"));
        self.state.take(Scope::Global, &key, 1, rate, 1)
    }
}

/// What the shared limit says about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shared {
    /// Its slot's token was there: send it.
    Admit,
    /// Its slot's token is back after `wait`.
    Wait(Duration),
}

/// The tickets of the calls this process paused.
#[derive(Debug, Default)]
pub(crate) struct Tickets {
    paused: Mutex<HashMap<u64, i64>>,
}

impl Tickets {
    /// The verdict on call `call` (the host's id; `None`: a host that does
    /// not say, so every offer draws a ticket) under a limit of `limit`
    /// per `window`, from `slots`.
    ///
    /// # Errors
    ///
    /// The store's, when it refuses (down, and this pack fails closed).
    pub(crate) fn judge(
        &self,
        slots: &dyn Slots,
        call: Option<u64>,
        limit: u32,
        window: Duration,
    ) -> Result<Shared, StateError> {
        let kept = call.and_then(|call| self.lock().get(&call).copied());
        let ticket = match kept {
            Some(ticket) => ticket,
            None => slots.ticket()?,
        };
        let slot = ticket.unsigned_abs() % u64::from(limit.max(1));
        // One token a window, and a millisecond: a token is never back a
        // hair early (the store keeps its count as a float).
        let rate = 1.0 / (window.as_secs_f64() + 0.001);
        let taken = slots.take(slot, rate)?;
        let mut paused = self.lock();
        if taken.allowed {
            if let Some(call) = call {
                paused.remove(&call);
            }
            return Ok(Shared::Admit);
        }
        if let Some(call) = call {
            if paused.len() >= MAX_PAUSED {
                paused.clear();
            }
            paused.insert(call, ticket);
        }
        Ok(Shared::Wait(taken.wait.max(Duration::from_millis(1))))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, i64>> {
        self.paused.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    /// The store on a clock the test moves: a ticket counter and one-token
    /// buckets, as the host's store keeps them.
    #[derive(Default)]
    struct Fake {
        now_ms: Cell<f64>,
        tickets: Cell<i64>,
        buckets: RefCell<HashMap<u64, (f64, f64)>>,
    }

    impl Slots for Fake {
        fn ticket(&self) -> Result<i64, StateError> {
            self.tickets.set(self.tickets.get() + 1);
            Ok(self.tickets.get())
        }

        fn take(&self, slot: u64, rate: f64) -> Result<Taken, StateError> {
            let now = self.now_ms.get();
            let mut buckets = self.buckets.borrow_mut();
            let (tokens, at) = buckets.entry(slot).or_insert((1.0, now));
            let held = (*tokens + (now - *at) * rate / 1000.0).min(1.0);
            *at = now;
            if held >= 1.0 {
                *tokens = held - 1.0;
                return Ok(Taken {
                    allowed: true,
                    wait: Duration::ZERO,
                    remaining: 0,
                });
            }
            *tokens = held;
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "a wait of at most one window, in whole milliseconds"
            )]
            let wait = ((1.0 - held) * 1000.0 / rate).ceil() as u64;
            Ok(Taken {
                allowed: false,
                wait: Duration::from_millis(wait),
                remaining: 0,
            })
        }
    }

    #[test]
    fn no_window_long_span_holds_more_than_the_limit_and_paused_calls_get_through() {
        for limit in [1_u32, 2, 4, 7] {
            let window = Duration::from_secs(60);
            let store = Fake::default();
            let tickets = Tickets::default();
            // 5 × limit calls at once, each slept out and offered again as
            // the host does, until every one is admitted.
            let mut waiting: Vec<(u64, f64)> =
                (1..=u64::from(limit) * 5).map(|c| (c, 0.0)).collect();
            let mut admitted: Vec<f64> = Vec::new();
            while !waiting.is_empty() {
                waiting.sort_by(|a, b| a.1.total_cmp(&b.1));
                let (call, at) = waiting.remove(0);
                store.now_ms.set(at);
                match tickets.judge(&store, Some(call), limit, window).unwrap() {
                    Shared::Admit => admitted.push(at),
                    Shared::Wait(wait) => {
                        #[allow(clippy::cast_precision_loss, reason = "test waits")]
                        waiting.push((call, at + wait.as_millis() as f64));
                    }
                }
                assert!(admitted.len() <= 5 * limit as usize, "each call once");
            }
            admitted.sort_by(f64::total_cmp);
            let limit = limit as usize;
            assert_eq!(admitted.iter().filter(|&&at| at == 0.0).count(), limit);
            for span in admitted.windows(limit + 1) {
                assert!(
                    span[limit] - span[0] >= 60_000.0,
                    "{} admitted within {} ms",
                    limit + 1,
                    span[limit] - span[0]
                );
            }
        }
    }

    #[test]
    fn a_paused_call_keeps_its_ticket_and_a_new_call_draws_one() {
        let store = Fake::default();
        let tickets = Tickets::default();
        let window = Duration::from_secs(10);
        assert_eq!(tickets.judge(&store, Some(1), 2, window), Ok(Shared::Admit));
        assert_eq!(tickets.judge(&store, Some(2), 2, window), Ok(Shared::Admit));
        assert!(matches!(
            tickets.judge(&store, Some(3), 2, window),
            Ok(Shared::Wait(_))
        ));
        assert_eq!(store.tickets.get(), 3);
        // Offered again: its own ticket, no new one.
        assert!(matches!(
            tickets.judge(&store, Some(3), 2, window),
            Ok(Shared::Wait(_))
        ));
        assert_eq!(store.tickets.get(), 3);
        store.now_ms.set(10_001.0);
        assert_eq!(tickets.judge(&store, Some(3), 2, window), Ok(Shared::Admit));
        assert!(tickets.lock().is_empty(), "an admitted call is forgotten");
    }
}
