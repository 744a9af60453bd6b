//! What one client may hold of the gateway before and after it is
//! admitted, so no client can take what the others need:
//!
//! ```text
//!  key ─▶ its in-flight requests (key_concurrency; 429)
//!      ─▶ its body, read within body_timeout (408) and body_cap (413), each
//!         byte counted against key_buffer_cap and buffer_cap (429) from
//!         the moment it is read until the request has gone upstream
//!      ─▶ … a concurrency slot (429), the exchange …
//! ```
//!
//! A client is its key: the first 16 hex digits of the SHA-256 of the key
//! it presents (what [`sessions`](super::sessions) names its conversations
//! by); requests that present none are one client. Without configured
//! client keys a key is whatever the client says, so these bounds keep
//! honest clients apart, and the global ones (`buffer_cap`, `concurrency`)
//! bound the rest. The connection-level bounds (header and write
//! timeouts) are in [`listen`](crate::listen).

use super::refuse;
use super::wire::{Refusal, Wire};
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a request's headers may take to arrive by default (an idle
/// keep-alive connection is closed after as long).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a request's body may take to arrive by default.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a client may take none of what is written to it by default.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// The most request-body bytes buffered across all requests by default.
pub const DEFAULT_BUFFER_CAP: usize = 16 * 1024 * 1024;

/// The most request-body bytes one client's requests buffer by default.
pub const DEFAULT_KEY_BUFFER_CAP: usize = 8 * 1024 * 1024;

/// The most requests one client has in flight by default.
pub const DEFAULT_KEY_CONCURRENCY: usize = 64;

/// What one client may hold of the gateway: time, bytes and requests
/// (the `[serve]` keys and `chimera serve` flags of the same names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientLimits {
    /// How long a request's head may take to arrive, and an idle
    /// keep-alive connection may wait for the next one; then the
    /// connection is closed.
    pub header_timeout: Duration,
    /// How long a request's body may take to arrive (408).
    pub body_timeout: Duration,
    /// How long a client may take none of the bytes written to it: then
    /// its connection is closed and a stream relayed to it is cancelled,
    /// its upstream call and its slot with it.
    pub write_timeout: Duration,
    /// The most request-body bytes buffered across all requests (429);
    /// never below `key_buffer_cap`.
    pub buffer_cap: usize,
    /// The most request-body bytes one client's requests buffer (429);
    /// never below the body cap.
    pub key_buffer_cap: usize,
    /// The most requests one client has in flight, held ones included
    /// (429).
    pub key_concurrency: usize,
    /// What a rate limiter's pause does: zero answers it at once with 429
    /// and `retry-after`; more holds the request, without a concurrency
    /// slot, for up to this long.
    pub rate_limit_hold: Duration,
}

impl Default for ClientLimits {
    fn default() -> Self {
        ClientLimits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            buffer_cap: DEFAULT_BUFFER_CAP,
            key_buffer_cap: DEFAULT_KEY_BUFFER_CAP,
            key_concurrency: DEFAULT_KEY_CONCURRENCY,
            rate_limit_hold: Duration::ZERO,
        }
    }
}

/// What every client holds now.
#[derive(Default)]
struct Tally {
    /// Body bytes buffered, all clients.
    buffered: usize,
    /// Per client (only those holding something).
    clients: HashMap<String, Held>,
}

/// What one client holds.
#[derive(Default)]
struct Held {
    requests: usize,
    buffered: usize,
}

/// The per-client and buffer bounds of one gateway.
pub(super) struct Bounds {
    body_cap: usize,
    buffer_cap: usize,
    key_buffer_cap: usize,
    key_concurrency: usize,
    body_timeout: Duration,
    tally: Mutex<Tally>,
}

/// Why a client's request is refused before it is read whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Over {
    /// Its client has `key_concurrency` requests in flight.
    Requests(usize),
    /// Its client buffers `key_buffer_cap` bytes.
    ClientBytes(usize),
    /// All requests buffer `buffer_cap` bytes.
    Bytes(usize),
    /// The body is over the body cap.
    TooLarge(usize),
    /// The body did not arrive within the body timeout.
    Slow(Duration),
    /// The body broke off.
    Broken,
}

impl Over {
    /// The refusal, in wire `W`.
    pub(super) fn refuse<W: Wire>(self) -> Response {
        match self {
            Over::Requests(n) => refuse::<W>(
                Refusal::Busy,
                &format!("this key has {n} requests in flight, this gateway's limit per key; retry shortly"),
            ),
            Over::ClientBytes(n) => refuse::<W>(
                Refusal::Busy,
                &format!("this key's requests in flight hold {n} bytes of bodies, this gateway's limit per key; retry shortly"),
            ),
            Over::Bytes(n) => refuse::<W>(
                Refusal::Busy,
                &format!("the gateway holds {n} bytes of request bodies, its limit; retry shortly"),
            ),
            Over::TooLarge(n) => refuse::<W>(
                Refusal::TooLarge,
                &format!("the request body is over this gateway's cap of {n} bytes"),
            ),
            Over::Broken => refuse::<W>(Refusal::BadRequest, "the request body broke off"),
            Over::Slow(limit) => refuse::<W>(
                Refusal::Timeout,
                &format!(
                    "the request body did not arrive within {} s",
                    limit.as_secs_f64()
                ),
            ),
        }
    }
}

impl Bounds {
    /// The bounds of `limits`, for bodies of at most `body_cap` bytes.
    pub(super) fn new(limits: &ClientLimits, body_cap: usize) -> Self {
        let key_buffer_cap = limits.key_buffer_cap.max(body_cap);
        Bounds {
            body_cap,
            buffer_cap: limits.buffer_cap.max(key_buffer_cap),
            key_buffer_cap,
            key_concurrency: limits.key_concurrency.max(1),
            body_timeout: limits.body_timeout,
            tally: Mutex::new(Tally::default()),
        }
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One more request in flight for the client whose key has SHA-256
    /// `key_hash` (`None`: the clients that present no key, together).
    ///
    /// # Errors
    ///
    /// [`Over::Requests`] when the client is at its limit.
    pub(super) fn claim(self: &Arc<Self>, key_hash: Option<&str>) -> Result<Claim, Over> {
        let client = key_hash
            .map(|hash| super::keys::key_tag(hash).to_owned())
            .unwrap_or_default();
        let mut tally = self.tally();
        let held = tally.clients.entry(client.clone()).or_default();
        if held.requests >= self.key_concurrency {
            return Err(Over::Requests(self.key_concurrency));
        }
        held.requests += 1;
        Ok(Claim {
            bounds: Arc::clone(self),
            client,
            buffered: 0,
        })
    }

    /// The body of `claim`'s request, read whole within the body timeout
    /// and the caps, each byte counted as it arrives.
    ///
    /// # Errors
    ///
    /// [`Over`]: a cap, the timeout, or a body that broke off.
    pub(super) async fn read_body(
        &self,
        claim: &mut Claim,
        headers: &HeaderMap,
        body: Body,
    ) -> Result<Bytes, Over> {
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<usize>().ok());
        if declared.is_some_and(|length| length > self.body_cap) {
            return Err(Over::TooLarge(self.body_cap));
        }
        let read = async {
            use futures_core::Stream as _;
            // The pieces as they came (no buffer regrown as the body
            // grows), joined once the body is whole.
            let mut pieces: Vec<Bytes> = Vec::new();
            let mut length = 0;
            let mut stream = body.into_data_stream();
            while let Some(piece) =
                std::future::poll_fn(|cx| std::pin::Pin::new(&mut stream).poll_next(cx)).await
            {
                let piece = piece.map_err(|_| Over::Broken)?;
                if length + piece.len() > self.body_cap {
                    return Err(Over::TooLarge(self.body_cap));
                }
                claim.grow(piece.len())?;
                length += piece.len();
                pieces.push(piece);
            }
            Ok(match pieces.as_slice() {
                [one] => one.clone(),
                _ => Bytes::from(pieces.concat()),
            })
        };
        tokio::time::timeout(self.body_timeout, read)
            .await
            .map_err(|_| Over::Slow(self.body_timeout))?
    }
}

/// One request's hold on its client's share: one request in flight, and
/// the body bytes it buffers (released with [`Claim::release_bytes`] once
/// the request has gone upstream, the rest when it is dropped).
pub(super) struct Claim {
    bounds: Arc<Bounds>,
    client: String,
    buffered: usize,
}

impl Claim {
    /// Counts `bytes` more buffered.
    fn grow(&mut self, bytes: usize) -> Result<(), Over> {
        let bounds = &self.bounds;
        let mut guard = bounds.tally();
        let tally = &mut *guard;
        if tally.buffered + bytes > bounds.buffer_cap {
            return Err(Over::Bytes(bounds.buffer_cap));
        }
        if let Some(held) = tally.clients.get_mut(&self.client) {
            if held.buffered + bytes > bounds.key_buffer_cap {
                return Err(Over::ClientBytes(bounds.key_buffer_cap));
            }
            held.buffered += bytes;
        }
        tally.buffered += bytes;
        drop(guard);
        self.buffered += bytes;
        Ok(())
    }

    /// The request no longer buffers its body.
    pub(super) fn release_bytes(&mut self) {
        let bytes = std::mem::take(&mut self.buffered);
        if bytes == 0 {
            return;
        }
        let mut guard = self.bounds.tally();
        let tally = &mut *guard;
        tally.buffered -= bytes;
        if let Some(held) = tally.clients.get_mut(&self.client) {
            held.buffered -= bytes;
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.release_bytes();
        let mut tally = self.bounds.tally();
        if let Some(held) = tally.clients.get_mut(&self.client) {
            held.requests -= 1;
            if held.requests == 0 {
                tally.clients.remove(&self.client);
            }
        }
    }
}

/// What an admitted request holds until it ends: its client's claim and,
/// while it is relayed (not while a rate limit holds it), a concurrency
/// slot.
pub(super) struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    /// Its client's share.
    pub(super) claim: Claim,
}

impl Slot {
    /// A slot of `slots` for `claim`'s request; `None` when every slot is
    /// taken.
    pub(super) fn take(slots: &Arc<Semaphore>, claim: Claim) -> Option<Slot> {
        let permit = Arc::clone(slots).try_acquire_owned().ok()?;
        Some(Slot {
            permit: Some(permit),
            claim,
        })
    }

    /// Gives the concurrency slot back while the request waits.
    pub(super) fn vacate(&mut self) {
        self.permit = None;
    }

    /// Takes a slot of `slots` again, after a wait; `false` when every
    /// slot is taken.
    pub(super) fn retake(&mut self, slots: &Arc<Semaphore>) -> bool {
        if self.permit.is_none() {
            self.permit = Arc::clone(slots).try_acquire_owned().ok();
        }
        self.permit.is_some()
    }
}

/// `Retry-After` for a wait of `wait`: whole seconds, rounded up, at
/// least one.
pub(super) fn retry_after(wait: Duration) -> HeaderValue {
    let seconds = wait.as_millis().div_ceil(1000).max(1);
    HeaderValue::from_str(&seconds.to_string()).unwrap_or(HeaderValue::from_static("1"))
}
