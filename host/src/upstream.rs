//! A relay's connections to its upstream (the gateway's model API, the
//! MCP guard's remote server): HTTP/1.1 by hyper directly, over TCP or TLS
//! (rustls with the web's roots), kept alive and reused most recent first.
//!
//! A relay sends what it judged to the one upstream it was given, so
//! nothing of a general client is here: no redirects, no proxy variables,
//! no decompression, no URL parsed per request. What a general client
//! costs was measured (`--bench gateway -- profile`): its URL handling and
//! redirect and retry layers were ~5 % of a bare gateway's CPU, and its
//! pooled connections answered through a channel of their own.
//!
//! - **Connect timeout**: the TCP connection and the TLS handshake.
//! - **Read timeout**: the wait for the answer's head, and between any two
//!   pieces of its body (none for a relay whose upstream may stay quiet
//!   for as long as it likes: an MCP server's event stream).
//! - **One task**: a connection is driven by the task that reads its
//!   answer (no task of its own, no hop between tasks for each piece), so
//!   the pieces already read arrive together ([`ReplyBody::ready_chunk`]).
//! - **Reuse**: a connection goes back to the pool once the answer's body
//!   was read to its end; an answer dropped before its end closes its
//!   connection. A request the pooled connection could not take (the
//!   upstream closed it while it was idle) is sent once more on a new one:
//!   hyper hands it back unsent, so nothing is sent twice.

use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// Idle connections kept for reuse, at most.
const MAX_IDLE: usize = 256;

/// A connection's sending half.
type Sender = SendRequest<Full<Bytes>>;

/// What a connection runs over: TCP, or TLS over TCP.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A connection's driving half: polled by whoever is using it.
type Driver = hyper::client::conn::http1::Connection<TokioIo<Box<dyn Io>>, Full<Bytes>>;

/// One connection to the upstream.
struct Connection {
    sender: Sender,
    /// `None` once the connection closed: dropped then, so whatever waits
    /// on it (a request queued, the sender's readiness) is told at once
    /// instead of waiting on a driver nobody polls.
    driver: Option<Driver>,
}

impl Connection {
    /// Drives the connection until it would wait (dropping the driver when
    /// the connection closed).
    fn drive(&mut self, cx: &mut Context<'_>) {
        if let Some(driver) = self.driver.as_mut() {
            if Pin::new(driver).poll(cx).is_ready() {
                self.driver = None;
            }
        }
    }

    /// Whether the connection closed.
    fn closed(&self) -> bool {
        self.driver.is_none() || self.sender.is_closed()
    }

    /// Drives the connection, then polls `future`.
    fn poll_with<F: Future + Unpin>(
        &mut self,
        future: &mut F,
        cx: &mut Context<'_>,
    ) -> Poll<F::Output> {
        self.drive(cx);
        Pin::new(future).poll(cx)
    }

    /// `future`, the connection driven while it waits.
    async fn driving<F: Future + Unpin>(&mut self, mut future: F) -> F::Output {
        std::future::poll_fn(|cx| self.poll_with(&mut future, cx)).await
    }
}

/// Why no answer came.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ClientError {
    /// The base URL (or a request's path and query under it) is not one
    /// the gateway can send to: nothing was sent.
    #[error("the upstream URL {url} is not an http:// or https:// URL: {why}")]
    BadUrl {
        /// The URL as configured.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// A header of the request cannot be sent (a pack wrote it).
    #[error("the request header {0:?} cannot be sent")]
    BadHeader(String),
    /// No connection could be made: nothing was sent.
    #[error("cannot connect to the upstream: {0}")]
    Connect(String),
    /// The connection failed after the request may have been sent.
    #[error("{0}")]
    Failed(String),
    /// The upstream sent nothing for the read timeout.
    #[error("timed out: the upstream sent nothing for {0:?}")]
    TimedOut(Duration),
}

impl ClientError {
    /// `false` when the request cannot have reached the upstream.
    pub(crate) fn may_have_reached(&self) -> bool {
        matches!(self, ClientError::Failed(_) | ClientError::TimedOut(_))
    }
}

/// Where the upstream is and how to reach it.
struct Endpoint {
    host: String,
    port: u16,
    /// The `Host` header.
    authority: HeaderValue,
    /// The base URL's path, with no trailing `/`.
    prefix: String,
    /// For `https://`.
    tls: Option<(
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
}

/// The pooled connections to one upstream.
pub(crate) struct Client {
    endpoint: Endpoint,
    connect_timeout: Duration,
    read_timeout: Option<Duration>,
    idle: Idle,
}

/// An answer's head, and its body to read.
pub(crate) struct Reply {
    /// Its status.
    pub(crate) status: StatusCode,
    /// Its headers.
    pub(crate) headers: HeaderMap,
    /// Its body.
    pub(crate) body: ReplyBody,
}

/// An answer's body, read piece by piece.
pub(crate) struct ReplyBody {
    incoming: Incoming,
    /// The connection, back to the pool when the body ends.
    connection: Option<Connection>,
    idle: Idle,
    read_timeout: Option<Duration>,
}

/// What a frame of the body comes to: a piece, the end, or nothing to
/// hand on (an empty piece, trailers).
fn piece(
    frame: Option<Result<hyper::body::Frame<Bytes>, hyper::Error>>,
) -> Option<Result<Option<Bytes>, ClientError>> {
    match frame {
        None => Some(Ok(None)),
        Some(Err(error)) => Some(Err(ClientError::Failed(chain(&error)))),
        Some(Ok(frame)) => match frame.into_data() {
            Ok(data) if !data.is_empty() => Some(Ok(Some(data))),
            _ => None,
        },
    }
}

impl ReplyBody {
    /// Polls for the next piece, driving the connection.
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, ClientError>> {
        loop {
            let frame = match self.connection.as_mut() {
                Some(connection) => {
                    let mut next = self.incoming.frame();
                    std::task::ready!(connection.poll_with(&mut next, cx))
                }
                None => std::task::ready!(hyper::body::Body::poll_frame(
                    Pin::new(&mut self.incoming),
                    cx
                )),
            };
            match piece(frame) {
                None => {}
                Some(Ok(None)) => {
                    if let Some(connection) = self.connection.take() {
                        give_back(&self.idle, connection);
                    }
                    return Poll::Ready(Ok(None));
                }
                Some(done) => return Poll::Ready(done),
            }
        }
    }

    /// The next piece of the body; `Ok(None)` at its end.
    ///
    /// # Errors
    ///
    /// [`ClientError`] when it broke off or nothing came for the read
    /// timeout.
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, ClientError> {
        let limit = self.read_timeout;
        within(limit, std::future::poll_fn(|cx| self.poll_chunk(cx))).await?
    }

    /// The next piece when it is already read from the upstream (`None`:
    /// it is not yet, and [`chunk`](Self::chunk) would wait).
    pub(crate) fn ready_chunk(&mut self) -> Option<Result<Option<Bytes>, ClientError>> {
        match self.poll_chunk(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(result) => Some(result),
            Poll::Pending => None,
        }
    }
}

/// The idle connections of one upstream, most recently used last.
type Idle = Arc<Mutex<Vec<Connection>>>;

/// `connection` back among the idle ones (when it is open and there is
/// room).
fn give_back(idle: &Mutex<Vec<Connection>>, connection: Connection) {
    if connection.closed() {
        return;
    }
    let mut idle = idle.lock().unwrap_or_else(PoisonError::into_inner);
    if idle.len() < MAX_IDLE {
        idle.push(connection);
    }
}

impl Client {
    /// A client of the upstream at `base` (`http://` or `https://`, with
    /// an optional path every request's path goes under); `read_timeout`:
    /// how long an answer may keep the client waiting for its head and
    /// then for each piece (`None`: as long as it likes).
    ///
    /// # Errors
    ///
    /// [`ClientError::BadUrl`] for anything else.
    pub(crate) fn new(
        base: &str,
        connect_timeout: Duration,
        read_timeout: Option<Duration>,
    ) -> Result<Self, ClientError> {
        let bad = |why: &str| ClientError::BadUrl {
            url: base.to_owned(),
            why: why.to_owned(),
        };
        let uri: Uri = base.parse().map_err(|e| bad(&format!("{e}")))?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(bad("the scheme must be http or https")),
        };
        let authority = uri.authority().ok_or_else(|| bad("it names no host"))?;
        if authority.as_str().contains('@') {
            return Err(bad(
                "credentials go in a header (a key, an Authorization), not in the URL",
            ));
        }
        if uri.query().is_some() {
            return Err(bad("a base URL takes no query"));
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let tls = if tls {
            let name = rustls::pki_types::ServerName::try_from(host.clone())
                .map_err(|e| bad(&format!("{e}")))?;
            Some((tls_connector().map_err(|e| bad(&e))?, name))
        } else {
            None
        };
        Ok(Client {
            endpoint: Endpoint {
                authority: HeaderValue::from_str(authority.as_str())
                    .map_err(|e| bad(&format!("{e}")))?,
                host,
                port,
                prefix: uri.path().trim_end_matches('/').to_owned(),
                tls,
            },
            connect_timeout,
            read_timeout,
            idle: Arc::default(),
        })
    }

    /// POSTs `body` to `path` (under the base URL's path; `query` as the
    /// client sent it) with `headers` (and `Host`, `Content-Length`).
    ///
    /// # Errors
    ///
    /// [`ClientError`] when no answer's head came.
    pub(crate) async fn post(
        &self,
        path: &str,
        query: Option<&str>,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Reply, ClientError> {
        self.request(Method::POST, path, query, headers, body).await
    }

    /// `method` on `path` (under the base URL's path; `query` as given)
    /// with `headers` and `body`, as [`post`](Self::post) sends.
    ///
    /// # Errors
    ///
    /// [`ClientError`] when no answer's head came.
    pub(crate) async fn request(
        &self,
        method: Method,
        path: &str,
        query: Option<&str>,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Reply, ClientError> {
        let mut target = match query.filter(|q| !q.is_empty()) {
            Some(query) => format!("{}{path}?{query}", self.endpoint.prefix),
            None => format!("{}{path}", self.endpoint.prefix),
        };
        if !target.starts_with('/') {
            target.insert(0, '/');
        }
        let uri: Uri = target.parse().map_err(|e| ClientError::BadUrl {
            url: target.clone(),
            why: format!("{e}"),
        })?;
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        *request.headers_mut() = headers;
        request
            .headers_mut()
            .insert(header::HOST, self.endpoint.authority.clone());
        let pooled = self.pooled();
        let reused = pooled.is_some();
        let mut connection = match pooled {
            Some(connection) => connection,
            None => self.connect().await?,
        };
        let answered = match self.send(&mut connection, request).await {
            Err(Unsent(request)) if reused => {
                // The idle connection was closed under it: once more, new.
                connection = self.connect().await?;
                self.send(&mut connection, request).await
            }
            other => other,
        };
        let response = answered.map_err(|Unsent(_)| {
            ClientError::Connect("the connection closed before the request was sent".to_owned())
        })??;
        let (parts, incoming) = response.into_parts();
        Ok(Reply {
            status: parts.status,
            headers: parts.headers,
            body: ReplyBody {
                incoming,
                connection: Some(connection),
                idle: Arc::clone(&self.idle),
                read_timeout: self.read_timeout,
            },
        })
    }

    /// `request` on `connection`: the answer's head, or the request back
    /// when the connection could not take it.
    async fn send(
        &self,
        connection: &mut Connection,
        request: Request<Full<Bytes>>,
    ) -> Result<Result<hyper::Response<Incoming>, ClientError>, Unsent> {
        let ready = std::future::poll_fn(|cx| {
            connection.drive(cx);
            connection.sender.poll_ready(cx)
        })
        .await;
        if ready.is_err() {
            return Err(Unsent(request));
        }
        let sent = connection.sender.try_send_request(request);
        let answer = within(self.read_timeout, connection.driving(Box::pin(sent)));
        match answer.await {
            Err(timed_out) => Ok(Err(timed_out)),
            Ok(Ok(response)) => Ok(Ok(response)),
            Ok(Err(mut error)) => match error.take_message() {
                Some(request) => Err(Unsent(request)),
                None => Ok(Err(ClientError::Failed(chain(error.error())))),
            },
        }
    }

    /// The most recently used idle connection still open.
    fn pooled(&self) -> Option<Connection> {
        loop {
            let connection = self
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop()?;
            if !connection.closed() {
                return Some(connection);
            }
        }
    }

    /// A new connection.
    async fn connect(&self) -> Result<Connection, ClientError> {
        let endpoint = &self.endpoint;
        let connected = tokio::time::timeout(self.connect_timeout, async {
            let stream = TcpStream::connect((endpoint.host.as_str(), endpoint.port))
                .await
                .map_err(|e| ClientError::Connect(e.to_string()))?;
            let _ = stream.set_nodelay(true);
            match &endpoint.tls {
                None => handshake(Box::new(stream)).await,
                Some((connector, name)) => {
                    let stream = connector
                        .connect(name.clone(), stream)
                        .await
                        .map_err(|e| ClientError::Connect(format!("TLS: {e}")))?;
                    handshake(Box::new(stream)).await
                }
            }
        })
        .await;
        connected.unwrap_or_else(|_| {
            Err(ClientError::Connect(format!(
                "timed out: no connection within {:?}",
                self.connect_timeout
            )))
        })
    }
}

/// `future`'s output, unless `limit` passes first.
async fn within<F: Future>(limit: Option<Duration>, future: F) -> Result<F::Output, ClientError> {
    match limit {
        Some(limit) => tokio::time::timeout(limit, future)
            .await
            .map_err(|_| ClientError::TimedOut(limit)),
        None => Ok(future.await),
    }
}

/// A request a connection handed back unsent.
struct Unsent(Request<Full<Bytes>>);

/// HTTP/1.1 over `io`.
async fn handshake(io: Box<dyn Io>) -> Result<Connection, ClientError> {
    let (sender, driver) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| ClientError::Connect(chain(&e)))?;
    Ok(Connection {
        sender,
        driver: Some(driver),
    })
}

/// TLS as the web does it: rustls (ring), the Mozilla roots, HTTP/1.1.
fn tls_connector() -> Result<tokio_rustls::TlsConnector, String> {
    let roots: rustls::RootCertStore = webpki_roots::TLS_SERVER_ROOTS.iter().cloned().collect();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// An error and its causes, in one line.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    crate::types::one_line(&crate::types::error_chain(error))
}

/// `(name, value)` pairs as a header map.
///
/// # Errors
///
/// [`ClientError::BadHeader`] for a name or value HTTP cannot carry.
pub(crate) fn header_map<'a>(
    pairs: impl Iterator<Item = (&'a str, &'a str)>,
) -> Result<HeaderMap, ClientError> {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        let bad = || ClientError::BadHeader(name.to_owned());
        map.append(
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?,
            HeaderValue::from_str(value).map_err(|_| bad())?,
        );
    }
    Ok(map)
}
