//! MCP servers' tools in `chimera run`, through the binary and the scripted
//! model: the reference servers from npm (skipped in one line without
//! them) and, for the ways a server breaks, a small hand-written one.
//! Every MCP call passes the same seams and policy as a built-in tool.

use chimera_tests::cli::{chimera, Ran};
use chimera_tests::mcp::server;
use chimera_tests::test_packs_dir;
use serde_json::{json, Value};
use std::path::Path;

/// A script file in `dir` answering with `responses`.
fn script(dir: &Path, responses: &Value) -> String {
    let path = dir.join("script.json");
    std::fs::write(&path, json!({ "responses": responses }).to_string()).unwrap();
    path.display().to_string()
}

/// The tool names each recorded request offered the model.
fn offered(record: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(record)
        .unwrap()
        .lines()
        .map(|line| {
            let request: Value = serde_json::from_str(line).unwrap();
            request["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .collect()
}

/// The `tool_result` event of call `id`.
fn result_of(ran: &Ran, id: &str) -> Value {
    ran.of_type("tool_result")
        .into_iter()
        .find(|e| e["call_id"] == id)
        .unwrap_or_else(|| panic!("no result of {id}: {}", ran.stdout()))
}

/// Asserts that call `id` ended in an error whose text holds `says`.
fn assert_refused(ran: &Ran, id: &str, says: &str) {
    let result = result_of(ran, id);
    assert_eq!(result["is_error"], true, "{result}");
    let text = result["content"].as_str().unwrap_or_default();
    assert!(text.contains(says), "{id}: wanted {says:?} in {result}");
}

/// The `--mcp` flag running the filesystem server on `root`.
fn filesystem_flag(root: &Path) -> Option<String> {
    let command = server("@modelcontextprotocol/server-filesystem")?;
    Some(format!("fs={} '{}'", command.join(" "), root.display()))
}

#[test]
fn a_read_through_an_mcp_server_is_redacted_and_a_write_a_pack_blocks_never_reaches_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let Some(fs) = filesystem_flag(&root) else {
        return;
    };
    std::fs::write(
        root.join("notes.txt"),
        "deploy with sk-live-0123456789abcdef\n",
    )
    .unwrap();
    let notes = root.join("notes.txt").display().to_string();
    let written = root.join("written.txt");
    let script = script(
        &root,
        &json!([
            {"content": "", "tool_calls": [
                {"id": "r1", "name": "fs__read_text_file", "arguments": {"path": notes}},
                {"id": "w1", "name": "fs__write_file",
                 "arguments": {"path": written.display().to_string(), "content": "hi"}}]},
            {"content": "done"}
        ]),
    );
    let record = root.join("requests.jsonl");
    let no_writes = json!({"tool_call": {"action": "block", "reason": "writes are gated",
                                         "tools": ["fs__write_file"]}});
    let plugins = test_packs_dir().display().to_string();
    let ran = chimera(
        &root,
        &[
            "run",
            "--json",
            "--plugins-dir",
            &plugins,
            "--pack",
            "redactor",
            "--pack",
            &format!("fixture={no_writes}"),
            "--mcp",
            &fs,
            "--script",
            &script,
            "--record-requests",
            &record.display().to_string(),
            "go",
        ],
        &[],
        "",
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let offered = offered(&record);
    assert!(
        offered[0].contains(&"fs__read_text_file".to_owned())
            && offered[0].contains(&"read_file".to_owned()),
        "{offered:?}"
    );
    let read = result_of(&ran, "r1");
    assert_eq!(read["is_error"], false, "{read}");
    assert_eq!(read["content"], "deploy with [redacted]\n", "{read}");
    assert_refused(&ran, "w1", "writes are gated");
    assert!(!written.exists(), "the server never got the write");
    // What the model saw next holds no secret.
    let requests = std::fs::read_to_string(&record).unwrap();
    assert!(!requests.contains("sk-live"), "{requests}");
}

#[test]
fn deny_and_ask_apply_to_mcp_tools_as_to_built_in_ones() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let Some(fs) = filesystem_flag(&root) else {
        return;
    };
    let target = |name: &str| root.join(name).display().to_string();
    let script = script(
        &root,
        &json!([
            {"content": "", "tool_calls": [
                {"id": "d1", "name": "fs__write_file",
                 "arguments": {"path": target("denied.txt"), "content": "x"}},
                {"id": "a1", "name": "fs__create_directory",
                 "arguments": {"path": target("asked")}},
                {"id": "l1", "name": "fs__list_allowed_directories", "arguments": {}}]},
            {"content": "done"}
        ]),
    );
    let ran = chimera(
        &root,
        &[
            "run",
            "--json",
            "--mcp",
            &fs,
            "--deny",
            "fs__write_file",
            "--ask",
            "fs__create_directory",
            "--no",
            "--script",
            &script,
            "go",
        ],
        &[],
        "",
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    assert_refused(&ran, "d1", "Permission denied");
    assert_refused(&ran, "a1", "fs__create_directory");
    assert!(!root.join("denied.txt").exists());
    assert!(!root.join("asked").exists(), "the rejected ask never ran");
    let listed = result_of(&ran, "l1");
    assert_eq!(listed["is_error"], false, "{listed}");
    assert!(
        listed["content"]
            .as_str()
            .unwrap()
            .contains(&root.display().to_string()),
        "{listed}"
    );
}

#[test]
fn tools_list_shows_each_mcp_tool_with_its_schema_after_the_built_in_ones() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let Some(fs) = filesystem_flag(&root) else {
        return;
    };
    let ran = chimera(&root, &["tools", "list", "--json", "--mcp", &fs], &[], "");
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let tools: Vec<Value> = ran
        .stdout()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let first_mcp = names.iter().position(|n| n.starts_with("fs__")).unwrap();
    assert_eq!(names[..first_mcp].last(), Some(&"delegate"), "{names:?}");
    let read = tools
        .iter()
        .find(|t| t["name"] == "fs__read_text_file")
        .unwrap_or_else(|| panic!("{names:?}"));
    assert_eq!(read["parameters"]["type"], "object", "{read}");
    assert!(
        read["parameters"]["properties"]["path"].is_object(),
        "{read}"
    );
    assert!(!read["description"].as_str().unwrap().is_empty());
}

/// An MCP server (Python, standard library only) offering `echo`,
/// `trouble` (whose description clears a terminal) and tools that must not
/// be offered: a name no model API takes, `echo` again, a 70 KB input
/// schema, a schema that is not an object's. `trouble` does what
/// its first argument says: `die` (exits without answering), `hang`
/// (never answers) or `garbage` (answers with a line that is not JSON).
const FLAKY: &str = r#"
import json, sys, time
mode = sys.argv[1]
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    def answer(result):
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
    method = message["method"]
    if method == "initialize":
        answer({"protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "flaky", "version": "0"}})
    elif method == "tools/list":
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        huge = {"type": "object", "description": "x" * 70000}
        answer({"tools": [{"name": "echo", "description": "echoes", "inputSchema": schema},
                          {"name": "trouble", "description": "\u001b[2Jclears your screen",
                           "inputSchema": {"type": "object"}},
                          {"name": "bad.name", "inputSchema": {"type": "object"}},
                          {"name": "echo", "description": "a second echo", "inputSchema": schema},
                          {"name": "huge", "inputSchema": huge},
                          {"name": "listy", "inputSchema": {"type": "array"}}]})
    elif method == "tools/call" and message["params"]["name"] == "echo":
        text = message["params"].get("arguments", {}).get("text", "")
        answer({"content": [{"type": "text", "text": "echo: " + text}]})
    elif method == "tools/call" and mode == "die":
        print("dying now", file=sys.stderr, flush=True)
        sys.exit(4)
    elif method == "tools/call" and mode == "hang":
        time.sleep(600)
    elif method == "tools/call":
        print("<html>oops</html>", flush=True)
    else:
        answer({})
"#;

/// A configuration file in `dir` with the flaky server in `mode` (a call
/// timeout of one second) and the `extra` servers' tables.
fn flaky_config(dir: &Path, mode: &str, extra: &str) -> String {
    let program = dir.join("flaky.py");
    std::fs::write(&program, FLAKY).unwrap();
    let config = dir.join("chimera.toml");
    std::fs::write(
        &config,
        format!(
            "[mcp.servers.flaky]\ncommand = \"python3\"\nargs = [{:?}, {mode:?}]\n\
             call_timeout_secs = 1\n{extra}",
            program.display().to_string()
        ),
    )
    .unwrap();
    config.display().to_string()
}

/// `chimera --config CONFIG run` in `root` on `script`, recording each
/// request to `record`, with each line of `turns` a user turn.
fn run_configured(root: &Path, config: &str, script: &str, record: &Path, turns: &str) -> Ran {
    let record = record.display().to_string();
    chimera(
        root,
        &[
            "--config",
            config,
            "run",
            "--json",
            "--script",
            script,
            "--record-requests",
            &record,
            "--turns-from-stdin",
        ],
        &[],
        turns,
    )
}

#[test]
fn a_server_that_dies_hangs_or_sends_garbage_mid_run_is_one_line_and_its_tools_go_away() {
    for (mode, said) in [
        ("die", "ended (exit status: 4); its last words: dying now"),
        ("hang", "did not answer a call of trouble within 1 s"),
        (
            "garbage",
            "sent something that is not a JSON-RPC message: `<html>oops</html>`",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let config = flaky_config(&root, mode, "");
        let script = script(
            &root,
            &json!([
                {"content": "", "tool_calls": [
                    {"id": "e1", "name": "flaky__echo", "arguments": {"text": "hi"}}]},
                {"content": "", "tool_calls": [
                    {"id": "t1", "name": "flaky__trouble", "arguments": {}}]},
                {"content": "", "tool_calls": [
                    {"id": "e2", "name": "flaky__echo", "arguments": {"text": "again"}}]},
                {"content": "turn one done"},
                {"content": "turn two done"}
            ]),
        );
        let record = root.join("requests.jsonl");
        let ran = run_configured(&root, &config, &script, &record, "go\nand again\n");
        assert_eq!(ran.status(), 0, "{mode}: {}", ran.stderr());
        assert_eq!(result_of(&ran, "e1")["content"], "echo: hi", "{mode}");
        assert_refused(&ran, "t1", "MCP server flaky");
        // A call after the server went: an error naming why, at once.
        assert_refused(&ran, "e2", "MCP server flaky is gone");
        let stderr = ran.stderr();
        let lines: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("MCP server flaky:") && !l.contains("skipped"))
            .collect();
        assert_eq!(lines.len(), 1, "{mode}: {stderr}");
        assert!(
            lines[0].contains(said) && lines[0].ends_with("its tools are no longer offered"),
            "{mode}: {}",
            lines[0]
        );
        assert!(
            stderr.contains("tool `bad.name` skipped"),
            "{mode}: {stderr}"
        );
        // Offered in turn one (the one a model API refuses never), gone in
        // turn two; the run went on.
        let offered = offered(&record);
        assert!(
            offered[0].contains(&"flaky__trouble".to_owned()),
            "{offered:?}"
        );
        assert!(!offered[0].iter().any(|n| n.contains("bad")), "{offered:?}");
        let last = offered.last().unwrap();
        assert!(
            !last.iter().any(|n| n.starts_with("flaky__")),
            "{mode}: {last:?}"
        );
        assert!(last.contains(&"read_file".to_owned()));
        let ends: Vec<Value> = ran.of_type("run_end");
        assert_eq!(ends.last().unwrap()["output"], "turn two done", "{mode}");
    }
}

#[test]
fn servers_that_cannot_start_exit_at_once_or_never_answer_are_one_line_each_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let broken = "[mcp.servers.missing]\ncommand = \"no-such-mcp-server-here\"\n\
                  [mcp.servers.quits]\ncommand = \"sh\"\n\
                  args = [\"-c\", \"echo cannot open the database >&2; exit 2\"]\n\
                  [mcp.servers.silent]\ncommand = \"sleep\"\nargs = [\"600\"]\n\
                  startup_timeout_secs = 1\n\
                  [mcp.servers.chatty]\ncommand = \"sh\"\n\
                  args = [\"-c\", \"echo Server ready; sleep 600\"]\n";
    let config = flaky_config(&root, "die", broken);
    let script = script(
        &root,
        &json!([
            {"content": "", "tool_calls": [
                {"id": "e1", "name": "flaky__echo", "arguments": {"text": "still here"}}]},
            {"content": "done"}
        ]),
    );
    let record = root.join("requests.jsonl");
    let ran = run_configured(&root, &config, &script, &record, "go\n");
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    assert_eq!(result_of(&ran, "e1")["content"], "echo: still here");
    let stderr = ran.stderr();
    for (name, said) in [
        ("missing", "cannot start `no-such-mcp-server-here`: "),
        (
            "quits",
            "ended (exit status: 2); its last words: cannot open the database",
        ),
        ("silent", "did not finish starting within 1 s; stopped"),
        (
            "chatty",
            "sent something that is not a JSON-RPC message: `Server ready`",
        ),
    ] {
        let lines: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains(&format!("MCP server {name}:")))
            .collect();
        assert_eq!(lines.len(), 1, "{name}: {stderr}");
        assert!(
            lines[0].contains(said) && lines[0].ends_with("its tools are not offered"),
            "{name}: {}",
            lines[0]
        );
    }
    let offered = offered(&record);
    assert!(
        offered[0]
            .iter()
            .all(|n| !n.contains("__") || n.starts_with("flaky__")),
        "{offered:?}"
    );
}

#[test]
fn a_configured_server_that_is_not_a_command_or_a_url_or_shares_a_name_is_one_usage_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for (table, said) in [
        (
            "[mcp.servers.both]\ncommand = \"x\"\nurl = \"http://127.0.0.1:1/mcp\"\n",
            "[mcp.servers.both]: give a `command` or a `url`, not both",
        ),
        (
            "[mcp.servers.none]\nargs = [\"x\"]\n",
            "[mcp.servers.none]: give a `command` (stdio) or a `url` (HTTP)",
        ),
        ("[mcp.servers.\"a__b\"]\ncommand = \"x\"\n", "without `__`"),
        (
            "[mcp.servers.slow]\ncommand = \"x\"\ncall_timeout_secs = 0\n",
            "call_timeout_secs must be at least 1",
        ),
    ] {
        let config = root.join("chimera.toml");
        std::fs::write(&config, table).unwrap();
        let config = config.display().to_string();
        let ran = chimera(&root, &["--config", &config, "tools", "list"], &[], "");
        assert_eq!(ran.status(), 2, "{table}: {}", ran.stderr());
        assert!(ran.error_line().contains(said), "{table}: {}", ran.stderr());
    }
    // Two servers claiming one name: refused, neither started.
    std::fs::remove_file(root.join("chimera.toml")).unwrap();
    let twice = chimera(
        &root,
        &["tools", "list", "--mcp", "a=true", "--mcp", "a=false"],
        &[],
        "",
    );
    assert_eq!(twice.status(), 2, "{}", twice.stderr());
    assert!(
        twice
            .error_line()
            .contains("--mcp a: a server of that name is given twice"),
        "{}",
        twice.stderr()
    );
}

#[test]
fn a_streamable_http_server_offers_its_tools_and_answers_calls_in_the_loop() {
    let Some(everything) = server("@modelcontextprotocol/server-everything") else {
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut http = std::process::Command::new(&everything[0])
        .args(&everything[1..])
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the server never listened"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let dir = tempfile::tempdir().unwrap();
    let script = script(
        dir.path(),
        &json!([
            {"content": "", "tool_calls": [
                {"id": "e1", "name": "ev__echo",
                 "arguments": {"message": "my key is sk-live-0123456789abcdef"}}]},
            {"content": "done"}
        ]),
    );
    let plugins = test_packs_dir().display().to_string();
    let ran = chimera(
        dir.path(),
        &[
            "run",
            "--json",
            "--plugins-dir",
            &plugins,
            "--pack",
            "redactor",
            "--mcp",
            &format!("ev={url}"),
            "--script",
            &script,
            "go",
        ],
        &[],
        "",
    );
    let _ = http.kill();
    let _ = http.wait();
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let echoed = result_of(&ran, "e1");
    assert_eq!(echoed["is_error"], false, "{echoed}");
    let content = echoed["content"].as_str().unwrap();
    assert!(content.contains("my key is [redacted]"), "{echoed}");
}

#[test]
fn the_readme_s_mcp_servers_example_is_accepted_as_written() {
    let readme =
        std::fs::read_to_string(chimera_tests::workspace_root().join("README.md")).unwrap();
    let start = readme
        .find("```toml\n[mcp.servers.")
        .expect("the README shows [mcp.servers]")
        + "```toml\n".len();
    let end = start + readme[start..].find("```").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("chimera.toml");
    std::fs::write(&file, &readme[start..end]).unwrap();
    let file = file.display().to_string();
    let shown = chimera(
        dir.path(),
        &["--config", &file, "config", "show", "--json"],
        &[],
        "",
    );
    assert_eq!(shown.status(), 0, "{}", shown.stderr());
    let shown: Value = serde_json::from_str(&shown.stdout()).unwrap();
    let servers = &shown["settings"]["mcp.servers"]["value"];
    assert_eq!(
        servers["fs"], "npx -y @modelcontextprotocol/server-filesystem .",
        "{shown}"
    );
    assert_eq!(servers["docs"], "https://mcp.example.com/mcp", "{shown}");
}

#[test]
fn a_servers_listing_is_checked_before_any_of_it_is_offered() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let config = flaky_config(&root, "die", "");
    let ran = chimera(&root, &["--config", &config, "tools", "list"], &[], "");
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let listed: Vec<String> = ran
        .stdout()
        .lines()
        .filter(|l| l.starts_with("flaky__"))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        listed,
        ["flaky__echo", "flaky__trouble"],
        "{}",
        ran.stdout()
    );
    assert!(
        ran.stdout().contains("echoes"),
        "the first echo is the one kept"
    );
    assert!(!ran.stdout().contains('\u{1b}'), "{}", ran.stdout());
    let stderr = ran.stderr();
    for said in [
        "tool `bad.name` skipped: flaky__TOOL must be at most 64 letters",
        "tool `echo` is listed twice; the second is skipped",
        "tool `huge` skipped: its input schema is 700",
        "tool `listy` skipped: its input schema is not an object schema",
    ] {
        assert!(stderr.contains(said), "{said}: {stderr}");
    }
}

#[test]
fn hooks_see_and_rewrite_an_mcp_call_as_they_do_a_built_in_one() {
    use chimera_host::agent::{Hooks, PreToolUse};
    use chimera_host::mcp::{McpServers, ServerSpec, Transport};
    use chimera_host::types::{ToolCall, ToolResult};
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("flaky.py");
    std::fs::write(&program, FLAKY).unwrap();
    let spec = ServerSpec::new(
        "flaky",
        Transport::Stdio {
            command: "python3".into(),
            args: vec![program.display().to_string(), "die".into()],
            env: std::collections::BTreeMap::new(),
        },
    )
    .unwrap();
    let servers = McpServers::start(&[spec], dir.path());
    assert_eq!(servers.started(), ["flaky"]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let hooks = Hooks::new()
        .pre_tool_use(|call: &ToolCall| PreToolUse {
            updated_input: (call.name == "flaky__echo")
                .then(|| json!({"text": "rewritten"}).as_object().unwrap().clone()),
            ..PreToolUse::default()
        })
        .post_tool_use(move |call: &ToolCall, result: &ToolResult| {
            sink.lock()
                .unwrap()
                .push((call.name.clone(), result.output.clone()));
        });
    let mut harness = crate::harness::Harness::new(crate::harness::script(json!([
        {"tool_calls": [{"id": "a", "name": "flaky__echo", "arguments": {"text": "hi"}}]},
        {"content": "done"}
    ])))
    .hooks(hooks);
    for tool in servers.tools() {
        harness = harness.tool(tool);
    }
    let run = harness.run("go");
    assert!(run.result.success, "{:?}", run.result);
    assert_eq!(
        *seen.lock().unwrap(),
        [("flaky__echo".to_owned(), "echo: rewritten".to_owned())]
    );
}
