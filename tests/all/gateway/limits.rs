//! Fair, HTTP-shaped limits through the binary, with raw sockets for
//! the clients that misbehave: a rate limit is a 429 with `retry-after`
//! for its key alone (or a hold without a concurrency slot); half-sent
//! heads, stalled uploads and clients that never read are cut off by
//! their timeouts; request bodies in flight are capped per key and in
//! all; a key's requests in flight are capped; and all of it at once
//! leaves the gateway's memory near idle while another key is served.

use super::{chat_with, exchange_with_head, head_value, serve, serve_messages, user, Gateway};
use chimera_tests::http::{Reply, Responder, Server};
use serde_json::{json, Value};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// `authorization: Bearer NAME`.
fn key(name: &str) -> String {
    format!("authorization: Bearer {name}")
}

/// `body` posted on `path` with `headers`: status, head and body.
fn post(gateway: &Gateway, path: &str, headers: &[&str], body: &Value) -> (u16, String, String) {
    exchange_with_head(&gateway.address, "POST", path, headers, &body.to_string())
}

/// A chat request of `key`'s: its status, head and body.
fn chat_of(gateway: &Gateway, name: &str) -> (u16, String, String) {
    post(gateway, "/v1/chat/completions", &[&key(name)], &user("hi"))
}

/// `retry-after` of a response head, in seconds.
fn retry_after(head: &str) -> u64 {
    head_value(head, "retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no retry-after in {head}"))
}

/// A connection that sent `head` (and `body`), not yet read from.
fn sent(gateway: &Gateway, head: &str, body: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(&gateway.address).unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    stream
}

/// The head of a chat request of `name`'s whose body is `length` bytes.
fn chat_head(name: &str, length: usize) -> String {
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: g\r\ncontent-type: application/json\r\n{}\r\ncontent-length: {length}\r\n\r\n",
        key(name)
    )
}

/// Everything `stream` sends until it ends or `within` passes: the
/// text, and whether it ended (EOF or reset) rather than went quiet.
fn read_until_end(stream: &mut TcpStream, within: Duration) -> (String, bool) {
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buffer = vec![0u8; 1 << 16];
    while started.elapsed() < within {
        match stream.read(&mut buffer) {
            Ok(0) => return (String::from_utf8_lossy(&got).into_owned(), true),
            Ok(n) => got.extend_from_slice(&buffer[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return (String::from_utf8_lossy(&got).into_owned(), true),
        }
    }
    (String::from_utf8_lossy(&got).into_owned(), false)
}

/// A pack argument: rate-limiter with `config`.
fn rate_limiter(config: &Value) -> String {
    format!("rate-limiter={config}")
}

#[test]
fn one_key_over_its_rate_limit_gets_429_with_retry_after_and_other_keys_are_untouched() {
    let upstream = Server::start(vec![Reply::Model(vec!["ok".into()], Duration::ZERO)]);
    let limit = rate_limiter(&json!({"scope": "key", "requests_per_minute": 2}));
    let gateway = serve(&upstream, &["--pack", &limit]);
    assert_eq!(chat_of(&gateway, "sk-busy").0, 200);
    assert_eq!(chat_of(&gateway, "sk-busy").0, 200);
    for _ in 0..3 {
        let (status, head, body) = chat_of(&gateway, "sk-busy");
        assert_eq!(status, 429, "{head}\n{body}");
        let wait = retry_after(&head);
        assert!((1..=60).contains(&wait), "retry-after: {wait}");
        let error: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(error["error"]["type"], "rate_limit_error", "{body}");
        assert_eq!(error["error"]["code"], "rate_limit_exceeded", "{body}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains("rate-limiter/"), "{message}");
        assert!(head_value(&head, "x-should-retry").is_none(), "{head}");
    }
    // Every other key gets its normal answers, however far past its limit
    // the first one is.
    for other in ["sk-calm", "sk-other"] {
        for _ in 0..2 {
            let (status, _, body) = chat_of(&gateway, other);
            assert_eq!(status, 200, "{body}");
        }
    }
    assert_eq!(upstream.requests().len(), 6, "no 429 went upstream");

    // On the Messages wire, in its own error shape.
    let upstream = Server::start(vec![super::message_reply(
        &json!([{"type": "text", "text": "ok"}]),
    )]);
    let limit = rate_limiter(&json!({"scope": "key", "requests_per_minute": 1}));
    let gateway = serve_messages(&upstream, &["--pack", &limit]);
    let ask = |name: &str| {
        post(
            &gateway,
            "/v1/messages",
            &[&format!("x-api-key: {name}")],
            &json!({"model": "claude", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}),
        )
    };
    assert_eq!(ask("sk-busy").0, 200);
    let (status, head, body) = ask("sk-busy");
    assert_eq!(status, 429, "{body}");
    retry_after(&head);
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["type"], "error", "{body}");
    assert_eq!(error["error"]["type"], "rate_limit_error", "{body}");
    assert_eq!(ask("sk-calm").0, 200);
}

#[test]
fn a_held_rate_limited_request_gives_its_slot_to_another_key_and_a_long_wait_is_a_429() {
    let upstream = Server::start_concurrent(vec![Reply::Model(vec!["ok".into()], Duration::ZERO)]);
    let limit =
        rate_limiter(&json!({"scope": "key", "requests_per_minute": 1, "window_seconds": 2}));
    // One slot in all: a request held while it holds the slot would shut
    // every other key out.
    let gateway = serve(
        &upstream,
        &[
            "--pack",
            &limit,
            "--rate-limit-hold",
            "20",
            "--concurrency",
            "1",
        ],
    );
    assert_eq!(chat_of(&gateway, "sk-busy").0, 200);
    let held = std::thread::scope(|scope| {
        let held = scope.spawn(|| {
            let started = Instant::now();
            (chat_of(&gateway, "sk-busy").0, started.elapsed())
        });
        // While it is held (two seconds), another key is served.
        std::thread::sleep(Duration::from_millis(500));
        let (status, _, body) = chat_of(&gateway, "sk-calm");
        assert_eq!(status, 200, "the held request kept the only slot: {body}");
        held.join().unwrap()
    });
    assert_eq!(held.0, 200, "held, then sent");
    assert!(
        held.1 >= Duration::from_secs(1),
        "it was held: {:?}",
        held.1
    );

    // A wait past the hold is a 429 with the wait that is left.
    let limit =
        rate_limiter(&json!({"scope": "key", "requests_per_minute": 1, "window_seconds": 30}));
    let gateway = serve(&upstream, &["--pack", &limit, "--rate-limit-hold", "1"]);
    assert_eq!(chat_of(&gateway, "sk-busy").0, 200);
    let (status, head, body) = chat_of(&gateway, "sk-busy");
    assert_eq!(status, 429, "{body}");
    let wait = retry_after(&head);
    assert!((20..=30).contains(&wait), "retry-after: {wait}");
}

#[test]
fn a_half_sent_head_is_cut_off_at_the_header_timeout_and_a_stalled_body_is_a_408() {
    let upstream = Server::start(vec![Reply::Model(vec!["ok".into()], Duration::ZERO)]);
    let gateway = serve(&upstream, &["--header-timeout", "1", "--body-timeout", "1"]);
    let mut half = sent(
        &gateway,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: g\r\nx-pad: aaaa",
        b"",
    );
    let (answer, ended) = read_until_end(&mut half, Duration::from_secs(10));
    assert!(ended, "a half-sent head kept its connection: {answer:?}");

    let body = user("hi").to_string();
    let mut stalled = sent(
        &gateway,
        &chat_head("sk-slow", body.len() + 100),
        body.as_bytes(),
    );
    let (answer, _) = read_until_end(&mut stalled, Duration::from_secs(10));
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request_timeout"), "{answer}");

    let gateway = serve_messages(&upstream, &["--body-timeout", "1"]);
    let mut stalled = sent(
        &gateway,
        "POST /v1/messages HTTP/1.1\r\nhost: g\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{",
        b"",
    );
    let (answer, _) = read_until_end(&mut stalled, Duration::from_secs(10));
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"invalid_request_error\""), "{answer}");
    assert_eq!(upstream.requests().len(), 0);
}

/// A chat body of about `size` bytes.
fn padded(size: usize) -> Vec<u8> {
    user(&"x".repeat(size.saturating_sub(60)))
        .to_string()
        .into_bytes()
}

#[test]
fn request_bodies_in_flight_are_capped_per_key_and_in_all() {
    let upstream = Server::start_concurrent(vec![Reply::Model(vec!["ok".into()], Duration::ZERO)]);
    let gateway = serve(
        &upstream,
        &[
            "--body-cap",
            "65536",
            "--key-buffer-cap",
            "100000",
            "--buffer-cap",
            "150000",
        ],
    );
    let big = padded(60_000);
    // Each stalled upload sends all of its body but the last byte.
    let stall = |name: &str| {
        let stream = sent(&gateway, &chat_head(name, big.len()), &big[..big.len() - 1]);
        // Time for the gateway to read what was sent.
        std::thread::sleep(Duration::from_millis(500));
        stream
    };
    // Raw: a refusal may come before the body is all sent.
    let post_big = |name: &str| {
        let mut stream = TcpStream::connect(&gateway.address).unwrap();
        let _ = stream.write_all(chat_head(name, big.len()).as_bytes());
        let _ = stream.write_all(&big);
        let (answer, _) = read_until_end(&mut stream, Duration::from_secs(20));
        let (head, body) = answer.split_once("\r\n\r\n").expect("a response");
        let status = head.split(' ').nth(1).unwrap().parse::<u16>().unwrap();
        (status, head.to_owned(), body.to_owned())
    };
    let first = stall("sk-a");
    // A second from the same key would hold 120 000 bytes of it.
    let (status, head, body) = post_big("sk-a");
    assert_eq!(status, 429, "{body}");
    assert_eq!(retry_after(&head), 1);
    assert!(body.contains("limit per key"), "{body}");
    // Another key's fits; a third's would put the gateway over 150 000.
    let second = stall("sk-b");
    let (status, _, body) = post_big("sk-c");
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("request bodies, its limit"), "{body}");
    // A small one still fits.
    assert_eq!(chat_of(&gateway, "sk-c").0, 200);
    // Once the stalled uploads go, the bytes they held are free.
    drop((first, second));
    std::thread::sleep(Duration::from_millis(500));
    let (status, _, body) = post_big("sk-c");
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = post_big("sk-a");
    assert_eq!(status, 200, "{body}");
}

/// An upstream that streams without end to `"stream": true` requests
/// and answers the rest with `ok`.
fn endless_streams() -> Server {
    let chunk = json!({"choices": [{"index": 0, "delta": {"content": "more and more text "}}]});
    let repeat = format!("data: {chunk}\n\n");
    Server::start_concurrent(vec![Reply::Respond(Responder::new(move |request| {
        if request.json()["stream"] == true {
            Reply::Generated {
                first: String::new(),
                repeat: repeat.clone(),
                bytes: 1 << 30,
            }
        } else {
            Reply::Model(vec!["ok".into()], Duration::ZERO)
        }
    }))])
}

/// Sends a streamed chat request of `name`'s and reads nothing.
fn unread_stream(gateway: &Gateway, name: &str) -> TcpStream {
    let mut body = user("go on");
    body["stream"] = json!(true);
    let body = body.to_string();
    sent(gateway, &chat_head(name, body.len()), body.as_bytes())
}

#[test]
fn a_keys_requests_in_flight_are_capped_and_another_key_is_served() {
    let upstream = endless_streams();
    let gateway = serve(&upstream, &["--key-concurrency", "2"]);
    let _held = [
        unread_stream(&gateway, "sk-many"),
        unread_stream(&gateway, "sk-many"),
    ];
    std::thread::sleep(Duration::from_millis(500));
    let (status, head, body) = chat_of(&gateway, "sk-many");
    assert_eq!(status, 429, "{body}");
    assert_eq!(retry_after(&head), 1);
    assert!(body.contains("2 requests in flight"), "{body}");
    let (status, _, body) = chat_of(&gateway, "sk-other");
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_client_that_stops_reading_loses_its_connection_its_slot_and_its_upstream_call() {
    let upstream = endless_streams();
    let gateway = serve(&upstream, &["--write-timeout", "1", "--concurrency", "1"]);
    let mut reader = unread_stream(&gateway, "sk-sleepy");
    // Once its stream is under way (the upstream was asked), it holds the
    // only slot until the write timeout cuts it off. (Asked before then,
    // another request could take the slot first.)
    let asked = Instant::now();
    while !upstream
        .exchanges()
        .iter()
        .any(|exchange| exchange.request.json()["stream"] == true)
    {
        assert!(asked.elapsed() < Duration::from_secs(30), "never relayed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let started = Instant::now();
    loop {
        let (status, _, body) = chat_of(&gateway, "sk-awake");
        if status == 200 {
            break;
        }
        assert_eq!(status, 429, "{body}");
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "a client that does not read kept its slot"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The upstream call was cancelled: the upstream saw its client go.
    let cancelled = || {
        upstream
            .exchanges()
            .iter()
            .any(|exchange| exchange.request.json()["stream"] == true && exchange.reply.is_some())
    };
    let waited = Instant::now();
    while !cancelled() {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "the upstream stream still runs"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(upstream.generated_bytes_sent() < 1 << 30);
    // And the client, once it reads what its buffers held, finds the end.
    let (_, ended) = read_until_end(&mut reader, Duration::from_secs(20));
    assert!(ended, "its connection is still open");
}

/// An upstream that streams at a model's pace, for minutes, to
/// `"stream": true` requests and answers the rest with `ok`.
fn model_paced_streams() -> Server {
    let chunk = json!({"choices": [{"index": 0, "delta": {"content": "a token "}}]});
    let events = vec![format!("data: {chunk}\n\n"); 6000];
    Server::start_concurrent(vec![Reply::Respond(Responder::new(move |request| {
        if request.json()["stream"] == true {
            Reply::Paced(events.clone(), Duration::from_millis(50))
        } else {
            Reply::Model(vec!["ok".into()], Duration::ZERO)
        }
    }))])
}

#[test]
fn stalled_uploads_half_sent_heads_and_unread_streams_leave_memory_near_idle_and_another_key_served(
) {
    let upstream = model_paced_streams();
    let gateway = serve(&upstream, &[]);
    assert_eq!(chat_of(&gateway, "sk-warm").0, 200);
    std::thread::sleep(Duration::from_millis(300));
    let idle = gateway.rss_mib();
    let mut held: Vec<TcpStream> = Vec::new();
    // 200 uploads of one key, each sending a MiB of its 4 MiB and stalling.
    let chunk = vec![b' '; 1 << 20];
    for _ in 0..200 {
        let mut stream = sent(
            &gateway,
            &chat_head("sk-upload", 4 << 20),
            b"{\"model\":\"m\",",
        );
        let _ = stream.write_all(&chunk);
        held.push(stream);
    }
    std::thread::sleep(Duration::from_secs(2));
    // 200 heads sent but for their end.
    for i in 0..200 {
        held.push(sent(
            &gateway,
            &format!("POST /v1/chat/completions HTTP/1.1\r\nhost: g\r\nx-slow-{i}: a"),
            b"",
        ));
    }
    std::thread::sleep(Duration::from_secs(2));
    // 200 streams, over ten keys, whose clients never read.
    for i in 0..200 {
        held.push(unread_stream(&gateway, &format!("sk-reader-{}", i % 10)));
    }
    std::thread::sleep(Duration::from_secs(3));
    let (status, _, body) = chat_of(&gateway, "sk-bystander");
    assert_eq!(status, 200, "{body}");
    let (status, body) = chat_with(&gateway, &[&key("sk-bystander")], &user("again"));
    assert_eq!(status, 200, "{body}");
    let loaded = gateway.rss_mib();
    eprintln!("gateway RSS: idle {idle:.1} MiB, under 600 hostile connections {loaded:.1} MiB");
    assert!(
        loaded - idle < 32.0,
        "RSS grew from {idle:.1} to {loaded:.1} MiB"
    );
    drop(held);
}
