//! A relay's connections to its upstream (the gateway's model API, the
//! MCP guard's remote server): HTTP/1.1 over TCP or TLS (rustls with the
//! web's roots), kept alive and reused most recent first, each on the
//! server lane whose runtime drives its socket ([`crate::lanes`]).
//!
//! A relay sends what it judged to the one upstream it was given, so
//! nothing of a general client is here: no redirects, no proxy variables,
//! no decompression, no URL parsed per request, and no HTTP stack: a
//! request is written in one piece, the answer's head is parsed by
//! `httparse` and its body's framing decoded as it is read ([`http1`]).
//! What a general client costs was measured: reqwest's URL handling and
//! redirect and retry layers were ~5 % of a bare gateway's CPU
//! (`--bench gateway -- profile`), and hyper's own client, with its
//! request channel and buffers, was the largest single part of the MCP
//! guard's CPU over HTTP and ~9 KiB of each gateway stream.
//!
//! - **Connect timeout**: the TCP connection and the TLS handshake.
//! - **Read timeout**: the wait for the answer's head (from the request's
//!   writing on), and between any two pieces of its body (none for a
//!   relay whose upstream may stay quiet for as long as it likes: an MCP
//!   server's event stream).
//! - **One task**: a connection is read by the task that reads its
//!   answer (no task of its own, no hop between tasks for each piece), so
//!   the pieces already read arrive together ([`ReplyBody::ready_chunk`]).
//! - **Reuse**: a connection goes back to the pool once the answer's body
//!   was read to its end, when the answer allows it (`Connection: close`,
//!   an HTTP/1.0 answer, or a body framed by the connection's end do not)
//!   and the upstream sent nothing past it; an answer dropped before its
//!   end closes its connection. A pooled connection is checked before it
//!   is used: one the upstream closed (or wrote to unasked) while it was
//!   idle is dropped, and a request a reused connection could not take is
//!   sent once more on a new one. A request written whole is never sent
//!   twice.

mod http1;

use crate::http1::{Framing, Piece, READ_SIZE};
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use bytes::BytesMut;
use http1::Parsed;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Idle connections kept for reuse, at most.
const MAX_IDLE: usize = 256;

/// The most bytes of a body's rest read (and dropped) to reuse its
/// connection ([`ReplyBody::drain_ready`]).
const MAX_DRAIN: usize = 64 << 10;

/// What a connection runs over: TCP, or TLS over TCP.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// One connection to the upstream, and what was read from it and not
/// taken yet.
struct Connection {
    io: Box<dyn Io>,
    read: BytesMut,
    /// The server lane whose runtime drives it ([`crate::lanes`]): it is
    /// reused on that lane only.
    lane: usize,
}

impl Connection {
    /// Reads more of the connection into `read`, with room for at least
    /// `room` bytes: how many came (0: the connection ended).
    ///
    /// With nothing held and a small read asked (a head, a stream's next
    /// events), the read goes into the stack and only what came is kept:
    /// a stream waiting for its next event then holds no read buffer.
    fn poll_read_more(
        &mut self,
        cx: &mut Context<'_>,
        room: usize,
    ) -> Poll<std::io::Result<usize>> {
        if self.read.is_empty() && room <= READ_SIZE {
            let mut stack = [std::mem::MaybeUninit::<u8>::uninit(); READ_SIZE];
            let mut buf = ReadBuf::uninit(&mut stack);
            std::task::ready!(Pin::new(&mut self.io).poll_read(cx, &mut buf))?;
            self.read = BytesMut::from(buf.filled());
            return Poll::Ready(Ok(self.read.len()));
        }
        if self.read.capacity() - self.read.len() < room / 2 {
            self.read.reserve(room);
        }
        tokio_util::io::poll_read_buf(Pin::new(&mut self.io), cx, &mut self.read)
    }

    /// Whether an idle connection is still open and quiet: the upstream
    /// has not closed it, and has sent nothing unasked.
    fn still_open(&mut self) -> bool {
        if !self.read.is_empty() {
            return false;
        }
        let mut probe = [0u8; 1];
        let mut buf = ReadBuf::new(&mut probe);
        let polled =
            Pin::new(&mut self.io).poll_read(&mut Context::from_waker(Waker::noop()), &mut buf);
        polled.is_pending()
    }

    /// Writes `bytes` (a request) whole. While the upstream takes none
    /// of it, what it sends is read: an answer whose head comes before
    /// the request was written whole (a refusal such as a 413, sent
    /// without reading the rest) ends the writing and is the answer; the
    /// connection is not used again.
    async fn write(&mut self, bytes: &[u8], bodiless: bool) -> Result<Wrote, Sent> {
        let mut written = 0;
        std::future::poll_fn(|cx| {
            while written < bytes.len() {
                let wrote = Pin::new(&mut self.io).poll_write(cx, &bytes[written..]);
                match wrote {
                    Poll::Ready(Ok(0)) => {
                        return Poll::Ready(Err(Sent::Not("wrote nothing".into())))
                    }
                    Poll::Ready(Ok(n)) => written += n,
                    Poll::Ready(Err(error)) => {
                        return Poll::Ready(Err(Sent::Not(error.to_string())))
                    }
                    Poll::Pending => match self.poll_read_more(cx, READ_SIZE) {
                        Poll::Ready(Ok(0)) => {
                            let why = "the upstream closed the connection while it was sent";
                            return Poll::Ready(Err(Sent::Not(why.to_owned())));
                        }
                        Poll::Ready(Ok(_)) => match self.parsed_head(bodiless) {
                            Ok(Some(mut head)) => {
                                head.keep_alive = false;
                                return Poll::Ready(Ok(Wrote::Answered(head)));
                            }
                            Ok(None) => {}
                            Err(error) => return Poll::Ready(Err(Sent::Failed(error))),
                        },
                        Poll::Ready(Err(error)) => {
                            return Poll::Ready(Err(Sent::Not(error.to_string())))
                        }
                        Poll::Pending => return Poll::Pending,
                    },
                }
            }
            Pin::new(&mut self.io)
                .poll_flush(cx)
                .map(|flushed| match flushed {
                    Ok(()) => Ok(Wrote::Whole),
                    Err(error) => Err(Sent::Not(error.to_string())),
                })
        })
        .await
    }

    /// The answer's head when `read` holds it whole (interim answers
    /// taken out and skipped); `bodiless`: the request's answer has no
    /// body.
    fn parsed_head(&mut self, bodiless: bool) -> Result<Option<http1::Head>, ClientError> {
        while !self.read.is_empty() {
            match http1::head(&mut self.read, bodiless).map_err(ClientError::Failed)? {
                Parsed::Head(head) => return Ok(Some(head)),
                Parsed::Interim => {}
                Parsed::Partial => return Ok(None),
            }
        }
        Ok(None)
    }

    /// The answer's head, read until it is whole.
    async fn head(&mut self, bodiless: bool) -> Result<http1::Head, ClientError> {
        loop {
            if let Some(head) = self.parsed_head(bodiless)? {
                return Ok(head);
            }
            let read = std::future::poll_fn(|cx| self.poll_read_more(cx, READ_SIZE)).await;
            match read {
                Ok(0) => {
                    return Err(ClientError::Failed(
                        "the upstream closed the connection before its answer".to_owned(),
                    ))
                }
                Ok(_) => {}
                Err(error) => return Err(ClientError::Failed(error.to_string())),
            }
        }
    }
}

/// How a request's writing ended.
enum Wrote {
    /// Written whole: the answer is still to read.
    Whole,
    /// The upstream answered before it took the whole request.
    Answered(http1::Head),
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
    /// The connection, until the body ended or broke off (back to the
    /// pool when it ended and the connection may be reused).
    connection: Option<Connection>,
    framing: Framing,
    keep_alive: bool,
    idle: Idle,
    read_timeout: Option<Duration>,
    /// Why the body broke off, once it did (told again to any later
    /// read).
    broken: Option<ClientError>,
}

impl ReplyBody {
    /// Polls for the next piece.
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, ClientError>> {
        if let Some(broken) = &self.broken {
            return Poll::Ready(Err(broken.clone()));
        }
        let Some(connection) = self.connection.as_mut() else {
            return Poll::Ready(Ok(None));
        };
        loop {
            match self.framing.next(&mut connection.read) {
                Ok(Piece::Data(bytes)) => return Poll::Ready(Ok(Some(bytes))),
                Ok(Piece::End) => {
                    if let Some(connection) = self.connection.take() {
                        if self.keep_alive {
                            give_back(&self.idle, connection);
                        }
                    }
                    return Poll::Ready(Ok(None));
                }
                Ok(Piece::More) => {}
                Err(why) => return Poll::Ready(Err(self.broke(why))),
            }
            let room = self.framing.read_size();
            match std::task::ready!(connection.poll_read_more(cx, room)) {
                Ok(0) if self.framing.ends_at_close() => {
                    self.connection = None;
                    return Poll::Ready(Ok(None));
                }
                Ok(0) => {
                    let why = "the upstream closed the connection before the answer's end";
                    return Poll::Ready(Err(self.broke(why.to_owned())));
                }
                Ok(_) => {}
                Err(error) => return Poll::Ready(Err(self.broke(error.to_string()))),
            }
        }
    }

    /// The body broke off for `why`: its connection closed, the error
    /// kept.
    fn broke(&mut self, why: String) -> ClientError {
        self.connection = None;
        let error = ClientError::Failed(why);
        self.broken = Some(error.clone());
        error
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

    /// Reads what is left of the body when it is already here, at most
    /// [`MAX_DRAIN`] bytes, so its connection goes back to the pool: a
    /// stream's end after its last event (its last chunk, a `[DONE]` no
    /// relay waits for). A body whose rest is not here at once is dropped
    /// with its connection, as before.
    pub(crate) fn drain_ready(&mut self) {
        let mut left = MAX_DRAIN;
        while let Some(Ok(Some(piece))) = self.ready_chunk() {
            if piece.len() >= left {
                self.connection = None;
                return;
            }
            left -= piece.len();
        }
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

/// `connection` back among the idle ones (when nothing more was read from
/// it and there is room). Its read buffer is let go while it waits.
fn give_back(idle: &Mutex<Vec<Connection>>, mut connection: Connection) {
    if !connection.read.is_empty() {
        // The upstream sent more than its answer: not trusted again.
        return;
    }
    connection.read = BytesMut::new();
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
        let prefix = self.endpoint.prefix.as_str();
        let mut target = match query.filter(|q| !q.is_empty()) {
            Some(query) => [prefix, path, "?", query].concat(),
            None => [prefix, path].concat(),
        };
        if !target.starts_with('/') {
            target.insert(0, '/');
        }
        let uri: Uri = target.parse().map_err(|e| ClientError::BadUrl {
            url: target.clone(),
            why: format!("{e}"),
        })?;
        let target = uri.path_and_query().map_or("/", |p| p.as_str());
        let bytes = http1::request(&method, target, &self.endpoint.authority, &headers, &body);
        let bodiless = method == Method::HEAD;
        let (mut connection, reused) = match self.pooled() {
            Some(connection) => (connection, true),
            None => (self.connect().await?, false),
        };
        let head = match self.send(&mut connection, &bytes, bodiless).await {
            Err(Sent::Not(_)) if reused => {
                // The idle connection was closed under it: once more, new.
                connection = self.connect().await?;
                self.send(&mut connection, &bytes, bodiless).await
            }
            other => other,
        };
        let head = head.map_err(|sent| match sent {
            Sent::Not(why) => ClientError::Connect(format!("the request could not be sent: {why}")),
            Sent::Failed(error) => error,
        })?;
        Ok(Reply {
            status: head.status,
            headers: head.headers,
            body: ReplyBody {
                connection: Some(connection),
                framing: head.framing,
                keep_alive: head.keep_alive,
                idle: Arc::clone(&self.idle),
                read_timeout: self.read_timeout,
                broken: None,
            },
        })
    }

    /// `bytes` (a request) on `connection`, within the read timeout: the
    /// answer's head.
    async fn send(
        &self,
        connection: &mut Connection,
        bytes: &[u8],
        bodiless: bool,
    ) -> Result<http1::Head, Sent> {
        let exchange = async {
            match connection.write(bytes, bodiless).await {
                Ok(Wrote::Whole) => connection.head(bodiless).await.map_err(Sent::Failed),
                Ok(Wrote::Answered(head)) => Ok(head),
                // An upstream may answer before it read the whole request
                // and close: its answer, when it is there.
                Err(Sent::Not(why)) => connection.head(bodiless).await.map_err(|_| Sent::Not(why)),
                Err(failed) => Err(failed),
            }
        };
        within(self.read_timeout, exchange)
            .await
            .unwrap_or_else(|timed_out| Err(Sent::Failed(timed_out)))
    }

    /// The most recently used idle connection of this lane still open.
    fn pooled(&self) -> Option<Connection> {
        let lane = crate::lanes::current();
        loop {
            let mut connection = {
                let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
                let at = idle.iter().rposition(|c| c.lane == lane)?;
                idle.remove(at)
            };
            if connection.still_open() {
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
            let io: Box<dyn Io> = match &endpoint.tls {
                None => Box::new(stream),
                Some((connector, name)) => Box::new(
                    connector
                        .connect(name.clone(), stream)
                        .await
                        .map_err(|e| ClientError::Connect(format!("TLS: {e}")))?,
                ),
            };
            Ok(Connection {
                io,
                read: BytesMut::new(),
                lane: crate::lanes::current(),
            })
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

/// How a request's sending went wrong.
enum Sent {
    /// It could not be written: the upstream cannot have read it whole.
    Not(String),
    /// It was written, and no head came.
    Failed(ClientError),
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

#[cfg(test)]
mod tests;
