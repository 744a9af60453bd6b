//! `chimera mcp guard --url`: the reference server-everything in
//! streamable-HTTP mode behind the guard, driven by the official
//! TypeScript client over HTTP: redaction, `--deny`, and the server killed
//! mid-call, each with one clear line; and the guard's own listener
//! refuses a request for another host (DNS rebinding) and a body over the
//! message cap, relaying neither; a URL it cannot use is one line.

use chimera_tests::mcp::{
    free_port, listening, result_text as text, server, servers_dir, wait_listening, Killed,
};
use chimera_tests::{chimera_bin, publish, test_packs_dir, workspace_root};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// server-everything in streamable-HTTP mode, listening, and its port.
fn everything_over_http() -> Option<(Killed, u16)> {
    let everything = server("@modelcontextprotocol/server-everything")?;
    let port = free_port();
    let mut command = Command::new(&everything[0]);
    command
        .args(&everything[1..])
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    Some((listening(command, port), port))
}

/// `chimera mcp guard FLAGS --url` in front of the server on `upstream`,
/// its standard error into `stderr` (or nowhere), listening, and its port.
fn guard_url(flags: &[&str], upstream: u16, stderr: Option<&std::path::Path>) -> (Killed, u16) {
    let port = free_port();
    let said = match stderr {
        Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
        None => Stdio::null(),
    };
    let guard = Killed(
        Command::new(chimera_bin())
            .args(["mcp", "guard", "--plugins-dir"])
            .arg(test_packs_dir())
            .args(flags)
            .arg("--url")
            .arg(format!("http://127.0.0.1:{upstream}/mcp"))
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(said)
            .spawn()
            .unwrap(),
    );
    wait_listening(port);
    (guard, port)
}

/// Client script `name` published beside the SDK it imports.
fn script(name: &str) -> std::path::PathBuf {
    let source = std::fs::read(workspace_root().join("tests/support/clients").join(name))
        .expect("the client script");
    publish(&servers_dir(), name, &source)
}

#[test]
fn a_remote_server_behind_the_guard_is_redacted_denied_and_said_when_it_dies() {
    let Some((mut remote, upstream)) = everything_over_http() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let stderr = dir.path().join("guard.txt");
    let (_guard, guarded) = guard_url(
        &["--pack", "redactor", "--deny", "get-*"],
        upstream,
        Some(&stderr),
    );
    // Another host's name (a web page's, resolved to loopback) is refused.
    let rebound = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            "Host: evil.test",
        ])
        .arg(format!("http://127.0.0.1:{guarded}/mcp"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&rebound.stdout), "403");

    let mut client = Killed(
        Command::new("node")
            .arg(script("mcp_http.mjs"))
            .arg(format!("http://127.0.0.1:{guarded}/mcp"))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(client.0.stdout.take().unwrap()).lines();
    let mut next = || lines.next().expect("a line").expect("readable");
    let seen: Value = serde_json::from_str(&next()).unwrap();
    assert!(seen["tools"].as_array().unwrap().len() > 5, "{seen}");
    assert_eq!(text(&seen["echo"]), "Echo: key [redacted]", "{seen}");
    assert_eq!(seen["denied"]["isError"], true, "{seen}");
    assert_eq!(
        text(&seen["denied"]),
        "Permission denied for get-sum (the guard has no operator to ask)"
    );
    assert_eq!(next(), "calling");
    std::thread::sleep(Duration::from_millis(1500));
    let _ = remote.0.kill();
    let died: Value = serde_json::from_str(&next()).unwrap();
    assert_eq!(died["isError"], true, "{died}");
    assert_eq!(
        text(&died),
        "the MCP server's stream broke off before it answered this call",
        "{died}"
    );
    // The server's address and the transport's error are the operator's
    // to read, on standard error: never the client's.
    assert!(!died.to_string().contains(&upstream.to_string()), "{died}");
    let said = std::fs::read_to_string(&stderr).unwrap();
    let line = said
        .lines()
        .find(|l| l.contains("stream broke off"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(line.starts_with("mcp guard: "), "{said}");
}

/// The 2026-07-28 Python server (its SDK's) behind `chimera mcp guard
/// --url` with the redactor and `--deny echo`: both processes, and the
/// guard's port.
fn modern_behind_the_guard(python: &std::path::Path) -> (Killed, Killed, u16) {
    let upstream = free_port();
    let mut command = Command::new(python);
    command
        .arg(workspace_root().join("tests/support/clients/mcp_modern_server.py"))
        .env("PORT", upstream.to_string());
    let remote = listening(command, upstream);
    let (guard, guarded) = guard_url(&["--pack", "redactor", "--deny", "echo"], upstream, None);
    (remote, guard, guarded)
}

#[test]
fn a_stateless_2026_server_and_client_speak_through_the_guard_judged() {
    let Some(python) = chimera_tests::python::sdk_python() else {
        return;
    };
    let clients = workspace_root().join("tests/support/clients");
    let (_remote, _guard, guarded) = modern_behind_the_guard(python);
    let out = Command::new(python)
        .arg(clients.join("mcp_modern_client.py"))
        .arg(format!("http://127.0.0.1:{guarded}/mcp"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    let all = seen.to_string();
    assert!(!all.contains("sk-live"), "{all}");
    assert_eq!(seen["protocol"], "2026-07-28", "{all}");
    assert_eq!(
        seen["instructions"], "Modern instructions; the key is [redacted]",
        "{all}"
    );
    assert_eq!(text(&seen["notes"]), "the key is [redacted]", "{all}");
    assert_eq!(seen["echo"]["is_error"], true, "{all}");
    assert_eq!(
        text(&seen["echo"]),
        "Permission denied for echo (the guard has no operator to ask)"
    );
    // The input_required round trip: the elicitation the result carried
    // was judged, the retry went through.
    assert_eq!(
        seen["elicitations"][0]["message"], "Share the key [redacted]?",
        "{all}"
    );
    assert_eq!(text(&seen["confirm"]), "confirmed", "{all}");
}

#[test]
fn chimera_run_takes_a_2026_server_behind_the_guard_as_mcp_servers() {
    let Some(python) = chimera_tests::python::sdk_python() else {
        return;
    };
    let (_remote, _guard, guarded) = modern_behind_the_guard(python);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    let responses = serde_json::json!({"responses": [
        {"content": "", "tool_calls": [
            {"id": "n1", "name": "modern__notes", "arguments": {}},
            {"id": "e1", "name": "modern__echo", "arguments": {"message": "hi"}}]},
        {"content": "done"}
    ]});
    std::fs::write(&script, responses.to_string()).unwrap();
    let ran = chimera_tests::cli::chimera(
        dir.path(),
        &[
            "run",
            "--json",
            "--mcp",
            &format!("modern=http://127.0.0.1:{guarded}/mcp"),
            "--script",
            &script.display().to_string(),
            "go",
        ],
        &[],
        "",
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let result = |id: &str| {
        ran.of_type("tool_result")
            .into_iter()
            .find(|e| e["call_id"] == id)
            .unwrap_or_else(|| panic!("no result of {id}: {}", ran.stdout()))
    };
    assert_eq!(
        result("n1")["content"],
        "the key is [redacted]",
        "{}",
        ran.stdout()
    );
    let echo = result("e1");
    assert_eq!(echo["is_error"], true, "{echo}");
    assert!(
        echo["content"]
            .as_str()
            .unwrap_or_default()
            .contains("Permission denied for echo"),
        "{echo}"
    );
}

#[test]
fn a_server_request_the_packs_block_is_refused_to_the_server_in_its_session() {
    let Some((_remote, upstream)) = everything_over_http() else {
        return;
    };
    let no_sampling = serde_json::json!({"tool_result": {"action": "block",
        "reason": "no sampling here", "tools": ["mcp:sampling/createMessage"]}});
    let fixture = format!("fixture={no_sampling}");
    let (_guard, guarded) = guard_url(&["--pack", &fixture], upstream, None);
    let out = Command::new("node")
        .arg(script("mcp_http_sampling.mjs"))
        .arg(format!("http://127.0.0.1:{guarded}/mcp"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["sampled"], false, "{seen}");
    // The server got the refusal in its session and ended the call with
    // it (a timeout would mean the refusal never reached it).
    let said = seen["result"].to_string();
    assert!(said.contains("no sampling here"), "{seen}");
    assert!(!said.contains("timed out"), "{seen}");
}

#[test]
fn an_unusable_url_is_one_line_saying_why_and_nothing_is_served() {
    let dir = tempfile::tempdir().unwrap();
    for (url, why) in [
        ("ftp://127.0.0.1/mcp", "the scheme must be http or https"),
        (
            "http://user:secret@127.0.0.1:9/mcp",
            "credentials go in a header",
        ),
        ("not a url", "--url not a url: "),
    ] {
        let ran = chimera_tests::cli::chimera(
            dir.path(),
            &["mcp", "guard", "--url", url, "--listen", "127.0.0.1:0"],
            &[],
            "",
        );
        let stderr = ran.stderr();
        assert_eq!(ran.status(), 2, "{url}: {stderr}");
        assert!(stderr.contains(why), "{url}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{url}: {stderr}");
    }
}

#[test]
fn a_request_body_over_the_message_cap_is_refused_and_never_relayed() {
    // The "server": a listener nothing may reach.
    let upstream = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    upstream.set_nonblocking(true).unwrap();
    let port = upstream.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let stderr = dir.path().join("guard.txt");
    let (_guard, guarded) = guard_url(&[], port, Some(&stderr));
    // A JSON string of 17 MiB: one message over the 16 MiB cap.
    let body = dir.path().join("body.json");
    let mut message = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":""#.to_vec();
    message.extend(std::iter::repeat_n(b'a', 17 << 20));
    message.extend_from_slice(br#""}}}"#);
    std::fs::write(&body, message).unwrap();
    let sent = Command::new("curl")
        .args([
            "-s",
            "--max-time",
            "20",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ])
        .args(["-H", "content-type: application/json", "--data-binary"])
        .arg(format!("@{}", body.display()))
        .arg(format!("http://127.0.0.1:{guarded}/mcp"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&sent.stdout), "413");
    assert!(
        upstream.accept().is_err(),
        "the guard connected to the server"
    );
    let said = std::fs::read_to_string(&stderr).unwrap();
    let line = said
        .lines()
        .find(|l| l.contains("request body over"))
        .unwrap_or_else(|| panic!("{said}"));
    assert_eq!(
        line,
        "mcp guard: refused a request body over 16777216 bytes"
    );
}
