//! A provider that keeps the time its calls spend upstream, so the
//! gateway's own share of a request can be told apart.

use crate::providers::{
    DeltaSink, ModelResponse, Provider, ProviderCall, ProviderError, ProviderFuture, StreamDelta,
};
use crate::types::Headers;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `inner`, timed.
pub(super) struct Timed {
    inner: Arc<dyn Provider>,
    nanos: AtomicU64,
}

impl Timed {
    pub(super) fn new(inner: Arc<dyn Provider>) -> Self {
        Timed {
            inner,
            nanos: AtomicU64::new(0),
        }
    }

    /// The time its calls have spent so far.
    pub(super) fn spent(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Relaxed))
    }

    fn add(&self, since: Instant) {
        let nanos = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(nanos, Ordering::Relaxed);
    }
}

impl Provider for Timed {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn complete(&self, call: &ProviderCall<'_>) -> Result<ModelResponse, ProviderError> {
        let since = Instant::now();
        let reply = self.inner.complete(call);
        self.add(since);
        reply
    }

    fn stream(
        &self,
        call: &ProviderCall<'_>,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), ProviderError> {
        let since = Instant::now();
        let streamed = self.inner.stream(call, on_delta);
        self.add(since);
        streamed
    }

    fn complete_async<'a>(
        &'a self,
        call: &'a ProviderCall<'a>,
    ) -> ProviderFuture<'a, ModelResponse> {
        Box::pin(async move {
            let since = Instant::now();
            let reply = self.inner.complete_async(call).await;
            self.add(since);
            reply
        })
    }

    fn stream_async<'a>(
        &'a self,
        call: &'a ProviderCall<'a>,
        on_delta: DeltaSink<'a>,
    ) -> ProviderFuture<'a, ()> {
        Box::pin(async move {
            let since = Instant::now();
            let streamed = self.inner.stream_async(call, on_delta).await;
            self.add(since);
            streamed
        })
    }

    fn request_headers(&self) -> Option<Headers> {
        self.inner.request_headers()
    }
}
