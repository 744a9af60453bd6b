//! The reference MCP servers from the npm registry, pinned, for tests that
//! put the guard in front of a real server. They live in a directory the
//! tests own (`target/mcp-servers`, installed once per machine: `.ci/run`
//! installs them before the tests, and the first test that needs them
//! does otherwise). Where they cannot be had (no `npm`, no registry), the
//! MCP tests say so in one line and skip, or fail with that line when
//! `CHIMERA_REQUIRE_REAL_PARTS` is set, as `.ci/run` sets it (see
//! [`real_parts`]).

use super::real_parts;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::OnceLock;

/// The servers, pinned: (package, version).
pub const SERVERS: &[(&str, &str)] = &[
    ("@modelcontextprotocol/server-filesystem", "2026.8.31"),
    ("@modelcontextprotocol/server-everything", "2026.8.31"),
];

/// Where they are installed.
pub fn servers_dir() -> PathBuf {
    super::workspace_root().join("target/mcp-servers")
}

/// The command that runs server `package` (`node …/dist/index.js`), or
/// `None` (said once, on stderr) when the servers cannot be installed.
///
/// # Panics
///
/// When they cannot be installed and `CHIMERA_REQUIRE_REAL_PARTS` is set.
pub fn server(package: &str) -> Option<Vec<String>> {
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let mut first = false;
    let installed = INSTALLED.get_or_init(|| {
        first = true;
        install()
    });
    match installed {
        Ok(dir) => {
            let script = entry(dir, package);
            Some(vec!["node".to_owned(), script.display().to_string()])
        }
        Err(why) => {
            real_parts::missing(&format!("the MCP servers cannot be had: {why}"), first);
            None
        }
    }
}

fn entry(dir: &Path, package: &str) -> PathBuf {
    dir.join("node_modules").join(package).join("dist/index.js")
}

/// The MCP Inspector, pinned, with its CLI (`mcp-inspector --cli`), in a
/// directory of its own (its SDK is not the servers').
pub const INSPECTOR: (&str, &str) = ("@modelcontextprotocol/inspector", "2.12.0");

/// The `mcp-inspector` launcher, installed once per machine (`.ci/run`
/// installs it), or `None` (said once) when it cannot be had.
///
/// # Panics
///
/// When it cannot be installed and `CHIMERA_REQUIRE_REAL_PARTS` is set.
pub fn inspector() -> Option<PathBuf> {
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let mut first = false;
    let installed = INSTALLED.get_or_init(|| {
        first = true;
        let dir = super::workspace_root().join("target/mcp-inspector");
        let launcher = dir.join("node_modules/.bin/mcp-inspector");
        if launcher.is_file() {
            return Ok(launcher);
        }
        npm_install(&dir, &[format!("{}@{}", INSPECTOR.0, INSPECTOR.1)]).map(|()| launcher)
    });
    match installed {
        Ok(launcher) => Some(launcher.clone()),
        Err(why) => {
            real_parts::missing(&format!("the MCP Inspector cannot be had: {why}"), first);
            None
        }
    }
}

/// `npm install` of `pinned` packages into `dir`.
fn npm_install(dir: &Path, pinned: &[String]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let out = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
        .arg(dir)
        .args(pinned)
        .output()
        .map_err(|e| format!("npm cannot run ({e}); .ci/run installs it"))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "npm install failed: {}",
            why.lines().last().unwrap_or("no output")
        ));
    }
    Ok(())
}

fn install() -> Result<PathBuf, String> {
    let node = Command::new("node")
        .arg("--version")
        .output()
        .map_err(|e| format!("node cannot run ({e}); .ci/run installs it"))?;
    if !node.status.success() {
        return Err("node --version failed; .ci/run installs node".to_owned());
    }
    let dir = servers_dir();
    if SERVERS
        .iter()
        .all(|(package, _)| entry(&dir, package).is_file())
    {
        return Ok(dir);
    }
    let pinned: Vec<String> = SERVERS
        .iter()
        .map(|(package, version)| format!("{package}@{version}"))
        .collect();
    npm_install(&dir, &pinned)?;
    Ok(dir)
}

/// An MCP client on a server's standard input and output (JSON-RPC, one
/// message a line), killed when dropped.
pub struct McpClient {
    child: Child,
    /// `None` once closed.
    input: Option<ChildStdin>,
    output: BufReader<ChildStdout>,
    next: u64,
}

impl McpClient {
    /// Starts `command` (its stdin and stdout piped here) and initialises
    /// the session as a client does: `initialize`, then
    /// `notifications/initialized`.
    pub fn start(mut command: Command) -> McpClient {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the MCP server starts");
        let input = child.stdin.take().expect("its stdin");
        let output = BufReader::new(child.stdout.take().expect("its stdout"));
        let mut client = McpClient {
            child,
            input: Some(input),
            output,
            next: 0,
        };
        let init = client.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "chimera-tests", "version": "0"}}),
        );
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client
    }

    /// Sends `message`.
    pub fn send(&mut self, message: &Value) {
        let input = self.input.as_mut().expect("the client's input is open");
        writeln!(input, "{message}").expect("the server reads");
        input.flush().expect("the server reads");
    }

    /// Sends `bytes` as they are (no newline added).
    pub fn send_raw(&mut self, bytes: &str) {
        let input = self.input.as_mut().expect("the client's input is open");
        input.write_all(bytes.as_bytes()).expect("the server reads");
        input.flush().expect("the server reads");
    }

    /// The next message from the server.
    pub fn next_message(&mut self) -> Value {
        let mut line = String::new();
        assert!(
            self.output.read_line(&mut line).expect("the server writes") > 0,
            "the server's output ended"
        );
        serde_json::from_str(&line).expect("a JSON-RPC message")
    }

    /// The answer to message `id` (what comes before it is skipped).
    pub fn answer_to(&mut self, id: &Value) -> Value {
        loop {
            let message = self.next_message();
            if &message["id"] == id {
                return message;
            }
        }
    }

    /// Requests `method` with `params`: the response.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = json!(self.next);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.answer_to(&id)
    }

    /// `tools/call` of `name` with `arguments`: its result.
    pub fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))["result"].clone()
    }

    /// Closes the server's input, as a client that leaves does, and waits
    /// for it to end.
    pub fn close(mut self) -> std::process::ExitStatus {
        drop(self.input.take());
        self.child.wait().expect("the server ends")
    }

    /// The server's process.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for McpClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The texts of a tool result's content, joined by newlines.
#[must_use]
pub fn result_text(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The hostile MCP server the guard's tests run (see its file), by the
/// system's Python.
#[must_use]
pub fn hostile_server() -> Vec<String> {
    let script = super::workspace_root().join("tests/support/clients/hostile_mcp_server.py");
    vec!["python3".to_owned(), script.display().to_string()]
}

/// A child process killed when dropped.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free loopback port.
///
/// # Panics
///
/// When the system has none.
#[must_use]
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Waits (up to 20 s) until something listens on loopback `port`.
///
/// # Panics
///
/// When nothing does by then.
pub fn wait_listening(port: u16) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < until,
            "nothing listens on {port}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Starts `command` (a server on loopback `port`, quiet), killed when
/// dropped, once it listens.
///
/// # Panics
///
/// When it cannot start or never listens.
#[must_use]
pub fn listening(mut command: Command, port: u16) -> Killed {
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the server starts");
    let killed = Killed(child);
    wait_listening(port);
    killed
}
