//! Registry, merge and lifecycle through real runs, with the loaded fixture
//! pack as the plugin.

use crate::harness::{script, Harness};
use crate::helpers::manager;
use chimera_host::interception::*;
use chimera_host::tools::ToolSet;
use chimera_host::types::ToolCall;
use serde_json::json;
use std::sync::{Arc, Mutex};

fn write_hello() -> serde_json::Value {
    script(json!([
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "hello.txt", "content": "one"}}]},
        {"content": "done"}
    ]))
}

fn write_gate() -> String {
    json!({"tool_call": {"action": "block", "reason": "write-gate: writes are gated", "tools": ["write_file"]}})
        .to_string()
}

#[test]
fn a_loaded_pack_gates_every_session_with_no_host_wiring() {
    let manager = manager();
    manager.load("fixture", &write_gate()).unwrap();
    let run = Harness::new(write_hello())
        .tools(ToolSet::standard())
        .registry(manager.registry().clone())
        .run("create hello.txt");
    assert!(run.result.success);
    assert!(!run.workspace.path().join("hello.txt").exists());
    assert_eq!(
        run.tool_messages(),
        ["Blocked by interceptor: write-gate: writes are gated"]
    );

    manager.unload("fixture").unwrap();
    let run = Harness::new(write_hello())
        .tools(ToolSet::standard())
        .registry(manager.registry().clone())
        .run("create hello.txt");
    assert_eq!(
        std::fs::read_to_string(run.workspace.path().join("hello.txt")).unwrap(),
        "one"
    );
}

fn host_tagger(seen: Arc<Mutex<Vec<String>>>) -> Interceptors {
    let mut host = Interceptors::new();
    host.tool_call
        .push(Interceptor::tool_call("host", move |c: &ToolCall| {
            let content = c.arguments.get_str("content").unwrap_or_default();
            seen.lock().unwrap().push(content.clone());
            let mut arguments = c.arguments.parse();
            arguments["content"] = json!(format!("{content}+host"));
            Ok(InterceptDecision::Replace(ToolCall::new(
                &c.id, &c.name, arguments,
            )))
        }));
    host
}

#[test]
fn plugin_chains_run_first_and_host_chains_last() {
    let manager = manager();
    manager
        .load(
            "fixture",
            &json!({"tool_call": {"action": "replace", "find": "one", "with": "one+plugin", "tools": ["write_file"]}})
                .to_string(),
        )
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let run = Harness::new(write_hello())
        .tools(ToolSet::standard())
        .registry(manager.registry().clone())
        .host(host_tagger(seen.clone()))
        .run("create hello.txt");
    assert_eq!(*seen.lock().unwrap(), ["one+plugin"]);
    assert_eq!(
        std::fs::read_to_string(run.workspace.path().join("hello.txt")).unwrap(),
        "one+plugin+host"
    );
}

#[test]
fn a_block_from_either_side_is_terminal() {
    let manager = manager();
    manager
        .load(
            "fixture",
            &json!({"tool_call": {"action": "replace", "find": "one", "with": "one+plugin"}})
                .to_string(),
        )
        .unwrap();
    let mut host = Interceptors::new();
    host.tool_call
        .push(Interceptor::tool_call("host", |c: &ToolCall| {
            if c.name == "write_file" {
                return Ok(InterceptDecision::block("host: no writes"));
            }
            Ok(InterceptDecision::Allow)
        }));
    let run = Harness::new(write_hello())
        .tools(ToolSet::standard())
        .registry(manager.registry().clone())
        .host(host)
        .run("create hello.txt");
    assert!(!run.workspace.path().join("hello.txt").exists());
    assert!(run.tool_messages()[0].contains("host: no writes"));

    let gated = crate::helpers::manager();
    gated.load("fixture", &write_gate()).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    Harness::new(write_hello())
        .tools(ToolSet::standard())
        .registry(gated.registry().clone())
        .host(host_tagger(seen.clone()))
        .run("create hello.txt");
    assert!(
        seen.lock().unwrap().is_empty(),
        "the host chain is never consulted"
    );
}

#[test]
fn the_effective_chain_is_none_the_host_bundle_itself_or_a_merge() {
    let manager = manager();
    let (session, ..) = Harness::new(write_hello())
        .registry(manager.registry().clone())
        .session();
    assert!(session.effective_interceptors().is_none());

    let host = Arc::new({
        let mut host = Interceptors::new();
        host.tool_call
            .push(Interceptor::tool_call("h", |_: &ToolCall| {
                Ok(InterceptDecision::Allow)
            }));
        host
    });
    let (with_host, ..) = Harness::new(write_hello())
        .registry(manager.registry().clone())
        .host_arc(host.clone())
        .session();
    assert!(Arc::ptr_eq(
        &with_host.effective_interceptors().unwrap(),
        &host
    ));

    manager.load("fixture", &write_gate()).unwrap();
    let effective = session.effective_interceptors().unwrap();
    let names: Vec<&str> = effective.tool_call.iter().map(Interceptor::name).collect();
    assert_eq!(names, ["fixture/tool_call-0"]);
    manager.unload("fixture").unwrap();
    assert!(session.effective_interceptors().is_none());
}

#[test]
fn a_pack_loaded_between_turns_gates_the_next_turn_of_the_same_session() {
    let manager = manager();
    let (mut session, _model, _events, workspace) = Harness::new(script(json!([
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "1"}}]},
        {"content": "first done"},
        {"tool_calls": [{"id": "w2", "name": "write_file", "arguments": {"path": "b.txt", "content": "2"}}]},
        {"content": "second done"}
    ])))
    .tools(ToolSet::standard())
    .registry(manager.registry().clone())
    .session();
    assert!(session.run_turn("write a").success);
    manager.load("fixture", &write_gate()).unwrap();
    assert!(session.run_turn("write b").success);
    assert!(workspace.path().join("a.txt").exists());
    assert!(!workspace.path().join("b.txt").exists());
}
