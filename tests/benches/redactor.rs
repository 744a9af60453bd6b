//! Redactor throughput against Python's `re.sub`, side by side in one run.
//!
//! Run: `cargo bench -p chimera-tests --bench redactor`
//!
//! Two 1 MiB tool outputs — log-like text with no secrets, and the same text
//! with a secret on every 40th line — are scrubbed (a) by the redactor pack
//! loaded from its `.so`, through the host's `tool_result` chain exactly as
//! the loop runs it, and (b) by `python3` running `re.sub` with the same
//! pattern and replacement on the same bytes. Each side reports the median of
//! 31 runs; the table prints MB/s and the ratio.

#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap,
    clippy::format_push_string,
    reason = "statistics over measured durations and sizes, far from the limits"
)]

use chimera_host::interception::{run_chain, ChainContext, SessionFacts};
use chimera_host::plugins::{PluginManager, Registry};
use chimera_host::types::{ToolCall, ToolResult};
use chimera_tests::packs_dir;
use std::hint::black_box;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;
const RUNS: usize = 31;
/// The redactor's default pattern in Python's syntax: `(?a)` makes its
/// `\b` the ASCII word boundary the pack's `(?-u:\b)` is.
const PATTERN: &str = r"(?a)\b(?:sk|key|token|secret)-[A-Za-z0-9_\-]{8,}\b";

fn input(with_secrets: bool, unicode: bool) -> String {
    let mut text = String::with_capacity(MIB + 200);
    let mut line = 0u64;
    while text.len() < MIB {
        line += 1;
        if with_secrets && line % 40 == 0 {
            text.push_str(&format!(
                "2026-11-30T12:{:02}:{:02}Z WARN  auth   retrying with key-{:016x} for tenant {}\n",
                line / 60 % 60,
                line % 60,
                line.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                line % 17
            ));
        } else {
            text.push_str(&format!(
                "2026-11-30T12:{:02}:{:02}Z INFO  worker-{} processed request id=r{:08} path=/api/v1/items/{} in {}ms{}\n",
                line / 60 % 60,
                line % 60,
                line % 8,
                line,
                line % 977,
                line % 250,
                if unicode { " ✓ café" } else { "" }
            ));
        }
    }
    while !text.is_char_boundary(MIB) {
        text.pop();
    }
    text.truncate(MIB);
    text
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn mb_per_s(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / 1e6 / time.as_secs_f64()
}

fn rust_median(text: &str) -> (Duration, usize) {
    let manager = PluginManager::new(Arc::new(Registry::new()), vec![packs_dir().to_owned()]);
    manager.load("redactor", "").expect("redactor loads");
    let chain = manager.registry().get_all().tool_result;
    let call = ToolCall::new("c1", "bash", serde_json::json!({"command": "cat app.log"}));
    let result = ToolResult::ok(text);
    let facts = SessionFacts::new("bench");
    let cx = ChainContext {
        session: &facts,
        events: None,
    };
    let mut redactions = 0;
    let samples = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            let outcome = black_box(run_chain(&chain, &call, black_box(&result), &cx));
            let elapsed = started.elapsed();
            redactions = outcome
                .replaced
                .map_or(0, |r| r.output.matches("[redacted]").count());
            elapsed
        })
        .collect();
    (median(samples), redactions)
}

const PYTHON: &str = r#"
import re, sys, time
pattern = re.compile(sys.argv[1])
text = open(sys.argv[2], encoding="utf-8").read()
samples = []
for _ in range(int(sys.argv[3])):
    started = time.perf_counter()
    out = pattern.sub("[redacted]", text)
    samples.append(time.perf_counter() - started)
samples.sort()
print(samples[len(samples) // 2], out.count("[redacted]"))
"#;

fn python_median(text: &str) -> Option<(Duration, usize)> {
    let dir = tempfile::tempdir().ok()?;
    let file = dir.path().join("input.txt");
    std::fs::write(&file, text).ok()?;
    let output = Command::new("python3")
        .args(["-c", PYTHON, PATTERN])
        .arg(&file)
        .arg(RUNS.to_string())
        .output()
        .ok()?;
    let stdout = String::from_utf8(output.stdout).ok()?;
    let mut fields = stdout.split_whitespace();
    let seconds: f64 = fields.next()?.parse().ok()?;
    let count: usize = fields.next()?.parse().ok()?;
    Some((Duration::from_secs_f64(seconds), count))
}

fn main() {
    println!("redactor vs python3 re.sub, 1 MiB tool output, median of {RUNS} runs");
    println!("| input | redactor pack (.so, via tool_result chain) | python3 re.sub | ratio |");
    println!("|---|---|---|---|");
    for (label, with_secrets, unicode) in [
        ("no secrets", false, false),
        ("a secret every 40 lines", true, false),
        ("no secrets, non-ASCII text", false, true),
        ("a secret every 40 lines, non-ASCII text", true, true),
    ] {
        let text = input(with_secrets, unicode);
        let (rust, rust_count) = rust_median(&text);
        match python_median(&text) {
            Some((python, python_count)) => {
                assert_eq!(
                    rust_count, python_count,
                    "both sides must redact the same matches"
                );
                println!(
                    "| {label} ({rust_count} redactions) | {:.0} MB/s ({:.2?}) | {:.0} MB/s ({:.2?}) | {:.1}× |",
                    mb_per_s(text.len(), rust),
                    rust,
                    mb_per_s(text.len(), python),
                    python,
                    python.as_secs_f64() / rust.as_secs_f64()
                );
            }
            None => println!(
                "| {label} | {:.0} MB/s ({rust:.2?}) | python3 unavailable | – |",
                mb_per_s(text.len(), rust)
            ),
        }
    }
}
