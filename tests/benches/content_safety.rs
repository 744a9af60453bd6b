//! The `content-safety` scanner's throughput: every check on 1 MiB of log
//! text, with and without secrets, against Python's `re` running the same
//! patterns one after another on the same bytes.
//!
//! Run: `cargo bench -p chimera-tests --bench content_safety`
//!
//! * `content_safety/clean_1mib`: the block verdict (which checks fire)
//!   over 1 MiB of log lines holding no secret — one pass of one
//!   `RegexSet` for all checks;
//! * `content_safety/secrets_every_4k`: the same with a secret (email,
//!   SSN, card number, AWS key, password, private IP in turn) every 4 KiB;
//! * `content_safety/redact_secrets_every_4k`: the redacted copy of that
//!   text (the spans of each check that fired);
//! * `content_safety/output_chain_clean_1mib`: the pack's `output`
//!   interceptor, host-side through the SDK, on the clean text.
//!
//! Then one table, measured in the same run: the best of a few runs of the
//! clean and the secret scan, and of Python's `re` (`python3`, each pattern
//! searched in turn, card matches Luhn-checked) on the same file. Without
//! `python3` that column says "skipped".
//!
//! Targets: clean ≥ 1 GB/s and ≥ 50× Python; secrets every 4 KiB ≥ 300 MB/s.

#![allow(
    missing_docs,
    reason = "criterion_group! generates an undocumented pub fn"
)]

use chimera_host::interception::{run_chain, ChainContext, SessionFacts};
use chimera_host::plugins::interceptors_of;
use content_safety::{scan, Action, Config, ContentSafety, Scanner};
use criterion::{criterion_group, Criterion, Throughput};
use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;

/// 1 MiB of log lines: timestamps, levels, paths, sizes, durations,
/// public addresses; no secret of any kind.
fn clean_log() -> String {
    let levels = ["INFO ", "DEBUG", "WARN ", "INFO "];
    let verbs = [
        "fetched", "compiled", "linked", "cached", "retried", "skipped",
    ];
    let crates = [
        "serde",
        "regex",
        "tokio",
        "clap",
        "anyhow",
        "tracing",
        "criterion",
    ];
    let mut text = String::with_capacity(MIB + 256);
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    while text.len() < MIB {
        let line = format!(
            "2026-12-02T{:02}:{:02}:{:02}.{:03}Z {} [worker-{}] {} crate {} v1.{}.{} ({} KiB) in {} ms from https://index.crates.io/{}/{} status=200 peer=203.0.113.{}\n",
            next(24), next(60), next(60), next(1000),
            levels[usize::try_from(next(4)).unwrap_or(0)],
            next(16),
            verbs[usize::try_from(next(6)).unwrap_or(0)],
            crates[usize::try_from(next(7)).unwrap_or(0)],
            next(40), next(300), next(900), next(5000),
            crates[usize::try_from(next(7)).unwrap_or(0)],
            next(100_000),
            next(255),
        );
        text.push_str(&line);
    }
    text.truncate(MIB);
    text
}

/// `clean` with a secret at the first line start after every 4 KiB.
fn with_secrets(clean: &str) -> String {
    let secrets = [
        "contact bob.smith@example.com now ",
        "ssn 123-45-6789 on file ",
        "card 4111 1111 1111 1111 charged ",
        "key AKIAIOSFODNN7EXAMPLE leaked ",
        "password: hunter2 set ",
        "db at 10.1.2.3 ready ",
    ];
    let mut text = String::with_capacity(clean.len() + clean.len() / 64);
    let mut next = 4096;
    let mut i = 0;
    for line in clean.split_inclusive('\n') {
        if text.len() >= next {
            text.push_str(secrets[i % secrets.len()]);
            i += 1;
            next += 4096;
        }
        text.push_str(line);
    }
    text.truncate(MIB);
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

const PYTHON: &str = r#"
import json, re, sys, time
patterns = json.loads(sys.argv[1])
data = open(sys.argv[2], "rb").read()
compiled = [(name, re.compile(p.encode()), name == "credit_card") for name, p in patterns]
def luhn(b):
    digits = [int(c) for c in b.decode() if c.isdigit()]
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return bool(digits) and total % 10 == 0
def scan():
    fired = []
    for name, rx, card in compiled:
        if card:
            if any(luhn(m.group()) for m in rx.finditer(data)):
                fired.append(name)
        elif rx.search(data):
            fired.append(name)
    return fired
best = None
for _ in range(int(sys.argv[3])):
    start = time.perf_counter()
    fired = scan()
    took = time.perf_counter() - start
    best = took if best is None else min(best, took)
print(json.dumps({"seconds": best, "fired": fired}))
"#;

/// Python's best time for the same patterns over `text`, and what fired;
/// `None` when `python3` is missing or fails.
fn python(patterns: &[(String, String)], text: &str, runs: usize) -> Option<(Duration, String)> {
    let dir = tempfile::tempdir().ok()?;
    let file = dir.path().join("log.txt");
    std::fs::write(&file, text).ok()?;
    let patterns = serde_json::to_string(patterns).ok()?;
    let out = Command::new("python3")
        .args(["-c", PYTHON, &patterns])
        .arg(&file)
        .arg(runs.to_string())
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!("python3 failed: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let seconds = answer["seconds"].as_f64()?;
    let fired: Vec<&str> = answer["fired"]
        .as_array()?
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    Some((Duration::from_secs_f64(seconds), fired.join(", ")))
}

/// MB/s (10⁶ bytes) for `bytes` in `took`.
fn rate(bytes: usize, took: Duration) -> f64 {
    #[allow(clippy::cast_precision_loss, reason = "a throughput figure")]
    let bytes = bytes as f64;
    bytes / took.as_secs_f64() / 1e6
}

fn side_by_side(scanner: &Scanner, patterns: &[(String, String)], clean: &str, dirty: &str) {
    println!();
    println!("| text (1 MiB) | Rust (best of 20) | Python `re` (best of 3) | ratio |");
    println!("|---|---|---|---|");
    for (label, text) in [("clean", clean), ("secret every 4 KiB", dirty)] {
        let rust = best(20, || {
            black_box(scanner.triggered(black_box(text)));
        });
        let ours = scanner.names(&scanner.triggered(text));
        let python = match python(patterns, text, 3) {
            Some((took, fired)) => {
                assert_eq!(fired, ours, "Python and Rust agree on {label}");
                format!(
                    "{:.2} ms ({:.0} MB/s) | {:.0}×",
                    took.as_secs_f64() * 1e3,
                    rate(text.len(), took),
                    took.as_secs_f64() / rust.as_secs_f64()
                )
            }
            None => "skipped (no python3) | –".to_owned(),
        };
        println!(
            "| {label} | {:.3} ms ({:.0} MB/s) | {python} |",
            rust.as_secs_f64() * 1e3,
            rate(text.len(), rust),
        );
    }
    println!();
}

fn content_safety(c: &mut Criterion) {
    let config = Config::default();
    let scanner = Scanner::new(&config).expect("the default checks compile");
    let patterns = scan::patterns(&config);
    let clean = clean_log();
    let dirty = with_secrets(&clean);
    assert_eq!(scanner.names(&scanner.triggered(&clean)), "");
    assert_eq!(
        scanner.names(&scanner.triggered(&dirty)),
        "email, ssn, api_key, password, credit_card, ip_internal"
    );

    let bundle = interceptors_of::<ContentSafety>("{}").expect("the pack builds");
    let facts = SessionFacts::new("bench");
    let cx = ChainContext {
        session: &facts,
        events: None,
    };
    assert!(run_chain(&bundle.output, &(), &clean, &cx)
        .blocked
        .is_none());

    let mut group = c.benchmark_group("content_safety");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Bytes(MIB as u64));
    group.bench_function("clean_1mib", |b| {
        b.iter(|| black_box(scanner.triggered(black_box(&clean))));
    });
    group.bench_function("secrets_every_4k", |b| {
        b.iter(|| black_box(scanner.triggered(black_box(&dirty))));
    });
    group.bench_function("redact_secrets_every_4k", |b| {
        b.iter(|| black_box(scanner.judge(Action::Redact, black_box(&dirty))));
    });
    group.bench_function("output_chain_clean_1mib", |b| {
        b.iter(|| black_box(run_chain(&bundle.output, &(), black_box(&clean), &cx).blocked));
    });
    group.finish();

    side_by_side(&scanner, &patterns, &clean, &dirty);
}

criterion_group!(benches, content_safety);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
