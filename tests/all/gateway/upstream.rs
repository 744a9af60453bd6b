//! How the gateway reaches its upstream: a kept-alive connection the
//! upstream closed while it was idle is not an error (the request goes
//! once, on a new connection), an `https://` upstream is spoken to in TLS
//! only, every framing HTTP/1.1 allows is read (a length, chunks with
//! extensions and trailers, the connection's end), an answer framed two
//! ways at once is refused, never relayed, an upstream that answers
//! before it read the whole request is heard at once, and a stream's
//! connection is reused once the rest of its body after the end event is
//! read.

use super::{chat_with, started, user};
use chimera_tests::serve::Served;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A chat completion, as an upstream answers.
const ANSWER: &str = r#"{"id":"c1","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"fine"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;

/// An upstream that answers one request per connection, keep-alive by
/// its headers, then closes the connection a moment later (as one whose
/// idle timeout is shorter than the gateway's reuse). Counts the requests
/// it read.
fn closing_upstream() -> (String, Arc<AtomicUsize>) {
    let length = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{ANSWER}",
        ANSWER.len()
    );
    scripted_upstream(length)
}

/// An upstream that reads one request per connection, writes `reply`
/// (head and body, as given), and closes the connection a moment later.
/// Counts the requests it read.
fn scripted_upstream(reply: String) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = listener.local_addr().expect("its address");
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&requests);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut first = [0; 1];
            if stream.peek(&mut first).is_ok() && first[0] == 0x16 {
                // A TLS handshake: answered as a plain HTTP server does.
                let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
                continue;
            }
            let mut reader = BufReader::new(stream);
            if read_request(&mut reader) {
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = reader.get_mut().write_all(reply.as_bytes());
            }
            // Closed a moment after its answer, as an idle timeout would:
            // the gateway has pooled it by then.
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    (format!("http://{address}/v1"), requests)
}

/// Reads one request (its head, and a body of its `content-length`) off
/// `reader`; `false` when the connection ended or broke first.
fn read_request(reader: &mut BufReader<std::net::TcpStream>) -> bool {
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return false;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            let mut body = vec![0; length];
            return reader.read_exact(&mut body).is_ok();
        }
    }
}

/// A gateway in front of `base` asked `rounds` times, each answered 200
/// with the upstream's text, the upstream given time to close its
/// connection between them.
fn asked_rounds(base: &str, rounds: usize) {
    let gateway = started(Served::command(base, &["--model", "m"]));
    for round in 1..=rounds {
        let (status, reply) = chat_with(&gateway, &[], &user("hi"));
        assert_eq!(status, 200, "request {round}: {reply}");
        assert_eq!(reply["choices"][0]["message"]["content"], "fine");
        std::thread::sleep(Duration::from_millis(400));
    }
}

#[test]
fn a_kept_alive_connection_the_upstream_closed_is_replaced_and_nothing_is_sent_twice() {
    let (base, requests) = closing_upstream();
    asked_rounds(&base, 3);
    assert_eq!(requests.load(Ordering::SeqCst), 3, "each request went once");
}

#[test]
fn an_https_upstream_that_does_not_speak_tls_gets_no_request_and_the_client_a_502() {
    let (base, requests) = closing_upstream();
    let base = base.replace("http://", "https://");
    let gateway = started(Served::command(&base, &["--model", "m"]));
    let (status, reply) = chat_with(&gateway, &[], &user("hi"));
    assert_eq!(status, 502, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("cannot connect to the upstream: TLS"),
        "{message}"
    );
    assert_eq!(
        requests.load(Ordering::SeqCst),
        0,
        "no request in the clear"
    );
}

/// The chat answer in chunks of `sizes` bytes (each with an extension),
/// then trailers.
fn chunked(sizes: &[usize]) -> String {
    let mut body = String::new();
    let mut rest = ANSWER;
    for &size in sizes {
        let (piece, after) = rest.split_at(size.min(rest.len()));
        let _ = write!(body, "{:x};note=x\r\n{piece}\r\n", piece.len());
        rest = after;
    }
    let _ = write!(
        body,
        "{:X}\r\n{rest}\r\n0\r\nx-trailer: 1\r\n\r\n",
        rest.len()
    );
    body
}

#[test]
fn chunked_answers_and_answers_framed_by_the_connections_end_are_read_whole() {
    let chunks = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n{}",
        chunked(&[1, 17, 40])
    );
    let until_close = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{ANSWER}"
    );
    for reply in [chunks, until_close] {
        let (base, requests) = scripted_upstream(reply.clone());
        asked_rounds(&base, 2);
        assert_eq!(requests.load(Ordering::SeqCst), 2, "{reply:?}");
    }
}

#[test]
fn an_answer_framed_two_ways_or_cut_short_is_refused_not_relayed() {
    let cases = [
        (
            format!(
                "HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n{}",
                chunked(&[])
            ),
            "both a length and a transfer coding",
        ),
        (
            format!(
                "HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: {}\r\n\r\n{ANSWER}",
                ANSWER.len()
            ),
            "two lengths",
        ),
        (
            format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{}",
                ANSWER.len() + 10,
                ANSWER
            ),
            "closed the connection before the answer's end",
        ),
        (
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n".to_owned(),
            "not a hex number",
        ),
    ];
    for (reply, why) in cases {
        let (base, _) = scripted_upstream(reply.clone());
        let gateway = started(Served::command(&base, &["--model", "m"]));
        let (status, answer) = chat_with(&gateway, &[], &user("hi"));
        assert_eq!(status, 502, "{reply:?}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(why), "{reply:?}: {message}");
        assert!(!answer.to_string().contains("fine"), "{answer}");
    }
}

/// An upstream that reads a request's head only, answers 413 at once
/// without reading its body, and keeps the connection open a while (as
/// a server refusing a body too large for it does).
fn refusing_upstream() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                }
                let body = r#"{"error":{"message":"request too large for this upstream","type":"invalid_request_error"}}"#;
                let reply = format!(
                    "HTTP/1.1 413 Payload Too Large\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = reader.get_mut().write_all(reply.as_bytes());
                std::thread::sleep(Duration::from_secs(20));
            });
        }
    });
    format!("http://{address}/v1")
}

#[test]
fn an_upstream_that_refuses_a_request_before_reading_it_is_answered_at_once() {
    let base = refusing_upstream();
    let gateway = started(Served::command(
        &base,
        &[
            "--model",
            "m",
            "--body-cap",
            "33554432",
            "--upstream-timeout",
            "15",
        ],
    ));
    // Far more than loopback's socket buffers take without a reader.
    let text = "a".repeat(24 << 20);
    // A gateway that only writes would wait out its read timeout (a 504
    // saying so), never seeing the upstream's answer.
    let (status, reply) = chat_with(&gateway, &[], &user(&text));
    assert_eq!(status, 413, "{reply}");
    assert!(
        reply.to_string().contains("too large for this upstream"),
        "{reply}"
    );
}

#[test]
fn bytes_an_upstream_sends_past_its_answer_never_answer_a_later_request() {
    // An answer, then a second one nobody asked for, smuggled in behind
    // it on the same connection (which stays open a moment).
    let smuggled = ANSWER.replace("fine", "smuggled");
    let reply = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{ANSWER}\
         HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{smuggled}",
        ANSWER.len(),
        smuggled.len()
    );
    let (base, requests) = scripted_upstream(reply);
    let gateway = started(Served::command(&base, &["--model", "m"]));
    for round in 1..=2 {
        // No pause: the first connection is still open for the second.
        let (status, answer) = chat_with(&gateway, &[], &user("hi"));
        assert_eq!(status, 200, "request {round}: {answer}");
        assert_eq!(
            answer["choices"][0]["message"]["content"], "fine",
            "request {round}"
        );
    }
    assert_eq!(
        requests.load(Ordering::SeqCst),
        2,
        "each on its own connection"
    );
}

/// An upstream that answers every request of a connection with a
/// Responses stream (its end event and the body's last chunk written
/// together, as a server whose stream ended does), keeping each
/// connection open. Counts its connections.
fn streaming_upstream() -> (String, Arc<AtomicUsize>) {
    use chimera_tests::responses::{events, message};
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = listener.local_addr().expect("its address");
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&connections);
    let events = events("m", &[message("msg_1", "fine")]).concat();
    let reply = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{events}\r\n0\r\n\r\n",
        events.len()
    );
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            counted.fetch_add(1, Ordering::SeqCst);
            let reply = reply.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                while read_request(&mut reader) {
                    if reader.get_mut().write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (format!("http://{address}/v1"), connections)
}

#[test]
fn a_streamed_answers_connection_is_reused_once_its_end_is_read() {
    let (base, connections) = streaming_upstream();
    // One lane: each lane keeps connections of its own, and the three
    // requests (each on a new client connection) could land on several.
    let gateway = started(Served::command(&base, &["--model", "m", "--threads", "1"]));
    let asked = serde_json::json!({"model": "m", "input": "hi", "stream": true});
    for round in 1..=3 {
        let (status, body) =
            super::exchange(&gateway, "POST", "/v1/responses", &[], &asked.to_string());
        assert_eq!(status, 200, "request {round}: {body}");
        assert!(
            body.contains("response.completed"),
            "request {round}: {body}"
        );
        assert!(!body.contains("event: error"), "request {round}: {body}");
    }
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "each stream's connection went back to the pool"
    );
}
