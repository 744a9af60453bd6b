//! A loopback HTTP/1.1 server for provider tests: scripted replies,
//! recorded requests, no outside network.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request as it reached the wire.
#[derive(Debug, Clone)]
pub struct Request {
    /// `POST` …
    pub method: String,
    /// The path.
    pub path: String,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
}

impl Request {
    /// The first header named `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).expect("a JSON body")
    }
}

/// One scripted reply.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A complete response.
    Body {
        /// Status code.
        status: u16,
        /// Extra headers.
        headers: Vec<(String, String)>,
        /// Body text.
        body: String,
    },
    /// A server-sent-event stream, one chunk per item, flushed apart.
    Stream(Vec<String>),
    /// A server-sent-event stream, one chunk per item, each flushed
    /// this long after the one before (a model at reading pace).
    Paced(Vec<String>, Duration),
    /// An `OpenAI`-compatible model answering with the text `deltas`:
    /// streamed, one event per delta `pace` apart, when the request
    /// asks for `"stream": true`; otherwise one JSON completion.
    Model(Vec<String>, Duration),
    /// A server-sent-event stream made on the fly, never held whole:
    /// `first`, then `repeat` over and over until at least `bytes` bytes
    /// of body went out (or the client hung up).
    Generated {
        /// The body's beginning.
        first: String,
        /// What follows, repeated.
        repeat: String,
        /// How long the body gets, at least.
        bytes: u64,
    },
}

impl Reply {
    /// 200 with a JSON body.
    pub fn json(body: serde_json::Value) -> Reply {
        Reply::Body {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string(),
        }
    }

    /// A status with a body and extra headers.
    pub fn status(status: u16, headers: &[(&str, &str)], body: &str) -> Reply {
        Reply::Body {
            status,
            headers: headers
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
            body: body.to_owned(),
        }
    }

    /// A redirect (`status`, e.g. 302) to `location`, with no body.
    pub fn redirect(status: u16, location: &str) -> Reply {
        Reply::status(status, &[("location", location)], "")
    }
}

/// The server: replies in order (the last one repeats), records requests.
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    requests: Arc<Mutex<Vec<Request>>>,
    sent: Arc<AtomicU64>,
}

impl Server {
    /// Starts serving `replies` on a free loopback port.
    pub fn start(replies: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        let sent = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&sent);
        std::thread::spawn(move || {
            let mut next = 0;
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let reply = replies[next.min(replies.len() - 1)].clone();
                next += 1;
                serve(stream, &reply, &seen, &counter);
            }
        });
        Server {
            url,
            requests,
            sent,
        }
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// Body bytes of [`Reply::Generated`] replies the client accepted
    /// so far (the kernel's socket buffers included).
    pub fn generated_bytes_sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }
}

/// Writes `bytes` as one chunk of a chunked body.
fn write_chunk(stream: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    stream.write_all(format!("{:x}\r\n", bytes.len()).as_bytes())?;
    stream.write_all(bytes)?;
    stream.write_all(b"\r\n")
}

/// Sends a [`Reply::Generated`] body, counting what went out into `sent`.
fn generate(
    stream: &mut TcpStream,
    first: &str,
    repeat: &str,
    bytes: u64,
    sent: &AtomicU64,
) -> std::io::Result<()> {
    let mut total = 0u64;
    if !first.is_empty() {
        write_chunk(stream, first.as_bytes())?;
        total += first.len() as u64;
        sent.fetch_add(first.len() as u64, Ordering::SeqCst);
    }
    if !repeat.is_empty() {
        // About 64 KiB of whole repeats per chunk.
        let block = repeat.repeat((64 * 1024 / repeat.len()).max(1));
        while total < bytes {
            write_chunk(stream, block.as_bytes())?;
            total += block.len() as u64;
            sent.fetch_add(block.len() as u64, Ordering::SeqCst);
        }
    }
    stream.write_all(b"0\r\n\r\n")
}

/// Sends an event-stream body of `chunks`, `pace` apart.
fn paced(stream: &mut TcpStream, chunks: &[String], pace: Duration) {
    let _ = stream.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
    );
    for chunk in chunks {
        let _ = stream.write_all(format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes());
        let _ = stream.flush();
        std::thread::sleep(pace);
    }
    let _ = stream.write_all(b"0\r\n\r\n");
}

/// The `OpenAI` chat-completions stream of `deltas` (text only), as the
/// event-stream chunks [`Reply::Stream`] and [`Reply::Paced`] send.
pub fn openai_text_stream(deltas: &[&str]) -> Vec<String> {
    let mut events: Vec<String> = deltas
        .iter()
        .map(|text| {
            let chunk = serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}}]});
            format!("data: {chunk}\n\n")
        })
        .collect();
    events.push("data: [DONE]\n\n".to_owned());
    events
}

/// Reads one request, records it (before replying, so a client that
/// has its answer never races the record), then replies.
fn serve(
    mut stream: TcpStream,
    reply: &Reply,
    seen: &Mutex<Vec<Request>>,
    sent: &AtomicU64,
) -> Option<()> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.push((name.trim().to_lowercase(), value.trim().to_owned()));
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    seen.lock().unwrap().push(Request {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    match reply {
        Reply::Body {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} Reply\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            let _ = stream.write_all(format!("{head}\r\n{body}").as_bytes());
        }
        Reply::Stream(chunks) => paced(&mut stream, chunks, Duration::from_millis(5)),
        Reply::Paced(chunks, pace) => paced(&mut stream, chunks, *pace),
        Reply::Model(deltas, pace) => {
            let asked: serde_json::Value =
                serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
            let deltas: Vec<&str> = deltas.iter().map(String::as_str).collect();
            if asked["stream"] == true {
                paced(&mut stream, &openai_text_stream(&deltas), *pace);
            } else {
                let whole = serde_json::json!({
                    "choices": [{"index": 0, "finish_reason": "stop",
                        "message": {"role": "assistant", "content": deltas.concat()}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1}
                })
                .to_string();
                let _ = stream.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{whole}",
                        whole.len()
                    )
                    .as_bytes(),
                );
            }
        }
        Reply::Generated {
            first,
            repeat,
            bytes,
        } => {
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
            );
            // The client hanging up ends the body early; that is the
            // point of most tests that use this.
            let _ = generate(&mut stream, first, repeat, *bytes, sent);
        }
    }
    let _ = stream.flush();
    Some(())
}
