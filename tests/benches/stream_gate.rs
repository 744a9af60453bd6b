//! The `stream_chunk` seam's cost over a long stream: a 1 MiB answer in
//! 16-byte deltas through the loaded fixture pack's holding word gate,
//! against one scan of the same 1 MiB by the same gate logic.
//!
//! Run: `cargo bench -p chimera-tests --bench stream_gate`
//!
//! * `stream_gate/one_scan`: the gate's check (`ban` in any ASCII case)
//!   over the whole 1 MiB once, as a plain function — the work a single
//!   verdict on the finished text costs;
//! * `stream_gate/streamed_16b`: the host's stream gate (`StreamGate`, what
//!   the loop runs between the provider and the display) offering 65 536
//!   deltas of 16 bytes to the loaded pack's `stream_chunk` interceptor,
//!   which holds a trailing partial word on every delta and scans only
//!   from the word straddling the released boundary, then the final check.
//!
//! * `stream_gate/boundary_only_16b`: the same stream through a gate that
//!   judges nothing — the boundary's fixed cost per delta;
//! * `gates_stream/one_scan`: `content-safety` (all checks) and
//!   `stop-words` judging the whole 1 MiB once each, as plain functions;
//! * `stream_gate/streamed_16b_window_1k`: the same gate declaring a
//!   1 KiB stream window, so deltas gather and are judged 1 KiB at a time;
//! * `gates_stream/streamed_16b`: both gates loaded by name with stream
//!   scanning on, offered the same 65 536 deltas through `StreamGate` with
//!   the windows they declare (1 KiB each);
//! * `gates_stream/streamed_16b_every_delta`: the same, every delta
//!   offered on its own (no window).
//!
//! * `release_rule/{prose,long_partials}/…`: `content-safety` with a
//!   whitespace-spanning custom pattern (`launch\s+code\s+alpha`), its
//!   1 KiB window, over 1 MiB of prose and over 1 MiB that holds a 60 KB
//!   live partial match (`launch`, 60 000 spaces, then `pad`) every
//!   128 KiB — each held whole until it turns out clean — against one
//!   scan of each text.
//!
//! A gate that rescans the turn's whole text on every delta (as the
//! Nexus gates do) is quadratic: about 32 768 scans of half the text on
//! average here. The target is at most 3× one scan.

#![allow(
    missing_docs,
    reason = "criterion_group! generates an undocumented pub fn"
)]

use chimera_host::agent::StreamGate;
use chimera_host::interception::{run_chain, ChainContext, SessionFacts, StreamChunkInterceptor};
use chimera_host::plugins::{PluginManager, Registry};
use chimera_plugin_api::sdk::Pack;
use criterion::{criterion_group, Criterion};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

const MIB: usize = 1 << 20;
const DELTA: usize = 16;

/// 1 MiB of log-like prose: words, spaces and newlines, no banned word.
fn answer() -> String {
    let words = [
        "the", "build", "passed", "after", "retrying", "fetch", "of", "crate", "index", "with",
        "timeout", "ok", "warning:", "unused", "import", "in", "module", "tests", "and",
    ];
    let mut text = String::with_capacity(MIB + 16);
    let mut i = 0usize;
    while text.len() < MIB {
        text.push_str(words[i % words.len()]);
        text.push(if i % 13 == 12 { '\n' } else { ' ' });
        i = i.wrapping_mul(31).wrapping_add(7) % 1_000_003;
    }
    text.truncate(MIB);
    text
}

/// The gate's check, once over `text`.
fn one_scan(text: &[u8], ban: &[u8]) -> bool {
    text.windows(ban.len()).any(|w| w.eq_ignore_ascii_case(ban))
}

/// The `stream_chunk` chain of the packs `specs` (name, config) load.
fn chain_of(specs: &[(&str, &str)]) -> Vec<StreamChunkInterceptor> {
    let manager = PluginManager::new(Arc::new(Registry::new()), chimera_tests::pack_dirs());
    for (name, config) in specs {
        manager.load(name, config).expect("pack loads");
    }
    manager.registry().get_all().stream_chunk
}

/// Offers every delta of `deltas` to `chain` through a fresh `StreamGate`
/// (with the chain's declared window, or — `every_delta` — none), then the
/// final check (when `last`); the bytes released.
fn offer_all(
    chain: &[StreamChunkInterceptor],
    deltas: &[&str],
    last: bool,
    every_delta: bool,
) -> usize {
    let facts = SessionFacts::new("bench");
    let cx = ChainContext {
        session: &facts,
        events: None,
    };
    let mut gate = if every_delta {
        StreamGate::with_window(0)
    } else {
        StreamGate::for_chain(chain)
    };
    let mut released = 0;
    for delta in deltas {
        let offered = gate.offer(delta, false, |f, t| run_chain(chain, f, t, &cx));
        released += offered.release.map_or(0, |r| r.len());
    }
    if last {
        let offered = gate.offer("", true, |f, t| run_chain(chain, f, t, &cx));
        released += offered.release.map_or(0, |r| r.len());
    }
    released
}

/// The answer in 16-byte deltas.
fn deltas(text: &str) -> Vec<&str> {
    text.as_bytes()
        .chunks(DELTA)
        .map(|chunk| std::str::from_utf8(chunk).expect("ASCII"))
        .collect()
}

fn stream_gate(c: &mut Criterion) {
    let text = answer();
    let deltas = deltas(&text);
    let chain = chain_of(&[(
        "fixture",
        r#"{"stream_chunk": {"ban": "forbidden", "reason": "prohibited term"}}"#,
    )]);
    assert_eq!(chain.len(), 1);
    assert_eq!(
        offer_all(&chain, &deltas, true, true),
        MIB,
        "everything is released in the end"
    );
    let windowed = chain_of(&[(
        "fixture",
        r#"{"stream_chunk": {"ban": "forbidden", "reason": "prohibited term", "window": 1024}}"#,
    )]);
    assert_eq!(windowed[0].stream_window(), 1024);
    assert_eq!(offer_all(&windowed, &deltas, true, false), MIB);
    assert!(!one_scan(text.as_bytes(), b"forbidden"));
    // A gate that judges nothing (releases every delta whole): the
    // boundary's fixed cost per delta.
    let idle = chain_of(&[("fixture", r#"{"stream_chunk": {"no_hold": true}}"#)]);
    assert_eq!(offer_all(&idle, &deltas, false, true), MIB);

    let mut group = c.benchmark_group("stream_gate");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("one_scan", |b| {
        b.iter(|| black_box(one_scan(black_box(text.as_bytes()), b"forbidden")));
    });
    group.bench_function("streamed_16b", |b| {
        b.iter(|| black_box(offer_all(&chain, &deltas, true, true)));
    });
    group.bench_function("streamed_16b_window_1k", |b| {
        b.iter(|| black_box(offer_all(&windowed, &deltas, true, false)));
    });
    group.bench_function("boundary_only_16b", |b| {
        b.iter(|| black_box(offer_all(&idle, &deltas, false, true)));
    });
    group.finish();
}

/// The two streaming gates, loaded by name, against one scan of each.
fn gates_stream(c: &mut Criterion) {
    let text = answer();
    let deltas = deltas(&text);
    let chain = chain_of(&[
        ("content-safety", r#"{"scan_llm_responses": true}"#),
        (
            "stop-words",
            r#"{"words": ["forbidden"], "scan_llm_responses": true}"#,
        ),
    ]);
    assert_eq!(chain.len(), 2);
    let scanner =
        content_safety::Scanner::new(&content_safety::Config::default()).expect("scanner builds");
    let words = stop_words::StopWords::new(
        serde_json::from_str(r#"{"words": ["forbidden"]}"#).expect("config parses"),
    )
    .expect("stop-words builds");
    let both_once = |text: &str| {
        (
            scanner.triggered(text).is_empty(),
            words.find(text).is_none(),
        )
    };
    assert_eq!(both_once(&text), (true, true), "the text is clean");
    assert!(
        chain.iter().all(|i| i.stream_window() > 0),
        "both gates declare a window"
    );
    for every_delta in [true, false] {
        assert_eq!(
            offer_all(&chain, &deltas, true, every_delta),
            MIB,
            "a clean stream is released whole"
        );
    }

    let mut group = c.benchmark_group("gates_stream");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("one_scan", |b| {
        b.iter(|| black_box(both_once(black_box(&text))));
    });
    group.bench_function("streamed_16b", |b| {
        b.iter(|| black_box(offer_all(&chain, &deltas, true, false)));
    });
    group.bench_function("streamed_16b_every_delta", |b| {
        b.iter(|| black_box(offer_all(&chain, &deltas, true, true)));
    });
    group.finish();
}

/// `text` with a long live partial match of `launch\s+code\s+alpha`
/// every 128 KiB: `launch`, 60 000 spaces (under the 64 KiB hold limit),
/// then `pad ` (so it turns out clean and is released), at the same length.
fn with_long_partials(text: &str) -> String {
    let padded = format!("launch{}pad ", " ".repeat(60_000));
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < text.len() {
        let take = (128 * 1024 - padded.len()).min(text.len() - at);
        let mut end = at + take;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        out.push_str(&text[at..end]);
        at = end;
        if out.len() + padded.len() <= text.len() {
            out.push_str(&padded);
        }
    }
    out.truncate(MIB);
    out
}

/// content-safety's release rule with a whitespace-spanning custom
/// pattern: 1 MiB of prose, and 1 MiB holding a 60 KB live partial match
/// every 128 KiB, against one scan of the same text.
fn release_rule(c: &mut Criterion) {
    let config = r#"{"scan_stream": true, "custom_patterns": [{"pattern": "launch\\s+code\\s+alpha", "name": "launch_code"}]}"#;
    let chain = chain_of(&[("content-safety", config)]);
    let scanner = content_safety::Scanner::new(&serde_json::from_str(config).expect("parses"))
        .expect("scanner builds");
    let prose = answer();
    let partials = with_long_partials(&prose);
    assert_eq!(partials.len(), MIB);
    for text in [&prose, &partials] {
        assert!(scanner.triggered(text).is_empty(), "the text is clean");
        assert_eq!(
            offer_all(&chain, &deltas(text), true, false),
            MIB,
            "a clean stream is released whole"
        );
    }
    let mut group = c.benchmark_group("release_rule");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for (name, text) in [("prose", &prose), ("long_partials", &partials)] {
        let deltas = deltas(text);
        group.bench_function(format!("{name}/one_scan"), |b| {
            b.iter(|| black_box(scanner.triggered(black_box(text))));
        });
        group.bench_function(format!("{name}/streamed_16b_window_1k"), |b| {
            b.iter(|| black_box(offer_all(&chain, &deltas, true, false)));
        });
    }
    group.finish();
}

criterion_group!(benches, stream_gate, gates_stream, release_rule);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
