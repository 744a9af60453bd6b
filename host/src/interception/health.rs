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
//!
//! A call's budget grows with its input: [`HealthPolicy::call_budget`]
//! plus [`HealthPolicy::per_mib`] for each MiB the pack is handed, so a
//! large text is no overrun for a pack that reads it at a steady rate.
//!
//! # In a server
//!
//! A server (`chimera serve`, `chimera mcp guard`) judges what clients
//! and servers it does not trust send, so a client must not be able to
//! switch a pack off for everyone ([`HealthPolicy::serving`]):
//!
//! * a judgement that could not be made (an error, a panic, a child
//!   process killed for its deadline or restarting, a quarantine) fails
//!   closed on every seam: the request is refused with a 503 in the
//!   client's wire, or the result withheld, never passed unjudged. A pack
//!   named in [`PackHealth::failing_open`] (`on_unavailable =
//!   "fail_open"`) follows each seam's own policy instead;
//! * a slow call is reported, never counted towards a quarantine: the
//!   slowness is the input's, and the request that sent it pays for it;
//! * failures quarantine a pack only when they come from at least
//!   [`SERVER_QUARANTINE_CLIENTS`] different clients within the window: a
//!   pack that fails on ordinary traffic, never one client's payloads. A
//!   client is the key a conversation is scoped by (`key-<hash>`, see the
//!   gateway's sessions); every request without a key is one client.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// What a call's budget grows by for each MiB of input it is handed.
    pub per_mib: Duration,
    /// The packs judge for a server's clients (see the module docs):
    /// failures fail closed, slow calls never quarantine, and failures
    /// quarantine only when several clients meet them.
    pub serving: bool,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        HealthPolicy {
            max_errors: 20,
            window: Duration::from_secs(60),
            call_budget: Some(Duration::from_millis(100)),
            max_overruns: 5,
            per_mib: DEFAULT_PER_MIB,
            serving: false,
        }
    }
}

/// What a call's budget grows by per MiB of input, by default: ten times
/// what the bundled packs' scans cost per MiB on a slow core (a few ms),
/// so only a pack that reads its input at a pace that is no linear scan's
/// runs over.
pub const DEFAULT_PER_MIB: Duration = Duration::from_millis(50);

/// In a server, the fewest different clients whose requests must meet a
/// pack's failures before they quarantine it.
pub const SERVER_QUARANTINE_CLIENTS: usize = 3;

const MIB: u128 = 1 << 20;

impl HealthPolicy {
    /// The budget of a call handed `bytes` of input (`None`: no budget).
    #[must_use]
    pub fn budget_for(&self, bytes: usize) -> Option<Duration> {
        let base = self.call_budget?;
        let grown = self.per_mib.as_nanos() * bytes as u128 / MIB;
        Some(base + Duration::from_nanos(u64::try_from(grown).unwrap_or(u64::MAX)))
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
    /// When each failure was met, and by which client (in a server).
    errors: VecDeque<(Instant, String)>,
    overruns: VecDeque<(Instant, String)>,
    reason: Option<String>,
}

/// The shared health record of one pack instance.
pub struct PackHealth {
    pack: String,
    policy: HealthPolicy,
    sink: Option<HealthSink>,
    /// In a server: its failures follow each seam's own policy rather
    /// than failing closed.
    fail_open: bool,
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
            fail_open: false,
            quarantined: AtomicBool::new(false),
            record: Mutex::new(Record::default()),
        }
    }

    /// The same record for a pack whose failures in a server follow each
    /// seam's own policy (`on_unavailable = "fail_open"`) when `open`.
    #[must_use]
    pub fn failing_open(mut self, open: bool) -> Self {
        self.fail_open = open;
        self
    }

    /// True when a failure of this pack's interceptors blocks whatever
    /// the seam's own policy: it judges for a server and was not set to
    /// fail open.
    #[inline]
    #[must_use]
    pub fn fails_closed(&self) -> bool {
        self.policy.serving && !self.fail_open
    }

    /// The policy it is watched by.
    #[must_use]
    pub fn policy(&self) -> &HealthPolicy {
        &self.policy
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

    /// Adds an event met by `client` at `now` and forgets those past the
    /// window: how many are left, and whether they come from enough
    /// clients to count (always, outside a server).
    fn count(
        &self,
        events: &mut VecDeque<(Instant, String)>,
        now: Instant,
        client: &str,
    ) -> (u32, bool) {
        let window = self.policy.window;
        events.push_back((now, client.to_owned()));
        while events
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > window)
        {
            events.pop_front();
        }
        let count = u32::try_from(events.len()).unwrap_or(u32::MAX);
        if !self.policy.serving {
            return (count, true);
        }
        let mut clients: Vec<&str> = events.iter().map(|(_, c)| c.as_str()).collect();
        clients.sort_unstable();
        clients.dedup();
        (count, clients.len() >= SERVER_QUARANTINE_CLIENTS)
    }

    /// Counts a failure met by a request of `session` (a conversation id);
    /// may quarantine.
    pub(crate) fn failed(&self, session: &str) {
        let now = Instant::now();
        let mut record = self
            .record
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut errors = std::mem::take(&mut record.errors);
        let (count, from_many) = self.count(&mut errors, now, client_of(session));
        record.errors = errors;
        if count >= self.policy.max_errors && from_many && record.reason.is_none() {
            let reason = format!(
                "pack '{}' is quarantined after {count} interceptor errors within {:?}",
                self.pack, self.policy.window
            );
            self.enter_quarantine(&mut record, reason);
        }
    }

    /// Records how long a call handed `bytes` of input took; an overrun
    /// (past the budget for that size) is reported, and counted outside a
    /// server.
    pub(crate) fn took(
        &self,
        interceptor: &str,
        seam: &'static str,
        elapsed: Duration,
        bytes: usize,
    ) {
        let Some(budget) = self.policy.budget_for(bytes).filter(|b| elapsed > *b) else {
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
        if self.policy.serving {
            // The input was slow to judge: the request that sent it paid.
            return;
        }
        let now = Instant::now();
        let mut record = self
            .record
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut overruns = std::mem::take(&mut record.overruns);
        let (count, _) = self.count(&mut overruns, now, "");
        record.overruns = overruns;
        if count >= self.policy.max_overruns && record.reason.is_none() {
            // The base budget: what the operator set (the one this call
            // overran grew with its input).
            let base = self.policy.call_budget.unwrap_or(budget);
            let reason = format!(
                "pack '{}' is quarantined after {count} calls over its {base:?} budget within {:?}",
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

/// The client a conversation id belongs to, for counting failures in a
/// server: the key it is scoped by (`key-<hash>`, the part before its
/// first `/`), or one anonymous client for every id without a key (a
/// client without a key can name any number of conversations).
fn client_of(session: &str) -> &str {
    if session.starts_with("key-") {
        session.split('/').next().unwrap_or(session)
    } else {
        ""
    }
}

/// The clock call budgets and stream windows are measured with: the
/// kernel's coarse monotonic clock (`CLOCK_MONOTONIC_COARSE`, read through
/// the vDSO without entering the kernel, ~10 ns), accurate to one
/// scheduler tick (1–10 ms; 4 ms on the machines measured). It costs
/// nothing while nothing reads it: no thread wakes to keep it (a ticking
/// thread cost an idle gateway 200 wake-ups a second, and a request at
/// 100/s with every pack a fifth of its CPU; BENCHMARKS.md, thirteenth
/// round). Read through the C library's `clock_gettime`, whose vDSO call
/// valgrind also follows (rustix's own vDSO lookup reads an address
/// valgrind does not map, so a gateway with packs could not be counted
/// under callgrind). Elsewhere, the standard monotonic clock.
#[cfg_attr(
    target_os = "linux",
    allow(
        unsafe_code,
        reason = "clock_gettime(3) has no safe wrapper in libc; it writes one timespec the call owns"
    )
)]
pub(crate) fn coarse_now() -> Duration {
    #[cfg(target_os = "linux")]
    {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid, writable `timespec` for the call's
        // length; the call writes nothing else.
        let refused = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &raw mut now) };
        if refused != 0 {
            // A kernel without the coarse clock (before 2.6.32) refuses it
            // every time: the standard clock then measures every budget,
            // never a clock that stands still and lets a slow pack run on.
            return standard_now();
        }
        // The monotonic clock is never negative and its nanoseconds are
        // below a second: nothing is lost by either conversion.
        Duration::new(
            u64::try_from(now.tv_sec).unwrap_or(0),
            u32::try_from(now.tv_nsec).unwrap_or(0),
        )
    }
    #[cfg(not(target_os = "linux"))]
    {
        standard_now()
    }
}

/// The standard monotonic clock, from the first reading in this process.
fn standard_now() -> Duration {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed()
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
        health.failed("s");
        health.failed("s");
        assert!(health.quarantine().is_none());
        health.failed("s");
        health.failed("s");
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
        health.failed("s");
        std::thread::sleep(Duration::from_millis(2));
        health.failed("s");
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
        health.took("p/slow", "tool_call", Duration::from_millis(5), 0);
        assert!(events.lock().unwrap().is_empty(), "within budget");
        health.took("p/slow", "tool_call", Duration::from_millis(50), 0);
        health.took("p/slow", "tool_call", Duration::from_millis(50), 0);
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

    #[test]
    fn a_calls_budget_grows_with_its_input() {
        let policy = HealthPolicy {
            call_budget: Some(Duration::from_millis(10)),
            per_mib: Duration::from_millis(20),
            max_overruns: 1,
            ..HealthPolicy::default()
        };
        assert_eq!(policy.budget_for(4 << 20), Some(Duration::from_millis(90)));
        let health = PackHealth::new("p", policy, None);
        health.took("p/scan", "context", Duration::from_millis(80), 4 << 20);
        assert!(health.quarantine().is_none(), "within the budget for 4 MiB");
        health.took("p/scan", "context", Duration::from_millis(80), 0);
        assert!(health.quarantine().is_some(), "over the budget for nothing");
    }

    fn serving(max_errors: u32) -> HealthPolicy {
        HealthPolicy {
            max_errors,
            call_budget: Some(Duration::from_millis(10)),
            max_overruns: 1,
            serving: true,
            ..HealthPolicy::default()
        }
    }

    #[test]
    fn in_a_server_slow_calls_never_quarantine_and_failures_fail_closed() {
        let health = PackHealth::new("p", serving(20), None);
        for _ in 0..50 {
            health.took("p/scan", "context", Duration::from_secs(1), 10);
        }
        assert!(health.quarantine().is_none());
        assert!(health.fails_closed());
        assert!(!PackHealth::new("p", serving(20), None)
            .failing_open(true)
            .fails_closed());
        assert!(!PackHealth::new("p", HealthPolicy::default(), None).fails_closed());
    }

    #[test]
    fn in_a_server_one_clients_failures_never_quarantine() {
        let health = PackHealth::new("p", serving(3), None);
        for _ in 0..100 {
            health.failed("key-aaaa/one");
            health.failed("key-aaaa/two");
            // Without a key, every name is the same client.
            health.failed("session/x");
            health.failed("req-123");
        }
        assert!(health.quarantine().is_none(), "two clients are not enough");
        health.failed("key-bbbb");
        assert!(health.quarantine().is_some(), "the third client's failure");
    }

    #[test]
    fn the_budget_clock_advances_and_keeps_no_thread_awake() {
        let start = coarse_now();
        std::thread::sleep(Duration::from_millis(40));
        let elapsed = coarse_now().saturating_sub(start);
        // One scheduler tick of resolution at either end, at most 10 ms.
        assert!(
            elapsed >= Duration::from_millis(20) && elapsed < Duration::from_secs(5),
            "{elapsed:?}"
        );
        // The threads' names, where the system lists them.
        #[cfg(target_os = "linux")]
        for thread in std::fs::read_dir("/proc/self/task").expect("this process's threads") {
            let comm = std::fs::read_to_string(thread.unwrap().path().join("comm")).unwrap();
            assert_ne!(comm.trim(), "chimera-clock", "a thread ticks for the clock");
        }
    }
}
