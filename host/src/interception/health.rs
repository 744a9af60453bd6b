//! Fault containment for pack interceptors: quarantine after repeated
//! failures, and a time budget per call (measured, never preempted).
//!
//! A pack's interceptors share one [`PackHealth`]. Every failure (an error,
//! a panic, an invalid replacement, an unknown decision kind) is counted;
//! `max_errors` of them within `window` quarantine the pack. So do
//! `max_overruns` calls over `call_budget` within the window. A quarantined
//! pack's interceptors are no longer called: each seam applies its failure
//! policy, and `tool_call` blocks with a reason that names the quarantine.
//! A reload builds a fresh instance with a fresh record.
//!
//! The budget is honest about what it is: native code running in-process
//! cannot be stopped from outside. A call that runs long is *measured* when
//! it returns — an event, and repeated overruns quarantine the pack — but a
//! call that never returns hangs its turn. The probe (a child process)
//! catches packs that hang or crash while loading; nothing in-process can
//! catch one that hangs later.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// When a pack is quarantined, and what counts as a slow call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthPolicy {
    /// Failures within `window` that quarantine a pack.
    pub max_errors: u32,
    /// The sliding window failures and overruns are counted in.
    pub window: Duration,
    /// A call longer than this is an overrun (`None`: no budget).
    pub call_budget: Option<Duration>,
    /// Overruns within `window` that quarantine a pack.
    pub max_overruns: u32,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        HealthPolicy {
            max_errors: 20,
            window: Duration::from_secs(60),
            call_budget: Some(Duration::from_millis(100)),
            max_overruns: 5,
        }
    }
}

/// What the health monitor reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HealthEvent {
    /// The pack is quarantined: its interceptors are no longer called.
    Quarantined {
        /// The pack's entry-point name.
        pack: String,
        /// Why, one line.
        reason: String,
    },
    /// A call ran over its budget.
    OverBudget {
        /// The pack's entry-point name.
        pack: String,
        /// The interceptor's display name (`<pack>/<name>`).
        interceptor: String,
        /// The seam it ran on.
        seam: &'static str,
        /// How long the call took, measured when it returned.
        elapsed: Duration,
        /// The call budget it exceeded.
        budget: Duration,
    },
}

/// Receives [`HealthEvent`]s.
pub type HealthSink = Arc<dyn Fn(HealthEvent) + Send + Sync>;

#[derive(Default)]
struct Record {
    errors: VecDeque<Instant>,
    overruns: VecDeque<Instant>,
    reason: Option<String>,
}

/// The shared health record of one pack instance.
pub struct PackHealth {
    pack: String,
    policy: HealthPolicy,
    sink: Option<HealthSink>,
    quarantined: AtomicBool,
    record: Mutex<Record>,
}

impl PackHealth {
    /// A clean record for `pack`.
    #[must_use]
    pub fn new(pack: &str, policy: HealthPolicy, sink: Option<HealthSink>) -> Self {
        PackHealth {
            pack: pack.to_owned(),
            policy,
            sink,
            quarantined: AtomicBool::new(false),
            record: Mutex::new(Record::default()),
        }
    }

    /// The quarantine reason, when quarantined (one atomic load otherwise).
    #[inline]
    pub fn quarantine(&self) -> Option<String> {
        if !self.quarantined.load(Ordering::Acquire) {
            return None;
        }
        self.reason()
    }

    #[cold]
    fn reason(&self) -> Option<String> {
        self.record
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .reason
            .clone()
    }

    /// The call budget, if any.
    #[inline]
    pub(crate) fn budget(&self) -> Option<Duration> {
        self.policy.call_budget
    }

    fn count(events: &mut VecDeque<Instant>, now: Instant, window: Duration) -> u32 {
        events.push_back(now);
        while events
            .front()
            .is_some_and(|t| now.duration_since(*t) > window)
        {
            events.pop_front();
        }
        u32::try_from(events.len()).unwrap_or(u32::MAX)
    }

    /// Counts a failure; may quarantine.
    pub(crate) fn failed(&self) {
        let now = Instant::now();
        let mut record = self
            .record
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = Self::count(&mut record.errors, now, self.policy.window);
        if count >= self.policy.max_errors && record.reason.is_none() {
            let reason = format!(
                "pack '{}' is quarantined after {count} interceptor errors within {:?}",
                self.pack, self.policy.window
            );
            self.enter_quarantine(&mut record, reason);
        }
    }

    /// Records how long a call took; an overrun is reported and counted.
    pub(crate) fn took(&self, interceptor: &str, seam: &'static str, elapsed: Duration) {
        let Some(budget) = self.policy.call_budget.filter(|b| elapsed > *b) else {
            return;
        };
        if let Some(sink) = &self.sink {
            sink(HealthEvent::OverBudget {
                pack: self.pack.clone(),
                interceptor: interceptor.to_owned(),
                seam,
                elapsed,
                budget,
            });
        }
        tracing::warn!(pack = %self.pack, %interceptor, ?elapsed, ?budget, "interceptor call over budget");
        let now = Instant::now();
        let mut record = self
            .record
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = Self::count(&mut record.overruns, now, self.policy.window);
        if count >= self.policy.max_overruns && record.reason.is_none() {
            let reason = format!(
                "pack '{}' is quarantined after {count} calls over its {budget:?} budget within {:?}",
                self.pack, self.policy.window
            );
            self.enter_quarantine(&mut record, reason);
        }
    }

    fn enter_quarantine(&self, record: &mut Record, reason: String) {
        tracing::warn!(pack = %self.pack, %reason, "pack quarantined; its seams now follow their failure policy");
        record.reason = Some(reason.clone());
        self.quarantined.store(true, Ordering::Release);
        if let Some(sink) = &self.sink {
            sink(HealthEvent::Quarantined {
                pack: self.pack.clone(),
                reason,
            });
        }
    }
}

/// How often the budget clock ticks: the resolution call budgets are
/// measured at.
pub(crate) const TICK: Duration = Duration::from_millis(5);

/// The clock call budgets are measured with: a tick count kept by one
/// background thread (`chimera-clock`, started the first time a pack with a
/// budget is called; it wakes every [`TICK`]), so reading it is one relaxed
/// atomic load — a few nanoseconds cheaper than even the kernel's coarse
/// clock, which matters at both ends of every run of pack interceptors.
/// Accurate to one tick.
pub(crate) fn coarse_now() -> Duration {
    static TICKS: AtomicU64 = AtomicU64::new(0);
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let origin = Instant::now();
        let spawned = std::thread::Builder::new()
            .name("chimera-clock".to_owned())
            .spawn(move || loop {
                std::thread::sleep(TICK);
                let elapsed = u64::try_from(origin.elapsed().as_millis()).unwrap_or(u64::MAX);
                TICKS.store(elapsed, Ordering::Relaxed);
            });
        if let Err(error) = spawned {
            tracing::warn!(%error, "no clock thread: call budgets cannot be measured");
        }
    });
    Duration::from_millis(TICKS.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recording() -> (HealthSink, Arc<Mutex<Vec<HealthEvent>>>) {
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        (Arc::new(move |e| sink.lock().unwrap().push(e)), events)
    }

    #[test]
    fn n_failures_within_the_window_quarantine_once() {
        let (sink, events) = recording();
        let policy = HealthPolicy {
            max_errors: 3,
            ..HealthPolicy::default()
        };
        let health = PackHealth::new("p", policy, Some(sink));
        health.failed();
        health.failed();
        assert!(health.quarantine().is_none());
        health.failed();
        health.failed();
        assert_eq!(
            health.quarantine().as_deref(),
            Some("pack 'p' is quarantined after 3 interceptor errors within 60s")
        );
        assert_eq!(events.lock().unwrap().len(), 1, "one quarantine event");
    }

    #[test]
    fn failures_outside_the_window_do_not_add_up() {
        let policy = HealthPolicy {
            max_errors: 2,
            window: Duration::ZERO,
            ..HealthPolicy::default()
        };
        let health = PackHealth::new("p", policy, None);
        health.failed();
        std::thread::sleep(Duration::from_millis(2));
        health.failed();
        assert!(health.quarantine().is_none());
    }

    #[test]
    fn overruns_are_reported_and_repeated_ones_quarantine() {
        let (sink, events) = recording();
        let policy = HealthPolicy {
            call_budget: Some(Duration::from_millis(10)),
            max_overruns: 2,
            ..HealthPolicy::default()
        };
        let health = PackHealth::new("p", policy, Some(sink));
        health.took("p/slow", "tool_call", Duration::from_millis(5));
        assert!(events.lock().unwrap().is_empty(), "within budget");
        health.took("p/slow", "tool_call", Duration::from_millis(50));
        health.took("p/slow", "tool_call", Duration::from_millis(50));
        let events = events.lock().unwrap();
        assert!(matches!(events[0], HealthEvent::OverBudget { .. }));
        assert!(matches!(
            events.last(),
            Some(HealthEvent::Quarantined { .. })
        ));
        assert!(health
            .quarantine()
            .unwrap()
            .contains("over its 10ms budget"));
    }
}
