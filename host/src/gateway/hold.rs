//! A rate limit behind the gateway, HTTP-shaped. A `provider_request`
//! gate that answers "retry after" (`rate-limiter`) pauses a turn inside
//! `chimera run`; a gateway's client is waiting on an HTTP request
//! instead, and one paused while it holds a concurrency slot takes that
//! slot from every other client. So, when the session says it paused
//! (`turn_paused`):
//!
//! - `rate_limit_hold = 0` (the default): the request is answered at once,
//!   429 in the client's wire with `retry-after` (the pause's wait in
//!   whole seconds, rounded up), and the judging is dropped;
//! - more: its concurrency slot is given back and the request waits out
//!   the pauses for up to that long (its client's share, its body and its
//!   place in its key's in-flight count still held); admitted by then, it
//!   takes a slot again (429 busy when none is free) and goes on; still
//!   paused, it is answered 429 with the wait that is left.

use super::bounds::{retry_after, Slot};
use super::wire::{Refusal, Wire};
use super::{refuse, Gateway};
use crate::agent::{AgentEvent, AgentSession, Exchange, Refused, RelayRequest};
use axum::http::header;
use axum::response::Response;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// A pause the session announced.
#[derive(Debug, Clone)]
struct Pause {
    /// The pausing interceptor (`<pack>/<name>`).
    by: String,
    /// When the pause ends.
    until: Instant,
    /// The interceptor's reason.
    reason: String,
}

/// Why a request did not get through its request seams.
pub(super) enum Stopped {
    /// A seam blocked it (or a rate limiter's pauses ran out inside the
    /// session, which is a rate limit when the gateway held it).
    Refused(Refused),
    /// A rate limit: the answer to send.
    Limited(Response),
}

/// The request seams on `request`, with a rate limiter's pauses turned
/// into 429s or bounded holds (see the module docs); `slot` is given back
/// while the request is held and taken again after.
///
/// # Errors
///
/// [`Stopped`]: a block, or the 429 to answer with.
pub(super) async fn judge<W: Wire>(
    gateway: &Gateway,
    session: &mut AgentSession,
    exchange: &Exchange,
    request: RelayRequest,
    slot: &mut Slot,
) -> Result<RelayRequest, Stopped> {
    let (paused, mut pauses) = watch::channel::<Option<Pause>>(None);
    session.events().subscribe(move |event| {
        if let AgentEvent::TurnPaused {
            interceptor,
            wait_ms,
            reason,
        } = event
        {
            paused.send_replace(Some(Pause {
                by: interceptor.clone(),
                until: Instant::now() + Duration::from_millis(*wait_ms),
                reason: reason.clone(),
            }));
        }
    });
    let hold = gateway.limits.rate_limit_hold;
    let judging = session.judge_request(exchange, request);
    tokio::pin!(judging);
    let mut held: Option<(Instant, Pause)> = None;
    loop {
        let deadline = held.as_ref().map(|(deadline, _)| *deadline);
        tokio::select! {
            judged = &mut judging => {
                return match (judged, held) {
                    (Ok(judged), None) => Ok(judged),
                    (Ok(judged), Some(_)) if slot.retake(&gateway.slots) => Ok(judged),
                    (Ok(_), Some(_)) => Err(Stopped::Limited(refuse::<W>(
                        Refusal::Busy,
                        "the gateway is at its concurrency limit; retry shortly",
                    ))),
                    // The session's own cap on pauses: still a rate limit.
                    (Err(refused), Some((_, pause))) if refused.by.as_deref() == Some(&pause.by) => {
                        Err(Stopped::Limited(limited::<W>(&pause)))
                    }
                    (Err(refused), _) => Err(Stopped::Refused(refused)),
                };
            }
            Ok(()) = pauses.changed() => {
                let Some(pause) = pauses.borrow_and_update().clone() else {
                    continue;
                };
                if hold.is_zero() {
                    return Err(Stopped::Limited(limited::<W>(&pause)));
                }
                slot.vacate();
                let deadline = deadline.unwrap_or_else(|| Instant::now() + hold);
                held = Some((deadline, pause));
            }
            () = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                let Some((_, pause)) = held else { continue };
                return Err(Stopped::Limited(limited::<W>(&pause)));
            }
        }
    }
}

/// The 429 for `pause`: the wait left as `retry-after`, the interceptor
/// and its reason as the message.
fn limited<W: Wire>(pause: &Pause) -> Response {
    let wait = pause.until.saturating_duration_since(Instant::now());
    let mut response = refuse::<W>(
        Refusal::RateLimited,
        &format!("rate limited by {}: {}", pause.by, pause.reason),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, retry_after(wait));
    response
}
