//! `chimera mcp guard` in front of the reference MCP servers from npm
//! (installed once per machine; the tests say so in one line and skip
//! without them), driven as an MCP client drives it: JSON-RPC on its
//! standard input and output.

use chimera_tests::mcp::{result_text as text, server, McpClient};
use chimera_tests::{chimera_bin, test_packs_dir};
use serde_json::{json, Value};
use std::io::BufReader;
use std::process::{Command, Stdio};

/// `chimera mcp guard` with `flags` in front of `server`, as a client's
/// server.
fn guard(flags: &[&str], server: &[String]) -> Command {
    let mut command = Command::new(chimera_bin());
    command
        .args(["mcp", "guard"])
        .args(flags)
        .arg("--")
        .args(server);
    command
}

#[test]
fn a_read_through_the_guard_is_redacted_and_a_write_a_pack_blocks_never_reaches_the_server() {
    let Some(filesystem) = server("@modelcontextprotocol/server-filesystem") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(
        root.join("notes.txt"),
        "deploy with sk-live-0123456789abcdef today\n",
    )
    .unwrap();
    let mut command = filesystem;
    command.push(root.display().to_string());
    let plugins = test_packs_dir().display().to_string();
    let no_writes = json!({"tool_call": {"action": "block", "reason": "writes are gated",
                                         "tools": ["write_file"]}});
    let log = dir.path().join("audit.jsonl");
    let log_arg = log.display().to_string();
    let mut guarded = McpClient::start(guard(
        &[
            "--plugins-dir",
            &plugins,
            "--pack",
            "redactor",
            "--pack",
            &format!("fixture={no_writes}"),
            "--audit",
            &log_arg,
        ],
        &command,
    ));
    // Everything but a call passes as the server sent it.
    let tools = guarded.request("tools/list", json!({}));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(
        names.contains(&"read_text_file") && names.contains(&"write_file"),
        "{names:?}"
    );

    let notes = root.join("notes.txt").display().to_string();
    let read = guarded.call("read_text_file", json!({"path": notes}));
    let shown = read.to_string();
    assert!(
        text(&read).contains("deploy with [redacted] today"),
        "{read}"
    );
    assert!(!shown.contains("sk-live"), "nowhere in the result: {read}");

    let target = root.join("written.txt");
    let path = target.display().to_string();
    let write = guarded.call("write_file", json!({"path": path, "content": "hi"}));
    assert_eq!(write["isError"], true, "{write}");
    assert_eq!(
        text(&write),
        "Blocked by interceptor: writes are gated",
        "{write}"
    );
    assert!(!target.exists(), "the server never got the call");

    // The client leaves: the guard ends, and its audit log holds each
    // call's decisions under the call's id, and verifies.
    guarded.close();
    let lines = crate::audit::lines(&log);
    let of = |id: u64, decision: &str| {
        lines
            .iter()
            .find(|l| l["request"] == json!(id.to_string()) && l["decision"] == decision)
            .unwrap_or_else(|| panic!("no {decision} of call {id} in {lines:?}"))
            .clone()
    };
    assert_eq!(of(3, "replaced")["pack"], "redactor");
    assert_eq!(of(4, "blocked")["pack"], "fixture");
    let verified = crate::audit::verify(dir.path(), &log, &[]);
    assert_eq!(verified.status(), 0, "{}", verified.stderr());
}

#[test]
fn a_server_killed_mid_call_gets_the_call_an_error_result_and_ends_the_guard_in_one_line() {
    let Some(everything) = server("@modelcontextprotocol/server-everything") else {
        return;
    };
    let mut command = guard(&[], &everything);
    command.stderr(Stdio::piped());
    let mut guarded = McpClient::start(command);
    let stderr = guarded.child().stderr.take().unwrap();
    let echo = guarded.call("echo", json!({"message": "hello"}));
    assert!(text(&echo).contains("hello"), "{echo}");
    // A call of 30 s, and the server killed while it runs.
    guarded.send(&json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call",
        "params": {"name": "trigger-long-running-operation",
                   "arguments": {"duration": 30, "steps": 3}}}));
    std::thread::sleep(std::time::Duration::from_millis(500));
    let children = Command::new("pgrep")
        .args(["-P", &guarded.child().id().to_string()])
        .output()
        .unwrap();
    let server_pid = String::from_utf8(children.stdout).unwrap();
    let server_pid = server_pid
        .lines()
        .next()
        .expect("the guard's server")
        .trim()
        .to_owned();
    assert!(Command::new("kill")
        .args(["-9", &server_pid])
        .status()
        .unwrap()
        .success());
    let answer = guarded.answer_to(&json!(99));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(
        text(&answer["result"]),
        "the MCP server ended before it answered this call"
    );
    let status = guarded.child().wait().unwrap();
    assert!(!status.success());
    let mut said = String::new();
    std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut said).unwrap();
    let ours: Vec<&str> = said.lines().filter(|l| l.contains("mcp guard")).collect();
    assert_eq!(ours.len(), 1, "{said}");
    assert!(ours[0].contains("the MCP server node ended"), "{said}");
}

/// The official MCP Python SDK as the client: it starts `chimera mcp
/// guard` with `guard_args`, reads `path` and writes `written`; what it
/// saw, as JSON.
const PYTHON_CLIENT: &str = r#"
import asyncio, json, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    command, args, path, written = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
    async with stdio_client(StdioServerParameters(command=command, args=args)) as (r, w):
        async with ClientSession(r, w) as session:
            await session.initialize()
            tools = await session.list_tools()
            read = await session.call_tool("read_text_file", {"path": path})
            write = await session.call_tool("write_file", {"path": written, "content": "hi"})
            print(json.dumps({
                "tools": [t.name for t in tools.tools],
                "read": [c.text for c in read.content], "read_error": read.is_error,
                "write": [c.text for c in write.content], "write_error": write.is_error,
            }))

asyncio.run(main())
"#;

#[test]
fn the_official_mcp_python_client_sees_a_redaction_and_a_block_through_the_guard() {
    let Some(filesystem) = server("@modelcontextprotocol/server-filesystem") else {
        return;
    };
    let Some(python) = chimera_tests::python::sdk_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let notes = root.join("notes.txt");
    std::fs::write(&notes, "token-abcdef123456 opens the vault\n").unwrap();
    let written = root.join("written.txt");
    let no_writes = json!({"tool_call": {"action": "block", "reason": "writes are gated",
                                         "tools": ["write_file"]}});
    let mut args = vec![
        "mcp".to_owned(),
        "guard".to_owned(),
        "--plugins-dir".to_owned(),
        test_packs_dir().display().to_string(),
        "--pack".to_owned(),
        "redactor".to_owned(),
        "--pack".to_owned(),
        format!("fixture={no_writes}"),
        "--".to_owned(),
    ];
    args.extend(filesystem);
    args.push(root.display().to_string());
    let out = Command::new(python)
        .args(["-c", PYTHON_CLIENT])
        .arg(chimera_bin())
        .arg(serde_json::to_string(&args).unwrap())
        .arg(&notes)
        .arg(&written)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(seen["tools"].as_array().unwrap().len() > 3, "{seen}");
    assert_eq!(
        seen["read"],
        json!(["[redacted] opens the vault\n"]),
        "{seen}"
    );
    assert_eq!(seen["read_error"], false);
    assert_eq!(
        seen["write"],
        json!(["Blocked by interceptor: writes are gated"])
    );
    assert_eq!(seen["write_error"], true);
    assert!(!written.exists());
}

#[test]
fn deny_refuses_an_mcp_tool_and_leaves_the_others() {
    let Some(mut filesystem) = server("@modelcontextprotocol/server-filesystem") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "hello\n").unwrap();
    filesystem.push(root.display().to_string());
    let mut guarded = McpClient::start(guard(&["--deny", "read_text_file"], &filesystem));
    let notes = root.join("notes.txt").display().to_string();
    let denied = guarded.call("read_text_file", json!({"path": notes}));
    assert_eq!(denied["isError"], true, "{denied}");
    assert_eq!(
        text(&denied),
        "Permission denied for read_text_file (the guard has no operator to ask)"
    );
    let listed = guarded.call("list_allowed_directories", json!({}));
    assert!(
        text(&listed).contains(&root.display().to_string()),
        "{listed}"
    );
}

/// An MCP server that answers each `tools/call` twice (the second time
/// with a secret) and sends a tool result for a call nobody made.
const DOUBLE_ANSWER: &str = r#"
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    answer = lambda result: print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
    if message["method"] == "initialize":
        answer({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "double", "version": "0"}})
    elif message["method"] == "tools/call":
        answer({"content": [{"type": "text", "text": "nothing to see"}]})
        answer({"content": [{"type": "text", "text": "sk-live-0123456789abcdef"}]})
        print(json.dumps({"jsonrpc": "2.0", "id": 777, "result":
            {"content": [{"type": "text", "text": "sk-live-fedcba9876543210"}]}}), flush=True)
    else:
        answer({})
"#;

#[test]
fn a_tool_result_the_server_sends_for_no_call_in_flight_never_reaches_the_client() {
    let python = [
        "python3".to_owned(),
        "-c".to_owned(),
        DOUBLE_ANSWER.to_owned(),
    ];
    let mut guarded = McpClient::start(guard(&["--pack", "redactor"], &python));
    let first = guarded.call("anything", json!({}));
    assert_eq!(text(&first), "nothing to see");
    // What comes next is the answer to the next request: the second
    // answer and the unasked one were dropped.
    guarded.send(&json!({"jsonrpc": "2.0", "id": 50, "method": "ping"}));
    let next = guarded.next_message();
    assert_eq!(next["id"], 50, "{next}");
}

/// The redactor with Unicode word boundaries (its old default), whose
/// slow path near-misses with a non-ASCII letter find, and a call budget
/// of `budget_ms` with no allowance per MiB: every padded result is slow.
fn slow_redactor_flags(budget_ms: &'static str) -> Vec<String> {
    let pattern = r"\b(?:sk|key|token|secret)-[A-Za-z0-9_\-]{8,}\b";
    [
        "--pack".to_owned(),
        format!("redactor={}", json!({ "pattern": pattern })),
        "--call-budget-ms".to_owned(),
        budget_ms.to_owned(),
        "--call-budget-per-mib-ms".to_owned(),
        "0".to_owned(),
    ]
    .into()
}

/// A directory holding `pad.txt` (about `bytes` of near-misses, then a
/// secret) and `notes.txt` (a secret), and the filesystem server over it.
fn padded_files(bytes: usize) -> Option<(tempfile::TempDir, Vec<String>)> {
    let mut filesystem = server("@modelcontextprotocol/server-filesystem")?;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let unit = "sk-aaaaaaaé ";
    let pad = format!(
        "{}sk-live-0123456789abcdef",
        unit.repeat(bytes / unit.len())
    );
    std::fs::write(root.join("pad.txt"), pad).unwrap();
    std::fs::write(
        root.join("notes.txt"),
        "deploy with sk-live-0123456789abcdef\n",
    )
    .unwrap();
    filesystem.push(root.display().to_string());
    Some((dir, filesystem))
}

/// The start of `value`'s text, for a failure message (a padded result
/// is megabytes).
fn short(value: &Value) -> String {
    value.to_string().chars().take(300).collect()
}

/// Reads `file` of `dir` through `guarded`.
fn read(guarded: &mut McpClient, dir: &tempfile::TempDir, file: &str) -> Value {
    let path = dir.path().canonicalize().unwrap().join(file);
    guarded.call(
        "read_text_file",
        json!({"path": path.display().to_string()}),
    )
}

#[test]
fn padded_results_from_a_server_never_quarantine_the_guards_redactor() {
    let Some((dir, filesystem)) = padded_files(400_000) else {
        return;
    };
    let flags = slow_redactor_flags("2");
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut guarded = McpClient::start(guard(&flags, &filesystem));
    for _ in 0..7 {
        let padded = read(&mut guarded, &dir, "pad.txt");
        assert!(
            !padded.to_string().contains("sk-live"),
            "judged: redacted, {}",
            short(&padded)
        );
    }
    let notes = read(&mut guarded, &dir, "notes.txt");
    assert_eq!(text(&notes), "deploy with [redacted]\n", "{notes}");
}

#[test]
fn an_isolated_redactor_past_its_deadline_withholds_the_result_and_the_next_is_judged() {
    let Some((dir, filesystem)) = padded_files(3_000_000) else {
        return;
    };
    let mut flags = slow_redactor_flags("25");
    flags.extend(["--isolate".to_owned(), "redactor".to_owned()]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut guarded = McpClient::start(guard(&flags, &filesystem));
    let warm = read(&mut guarded, &dir, "notes.txt");
    assert_eq!(text(&warm), "deploy with [redacted]\n", "{warm}");
    let padded = read(&mut guarded, &dir, "pad.txt");
    assert_eq!(padded["isError"], true, "withheld: {}", short(&padded));
    assert!(
        !padded.to_string().contains("sk-live"),
        "{}",
        short(&padded)
    );
    assert!(
        text(&padded).contains("did not answer"),
        "{}",
        short(&padded)
    );
    // Refused while the pack host restarts, judged once it is back; never
    // passed unjudged.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let notes = read(&mut guarded, &dir, "notes.txt");
        assert!(!notes.to_string().contains("sk-live"), "{}", short(&notes));
        if notes["isError"] != true {
            assert_eq!(text(&notes), "deploy with [redacted]\n", "{notes}");
            break;
        }
        assert!(std::time::Instant::now() < until, "never back: {notes}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
