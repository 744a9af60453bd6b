//! What `GET /metrics` reports, in the Prometheus text format: requests by
//! wire and status, decisions by interceptor, seam and decision, stream
//! retracts, and the time spent upstream against the time spent in the
//! gateway itself.

use crate::agent::{AgentEvent, EventBus};
use crate::state::StateService;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The upper bounds of the latency histograms' buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0,
];

/// A latency histogram with fixed buckets.
#[derive(Default)]
struct Histogram {
    counts: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Histogram {
    fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        for (bound, count) in BUCKETS.iter().zip(&self.counts) {
            if seconds <= *bound {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (bound, count) in BUCKETS.iter().zip(&self.counts) {
            let _ = writeln!(
                out,
                "{name}_bucket{{le=\"{bound}\"}} {}",
                count.load(Ordering::Relaxed)
            );
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        #[allow(
            clippy::cast_precision_loss,
            reason = "a sum of nanoseconds shown in seconds: f64's 52 bits hold 52 days exactly"
        )]
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

/// Decisions counted by (interceptor, mode, seam, decision): `mode` is
/// `monitor` for a decision recorded and not enacted, else `enforce`.
type Decisions = BTreeMap<(String, &'static str, &'static str, String), u64>;

/// Stream holds counted by gate, and their ends by (gate, outcome).
#[derive(Default)]
struct Holds {
    started: BTreeMap<String, u64>,
    ended: BTreeMap<(String, &'static str), u64>,
}

/// The gateway's counters.
#[derive(Default)]
pub(super) struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    decisions: Arc<Mutex<Decisions>>,
    retracts: Arc<AtomicU64>,
    holds: Arc<Mutex<Holds>>,
    upstream_retries: AtomicU64,
    upstream: Histogram,
    overhead: Histogram,
}

impl Metrics {
    /// Counts one retry of an upstream call the gateway made itself
    /// (`upstream_retries`).
    pub(super) fn upstream_retry(&self) {
        self.upstream_retries.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one answered request.
    pub(super) fn request(&self, wire: &'static str, status: u16) {
        *lock(&self.requests).entry((wire, status)).or_default() += 1;
    }

    /// Records one relayed request's time upstream and its time in the
    /// gateway (the rest of the request's time).
    pub(super) fn timing(&self, upstream: Duration, total: Duration) {
        self.upstream.observe(upstream);
        self.overhead.observe(total.saturating_sub(upstream));
    }

    /// Counts every decision, retract and stream hold `bus` carries.
    pub(super) fn watch(&self, bus: &EventBus) {
        let decisions = Arc::clone(&self.decisions);
        let retracts = Arc::clone(&self.retracts);
        let holds = Arc::clone(&self.holds);
        bus.subscribe(move |event| match event {
            AgentEvent::Interceptor(event) => {
                *lock(&decisions)
                    .entry((
                        event.interceptor.clone(),
                        if event.monitor { "monitor" } else { "enforce" },
                        event.seam,
                        event.decision.to_string(),
                    ))
                    .or_default() += 1;
            }
            AgentEvent::StreamRetract { .. } => {
                retracts.fetch_add(1, Ordering::Relaxed);
            }
            AgentEvent::StreamHold { gate, .. } => {
                *lock(&holds).started.entry(gate.clone()).or_default() += 1;
            }
            AgentEvent::StreamHoldEnd { gate, outcome, .. } => {
                *lock(&holds)
                    .ended
                    .entry((gate.clone(), outcome))
                    .or_default() += 1;
            }
            _ => {}
        });
    }

    /// The text `GET /metrics` answers.
    pub(super) fn render(&self, state: Option<&StateService>) -> String {
        let mut out = String::new();
        out.push_str(
            "# HELP chimera_gateway_requests_total Requests answered, by wire and status.\n\
             # TYPE chimera_gateway_requests_total counter\n",
        );
        for ((wire, status), count) in lock(&self.requests).iter() {
            let _ = writeln!(
                out,
                "chimera_gateway_requests_total{{wire=\"{wire}\",status=\"{status}\"}} {count}"
            );
        }
        out.push_str(
            "# HELP chimera_gateway_decisions_total Interceptor decisions shown, by interceptor, mode (enforce, or monitor: recorded, not enacted), seam and decision.\n\
             # TYPE chimera_gateway_decisions_total counter\n",
        );
        for ((interceptor, mode, seam, decision), count) in lock(&self.decisions).iter() {
            let _ = writeln!(
                out,
                "chimera_gateway_decisions_total{{interceptor=\"{}\",mode=\"{mode}\",seam=\"{seam}\",decision=\"{decision}\"}} {count}",
                label(interceptor)
            );
        }
        let _ = writeln!(
            out,
            "# HELP chimera_gateway_stream_retracts_total Streamed text retracted by a later block.\n\
             # TYPE chimera_gateway_stream_retracts_total counter\n\
             chimera_gateway_stream_retracts_total {}",
            self.retracts.load(Ordering::Relaxed)
        );
        self.render_holds(&mut out);
        let _ = writeln!(
            out,
            "# HELP chimera_gateway_upstream_retries_total Upstream calls the gateway retried itself (upstream_retries).\n\
             # TYPE chimera_gateway_upstream_retries_total counter\n\
             chimera_gateway_upstream_retries_total {}",
            self.upstream_retries.load(Ordering::Relaxed)
        );
        self.upstream.render(
            &mut out,
            "chimera_gateway_upstream_seconds",
            "Time spent waiting on the upstream, per relayed request.",
        );
        self.overhead.render(
            &mut out,
            "chimera_gateway_overhead_seconds",
            "Time spent in the gateway itself (seams, packs, wire), per relayed request.",
        );
        if let Some(state) = state {
            render_state(&mut out, state);
        }
        out
    }
}

impl Metrics {
    /// The stream holds: begun by gate, ended by gate and outcome, and how
    /// many streams are held now (begun − ended).
    fn render_holds(&self, out: &mut String) {
        let holds = lock(&self.holds);
        out.push_str(
            "# HELP chimera_gateway_stream_holds_total Streamed text a gate began holding beyond the trailing word, by gate.\n\
             # TYPE chimera_gateway_stream_holds_total counter\n",
        );
        for (gate, count) in &holds.started {
            let _ = writeln!(
                out,
                "chimera_gateway_stream_holds_total{{gate=\"{}\"}} {count}",
                label(gate)
            );
        }
        out.push_str(
            "# HELP chimera_gateway_stream_hold_ends_total Stream holds ended, by gate and outcome (released, blocked, ended).\n\
             # TYPE chimera_gateway_stream_hold_ends_total counter\n",
        );
        for ((gate, outcome), count) in &holds.ended {
            let _ = writeln!(
                out,
                "chimera_gateway_stream_hold_ends_total{{gate=\"{}\",outcome=\"{outcome}\"}} {count}",
                label(gate)
            );
        }
        let started: u64 = holds.started.values().sum();
        let ended: u64 = holds.ended.values().sum();
        let _ = writeln!(
            out,
            "# HELP chimera_gateway_streams_held Streams a gate holds text of now.\n\
             # TYPE chimera_gateway_streams_held gauge\n\
             chimera_gateway_streams_held {}",
            started.saturating_sub(ended)
        );
    }
}

/// The gate-state store's health: operations, failures, fallbacks,
/// outages, and whether it answers now.
fn render_state(out: &mut String, state: &StateService) {
    let health = state.health();
    let store = label(&state.describe());
    for (name, help, value) in [
        (
            "operations",
            "State operations asked of the store.",
            &health.operations,
        ),
        (
            "failures",
            "State operations the store failed or timed out.",
            &health.failures,
        ),
        (
            "fallbacks",
            "Failed operations counted in this process instead (fail_open).",
            &health.fallbacks,
        ),
        (
            "outages",
            "Outages of the store begun (each said in one warning).",
            &health.outages,
        ),
        (
            "unawaited",
            "Adds sent to the store without waiting for their answer.",
            &health.unawaited,
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP chimera_state_{name}_total {help}\n# TYPE chimera_state_{name}_total counter\n\
             chimera_state_{name}_total{{store=\"{store}\"}} {}",
            value.load(Ordering::Relaxed)
        );
    }
    let _ = writeln!(
        out,
        "# HELP chimera_state_up Whether the store answered the last operation.\n\
         # TYPE chimera_state_up gauge\nchimera_state_up{{store=\"{store}\"}} {}",
        u8::from(!health.is_down())
    );
}

/// A label value with `\`, `"` and newlines escaped.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_format_has_counters_and_cumulative_buckets() {
        let metrics = Metrics::default();
        metrics.request("messages", 403);
        metrics.timing(
            Duration::from_millis(20),
            Duration::from_millis(20) + Duration::from_micros(300),
        );
        let text = metrics.render(Some(&StateService::in_process()));
        assert!(text.contains("chimera_gateway_requests_total{wire=\"messages\",status=\"403\"} 1"));
        assert!(text.contains("chimera_gateway_overhead_seconds_bucket{le=\"0.0005\"} 1"));
        assert!(text.contains("chimera_gateway_overhead_seconds_bucket{le=\"0.00025\"} 0"));
        assert!(text.contains("chimera_gateway_upstream_seconds_count 1"));
        assert!(
            text.contains("chimera_state_up{store=\"in process\"} 1"),
            "{text}"
        );
        assert!(text.contains("chimera_state_failures_total{store=\"in process\"} 0"));
        assert!(text.contains("chimera_gateway_streams_held 0"));
        assert_eq!(label("a\"b\\"), "a\\\"b\\\\");
    }
}
