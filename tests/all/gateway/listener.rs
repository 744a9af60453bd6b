//! The listener's own HTTP/1.1 through the binary, with raw sockets for
//! the clients that send what a parser could take two ways: a body framed
//! two ways (a length and chunks, two lengths, a coding other than
//! chunks) is refused, and neither it nor a request smuggled inside it
//! reaches the upstream; pipelined requests, a chunked body and
//! `Expect: 100-continue` are answered in order on one connection; a head
//! over the cap is a 431; and a body over the cap, sent whole while it is
//! refused, gets its 413. (The listener's lingering close after such an
//! answer is not pinned here: on loopback the answer arrives before any
//! reset, so a test passes without it.)

use super::{serve, user};
use chimera_tests::http::{Reply, Server};
use std::fmt::Write as _;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// What `stream` sends until it closes or has been quiet for `quiet`.
fn read_all(stream: &mut TcpStream, quiet: Duration) -> String {
    stream.set_read_timeout(Some(quiet)).unwrap();
    let mut got = Vec::new();
    let mut buffer = [0u8; 1 << 14];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buffer[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => panic!("the gateway reset the connection after {got:?}: {e}"),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// A chat request's whole head, with `lines` (each ending in CRLF).
fn chat_head(lines: &str) -> String {
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: g\r\nauthorization: Bearer sk-a\r\ncontent-type: application/json\r\n{lines}\r\n"
    )
}

/// `body` in chunks of at most 7 bytes, with the last chunk.
fn chunked(body: &str) -> String {
    let mut out = String::new();
    for piece in body.as_bytes().chunks(7) {
        let piece = std::str::from_utf8(piece).unwrap();
        write!(out, "{:x}\r\n{piece}\r\n", piece.len()).unwrap();
    }
    out.push_str("0\r\n\r\n");
    out
}

#[test]
fn a_request_framed_two_ways_is_refused_and_what_it_smuggles_never_reaches_the_upstream() {
    let upstream = Server::start(vec![Reply::Model(vec!["ok".into()], Duration::ZERO)]);
    let gateway = serve(&upstream, &[]);
    let inner = user("smuggled").to_string();
    let smuggled = format!(
        "{}{inner}",
        chat_head(&format!("content-length: {}\r\n", inner.len()))
    );
    for (framing, status, why) in [
        (
            "content-length: 5\r\ntransfer-encoding: chunked\r\n",
            "400",
            "both a length and a transfer coding",
        ),
        (
            "transfer-encoding: chunked\r\ncontent-length: 5\r\n",
            "400",
            "both a length and a transfer coding",
        ),
        (
            "content-length: 5\r\ncontent-length: 200\r\n",
            "400",
            "two lengths",
        ),
        (
            "transfer-encoding: identity, chunked\r\n",
            "501",
            "not `chunked` alone",
        ),
    ] {
        let mut stream = TcpStream::connect(&gateway.address).unwrap();
        let request = format!("{}0\r\n\r\n{smuggled}", chat_head(framing));
        stream.write_all(request.as_bytes()).unwrap();
        let answer = read_all(&mut stream, Duration::from_secs(10));
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status} ")),
            "{framing:?}: {answer}"
        );
        assert!(answer.contains(why), "{framing:?}: {answer}");
        assert!(answer.contains("connection: close"), "{answer}");
        assert_eq!(
            answer.matches("HTTP/1.1").count(),
            1,
            "{framing:?}: a second answer: {answer}"
        );
    }
    assert_eq!(
        upstream.requests().len(),
        0,
        "a request framed two ways reached the upstream"
    );
}

#[test]
fn pipelined_chunked_and_continued_requests_are_answered_in_order_on_one_connection() {
    let upstream = Server::start(vec![Reply::Model(vec!["ok".into()], Duration::ZERO)]);
    let gateway = serve(&upstream, &[]);
    let body = user("hello there").to_string();
    let mut stream = TcpStream::connect(&gateway.address).unwrap();
    // Three requests in one write: a chunked chat, the models, a chat
    // framed by its length.
    let pipelined = format!(
        "{}{}GET /v1/models HTTP/1.1\r\nhost: g\r\nauthorization: Bearer sk-a\r\n\r\n{}{body}",
        chat_head("transfer-encoding: chunked\r\n"),
        chunked(&body),
        chat_head(&format!("content-length: {}\r\n", body.len())),
    );
    stream.write_all(pipelined.as_bytes()).unwrap();
    let answers = read_all(&mut stream, Duration::from_secs(3));
    let heads: Vec<usize> = answers
        .match_indices("HTTP/1.1 200 OK")
        .map(|(at, _)| at)
        .collect();
    assert_eq!(heads.len(), 3, "{answers}");
    let (first, second, third) = (
        &answers[heads[0]..heads[1]],
        &answers[heads[1]..heads[2]],
        &answers[heads[2]..],
    );
    assert!(first.contains("chat.completion"), "{first}");
    assert!(second.contains("\"list\""), "{second}");
    assert!(third.contains("chat.completion"), "{third}");
    let sent: Vec<String> = upstream.requests().iter().map(|r| r.body.clone()).collect();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(sent.iter().all(|b| b.contains("hello there")), "{sent:?}");

    // `Expect: 100-continue`: the interim answer first, then the body.
    let mut stream = TcpStream::connect(&gateway.address).unwrap();
    let head = chat_head(&format!(
        "expect: 100-continue\r\ncontent-length: {}\r\n",
        body.len()
    ));
    stream.write_all(head.as_bytes()).unwrap();
    let interim = read_all(&mut stream, Duration::from_secs(2));
    assert_eq!(interim, "HTTP/1.1 100 Continue\r\n\r\n");
    stream.write_all(body.as_bytes()).unwrap();
    let answer = read_all(&mut stream, Duration::from_secs(3));
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.contains("chat.completion"), "{answer}");
}

#[test]
fn a_head_over_the_cap_is_a_431_and_a_body_over_the_cap_sent_whole_gets_its_413() {
    let upstream = Server::start(vec![Reply::Model(vec!["ok".into()], Duration::ZERO)]);
    let gateway = serve(&upstream, &["--header-cap", "4096", "--body-cap", "65536"]);
    let mut stream = TcpStream::connect(&gateway.address).unwrap();
    let padding = "x".repeat(1000);
    let mut lines = String::new();
    for line in 0..40 {
        write!(lines, "x-pad-{line}: {padding}\r\n").unwrap();
    }
    let head = chat_head(&lines);
    stream.write_all(head.as_bytes()).unwrap();
    let answer = read_all(&mut stream, Duration::from_secs(5));
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    assert!(answer.contains("head is over"), "{answer}");

    // A body over the cap, sent whole while the gateway refuses it: the
    // client reads the 413.
    let mut stream = TcpStream::connect(&gateway.address).unwrap();
    let large = 4 << 20;
    let head = chat_head(&format!("content-length: {large}\r\n"));
    stream.write_all(head.as_bytes()).unwrap();
    let writer = stream.try_clone().unwrap();
    let sending = std::thread::spawn(move || {
        let mut writer = writer;
        let piece = vec![b' '; 1 << 16];
        let started = Instant::now();
        let mut sent = 0;
        while sent < large && started.elapsed() < Duration::from_secs(20) {
            if writer.write_all(&piece).is_err() {
                break;
            }
            sent += piece.len();
        }
    });
    let answer = read_all(&mut stream, Duration::from_secs(10));
    sending.join().unwrap();
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    assert!(answer.contains("connection: close"), "{answer}");
    assert_eq!(upstream.requests().len(), 0);
}
