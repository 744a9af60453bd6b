//! The guard over streamable HTTP: `chimera mcp guard --url URL` serves
//! the MCP streamable HTTP transport on its own listener and relays each
//! exchange to the remote server at `URL`, judging every message as the
//! stdio guard does.
//!
//! ```text
//!  client ── POST body ──▶ judged (calls, as on stdio) ──▶ POST URL ──┬─ application/json ─▶ judged ─▶ client
//!                                                                     ├─ text/event-stream ─▶ each event judged ─▶ client
//!                                                                     └─ 202 ─▶ client
//!  client ── GET (the server's own stream) ─▶ GET URL ─▶ each event judged (an answer there is withheld)
//!  client ── DELETE (the session's end) ─▶ DELETE URL
//! ```
//!
//! What passes through untouched: the session (`Mcp-Session-Id`), the
//! protocol version (`MCP-Protocol-Version`), each event's id (and the
//! client's `Last-Event-ID`, so a broken stream resumes), the client's credentials
//! (`Authorization`: bearer tokens and OAuth access tokens, never written
//! anywhere). The 2026 routing headers (`Mcp-Method`, `Mcp-Name`) are
//! written from the message as judged, never taken from the client. The
//! guard's own listener answers only requests whose `Host` (and `Origin`,
//! when sent) is the listener itself or a host allowed by
//! `--allowed-host`: a web page cannot reach it through DNS rebinding.
//!
//! A server that cannot be reached, or whose stream ends before it
//! answered, has each request in flight answered with an error saying so
//! (a call's as an error result the model reads), and one line on
//! standard error.

use super::answers::unanswered_answer;
use super::calls::FromClient;
use super::error::MAX_LINE;
use super::judge::{Judging, Pending, Rules};
use super::message::Parsed;
use super::wire::say;
use crate::listen::ConnectionLimits;
use crate::plugins::Registry;
use crate::providers::sse::{Limits, Reader};
use crate::upstream::{Client, ClientError, Reply, ReplyBody};
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, Limited};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// The headers relayed to the server as the client sent them.
const PASSED: &[&str] = &[
    "authorization",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
    "accept",
];

/// How much of a server's stream is read without waiting for the client
/// to take what was read before.
const READ_AHEAD: usize = 64 << 10;

/// The headers of the server's answer relayed to the client.
const RETURNED: &[&str] = &["mcp-session-id", "mcp-protocol-version", "www-authenticate"];

/// Why the HTTP guard could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpGuardError {
    /// The upstream URL cannot be used (not http(s), credentials in it…).
    #[error("--url {url}: {why}")]
    Url {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// Serving failed.
    #[error("serving: {0}")]
    Serve(std::io::Error),
}

/// The guard in front of one remote server.
struct HttpGuard {
    judging: Judging,
    /// The server's URL, as given (for the operator's lines).
    upstream: String,
    /// The URL's query, sent with every request.
    query: Option<String>,
    client: Client,
    /// `Host` values the listener answers.
    hosts: Vec<String>,
}

/// Serves the streamable HTTP transport on `listener`, relaying to the
/// MCP server at `upstream`, judging by `registry`'s chains and `rules`,
/// until `shutdown` completes. `allowed_hosts` are host names (with or
/// without a port) the listener answers besides its own address and
/// `localhost`.
///
/// # Errors
///
/// `HttpGuardError` when the URL is not an http(s) URL, the client cannot
/// be set up, or serving fails.
pub async fn serve_http(
    registry: &Arc<Registry>,
    rules: Rules,
    upstream: &str,
    listener: TcpListener,
    allowed_hosts: &[String],
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), HttpGuardError> {
    let (base, query) = match upstream.split_once('?') {
        Some((base, query)) => (base, Some(query.to_owned())),
        None => (upstream, None),
    };
    // No read timeout: a server's event stream may stay quiet as long as
    // it likes (a call's own deadline is the client's).
    let client =
        Client::new(base, Duration::from_secs(10), None).map_err(|error| HttpGuardError::Url {
            url: upstream.to_owned(),
            why: match error {
                ClientError::BadUrl { why, .. } => why,
                other => other.to_string(),
            },
        })?;
    let port = listener.local_addr().map_err(HttpGuardError::Serve)?.port();
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .map(|host| format!("{host}:{port}"))
        .collect();
    hosts.extend(allowed_hosts.iter().cloned());
    let guard = Arc::new(HttpGuard {
        judging: Judging::new(registry, rules),
        upstream: upstream.to_owned(),
        query,
        client,
        hosts,
    });
    // The listener calls the guard directly: one kind of request, no
    // routes to match, no extractors.
    let service = hyper::service::service_fn(move |request: Request<Body>| {
        let guard = Arc::clone(&guard);
        async move { Ok::<_, Infallible>(guard.handle(request).await) }
    });
    let limits = ConnectionLimits {
        header_timeout: Duration::from_secs(30),
        write_timeout: Duration::from_secs(60),
        header_cap: 64 << 10,
    };
    crate::listen::serve(service, listener, limits, shutdown)
        .await
        .map_err(HttpGuardError::Serve)
}

/// A JSON-RPC body of `messages`: the one, or a batch.
fn json_body(mut messages: Vec<Vec<u8>>) -> Vec<u8> {
    if messages.len() == 1 {
        messages.remove(0)
    } else {
        crate::jsondoc::array_from(messages)
    }
}

/// A JSON response.
fn json_response(status: StatusCode, headers: HeaderMap, body: Vec<u8>) -> Response {
    let mut response = (status, headers, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// One server-sent event holding `message`, under the server's event id
/// when it gave one (so a client can resume from it).
fn event(id: Option<&str>, message: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(message.len() + 32);
    if let Some(id) = id {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(id.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(message);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

impl HttpGuard {
    /// One request of a client.
    async fn handle(self: Arc<Self>, request: Request<Body>) -> Response {
        let (parts, body) = request.into_parts();
        let headers = &parts.headers;
        if let Err(why) = self.check_host(headers) {
            say(&why);
            return (StatusCode::FORBIDDEN, why).into_response();
        }
        match parts.method {
            Method::POST => match Limited::new(body, MAX_LINE).collect().await {
                Ok(body) => self.post(headers, body.to_bytes()).await,
                Err(error) => {
                    let too_long = error.is::<http_body_util::LengthLimitError>();
                    if too_long {
                        let why = format!("refused a request body over {MAX_LINE} bytes");
                        say(&why);
                        return (StatusCode::PAYLOAD_TOO_LARGE, why).into_response();
                    }
                    // The client broke off its own request: nobody to tell.
                    StatusCode::BAD_REQUEST.into_response()
                }
            },
            Method::GET => self.server_stream(headers).await,
            Method::DELETE => self.end_session(headers).await,
            _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
        }
    }

    /// The `Host` (and `Origin`) must name the listener or an allowed
    /// host.
    fn check_host(&self, headers: &HeaderMap) -> Result<(), String> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        let allowed = |host: &str| {
            self.hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(host) || h.split(':').next() == Some(host))
        };
        if !allowed(host) {
            return Err(format!(
                "refused a request for host {host:?} (not this guard's)"
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) {
            let origin_host = origin.split("://").nth(1).unwrap_or_default();
            if !allowed(origin_host) {
                return Err(format!("refused a request from origin {origin:?}"));
            }
        }
        Ok(())
    }

    /// `method` to the server with `body`, carrying the client's passed
    /// headers and `more`.
    async fn send(
        &self,
        method: Method,
        headers: &HeaderMap,
        more: HeaderMap,
        body: Vec<u8>,
    ) -> Result<Reply, ClientError> {
        let mut sent = kept(headers, PASSED);
        sent.extend(more);
        let query = self.query.as_deref();
        self.client
            .request(method, "", query, sent, Bytes::from(body))
            .await
    }

    /// A client's POST: judged, relayed, its answer judged.
    async fn post(self: &Arc<Self>, headers: &HeaderMap, body: Bytes) -> Response {
        let judged = match Parsed::of(body.to_vec()) {
            Ok(parsed) => self.judging.judge_client(&parsed, &|_| false),
            Err(why) => {
                let refused = FromClient::unreadable(&why);
                return json_response(
                    StatusCode::BAD_REQUEST,
                    HeaderMap::new(),
                    json_body(refused.replies),
                );
            }
        };
        let Some(forward) = judged.forward else {
            if judged.replies.is_empty() {
                return StatusCode::ACCEPTED.into_response();
            }
            return json_response(StatusCode::OK, HeaderMap::new(), json_body(judged.replies));
        };
        let pending: HashMap<String, Pending> = judged.pending.into_iter().collect();
        let mut more = json_type();
        if headers.contains_key("mcp-method") || headers.contains_key("mcp-name") {
            more.extend(routing_headers(&forward));
        }
        let answer = match self.send(Method::POST, headers, more, forward).await {
            Ok(answer) => answer,
            Err(error) => {
                let detail = format!("{} ({error})", self.upstream);
                let why = "the MCP server could not be reached to answer";
                return Self::unanswered(judged.replies, pending, why, &detail);
            }
        };
        let status = answer.status;
        let returned = kept(&answer.headers, RETURNED);
        let streamed = answer
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|t| t.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        if streamed {
            return self.relay_stream(answer.body, returned, judged.replies, pending, headers);
        }
        let bytes = match read_capped(answer.body).await {
            Ok(bytes) => bytes,
            Err((why, detail)) => return Self::unanswered(judged.replies, pending, why, &detail),
        };
        if bytes.is_empty() && pending.is_empty() {
            return (status, returned).into_response();
        }
        let mut out = judged.replies;
        let mut pending = pending;
        match Parsed::of(bytes) {
            Ok(parsed) => {
                let relayed = self.judge_answer(&parsed, &mut pending, headers);
                out.extend(relayed);
            }
            Err(why) => say(&format!("withheld an answer from the server: {why}")),
        }
        out.extend(
            pending
                .values()
                .map(|p| unanswered_answer(p, "the MCP server did not answer")),
        );
        if out.is_empty() {
            return (status, returned).into_response();
        }
        json_response(status, returned, json_body(out))
    }

    /// One frame from the server judged, `pending` matched: what goes on
    /// (the guard's own answers to the server's requests sent off).
    /// `headers` are the client's, whose session and credentials the
    /// guard's own answers carry.
    fn judge_answer(
        self: &Arc<Self>,
        parsed: &Parsed,
        pending: &mut HashMap<String, Pending>,
        headers: &HeaderMap,
    ) -> Option<Vec<u8>> {
        let mut take = |key: &str| pending.remove(key);
        let judged = self.judging.judge_server(parsed, &mut take);
        for reply in judged.to_server {
            let (guard, headers) = (Arc::clone(self), headers.clone());
            tokio::spawn(async move {
                let sent = guard.send(Method::POST, &headers, json_type(), reply);
                if let Err(error) = sent.await {
                    say(&format!("could not answer the server's request: {error}"));
                }
            });
        }
        judged.forward
    }

    /// The client's answer when the server gave none: `replies`, then
    /// each request of `pending` answered with `why`; what went wrong in
    /// detail (the server's address, the transport's error) is only on
    /// standard error, never told the client.
    fn unanswered(
        replies: Vec<Vec<u8>>,
        pending: HashMap<String, Pending>,
        why: &str,
        detail: &str,
    ) -> Response {
        say(&format!("{why}: {detail}"));
        let mut out = replies;
        out.extend(pending.values().map(|p| unanswered_answer(p, why)));
        json_response(StatusCode::OK, HeaderMap::new(), json_body(out))
    }

    /// A server's event stream, each event judged as the client's
    /// connection asks for the next (no task or channel between them).
    fn relay_stream(
        self: &Arc<Self>,
        answer: ReplyBody,
        mut returned: HeaderMap,
        replies: Vec<Vec<u8>>,
        pending: HashMap<String, Pending>,
        headers: &HeaderMap,
    ) -> Response {
        let events: Arrived = Arc::default();
        let arrived = Arc::clone(&events);
        let limits = Limits {
            max_bytes: u64::MAX,
            max_line: MAX_LINE,
        };
        let reader: EventReader = Reader::new(
            limits,
            Box::new(move |event| {
                super::judge::lock(&arrived).push((event.id, event.data));
                true
            }),
        );
        let mut relaying = Relaying {
            guard: Arc::clone(self),
            headers: headers.clone(),
            answer: Some(answer),
            reader,
            events,
            pending,
            out: replies.iter().map(|reply| event(None, reply)).collect(),
        };
        returned.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        returned.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        if relaying.read_ready() {
            // The server's whole stream was already here (an answer it
            // sent with its length): the client gets it whole, with its
            // length, in one write.
            let whole: Vec<u8> = relaying
                .out
                .iter()
                .flat_map(|b| b.iter().copied())
                .collect();
            return (StatusCode::OK, returned, whole).into_response();
        }
        let stream = futures_util::stream::unfold(relaying, |mut relaying| async move {
            loop {
                if let Some(bytes) = relaying.out.pop_front() {
                    return Some((Ok::<_, Infallible>(bytes), relaying));
                }
                relaying.answer.as_ref()?;
                relaying.next().await;
            }
        });
        (StatusCode::OK, returned, Body::from_stream(stream)).into_response()
    }

    /// The server's own stream (GET): its requests and notifications
    /// judged; an answer there answers nothing in flight and is withheld.
    async fn server_stream(self: &Arc<Self>, headers: &HeaderMap) -> Response {
        match self
            .send(Method::GET, headers, HeaderMap::new(), Vec::new())
            .await
        {
            Ok(answer) if answer.status.is_success() => {
                let returned = kept(&answer.headers, RETURNED);
                self.relay_stream(answer.body, returned, Vec::new(), HashMap::new(), headers)
            }
            Ok(answer) => (answer.status, kept(&answer.headers, RETURNED)).into_response(),
            Err(error) => {
                say(&format!(
                    "the MCP server at {} cannot be reached ({error})",
                    self.upstream
                ));
                StatusCode::BAD_GATEWAY.into_response()
            }
        }
    }

    /// The session's end (DELETE), relayed.
    async fn end_session(&self, headers: &HeaderMap) -> Response {
        let sent = self.send(Method::DELETE, headers, HeaderMap::new(), Vec::new());
        match sent.await {
            Ok(answer) => answer.status.into_response(),
            Err(_) => StatusCode::BAD_GATEWAY.into_response(),
        }
    }
}

/// The events read and not judged yet: each one's id and data.
type Arrived = Arc<std::sync::Mutex<Vec<(Option<String>, String)>>>;

/// Reads a server's event stream into events.
type EventReader = Reader<Box<dyn FnMut(crate::providers::sse::Event) -> bool + Send>>;

/// A server's event stream being relayed: what is read, what waits to go
/// to the client, the requests still unanswered.
struct Relaying {
    guard: Arc<HttpGuard>,
    /// The client's request's headers (the guard's own answers to the
    /// server carry its session).
    headers: HeaderMap,
    /// `None` once the stream ended (and its unanswered requests were
    /// answered).
    answer: Option<ReplyBody>,
    reader: EventReader,
    events: Arrived,
    pending: HashMap<String, Pending>,
    out: std::collections::VecDeque<Bytes>,
}

impl Relaying {
    /// Reads the next piece of the stream and whatever else is already
    /// here, judging each event they complete into `out`; at its end,
    /// answers what is still unanswered.
    async fn next(&mut self) {
        let Some(answer) = self.answer.as_mut() else {
            return;
        };
        let read = answer.chunk().await;
        self.take(read);
        self.read_ready();
    }

    /// Takes in what of the stream is already here, as [`next`](Self::next)
    /// does, without waiting, up to [`READ_AHEAD`] bytes (a server that
    /// streams faster than the client reads is held to the client's pace,
    /// not buffered): `true` when the stream ended.
    fn read_ready(&mut self) -> bool {
        let mut taken = 0;
        while let Some(answer) = self.answer.as_mut() {
            if taken >= READ_AHEAD {
                return false;
            }
            let Some(read) = answer.ready_chunk() else {
                return false;
            };
            if let Ok(Some(chunk)) = &read {
                taken += chunk.len();
            }
            self.take(read);
        }
        true
    }

    /// One read of the stream taken in: the events it completes judged
    /// into `out`; at the stream's end, what is still unanswered answered.
    fn take(&mut self, read: Result<Option<Bytes>, ClientError>) {
        let ended = match read {
            Ok(Some(chunk)) => match self.reader.feed(&chunk) {
                Ok(_) => None,
                Err(error) => Some((
                    "the MCP server's stream became unreadable before it answered",
                    format!("{error:?}"),
                )),
            },
            Ok(None) => Some((
                "the MCP server's stream ended before it answered",
                String::new(),
            )),
            Err(error) => Some((
                "the MCP server's stream broke off before it answered",
                error.to_string(),
            )),
        };
        let arrived: Vec<(Option<String>, String)> =
            super::judge::lock(&self.events).drain(..).collect();
        for (id, data) in arrived {
            self.relay(id, &data);
        }
        if let Some((why, detail)) = ended {
            self.answer = None;
            if !self.pending.is_empty() {
                if detail.is_empty() {
                    say(why);
                } else {
                    say(&format!("{why}: {detail}"));
                }
                for p in self.pending.values() {
                    self.out.push_back(event(None, &unanswered_answer(p, why)));
                }
                self.pending.clear();
            }
        }
    }

    /// One event of the server's, judged into `out`.
    fn relay(&mut self, id: Option<String>, data: &str) {
        if data.trim().is_empty() {
            // A priming event (an id to resume from, no message): nothing
            // to judge.
            if let Some(id) = id {
                self.out
                    .push_back(Bytes::from(format!("id: {id}\ndata: \n\n")));
            }
            return;
        }
        match Parsed::of(data.as_bytes().to_vec()) {
            Ok(parsed) => {
                let answered = self
                    .guard
                    .judge_answer(&parsed, &mut self.pending, &self.headers);
                if let Some(message) = answered {
                    self.out.push_back(event(id.as_deref(), &message));
                }
            }
            Err(why) => say(&format!("withheld an event from the server: {why}")),
        }
    }
}

/// A whole answer body, at most [`MAX_LINE`] bytes; else what the client
/// is told, and the detail for standard error.
async fn read_capped(mut answer: ReplyBody) -> Result<Vec<u8>, (&'static str, String)> {
    let mut body = Vec::new();
    loop {
        match answer.chunk().await {
            Ok(Some(chunk)) => {
                body.extend_from_slice(&chunk);
                if body.len() > MAX_LINE {
                    return Err((
                        "the MCP server's answer was too long to judge: the guard withheld its answer to",
                        format!("over {MAX_LINE} bytes"),
                    ));
                }
            }
            Ok(None) => return Ok(body),
            Err(error) => {
                return Err((
                    "the MCP server's answer broke off before it answered",
                    error.to_string(),
                ))
            }
        }
    }
}

/// The 2026 routing headers of a message as judged: `Mcp-Method`, and
/// `Mcp-Name` (a call's tool, a read's URI, a prompt's name).
///
/// A value HTTP cannot carry in a header (a control character) is left
/// out: the server then refuses the request for want of it, as it would
/// refuse the name.
fn routing_headers(message: &[u8]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let Ok(parsed) = Parsed::of(message.to_vec()) else {
        return headers;
    };
    let src = &parsed.src;
    let params = parsed.root.get(src, "params");
    let method = parsed.root.get(src, "method").and_then(|m| m.text(src));
    let name = params
        .and_then(|p| p.get(src, "name").or_else(|| p.get(src, "uri")))
        .and_then(|n| n.text(src))
        .filter(|_| method.is_some());
    for (header, value) in [("mcp-method", method), ("mcp-name", name)] {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
            headers.insert(HeaderName::from_static(header), value);
        }
    }
    headers
}

/// The headers of `headers` that `names` keeps.
fn kept(headers: &HeaderMap, names: &[&'static str]) -> HeaderMap {
    let mut out = HeaderMap::new();
    for name in names {
        for value in headers.get_all(*name) {
            out.append(HeaderName::from_static(name), value.clone());
        }
    }
    out
}

/// `Content-Type: application/json`.
fn json_type() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers
}
