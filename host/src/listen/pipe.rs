//! A streamed answer whose pieces a relay writes while the client's own
//! connection task reads them: the relay is polled by the body (no task
//! of its own, no channel, no hop between threads for each piece), and a
//! client that leaves first leaves the relay running to its end on a
//! task of its own ([`to_the_end`]), its pieces dropped.

use super::{to_the_end, ToTheEnd};
use axum::body::{Body, Bytes};
use futures_util::FutureExt;
use hyper::body::{Body as HttpBody, Frame};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

/// How many written pieces wait for a slow client before the relay waits
/// too (and, with it, its reading of the upstream).
const BACKLOG: usize = 8;

/// The pieces between the relay and the client.
#[derive(Default)]
struct Pipe {
    pieces: VecDeque<Bytes>,
    /// The client is gone: what is written is dropped.
    closed: bool,
    /// The relay, waiting for room.
    waiting: Option<Waker>,
}

fn pipe(shared: &Mutex<Pipe>) -> MutexGuard<'_, Pipe> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a relay writes a stream's pieces with.
pub(crate) struct Writer(Arc<Mutex<Pipe>>);

impl Writer {
    /// Hands `piece` on, waiting while [`BACKLOG`] pieces wait for the
    /// client; `false`: the client is gone (nothing more is taken).
    pub(crate) async fn send(&self, piece: Bytes) -> bool {
        let mut piece = Some(piece);
        std::future::poll_fn(|cx| {
            let mut pipe = pipe(&self.0);
            if pipe.closed {
                return Poll::Ready(false);
            }
            if pipe.pieces.len() >= BACKLOG {
                // Polled again by the body once it took what waits, or
                // woken when the client leaves.
                pipe.waiting = Some(cx.waker().clone());
                return Poll::Pending;
            }
            if let Some(piece) = piece.take() {
                pipe.pieces.push_back(piece);
            }
            Poll::Ready(true)
        })
        .await
    }
}

/// A streamed body of what `relay` writes with the [`Writer`] it is
/// given. A panic in the relay cuts the body short (an error, so the
/// client never sees a whole answer).
pub(crate) fn streamed<F, R>(relay: F) -> Body
where
    F: FnOnce(Writer) -> R,
    R: Future<Output = ()> + Send + 'static,
{
    let shared = Arc::new(Mutex::new(Pipe::default()));
    let relayed = relay(Writer(Arc::clone(&shared)));
    Body::new(Streamed {
        pipe: shared,
        // A combinator, not an async block: one would hold the relay
        // twice (its captured copy and the awaited one).
        relay: to_the_end(relayed.map(|()| true), || false),
        ended: None,
    })
}

/// See [`streamed`].
struct Streamed {
    pipe: Arc<Mutex<Pipe>>,
    relay: ToTheEnd<bool>,
    /// The relay ended: whole (`true`) or by a panic.
    ended: Option<bool>,
}

/// A relay that panicked: its answer is cut short.
#[derive(Debug, thiserror::Error)]
#[error("the stream's relay failed")]
pub(crate) struct RelayFailed;

impl HttpBody for Streamed {
    type Data = Bytes;
    type Error = RelayFailed;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, RelayFailed>>> {
        loop {
            if let Some(piece) = pipe(&self.pipe).pieces.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(piece))));
            }
            match self.ended {
                Some(true) => return Poll::Ready(None),
                Some(false) => return Poll::Ready(Some(Err(RelayFailed))),
                None => {}
            }
            match Pin::new(&mut self.relay).poll(cx) {
                Poll::Ready(whole) => self.ended = Some(whole),
                Poll::Pending if pipe(&self.pipe).pieces.is_empty() => return Poll::Pending,
                Poll::Pending => {}
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended == Some(true) && pipe(&self.pipe).pieces.is_empty()
    }
}

impl Drop for Streamed {
    fn drop(&mut self) {
        // The client is gone: the relay's writes end, and a relay waiting
        // for room goes on (on a task of its own, once `relay` drops).
        let waiting = {
            let mut pipe = pipe(&self.pipe);
            pipe.closed = true;
            pipe.pieces.clear();
            pipe.waiting.take()
        };
        if let Some(waker) = waiting {
            waker.wake();
        }
    }
}
