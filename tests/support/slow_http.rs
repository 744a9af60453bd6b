//! A loopback HTTP/1.1 server, async, that answers every request after
//! a fixed delay and serves many connections at once: the model for
//! tests and benchmarks of many concurrent sessions. It plays an
//! OpenAI-compatible chat model: while the conversation it is sent has
//! fewer than `tool_rounds` tool results, it calls `echo`; then it
//! answers `done: <the first user message>`.

use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The server (it serves until the process ends).
pub struct SlowServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    answered: Arc<AtomicU64>,
}

impl SlowServer {
    /// Starts serving on a free loopback port, on a thread of its own.
    pub fn start(delay: Duration, tool_rounds: usize) -> SlowServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking socket");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let answered = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&answered);
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the server's runtime");
            runtime.block_on(async move {
                let listener = TcpListener::from_std(listener).expect("a Tokio listener");
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let counter = Arc::clone(&counter);
                    tokio::spawn(async move {
                        let _ = serve(stream, delay, tool_rounds, &counter).await;
                    });
                }
            });
        });
        SlowServer { url, answered }
    }

    /// Requests answered so far.
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::SeqCst)
    }
}

/// The reply to one chat request.
fn reply(request: &Value, tool_rounds: usize) -> Value {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let results = messages.iter().filter(|m| m["role"] == "tool").count();
    let first_user = messages
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    let message = if results < tool_rounds {
        let arguments = json!({"message": format!("{first_user} #{results}")});
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": format!("call_{results}"),
            "type": "function",
            "function": {"name": "echo", "arguments": arguments.to_string()}
        }]})
    } else {
        json!({"role": "assistant", "content": format!("done: {first_user}")})
    };
    json!({"choices": [{"message": message}], "usage": {"prompt_tokens": 10, "completion_tokens": 2}})
}

/// Reads one request, waits `delay`, answers it and closes, counting it
/// in `answered` before the reply leaves (so a client holding its reply
/// sees it counted).
async fn serve(
    mut stream: TcpStream,
    delay: Duration,
    tool_rounds: usize,
    answered: &AtomicU64,
) -> Option<()> {
    let mut received = Vec::new();
    let mut buffer = [0u8; 8192];
    let head_end = loop {
        let read = stream.read(&mut buffer).await.ok()?;
        if read == 0 {
            return None;
        }
        received.extend_from_slice(&buffer[..read]);
        if let Some(at) = received.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&received[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0);
    while received.len() < head_end + length {
        let read = stream.read(&mut buffer).await.ok()?;
        if read == 0 {
            return None;
        }
        received.extend_from_slice(&buffer[..read]);
    }
    let request: Value = serde_json::from_slice(&received[head_end..head_end + length]).ok()?;
    tokio::time::sleep(delay).await;
    let body = reply(&request, tool_rounds).to_string();
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    answered.fetch_add(1, Ordering::SeqCst);
    stream.write_all(response.as_bytes()).await.ok()?;
    stream.shutdown().await.ok()
}
