//! The cost per MB of text built to be slow: near-misses of the
//! redactor's and content-safety's patterns, against clean log text of
//! the same size measured in the same run.
//!
//! Run: `cargo bench -p chimera-tests --bench near_miss`
//!
//! A gateway judges what any client sends, so a client can pick the text
//! that costs its gates most. Each row is one text of 1 MiB (and the
//! redactor's attack text also at 3.9 MB, the size that once took the
//! redactor past its call budget), judged as a server judges it:
//!
//! * the redactor pack loaded from its `.so`, through the host's
//!   `tool_result` chain;
//! * content-safety's scanner, block mode (which checks fire) and redact
//!   mode (the redacted copy).
//!
//! The texts:
//!
//! * `clean log`: log lines, no secret and no near-miss;
//! * `sk-aaaaaaaé `: the redactor's prefix, one letter short of a match,
//!   then a non-ASCII letter (the attack that found the Unicode word
//!   boundary's slow path);
//! * `x@`: one run of `x@x@x@…` with no whitespace (every `@` an email
//!   candidate in the same run);
//! * `123-45-678é `: SSN-shaped near-misses;
//! * `password:x`: a run of `password:password:…` (every word the start of
//!   a match that runs to the end of the run).
//!
//! Target: every near-miss at least a quarter of the clean text's
//! throughput (the same order: linear, with a small constant).

#![allow(
    clippy::cast_precision_loss,
    reason = "throughput figures over sizes far below 2^52"
)]

use chimera_host::interception::{run_chain, ChainContext, SessionFacts};
use chimera_host::plugins::{PluginManager, Registry};
use chimera_host::types::{ToolCall, ToolResult};
use chimera_tests::packs_dir;
use content_safety::{Action, Config, Scanner};
use std::fmt::Write as _;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;

/// `unit` repeated to `bytes` (cut at a character boundary).
fn repeated(unit: &str, bytes: usize) -> String {
    let mut text = unit.repeat(bytes / unit.len() + 1);
    let mut end = bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text
}

/// Log lines with neither secrets nor near-misses.
fn clean_log(bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 128);
    let mut line = 0u64;
    while text.len() < bytes {
        line += 1;
        // Writing to a String cannot fail.
        let _ = writeln!(
            text,
            "2026-12-04T12:{:02}:{:02}Z INFO  worker-{} processed request id=r{:08} path=/api/v1/items/{} in {}ms",
            line / 60 % 60,
            line % 60,
            line % 8,
            line,
            line % 977,
            line % 250
        );
    }
    text.truncate(bytes);
    text
}

/// The best of `runs` timings of `f`.
fn best(runs: usize, mut f: impl FnMut()) -> Duration {
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn mb_per_s(bytes: usize, took: Duration) -> f64 {
    bytes as f64 / 1e6 / took.as_secs_f64()
}

/// One row: the time, MB/s and the ratio to the clean text's MB/s.
fn row(what: &str, text: &str, took: Duration, clean: f64) {
    let rate = mb_per_s(text.len(), took);
    println!(
        "| {what} | {:.1} MB | {:.2} ms | {rate:.0} MB/s | {:.2} |",
        text.len() as f64 / 1e6,
        took.as_secs_f64() * 1e3,
        rate / clean
    );
}

fn main() {
    let manager = PluginManager::new(Arc::new(Registry::new()), vec![packs_dir().to_owned()]);
    manager.load("redactor", "").expect("redactor loads");
    let chain = manager.registry().get_all().tool_result;
    let call = ToolCall::new("c1", "bash", serde_json::json!({"command": "cat app.log"}));
    let facts = SessionFacts::new("bench");
    let cx = ChainContext {
        session: &facts,
        events: None,
    };
    let redactor = |text: &str| {
        let result = ToolResult::ok(text.to_owned());
        best(9, || {
            black_box(run_chain(&chain, &call, black_box(&result), &cx));
        })
    };
    let scanner = Scanner::new(&Config::default()).expect("the default checks compile");
    let block = |text: &str| {
        best(9, || {
            black_box(scanner.judge(Action::Block, black_box(text)));
        })
    };
    let redact = |text: &str| {
        best(9, || {
            black_box(scanner.judge(Action::Redact, black_box(text)));
        })
    };

    let clean = clean_log(MIB);
    let texts = [
        ("`sk-aaaaaaaé `", repeated("sk-aaaaaaaé ", MIB)),
        (
            "`sk-aaaaaaaé ` (the attack's size)",
            repeated("sk-aaaaaaaé ", 3_900_000),
        ),
        ("`x@`", repeated("x@", MIB)),
        ("`123-45-678é `", repeated("123-45-678é ", MIB)),
        ("`password:x`", repeated("password:", MIB)),
    ];
    println!("near-misses against clean log text, best of 9 runs, one process");
    for (gate, judge) in [
        (
            "redactor (.so, tool_result chain)",
            &redactor as &dyn Fn(&str) -> Duration,
        ),
        ("content-safety, block", &block),
        ("content-safety, redact", &redact),
    ] {
        println!();
        println!("{gate}:");
        println!("| text | size | time | throughput | × clean |");
        println!("|---|---|---|---|---|");
        let base = judge(&clean);
        let clean_rate = mb_per_s(clean.len(), base);
        row("clean log", &clean, base, clean_rate);
        for (what, text) in &texts {
            row(what, text, judge(text), clean_rate);
        }
    }
}
