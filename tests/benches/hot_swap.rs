//! Hot swap: reload latency, the load step alone, and memory per reload.
//!
//! Run: `cargo bench -p chimera-tests --bench hot_swap`
//!
//! * latency: a new build is renamed into the watched plugins directory, or
//!   written over the pack file in place and closed; measured from the call
//!   to rename (or to close) to the watcher reporting the new chains active
//!   (after the registry swap), over 20 reloads each, with the default
//!   options, each after a quiet spell longer than the debounce (a rebuild,
//!   not a burst of rewrites);
//! * load step: `PluginManager::reload` alone (copy, checks, dlopen,
//!   instantiate, state handover, swap), over 20 new contents;
//! * memory: `VmRSS` before and after 100 reloads of new contents, and after
//!   100 rewrites that leave the content unchanged.
//!
//! Every reload alternates between the v1 and v2 builds of the fixture pack,
//! each made unique by a few trailing bytes (so each is new content).

#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap,
    reason = "statistics over measured durations and sizes, far from the limits"
)]

use chimera_host::plugins::platform::library_file_name;
use chimera_host::plugins::{
    watch, PluginManager, Registry, ReloadEvent, ReloadOutcome, WatchOptions,
};
use chimera_tests::{fixture_v2, pack_path, publish};
use std::io::Write;
use std::path::Path;
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

struct Builds {
    one: Vec<u8>,
    two: Vec<u8>,
    counter: u64,
}

impl Builds {
    /// The next new content: v1 and v2 alternately, with a unique tail.
    fn next(&mut self) -> Vec<u8> {
        self.counter += 1;
        let mut bytes = if self.counter % 2 == 0 {
            self.one.clone()
        } else {
            self.two.clone()
        };
        bytes.extend_from_slice(&self.counter.to_le_bytes());
        bytes
    }
}

/// Reloads measured through the watcher: `settle` puts the next new build in
/// place and says when it got there.
fn through_the_watcher(
    events: &Receiver<(Instant, ReloadEvent)>,
    builds: &mut Builds,
    mut settle: impl FnMut(&[u8]) -> Instant,
) -> Vec<Duration> {
    let mut latencies = Vec::new();
    for _ in 0..20 {
        let settled = settle(&builds.next());
        let (active, event) = events
            .recv_timeout(Duration::from_secs(10))
            .expect("an event");
        assert!(matches!(event, ReloadEvent::Reloaded(_)), "{event:?}");
        latencies.push(active - settled);
        std::thread::sleep(WatchOptions::default().debounce + Duration::from_millis(100));
    }
    latencies.sort();
    latencies
}

/// Writes `bytes` over `path` in place and closes it; returns when the
/// close was called (as the rename's start is taken for a rename: the
/// watcher can finish the reload before the writer's `close` returns).
fn write_in_place(path: &Path, bytes: &[u8]) -> Instant {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .expect("open in place");
    file.write_all(bytes).expect("write");
    let closing = Instant::now();
    drop(file);
    closing
}

fn main() {
    let mut builds = Builds {
        one: std::fs::read(pack_path("chimera-fixture-pack")).expect("v1"),
        two: std::fs::read(fixture_v2()).expect("v2"),
        counter: 0,
    };
    let file = library_file_name("chimera-fixture-pack");
    let config = r#"{"tool_call": {"action": "block", "reason": "{tag} says no"}}"#;

    // Latency through the watcher.
    let dir = tempfile::tempdir().expect("temp dir");
    publish(dir.path(), &file, &builds.next());
    let manager = Arc::new(PluginManager::new(
        Arc::new(Registry::new()),
        vec![dir.path().to_owned()],
    ));
    manager.load("fixture", config).expect("loads");
    let (sender, events) = mpsc::channel();
    let watcher = watch(
        Arc::clone(&manager),
        WatchOptions::default(),
        move |event| {
            let _ = sender.send((Instant::now(), event));
        },
    )
    .expect("watch");
    let renamed = through_the_watcher(&events, &mut builds, |bytes| {
        let temporary = dir.path().join(".next.tmp");
        std::fs::write(&temporary, bytes).expect("write");
        let renamed = Instant::now();
        std::fs::rename(&temporary, dir.path().join(&file)).expect("rename");
        renamed
    });
    let closed = through_the_watcher(&events, &mut builds, |bytes| {
        write_in_place(&dir.path().join(&file), bytes)
    });
    drop(watcher);

    // The load step alone.
    let mut steps = Vec::new();
    for _ in 0..20 {
        publish(dir.path(), &file, &builds.next());
        let started = Instant::now();
        let outcome = manager.reload("fixture").expect("reloads");
        steps.push(started.elapsed());
        assert!(matches!(outcome, ReloadOutcome::Reloaded(_)));
    }
    steps.sort();

    // Memory per reload.
    let file_kib = builds.one.len() as u64 / 1024;
    let before = rss_kib();
    for _ in 0..100 {
        publish(dir.path(), &file, &builds.next());
        manager.reload("fixture").expect("reloads");
    }
    let after_new = rss_kib();
    let same = builds.next();
    publish(dir.path(), &file, &same);
    manager.reload("fixture").expect("reloads");
    let before_same = rss_kib();
    for _ in 0..100 {
        publish(dir.path(), &file, &same);
        assert_eq!(
            manager.reload("fixture").expect("reloads"),
            ReloadOutcome::Unchanged
        );
    }
    let after_same = rss_kib();

    let per_reload = (after_new.saturating_sub(before)) as f64 / 100.0;
    println!("hot swap of the fixture pack ({file_kib} KiB file)");
    println!("| measure | value |");
    println!("|---|---|");
    for (what, latencies) in [("rename", &renamed), ("write in place, close", &closed)] {
        println!(
            "| {what} → new chains active, p50 / p95 (20 reloads) | {:.1?} / {:.1?} |",
            percentile(latencies, 0.5),
            percentile(latencies, 0.95)
        );
    }
    println!(
        "| load step alone (`reload`), p50 / p95 (20) | {:.2?} / {:.2?} |",
        percentile(&steps, 0.5),
        percentile(&steps, 0.95)
    );
    println!(
        "| RSS growth per reload, new content (100) | {per_reload:.0} KiB = {:.2}× the file |",
        per_reload / file_kib as f64
    );
    println!(
        "| RSS growth over 100 unchanged rewrites | {} KiB |",
        after_same as i64 - before_same as i64
    );
}
