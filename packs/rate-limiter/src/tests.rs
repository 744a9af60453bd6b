//! Unit tests on a fake clock: the texts, the modes, and progress — every
//! paused request is admitted at its slot and the window never holds more
//! than the limit.

use super::*;
use serde_json::json;
use std::collections::BTreeSet;

/// A clock the test moves by hand.
#[derive(Clone)]
struct FakeClock(Arc<Mutex<Instant>>);

impl FakeClock {
    fn new() -> Self {
        FakeClock(Arc::new(Mutex::new(Instant::now())))
    }
    fn advance(&self, by: Duration) {
        *self.0.lock().unwrap() += by;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        *self.0.lock().unwrap()
    }
}

fn limiter(config: serde_json::Value) -> (RateLimiter, FakeClock) {
    let clock = FakeClock::new();
    let config: Config = serde_json::from_value(config).unwrap();
    (
        RateLimiter::with_clock(config, clock.clone()).unwrap(),
        clock,
    )
}

fn refused(config: serde_json::Value) -> String {
    let error = match serde_json::from_value::<Config>(config.clone()) {
        Err(error) => error.to_string(),
        Ok(config) => RateLimiter::new(config)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default(),
    };
    assert!(!error.is_empty(), "{config} was accepted");
    assert!(!error.contains('\n'), "{error}");
    error
}

#[test]
fn the_defaults_are_nexus_and_bad_values_or_unknown_keys_refuse_the_load() {
    let config: Config = serde_json::from_value(json!({})).unwrap();
    assert_eq!(config, Config::default());
    assert_eq!(
        (
            config.mode,
            config.requests_per_minute,
            config.queue.max_pending
        ),
        (Mode::Reject, 60, 100)
    );
    assert!((config.window_seconds - 60.0).abs() < f64::EPSILON);
    assert_eq!(
        config.pause_message,
        "Rate limit reached. Pausing for {seconds}s..."
    );
    assert!(refused(json!({"requests_per_minute": 0})).contains("requests_per_minute"));
    assert!(refused(json!({"window_seconds": 0})).contains("window_seconds"));
    assert!(refused(json!({"window_seconds": -1})).contains("window_seconds"));
    assert!(refused(json!({"queue": {"max_pending": 0}})).contains("max_pending"));
    refused(json!({"mode": "drop"}));
    refused(json!({"rate": 3}));
    refused(json!({"queue": {"size": 3}}));
}

#[test]
fn a_full_window_pauses_with_the_reason_and_the_rendered_message() {
    let (gate, clock) = limiter(
        json!({"requests_per_minute": 2, "window_seconds": 10, "pause_message": "paused {seconds}s"}),
    );
    assert_eq!(gate.judge("s"), Answer::Admit);
    assert_eq!(gate.judge("s"), Answer::Admit);
    assert_eq!(
        gate.judge("s"),
        Answer::Pause {
            wait: Duration::from_secs(10),
            reason: "Rate limited: retry in 11s".into(),
            notice: "paused 11s".into(),
        }
    );
    // Another conversation 3.5 s later: 6.5 s to wait, shown as 6 + 1.
    clock.advance(Duration::from_millis(3500));
    let Answer::Pause {
        wait,
        reason,
        notice,
    } = gate.judge("other")
    else {
        panic!("not paused");
    };
    assert_eq!(wait, Duration::from_millis(6500));
    assert_eq!(
        (reason.as_str(), notice.as_str()),
        ("Rate limited: retry in 7s", "paused 7s")
    );
}

/// One conversation sending `requests` requests back to back the way the
/// host does: a pause is slept out, then the same request is offered again.
/// Returns when each was admitted, and checks none was paused twice.
fn one_conversation(gate: &RateLimiter, clock: &FakeClock, requests: usize) -> Vec<Instant> {
    let mut admitted = Vec::new();
    for request in 0..requests {
        let mut pauses = 0;
        loop {
            match gate.judge("solo") {
                Answer::Admit => break,
                Answer::Pause { wait, .. } => {
                    pauses += 1;
                    assert!(pauses <= 1, "request {request} was paused again");
                    clock.advance(wait);
                }
                Answer::Reject { reason, .. } => panic!("request {request}: {reason}"),
            }
        }
        admitted.push(clock.now());
        clock.advance(Duration::from_millis(1));
    }
    admitted
}

/// No window-long span holds more than `limit` admissions.
fn assert_within_limit(admitted: &[Instant], limit: usize, window: Duration) {
    let mut sorted = admitted.to_vec();
    sorted.sort();
    for pair in sorted.windows(limit + 1) {
        assert!(
            pair[limit] - pair[0] >= window,
            "{} admissions within {:?}",
            limit + 1,
            pair[limit] - pair[0]
        );
    }
}

#[test]
fn a_conversation_on_its_own_makes_progress_at_limits_one_and_two() {
    for mode in ["reject", "queue"] {
        for limit in [1_u32, 2, 3] {
            let (gate, clock) =
                limiter(json!({"mode": mode, "requests_per_minute": limit, "window_seconds": 10}));
            let admitted = one_conversation(&gate, &clock, 12);
            assert_eq!(admitted.len(), 12, "{mode} {limit}");
            // Back to back: bursts of `limit`, each after a pause.
            let waited = admitted
                .windows(2)
                .filter(|p| p[1] - p[0] > Duration::from_millis(1))
                .count();
            assert_eq!(
                waited,
                12_usize.div_ceil(limit as usize) - 1,
                "{mode} {limit}"
            );
            assert_within_limit(&admitted, limit as usize, Duration::from_secs(10));
            // The window is never over the limit, reservations included.
            let now = clock.now();
            let start = now.checked_sub(Duration::from_secs(10)).unwrap();
            let held = gate
                .window
                .lock()
                .unwrap()
                .slots()
                .into_iter()
                .filter(|&s| s > start)
                .count();
            assert!(held <= limit as usize, "{mode} {limit}: {held}");
        }
    }
}

#[test]
fn interleaved_conversations_each_get_their_own_slot_and_all_get_through() {
    for mode in ["reject", "queue"] {
        for limit in [1_u32, 2] {
            let (gate, clock) =
                limiter(json!({"mode": mode, "requests_per_minute": limit, "window_seconds": 1}));
            // A discrete-event host: (time offset, conversation) in order.
            let start = clock.now();
            let mut due: BTreeSet<(Duration, usize)> = BTreeSet::new();
            let mut left = [6_usize; 3];
            let mut pauses = [0_u32; 3];
            for who in 0..3 {
                due.insert((Duration::from_millis(who as u64), who));
            }
            let mut admitted = Vec::new();
            let mut paused = 0;
            while let Some((at, who)) = due.pop_first() {
                let now = start + at;
                clock.advance(now.saturating_duration_since(clock.now()));
                match gate.judge(&format!("conversation-{who}")) {
                    Answer::Admit => {
                        admitted.push(now);
                        pauses[who] = 0;
                        left[who] -= 1;
                        if left[who] > 0 {
                            due.insert((at + Duration::from_millis(3), who));
                        }
                    }
                    Answer::Pause { wait, .. } => {
                        paused += 1;
                        pauses[who] += 1;
                        assert_eq!(pauses[who], 1, "{mode} {limit}: paused twice");
                        due.insert((at + wait, who));
                    }
                    Answer::Reject { reason, .. } => panic!("{mode} {limit}: {reason}"),
                }
            }
            assert_eq!(admitted.len(), 18, "{mode} {limit}");
            assert!(paused >= 12, "{mode} {limit}: only {paused} pauses");
            assert_within_limit(&admitted, limit as usize, Duration::from_secs(1));
        }
    }
}

#[test]
fn queue_mode_bounds_the_waiting_requests_and_drains_them_at_the_configured_rate() {
    let (gate, _clock) = limiter(json!({
        "mode": "queue", "requests_per_minute": 2, "window_seconds": 10,
        "queue": {"max_pending": 2}
    }));
    assert_eq!(gate.judge("a"), Answer::Admit);
    assert_eq!(gate.judge("b"), Answer::Admit);
    let waits: Vec<Duration> = ["c", "d"]
        .iter()
        .map(|who| match gate.judge(who) {
            Answer::Pause { wait, reason, .. } => {
                assert!(
                    reason.starts_with("Rate limited (queued): retry in ~"),
                    "{reason}"
                );
                wait
            }
            other => panic!("{who}: {other:?}"),
        })
        .collect();
    // One drained per window / limit = 5 s.
    assert_eq!(waits, [Duration::from_secs(10), Duration::from_secs(15)]);
    assert_eq!(
        gate.judge("e"),
        Answer::Reject {
            reason: "Rate limited: queue full (max_pending=2)".into(),
            notice: "Rate limit queue full (2 pending). Request rejected.".into(),
        }
    );
}

#[test]
fn a_conversation_back_before_its_slot_waits_for_the_same_slot_and_is_counted_once() {
    let (gate, clock) = limiter(json!({"requests_per_minute": 1, "window_seconds": 120}));
    assert_eq!(gate.judge("s"), Answer::Admit);
    let Answer::Pause { wait, .. } = gate.judge("s") else {
        panic!("not paused");
    };
    assert_eq!(wait, Duration::from_secs(120));
    // The host caps a pause at 60 s.
    clock.advance(Duration::from_secs(60));
    let Answer::Pause { wait, .. } = gate.judge("s") else {
        panic!("not paused");
    };
    assert_eq!(wait, Duration::from_secs(60));
    clock.advance(wait);
    assert_eq!(gate.judge("s"), Answer::Admit);
    // Its reservation is the one slot in the window: not counted again.
    assert_eq!(gate.window.lock().unwrap().slots(), [clock.now()]);
}

#[test]
fn a_reservation_nobody_claims_lapses_when_its_slot_leaves_the_window() {
    let (gate, clock) = limiter(json!({"requests_per_minute": 1, "window_seconds": 10}));
    assert_eq!(gate.judge("a"), Answer::Admit);
    assert!(matches!(gate.judge("gone"), Answer::Pause { .. }));
    clock.advance(Duration::from_secs(21));
    assert_eq!(gate.window.lock().unwrap().pending(clock.now()), 0);
    assert_eq!(gate.judge("b"), Answer::Admit);
    // The one that went away is a new request when it comes back.
    assert!(matches!(gate.judge("gone"), Answer::Pause { .. }));
}

#[test]
fn a_wait_is_rounded_up_to_the_millisecond_so_the_host_never_wakes_before_the_slot() {
    let (gate, clock) = limiter(json!({"requests_per_minute": 1, "window_seconds": 1}));
    assert_eq!(gate.judge("a"), Answer::Admit);
    clock.advance(Duration::from_nanos(300_500));
    let Answer::Pause { wait, .. } = gate.judge("b") else {
        panic!("not paused");
    };
    assert_eq!(wait, Duration::from_secs(1), "999.7 ms, rounded up");
    clock.advance(wait);
    assert_eq!(gate.judge("b"), Answer::Admit);
}

#[test]
fn a_hot_swapped_build_takes_over_the_window_and_its_reservations() {
    let (old, clock) = limiter(json!({"requests_per_minute": 1, "window_seconds": 10}));
    assert_eq!(old.judge("a"), Answer::Admit);
    assert!(matches!(old.judge("b"), Answer::Pause { .. }));
    clock.advance(Duration::from_secs(2));
    let state = old.export_state().unwrap();
    let new = RateLimiter::with_clock(
        serde_json::from_value(json!({"requests_per_minute": 1, "window_seconds": 10})).unwrap(),
        clock.clone(),
    )
    .unwrap();
    new.import_state(state).unwrap();
    // Still full: a newcomer waits behind b's slot (10 s) until 20 s.
    let Answer::Pause { wait, .. } = new.judge("c") else {
        panic!("the window was not handed over");
    };
    assert_eq!(wait, Duration::from_secs(18));
    clock.advance(Duration::from_secs(8));
    assert_eq!(new.judge("b"), Answer::Admit, "b keeps its slot");
    assert!(new.import_state(json!({"slots": []})).is_err());
}

#[test]
fn with_scope_key_each_client_key_has_its_own_window_behind_a_gateway() {
    let (gate, clock) =
        limiter(json!({"scope": "key", "requests_per_minute": 2, "window_seconds": 10}));
    // Two conversations of one key draw from that key's window.
    assert_eq!(gate.judge_as("key-aaaa", true), Answer::Admit);
    assert_eq!(gate.judge_as("key-aaaa/chat-1", true), Answer::Admit);
    let Answer::Pause { wait, .. } = gate.judge_as("key-aaaa/chat-2", true) else {
        panic!("the key's window holds two");
    };
    assert_eq!(wait, Duration::from_secs(10));
    // Another key is untouched, however far the first is past its limit.
    for _ in 0..5 {
        assert!(matches!(
            gate.judge_as("key-aaaa", true),
            Answer::Pause { .. }
        ));
    }
    assert_eq!(gate.judge_as("key-bbbb/x", true), Answer::Admit);
    assert_eq!(gate.judge_as("key-bbbb", true), Answer::Admit);
    // Requests without a key share one window, whatever they are named.
    assert_eq!(gate.judge_as("chatcmpl-1", true), Answer::Admit);
    assert_eq!(gate.judge_as("session/mine", true), Answer::Admit);
    assert!(matches!(
        gate.judge_as("chatcmpl-2", true),
        Answer::Pause { .. }
    ));
    // One slot is reserved per key: every request of the key waits for
    // the same one, and the first back at it takes it.
    clock.advance(Duration::from_secs(10));
    assert_eq!(gate.judge_as("key-aaaa/chat-3", true), Answer::Admit);
    // Outside a gateway, each session is a client of its own.
    assert_eq!(gate.judge("key-aaaa"), Answer::Admit);
    assert_eq!(gate.judge("key-aaaa/chat-2"), Answer::Admit);
}

#[test]
fn the_windows_of_idle_clients_are_swept_and_hot_swaps_keep_each_clients_window() {
    let (gate, clock) =
        limiter(json!({"scope": "key", "requests_per_minute": 1, "window_seconds": 1}));
    for key in 0..500 {
        assert_eq!(gate.judge_as(&format!("key-{key}"), true), Answer::Admit);
    }
    clock.advance(Duration::from_secs(2));
    assert_eq!(gate.judge_as("key-late", true), Answer::Admit);
    for key in 0..200 {
        gate.judge_as(&format!("key-again-{key}"), true);
    }
    assert!(
        gate.keyed().windows.len() <= 256,
        "{} windows kept",
        gate.keyed().windows.len()
    );
    let state = gate.export_state().unwrap();
    let new = RateLimiter::with_clock(
        serde_json::from_value(
            json!({"scope": "key", "requests_per_minute": 1, "window_seconds": 1}),
        )
        .unwrap(),
        clock.clone(),
    )
    .unwrap();
    new.import_state(state).unwrap();
    assert!(matches!(
        new.judge_as("key-late", true),
        Answer::Pause { .. }
    ));
    assert_eq!(new.judge_as("key-fresh", true), Answer::Admit);
}
