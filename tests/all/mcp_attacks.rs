//! `chimera mcp guard` attacked from both sides: calls written so that a
//! parser weaker than the server's would let them by (a lone surrogate,
//! deep nesting, a batch, no id, a call over several lines), and a server
//! that carries a secret in every shape a model reads, read by a raw
//! client and by the official TypeScript and Python SDK clients.

use chimera_tests::mcp::{
    hostile_server as hostile, result_text as text, server, servers_dir, McpClient,
};
use chimera_tests::{chimera_bin, publish, test_packs_dir, workspace_root};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The secret the hostile server carries.
const SECRET: &str = "sk-live-0123456789abcdef";

/// `chimera mcp guard FLAGS SERVER…` (no `--`: the first argument that is
/// not a flag starts the server's command), the server's record in
/// `record` when given.
fn guard(flags: &[&str], server: &[String], record: Option<&Path>) -> Command {
    let mut command = Command::new(chimera_bin());
    command
        .args(["mcp", "guard", "--plugins-dir"])
        .arg(test_packs_dir())
        .args(flags)
        .args(server)
        .env("SECRET", SECRET);
    if let Some(record) = record {
        command.env("RECORD", record);
    }
    command
}

/// A `tools/call` of `name` with id `id` (JSON text; `None`: no id) and
/// `arguments` (JSON text).
fn call(id: Option<&str>, name: &str, arguments: &str) -> String {
    let id = id.map_or(String::new(), |id| format!("\"id\":{id},"));
    format!(
        "{{\"jsonrpc\":\"2.0\",{id}\"method\":\"tools/call\",\"params\":{{\"name\":\"{name}\",\"arguments\":{arguments}}}}}"
    )
}

/// The five ways to write a call a strict reader misses, each for tool
/// `name`, ids from `base`: (what it is, the bytes, its id if it has one).
fn attacks(name: &str, base: u64) -> Vec<(&'static str, String, Option<u64>)> {
    let deep = format!("{{\"m\":{}{}}}", "[".repeat(200), "]".repeat(200));
    let id = |n: u64| (base + n).to_string();
    vec![
        (
            "a lone surrogate",
            call(Some(&id(1)), name, r#"{"m":"hi\ud800"}"#) + "\n",
            Some(base + 1),
        ),
        (
            "nesting 200 deep",
            call(Some(&id(2)), name, &deep) + "\n",
            Some(base + 2),
        ),
        (
            "a batch",
            format!("[{}]\n", call(Some(&id(3)), name, "{}")),
            Some(base + 3),
        ),
        ("no id", call(None, name, "{}") + "\n", None),
        (
            "several lines",
            call(Some(&id(5)), name, "{}").replace(',', ",\n") + "\n",
            Some(base + 5),
        ),
    ]
}

/// A ping, and its answer: everything sent before it has been handled.
fn settle(guarded: &mut McpClient, id: u64) {
    guarded.send(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"}));
    let pong = guarded.answer_to(&json!(id));
    assert!(pong["result"].is_object(), "{pong}");
}

#[test]
fn a_denied_tool_never_runs_on_a_permissive_server_however_its_call_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("ran.txt");
    let mut guarded = McpClient::start(guard(&["--deny", "ech*"], &hostile(), Some(&record)));
    for (what, bytes, id) in attacks("echo", 100) {
        guarded.send_raw(&bytes);
        if let Some(id) = id {
            let refused = guarded.answer_to(&json!(id));
            assert_eq!(refused["result"]["isError"], true, "{what}: {refused}");
            assert!(
                text(&refused["result"]).starts_with("Permission denied for echo"),
                "{what}: {refused}"
            );
        }
    }
    // What the guard cannot read is refused, never forwarded: a repeated
    // key (which `name` wins depends on the parser), nesting past the cap.
    guarded.send_raw(
        "{\"jsonrpc\":\"2.0\",\"id\":200,\"method\":\"tools/call\",\"params\":{\"name\":\"other\",\"name\":\"echo\"}}\n",
    );
    let refused = guarded.next_message();
    assert_eq!(refused["error"]["code"], -32700, "{refused}");
    let past_cap = call(
        Some("201"),
        "echo",
        &format!("{}{}", "[".repeat(600), "]".repeat(600)),
    );
    guarded.send_raw(&(past_cap + "\n"));
    assert_eq!(guarded.next_message()["error"]["code"], -32700);
    // The same five calls of a tool the guard allows all run: the server
    // reads every one of those forms.
    for (what, bytes, id) in attacks("other", 300) {
        guarded.send_raw(&bytes);
        if let Some(id) = id {
            let ran = guarded.answer_to(&json!(id));
            assert_eq!(text(&ran["result"]), "ran other", "{what}: {ran}");
        }
    }
    settle(&mut guarded, 400);
    let ran = std::fs::read_to_string(&record).unwrap();
    assert_eq!(ran.matches("RAN other").count(), 5, "{ran}");
    assert!(!ran.contains("echo"), "{ran}");
}

#[test]
fn a_denied_tool_never_runs_on_the_reference_server_however_its_call_is_written() {
    let Some(everything) = server("@modelcontextprotocol/server-everything") else {
        return;
    };
    let mut guarded = McpClient::start(guard(&["--deny", "echo"], &everything, None));
    for (what, bytes, id) in attacks("echo", 10) {
        guarded.send_raw(&bytes);
        if let Some(id) = id {
            let refused = guarded.answer_to(&json!(id));
            assert!(
                text(&refused["result"]).starts_with("Permission denied for echo"),
                "{what}: {refused}"
            );
        }
    }
    // A call the guard allows, written over several lines, reaches the
    // line-reading server on one line, as judged.
    let allowed = call(Some("50"), "get-sum", r#"{"a":1,"b":2}"#).replace(',', ",\n");
    guarded.send_raw(&(allowed + "\n"));
    let sum = guarded.answer_to(&json!(50));
    assert!(text(&sum["result"]).contains('3'), "{sum}");
}

/// Every texts a model reads of what the hostile server sends, read
/// through the guard with the redactor by a raw client.
#[test]
fn a_secret_in_any_shape_reaches_a_raw_client_redacted_or_not_at_all() {
    let mut guarded = McpClient::start(guard(&["--pack", "redactor"], &hostile(), None));
    let mut seen = Vec::new();
    for (id, name) in [
        "text",
        "embedded",
        "link",
        "structured",
        "is_error",
        "rpc_error",
        "progress",
        "sample",
        "elicit",
        "string_id",
        "garbage",
    ]
    .into_iter()
    .enumerate()
    {
        let id = 100 + id;
        guarded.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": {}, "_meta": {"progressToken": name}}}));
        // Everything up to the answer (notifications, requests).
        loop {
            let message = guarded.next_message();
            let done = message["id"] == json!(id);
            seen.push(message);
            if done {
                break;
            }
        }
    }
    for (method, params) in [
        ("resources/read", json!({"uri": "file:///notes"})),
        ("prompts/get", json!({"name": "p"})),
        (
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "again", "version": "0"}}),
        ),
    ] {
        seen.push(guarded.request(method, params));
    }
    let all = Value::Array(seen).to_string();
    assert!(!all.contains(SECRET), "{all}");
    for shape in [
        "the key is [redacted]",
        "file:///keys/[redacted]",
        "https://x.test/[redacted]",
        "{\"key\":\"the key is [redacted]\"}",
        "The key is [redacted]",
        "after the garbage",
        "\"method\":\"sampling/createMessage\"",
        "\"method\":\"elicitation/create\"",
        "\"method\":\"notifications/progress\"",
    ] {
        assert!(all.contains(shape), "{shape} in {all}");
    }
    // The answer written with a string id ("108" for 108), and the one
    // with a repeated key, were withheld: each call has the one answer.
    assert!(!all.contains("\"id\":\"108\""), "{all}");
    assert_eq!(all.matches("\"id\":108").count(), 1, "{all}");
}

/// A client script published beside the SDK it imports.
fn published(dir: &Path, name: &str) -> PathBuf {
    let source = std::fs::read(workspace_root().join("tests/support/clients").join(name))
        .expect("the client script");
    publish(dir, name, &source)
}

/// The guard's command line for a client to start: `[CMD, ARG…]`.
fn guarded_command() -> String {
    let mut command = vec![
        chimera_bin().display().to_string(),
        "mcp".to_owned(),
        "guard".to_owned(),
        "--plugins-dir".to_owned(),
        test_packs_dir().display().to_string(),
        "--pack".to_owned(),
        "redactor".to_owned(),
    ];
    command.extend(hostile());
    serde_json::to_string(&command).unwrap()
}

/// What a client printed, checked: no secret anywhere, and each shape
/// there, redacted.
fn redacted_everywhere(client: &str, out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{client}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    let all = seen.to_string();
    assert!(!all.contains(SECRET), "{client}: {all}");
    assert_eq!(
        seen["instructions"], "Use the tools. The key is [redacted]",
        "{client}: {all}"
    );
    for shape in ["text", "embedded", "link", "structured", "is_error"] {
        assert!(
            seen[shape].to_string().contains("[redacted]"),
            "{client}: {shape} in {all}"
        );
    }
    assert!(
        seen["rpc_error"].to_string().contains("[redacted]"),
        "{client}: {all}"
    );
    assert!(
        seen["progress_progress"].to_string().contains("[redacted]"),
        "{client}: {all}"
    );
    assert!(
        seen["sampling"].to_string().contains("[redacted]"),
        "{client}: {all}"
    );
    assert!(
        seen["elicitation"].to_string().contains("[redacted]"),
        "{client}: {all}"
    );
    assert!(
        seen["resource"].to_string().contains("[redacted]"),
        "{client}: {all}"
    );
    assert!(
        seen["prompt"].to_string().contains("[redacted]"),
        "{client}: {all}"
    );
    assert_eq!(text(&seen["string_id"]), "answered", "{client}: {all}");
    assert_eq!(
        text(&seen["garbage"]),
        "after the garbage",
        "{client}: {all}"
    );
}

#[test]
fn the_official_typescript_client_sees_every_shape_redacted() {
    if server("@modelcontextprotocol/server-everything").is_none() {
        return;
    }
    let script = published(&servers_dir(), "mcp_shapes.mjs");
    let out = Command::new("node")
        .arg(script)
        .arg(guarded_command())
        .env("SECRET", SECRET)
        .output()
        .unwrap();
    redacted_everywhere("the TypeScript client", &out);
}

#[test]
fn the_official_python_client_sees_every_shape_redacted() {
    let Some(python) = chimera_tests::python::sdk_python() else {
        return;
    };
    let out = Command::new(python)
        .arg(workspace_root().join("tests/support/clients/mcp_shapes.py"))
        .arg(guarded_command())
        .env("SECRET", SECRET)
        .output()
        .unwrap();
    redacted_everywhere("the Python client", &out);
}

#[test]
fn the_mcp_inspector_cli_drives_the_guard_as_written_without_a_double_dash() {
    let Some(everything) = server("@modelcontextprotocol/server-everything") else {
        return;
    };
    let Some(inspector) = chimera_tests::mcp::inspector() else {
        return;
    };
    let plugins = test_packs_dir().display().to_string();
    let guard = [
        chimera_bin().display().to_string(),
        "mcp".to_owned(),
        "guard".to_owned(),
        "--plugins-dir".to_owned(),
        plugins,
        "--pack".to_owned(),
        "redactor".to_owned(),
    ];
    let run = |method: &[&str]| {
        let out = Command::new(&inspector)
            .arg("--cli")
            .args(&guard)
            .args(&everything)
            .args(method)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let listed = run(&["--method", "tools/list"]);
    assert!(listed.contains("\"echo\""), "{listed}");
    let echoed = run(&[
        "--method",
        "tools/call",
        "--tool-name",
        "echo",
        "--tool-arg",
        &format!("message=deploy with {SECRET}"),
    ]);
    assert!(echoed.contains("Echo: deploy with [redacted]"), "{echoed}");
    assert!(!echoed.contains(SECRET), "{echoed}");
}
