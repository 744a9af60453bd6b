//! A server's connections (the gateway's, the MCP guard's over HTTP):
//! HTTP/1.1 served by the listener's own connection loop ([`http1`]:
//! one task a connection, no HTTP stack between the socket and the
//! service), with the bounds a client cannot keep a connection open past:
//!
//! - **Header timeout.** A request's head must arrive whole within
//!   `header_timeout` of the connection being ready for it (an idle
//!   keep-alive connection waits as long for the next one); else the
//!   connection is closed. A head is buffered up to the header cap and
//!   16 KiB more (a longer one is answered 431).
//! - **Write timeout.** A write the client takes none of for
//!   `write_timeout` fails: the connection is closed, and a stream being
//!   relayed on it is told ([`stalled`]), so the relay stops — its
//!   upstream call cancelled, its slot given back — instead of waiting on
//!   a client that does not read.
//!
//! On shutdown the listener closes, each connection finishes the request
//! it is answering, and `serve` returns once every connection is done.

mod http1;
mod pipe;
mod request;

pub(crate) use pipe::{streamed, Writer};

use axum::body::Body;
use axum::http::{Request, Response};
use hyper::service::Service;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncWrite;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};

tokio::task_local! {
    /// The connection a request came in on, while it is answered: `true`
    /// once a write to it timed out.
    static STALLED: watch::Receiver<bool>;
}

/// What a connection is allowed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionLimits {
    /// See the module docs.
    pub(crate) header_timeout: Duration,
    /// See the module docs.
    pub(crate) write_timeout: Duration,
    /// The header cap: the head is buffered up to this and 16 KiB more.
    pub(crate) header_cap: usize,
}

/// Completes when a write to the connection the current request came in
/// on timed out; `None` outside a connection served here (a test's own
/// router). Taken while the request is answered, awaited anywhere after.
pub(crate) fn stalled() -> Option<impl Future<Output = ()> + Send + 'static> {
    let mut receiver = STALLED.try_with(watch::Receiver::clone).ok()?;
    Some(async move {
        if receiver.wait_for(|stalled| *stalled).await.is_err() {
            // The connection ended without a timed-out write.
            std::future::pending::<()>().await;
        }
    })
}

/// `future` run on the current task (no hop to another task and back
/// while the client waits) that still runs to its end when the client
/// leaves first: dropped unfinished, it goes on as a task of its own, its
/// output dropped. For work that must finish once begun (an upstream call
/// that is charged, a reply that is judged and counted). A panic in it is
/// caught, as a task's would be, and answered with `on_panic()`.
pub(crate) fn to_the_end<F>(future: F, on_panic: fn() -> F::Output) -> ToTheEnd<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    ToTheEnd {
        // Boxed as it is, and nothing more: a future moved through
        // wrappers first (a task-local scope, an `Either`) was copied
        // whole at each of them, and an exchange's is several KiB.
        future: Some(Box::pin(future)),
        stalled: STALLED.try_with(watch::Receiver::clone).ok(),
        on_panic,
    }
}

/// See [`to_the_end`].
pub(crate) struct ToTheEnd<T: Send + 'static> {
    future: Option<Pin<Box<dyn Future<Output = T> + Send>>>,
    /// The connection it was begun for ([`stalled`]): polled here, it runs
    /// within that connection's scope already; spawned, it gets it again.
    stalled: Option<watch::Receiver<bool>>,
    on_panic: fn() -> T,
}

impl<T: Send + 'static> Future for ToTheEnd<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let Some(future) = self.future.as_mut() else {
            // Polled after it finished: a caller's bug, never ours.
            return Poll::Pending;
        };
        let polled =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| future.as_mut().poll(cx)));
        let output = match polled {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(output)) => output,
            Err(_) => (self.on_panic)(),
        };
        self.future = None;
        Poll::Ready(output)
    }
}

impl<T: Send + 'static> Drop for ToTheEnd<T> {
    fn drop(&mut self) {
        if let Some(future) = self.future.take() {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                match self.stalled.take() {
                    Some(stalled) => runtime.spawn(STALLED.scope(stalled, future)),
                    None => runtime.spawn(future),
                };
            }
        }
    }
}

/// What a listener serves: each request of a connection answered (the
/// gateway's axum router through
/// `hyper_util::service::TowerToHyperService`, the MCP guard's own
/// function with no router between).
pub(crate) trait Answers:
    Service<
        Request<Body>,
        Response = Response<Body>,
        Error = std::convert::Infallible,
        Future: Send + 'static,
    > + Clone
    + Send
    + Sync
    + 'static
{
}

// Every such service is one: the bounds above again, as a trait alias
// is written on stable Rust.
impl<S> Answers for S where
    S: Service<
            Request<Body>,
            Response = Response<Body>,
            Error = std::convert::Infallible,
            Future: Send + 'static,
        > + Clone
        + Send
        + Sync
        + 'static
{
}

/// Serves `service` on `listener` within `limits` until `shutdown`
/// completes, then lets each connection finish the request it answers.
///
/// # Errors
///
/// None so far: a failed accept (a reset connection, no file descriptor
/// left) is waited out and accepting goes on. The `Result` is the
/// public `Gateway::serve`'s.
pub(crate) async fn serve(
    service: impl Answers,
    listener: TcpListener,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let (closing, closed) = watch::channel(false);
    // Each connection holds a receiver; all of them dropped: all done.
    let (done, connections) = watch::channel(());
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    if !is_connection_error(&error) {
                        // Out of descriptors, most likely: connections
                        // ending will free some.
                        tracing::warn!("accepting a connection: {error}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        tokio::spawn(connection(
            stream,
            service.clone(),
            limits,
            closed.clone(),
            connections.clone(),
        ));
    }
    drop(listener);
    closing.send_replace(true);
    drop(connections);
    done.closed().await;
    Ok(())
}

/// Errors of one connection, not of the listener.
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// One connection, served until it ends (or, once `closing` says so,
/// until the request it answers is answered).
async fn connection(
    stream: TcpStream,
    service: impl Answers,
    limits: ConnectionLimits,
    closing: watch::Receiver<bool>,
    _alive: watch::Receiver<()>,
) {
    let (stalled, watched) = watch::channel(false);
    STALLED
        .scope(
            watched,
            http1::serve_connection(stream, service, limits, closing, stalled),
        )
        .await;
}

/// A connection whose writes fail once one has waited `limit` for the
/// client to take anything, saying so on `stalled`.
struct WriteDeadline<W> {
    io: W,
    limit: Duration,
    /// Armed while a write waits.
    timer: Option<Pin<Box<Sleep>>>,
    armed: bool,
    stalled: watch::Sender<bool>,
}

impl<W> WriteDeadline<W> {
    fn new(io: W, limit: Duration, stalled: watch::Sender<bool>) -> Self {
        WriteDeadline {
            io,
            limit,
            timer: None,
            armed: false,
            stalled,
        }
    }

    /// `result` of a write, with the deadline kept: armed when the write
    /// waits, disarmed when it went through, an error once it passed.
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if result.is_ready() {
            self.armed = false;
            return result;
        }
        let deadline = Instant::now() + self.limit;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if !self.armed {
            timer.as_mut().reset(deadline);
            self.armed = true;
        }
        match self.expired(cx) {
            Some(error) => Poll::Ready(Err(error)),
            None => Poll::Pending,
        }
    }

    /// The error to answer with when a write has been waiting past the
    /// deadline (saying so on `stalled`); `None` while none waits or the
    /// deadline is ahead (the timer then wakes the connection at it).
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        if !self.armed {
            return None;
        }
        let timer = self.timer.as_mut()?;
        if timer.as_mut().poll(cx).is_pending() {
            return None;
        }
        self.stalled.send_replace(true);
        Some(io::Error::new(
            io::ErrorKind::TimedOut,
            "the client took nothing written to it within the write timeout",
        ))
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let result = Pin::new(&mut this.io).poll_write(cx, buf);
        this.watch(cx, result)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let result = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.watch(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // A flush moves nothing to the client (a socket has no buffer of
        // its own to flush): it neither starts nor ends the wait of a
        // write, so a connection woken for more to send cannot put the
        // deadline off by flushing.
        let this = &mut *self;
        if let Some(error) = this.expired(cx) {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
