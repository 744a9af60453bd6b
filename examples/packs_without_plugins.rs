//! Run: `cargo build --workspace --examples && "${CARGO_TARGET_DIR:-target}"/debug/examples/packs_without_plugins`
//!
//! A host that links pack crates directly (no shared library, no registry):
//! `interceptors_of::<P>(config)` builds the pack in-process and returns its
//! chains as a bundle to hand to a session.

use chimera_host::agent::{AgentEvent, AgentSession, EventBus};
use chimera_host::plugins::interceptors_of;
use chimera_host::providers::ScriptedModel;
use chimera_host::tools::{ToolSet, Workspace};
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut bundle = interceptors_of::<plan_gate::PlanGate>("")?;
    bundle.extend(&interceptors_of::<redactor::Redactor>(
        r#"{"pattern": "acme-[0-9]{4}", "replacement": "<hidden>"}"#,
    )?);

    let model = ScriptedModel::from_json(
        r#"{"responses": [
            {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "key.txt", "content": "acme-1234"}}]},
            {"tool_calls": [{"id": "t1", "name": "think", "arguments": {"thought": "plan: write, then read back"}}]},
            {"tool_calls": [{"id": "w2", "name": "write_file", "arguments": {"path": "key.txt", "content": "acme-1234"}},
                            {"id": "r1", "name": "read_file", "arguments": {"path": "key.txt"}}]},
            {"content": "done"}
        ]}"#,
    )?;
    let scratch = tempfile::tempdir()?;
    let bus = EventBus::new();
    bus.subscribe(|event| {
        if let AgentEvent::ToolResult { name, content, .. } = event {
            println!("{name}: {content}");
        }
    });
    let mut session = AgentSession::builder(Arc::new(model), Workspace::new(scratch.path())?)
        .tools(ToolSet::standard())
        .interceptors(Arc::new(bundle))
        .events(bus)
        .build();
    let result = session.run_turn("store the key");
    println!("answer: {}", result.output);
    Ok(())
}
