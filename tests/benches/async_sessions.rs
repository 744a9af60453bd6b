//! Many concurrent async sessions against a slow model, beside one.
//!
//! Run: `cargo bench -p chimera-tests --bench async_sessions`
//!
//! Each session runs one user turn through `run_turn_async` on one
//! multi-threaded Tokio runtime, over the real OpenAI-compatible provider
//! (its async HTTP client), against a loopback server that answers every
//! request after 50 ms; all sessions share one registry with the stateful
//! example pack loaded. `one_session` times one turn; `hundred_sessions`
//! a hundred started together, until the last ends. Sessions are built
//! outside the timed part. Before criterion's runs, the bench prints the
//! medians of both over the same rounds and their ratio: the loop waiting
//! asynchronously, a hundred sessions should take about as long as one.

#![allow(
    clippy::cast_precision_loss,
    reason = "statistics over measured durations, far from the limits"
)]
#![allow(
    missing_docs,
    reason = "criterion_group! generates an undocumented pub fn"
)]

use chimera_host::agent::AgentSession;
use chimera_host::plugins::{PluginManager, Registry};
use chimera_host::providers::{HttpSettings, OpenAiConfig, OpenAiProvider, Provider};
use chimera_host::tools::{ToolSet, Workspace};
use chimera_host::types::Headers;
use chimera_tests::slow_http::SlowServer;
use chimera_tests::stateful_pack_path;
use criterion::{criterion_group, criterion_main, Criterion};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

/// The model's delay per request.
const DELAY: Duration = Duration::from_millis(50);

struct Bench {
    runtime: Runtime,
    provider: Arc<dyn Provider>,
    registry: Arc<Registry>,
    workspace: Workspace,
    _dir: tempfile::TempDir,
    _server: SlowServer,
}

impl Bench {
    fn new() -> Bench {
        let server = SlowServer::start(DELAY, 0);
        let registry = Arc::new(Registry::new());
        PluginManager::new(Arc::clone(&registry), Vec::new())
            .load_file(&stateful_pack_path(), None, "{}")
            .expect("the stateful pack loads");
        let provider: Arc<dyn Provider> = Arc::new(OpenAiProvider::new(OpenAiConfig {
            base_url: format!("{}/v1", server.url),
            model: "m".into(),
            api_key: Some("sk-bench-key-000111".into()),
            headers: Headers::default(),
            http: HttpSettings::default(),
        }));
        let dir = tempfile::tempdir().expect("temp dir");
        let workspace = Workspace::new(dir.path()).expect("workspace");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        Bench {
            runtime,
            provider,
            registry,
            workspace,
            _dir: dir,
            _server: server,
        }
    }

    /// The wall time of `count` sessions' turns, started together.
    fn sessions(&self, count: usize) -> Duration {
        let sessions: Vec<AgentSession> = (0..count)
            .map(|n| {
                AgentSession::builder(Arc::clone(&self.provider), self.workspace.clone())
                    .tools(ToolSet::new())
                    .registry(Arc::clone(&self.registry))
                    .session_id(format!("bench-{n}"))
                    .build()
            })
            .collect();
        self.runtime.block_on(async {
            let started = Instant::now();
            let running: Vec<_> = sessions
                .into_iter()
                .map(|mut session| {
                    tokio::spawn(async move {
                        let result = session.run_turn_async("go").await;
                        assert!(result.success, "{result:?}");
                    })
                })
                .collect();
            for handle in running {
                handle.await.expect("a session");
            }
            started.elapsed()
        })
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn async_sessions(c: &mut Criterion) {
    let bench = Bench::new();
    // Warm up (the pack, the connection set-up paths), then the same rounds
    // for both, alternating.
    bench.sessions(100);
    let (mut one, mut hundred) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        one.push(bench.sessions(1));
        hundred.push(bench.sessions(100));
    }
    let (one, hundred) = (median(one), median(hundred));
    eprintln!(
        "async_sessions: one session {:.1} ms, 100 concurrent sessions {:.1} ms, ratio {:.2}",
        one.as_secs_f64() * 1e3,
        hundred.as_secs_f64() * 1e3,
        hundred.as_secs_f64() / one.as_secs_f64()
    );
    let mut group = c.benchmark_group("async_sessions");
    group.sample_size(10);
    group.bench_function("one_session", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| bench.sessions(1)).sum());
    });
    group.bench_function("hundred_sessions", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| bench.sessions(100)).sum());
    });
    group.finish();
}

criterion_group!(benches, async_sessions);
criterion_main!(benches);
