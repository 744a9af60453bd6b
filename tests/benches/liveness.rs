//! What a slow dependency or a hostile client costs everyone else behind
//! `chimera serve`: `/healthz` latency (and a normal request's, where it
//! does not wait on the slow part) with each gateway idle, then with:
//!
//! * **the store hung**: `rate-limiter` counting in a real `redis-server`
//!   that is `SIGSTOP`ped while 8 requests wait on it;
//! * **the pack host hung**: the redactor isolated, its pack host
//!   `SIGSTOP`ped while 8 requests wait on it;
//! * **the pack host restarting**: the same pack host killed every 100 ms
//!   while 4 clients send requests without pause;
//! * **600 hostile connections**: 200 uploads stalled after 1 MiB of 4,
//!   200 heads sent but for their end, 200 streams whose clients never
//!   read; a normal request of another key is timed too.
//!
//! Each phase is measured against the same gateway idle, in the same run.
//! Targets: `/healthz` p99 ≤ 10 ms in every phase, and a normal request's
//! p99 under the hostile connections ≤ 2× its idle p99.
//!
//! Run: `cargo bench -p chimera-tests --bench liveness` (needs
//! `redis-server`).

#![allow(
    clippy::cast_precision_loss,
    reason = "a benchmark report: durations printed as floats"
)]

use chimera_tests::http::{Reply, Responder, Server};
use chimera_tests::redis::RedisServer;
use chimera_tests::serve::Served;
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Probes per measurement, 5 ms apart.
const PROBES: usize = 300;

/// A chat request's body.
fn chat_body(stream: bool) -> String {
    json!({"model": "m", "stream": stream,
           "messages": [{"role": "user", "content": "hello there, how are you"}]})
    .to_string()
}

/// One request on a new connection, answered whole: its status and how
/// long it took.
fn request(address: &str, head: &str, body: &str) -> (u16, Duration) {
    let started = Instant::now();
    let Ok(mut stream) = TcpStream::connect(address) else {
        return (0, started.elapsed());
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let _ = write!(
        stream,
        "{head}\r\nhost: g\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, started.elapsed())
}

/// `GET /healthz`.
fn healthz(address: &str) -> (u16, Duration) {
    request(address, "GET /healthz HTTP/1.1", "")
}

/// A chat request of key `key`.
fn chat(address: &str, key: &str) -> (u16, Duration) {
    request(
        address,
        &format!("POST /v1/chat/completions HTTP/1.1\r\nauthorization: Bearer {key}"),
        &chat_body(false),
    )
}

/// p50, p99 and the largest of `times`, in ms; and how many failed.
fn summary(mut times: Vec<(u16, Duration)>) -> (f64, f64, f64, usize) {
    let failed = times.iter().filter(|(status, _)| *status != 200).count();
    times.sort_by_key(|(_, took)| *took);
    let ms = |i: usize| times[i.min(times.len() - 1)].1.as_secs_f64() * 1000.0;
    let n = times.len();
    (ms(n / 2), ms(n * 99 / 100), ms(n - 1), failed)
}

/// [`PROBES`] probes of `/healthz`, 5 ms apart.
fn probe(address: &str) -> Vec<(u16, Duration)> {
    (0..PROBES)
        .map(|_| {
            let answer = healthz(address);
            std::thread::sleep(Duration::from_millis(5));
            answer
        })
        .collect()
}

/// One row of the report.
fn row(phase: &str, what: &str, times: Vec<(u16, Duration)>) {
    let (p50, p99, max, failed) = summary(times);
    println!("| {phase} | {what} | {p50:.2} | {p99:.2} | {max:.2} | {failed} |");
}

/// `chimera serve` in front of `upstream` with `args`.
fn serve(upstream: &Server, args: &[&str]) -> Served {
    let base = format!("{}/v1", upstream.url);
    let mut command = Served::command(&base, &["--model", "m"]);
    command.args(args);
    Served::start(command, Stdio::null())
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.map_while(Result::ok) {
            let listed = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            found.extend(
                listed
                    .split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    found
}

/// `kill SIGNAL` each of `pids`.
fn signal(signal: &str, pids: &[u32]) {
    for pid in pids {
        let _ = Command::new("kill")
            .args([signal, &pid.to_string()])
            .stderr(Stdio::null())
            .status();
    }
}

/// Probes `gateway` while `requests` of its requests wait on a part
/// `hang` stops; `release` lets it go.
fn while_waiting(
    gateway: &Served,
    requests: usize,
    hang: impl FnOnce(),
    release: impl FnOnce(),
) -> Vec<(u16, Duration)> {
    hang();
    std::thread::scope(|scope| {
        for i in 0..requests {
            let address = &gateway.address;
            scope.spawn(move || chat(address, &format!("sk-waiting-{i}")));
        }
        std::thread::sleep(Duration::from_millis(300));
        let probes = probe(&gateway.address);
        release();
        probes
    })
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let Some(redis) = RedisServer::start() else {
        eprintln!("liveness: redis-server is not installed");
        std::process::exit(1);
    };
    let upstream = Server::start_concurrent(vec![Reply::Respond(Responder::new(|request| {
        if request.json()["stream"] == true {
            let chunk = json!({"choices": [{"index": 0, "delta": {"content": "a token "}}]});
            Reply::Paced(
                vec![format!("data: {chunk}\n\n"); 6000],
                Duration::from_millis(50),
            )
        } else {
            Reply::Model(vec!["ok".into()], Duration::ZERO)
        }
    }))]);
    println!("| phase | what | p50 ms | p99 ms | max ms | failed |");
    println!("|---|---|---:|---:|---:|---:|");

    store_hung(&upstream, &redis);
    pack_host_hung(&upstream);
    hostile_connections(&upstream);
}

/// The store hung: `rate-limiter` counting in `redis`, stopped.
fn store_hung(upstream: &Server, redis: &RedisServer) {
    let url = redis.url();
    let stored = serve(
        upstream,
        &[
            "--pack",
            r#"rate-limiter={"requests_per_minute":100000}"#,
            "--state-redis",
            &url,
            "--state-timeout-ms",
            "5000",
        ],
    );
    chat(&stored.address, "sk-warm");
    row("store: idle", "/healthz", probe(&stored.address));
    let probes = while_waiting(&stored, 8, || redis.hang(), || redis.resume());
    row("store: hung, 8 requests waiting", "/healthz", probes);
    drop(stored);
}

/// The pack host hung, then restarting.
fn pack_host_hung(upstream: &Server) {
    let isolated = serve(
        upstream,
        &[
            "--pack",
            "redactor",
            "--isolate",
            "redactor",
            "--call-budget-ms",
            "3000",
        ],
    );
    chat(&isolated.address, "sk-warm");
    row("pack host: idle", "/healthz", probe(&isolated.address));
    let hosts = children(isolated.pid());
    let probes = while_waiting(
        &isolated,
        8,
        || signal("-STOP", &hosts),
        || signal("-CONT", &hosts),
    );
    row("pack host: hung, 8 requests waiting", "/healthz", probes);
    let done = AtomicBool::new(false);
    let probes = std::thread::scope(|scope| {
        let (address, pid, done) = (&isolated.address, isolated.pid(), &done);
        scope.spawn(move || {
            while !done.load(Ordering::Relaxed) {
                signal("-KILL", &children(pid));
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        for i in 0..4 {
            scope.spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    chat(address, &format!("sk-busy-{i}"));
                }
            });
        }
        let probes = probe(address);
        done.store(true, Ordering::Relaxed);
        probes
    });
    row(
        "pack host: killed every 100 ms, 4 clients",
        "/healthz",
        probes,
    );
    drop(isolated);
}

/// 600 hostile connections, and a normal request of another key.
fn hostile_connections(upstream: &Server) {
    let plain = serve(upstream, &[]);
    let address = plain.address.clone();
    chat(&address, "sk-warm");
    row("hostile: idle", "/healthz", probe(&address));
    let normal = |address: &str| {
        (0..200)
            .map(|_| chat(address, "sk-bystander"))
            .collect::<Vec<_>>()
    };
    row("hostile: idle", "chat, another key", normal(&address));
    let mut held = Vec::new();
    let connect = |head: String, body: &[u8]| {
        let mut stream = TcpStream::connect(&address).expect("the gateway");
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(body);
        stream
    };
    let upload = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: g\r\nauthorization: Bearer sk-upload\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        4 << 20
    );
    let mib = vec![b' '; 1 << 20];
    for _ in 0..200 {
        let mut stream = connect(upload.clone(), b"{\"model\":\"m\",");
        let _ = stream.write_all(&mib);
        held.push(stream);
    }
    for i in 0..200 {
        held.push(connect(
            format!("POST /v1/chat/completions HTTP/1.1\r\nhost: g\r\nx-slow-{i}: a"),
            b"",
        ));
    }
    let streamed = chat_body(true);
    for i in 0..200 {
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: g\r\nauthorization: Bearer sk-reader-{}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            i % 10,
            streamed.len()
        );
        held.push(connect(head, streamed.as_bytes()));
    }
    std::thread::sleep(Duration::from_secs(2));
    row("hostile: 600 connections", "/healthz", probe(&address));
    row(
        "hostile: 600 connections",
        "chat, another key",
        normal(&address),
    );
    println!(
        "\ngateway RSS under the 600 connections: {:.1} MiB",
        plain.rss_mib()
    );
    drop(held);
}
