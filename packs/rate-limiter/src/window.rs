//! The sliding window and its reservations, on a clock the caller reads.

use crate::config::Mode;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

/// What the window says about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send it now.
    Admit,
    /// Wait this long: the request's slot is reserved for it.
    Wait {
        /// Until the slot (rounded up to a whole millisecond).
        wait: Duration,
    },
    /// Queue mode with `max_pending` requests already waiting.
    QueueFull,
}

/// The slots of one process's requests: admitted ones (in the past) and
/// reserved ones (possibly in the future), in time order, and which
/// conversation each reservation is for.
///
/// The invariant: every window-long span `(t - window, t]` holds at most
/// `limit` slots. A request that finds the window full is given the
/// earliest slot that keeps it — and that slot is *its* slot: when its
/// conversation comes back, the request takes it without being counted
/// again. (Nexus recorded the reservation and then counted the resumed
/// request once more, so with one conversation's traffic the window never
/// drained and the resumed request was refused on every retry.)
#[derive(Debug)]
pub struct Window {
    limit: usize,
    span: Duration,
    mode: Mode,
    max_pending: usize,
    slots: VecDeque<Instant>,
    reserved: HashMap<String, Instant>,
    last_queued: Option<Instant>,
}

impl Window {
    /// An empty window admitting `limit` requests per `window`.
    #[must_use]
    pub fn new(limit: u32, window: Duration, mode: Mode, max_pending: u32) -> Self {
        Window {
            limit: usize::try_from(limit).unwrap_or(usize::MAX).max(1),
            span: window,
            mode,
            max_pending: usize::try_from(max_pending).unwrap_or(usize::MAX),
            slots: VecDeque::new(),
            reserved: HashMap::new(),
            last_queued: None,
        }
    }

    /// The verdict on a request from conversation `session` at `now`.
    pub fn offer(&mut self, session: &str, now: Instant) -> Verdict {
        self.prune(now);
        if let Some(&slot) = self.reserved.get(session) {
            if slot <= now {
                // Its reserved slot: already counted, so not counted again.
                self.reserved.remove(session);
                return Verdict::Admit;
            }
            // Back early (the host caps a pause): the same slot, still ahead.
            return Verdict::Wait {
                wait: until(now, slot),
            };
        }
        let slot = self.next_slot(now);
        if slot <= now {
            self.slots.push_back(now);
            return Verdict::Admit;
        }
        if self.mode == Mode::Queue {
            if self.pending(now) >= self.max_pending {
                return Verdict::QueueFull;
            }
            self.last_queued = Some(slot);
        }
        self.slots.push_back(slot);
        self.reserved.insert(session.to_owned(), slot);
        Verdict::Wait {
            wait: until(now, slot),
        }
    }

    /// True when nothing is in the window at `now`: no slot, no
    /// reservation (a window of its own for each client is dropped then).
    pub fn is_idle(&mut self, now: Instant) -> bool {
        self.prune(now);
        self.slots.is_empty() && self.reserved.is_empty()
    }

    /// Requests waiting for a slot still ahead of `now`.
    #[must_use]
    pub fn pending(&self, now: Instant) -> usize {
        self.reserved.values().filter(|&&slot| slot > now).count()
    }

    /// The slots in the window at `now` and after it (test view).
    #[must_use]
    pub fn slots(&self) -> Vec<Instant> {
        self.slots.iter().copied().collect()
    }

    /// The earliest slot at or after `now` that keeps the invariant: `now`
    /// while fewer than `limit` slots are in the window, else one window
    /// after the `limit`-th latest slot (in queue mode, also no sooner than
    /// one drain interval after the last queued slot).
    fn next_slot(&self, now: Instant) -> Instant {
        let Some(index) = self.slots.len().checked_sub(self.limit) else {
            return now;
        };
        let mut slot = now.max(self.slots[index] + self.span);
        if let (Mode::Queue, Some(last)) = (self.mode, self.last_queued) {
            let interval = self.span / u32::try_from(self.limit).unwrap_or(u32::MAX);
            slot = slot.max(last + interval);
        }
        slot
    }

    /// Drops the slots that have left the window, and reservations whose
    /// slot left it unclaimed (their conversation did not come back; if it
    /// does, it is a new request).
    fn prune(&mut self, now: Instant) {
        let Some(start) = now.checked_sub(self.span) else {
            return;
        };
        while self.slots.front().is_some_and(|&slot| slot <= start) {
            self.slots.pop_front();
        }
        self.reserved.retain(|_, slot| *slot > start);
    }
}

/// The window handed from one build of the pack to the next on a hot swap:
/// every instant as milliseconds from the moment of the handover (negative:
/// before it), since instants cannot cross a process's builds as they are.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Handover {
    /// The slots, in order.
    pub slots_ms: Vec<i64>,
    /// Each waiting conversation's slot.
    pub reserved: HashMap<String, i64>,
    /// Queue mode's last queued slot.
    pub last_queued_ms: Option<i64>,
    /// With `scope = "key"`, each client's window (the fields above are
    /// then empty).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub keys: BTreeMap<String, Handover>,
}

impl Window {
    /// The window as of `now`, for the next build.
    #[must_use]
    pub fn handover(&self, now: Instant) -> Handover {
        Handover {
            slots_ms: self.slots.iter().map(|&slot| offset(now, slot)).collect(),
            reserved: self
                .reserved
                .iter()
                .map(|(session, &slot)| (session.clone(), offset(now, slot)))
                .collect(),
            last_queued_ms: self.last_queued.map(|slot| offset(now, slot)),
            keys: BTreeMap::new(),
        }
    }

    /// Takes over an earlier build's window as of `now`, in place of this
    /// one's (instants the clock cannot represent are dropped).
    pub fn take_over(&mut self, handover: &Handover, now: Instant) {
        let mut slots: Vec<Instant> = handover
            .slots_ms
            .iter()
            .filter_map(|&ms| at(now, ms))
            .collect();
        slots.sort();
        self.slots = slots.into();
        self.reserved = handover
            .reserved
            .iter()
            .filter_map(|(session, &ms)| Some((session.clone(), at(now, ms)?)))
            .collect();
        self.last_queued = handover.last_queued_ms.and_then(|ms| at(now, ms));
    }
}

/// `slot` as signed milliseconds from `now`.
fn offset(now: Instant, slot: Instant) -> i64 {
    let millis = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    if slot >= now {
        millis(slot - now)
    } else {
        -millis(now - slot)
    }
}

/// The instant `ms` milliseconds from `now`.
fn at(now: Instant, ms: i64) -> Option<Instant> {
    let span = Duration::from_millis(ms.unsigned_abs());
    if ms >= 0 {
        now.checked_add(span)
    } else {
        now.checked_sub(span)
    }
}

/// From `now` to `slot`, rounded up to a whole millisecond (the host waits
/// in milliseconds: a wait rounded down would wake the request just before
/// its slot).
fn until(now: Instant, slot: Instant) -> Duration {
    let wait = slot.saturating_duration_since(now);
    let millis = wait.as_nanos().div_ceil(1_000_000);
    Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX))
}
