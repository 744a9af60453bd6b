//! HTTP/1.1 as the listeners speak it to their clients, and nothing more:
//! a request's head read ([`super::request`]: by `httparse`, hyper's own
//! parser), its body deframed as the service reads it
//! ([`crate::http1`]), and the answer
//! written with what of it is ready in one write: the head with a whole
//! body, or the head and then a stream's pieces as they come.
//!
//! Every byte a client sends is hostile until checked. A head is capped
//! (the header cap and 16 KiB more, 100 headers: 431). A request that
//! frames its body two ways (a length and a transfer coding, two
//! different lengths: the shapes of request smuggling), a length that is
//! not digits, a transfer coding other than `chunked`, a head that is not
//! HTTP/1.x or a name or value that is not one: refused (400, 501, 505)
//! with one line saying why, and the connection closed. A body that
//! breaks its own framing fails the service's read of it, and the
//! connection is not reused. Nothing here reads ahead of the request the
//! service answers: pipelined requests wait in the read buffer, in order.
//!
//! The memory a connection holds is what its request needs: the read
//! buffer grows from 4 KiB (up to the head's cap, or 64 KiB pieces of a
//! large body) and is let go once it is empty at a body's end, so a
//! stream being relayed holds no read buffer at all; the write buffer is
//! a response's head and the pieces ready at once.

use super::request::{head, Head, Refusal};
use super::{Answers, ConnectionLimits, WriteDeadline};
use crate::http1::{Chunk, Framing, Piece, READ_SIZE};
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Version};
use bytes::BytesMut;
use futures_util::FutureExt;
use http_body_util::BodyExt;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use std::cell::RefCell;
use std::io::{self, Write as _};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

/// A body piece this large is written from where it is, not copied into
/// the write buffer.
const COPY_UNDER: usize = 8 << 10;

/// The most written at once out of pieces that were ready together.
const WRITE_AT: usize = 64 << 10;

/// How long a connection closed with its request unread is drained, so
/// the client reads its answer rather than a reset.
const LINGER: Duration = Duration::from_secs(2);

/// The client's side of a connection: what was read and not yet taken,
/// and what is left of the body being read.
struct Reader {
    io: OwnedReadHalf,
    read: BytesMut,
    /// The current request's body: what is left of it.
    body: Framing,
    /// The body broke its framing, or the client left within it.
    broken: bool,
}

impl Reader {
    /// Reads more into the buffer, with room for `size` bytes made first
    /// when it is full; `Ok(0)`: the client closed its side.
    fn poll_more(&mut self, cx: &mut Context<'_>, size: usize) -> Poll<io::Result<usize>> {
        if self.read.capacity() == self.read.len() {
            self.read.reserve(size);
        }
        tokio_util::io::poll_read_buf(Pin::new(&mut self.io), cx, &mut self.read)
    }

    /// The body's next piece, reading as needed.
    fn poll_piece(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        loop {
            if self.broken {
                return Poll::Ready(Some(Err(BodyError(
                    "the request's body broke off".to_owned(),
                ))));
            }
            match self.body.next(&mut self.read) {
                Ok(Piece::Data(data)) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                Ok(Piece::End) => {
                    if self.read.is_empty() {
                        // Nothing pipelined behind it: hold no buffer
                        // while the answer is made (a stream, maybe).
                        self.read = BytesMut::new();
                    }
                    return Poll::Ready(None);
                }
                Ok(Piece::More) => {}
                Err(why) => {
                    self.broken = true;
                    return Poll::Ready(Some(Err(BodyError(format!("the request's body: {why}")))));
                }
            }
            let size = self.body.read_size();
            match std::task::ready!(self.poll_more(cx, size)) {
                Ok(0) => {
                    self.broken = true;
                    return Poll::Ready(Some(Err(BodyError(
                        "the client closed its connection within its request's body".to_owned(),
                    ))));
                }
                Ok(_) => {}
                Err(error) => {
                    self.broken = true;
                    return Poll::Ready(Some(Err(BodyError(format!(
                        "reading the request's body: {error}"
                    )))));
                }
            }
        }
    }

    /// Whether the body was read to its end.
    fn body_done(&self) -> bool {
        !self.broken
            && matches!(
                self.body,
                Framing::Length(0) | Framing::Chunked(Chunk::Done)
            )
    }
}

/// Why a request's body could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct BodyError(String);

/// A request's body as the service reads it: pieces out of the
/// connection's reader.
struct RequestBody(Arc<Mutex<Reader>>);

impl RequestBody {
    fn reader(&self) -> std::sync::MutexGuard<'_, Reader> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl HttpBody for RequestBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.reader().poll_piece(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.reader().body_done()
    }

    fn size_hint(&self) -> SizeHint {
        match self.reader().body {
            Framing::Length(left) => SizeHint::with_exact(left),
            _ => SizeHint::default(),
        }
    }
}

/// Serves one client's connection until it ends: a head read within the
/// header timeout, the service's answer written, and the next request on
/// the same connection while the client keeps it (and `closing` is not
/// set).
pub(super) async fn serve_connection(
    stream: TcpStream,
    service: impl Answers,
    limits: ConnectionLimits,
    mut closing: watch::Receiver<bool>,
    stalled: watch::Sender<bool>,
) {
    // An answer's head and a stream's pieces are separate writes: without
    // TCP_NODELAY, Nagle's algorithm holds the second for the client's
    // delayed ACK (up to 40 ms on Linux).
    let _ = stream.set_nodelay(true);
    let (read, write) = stream.into_split();
    let mut writer = WriteDeadline::new(write, limits.write_timeout, stalled);
    let shared = Arc::new(Mutex::new(Reader {
        io: read,
        read: BytesMut::new(),
        body: Framing::Length(0),
        broken: false,
    }));
    let max_head = (limits.header_cap + 16 * 1024).max(8 * 1024);
    let mut timer = Box::pin(tokio::time::sleep(limits.header_timeout));
    loop {
        let head = match next_head(&shared, max_head, &mut timer, limits, &mut closing).await {
            Ok(Some(head)) => head,
            Ok(None) => return,
            Err(Refusal(status, why)) => {
                tracing::debug!("refused a request: {why}");
                let mut answer = Response::new(Body::from(format!("{why}\n")));
                *answer.status_mut() = status;
                answer.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; charset=utf-8"),
                );
                if write_answer(&mut writer, answer, Answering::closing()).await {
                    linger(&shared, &mut writer).await;
                }
                return;
            }
        };
        if head.expects_continue
            && head.body != Framing::Length(0)
            && writer
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                .await
                .is_err()
        {
            return;
        }
        let answering = Answering {
            bodiless: head.method == Method::HEAD,
            http10: head.version == Version::HTTP_10,
            keep_alive: head.keep_alive,
        };
        let body = if head.body == Framing::Length(0) {
            Body::empty()
        } else {
            reader(&shared).body = head.body;
            Body::new(RequestBody(Arc::clone(&shared)))
        };
        let mut request = Request::new(body);
        *request.method_mut() = head.method;
        *request.uri_mut() = head.uri;
        *request.version_mut() = head.version;
        *request.headers_mut() = head.headers;
        let answer = match service.call(request).await {
            Ok(answer) => answer,
            Err(never) => match never {},
        };
        // The connection carries another request only when this one's
        // body was read to its end and nothing still holds it.
        let reusable = Arc::strong_count(&shared) == 1 && reader(&shared).body_done();
        let answering = Answering {
            keep_alive: answering.keep_alive && reusable && !*closing.borrow(),
            ..answering
        };
        let written = write_answer(&mut writer, answer, answering).await;
        if !written {
            return;
        }
        if !answering.keep_alive {
            if !reusable {
                linger(&shared, &mut writer).await;
            }
            return;
        }
    }
}

fn reader(shared: &Mutex<Reader>) -> std::sync::MutexGuard<'_, Reader> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The next request's head, read within the header timeout; `None`: the
/// connection ends (the client closed it, the timeout passed, or the
/// listener is closing and no request was begun).
async fn next_head(
    shared: &Mutex<Reader>,
    max: usize,
    timer: &mut Pin<Box<tokio::time::Sleep>>,
    limits: ConnectionLimits,
    closing: &mut watch::Receiver<bool>,
) -> Result<Option<Head>, Refusal> {
    let mut armed = false;
    loop {
        {
            let mut reader = reader(shared);
            if !reader.read.is_empty() {
                if let Some(head) = head(&mut reader.read, max)? {
                    return Ok(Some(head));
                }
            }
        }
        if *closing.borrow() {
            return Ok(None);
        }
        let mut read = std::future::poll_fn(|cx| reader(shared).poll_more(cx, READ_SIZE));
        // What is already there is read without a timer: the head of a
        // request sent with its connection, a pipelined one.
        let read = if let Some(read) = (&mut read).now_or_never() {
            read
        } else {
            if !armed {
                timer.as_mut().reset(Instant::now() + limits.header_timeout);
                armed = true;
            }
            tokio::select! {
                read = read => read,
                () = timer.as_mut() => return Ok(None),
                () = closed(closing) => return Ok(None),
            }
        };
        match read {
            Ok(0) | Err(_) => return Ok(None),
            Ok(_) => {}
        }
    }
}

/// Completes once the listener is closing.
async fn closed(closing: &mut watch::Receiver<bool>) {
    if closing.wait_for(|closing| *closing).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// How an answer is written.
#[derive(Debug, Clone, Copy)]
struct Answering {
    /// The request was a `HEAD`: the head only.
    bodiless: bool,
    /// The client speaks HTTP/1.0: no chunks.
    http10: bool,
    /// The connection carries another request after this one.
    keep_alive: bool,
}

impl Answering {
    /// An answer after which the connection is closed.
    fn closing() -> Self {
        Answering {
            bodiless: false,
            http10: false,
            keep_alive: false,
        }
    }
}

/// How an answer's body is framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Out {
    /// No body at all (a `HEAD`, a 204 or 304).
    None,
    /// This many bytes.
    Length(u64),
    /// Chunks.
    Chunked,
    /// Up to the connection's end (an HTTP/1.0 client's stream).
    UntilClose,
}

/// Writes `answer` to the client; `false`: the connection cannot go on
/// (a write failed or timed out, or the body broke off).
async fn write_answer(
    writer: &mut WriteDeadline<OwnedWriteHalf>,
    answer: Response<Body>,
    answering: Answering,
) -> bool {
    let (parts, mut body) = answer.into_parts();
    let status = parts.status;
    let framing = if status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        Out::None
    } else if let Some(length) = body.size_hint().exact() {
        Out::Length(length)
    } else if answering.http10 {
        Out::UntilClose
    } else {
        Out::Chunked
    };
    let mut out = Vec::with_capacity(256);
    write_head(&mut out, status, &parts.headers, framing, answering);
    // Not held while the body streams (its values may share the
    // upstream's read buffer).
    drop(parts);
    if answering.bodiless || framing == Out::None {
        return writer.write_all(&out).await.is_ok() && answering.keep_alive;
    }
    let mut left = match framing {
        Out::Length(length) => length,
        _ => 0,
    };
    loop {
        // What is ready goes out with what was gathered; a wait for more
        // comes only after the gathered bytes are written.
        let next = if let Some(next) = body.frame().now_or_never() {
            next
        } else {
            if !out.is_empty() {
                if writer.write_all(&out).await.is_err() {
                    return false;
                }
                out.clear();
            }
            body.frame().await
        };
        let data = match next {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                // Trailers: not sent (nothing here asks for them).
                Err(_) => continue,
            },
            Some(Err(error)) => {
                // Written as far as it went, then the connection closed:
                // the client sees a body cut short, never a whole one.
                tracing::debug!("an answer's body broke off: {error}");
                let _ = writer.write_all(&out).await;
                return false;
            }
            None => break,
        };
        if data.is_empty() {
            continue;
        }
        if let Out::Length(_) = framing {
            if data.len() as u64 > left {
                tracing::warn!("an answer's body ran past its length: cut");
                let _ = writer.write_all(&out).await;
                return false;
            }
            left -= data.len() as u64;
        }
        if framing == Out::Chunked {
            // Into the buffer directly (a Vec's writes cannot fail).
            let _ = write!(out, "{:x}\r\n", data.len());
        }
        if data.len() < COPY_UNDER {
            out.extend_from_slice(&data);
        } else {
            if writer.write_all(&out).await.is_err() || writer.write_all(&data).await.is_err() {
                return false;
            }
            out.clear();
        }
        if framing == Out::Chunked {
            out.extend_from_slice(b"\r\n");
        }
        if out.len() >= WRITE_AT {
            if writer.write_all(&out).await.is_err() {
                return false;
            }
            out.clear();
        }
    }
    if framing == Out::Chunked {
        out.extend_from_slice(b"0\r\n\r\n");
    }
    if !out.is_empty() && writer.write_all(&out).await.is_err() {
        return false;
    }
    match framing {
        Out::Length(_) if left != 0 => {
            tracing::warn!("an answer's body ended short of its length");
            false
        }
        Out::UntilClose => false,
        _ => answering.keep_alive,
    }
}

/// The answer's head, into `out`: the status line, the service's headers
/// less the framing ones (written here from `framing`), a `date`, and a
/// `connection: close` when the connection ends after it.
fn write_head(
    out: &mut Vec<u8>,
    status: StatusCode,
    headers: &HeaderMap,
    framing: Out,
    answering: Answering,
) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        if matches!(
            *name,
            header::CONTENT_LENGTH | header::TRANSFER_ENCODING | header::CONNECTION
        ) || name.as_str() == "keep-alive"
        {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !headers.contains_key(header::DATE) {
        out.extend_from_slice(b"date: ");
        date(out);
        out.extend_from_slice(b"\r\n");
    }
    match framing {
        Out::Length(length) => {
            out.extend_from_slice(b"content-length: ");
            out.extend_from_slice(length.to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Out::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        Out::None | Out::UntilClose => {}
    }
    if !answering.keep_alive || framing == Out::UntilClose {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Now as an HTTP date, into `out` (formatted once a second a thread).
fn date(out: &mut Vec<u8>) {
    thread_local! {
        static NOW: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let now = SystemTime::now();
    let second = now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    NOW.with(|cached| {
        let mut cached = cached.borrow_mut();
        if cached.0 != second {
            *cached = (second, httpdate::fmt_http_date(now));
        }
        out.extend_from_slice(cached.1.as_bytes());
    });
}

/// Closes a connection whose client may still be sending (a request
/// answered before its body was read, a refused one): the writing side
/// first, then what comes is read and dropped for a moment, so the
/// client reads its answer rather than a reset.
async fn linger(shared: &Mutex<Reader>, writer: &mut WriteDeadline<OwnedWriteHalf>) {
    if writer.shutdown().await.is_err() {
        return;
    }
    let drain = async {
        loop {
            let read = std::future::poll_fn(|cx| {
                let mut reader = reader(shared);
                reader.read.clear();
                reader.poll_more(cx, READ_SIZE)
            })
            .await;
            if !matches!(read, Ok(n) if n > 0) {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answers_head_names_its_framing_and_drops_the_services() {
        let mut headers = HeaderMap::new();
        headers.insert("x-a", HeaderValue::from_static("1"));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("999"));
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::DATE, HeaderValue::from_static("then"));
        let keep = Answering {
            bodiless: false,
            http10: false,
            keep_alive: true,
        };
        let mut out = Vec::new();
        write_head(&mut out, StatusCode::OK, &headers, Out::Length(2), keep);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 200 OK\r\nx-a: 1\r\ndate: then\r\ncontent-length: 2\r\n\r\n"
        );
        let mut out = Vec::new();
        write_head(
            &mut out,
            StatusCode::OK,
            &HeaderMap::new(),
            Out::Chunked,
            Answering::closing(),
        );
        let out = String::from_utf8(out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\ndate: "), "{out}");
        assert!(
            out.ends_with("GMT\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"),
            "{out}"
        );
    }
}
