//! A whole scripted turn, with and without packs, side by side.
//!
//! Run: `cargo bench -p chimera-tests --bench turn`
//!
//! One user turn of the real agent loop on the scripted model: a provider
//! call that proposes one tool call (`think`), the tool, and a second
//! provider call that answers. `no_packs` runs it with nothing registered;
//! `fixture_allow_4_seams` with the loaded fixture pack allowing on every
//! seam (context and `provider_request` run twice, `tool_call` and `tool_result`
//! once); and `three_chimera_packs` with plan-gate, redactor and
//! delegate-spawner loaded by name (the turn plans with `think`, so every
//! pack's interceptors run and allow); `twelve_gates` with every gate
//! loaded by name, in the recommended order, configured so that each runs
//! and allows (the answer is JSON, so `json-schema` validates it; the tool
//! call gets `tool-timeout`'s deadline, so it runs on a thread of its own).
//! Sessions are built outside the timed part.

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

use chimera_host::agent::AgentSession;
use chimera_host::plugins::{PluginManager, Registry};
use chimera_host::providers::ScriptedModel;
use chimera_host::tools::{ToolSet, Workspace};
use chimera_tests::packs_dir;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use serde_json::json;
use std::hint::black_box;
use std::sync::Arc;

const SCRIPT: &str = r#"{"responses": [
  {"content": "let me think", "tool_calls": [{"id": "c1", "name": "think", "arguments": {"thought": "plan: answer briefly"}}]},
  {"content": "{\"answer\": \"done\"}"}
]}"#;

fn session(registry: &Arc<Registry>, workspace: &Workspace) -> AgentSession {
    let model = ScriptedModel::from_json(SCRIPT).expect("script");
    AgentSession::builder(Arc::new(model), workspace.clone())
        .system("You are a benchmark agent.")
        .tools(ToolSet::standard())
        .registry(Arc::clone(registry))
        .build()
}

fn turn(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let workspace = Workspace::new(dir.path()).expect("workspace");
    let empty = Arc::new(Registry::new());
    let with_pack = Arc::new(Registry::new());
    let manager = PluginManager::new(Arc::clone(&with_pack), chimera_tests::pack_dirs());
    let allow = json!({"action": "allow"});
    manager
        .load(
            "fixture",
            &json!({"context": allow, "provider_request": allow, "tool_call": allow, "tool_result": allow})
                .to_string(),
        )
        .expect("fixture loads");

    let chimera = Arc::new(Registry::new());
    let packs = PluginManager::new(Arc::clone(&chimera), vec![packs_dir().to_owned()]);
    for name in ["plan-gate", "redactor", "delegate-spawner"] {
        packs.load(name, "").expect("pack loads");
    }

    let gates = Arc::new(Registry::new());
    let gate_manager = PluginManager::new(Arc::clone(&gates), vec![packs_dir().to_owned()]);
    for (name, config) in [
        ("endless-loop", json!({})),
        ("token-budget", json!({"max_tokens": 100_000_000})),
        ("rate-limiter", json!({"requests_per_minute": 100_000_000})),
        ("tool-filter", json!({"exclude": ["no_such_tool"]})),
        ("prompt-injection", json!({})),
        ("stop-words", json!({"words": ["forbidden"]})),
        (
            "approval-policy",
            json!({"rules": [{"match": {"tool": "bash"}}]}),
        ),
        ("context-window", json!({})),
        ("content-safety", json!({})),
        ("json-schema", json!({"schema": {"type": "object"}})),
        ("output-length", json!({})),
        ("tool-timeout", json!({})),
    ] {
        gate_manager
            .load(name, &config.to_string())
            .expect("gate loads");
    }

    let mut group = c.benchmark_group("scripted_turn_one_tool_call");
    for (name, registry) in [
        ("no_packs", &empty),
        ("fixture_allow_4_seams", &with_pack),
        ("three_chimera_packs", &chimera),
        ("twelve_gates", &gates),
    ] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || session(registry, &workspace),
                |mut session| {
                    let result = session.run_turn(black_box("answer briefly"));
                    assert!(result.success);
                    black_box(result)
                },
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, turn);
criterion_main!(benches);
