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
    /// The request target as sent: the path, with its query if any (see
    /// [`Request::route`] and [`Request::query`]).
    pub path: String,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    /// The headers as sent: names in their own case, in order.
    pub raw_headers: Vec<(String, String)>,
    /// The body (lossily UTF-8; see [`Request::bytes`]).
    pub body: String,
    /// The body's bytes exactly as sent (a chunked body de-chunked).
    pub bytes: Vec<u8>,
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

    /// The path without its query (`/v1/messages` of `/v1/messages?beta=true`).
    pub fn route(&self) -> &str {
        self.path
            .split_once('?')
            .map_or(&self.path, |(route, _)| route)
    }

    /// The query, without its `?` (`beta=true`), if the target has one.
    pub fn query(&self) -> Option<&str> {
        self.path.split_once('?').map(|(_, query)| query)
    }
}

/// A reply made from the request it answers (see [`Reply::Respond`]).
#[derive(Clone)]
pub struct Responder(Arc<dyn Fn(&Request) -> Reply + Send + Sync>);

impl Responder {
    /// A responder that answers each request with `reply(request)`.
    pub fn new(reply: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Responder {
        Responder(Arc::new(reply))
    }
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Responder(..)")
    }
}

/// What the server sent back for one request, as it went out on the
/// wire (a chunked body de-chunked; at most [`RECORDED_REPLY_LIMIT`]
/// bytes of it).
#[derive(Debug, Clone)]
pub struct Sent {
    /// Status code.
    pub status: u16,
    /// The headers, in order, as sent.
    pub headers: Vec<(String, String)>,
    /// The body's bytes.
    pub body: Vec<u8>,
}

/// How much of a reply [`Server::exchanges`] keeps (a [`Reply::Generated`]
/// body can be far longer).
pub const RECORDED_REPLY_LIMIT: usize = 4 << 20;

/// One request and the reply it got.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The request.
    pub request: Request,
    /// The reply, once it has gone out (`None` while it is being sent, or
    /// when the client hung up before the reply began).
    pub reply: Option<Sent>,
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
    /// A reply made from the request, then sent as that reply is
    /// (see [`Reply::respond`] and [`tool_model`]).
    Respond(Responder),
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

    /// A reply made from each request by `reply`.
    pub fn respond(reply: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Reply {
        Reply::Respond(Responder::new(reply))
    }
}

/// The server: replies in order (the last one repeats), records requests.
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    exchanges: Arc<Mutex<Vec<Exchange>>>,
    sent: Arc<AtomicU64>,
}

impl Server {
    /// Starts serving `replies` on a free loopback port, one connection
    /// at a time.
    pub fn start(replies: Vec<Reply>) -> Server {
        Server::launch(replies, false)
    }

    /// As [`Server::start`], but each connection is served on a thread of
    /// its own, so a real client that opens a second connection while the
    /// first is open (a keep-alive pool, a request in parallel) is never
    /// stalled by it. Replies are still handed out in the order the
    /// connections arrive.
    pub fn start_concurrent(replies: Vec<Reply>) -> Server {
        Server::launch(replies, true)
    }

    fn launch(replies: Vec<Reply>, concurrent: bool) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let exchanges = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&exchanges);
        let sent = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&sent);
        std::thread::spawn(move || {
            let mut next = 0;
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let reply = replies[next.min(replies.len() - 1)].clone();
                next += 1;
                if concurrent {
                    let (seen, counter) = (Arc::clone(&seen), Arc::clone(&counter));
                    std::thread::spawn(move || serve(stream, &reply, &seen, &counter));
                } else {
                    serve(stream, &reply, &seen, &counter);
                }
            }
        });
        Server {
            url,
            exchanges,
            sent,
        }
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.exchanges
            .lock()
            .unwrap()
            .iter()
            .map(|exchange| exchange.request.clone())
            .collect()
    }

    /// Every request so far, each with the reply it got.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.exchanges.lock().unwrap().clone()
    }

    /// Body bytes of [`Reply::Generated`] replies the client accepted
    /// so far (the kernel's socket buffers included).
    pub fn generated_bytes_sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }
}

/// The connection, keeping a copy of what went out on it (the first
/// [`RECORDED_REPLY_LIMIT`] bytes).
struct Tee {
    stream: TcpStream,
    copy: Vec<u8>,
}

impl Write for Tee {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let written = self.stream.write(buf)?;
        let room = RECORDED_REPLY_LIMIT.saturating_sub(self.copy.len());
        self.copy.extend_from_slice(&buf[..written.min(room)]);
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.stream.flush()
    }
}

/// Writes `bytes` as one chunk of a chunked body.
fn write_chunk(stream: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    stream.write_all(format!("{:x}\r\n", bytes.len()).as_bytes())?;
    stream.write_all(bytes)?;
    stream.write_all(b"\r\n")
}

/// Sends a [`Reply::Generated`] body, counting what went out into `sent`.
fn generate(
    stream: &mut impl Write,
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
fn paced(stream: &mut impl Write, chunks: &[String], pace: Duration) {
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

/// Reads a chunked body (after the head) to its end, trailers included.
fn read_chunked(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).ok()?;
        let size = size.trim().split(';').next()?;
        let size = usize::from_str_radix(size, 16).ok()?;
        if size == 0 {
            loop {
                let mut trailer = String::new();
                reader.read_line(&mut trailer).ok()?;
                if trailer.trim_end().is_empty() {
                    return Some(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..]).ok()?;
        let mut end = [0; 2];
        reader.read_exact(&mut end).ok()?;
    }
}

/// Reads one request: its line, head and body.
fn read_request(stream: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let mut raw_headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        raw_headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let headers: Vec<(String, String)> = raw_headers
        .iter()
        .map(|(name, value)| (name.to_lowercase(), value.clone()))
        .collect();
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v);
    let bytes = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        read_chunked(&mut reader)?
    } else {
        let length: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).ok()?;
        body
    };
    Some(Request {
        method,
        path,
        body: String::from_utf8_lossy(&bytes).into_owned(),
        bytes,
        headers,
        raw_headers,
    })
}

/// The reply that went out, parsed back from its bytes.
fn parse_sent(bytes: &[u8]) -> Option<Sent> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&bytes[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect();
    let rest = &bytes[end + 4..];
    let chunked = headers.iter().any(|(name, value)| {
        name.eq_ignore_ascii_case("transfer-encoding") && value.contains("chunked")
    });
    let body = if chunked {
        let mut reader = BufReader::new(rest);
        let mut body = Vec::new();
        // A cut-off copy keeps the whole chunks it has.
        loop {
            let mut size = String::new();
            if reader.read_line(&mut size).ok()? == 0 {
                break;
            }
            let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
                break;
            };
            if size == 0 {
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            if reader.read_exact(&mut body[start..]).is_err() {
                body.truncate(start);
                break;
            }
            let mut crlf = [0; 2];
            if reader.read_exact(&mut crlf).is_err() {
                break;
            }
        }
        body
    } else {
        rest.to_vec()
    };
    Some(Sent {
        status,
        headers,
        body,
    })
}

/// Reads one request, records it (before replying, so a client that
/// has its answer never races the record), then replies, and records the
/// reply as it went out.
fn serve(
    stream: TcpStream,
    reply: &Reply,
    seen: &Mutex<Vec<Exchange>>,
    sent: &AtomicU64,
) -> Option<()> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let request = read_request(&stream)?;
    let made;
    let reply = match reply {
        Reply::Respond(responder) => {
            made = (responder.0)(&request);
            &made
        }
        other => other,
    };
    let head_only = request.method == "HEAD";
    let body = request.bytes.clone();
    let index = {
        let mut seen = seen.lock().unwrap();
        seen.push(Exchange {
            request,
            reply: None,
        });
        seen.len() - 1
    };
    let mut stream = Tee {
        stream,
        copy: Vec::new(),
    };
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
            let body = if head_only { "" } else { body };
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
                    "id": "chatcmpl-loopback", "object": "chat.completion", "created": 1,
                    "model": asked["model"],
                    "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null,
                        "message": {"role": "assistant", "content": deltas.concat()}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
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
        Reply::Respond(_) => {
            let _ = stream
                .write_all(b"HTTP/1.1 500 Reply\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
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
    seen.lock().unwrap()[index].reply = parse_sent(&stream.copy);
    Some(())
}

/// What [`tool_model`] answers a request that offers no tool of the name
/// it calls and carries no tool result (a title, a quota check).
pub const PLAIN_ANSWER: &str = "Chimera fidelity test";

/// The final answer [`tool_model`] gives once the tool's result has come
/// back: this, then the result's text.
pub const ANSWER_PREFIX: &str = "The tool answered: ";

/// The signature [`tool_model`] puts on its `thinking` blocks.
pub const THINKING_SIGNATURE: &str = "Q2hpbWVyYSB0ZXN0IHNpZ25hdHVyZQ==";

/// A loopback model for one tool round trip, on both wires: chat
/// completions at a path ending `/chat/completions`, the Anthropic
/// Messages API at one ending `/messages` (any query, such as
/// `?beta=true`), each streamed when the request says `"stream": true`.
///
/// A request that offers a tool named `tool` and has no tool result yet
/// is answered with a call of it with `arguments` (a short text first on
/// the Messages wire, and a `thinking` block signed
/// [`THINKING_SIGNATURE`] before that when the request turns thinking
/// on); one whose last turn carries tool results, with [`ANSWER_PREFIX`]
/// and the results' text; any other with [`PLAIN_ANSWER`]. Streamed tool
/// arguments come in several deltas; a chat-completions stream ends with
/// a usage chunk when `stream_options.include_usage` asks for one. It
/// also answers `HEAD` (200, empty), `GET …/models` (a list of one) and
/// `…/messages/count_tokens`; anything else is a 404.
pub fn tool_model(tool: &str, arguments: serde_json::Value) -> Reply {
    tool_model_calls(vec![(tool.to_owned(), arguments)])
}

/// As [`tool_model`], for a round trip of several calls, one a turn: the
/// model makes `calls[k]` when the conversation holds `k` tool results
/// (the first only when the request offers its tool; a later one even
/// when the tool is not among the request's `tools`, as a tool loaded on
/// demand may not be), and answers once it holds them all.
pub fn tool_model_calls(calls: Vec<(String, serde_json::Value)>) -> Reply {
    Reply::respond(move |request| model_reply(request, &calls))
}

/// The texts of the tool results in a request body's last turn: the
/// `tool_result` blocks of its last message (Messages wire), or its
/// trailing `tool` messages (chat completions). Text parts of a result
/// that is an array are joined.
pub fn tool_results(body: &serde_json::Value) -> Vec<String> {
    let Some(messages) = body["messages"].as_array() else {
        return Vec::new();
    };
    let mut results = Vec::new();
    if let Some(blocks) = messages.last().and_then(|last| last["content"].as_array()) {
        for block in blocks.iter().filter(|b| b["type"] == "tool_result") {
            results.push(content_text(&block["content"]));
        }
    }
    let tool_messages: Vec<String> = messages
        .iter()
        .rev()
        .take_while(|message| message["role"] == "tool")
        .map(|message| content_text(&message["content"]))
        .collect();
    results.extend(tool_messages.into_iter().rev());
    results
}

/// How many tool results a request body's conversation holds in all.
fn tool_results_so_far(body: &serde_json::Value) -> usize {
    body["messages"].as_array().map_or(0, |messages| {
        messages
            .iter()
            .map(|message| {
                if message["role"] == "tool" {
                    1
                } else {
                    message["content"].as_array().map_or(0, |blocks| {
                        blocks.iter().filter(|b| b["type"] == "tool_result").count()
                    })
                }
            })
            .sum()
    })
}

/// A content's text: the string, or the text of its parts joined.
fn content_text(content: &serde_json::Value) -> String {
    match content {
        serde_json::Value::String(text) => text.clone(),
        serde_json::Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// What [`tool_model`]'s model says in one turn: a text, or a call.
pub(crate) enum Turn<'a> {
    Text(String),
    Call {
        id: String,
        tool: &'a str,
        arguments: &'a serde_json::Value,
    },
}

fn model_reply(request: &Request, calls: &[(String, serde_json::Value)]) -> Reply {
    use serde_json::json;
    if request.method == "HEAD" {
        return Reply::status(200, &[], "");
    }
    let route = request.route();
    if request.method == "GET" && route.ends_with("/models") {
        return Reply::json(json!({"object": "list", "data": [
            {"id": "chimera-test", "object": "model", "type": "model", "created": 1_700_000_000,
             "owned_by": "chimera", "display_name": "Chimera test", "created_at": "2023-11-14T22:13:20Z"}
        ], "has_more": false, "first_id": "chimera-test", "last_id": "chimera-test"}));
    }
    if route.ends_with("/messages/count_tokens") {
        return Reply::json(json!({"input_tokens": 42}));
    }
    let anthropic = route.ends_with("/messages");
    let responses = route.ends_with("/responses");
    let body: serde_json::Value =
        serde_json::from_slice(&request.bytes).unwrap_or(serde_json::Value::Null);
    if route.ends_with("/embeddings") {
        return super::responses::embeddings(&body);
    }
    if request.method != "POST" || !(anthropic || responses || route.ends_with("/chat/completions"))
    {
        let error = json!({"type": "error", "error": {"type": "not_found_error",
            "message": format!("no route {} {}", request.method, request.path)}});
        return Reply::status(
            404,
            &[("content-type", "application/json")],
            &error.to_string(),
        );
    }
    let (results, made) = if responses {
        super::responses::results(&body)
    } else {
        (tool_results(&body), tool_results_so_far(&body))
    };
    let offered = |tool: &str| {
        body["tools"].as_array().is_some_and(|tools| {
            tools
                .iter()
                .any(|t| t["name"] == tool || t["function"]["name"] == tool)
        })
    };
    let prefix = if anthropic { "toolu" } else { "call" };
    let turn = match calls.get(made) {
        Some((tool, arguments)) if made > 0 || offered(tool) => Turn::Call {
            id: format!("{prefix}_chimera_{:02}", made + 1),
            tool,
            arguments,
        },
        _ if !results.is_empty() => Turn::Text(format!("{ANSWER_PREFIX}{}", results.join("\n"))),
        _ => Turn::Text(PLAIN_ANSWER.to_owned()),
    };
    let model = body["model"].as_str().unwrap_or("chimera-test");
    let stream = body["stream"] == true;
    if responses {
        super::responses::reply(&turn, &body)
    } else if anthropic {
        let thinking = matches!(
            body["thinking"]["type"].as_str(),
            Some("enabled" | "adaptive")
        );
        messages_reply(&turn, model, thinking, stream)
    } else {
        let usage = body["stream_options"]["include_usage"] == true;
        chat_reply(&turn, model, stream, usage)
    }
}

/// `text` in `pieces` pieces or fewer, cut at character boundaries.
pub(crate) fn pieces(text: &str, pieces: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(pieces).max(1);
    chars
        .chunks(size)
        .map(|chunk| chunk.iter().collect())
        .collect()
}

fn messages_reply(turn: &Turn<'_>, model: &str, thinking: bool, stream: bool) -> Reply {
    use serde_json::json;
    let mut blocks = Vec::new();
    if thinking {
        blocks.push(
            json!({"type": "thinking", "thinking": "The user wants an answer.",
            "signature": THINKING_SIGNATURE}),
        );
    }
    let stop_reason = match turn {
        Turn::Text(text) => {
            blocks.push(json!({"type": "text", "text": text}));
            "end_turn"
        }
        Turn::Call {
            id,
            tool,
            arguments,
        } => {
            blocks.push(json!({"type": "text", "text": "I will use the tool."}));
            blocks.push(json!({"type": "tool_use", "id": id, "name": tool, "input": arguments}));
            "tool_use"
        }
    };
    let usage = json!({"input_tokens": 42, "output_tokens": 12,
        "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
    if !stream {
        return Reply::json(json!({
            "id": "msg_chimera_01", "type": "message", "role": "assistant", "model": model,
            "content": blocks, "stop_reason": stop_reason, "stop_sequence": null, "usage": usage
        }));
    }
    let event = |data: serde_json::Value| {
        format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap_or("")
        )
    };
    let mut events = vec![
        event(json!({"type": "message_start", "message": {
            "id": "msg_chimera_01", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 42, "output_tokens": 1,
                "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})),
        event(json!({"type": "ping"})),
    ];
    for (index, block) in blocks.iter().enumerate() {
        let (start, deltas): (serde_json::Value, Vec<serde_json::Value>) =
            match block["type"].as_str() {
                Some("thinking") => (
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                    pieces(block["thinking"].as_str().unwrap_or(""), 3)
                        .into_iter()
                        .map(|piece| json!({"type": "thinking_delta", "thinking": piece}))
                        .chain([json!({"type": "signature_delta",
                            "signature": THINKING_SIGNATURE})])
                        .collect(),
                ),
                Some("tool_use") => (
                    json!({"type": "tool_use", "id": block["id"], "name": block["name"],
                        "input": {}}),
                    pieces(&block["input"].to_string(), 3)
                        .into_iter()
                        .map(|piece| json!({"type": "input_json_delta", "partial_json": piece}))
                        .collect(),
                ),
                _ => (
                    json!({"type": "text", "text": ""}),
                    pieces(block["text"].as_str().unwrap_or(""), 3)
                        .into_iter()
                        .map(|piece| json!({"type": "text_delta", "text": piece}))
                        .collect(),
                ),
            };
        events.push(event(json!({"type": "content_block_start", "index": index,
            "content_block": start})));
        for delta in deltas {
            events.push(event(json!({"type": "content_block_delta", "index": index,
                "delta": delta})));
        }
        events.push(event(json!({"type": "content_block_stop", "index": index})));
    }
    events.push(event(json!({"type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": null},
        "usage": {"output_tokens": 12}})));
    events.push(event(json!({"type": "message_stop"})));
    Reply::Paced(events, Duration::from_millis(2))
}

fn chat_reply(turn: &Turn<'_>, model: &str, stream: bool, usage: bool) -> Reply {
    use serde_json::json;
    let (message, finish) = match turn {
        Turn::Text(text) => (
            json!({"role": "assistant", "content": text, "refusal": null}),
            "stop",
        ),
        Turn::Call {
            id,
            tool,
            arguments,
        } => (
            json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": [
                {"id": id, "type": "function",
                 "function": {"name": tool, "arguments": arguments.to_string()}}]}),
            "tool_calls",
        ),
    };
    let counts = json!({"prompt_tokens": 42, "completion_tokens": 12, "total_tokens": 54});
    if !stream {
        return Reply::json(json!({
            "id": "chatcmpl-chimera-01", "object": "chat.completion", "created": 1_700_000_000,
            "model": model, "choices": [{"index": 0, "message": message, "logprobs": null,
                "finish_reason": finish}],
            "usage": counts
        }));
    }
    let chunk = |choices: serde_json::Value| {
        let chunk = json!({"id": "chatcmpl-chimera-01", "object": "chat.completion.chunk",
            "created": 1_700_000_000, "model": model, "choices": choices});
        format!("data: {chunk}\n\n")
    };
    let delta = |delta: serde_json::Value| {
        chunk(json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]))
    };
    let mut events = vec![delta(json!({"role": "assistant", "content": ""}))];
    match turn {
        Turn::Text(text) => {
            for piece in pieces(text, 3) {
                events.push(delta(json!({"content": piece})));
            }
        }
        Turn::Call {
            id,
            tool,
            arguments,
        } => {
            events.push(delta(json!({"tool_calls": [{"index": 0, "id": id,
                "type": "function", "function": {"name": tool, "arguments": ""}}]})));
            for piece in pieces(&arguments.to_string(), 3) {
                events.push(delta(json!({"tool_calls": [{"index": 0,
                    "function": {"arguments": piece}}]})));
            }
        }
    }
    events.push(chunk(json!([{"index": 0, "delta": {}, "logprobs": null,
        "finish_reason": finish}])));
    if usage {
        let last = json!({"id": "chatcmpl-chimera-01", "object": "chat.completion.chunk",
            "created": 1_700_000_000, "model": model, "choices": [], "usage": counts});
        events.push(format!("data: {last}\n\n"));
    }
    events.push("data: [DONE]\n\n".to_owned());
    Reply::Paced(events, Duration::from_millis(2))
}
