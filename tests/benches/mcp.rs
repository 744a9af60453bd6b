//! What `chimera mcp guard` adds to an MCP tool call: the reference
//! `everything` server's `echo` called directly and through the guard
//! with three packs on the call's seams (redactor on `tool_result`,
//! plan-gate on `tool_call`, content-safety scanning tool results), in
//! alternating batches so every way sees the same machine: over stdio
//! (the server directly, and `chimera mcp guard CMD`), and over
//! streamable HTTP (the server directly, nginx as a plain reverse proxy
//! in front of it, and `chimera mcp guard --url`).
//!
//! Run: `cargo bench -p chimera-tests --bench mcp [-- http]` (`http`: the
//! streamable-HTTP ways only; needs `npm` for the
//! server and nginx, which it installs when missing; without them, says
//! so in one line). Prints Markdown tables: p50 and p99 each way, and
//! what the guard (and nginx) add.

#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a benchmark report: durations printed as floats"
)]

use chimera_tests::mcp::{free_port, listening, server, wait_listening, Killed, McpClient};
use chimera_tests::nginx::Nginx;
use chimera_tests::{chimera_bin, packs_dir};
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `n` sequential `echo` calls through `client`, their latencies
/// appended to `times`.
fn echo(client: &mut McpClient, n: usize, times: &mut Vec<Duration>) {
    for i in 0..n {
        let started = Instant::now();
        let result = client.call("echo", json!({"message": format!("status report {i}")}));
        times.push(started.elapsed());
        assert!(result["content"].is_array(), "{result}");
    }
}

fn at(times: &[Duration], p: f64) -> Duration {
    times[((times.len() as f64 - 1.0) * p).round() as usize]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The three packs the guard runs, as flags.
const PACKS: [&str; 6] = [
    "--pack",
    "redactor",
    "--pack",
    "plan-gate",
    "--pack",
    r#"content-safety={"scan_tool_results":true}"#,
];

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let quick = std::env::args().any(|a| a == "quick");
    let Some(everything) = server("@modelcontextprotocol/server-everything") else {
        println!("the reference MCP servers cannot be installed here: nothing to measure");
        return;
    };
    packs_dir();
    // `http`: the streamable-HTTP ways only.
    if !std::env::args().any(|a| a == "http") {
        stdio(&everything, quick);
    }
    http(&everything, quick);
}

/// The stdio ways.
fn stdio(everything: &[String], quick: bool) {
    let quiet = |mut command: Command| {
        command.stderr(Stdio::null());
        McpClient::start(command)
    };
    let mut direct_command = Command::new(&everything[0]);
    direct_command.args(&everything[1..]);
    let mut direct = quiet(direct_command);
    let mut guarded_command = Command::new(chimera_bin());
    guarded_command
        .args(["mcp", "guard"])
        .args(PACKS)
        .arg("--")
        .args(everything);
    let mut guarded = quiet(guarded_command);
    let (batches, per_batch) = if quick { (5, 100) } else { (20, 250) };
    let (mut direct_times, mut guarded_times) = (Vec::new(), Vec::new());
    // Warm both up, then alternate.
    echo(&mut direct, 100, &mut Vec::new());
    echo(&mut guarded, 100, &mut Vec::new());
    for _ in 0..batches {
        echo(&mut direct, per_batch, &mut direct_times);
        echo(&mut guarded, per_batch, &mut guarded_times);
    }
    direct_times.sort_unstable();
    guarded_times.sort_unstable();
    let n = direct_times.len();
    println!("| way ({n} calls each) | p50 (µs) | p99 (µs) |");
    println!("|---|---|---|");
    for (name, times) in [
        ("direct", &direct_times),
        ("through the guard, 3 packs", &guarded_times),
    ] {
        println!(
            "| {name} | {:.1} | {:.1} |",
            us(at(times, 0.5)),
            us(at(times, 0.99))
        );
    }
    println!(
        "\nAdded by the guard: p50 {:.1} µs, p99 {:.1} µs.",
        us(at(&guarded_times, 0.5)) - us(at(&direct_times, 0.5)),
        us(at(&guarded_times, 0.99)) - us(at(&direct_times, 0.99))
    );
}

/// An MCP session over streamable HTTP at `url`.
struct HttpSession {
    url: String,
    session: String,
    client: reqwest::Client,
}

impl HttpSession {
    async fn post(&self, body: serde_json::Value) -> String {
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18");
        if !self.session.is_empty() {
            request = request.header("mcp-session-id", &self.session);
        }
        let answer = request
            .body(body.to_string())
            .send()
            .await
            .expect("an answer");
        answer.text().await.expect("a body")
    }

    async fn start(url: String) -> HttpSession {
        let client = reqwest::Client::new();
        let answer = client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "0"}}})
                .to_string(),
            )
            .send()
            .await
            .expect("initialize answered");
        let session = answer
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let _ = answer.text().await;
        let this = HttpSession {
            url,
            session,
            client,
        };
        this.post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        this
    }

    /// `n` sequential `echo` calls, their latencies appended to `times`.
    async fn echo(&self, n: usize, times: &mut Vec<Duration>) {
        for i in 0..n {
            let started = Instant::now();
            let body = self
                .post(json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"message": format!("status report {i}")}}}))
                .await;
            times.push(started.elapsed());
            assert!(body.contains("Echo: status report"), "{body}");
        }
    }
}

/// The streamable-HTTP ways: direct, nginx as a plain proxy, the guard.
fn http(everything: &[String], quick: bool) {
    let upstream = free_port();
    let mut command = Command::new(&everything[0]);
    command
        .args(&everything[1..])
        .arg("streamableHttp")
        .env("PORT", upstream.to_string());
    let _server = listening(command, upstream);
    let base = format!("http://127.0.0.1:{upstream}");
    let nginx = match Nginx::start(&format!("127.0.0.1:{upstream}")) {
        Ok(nginx) => nginx,
        Err(why) => {
            println!("\nnginx cannot be had here ({why}): the HTTP ways are not measured");
            return;
        }
    };
    let guard = |packs: &[&str]| {
        let port = free_port();
        let child = Killed(
            Command::new(chimera_bin())
                .args(["mcp", "guard"])
                .args(packs)
                .arg("--url")
                .arg(format!("{base}/mcp"))
                .args(["--listen", &format!("127.0.0.1:{port}")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("the guard starts"),
        );
        wait_listening(port);
        (child, port)
    };
    let (_bare, bare) = guard(&[]);
    let (_guard, guarded) = guard(&PACKS);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let (batches, per_batch) = if quick { (5, 100) } else { (20, 250) };
    let ways = runtime.block_on(async {
        let sessions = [
            ("direct", HttpSession::start(format!("{base}/mcp")).await),
            (
                "nginx, plain proxy",
                HttpSession::start(format!("{}/mcp", nginx.url())).await,
            ),
            (
                "through the guard, 3 packs",
                HttpSession::start(format!("http://127.0.0.1:{guarded}/mcp")).await,
            ),
            (
                "through the guard, no pack",
                HttpSession::start(format!("http://127.0.0.1:{bare}/mcp")).await,
            ),
        ];
        let mut times = vec![Vec::new(); sessions.len()];
        for (_, session) in &sessions {
            session.echo(100, &mut Vec::new()).await;
        }
        for _ in 0..batches {
            for ((_, session), times) in sessions.iter().zip(&mut times) {
                session.echo(per_batch, times).await;
            }
        }
        sessions
            .iter()
            .map(|(name, _)| *name)
            .zip(times)
            .collect::<Vec<_>>()
    });
    report(ways, batches * per_batch, &nginx.version);
}

/// The HTTP table and what each way adds to direct.
fn report(ways: Vec<(&str, Vec<Duration>)>, calls: usize, nginx: &str) {
    println!(
        "\n| way over streamable HTTP ({calls} calls each; nginx {nginx}) | p50 (µs) | p99 (µs) |"
    );
    println!("|---|---|---|");
    let mut p50 = Vec::new();
    for (name, mut times) in ways {
        times.sort_unstable();
        println!(
            "| {name} | {:.1} | {:.1} |",
            us(at(&times, 0.5)),
            us(at(&times, 0.99))
        );
        p50.push((us(at(&times, 0.5)), us(at(&times, 0.99))));
    }
    let nginx_added = p50[1].0 - p50[0].0;
    let (guard_added, bare_added) = (p50[2].0 - p50[0].0, p50[3].0 - p50[0].0);
    println!(
        "\nAdded p50: nginx {nginx_added:.1} µs; the guard with 3 packs {guard_added:.1} µs \
         ({:.2}× nginx's), with no pack {bare_added:.1} µs ({:.2}×); added p99: nginx {:.1} µs, \
         the guard with 3 packs {:.1} µs, with none {:.1} µs.",
        guard_added / nginx_added,
        bare_added / nginx_added,
        p50[1].1 - p50[0].1,
        p50[2].1 - p50[0].1,
        p50[3].1 - p50[0].1,
    );
}
