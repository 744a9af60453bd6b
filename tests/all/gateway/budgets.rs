//! Exact budgets behind `chimera serve` (issue 39): a client that hangs
//! up before its reply's usage arrives is charged what the upstream
//! billed; concurrent requests of one conversation see each other's
//! reservations; `--session-scope key` without client keys refuses to
//! start; and a rate limit shared by two replicas admits exactly its
//! limit. Each in process and, where a store is shared, against a real
//! `redis-server` (skipped, saying so, where it cannot run).

use super::{serve, Gateway};
use chimera_tests::chimera_bin;
use chimera_tests::http::{Reply, Server};
use chimera_tests::redis::RedisServer;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What every reply of [`SlowUpstream`] costs: 50 input and 10 output
/// tokens.
const COST: u64 = 60;

/// A chat-completions upstream that takes its time: a whole reply's head
/// comes `pause` after the request, and its body in two halves `pause`
/// apart; a streamed reply is 30 deltas `pause / 10` apart, then its usage
/// chunk and `[DONE]`. Every reply reports [`COST`] tokens. Each
/// connection is served on a thread of its own.
struct SlowUpstream {
    url: String,
    /// Requests read so far.
    begun: Arc<AtomicUsize>,
}

impl SlowUpstream {
    fn start(pause: Duration) -> SlowUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let begun = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&begun);
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let counted = Arc::clone(&counted);
                std::thread::spawn(move || {
                    let _ = answer(stream, pause, &counted);
                });
            }
        });
        SlowUpstream { url, begun }
    }

    fn begun(&self) -> usize {
        self.begun.load(Ordering::SeqCst)
    }
}

/// Reads one request and answers it as [`SlowUpstream`] says.
fn answer(mut stream: TcpStream, pause: Duration, begun: &AtomicUsize) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        if line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let asked: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    begun.fetch_add(1, Ordering::SeqCst);
    let usage = json!({"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": COST});
    if asked["stream"] == true {
        stream.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        )?;
        let mut events: Vec<String> = (0..30)
            .map(|i| {
                let chunk = json!({"id": "up", "object": "chat.completion.chunk", "model": "m",
                    "choices": [{"index": 0, "delta": {"content": format!("w{i} ")}}]});
                format!("data: {chunk}\n\n")
            })
            .collect();
        let last = json!({"id": "up", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
        events.push(format!("data: {last}\n\n"));
        let billed = json!({"id": "up", "object": "chat.completion.chunk", "model": "m",
            "choices": [], "usage": usage});
        events.push(format!("data: {billed}\n\n"));
        events.push("data: [DONE]\n\n".to_owned());
        for event in events {
            stream.write_all(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes())?;
            stream.flush()?;
            std::thread::sleep(pause / 10);
        }
        return stream.write_all(b"0\r\n\r\n");
    }
    let whole = json!({"id": "up", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "a slow answer"}}],
        "usage": usage})
    .to_string();
    std::thread::sleep(pause);
    let (first, rest) = whole.split_at(whole.len() / 2);
    stream.write_all(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{first}",
            whole.len()
        )
        .as_bytes(),
    )?;
    stream.flush()?;
    std::thread::sleep(pause);
    stream.write_all(rest.as_bytes())
}

/// A gateway in front of `upstream` with `flags` and an audit log (whose
/// lines are written when each exchange has ended, so a test can wait
/// for that).
fn gateway(upstream: &str, flags: &[&str], audit: &Path) -> Gateway {
    let mut command = Command::new(chimera_bin());
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--model", "m"])
        .args(["--upstream", &format!("{upstream}/v1")])
        .args(["--audit", audit.to_str().unwrap()])
        .args(flags);
    super::started(command)
}

/// The requests the audit log at `path` has lines of: the exchanges that
/// have ended.
fn ended(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|line| line["request"].as_str().map(str::to_owned))
        .collect::<BTreeSet<_>>()
        .len()
}

/// Waits until `count` exchanges have ended at the gateway whose audit
/// log is `path`.
fn wait_ended(path: &Path, count: usize) {
    let started = Instant::now();
    while ended(path) < count {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{count} exchanges never ended: {} did",
            ended(path)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The request of one turn of conversation `budgeted`: `stream` or not.
fn request(stream: bool) -> String {
    json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
        .to_string()
}

/// Sends `body` to the chat route of `address` in conversation
/// `session`, and hangs up: for a whole reply as soon as the upstream
/// has the request (so its reply is still coming), for a streamed one
/// after the head and five deltas. The status, when one came first.
fn hang_up(
    address: &str,
    session: &str,
    body: &str,
    stream: bool,
    upstream: &SlowUpstream,
) -> Option<u16> {
    let asked_before = upstream.begun();
    let mut connection = TcpStream::connect(address).unwrap();
    connection
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        connection,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\nx-chimera-session: {session}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    if !stream {
        let started = Instant::now();
        while upstream.begun() == asked_before {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the request never went upstream"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = connection.shutdown(Shutdown::Both);
        return None;
    }
    let mut reader = BufReader::new(connection);
    let mut head = String::new();
    reader.read_line(&mut head).unwrap();
    let status = head.split(' ').nth(1)?.parse().ok();
    if status == Some(200) {
        let mut deltas = 0;
        let mut line = String::new();
        while deltas < 5 && reader.read_line(&mut line).unwrap_or(0) > 0 {
            deltas += usize::from(line.starts_with("data: {"));
            line.clear();
        }
    }
    let _ = reader.get_ref().shutdown(Shutdown::Both);
    status
}

/// Sends `body` in conversation `session` and reads the reply to its
/// end: the status.
fn read_through(address: &str, session: &str, body: &str) -> u16 {
    let header = format!("x-chimera-session: {session}");
    super::exchange_at(address, "POST", "/v1/chat/completions", &[&header], body).0
}

/// The statuses of 8 requests in conversation `session` under a budget of
/// 300 tokens, each reply costing 60: the first five hanging up
/// (`hangs_up`) or reading to the end, the last three reading to the
/// end. Each waits for the one before to have ended at the gateway.
fn eight_requests(flags: &[&str], session: &str, stream: bool, hangs_up: bool) -> Vec<u16> {
    let upstream = SlowUpstream::start(Duration::from_millis(300));
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let mut all = vec!["--pack", r#"token-budget={"max_tokens":300}"#];
    all.extend_from_slice(flags);
    let gateway = gateway(&upstream.url, &all, &audit);
    let body = request(stream);
    let mut statuses = Vec::new();
    for i in 0..8 {
        let status = if hangs_up && i < 5 {
            hang_up(&gateway.address, session, &body, stream, &upstream).unwrap_or(0)
        } else {
            read_through(&gateway.address, session, &body)
        };
        statuses.push(status);
        wait_ended(&audit, i + 1);
    }
    statuses
}

/// The hang-up attack, `stream`ed or whole, with `flags`: the budget
/// trips at the very request it trips at for a client that reads every
/// reply to its end.
fn hanging_up_trips_the_budget_as_reading_does(flags: &[&str], stream: bool) {
    let reading = eight_requests(flags, &format!("reading-{stream}"), stream, false);
    assert_eq!(
        reading,
        [200, 200, 200, 200, 200, 403, 403, 403],
        "five replies spend the 300 tokens"
    );
    let leaving = eight_requests(flags, &format!("leaving-{stream}"), stream, true);
    assert_eq!(
        leaving[5..],
        reading[5..],
        "the replies the client left were charged: {leaving:?}"
    );
}

#[test]
fn a_client_that_hangs_up_on_a_whole_reply_is_charged_what_it_cost() {
    hanging_up_trips_the_budget_as_reading_does(&[], false);
}

#[test]
fn a_client_that_hangs_up_mid_stream_is_charged_what_it_cost() {
    hanging_up_trips_the_budget_as_reading_does(&[], true);
}

#[test]
fn a_client_that_hangs_up_is_charged_what_it_cost_in_a_shared_store() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let url = redis.url();
    for stream in [false, true] {
        hanging_up_trips_the_budget_as_reading_does(&["--state-redis", &url], stream);
    }
}

/// 40 requests of one conversation sent at once to `gateways` in turn
/// (their upstream answering each after a while, so all are under way
/// together) under a budget of 1000 tokens, each estimated at — and
/// costing — 60: what went upstream stays within the budget and one
/// estimate.
fn forty_at_once_stay_within_the_budget(flags: &[&str], replicas: usize) {
    let upstream = SlowUpstream::start(Duration::from_millis(200));
    let dir = tempfile::tempdir().unwrap();
    // 200 characters / 4 × 1.0 = 50 input tokens, and max_tokens 10.
    let budget = r#"token-budget={"max_tokens":1000,"estimate_factor":1.0}"#;
    let mut all = vec!["--pack", budget];
    all.extend_from_slice(flags);
    let gateways: Vec<Gateway> = (0..replicas)
        .map(|i| gateway(&upstream.url, &all, &dir.path().join(format!("audit{i}"))))
        .collect();
    let body = json!({"model": "m", "max_tokens": 10,
        "messages": [{"role": "user", "content": "x".repeat(200)}]})
    .to_string();
    let statuses = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for i in 0..40 {
            let (address, body, statuses) = (&gateways[i % replicas].address, &body, &statuses);
            scope.spawn(move || {
                let status = read_through(address, "crowded", body);
                statuses.lock().unwrap().push(status);
            });
        }
    });
    let statuses = statuses.into_inner().unwrap();
    let sent = upstream.begun();
    let passed = statuses.iter().filter(|&&s| s == 200).count();
    assert!(
        statuses.iter().all(|&s| s == 200 || s == 403),
        "{statuses:?}"
    );
    assert_eq!(passed, sent, "every request that passed went upstream");
    let billed = sent as u64 * COST;
    assert!(
        billed <= 1000 + COST,
        "{sent} requests went upstream: {billed} tokens billed on a budget of 1000"
    );
    // Reservations are given back or settled: the budget is not spent on
    // what was refused, so about as many pass as fit.
    assert!(sent >= 1000 / COST as usize / 2, "{statuses:?}");
}

#[test]
fn forty_concurrent_requests_of_one_conversation_stay_within_the_budget() {
    forty_at_once_stay_within_the_budget(&[], 1);
}

#[test]
fn forty_concurrent_requests_of_one_conversation_stay_within_a_shared_budget() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let url = redis.url();
    forty_at_once_stay_within_the_budget(&["--state-redis", &url], 2);
}

#[test]
fn session_scope_key_without_client_keys_refuses_to_start_in_one_line() {
    let upstream = Server::start(vec![Reply::Model(vec!["ok".into()], Duration::ZERO)]);
    let mut child = Command::new(chimera_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--model", "m"])
        .args(["--upstream", &format!("{}/v1", upstream.url)])
        .args(["--session-scope", "key"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("serve started with --session-scope key and no client keys");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(2), "a usage error: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("--session-scope key needs client keys (--client-key-sha256)"),
        "{stderr}"
    );
    // With a client key it starts, and the key is one budget.
    let hash = chimera_host::gateway::key_hash("sk-one");
    let keyed = serve(
        &upstream,
        &["--session-scope", "key", "--client-key-sha256", &hash],
    );
    let (status, _) = super::chat_with(
        &keyed,
        &["authorization: Bearer sk-one"],
        &super::user("hi"),
    );
    assert_eq!(status, 200);
}

/// One chat request to `address` with `timeout` to answer: its status, or
/// `None` when none came in time.
fn status_within(address: &str, timeout: Duration) -> Option<u16> {
    let mut connection = TcpStream::connect(address).ok()?;
    connection.set_read_timeout(Some(timeout)).ok()?;
    let body = super::user("hi").to_string();
    write!(
        connection,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut head = String::new();
    BufReader::new(connection).read_line(&mut head).ok()?;
    head.split(' ').nth(1)?.parse().ok()
}

#[test]
fn a_rate_limit_shared_by_two_replicas_admits_exactly_its_limit_of_200_requests() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let upstream = Server::start_concurrent(vec![Reply::Model(vec!["ok".into()], Duration::ZERO)]);
    let url = redis.url();
    // Ten a minute, shared. 20 clients send 10 requests each, 1.5 s apart,
    // to the two replicas in turn: 200 requests over 15 s. Of those
    // answered within the minute, exactly ten went upstream, whichever
    // replica they reached; the rest waited for a slot or were told to
    // retry. (A bucket of ten refilled over the minute let one more
    // through every 6 s.)
    let window = Duration::from_secs(60);
    let limit = r#"rate-limiter={"requests_per_minute":10,"window_seconds":60}"#;
    let shared = [
        serve(&upstream, &["--pack", limit, "--state-redis", &url]),
        serve(&upstream, &["--pack", limit, "--state-redis", &url]),
    ];
    let started = Instant::now();
    let answers = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for client in 0..20 {
            let (shared, answers) = (&shared, &answers);
            scope.spawn(move || {
                for request in 0..10 {
                    let address = &shared[(client + request) % 2].address;
                    let status = status_within(address, Duration::from_secs(10));
                    answers.lock().unwrap().push((status, started.elapsed()));
                    std::thread::sleep(Duration::from_millis(1500));
                }
            });
        }
    });
    let answers = answers.into_inner().unwrap();
    assert_eq!(answers.len(), 200);
    let admitted = |within: Duration| {
        answers
            .iter()
            .filter(|(status, at)| *status == Some(200) && *at < within)
            .count()
    };
    // An answer within the window was admitted within it.
    assert_eq!(admitted(window), 10, "{answers:?}");
    assert_eq!(
        upstream.requests().len(),
        admitted(Duration::MAX),
        "every request admitted went upstream once"
    );
}

/// A gateway serving `gpt-4o` and `gpt-4o-mini` (the host's list prices:
/// $2.50 / $10 and $0.15 / $0.60 a million tokens) in front of
/// `upstream`, with token-budget configured by `budget`.
fn priced(upstream: &Server, budget: &Value) -> Gateway {
    let base = format!("{}/v1", upstream.url);
    let pack = format!("token-budget={budget}");
    super::serve_with(&[
        "--upstream",
        &base,
        "--model",
        "gpt-4o",
        "--model",
        "gpt-4o-mini",
        "--upstream-key-env",
        "GATEWAY_UPSTREAM_KEY",
        "--pack",
        &pack,
    ])
}

/// A request to `model` that may cost 1 000 output tokens.
fn asking(model: &str) -> String {
    json!({"model": model, "max_tokens": 1000, "messages": [{"role": "user", "content": "hi"}]})
        .to_string()
}

#[test]
fn a_dollar_budget_behind_the_gateway_prices_each_call_at_its_models_price() {
    // 1 000 output tokens cost $0.01 at gpt-4o's price and $0.0006 at
    // gpt-4o-mini's: a $0.005 ceiling refuses the first before it goes
    // and lets the second through.
    let upstream = Server::start(vec![Reply::json(json!({
        "id": "up", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}))]);
    let gateway = priced(&upstream, &json!({"ceilings": [{"max_usd": 0.005}]}));
    let (status, _, refused) = super::exchange_with_head(
        &gateway.address,
        "POST",
        "/v1/chat/completions",
        &[],
        &asking("gpt-4o"),
    );
    assert_eq!(status, 403, "{refused}");
    assert!(refused.contains("($0.0100 / $0.0050)"), "{refused}");
    assert!(upstream.requests().is_empty(), "never went upstream");
    let (status, _, answer) = super::exchange_with_head(
        &gateway.address,
        "POST",
        "/v1/chat/completions",
        &[],
        &asking("gpt-4o-mini"),
    );
    assert_eq!(status, 200, "{answer}");
    // Downgraded instead: the call goes to the cheapest other candidate.
    let upstream = Server::start(vec![Reply::json(json!({}))]);
    let gateway = priced(
        &upstream,
        &json!({"on_exceed": "downgrade-model", "downgrade_candidates": ["gpt-4o", "gpt-4o-mini"],
                "ceilings": [{"max_usd": 0.005}]}),
    );
    let _ = super::exchange_with_head(
        &gateway.address,
        "POST",
        "/v1/chat/completions",
        &[],
        &asking("gpt-4o"),
    );
    let sent = upstream.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].json()["model"], "gpt-4o-mini");
}
