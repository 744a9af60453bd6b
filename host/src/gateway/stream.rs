//! A streamed reply: the relay runs inside the response body, so the
//! upstream is read only as fast as the client reads (a slow client holds
//! back the upstream through TCP, never memory), and only text the
//! `stream_chunk` seam released is ever sent.
//!
//! The status is chosen before the first byte: the relay is driven until
//! it releases its first text or ends, so a request a gate blocks before
//! the upstream is asked is still a 403 error object, not a stream.

use super::timed::Timed;
use super::wire::{Head, Parsed, Wire};
use super::{refused, Gateway, Released};
use crate::agent::{Relayed, Reply};
use crate::providers::Provider;
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use std::convert::Infallible;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::sync::OwnedSemaphorePermit;

type Running = Pin<Box<dyn Future<Output = Relayed> + Send>>;

/// What a streamed request holds until its stream ends.
pub(super) struct Relaying {
    /// The gateway (its metrics get the request's timing at the end).
    pub(super) gateway: Arc<Gateway>,
    /// The request's provider, timing its upstream calls.
    pub(super) timed: Arc<Timed>,
    /// When the request came in.
    pub(super) started: Instant,
    /// Its concurrency slot, given back when this is dropped.
    pub(super) _slot: OwnedSemaphorePermit,
}

impl Drop for Relaying {
    fn drop(&mut self) {
        self.gateway
            .metrics
            .timing(self.timed.spent(), self.started.elapsed());
    }
}

/// Relays `request` streamed, answering with wire `W`'s event stream (or,
/// when the relay ends before any text is released, what it ended with).
pub(super) async fn respond<W: Wire>(
    held: Relaying,
    request: Parsed,
    head: Head,
    conversation: Option<String>,
) -> Response {
    let released = Released::default();
    let provider: Arc<dyn Provider> = Arc::clone(&held.timed) as Arc<dyn Provider>;
    let mut lease = held
        .gateway
        .session(provider, released.bus(), &head.id, conversation);
    let include_usage = request.include_usage;
    let relay = request.relay;
    let mut relaying: Running = Box::pin(async move { lease.session().relay(relay).await });
    // Drive it until there is text to send or it is over.
    let first = std::future::poll_fn(|cx| match relaying.as_mut().poll(cx) {
        Poll::Ready(ended) => Poll::Ready(Some(ended)),
        Poll::Pending if released.is_empty() => Poll::Pending,
        Poll::Pending => Poll::Ready(None),
    })
    .await;
    let (ended, relaying) = match first {
        Some(Relayed::Reply(reply)) => (Some(reply), None),
        Some(other) => return refused::<W>(other),
        None => (None, Some(relaying)),
    };
    let body = Events::<W> {
        head,
        released,
        relaying,
        ended,
        sent: String::new(),
        started: false,
        include_usage,
        done: false,
        _held: held,
        _wire: PhantomData,
    };
    (
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        Body::from_stream(body),
    )
        .into_response()
}

/// The body of a streamed reply: released text as events while the relay
/// runs, then the closing events of the judged reply (or an error event).
struct Events<W> {
    head: Head,
    released: Released,
    /// The relay, until it ends.
    relaying: Option<Running>,
    /// The judged reply, once the relay ended with one.
    ended: Option<Reply>,
    /// The text sent so far.
    sent: String,
    /// The opening events went out.
    started: bool,
    include_usage: bool,
    done: bool,
    /// The request's slot and timing, held until the stream ends.
    _held: Relaying,
    _wire: PhantomData<fn() -> W>,
}

impl<W: Wire> Events<W> {
    /// The opening events (once) and every released text not yet sent.
    fn released_events(&mut self) -> Option<Bytes> {
        let mut out = String::new();
        if !self.started {
            self.started = true;
            out.push_str(&W::stream_start(&self.head));
        }
        while let Some(text) = self.released.pop() {
            out.push_str(&W::stream_text(&self.head, &text));
            self.sent.push_str(&text);
        }
        (!out.is_empty()).then(|| Bytes::from(out))
    }
}

impl<W: Wire> futures_core::Stream for Events<W> {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if let Some(events) = this.released_events() {
            return Poll::Ready(Some(Ok(events)));
        }
        if let Some(relaying) = this.relaying.as_mut() {
            match relaying.as_mut().poll(cx) {
                Poll::Pending => {
                    return match this.released_events() {
                        Some(events) => Poll::Ready(Some(Ok(events))),
                        None => Poll::Pending,
                    };
                }
                Poll::Ready(Relayed::Reply(reply)) => {
                    this.relaying = None;
                    this.ended = Some(reply);
                    if let Some(events) = this.released_events() {
                        return Poll::Ready(Some(Ok(events)));
                    }
                }
                Poll::Ready(other) => {
                    this.relaying = None;
                    this.done = true;
                    let line = match other {
                        Relayed::Failed(failure) => {
                            format!("the upstream failed: {}", failure.message())
                        }
                        Relayed::Blocked { reason, .. } => format!("blocked by policy: {reason}"),
                        Relayed::Reply(_) => String::new(),
                    };
                    return Poll::Ready(Some(Ok(Bytes::from(W::stream_error(&line)))));
                }
            }
        }
        this.done = true;
        let reply = this.ended.take().unwrap_or_default();
        Poll::Ready(Some(Ok(Bytes::from(W::stream_end(
            &this.head,
            &reply,
            &this.sent,
            this.include_usage,
        )))))
    }
}
