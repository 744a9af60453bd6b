//! `chimera serve` side by side with a direct call and with `LiteLLM`'s
//! proxy: the same loopback upstream, the same requests, one run.
//!
//! Four ways to the upstream: (a) direct, (b) `chimera serve` with no
//! packs, (c) `chimera serve` with the twelve gates and the three packs,
//! (d) `LiteLLM`'s proxy (from the Python package index, into
//! `target/bench-venv`, installed on the first run; skipped in one line when it cannot be had) with its
//! built-in content filter on the request and the reply. At each request
//! rate of a ladder, each way is driven open-loop for a few seconds (a
//! request is sent on schedule whether or not earlier ones have
//! answered), interleaved so all four see the same machine; the overhead
//! of a gateway is its latency percentile minus the direct one at the
//! same rate. Then: time to the first streamed byte, and each gateway's
//! resident memory idle and at 1 000 concurrent streams.
//!
//! One file past 700 lines on purpose: the upstream, the ways, the load
//! generator and the report are one script read top to bottom.
//!
//! Run: `cargo bench -p chimera-tests --bench gateway` (add `-- quick`
//! for a short ladder). It prints a Markdown table at the end. With
//! `-- state` it measures instead the gates that count (token-budget,
//! rate-limiter, endless-loop) in this process against the same gates in
//! a real `redis-server`, and the Redis round trips each request costs.

#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::too_many_lines,
    clippy::format_collect,
    reason = "a benchmark report: rates and durations printed as floats, one linear script"
)]

use axum::body::Body;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use chimera_tests::serve::{rss_mib, Served};
use chimera_tests::{artifact_dir, workspace_root, SHIPPED_PACKS};
use serde_json::{json, Value};
use std::future::Future as _;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The reply every non-streamed request gets (JSON, so `json-schema`
/// passes it).
const ANSWER: &str = r#"{"status":"all clear"}"#;

/// The key every request sends: `LiteLLM`'s master key (it refuses to
/// start without one); `chimera serve` asks for none here.
const KEY: &str = "sk-bench-0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab";

/// What each request asks: a short conversation of ordinary text.
fn request(model: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "stream": stream,
        "messages": [
            {"role": "system", "content": "You are a helpful assistant. Answer in JSON."},
            {"role": "user", "content": "Summarise the deployment notes for the staging cluster: \
              three services were rolled forward, one config map changed, and the on-call \
              engineer confirmed the health checks."}
        ]
    })
}

// ---------------------------------------------------------------- upstream

/// The loopback upstream: model `fast` answers at once (streamed: 20
/// deltas, no pause); model `slow` streams 10 deltas 300 ms apart.
async fn upstream(body: axum::body::Bytes) -> Response {
    let asked: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = asked["model"].as_str().unwrap_or("fast").to_owned();
    if asked["stream"] != json!(true) {
        if model == "slow" {
            // As long as a slow stream takes, so a gateway that asks for
            // the whole reply (a gate without a stream hook) holds it as long.
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        let reply = json!({
            "id": "chatcmpl-up", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": ANSWER}}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48}
        });
        return Response::builder()
            .header("content-type", "application/json")
            .body(Body::from(reply.to_string()))
            .unwrap_or_default();
    }
    let (deltas, pace) = if model == "slow" {
        (10, Duration::from_millis(300))
    } else {
        (20, Duration::ZERO)
    };
    let stream = async_stream(model, deltas, pace);
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap_or_default()
}

/// The events of a streamed reply: `{"status":"`, `w0 `, `w1 `, …, `"}`,
/// then the end.
fn async_stream(
    model: String,
    deltas: usize,
    pace: Duration,
) -> impl futures_core::Stream<Item = Result<String, std::convert::Infallible>> {
    let chunk = move |delta: Value, finish: Value| {
        let event = json!({"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 0,
            "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {event}\n\n")
    };
    let mut events: Vec<String> = Vec::with_capacity(deltas + 3);
    events.push(chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    ));
    // The deltas spell a JSON answer, so `json-schema` passes it too.
    events.push(chunk(json!({"content": "{\"status\":\""}), Value::Null));
    for i in 0..deltas {
        events.push(chunk(json!({"content": format!("w{i} ")}), Value::Null));
    }
    events.push(chunk(json!({"content": "\"}"}), Value::Null));
    events.push(chunk(json!({}), json!("stop")));
    events.push("data: [DONE]\n\n".to_owned());
    Paced {
        events: events.into_iter(),
        pace,
        sleep: None,
        first: true,
    }
}

/// Yields `events`, each `pace` after the one before.
struct Paced {
    events: std::vec::IntoIter<String>,
    pace: Duration,
    sleep: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    first: bool,
}

impl futures_core::Stream for Paced {
    type Item = Result<String, std::convert::Infallible>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        if !self.first && !self.pace.is_zero() {
            let pace = self.pace;
            let sleep = self
                .sleep
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(pace)));
            if sleep.as_mut().poll(cx).is_pending() {
                return std::task::Poll::Pending;
            }
            self.sleep = None;
        }
        self.first = false;
        std::task::Poll::Ready(self.events.next().map(Ok))
    }
}

/// Starts the upstream on `runtime`; its base URL (`…/v1`).
fn start_upstream(runtime: &tokio::runtime::Runtime) -> String {
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind the upstream");
    let address = listener.local_addr().expect("its address");
    let app = Router::new().route("/v1/chat/completions", post(upstream));
    runtime.spawn(async move {
        use axum::serve::ListenerExt as _;
        let listener = listener.tap_io(|stream| {
            let _ = stream.set_nodelay(true);
        });
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{address}/v1")
}

// ---------------------------------------------------------------- the ways

/// A gateway process, killed when dropped: its base URL (`…/v1`), and
/// for chimera the process itself (`LiteLLM`'s is a plain child).
struct Process {
    base: String,
    served: Option<Served>,
    child: Option<Child>,
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Process {
    /// Its resident memory, in MiB.
    fn rss_mib(&self) -> f64 {
        match (&self.served, &self.child) {
            (Some(served), _) => served.rss_mib(),
            (None, Some(child)) => rss_mib(child.id()),
            (None, None) => 0.0,
        }
    }
}

/// The twelve gates and the three packs, each with a configuration that
/// lets an ordinary request through.
fn all_packs() -> Vec<String> {
    let schema = json!({"schema": {"type": "object", "required": ["status"]}});
    SHIPPED_PACKS
        .iter()
        .map(|&pack| match pack {
            "json-schema" => format!("json-schema={schema}"),
            // A rate limit far above the ladder (the default, 60 a minute
            // for the whole process, would pause the bench's requests).
            "rate-limiter" => r#"rate-limiter={"requests_per_minute":100000000}"#.to_owned(),
            other => other.to_owned(),
        })
        .collect()
}

/// `chimera serve` in front of `upstream` with `packs`.
fn chimera(upstream: &str, packs: &[String]) -> Process {
    chimera_with(upstream, packs, &[])
}

/// [`chimera`] with `extra` flags.
fn chimera_with(upstream: &str, packs: &[String], extra: &[&str]) -> Process {
    let mut args = vec![
        "--model",
        "fast",
        "--model",
        "slow",
        "--concurrency",
        "4096",
    ];
    for pack in packs {
        args.extend(["--pack", pack.as_str()]);
    }
    args.extend(extra);
    let served = Served::start(Served::command(upstream, &args), Stdio::null());
    Process {
        base: format!("http://{}/v1", served.address),
        served: Some(served),
        child: None,
    }
}

/// `LiteLLM`'s proxy in front of `upstream`, with its built-in content
/// filter on requests and replies; `None` (said in one line) when it
/// cannot be installed or started.
fn litellm(upstream: &str) -> Option<Process> {
    // Beside the build (`target/bench-venv`), wherever CARGO_TARGET_DIR puts it.
    let venv = artifact_dir()
        .parent()
        .map_or_else(
            || workspace_root().join("target"),
            std::path::Path::to_owned,
        )
        .join("bench-venv");
    let bin = venv.join("bin/litellm");
    if !bin.exists() {
        eprintln!("installing LiteLLM's proxy into {} ...", venv.display());
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .is_ok_and(|s| s.success())
            && Command::new(venv.join("bin/pip"))
                .args(["install", "-q", "litellm[proxy]"])
                .status()
                .is_ok_and(|s| s.success());
        if !made {
            println!("litellm: skipped (pip could not install litellm[proxy])");
            return None;
        }
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .ok()?;
    let dir = tempfile::tempdir().ok()?;
    let config = dir.path().join("litellm.yaml");
    let models: String = ["fast", "slow"]
        .iter()
        .map(|m| {
            format!(
                "  - model_name: {m}\n    litellm_params:\n      model: openai/{m}\n      api_base: {upstream}\n      api_key: bench\n"
            )
        })
        .collect();
    // Comparable checks where LiteLLM has them: secrets and addresses
    // masked on the way in, an SSN blocked; addresses masked on the way out.
    let pattern = |name: &str, action: &str| {
        format!("        - pattern_type: prebuilt\n          pattern_name: {name}\n          action: {action}\n")
    };
    let guardrail = |name: &str, mode: &str, patterns: String| {
        format!("  - guardrail_name: {name}\n    litellm_params:\n      guardrail: litellm_content_filter\n      mode: {mode}\n      default_on: true\n      patterns:\n{patterns}")
    };
    let inbound = [
        ("email", "MASK"),
        ("us_ssn", "BLOCK"),
        ("aws_access_key", "MASK"),
        ("github_token", "MASK"),
        ("generic_api_key", "MASK"),
    ]
    .iter()
    .map(|(name, action)| pattern(name, action))
    .collect::<String>();
    let guardrails = format!(
        "guardrails:\n{}{}",
        guardrail("content-filter-in", "pre_call", inbound),
        guardrail("content-filter-out", "post_call", pattern("email", "MASK"))
    );
    let text = format!(
        "model_list:\n{models}{guardrails}litellm_settings:\n  drop_params: true\n  telemetry: false\n"
    );
    std::fs::write(&config, text).ok()?;
    let log = dir.path().join("litellm.log");
    let child = Command::new(&bin)
        .arg("--config")
        .arg(&config)
        .args(["--port", &port.to_string(), "--host", "127.0.0.1"])
        .env("LITELLM_LOG", "ERROR")
        .env("LITELLM_MASTER_KEY", KEY)
        .env("LITELLM_TELEMETRY", "False")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).ok()?)
        .spawn()
        .ok()?;
    let mut process = Process {
        base: format!("http://127.0.0.1:{port}/v1"),
        served: None,
        child: Some(child),
    };
    let started = Instant::now();
    let probe = format!("http://127.0.0.1:{port}/health/liveliness");
    while started.elapsed() < Duration::from_secs(180) {
        if let Some(Ok(Some(status))) = process.child.as_mut().map(Child::try_wait) {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            let last = said
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            println!("litellm: skipped (the proxy exited, {status}: {last})");
            return None;
        }
        if answers_ok(&probe) {
            // Kept until the process is done with its config.
            std::mem::forget(dir);
            return Some(process);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    println!("litellm: skipped (the proxy did not answer {probe} within 180 s)");
    None
}

/// `true` when `url` (plain `http://`) answers 200: a blocking probe over
/// TCP, for a server that is starting.
fn answers_ok(url: &str) -> bool {
    use std::io::{Read, Write};
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let Ok(mut stream) = std::net::TcpStream::connect(host) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request = format!("GET /{path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.ends_with(b"200")
}

// ---------------------------------------------------------------- load

/// One run at one rate.
#[derive(Debug, Clone, Default)]
struct Run {
    /// Latencies of the requests answered 200, sorted.
    latencies: Vec<Duration>,
    /// Requests that failed or were not answered 200.
    errors: u64,
    /// The rate actually sent.
    achieved: f64,
}

impl Run {
    fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::MAX;
        }
        let index = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies[index]
    }

    /// Sent at 95 % of the rate asked, nearly every request answered, and a
    /// p99 under half a second.
    fn sustained(&self, rate: u64) -> bool {
        let sent = self.latencies.len() as u64 + self.errors;
        self.achieved >= rate as f64 * 0.95
            && self.errors * 1000 <= sent
            && self.percentile(0.99) < Duration::from_millis(500)
    }
}

/// A POST of JSON `body` to `url`, with the bench's key.
fn keyed_post(client: &reqwest::Client, url: &str, body: String) -> reqwest::RequestBuilder {
    client
        .post(url)
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {KEY}"))
        .body(body)
}

/// One non-streamed request; its latency when answered 200.
async fn one(client: &reqwest::Client, url: &str, body: &str) -> Option<Duration> {
    let sent = Instant::now();
    let response = keyed_post(client, url, body.to_owned()).send().await.ok()?;
    let ok = response.status().as_u16() == 200;
    let _ = response.bytes().await.ok()?;
    ok.then(|| sent.elapsed())
}

/// `rate` requests a second to `base` for `seconds`, open loop.
async fn at_rate(client: &reqwest::Client, base: &str, rate: u64, seconds: f64) -> Run {
    let url = Arc::new(format!("{base}/chat/completions"));
    let body = Arc::new(request("fast", false).to_string());
    let total = (rate as f64 * seconds) as u64;
    let interval = Duration::from_secs_f64(1.0 / rate as f64);
    let started = Instant::now();
    let mut running = Vec::with_capacity(total as usize);
    for i in 0..total {
        let due = started + interval.mul_f64(i as f64);
        tokio::time::sleep_until(due.into()).await;
        let (client, url, body) = (client.clone(), Arc::clone(&url), Arc::clone(&body));
        running.push(tokio::spawn(async move { one(&client, &url, &body).await }));
    }
    let sending = started.elapsed().as_secs_f64();
    let mut run = Run {
        achieved: total as f64 / sending.max(1e-9),
        ..Run::default()
    };
    for task in running {
        match task.await.ok().flatten() {
            Some(latency) => run.latencies.push(latency),
            None => run.errors += 1,
        }
    }
    run.latencies.sort_unstable();
    run
}

/// Time to the first streamed text, over `n` requests one at a
/// time; the median.
async fn ttfb(client: &reqwest::Client, base: &str, n: usize) -> Option<Duration> {
    let url = format!("{base}/chat/completions");
    let body = request("fast", true).to_string();
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let sent = Instant::now();
        let mut response = keyed_post(client, &url, body.clone()).send().await.ok()?;
        let mut seen = Vec::new();
        let mut first = None;
        while let Ok(Some(chunk)) = response.chunk().await {
            seen.extend_from_slice(&chunk);
            if first.is_none() && carries_text(&seen) {
                first = Some(sent.elapsed());
            }
        }
        times.push(first?);
    }
    times.sort_unstable();
    Some(times[times.len() / 2])
}

/// Whether the event-stream bytes `seen` hold a chunk with text in it
/// (its first `delta.content` that is not empty).
fn carries_text(seen: &[u8]) -> bool {
    String::from_utf8_lossy(seen)
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .any(|chunk| {
            chunk["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|text| !text.is_empty())
        })
}

/// The peak resident memory of `process` while `n` slow streams run at
/// once through it, and how many of them failed.
async fn rss_at_streams(client: &reqwest::Client, process: &Process, n: usize) -> (f64, u64) {
    let url = Arc::new(format!("{}/chat/completions", process.base));
    let body = Arc::new(request("slow", true).to_string());
    let failed = Arc::new(AtomicU64::new(0));
    let mut running = Vec::with_capacity(n);
    for _ in 0..n {
        let (client, url, body, failed) = (
            client.clone(),
            Arc::clone(&url),
            Arc::clone(&body),
            Arc::clone(&failed),
        );
        running.push(tokio::spawn(async move {
            let ok = async {
                let mut response = keyed_post(&client, url.as_str(), body.as_str().to_owned())
                    .send()
                    .await
                    .ok()?;
                if response.status().as_u16() != 200 {
                    return None;
                }
                let mut seen = 0usize;
                while let Ok(Some(chunk)) = response.chunk().await {
                    seen += chunk.len();
                }
                (seen > 0).then_some(())
            }
            .await;
            if ok.is_none() {
                failed.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let mut peak = 0.0_f64;
    while running.iter().any(|t| !t.is_finished()) {
        peak = peak.max(process.rss_mib());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for task in running {
        let _ = task.await;
    }
    (peak, failed.load(Ordering::Relaxed))
}

// ---------------------------------------------------------------- report

fn ms(d: Duration) -> String {
    if d == Duration::MAX {
        return "–".to_owned();
    }
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

/// `a - b` in ms, signed.
fn minus(a: Duration, b: Duration) -> f64 {
    if a == Duration::MAX || b == Duration::MAX {
        return f64::NAN;
    }
    a.as_secs_f64() * 1000.0 - b.as_secs_f64() * 1000.0
}

/// The ways of one ladder, by name and base URL (the first is direct).
type Ways<'a> = [(&'a str, String)];

/// Runs each of `ways` at each of `rates`, interleaved; a way is not asked
/// a higher rate once it failed to sustain one.
fn ladder(
    runtime: &tokio::runtime::Runtime,
    client: &reqwest::Client,
    ways: &Ways<'_>,
    rates: &[u64],
    seconds: f64,
) -> Vec<Vec<Option<Run>>> {
    runtime.block_on(async {
        for (_, base) in ways {
            let _ = at_rate(client, base, 20, 1.0).await;
        }
    });
    let mut results: Vec<Vec<Option<Run>>> = vec![Vec::new(); ways.len()];
    let mut stopped = vec![false; ways.len()];
    for &rate in rates {
        for (index, (name, base)) in ways.iter().enumerate() {
            if stopped[index] {
                results[index].push(None);
                continue;
            }
            let run = runtime.block_on(at_rate(client, base, rate, seconds));
            eprintln!(
                "{name:>28} @ {rate:>5}/s: p50 {} ms, p99 {} ms, errors {}, sent {:.0}/s",
                ms(run.percentile(0.5)),
                ms(run.percentile(0.99)),
                run.errors,
                run.achieved
            );
            stopped[index] = !run.sustained(rate);
            results[index].push(Some(run));
            // Let a way that fell behind drain before the next is measured.
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    results
}

/// Prints one ladder's table.
fn print_ladder(ways: &Ways<'_>, rates: &[u64], results: &[Vec<Option<Run>>]) {
    println!("| rate/s | way | p50 | p99 | overhead p50 | overhead p99 | errors |");
    println!("|---|---|---|---|---|---|---|");
    for (r, &rate) in rates.iter().enumerate() {
        for (index, (name, _)) in ways.iter().enumerate() {
            let Some(run) = &results[index][r] else {
                println!("| {rate} | {name} | not sustained at a lower rate | | | | |");
                continue;
            };
            let (o50, o99) = overhead(results, index, r, rate).unwrap_or((f64::NAN, f64::NAN));
            let flag = if run.sustained(rate) {
                ""
            } else {
                " (not sustained)"
            };
            let shown = |o: f64| {
                if index == 0 {
                    "–".to_owned()
                } else {
                    format!("{o:.3}")
                }
            };
            println!(
                "| {rate} | {name}{flag} | {} | {} | {} | {} | {} |",
                ms(run.percentile(0.5)),
                ms(run.percentile(0.99)),
                shown(o50),
                shown(o99),
                run.errors
            );
        }
    }
}

/// Way `index`'s overhead p50 and p99 over the direct way at rate number
/// `r`, when both ran.
fn overhead(
    results: &[Vec<Option<Run>>],
    index: usize,
    r: usize,
    _rate: u64,
) -> Option<(f64, f64)> {
    let (Some(run), Some(direct)) = (&results[index][r], &results[0][r]) else {
        return None;
    };
    Some((
        minus(run.percentile(0.5), direct.percentile(0.5)),
        minus(run.percentile(0.99), direct.percentile(0.99)),
    ))
}

/// The highest rate way `index` sustained with a p99 overhead under `bound` ms.
fn highest_under(
    results: &[Vec<Option<Run>>],
    rates: &[u64],
    index: usize,
    bound: f64,
) -> Option<u64> {
    rates
        .iter()
        .enumerate()
        .filter(|(r, rate)| {
            results[index][*r]
                .as_ref()
                .is_some_and(|run| run.sustained(**rate))
                && overhead(results, index, *r, **rate).is_some_and(|(_, o99)| o99 < bound)
        })
        .map(|(_, rate)| *rate)
        .max()
}

/// `-- state`: the gates that count (token-budget, rate-limiter,
/// endless-loop) in this process and in a real `redis-server` on
/// loopback, beside direct, on one ladder; then how many Redis round trips
/// a request costs.
fn redis_gates(
    runtime: &tokio::runtime::Runtime,
    client: &reqwest::Client,
    upstream: &str,
    rates: &[u64],
    seconds: f64,
) {
    let Some(redis) = chimera_tests::redis::RedisServer::start() else {
        println!("redis-server is not installed: nothing to measure (.ci/run installs it)");
        return;
    };
    // Limits far above the ladder: every request goes through, and
    // every request is counted.
    let gates = [
        r#"token-budget={"max_tokens":1000000000000000}"#.to_owned(),
        r#"rate-limiter={"requests_per_minute":100000000}"#.to_owned(),
        r#"endless-loop={"max_iterations":100000000}"#.to_owned(),
    ];
    let url = redis.url();
    let local = chimera(upstream, &gates);
    let shared = chimera_with(upstream, &gates, &["--state-redis", &url]);
    let ways = [
        ("direct", upstream.to_owned()),
        ("three counting gates, in process", local.base.clone()),
        ("three counting gates, in redis", shared.base.clone()),
    ];
    let results = ladder(runtime, client, &ways, rates, seconds);
    let n = 500;
    let counters = |base: &str| {
        let metrics = runtime.block_on(async {
            let url = base.trim_end_matches("/v1").to_owned() + "/metrics";
            client.get(url).send().await.ok()?.text().await.ok()
        });
        let read = |name: &str| {
            metrics
                .as_deref()
                .unwrap_or_default()
                .lines()
                .find(|line| line.starts_with(name))
                .and_then(|line| line.rsplit(' ').next())
                .and_then(|value| value.parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        (
            redis.script_calls() as f64,
            read("chimera_state_operations_total"),
            read("chimera_state_unawaited_total"),
        )
    };
    let before = counters(&shared.base);
    runtime.block_on(async {
        let url = format!("{}/chat/completions", shared.base);
        let body = request("fast", false).to_string();
        for _ in 0..n {
            let _ = one(client, &url, &body).await;
        }
    });
    let after = counters(&shared.base);
    let per = |i: usize| {
        let (a, b) = match i {
            0 => (after.0, before.0),
            1 => (after.1, before.1),
            _ => (after.2, before.2),
        };
        (a - b) / f64::from(n)
    };
    println!("\n### Gates that count, in process and in Redis (ms; overhead = minus direct)\n");
    print_ladder(&ways, rates, &results);
    println!(
        "\nPer request, over {n} requests: {:.2} Redis commands (its own count), {:.2} state \
         operations, {:.2} of them adds sent without waiting: {:.2} round trips waited \
         (token-budget: the read before the call, its add after the reply unawaited; \
         rate-limiter: one take; endless-loop: one add, awaited: its total is the verdict).",
        per(0),
        per(1),
        per(2),
        per(1) - per(2)
    );
    for (index, (name, _)) in ways.iter().enumerate().skip(1) {
        println!(
            "{name}: highest sustained rate with p99 overhead < 2 ms: {}",
            highest_under(&results, rates, index, 2.0)
                .map_or("none".to_owned(), |r| format!("{r}/s"))
        );
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let quick = std::env::args().any(|a| a == "quick");
    let rates: &[u64] = if quick {
        &[100, 1000]
    } else {
        &[100, 250, 500, 1000, 2000, 3000]
    };
    let lite_rates: &[u64] = if quick { &[10, 25] } else { &[10, 25, 50, 100] };
    let seconds = if quick { 1.5 } else { 3.0 };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("the bench's runtime");
    let upstream = start_upstream(&runtime);
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(4096)
        .build()
        .expect("a client");
    let streams = if quick { 200 } else { 1000 };
    if std::env::args().any(|a| a == "state") {
        redis_gates(&runtime, &client, &upstream, rates, seconds);
        return;
    }
    if std::env::args().any(|a| a == "rss") {
        // Only the memory figures: idle, then at 1 000 streams.
        for (name, packs) in [
            ("no packs", Vec::new()),
            ("12 gates + 3 packs", all_packs()),
        ] {
            let process = chimera(&upstream, &packs);
            let idle = process.rss_mib();
            // Where the idle memory is: the heap (anonymous), the binary
            // (file), the packs' sealed copies (shared memory).
            if let Some(served) = &process.served {
                let rollup =
                    std::fs::read_to_string(format!("/proc/{}/smaps_rollup", served.pid()))
                        .unwrap_or_default();
                for line in rollup.lines().filter(|l| {
                    ["Pss_Anon", "Pss_File", "Pss_Shmem"]
                        .iter()
                        .any(|key| l.starts_with(key))
                }) {
                    println!("  idle {line}");
                }
            }
            let (peak, failed) = runtime.block_on(rss_at_streams(&client, &process, 1000));
            println!("chimera, {name}: RSS idle {idle:.1} MiB, peak at 1000 streams {peak:.1} MiB ({failed} failed)");
        }
        return;
    }

    // chimera first, with no LiteLLM process on the machine.
    let bare = chimera(&upstream, &[]);
    let all = chimera(&upstream, &all_packs());
    let idle = [bare.rss_mib(), all.rss_mib()];
    let ways = [
        ("direct", upstream.clone()),
        ("chimera, no packs", bare.base.clone()),
        ("chimera, 12 gates + 3 packs", all.base.clone()),
    ];
    let results = ladder(&runtime, &client, &ways, rates, seconds);
    let firsts: Vec<Option<Duration>> = ways
        .iter()
        .map(|(_, base)| runtime.block_on(ttfb(&client, base, 100)))
        .collect();
    let peaks = [
        runtime.block_on(rss_at_streams(&client, &bare, streams)),
        runtime.block_on(rss_at_streams(&client, &all, streams)),
    ];
    drop(bare);
    drop(all);

    // Then LiteLLM, at the rates it can take, beside direct again.
    let lite = litellm(&upstream);
    let lite_idle = lite.as_ref().map(Process::rss_mib);
    let lite_ways = lite.as_ref().map(|lite| {
        [
            ("direct", upstream.clone()),
            ("LiteLLM + content filter", lite.base.clone()),
        ]
    });
    let lite_results = lite_ways
        .as_ref()
        .map(|ways| ladder(&runtime, &client, ways, lite_rates, seconds));
    let lite_first = lite
        .as_ref()
        .and_then(|l| runtime.block_on(ttfb(&client, &l.base, 20)));
    let lite_peak = lite
        .as_ref()
        .map(|l| runtime.block_on(rss_at_streams(&client, l, streams)));

    println!("\n### Latency by request rate (ms; overhead = minus direct at the same rate)\n");
    print_ladder(&ways, rates, &results);
    if let (Some(ways), Some(results)) = (&lite_ways, &lite_results) {
        println!("\nLiteLLM, measured after chimera's processes stopped:\n");
        print_ladder(ways, lite_rates, results);
    }
    println!("\n### Summary\n");
    println!("| way | highest rate with p99 overhead < 1 ms | highest sustained rate | first streamed text, median (ms) | added to direct (ms) | RSS idle (MiB) | RSS peak at {streams} streams (MiB) | failed streams |");
    println!("|---|---|---|---|---|---|---|---|");
    let rate = |r: Option<u64>| r.map_or("none".to_owned(), |r| format!("{r}/s"));
    let added = |first: Option<Duration>| match (first, firsts[0]) {
        (Some(a), Some(b)) => format!("{:.3}", minus(a, b)),
        _ => "–".to_owned(),
    };
    let sustained = |results: &[Vec<Option<Run>>], rates: &[u64], index: usize| {
        highest_under(results, rates, index, f64::INFINITY)
    };
    println!(
        "| direct | – | {} | {} | – | – | – | – |",
        rate(sustained(&results, rates, 0)),
        firsts[0].map_or("–".into(), ms)
    );
    for (index, name) in [(1, ways[1].0), (2, ways[2].0)] {
        let (peak, failed) = peaks[index - 1];
        println!(
            "| {name} | {} | {} | {} | {} | {:.1} | {peak:.1} | {failed} |",
            rate(highest_under(&results, rates, index, 1.0)),
            rate(sustained(&results, rates, index)),
            firsts[index].map_or("–".into(), ms),
            added(firsts[index]),
            idle[index - 1],
        );
    }
    if let (Some(lite_runs), Some(idle), Some((peak, failed))) =
        (&lite_results, lite_idle, lite_peak)
    {
        let best = sustained(lite_runs, lite_rates, 1);
        println!(
            "| LiteLLM + content filter | {} | {} | {} | {} | {idle:.1} | {peak:.1} | {failed} |",
            rate(highest_under(lite_runs, lite_rates, 1, 1.0)),
            rate(best),
            lite_first.map_or("–".into(), ms),
            added(lite_first),
        );
        // At equal p99: LiteLLM's p99 overhead at the highest rate it
        // sustained, and the highest rate chimera (all packs) held under it.
        if let Some(best) = best {
            let r = lite_rates.iter().position(|&x| x == best).unwrap_or(0);
            if let Some((_, bound)) = overhead(lite_runs, 1, r, best) {
                let ours = highest_under(&results, rates, 2, bound);
                println!(
                    "\nAt LiteLLM's p99 overhead at {best}/s ({bound:.1} ms), chimera with every pack sustained {} ({}× LiteLLM's rate).",
                    rate(ours),
                    ours.map_or("–".to_owned(), |o| format!("{:.0}", o as f64 / best as f64))
                );
            }
        }
    }
}
