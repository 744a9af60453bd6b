//! What isolation costs: one `tool_call` chain of three allowing fixture
//! interceptors (`{"tool_call": {"count": 3}}`), per chain run, three ways
//! side by side in one run:
//!
//! * `in_process`: the pack `dlopen`ed into the host, as without isolation;
//! * `isolated`: the same pack file in a pack host (`--isolate`): the three
//!   interceptors are one round trip over the socket pair;
//! * `spawn_per_call`: a process started per call, as a command hook does
//!   (`/bin/true` with a small JSON on stdin, waited for).
//!
//! Run: `cargo bench -p chimera-tests --bench isolated`. Criterion reports
//! each; a table at the end gives p50 and p99 of separately sampled runs
//! and the ratios to in-process.

#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    reason = "statistics over measured durations, far from the limits"
)]
#![allow(
    missing_docs,
    reason = "criterion_group! generates an undocumented pub fn"
)]

use chimera_host::interception::{
    run_chain, ChainContext, HealthPolicy, Interceptors, SessionFacts, ToolCallSeam,
};
use chimera_host::isolate::Isolation;
use chimera_host::plugins::{PluginManager, Registry};
use chimera_host::types::ToolCall;
use criterion::{criterion_group, Criterion};
use serde_json::json;
use std::hint::black_box;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CONFIG: &str = r#"{"tool_call": {"count": 3}}"#;

/// The fixture's chains, loaded in-process or isolated.
fn chains(isolated: bool) -> (PluginManager, Interceptors) {
    let manager = PluginManager::new(Arc::new(Registry::new()), chimera_tests::pack_dirs());
    manager.set_health(
        HealthPolicy {
            call_budget: Some(Duration::from_secs(1)),
            ..HealthPolicy::default()
        },
        None,
    );
    if isolated {
        manager.set_isolation(Some(Isolation {
            packs: vec!["fixture".to_owned()],
            all: false,
            program: chimera_tests::chimera_bin(),
            start_timeout: Duration::from_secs(30),
            processes: 1,
        }));
    }
    manager.load("fixture", CONFIG).expect("the fixture loads");
    let chains = manager.registry().get_all();
    assert_eq!(chains.tool_call.len(), 3);
    (manager, chains)
}

fn run_once(chains: &Interceptors, call: &ToolCall, facts: &SessionFacts) {
    let cx = ChainContext {
        session: facts,
        events: None,
    };
    let outcome = run_chain::<ToolCallSeam>(&chains.tool_call, &(), call, &cx);
    assert!(outcome.blocked.is_none() && outcome.replaced.is_none());
    black_box(outcome);
}

fn spawn_once() {
    let mut child = Command::new("/bin/true")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn /bin/true");
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(br#"{"tool":"bash","arguments":{"command":"ls"}}"#);
    }
    assert!(child.wait().expect("wait").success());
}

/// p50 and p99 of `n` timed runs of `f`.
fn percentiles(n: usize, mut f: impl FnMut()) -> (Duration, Duration) {
    let mut times: Vec<Duration> = (0..n)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect();
    times.sort_unstable();
    (times[n / 2], times[n * 99 / 100])
}

fn bench(c: &mut Criterion) {
    let call = ToolCall::new("c1", "bash", json!({"command": "ls"}));
    let facts = SessionFacts::new("bench");
    let (_in_manager, in_process) = chains(false);
    let (_iso_manager, isolated) = chains(true);
    let mut group = c.benchmark_group("isolated_tool_call_allow_3");
    group.bench_function("in_process", |b| {
        b.iter(|| run_once(&in_process, &call, &facts));
    });
    group.bench_function("isolated", |b| {
        b.iter(|| run_once(&isolated, &call, &facts));
    });
    group.sample_size(20);
    group.bench_function("spawn_per_call", |b| b.iter(spawn_once));
    group.finish();

    let rows = [
        (
            "in_process",
            percentiles(20_000, || run_once(&in_process, &call, &facts)),
        ),
        (
            "isolated",
            percentiles(20_000, || run_once(&isolated, &call, &facts)),
        ),
        ("spawn_per_call", percentiles(300, spawn_once)),
    ];
    let base = rows[0].1 .0.as_secs_f64();
    println!(
        "\n{:<16} {:>12} {:>12} {:>14}",
        "chain run", "p50", "p99", "p50 / in-proc"
    );
    for (name, (p50, p99)) in rows {
        println!(
            "{name:<16} {:>10.2}µs {:>10.2}µs {:>13.0}×",
            p50.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6,
            p50.as_secs_f64() / base
        );
    }
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
