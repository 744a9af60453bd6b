//! Run: `cargo build --workspace --examples && "${CARGO_TARGET_DIR:-target}"/debug/examples/embed_host`
//!
//! Embedding the host: a registry, a plugin manager that loads plan-gate
//! by entry-point name from the build directory, host chains of your own,
//! and a session whose turns merge both (plugin chains first).

use chimera_host::agent::{AgentEvent, AgentSession, EventBus};
use chimera_host::interception::{InterceptDecision, Interceptor, Interceptors};
use chimera_host::plugins::{PluginManager, Registry};
use chimera_host::providers::ScriptedModel;
use chimera_host::tools::{ToolSet, Workspace};
use chimera_host::types::ToolCall;
use std::path::PathBuf;
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Packs built by `cargo build --workspace` sit next to the example binary's parent.
    let build_dir: PathBuf = std::env::current_exe()?
        .parent()
        .and_then(|examples| examples.parent())
        .ok_or("no build directory")?
        .to_owned();
    let registry = Arc::new(Registry::new());
    let manager = PluginManager::new(Arc::clone(&registry), vec![build_dir]);
    manager.load("plan-gate", "")?;

    // A host chain: refuse any bash command that mentions /etc.
    let mut host = Interceptors::new();
    host.tool_call
        .push(Interceptor::tool_call("no-etc", |call: &ToolCall| {
            let command = call.arguments.get_str("command").unwrap_or_default();
            if call.name == "bash" && command.contains("/etc") {
                return Ok(InterceptDecision::block("host: /etc is off limits"));
            }
            Ok(InterceptDecision::Allow)
        }));

    let model = ScriptedModel::from_json(
        r#"{"responses": [
            {"tool_calls": [{"id": "a", "name": "bash", "arguments": {"command": "cat /etc/hostname"}}]},
            {"tool_calls": [{"id": "b", "name": "think", "arguments": {"thought": "plan: stay in the workspace"}}]},
            {"tool_calls": [{"id": "c", "name": "bash", "arguments": {"command": "cat /etc/hostname"}}]},
            {"content": "I will not read /etc."}
        ]}"#,
    )?;
    let scratch = tempfile::tempdir()?;
    let bus = EventBus::new();
    bus.subscribe(|event| match event {
        AgentEvent::ToolResult { name, content, .. } => println!("{name}: {content}"),
        AgentEvent::RunEnd { output, .. } => println!("answer: {output}"),
        _ => {}
    });
    let mut session = AgentSession::builder(Arc::new(model), Workspace::new(scratch.path())?)
        .tools(ToolSet::standard())
        .registry(registry)
        .interceptors(Arc::new(host))
        .events(bus)
        .build();
    // First bash: plan-gate blocks (no plan yet). After the plan, the host chain blocks.
    session.run_turn("what is the hostname?");
    Ok(())
}
