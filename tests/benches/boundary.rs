//! The cost of the ABI boundary, side by side with plain host closures.
//!
//! Run: `cargo bench -p chimera-tests --bench boundary`
//!
//! * `tool_call_allow/{host,pack}/{1,3,10}`: a `tool_call` chain of N allowing
//!   interceptors, as host closures and from the loaded fixture pack. The
//!   host closures do what the fixture's allowing interceptor does (count the
//!   call, check the tool filter), so only the boundary differs.
//! * `tool_call_replace/{host,pack}`: one interceptor that rewrites the call.
//! * `load/fixture`: copy, dlopen, version and layout checks, instantiate and
//!   activate one pack from a file whose content was never loaded before.

#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap,
    reason = "statistics over measured durations and sizes, far from the limits"
)]
#![allow(
    missing_docs,
    reason = "criterion_group! generates an undocumented pub fn"
)]

use chimera_host::interception::{
    run_chain, ChainContext, ChainOutcome, InterceptDecision, Interceptor, SessionFacts,
    ToolCallInterceptor,
};
use chimera_host::plugins::{PluginManager, Registry};
use chimera_host::types::ToolCall;
use chimera_tests::pack_path;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use serde_json::json;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn call() -> ToolCall {
    ToolCall::new(
        "call_1",
        "write_file",
        json!({"path": "/data/x.txt", "count": 3, "recursive": true}),
    )
}

fn host_allow_chain(n: usize, counter: &Arc<AtomicU64>) -> Vec<ToolCallInterceptor> {
    (0..n)
        .map(|i| {
            let counter = Arc::clone(counter);
            let tools: Vec<String> = Vec::new();
            Interceptor::tool_call(format!("host-{i}"), move |call: &ToolCall| {
                counter.fetch_add(1, Ordering::Relaxed);
                if !tools.is_empty() && !tools.iter().any(|t| t == &call.name) {
                    return Ok(InterceptDecision::Allow);
                }
                Ok(InterceptDecision::Allow)
            })
        })
        .collect()
}

fn pack_chain(config: serde_json::Value) -> (PluginManager, Vec<ToolCallInterceptor>) {
    let manager = PluginManager::new(Arc::new(Registry::new()), chimera_tests::pack_dirs());
    manager
        .load("fixture", &config.to_string())
        .expect("fixture loads");
    let chain = manager.registry().get_all().tool_call;
    (manager, chain)
}

fn run(
    chain: &[ToolCallInterceptor],
    call: &ToolCall,
    facts: &SessionFacts,
) -> ChainOutcome<ToolCall> {
    let cx = ChainContext {
        session: facts,
        events: None,
    };
    run_chain(chain, &(), call, &cx)
}

fn allow(c: &mut Criterion) {
    let facts = SessionFacts::new("bench");
    let call = call();
    let counter = Arc::new(AtomicU64::new(0));
    let mut group = c.benchmark_group("tool_call_allow");
    for n in [1usize, 3, 10] {
        let host = host_allow_chain(n, &counter);
        let (_manager, pack) = pack_chain(json!({"tool_call": {"action": "allow", "count": n}}));
        group.bench_with_input(BenchmarkId::new("host", n), &n, |b, _| {
            b.iter(|| black_box(run(black_box(&host), black_box(&call), &facts)));
        });
        group.bench_with_input(BenchmarkId::new("pack", n), &n, |b, _| {
            b.iter(|| black_box(run(black_box(&pack), black_box(&call), &facts)));
        });
    }
    group.finish();
}

fn replace(c: &mut Criterion) {
    let facts = SessionFacts::new("bench");
    let call = call();
    let host = vec![Interceptor::tool_call("host", |call: &ToolCall| {
        let mut arguments = call.arguments.parse();
        if let Some(path) = arguments.get_mut("path") {
            *path = json!(format!("{}+x", path.as_str().unwrap_or_default()));
        }
        Ok(InterceptDecision::Replace(ToolCall {
            arguments: chimera_host::types::Arguments::from_value(&arguments),
            ..call.clone()
        }))
    })];
    let (_manager, pack) = pack_chain(json!({"tool_call": {"action": "replace", "with": "+x"}}));
    let mut group = c.benchmark_group("tool_call_replace");
    group.bench_function("host", |b| {
        b.iter(|| black_box(run(&host, black_box(&call), &facts)));
    });
    group.bench_function("pack", |b| {
        b.iter(|| black_box(run(&pack, black_box(&call), &facts)));
    });
    group.finish();
}

fn load(c: &mut Criterion) {
    let original = std::fs::read(pack_path("chimera-fixture-pack")).expect("fixture built");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut generation = 0u64;
    let mut group = c.benchmark_group("load");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("fixture", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                // Distinct content each time (a trailing byte): no cache hit.
                generation += 1;
                let path = dir.path().join(format!("libfixture{generation}.so"));
                let mut bytes = original.clone();
                bytes.extend_from_slice(&generation.to_le_bytes());
                std::fs::write(&path, &bytes).expect("write copy");
                let manager = PluginManager::new(Arc::new(Registry::new()), vec![]);
                let started = Instant::now();
                manager
                    .load_file(&path, Some("fixture"), r#"{"tool_call": {}}"#)
                    .expect("loads");
                total += started.elapsed();
            }
            total
        });
    });
    group.finish();
}

criterion_group!(benches, allow, replace, load);
criterion_main!(benches);
