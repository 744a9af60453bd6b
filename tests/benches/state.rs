//! What one gate-state operation costs: in this process (the default
//! store), in this process through the ABI as a pack calls it (the
//! service bound to a pack, a trait object and the key scoping), and in a
//! real `redis-server` on loopback (one Lua script a call), each the same
//! counter add and the same token-bucket take, measured in one run.
//!
//! Run: `cargo bench -p chimera-tests --bench state` (needs
//! `redis-server`, which `.ci/run` installs; without it the Redis rows
//! say so). Prints a Markdown table: mean, p50 and p99 per operation and
//! each against the in-process one.

#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a benchmark report: durations printed as floats"
)]

use abi_stable::std_types::RStr;
use chimera_host::state::{FailPolicy, GateState, RedisStore, StateService, StateStore};
use chimera_plugin_api::abi::state::StateScope;
use chimera_tests::redis::RedisServer;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Per-call latencies of `n` calls of `op`, sorted.
fn timed(n: usize, mut op: impl FnMut(usize)) -> Vec<Duration> {
    for i in 0..n / 10 {
        op(i);
    }
    let mut times: Vec<Duration> = (0..n)
        .map(|i| {
            let started = Instant::now();
            op(i);
            started.elapsed()
        })
        .collect();
    times.sort_unstable();
    times
}

fn at(times: &[Duration], p: f64) -> Duration {
    times[((times.len() as f64 - 1.0) * p).round() as usize]
}

fn mean(times: &[Duration]) -> Duration {
    times.iter().sum::<Duration>() / times.len().max(1) as u32
}

fn us(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e6)
}

/// One row per way: (name, add latencies, take latencies).
type Row = (&'static str, Vec<Duration>, Vec<Duration>);

/// The add and the take through `service` (a pack's view: conversation
/// `c-<i % 64>`), `n` each.
fn through_the_abi(name: &'static str, state: &GateState, n: usize) -> Row {
    let service = state.bind("bench");
    let conversations: Vec<String> = (0..64).map(|i| format!("c-{i}")).collect();
    let key = RStr::from_str("spent");
    let add = timed(n, |i| {
        let conversation = RStr::from_str(&conversations[i % 64]);
        let _ = service.incr_by(StateScope::CONVERSATION, conversation, key, 1, 0);
    });
    let take = timed(n, |_| {
        let _ = service.take(
            StateScope::GLOBAL,
            RStr::from_str(""),
            key,
            1,
            1e9,
            1_000_000,
        );
    });
    (name, add, take)
}

/// The add and the take straight on `service`, `n` each.
fn direct(name: &'static str, service: &StateService, n: usize) -> Row {
    let keys: Vec<String> = (0..64)
        .map(|i| format!("chimera:bench:c-{i}:spent"))
        .collect();
    let add = timed(n, |i| {
        let _ = service.incr_by(FailPolicy::Closed, &keys[i % 64], 1, Duration::ZERO);
    });
    let take = timed(n, |_| {
        let _ = service.take(
            FailPolicy::Closed,
            "chimera:bench::requests",
            1,
            1e9,
            1_000_000,
        );
    });
    (name, add, take)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let quick = std::env::args().any(|a| a == "quick");
    let (local_n, redis_n) = if quick {
        (20_000, 2_000)
    } else {
        (200_000, 20_000)
    };
    let memory = StateService::in_process();
    let mut rows = vec![
        direct("in process", &memory, local_n),
        through_the_abi(
            "in process, through the ABI",
            &GateState::new(memory.clone(), FailPolicy::Closed, BTreeMap::new()),
            local_n,
        ),
    ];
    let redis = RedisServer::start();
    if let Some(server) = &redis {
        let store = RedisStore::new(&server.url(), Duration::from_millis(100)).expect("a URL");
        let store: Arc<dyn StateStore> = Arc::new(store);
        let service = StateService::new(store, |line| eprintln!("{line}"));
        rows.push(direct("redis on loopback", &service, redis_n));
        rows.push(through_the_abi(
            "redis on loopback, through the ABI",
            &GateState::new(service, FailPolicy::Closed, BTreeMap::new()),
            redis_n,
        ));
    }
    let base = (mean(&rows[0].1), mean(&rows[0].2));
    println!("| way | add mean (µs) | add p50 | add p99 | take mean (µs) | take p50 | take p99 | add / in process | take / in process |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (name, add, take) in &rows {
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {:.1}× | {:.1}× |",
            us(mean(add)),
            us(at(add, 0.5)),
            us(at(add, 0.99)),
            us(mean(take)),
            us(at(take, 0.5)),
            us(at(take, 0.99)),
            mean(add).as_secs_f64() / base.0.as_secs_f64(),
            mean(take).as_secs_f64() / base.1.as_secs_f64(),
        );
    }
    if redis.is_none() {
        println!("| redis on loopback | redis-server is not installed | | | | | | | |");
    }
}
