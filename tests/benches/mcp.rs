//! What `chimera mcp guard` adds to an MCP tool call: the reference
//! `everything` server's `echo` called directly and through the guard
//! with three packs on the call's seams (redactor on `tool_result`,
//! plan-gate on `tool_call`, content-safety scanning tool results), in
//! alternating batches so both see the same machine.
//!
//! Run: `cargo bench -p chimera-tests --bench mcp` (needs `npm` for the
//! server, which `.ci/run` installs; without it, says so in one line).
//! Prints a Markdown table: p50 and p99 each way, and what the guard adds.

#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a benchmark report: durations printed as floats"
)]

use chimera_tests::mcp::{server, McpClient};
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
        .args(["--pack", "redactor", "--pack", "plan-gate"])
        .args(["--pack", r#"content-safety={"scan_tool_results":true}"#])
        .arg("--")
        .args(&everything);
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
