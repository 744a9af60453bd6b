//! `chimera serve` side by side with a direct call, with nginx as a plain
//! reverse proxy, and with `LiteLLM`'s proxy: the same loopback upstream,
//! the same requests, one run.
//!
//! The ways to the upstream: (a) direct, (b) nginx as a plain reverse
//! proxy (one process, keep-alive HTTP/1.1 upstream connections, no
//! buffering, no access log; Debian's package, installed on the first
//! run; skipped in one line when it cannot be had), (c) `chimera serve`
//! with no packs, (d) `chimera serve` with the twelve gates and the three
//! packs, streamed replies held whole until judged (`--stream-policy
//! downgrade`, the default), (e) the same with `--stream-policy allow`
//! (streamed replies stream, the verdict appended; asked streamed
//! requests only: the policy changes nothing else), (f) `LiteLLM`'s proxy
//! (from the Python package index, into `target/bench-venv`, installed on
//! the first run; skipped in one line when it cannot be had) with its
//! built-in content filter on the request and the reply. At each request
//! rate of a ladder, each way is driven open-loop for a few seconds (a
//! request is sent on schedule whether or not earlier ones have
//! answered), in three windows interleaved with the other ways' so all
//! see the same machine; once with JSON replies, once streamed (a
//! request's latency is then to the stream's end; the time to its first
//! text is kept too). The overhead of a gateway is its latency percentile
//! minus the direct one at the same rate; chimera's overhead p50 is also
//! given as a multiple of nginx's. Then: time to the first streamed byte
//! (and, through every pack, of a slow stream, events 300 ms apart: proof
//! that `allow` streams), and each gateway's resident memory idle and at
//! 1 000 concurrent streams.
//!
//! One file past 700 lines on purpose: the upstream, the ways, the load
//! generator and the report are one script read top to bottom.
//!
//! Run: `cargo bench -p chimera-tests --bench gateway` (add `-- quick`
//! for a short ladder). With `-- wires` it measures each wire side by
//! side instead (chat completions and Responses, JSON and streamed):
//! direct, nginx, chimera with no pack and with every pack. With
//! `-- profile` it drives one chimera (or, with `nginx`, the baseline)
//! at 1000/s (`rate=N` to change it) for 20 s for a profiler (see
//! [`profile`]). It prints Markdown tables at the end. With
//! `-- rss` it measures only memory: each gateway idle and at 1 000 slow
//! streams, and so per stream (and every pack from fifteen files beside
//! every pack from the one library). Every pack is served from the shipped
//! packs' one library (`libchimera_packs`), the way to serve them all. With `-- state` it measures instead the
//! gates that count (token-budget, rate-limiter, endless-loop) in this
//! process against the same gates in a real `redis-server`, and the Redis
//! round trips each request costs. The bench raises its own open-file
//! limit first where it may ([`raise_open_files`]).

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
use chimera_host::plugins::platform::library_file_name;
use chimera_tests::nginx::Nginx;
use chimera_tests::serve::{rss_mib, Served};
use chimera_tests::{artifact_dir, chimera_bin, workspace_root, SHIPPED_PACKS};
use serde_json::{json, Value};
use std::future::Future as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
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

/// The wire a ladder's requests speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    /// `POST /v1/chat/completions`.
    Chat,
    /// `POST /v1/responses`.
    Responses,
}

impl Wire {
    /// Its name in the report.
    fn name(self) -> &'static str {
        match self {
            Wire::Chat => "chat completions",
            Wire::Responses => "responses",
        }
    }

    /// Its endpoint under a base URL (`…/v1`).
    fn path(self) -> &'static str {
        match self {
            Wire::Chat => "/chat/completions",
            Wire::Responses => "/responses",
        }
    }

    /// The same short conversation ([`request`]) in its shape.
    fn request(self, model: &str, stream: bool) -> Value {
        let chat = request(model, stream);
        match self {
            Wire::Chat => chat,
            Wire::Responses => json!({
                "model": model,
                "stream": stream,
                "instructions": chat["messages"][0]["content"],
                "input": [{"role": "user", "content": chat["messages"][1]["content"]}],
            }),
        }
    }
}

// ---------------------------------------------------------------- upstream

/// The loopback upstream's Responses endpoint (model `fast` only): the
/// same answer as [`upstream`]'s, as one `response`, or streamed in the
/// same number of text deltas.
async fn upstream_responses(body: axum::body::Bytes) -> Response {
    use chimera_tests::responses::{events_in, message, response};
    let asked: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = asked["model"].as_str().unwrap_or("fast");
    if asked["stream"] != json!(true) {
        let reply = response(model, &[message("msg_up", ANSWER)], "completed");
        return Response::builder()
            .header("content-type", "application/json")
            .body(Body::from(reply.to_string()))
            .unwrap_or_default();
    }
    let text: String = std::iter::once("{\"status\":\"".to_owned())
        .chain((0..20).map(|i| format!("w{i} ")))
        .chain(std::iter::once("\"}".to_owned()))
        .collect();
    let events = events_in(model, &[message("msg_up", &text)], 22);
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(Paced {
            events: events.into_iter(),
            pace: Duration::ZERO,
            sleep: None,
            first: true,
        }))
        .unwrap_or_default()
}

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
    let app = Router::new()
        .route("/v1/chat/completions", post(upstream))
        .route("/v1/responses", post(upstream_responses));
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
/// for chimera the process itself (`LiteLLM`'s is a plain child, nginx's
/// its own handle).
struct Process {
    base: String,
    served: Option<Served>,
    child: Option<Child>,
    nginx: Option<Nginx>,
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
    /// Its process id (0 for none).
    fn pid(&self) -> u32 {
        match (&self.served, &self.child, &self.nginx) {
            (Some(served), _, _) => served.pid(),
            (None, Some(child), _) => child.id(),
            (None, None, Some(nginx)) => nginx.pid(),
            (None, None, None) => 0,
        }
    }

    /// Its resident memory, in MiB.
    fn rss_mib(&self) -> f64 {
        match self.pid() {
            0 => 0.0,
            pid => rss_mib(pid),
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

/// `chimera serve` in front of `upstream` with `packs`, from the shipped
/// packs' one library.
fn chimera(upstream: &str, packs: &[String]) -> Process {
    chimera_with(upstream, packs, &[])
}

/// [`chimera`] with `extra` flags.
fn chimera_with(upstream: &str, packs: &[String], extra: &[&str]) -> Process {
    let dir = one_library_dir().display().to_string();
    let mut from_the_library = vec!["--plugins-dir", dir.as_str()];
    from_the_library.extend(extra);
    chimera_from(upstream, packs, &from_the_library)
}

/// A directory holding only the shipped packs' one library
/// (`libchimera_packs`, built beside the binary): how every pack is served,
/// from one sealed copy instead of fifteen.
fn one_library_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let file = library_file_name("chimera-packs");
        let dir = artifact_dir().join("bench-one-library");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the one library's directory");
        std::fs::copy(chimera_bin().with_file_name(&file), dir.join(&file))
            .expect("the one library, built beside the binary");
        dir
    })
}

/// `chimera serve` in front of `upstream` with `packs` found by the
/// binary's search path (beside it, each pack's own file) and `extra` flags.
fn chimera_from(upstream: &str, packs: &[String], extra: &[&str]) -> Process {
    let mut args = vec![
        "--model",
        "fast",
        "--model",
        "slow",
        "--concurrency",
        "4096",
        // Every request of the load generator is one client (one key):
        // the per-key bounds sized for it, as for a gateway in front of
        // one busy application.
        "--key-concurrency",
        "4096",
        "--key-buffer-cap",
        "67108864",
        "--buffer-cap",
        "67108864",
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
        nginx: None,
    }
}

/// nginx as a plain reverse proxy in front of `upstream`; `None` (said in
/// one line) when it cannot be installed or started.
fn nginx(upstream: &str) -> Option<Process> {
    let address = upstream
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_default();
    match Nginx::start(address) {
        Ok(nginx) => {
            eprintln!("nginx: {} on port {}", nginx.version, nginx.port);
            Some(Process {
                base: format!("{}/v1", nginx.url()),
                served: None,
                child: None,
                nginx: Some(nginx),
            })
        }
        Err(why) => {
            println!("nginx: skipped ({why})");
            None
        }
    }
}

/// `LiteLLM`'s proxy in front of `upstream`, with its built-in content
/// filter on requests and replies; `None` (said in one line) when it
/// cannot be installed or started.
fn litellm(upstream: &str) -> Option<Process> {
    // Beside the build (`target/bench-venv`), wherever CARGO_TARGET_DIR puts it.
    let venv = artifact_dir()
        .parent()
        .map_or_else(|| workspace_root().join("target"), Path::to_owned)
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
        nginx: None,
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
    /// Latencies of the requests answered 200 (to the reply's end), sorted.
    latencies: Vec<Duration>,
    /// Streamed: the times to each stream's first text, sorted (empty
    /// for JSON replies).
    firsts: Vec<Duration>,
    /// Requests that failed or were not answered 200.
    errors: u64,
    /// Why they failed (`status 429`, or the innermost transport error),
    /// and how often.
    why: std::collections::BTreeMap<String, u64>,
    /// The rate actually sent.
    achieved: f64,
}

/// Percentile `p` of `sorted`; `Duration::MAX` when it is empty.
fn percentile_of(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::MAX;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

impl Run {
    /// Adds `other`, a later window at the same rate, to this run (its
    /// latencies pooled, its rate averaged over the windows).
    fn absorb(&mut self, other: Run) {
        let before = (self.latencies.len() + self.errors as usize) as f64;
        let now = (other.latencies.len() + other.errors as usize) as f64;
        self.achieved = if before == 0.0 {
            other.achieved
        } else {
            (self.achieved * before + other.achieved * now) / (before + now).max(1.0)
        };
        self.latencies.extend(other.latencies);
        self.latencies.sort_unstable();
        self.firsts.extend(other.firsts);
        self.firsts.sort_unstable();
        self.errors += other.errors;
        for (why, n) in other.why {
            *self.why.entry(why).or_default() += n;
        }
    }

    /// Percentile `p` of the latencies (to the reply's end).
    fn percentile(&self, p: f64) -> Duration {
        percentile_of(&self.latencies, p)
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

/// One request (streamed when `stream`, read to its end): its latency
/// and the time to its first text (zero for JSON) when answered 200
/// (streamed: with text in it); else why not.
async fn timed(
    client: &reqwest::Client,
    url: &str,
    body: &str,
    stream: bool,
) -> Result<(Duration, Duration), String> {
    let sent = Instant::now();
    let mut response = keyed_post(client, url, body.to_owned())
        .send()
        .await
        .map_err(|e| innermost(&e))?;
    let status = response.status().as_u16();
    if status != 200 || !stream {
        response.bytes().await.map_err(|e| innermost(&e))?;
        return if status == 200 {
            Ok((sent.elapsed(), Duration::ZERO))
        } else {
            Err(format!("status {status}"))
        };
    }
    let mut seen = Vec::with_capacity(4096);
    let mut first = None;
    let mut scanned = 0;
    while let Some(chunk) = response.chunk().await.map_err(|e| innermost(&e))? {
        seen.extend_from_slice(&chunk);
        if first.is_none() {
            if text_from(&seen, scanned) {
                first = Some(sent.elapsed());
            }
            // A pattern cut by a chunk's end is scanned again whole.
            scanned = seen.len().saturating_sub(32);
        }
    }
    let first = first.ok_or_else(|| "a stream with no text".to_owned())?;
    Ok((sent.elapsed(), first))
}

/// The innermost cause of `error` (e.g. `Too many open files (os error
/// 24)`), which names what failed better than reqwest's own line.
fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// Whether `seen` holds, starting at or after byte `from`, the first text
/// of a stream of either wire (a cheap scan, for the load generator;
/// [`carries_text`] parses).
fn text_from(seen: &[u8], from: usize) -> bool {
    text_after(seen, from, b"\"content\"") || text_after(seen, from, b"\"delta\"")
}

/// Whether `seen` holds, at or after byte `from`, member `key` whose
/// value is a string that is not empty (a chat chunk's `content`; a
/// Responses text event's `delta`: a chat chunk's `delta` is an object).
fn text_after(seen: &[u8], from: usize, key: &[u8]) -> bool {
    let mut at = from;
    while let Some(found) = seen[at..].windows(key.len()).position(|w| w == key) {
        let mut rest = seen[at + found + key.len()..]
            .iter()
            .copied()
            .skip_while(u8::is_ascii_whitespace);
        if rest.next() == Some(b':') {
            let mut value = rest.skip_while(u8::is_ascii_whitespace);
            if value.next() == Some(b'"') && value.next().is_some_and(|b| b != b'"') {
                return true;
            }
        }
        at += found + 1;
    }
    false
}

/// `rate` requests a second to `base` for `seconds`, open loop; streamed
/// when `stream`.
async fn at_rate(
    client: &reqwest::Client,
    base: &str,
    rate: u64,
    seconds: f64,
    (wire, stream): (Wire, bool),
) -> Run {
    let url = Arc::new(format!("{base}{}", wire.path()));
    let body = Arc::new(wire.request("fast", stream).to_string());
    let total = (rate as f64 * seconds) as u64;
    let interval = Duration::from_secs_f64(1.0 / rate as f64);
    let started = Instant::now();
    let mut running = Vec::with_capacity(total as usize);
    for i in 0..total {
        let due = started + interval.mul_f64(i as f64);
        tokio::time::sleep_until(due.into()).await;
        let (client, url, body) = (client.clone(), Arc::clone(&url), Arc::clone(&body));
        running.push(tokio::spawn(async move {
            timed(&client, &url, &body, stream).await
        }));
    }
    let sending = started.elapsed().as_secs_f64();
    let mut run = Run {
        achieved: total as f64 / sending.max(1e-9),
        ..Run::default()
    };
    for task in running {
        match task.await.map_err(|e| e.to_string()).and_then(|r| r) {
            Ok((latency, first)) => {
                run.latencies.push(latency);
                if stream {
                    run.firsts.push(first);
                }
            }
            Err(why) => {
                run.errors += 1;
                *run.why.entry(why).or_default() += 1;
            }
        }
    }
    run.latencies.sort_unstable();
    run.firsts.sort_unstable();
    run
}

/// Time to the first streamed text of model `model`'s reply, over `n`
/// requests one at a time; the median.
async fn ttfb(client: &reqwest::Client, base: &str, model: &str, n: usize) -> Option<Duration> {
    let url = format!("{base}/chat/completions");
    let body = request(model, true).to_string();
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

/// How many windows a rung's time is cut into: each way is driven for a
/// third of it, three times over, in turn with the others, and its
/// windows pooled, so a passing disturbance of the machine falls on every
/// way alike rather than on the one measured at that moment.
const ROUNDS: usize = 3;

/// Runs each of `ways` at each of `rates`, interleaved in [`ROUNDS`]
/// windows (streamed when `stream`); a way is not asked a higher rate once
/// it failed to sustain one.
fn ladder(
    runtime: &tokio::runtime::Runtime,
    client: &reqwest::Client,
    ways: &Ways<'_>,
    rates: &[u64],
    seconds: f64,
    stream: bool,
) -> Vec<Vec<Option<Run>>> {
    ladder_on(runtime, client, ways, rates, seconds, (Wire::Chat, stream))
}

/// [`ladder`], its requests on `wire`.
fn ladder_on(
    runtime: &tokio::runtime::Runtime,
    client: &reqwest::Client,
    ways: &Ways<'_>,
    rates: &[u64],
    seconds: f64,
    (wire, stream): (Wire, bool),
) -> Vec<Vec<Option<Run>>> {
    runtime.block_on(async {
        for (_, base) in ways {
            let _ = at_rate(client, base, 20, 1.0, (wire, stream)).await;
        }
    });
    let mut results: Vec<Vec<Option<Run>>> = vec![Vec::new(); ways.len()];
    let mut stopped = vec![false; ways.len()];
    let window = seconds / ROUNDS as f64;
    for &rate in rates {
        let mut runs: Vec<Run> = vec![Run::default(); ways.len()];
        for round in 0..ROUNDS {
            for (index, (name, base)) in ways.iter().enumerate() {
                if stopped[index] {
                    continue;
                }
                let run = runtime.block_on(at_rate(client, base, rate, window, (wire, stream)));
                eprintln!(
                    "{name:>36} @ {rate:>5}/s {}{} ({}/{ROUNDS}): p50 {} ms, p99 {} ms{}, errors {}, sent {:.0}/s",
                    wire.name(),
                    if stream { " streamed" } else { "" },
                    round + 1,
                    ms(run.percentile(0.5)),
                    ms(run.percentile(0.99)),
                    if stream {
                        format!(
                            ", first text p50 {} ms",
                            ms(percentile_of(&run.firsts, 0.5))
                        )
                    } else {
                        String::new()
                    },
                    run.errors,
                    run.achieved
                );
                for (why, n) in &run.why {
                    eprintln!("{:>36}   {n} failed: {why}", "");
                }
                // Let a way that fell behind drain before the next is
                // measured.
                let pause = if run.sustained(rate) { 100 } else { 500 };
                runs[index].absorb(run);
                std::thread::sleep(Duration::from_millis(pause));
            }
        }
        for (index, run) in runs.into_iter().enumerate() {
            if stopped[index] {
                results[index].push(None);
                continue;
            }
            stopped[index] = !run.sustained(rate);
            results[index].push(Some(run));
        }
    }
    results
}

/// Prints one ladder's table (with the first text's p50 when streamed).
fn print_ladder(ways: &Ways<'_>, rates: &[u64], results: &[Vec<Option<Run>>]) {
    let streamed = results
        .iter()
        .flatten()
        .flatten()
        .any(|run| !run.firsts.is_empty());
    let (first_head, first_rule) = if streamed {
        (" first text p50 |", "---|")
    } else {
        ("", "")
    };
    println!("| rate/s | way | p50 | p99 | overhead p50 | overhead p99 |{first_head} errors |");
    println!("|---|---|---|---|---|---|{first_rule}---|");
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
            let first = if streamed {
                format!(" {} |", ms(percentile_of(&run.firsts, 0.5)))
            } else {
                String::new()
            };
            println!(
                "| {rate} | {name}{flag} | {} | {} | {} | {} |{first} {} |",
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
    let results = ladder(runtime, client, &ways, rates, seconds, false);
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

/// Prints, per rate, direct's p50 / p99, nginx's overhead p50 / p99, and
/// each way of `gateways` with its overhead p50 / p99 and that p50 as a
/// multiple of nginx's (`–` where nginx's rounds to nothing or a way did
/// not run; `*` marks a run that was not sustained).
fn print_ratios(
    ways: &Ways<'_>,
    rates: &[u64],
    results: &[Vec<Option<Run>>],
    nginx: usize,
    gateways: &[usize],
) {
    let heads: String = gateways
        .iter()
        .map(|&g| format!(" {}: overhead p50 / p99 | ×nginx p50 |", ways[g].0))
        .collect();
    println!("| rate/s | direct p50 / p99 | nginx: overhead p50 / p99 |{heads}");
    println!("|---|---|---|{}", "---|---|".repeat(gateways.len()));
    for (r, &rate) in rates.iter().enumerate() {
        let pair = |index: usize| match (&results[index][r], overhead(results, index, r, rate)) {
            (Some(run), Some((o50, o99))) => {
                let flag = if run.sustained(rate) { "" } else { "*" };
                (format!("{o50:.3} / {o99:.3}{flag}"), Some(o50))
            }
            _ => ("–".to_owned(), None),
        };
        let direct = results[0][r].as_ref().map_or("–".to_owned(), |run| {
            format!("{} / {}", ms(run.percentile(0.5)), ms(run.percentile(0.99)))
        });
        let (proxy, proxy50) = pair(nginx);
        let cells: String = gateways
            .iter()
            .map(|&g| {
                let (shown, o50) = pair(g);
                let ratio = match (o50, proxy50) {
                    (Some(o), Some(n)) if n >= 0.005 => format!("{:.1}", o / n),
                    _ => "–".to_owned(),
                };
                format!(" {shown} | {ratio} |")
            })
            .collect();
        println!("| {rate} | {direct} | {proxy} |{cells}");
    }
}

/// Each wire side by side (chat completions, Responses), JSON and
/// streamed: direct, nginx as a plain proxy, chimera with no pack and with
/// every pack, interleaved at each rate; chimera's overhead p50 as a
/// multiple of nginx's, per wire.
fn wires(
    runtime: &tokio::runtime::Runtime,
    client: &reqwest::Client,
    upstream: &str,
    rates: &[u64],
    seconds: f64,
) {
    let Some(proxy) = nginx(upstream) else {
        println!("the wires bench compares with nginx, which cannot be had here");
        return;
    };
    let bare = chimera(upstream, &[]);
    let all = chimera(upstream, &all_packs());
    let ways: Vec<(&str, String)> = vec![
        (DIRECT, upstream.to_owned()),
        (NGINX, proxy.base.clone()),
        (BARE, bare.base.clone()),
        (ALL, all.base.clone()),
    ];
    let mut tables = Vec::new();
    for wire in [Wire::Chat, Wire::Responses] {
        for stream in [false, true] {
            let results = ladder_on(runtime, client, &ways, rates, seconds, (wire, stream));
            tables.push((wire, stream, results));
        }
    }
    for (wire, stream, results) in &tables {
        let what = if *stream {
            "streamed, to the stream's end"
        } else {
            "JSON"
        };
        println!(
            "\n### {}, {what}: against nginx (ms; ×nginx = chimera's overhead p50 over nginx's)\n",
            wire.name()
        );
        print_ratios(&ways, rates, results, 1, &[2, 3]);
    }
}

/// One chimera (no pack; every pack with `every-pack`; nginx as a plain
/// proxy instead with `nginx`, the baseline's own cost) driven at 1000
/// requests a second (`rate=N`: N) for 20 s (`streamed`: streamed replies; `responses`:
/// on the Responses wire; `pack=NAME`: that shipped pack alone), its pid
/// printed first, for a profiler to attach (`perf record -g -p PID`).
fn profile(runtime: &tokio::runtime::Runtime, client: &reqwest::Client, upstream: &str) {
    let has = |flag: &str| std::env::args().any(|a| a == flag);
    // `pack=NAME` (any number of times): those of the shipped packs
    // alone, as `every-pack` sets them up (what one pack costs).
    let chosen: Vec<String> = std::env::args()
        .filter_map(|a| a.strip_prefix("pack=").map(str::to_owned))
        .collect();
    let packs = if has("every-pack") {
        all_packs()
    } else {
        all_packs()
            .into_iter()
            .filter(|spec| {
                let name = spec.split_once('=').map_or(spec.as_str(), |(name, _)| name);
                chosen.iter().any(|c| c == name)
            })
            .collect()
    };
    if let Some(unknown) = chosen.iter().find(|c| !SHIPPED_PACKS.contains(&c.as_str())) {
        println!("profile: pack={unknown}: not a shipped pack ({SHIPPED_PACKS:?})");
        return;
    }
    let wire = if has("responses") {
        Wire::Responses
    } else {
        Wire::Chat
    };
    let stream = has("streamed");
    // `rate=N`: requests a second (1000 unless said; a quiet machine's
    // costs, the idle CPUs' wake-ups, show at 100).
    let rate = std::env::args()
        .find_map(|a| a.strip_prefix("rate=").map(str::to_owned))
        .map_or(Ok(1000), |n| n.parse::<u64>())
        .ok()
        .filter(|&n| n > 0);
    let Some(rate) = rate else {
        println!("profile: rate=N takes a whole number of requests a second above 0");
        return;
    };
    let gateway = if has("nginx") {
        let Some(proxy) = nginx(upstream) else {
            println!("profile: nginx cannot be had here");
            return;
        };
        proxy
    } else {
        chimera(upstream, &packs)
    };
    let pid = gateway.pid();
    let name = if has("nginx") { "nginx" } else { "chimera" };
    eprintln!("profile: {name} pid {pid}");
    std::thread::sleep(Duration::from_secs(2));
    let run = runtime.block_on(at_rate(client, &gateway.base, rate, 20.0, (wire, stream)));
    println!(
        "profile: {} {} at {rate}/s: p50 {} ms, p99 {} ms, errors {}",
        wire.name(),
        if stream { "streamed" } else { "JSON" },
        ms(run.percentile(0.5)),
        ms(run.percentile(0.99)),
        run.errors
    );
}

/// A gateway measured for memory: its name and process.
type Gateway<'a> = (&'static str, &'a Process);

/// Prints each of `gateways`' resident memory idle and at `n` slow
/// streams at once, and so per stream (chimera's also where its idle
/// memory lives); returns `(idle, peak, failed)` for each.
fn memory(
    runtime: &tokio::runtime::Runtime,
    client: &reqwest::Client,
    gateways: &[Gateway<'_>],
    n: usize,
) -> Vec<(f64, f64, u64)> {
    let mut measured = Vec::with_capacity(gateways.len());
    for (name, process) in gateways {
        let idle = process.rss_mib();
        // Where the idle memory is: the heap (anonymous), the binary
        // (file), the packs' sealed copies (shared memory).
        if let Some(served) = &process.served {
            let rollup = std::fs::read_to_string(format!("/proc/{}/smaps_rollup", served.pid()))
                .unwrap_or_default();
            for line in rollup.lines().filter(|l| {
                ["Pss_Anon", "Pss_File", "Pss_Shmem"]
                    .iter()
                    .any(|key| l.starts_with(key))
            }) {
                println!("  {name}: idle {line}");
            }
            let (copies, bytes) = sealed_copies(served.pid());
            println!(
                "  {name}: idle sealed copies: {copies} memfds, {:.1} MiB (shared memory, \
                 all of it resident; Pss_Shmem counts only their mapped pages)",
                bytes as f64 / 1_048_576.0
            );
        }
        let (peak, failed) = runtime.block_on(rss_at_streams(client, process, n));
        println!(
            "{name}: RSS idle {idle:.1} MiB, peak at {n} streams {peak:.1} MiB, {:.1} KiB a stream ({failed} failed)",
            per_stream(idle, peak, n)
        );
        if let (Some(nginx), true) = (&process.nginx, failed > 0) {
            for line in nginx.errors(5) {
                println!("  nginx's error log: {line}");
            }
        }
        measured.push((idle, peak, failed));
    }
    measured
}

/// How many sealed in-memory pack copies (memfds) process `pid` holds
/// open, and their bytes in all.
fn sealed_copies(pid: u32) -> (usize, u64) {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return (0, 0);
    };
    fds.flatten()
        .filter(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|target| target.to_string_lossy().starts_with("/memfd:"))
        })
        .filter_map(|fd| std::fs::metadata(fd.path()).ok())
        .fold((0, 0), |(n, bytes), meta| (n + 1, bytes + meta.len()))
}

/// KiB of resident memory a stream costs, from the idle and peak MiB at
/// `n` streams.
fn per_stream(idle: f64, peak: f64, n: usize) -> f64 {
    (peak - idle) * 1024.0 / n as f64
}

/// Way names, shared by the ladders and the tables.
const DIRECT: &str = "direct";
/// nginx as a plain reverse proxy.
const NGINX: &str = "nginx";
/// `chimera serve` with no packs.
const BARE: &str = "chimera, no packs";
/// `chimera serve` with every pack, streamed replies held whole (the default).
const ALL: &str = "chimera, every pack (downgrade)";
/// `chimera serve` with every pack, `--stream-policy allow`.
const ALLOW: &str = "chimera, every pack (allow)";
/// `chimera serve` with every pack, each from its own file.
const ALL_FILES: &str = "chimera, every pack from fifteen files (downgrade)";

/// The load generator's client: keep-alive, up to 4 096 idle connections
/// to a host, each kept idle at most 20 s: under the gateways' own idle
/// limits (chimera's header timeout 30 s, nginx's keep-alive 75 s), so a
/// request is not sent on a connection the gateway is closing as idle
/// (with reqwest's default of 90 s that race can lose a request,
/// "connection closed before message completed", and the bench then
/// drops the way).
fn new_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(4096)
        .pool_idle_timeout(Duration::from_secs(20))
        .build()
        .expect("a client")
}

/// Raises this process's open-file limit (soft and hard) to 262 144 with
/// util-linux's `prlimit`, where it may (as root); the gateways started
/// after inherit it. A gateway that falls behind at the top of the ladder
/// holds thousands of connections, each of them two descriptors here
/// (the load generator's and the upstream's), and a lower limit would
/// fail requests in this process, not in the gateway. Returns the limit
/// now in force.
fn raise_open_files() -> String {
    let pid = std::process::id().to_string();
    let _ = Command::new("prlimit")
        .args(["--pid", &pid, "--nofile=262144:262144"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    std::fs::read_to_string("/proc/self/limits")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .unwrap_or("unknown")
        .to_owned()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    eprintln!("open files: at most {}", raise_open_files());
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
    let client = new_client();
    let streams = if quick { 200 } else { 1000 };
    if std::env::args().any(|a| a == "state") {
        redis_gates(&runtime, &client, &upstream, rates, seconds);
        return;
    }
    if std::env::args().any(|a| a == "profile") {
        profile(&runtime, &client, &upstream);
        return;
    }
    if std::env::args().any(|a| a == "wires") {
        let rates: &[u64] = if quick {
            &[100, 1000]
        } else {
            &[100, 500, 1000, 2000]
        };
        wires(&runtime, &client, &upstream, rates, seconds);
        return;
    }
    let allow_flags = ["--stream-policy", "allow"];
    if std::env::args().any(|a| a == "rss") {
        // Only the memory figures: idle, then at 1 000 slow streams, one
        // gateway at a time.
        let proxy = nginx(&upstream);
        let bare = chimera(&upstream, &[]);
        let all = chimera(&upstream, &all_packs());
        let allow = chimera_with(&upstream, &all_packs(), &allow_flags);
        // Beside them, every pack from its own file, as before the one
        // library.
        let files = chimera_from(&upstream, &all_packs(), &[]);
        let mut gateways = vec![
            (BARE, &bare),
            (ALL, &all),
            (ALLOW, &allow),
            (ALL_FILES, &files),
        ];
        if let Some(proxy) = &proxy {
            gateways.insert(0, (NGINX, proxy));
        }
        let _ = memory(&runtime, &client, &gateways, 1000);
        return;
    }

    // chimera and nginx first, with no LiteLLM process on the machine.
    let proxy = nginx(&upstream);
    let bare = chimera(&upstream, &[]);
    let all = chimera(&upstream, &all_packs());
    let allow = chimera_with(&upstream, &all_packs(), &allow_flags);
    let mut gateways: Vec<Gateway<'_>> = vec![(BARE, &bare), (ALL, &all), (ALLOW, &allow)];
    if let Some(proxy) = &proxy {
        gateways.insert(0, (NGINX, proxy));
    }
    let way = |name: &str| {
        gateways
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| p.base.clone())
            .unwrap_or_default()
    };
    let mut json_ways: Vec<(&str, String)> = vec![(DIRECT, upstream.clone())];
    json_ways.extend(
        gateways
            .iter()
            .filter(|(name, _)| *name != ALLOW)
            .map(|(name, p)| (*name, p.base.clone())),
    );
    // The stream policy changes nothing for a JSON reply: `allow` is asked
    // streamed requests only.
    let mut stream_ways = json_ways.clone();
    stream_ways.push((ALLOW, way(ALLOW)));
    let index = |ways: &[(&str, String)], name: &str| ways.iter().position(|(n, _)| *n == name);
    let json = ladder(&runtime, &client, &json_ways, rates, seconds, false);
    let streamed = ladder(&runtime, &client, &stream_ways, rates, seconds, true);
    let firsts: Vec<Option<Duration>> = stream_ways
        .iter()
        .map(|(_, base)| runtime.block_on(ttfb(&client, base, "fast", 100)))
        .collect();
    // Through every pack, a slow stream (its events 300 ms apart, 4.2 s
    // in all): its first text comes 300 ms in when it streams, at the end
    // when it is held whole.
    let slow_firsts: Vec<(&str, Option<Duration>)> = [DIRECT, ALL, ALLOW]
        .iter()
        .map(|&name| {
            let base = if name == DIRECT {
                upstream.clone()
            } else {
                way(name)
            };
            (name, runtime.block_on(ttfb(&client, &base, "slow", 1)))
        })
        .collect();
    // A new client: the ladders' pooled connections closed first.
    drop(client);
    let client = new_client();
    let memories = memory(&runtime, &client, &gateways, streams);
    let names: Vec<&str> = gateways.iter().map(|(name, _)| *name).collect();
    drop(gateways);
    drop((bare, all, allow, proxy));

    // Then LiteLLM, at the rates it can take, beside direct again.
    let lite = litellm(&upstream);
    let lite_idle = lite.as_ref().map(Process::rss_mib);
    let lite_ways = lite.as_ref().map(|lite| {
        [
            (DIRECT, upstream.clone()),
            ("LiteLLM + content filter", lite.base.clone()),
        ]
    });
    let lite_results = lite_ways
        .as_ref()
        .map(|ways| ladder(&runtime, &client, ways, lite_rates, seconds, false));
    let lite_first = lite
        .as_ref()
        .and_then(|l| runtime.block_on(ttfb(&client, &l.base, "fast", 20)));
    let lite_peak = lite
        .as_ref()
        .map(|l| runtime.block_on(rss_at_streams(&client, l, streams)));

    println!("\n### JSON replies: latency by request rate (ms; overhead = minus direct at the same rate)\n");
    print_ladder(&json_ways, rates, &json);
    println!("\n### Streamed replies: latency to the stream's end by request rate (ms; overhead = minus direct)\n");
    print_ladder(&stream_ways, rates, &streamed);
    if let Some(n) = index(&json_ways, NGINX) {
        for (what, ways, results) in [
            ("JSON", &json_ways, &json),
            ("streamed, to the stream's end", &stream_ways, &streamed),
        ] {
            let chimeras: Vec<usize> = [BARE, ALL, ALLOW]
                .iter()
                .filter_map(|name| index(ways, name))
                .collect();
            println!(
                "\n### Against nginx, {what} (ms; ×nginx = chimera's overhead p50 over nginx's)\n"
            );
            print_ratios(ways, rates, results, n, &chimeras);
        }
    }
    if let (Some(ways), Some(results)) = (&lite_ways, &lite_results) {
        println!("\nLiteLLM, measured after chimera's and nginx's processes stopped:\n");
        print_ladder(ways, lite_rates, results);
    }
    println!("\nFirst text of a slow stream (events 300 ms apart, 4.2 s in all; its first text 300 ms in):");
    for (name, first) in &slow_firsts {
        println!("  {name}: {} ms", first.map_or("–".into(), ms));
    }
    println!("\n### Summary\n");
    println!("| way | JSON: highest rate with p99 overhead < 1 ms | JSON: highest sustained rate | streamed: highest sustained rate | first streamed text, median (ms) | added to direct (ms) | RSS idle (MiB) | RSS peak at {streams} streams (MiB) | KiB a stream | failed streams |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let rate = |r: Option<u64>| r.map_or("–".to_owned(), |r| format!("{r}/s"));
    let direct_first = firsts[0];
    let added = |first: Option<Duration>| match (first, direct_first) {
        (Some(a), Some(b)) => format!("{:.3}", minus(a, b)),
        _ => "–".to_owned(),
    };
    let sustained = |results: &[Vec<Option<Run>>], rates: &[u64], index: usize| {
        highest_under(results, rates, index, f64::INFINITY)
    };
    println!(
        "| direct | – | {} | {} | {} | – | – | – | – | – |",
        rate(sustained(&json, rates, 0)),
        rate(sustained(&streamed, rates, 0)),
        direct_first.map_or("–".into(), ms)
    );
    for (name, (idle, peak, failed)) in names.iter().zip(&memories) {
        let j = index(&json_ways, name);
        let s = index(&stream_ways, name).unwrap_or(0);
        println!(
            "| {name} | {} | {} | {} | {} | {} | {idle:.1} | {peak:.1} | {:.1} | {failed} |",
            rate(j.and_then(|j| highest_under(&json, rates, j, 1.0))),
            rate(j.and_then(|j| sustained(&json, rates, j))),
            rate(sustained(&streamed, rates, s)),
            firsts[s].map_or("–".into(), ms),
            added(firsts[s]),
            per_stream(*idle, *peak, streams),
        );
    }
    if let (Some(lite_runs), Some(idle), Some((peak, failed))) =
        (&lite_results, lite_idle, lite_peak)
    {
        let best = sustained(lite_runs, lite_rates, 1);
        println!(
            "| LiteLLM + content filter | {} | {} | – | {} | {} | {idle:.1} | {peak:.1} | {:.1} | {failed} |",
            rate(highest_under(lite_runs, lite_rates, 1, 1.0)),
            rate(best),
            lite_first.map_or("–".into(), ms),
            added(lite_first),
            per_stream(idle, peak, streams),
        );
        // At equal p99: LiteLLM's p99 overhead at the highest rate it
        // sustained, and the highest rate chimera (all packs) held under it.
        if let (Some(best), Some(all)) = (best, index(&json_ways, ALL)) {
            let r = lite_rates.iter().position(|&x| x == best).unwrap_or(0);
            if let Some((_, bound)) = overhead(lite_runs, 1, r, best) {
                let ours = highest_under(&json, rates, all, bound);
                println!(
                    "\nAt LiteLLM's p99 overhead at {best}/s ({bound:.1} ms), chimera with every pack sustained {} ({}× LiteLLM's rate).",
                    rate(ours),
                    ours.map_or("–".to_owned(), |o| format!("{:.0}", o as f64 / best as f64))
                );
            }
        }
    }
}
