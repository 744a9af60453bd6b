//! One request relayed, over any wire:
//!
//! ```text
//!  key ─▶ the key's share (429) ─▶ body: cap (413), timeout (408), buffer (429)
//!      ─▶ parse (400: what cannot be read is never forwarded)
//!      ─▶ views (400) ─▶ model (404) ─▶ slot (429)
//!      ─▶ tool_result, context, provider_request on the views (403 on a block;
//!         a rate limit's pause: 429 with retry-after, or held without the slot)
//!      ─▶ the client's body with what they changed spliced in ─▶ the upstream
//!  non-2xx ─▶ its error text judged (model_response, output) ─▶ its status,
//!             headers (`retry-after`, request ids) and body, as they came
//!  JSON    ─▶ each choice judged (model_response, tool_call, output) ─▶ written back
//!  SSE     ─▶ the wire's stream relay (events::StreamWire)
//! ```

use super::bounds::{Over, Slot};
use super::events::{Judging, Out, Pump, StreamContext};
use super::forward::{read_body, returned_headers, Forwarder};
use super::hold::Stopped;
use super::wire::{Refusal, ReplyView, RequestView, Wire};
use super::{refuse, Gateway, BAD_KEY};
use crate::agent::{EventBus, Exchange};
use crate::jsondoc::{parse, Limits};
use crate::types::Headers;
use crate::upstream::{Reply, ReplyBody};
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Instant;

/// The header naming the request a reply answers (what the audit log's
/// lines and the gateway's own log call it); the body is the upstream's,
/// with its own id.
pub(super) const REQUEST_ID: &str = "x-chimera-request-id";

/// Key, caps, read, model, slot, then the exchange.
pub(super) async fn answer<W: Wire>(
    gateway: Arc<Gateway>,
    headers: &HeaderMap,
    query: Option<String>,
    body: Body,
) -> Response {
    let started = Instant::now();
    match admit::<W>(&gateway, headers, body).await {
        Ok(admitted) => relay::<W>(gateway, headers, query, admitted, started).await,
        Err(refused) => refused,
    }
}

/// A request the gateway took: read, its model served, a slot held.
struct Admitted<R> {
    body: Bytes,
    root: crate::jsondoc::Node,
    read: R,
    conversation: Option<String>,
    slot: Slot,
}

/// The checks before anything is judged: the caps, the key, the
/// conversation's name, the body (parsed, read as the wire's request), the
/// model, a slot. `Err`: the refusal to answer with.
async fn admit<W: Wire>(
    gateway: &Arc<Gateway>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Admitted<W::Read>, Response> {
    let header_bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if header_bytes > gateway.header_cap {
        return Err(refuse::<W>(
            Refusal::HeadersTooLarge,
            &format!(
                "the request headers are over this gateway's cap of {} bytes",
                gateway.header_cap
            ),
        ));
    }
    let key = super::presented_key_hash(headers);
    if !gateway.accepts_key(key.as_deref()) {
        return Err(refuse::<W>(Refusal::BadKey, BAD_KEY));
    }
    let conversation =
        super::sessions::conversation(headers, key.as_deref(), gateway.session_scope)
            .map_err(|line| refuse::<W>(Refusal::BadRequest, &line))?;
    let mut claim = gateway
        .bounds
        .claim(key.as_deref())
        .map_err(Over::refuse::<W>)?;
    let body = gateway
        .bounds
        .read_body(&mut claim, headers, body)
        .await
        .map_err(Over::refuse::<W>)?;
    let root = parse(&body, &Limits::default()).map_err(|error| {
        refuse::<W>(
            Refusal::BadRequest,
            &format!("the request body cannot be read as JSON: {error}"),
        )
    })?;
    let read =
        W::Read::read(&body, &root).map_err(|line| refuse::<W>(Refusal::BadRequest, &line))?;
    let conversation = if W::MODEL_CALL {
        conversation.or_else(|| {
            read.previous()
                .and_then(|id| gateway.chains.conversation(id))
        })
    } else {
        None
    };
    let model = &read.request().model;
    let served = gateway.served::<W>().ok_or_else(|| {
        refuse::<W>(
            Refusal::NotFound,
            &format!("this gateway serves no {} upstream", W::NAME),
        )
    })?;
    if !served.serves(model) {
        return Err(refuse::<W>(
            Refusal::UnknownModel,
            &format!(
                "the model '{}' is not served here on {} (served: {})",
                super::wire::one_word(model),
                W::NAME,
                served.listed()
            ),
        ));
    }
    let slot = Slot::take(&gateway.slots, claim).ok_or_else(|| {
        refuse::<W>(
            Refusal::Busy,
            "the gateway is at its concurrency limit; retry shortly",
        )
    })?;
    Ok(Admitted {
        body,
        root,
        read,
        conversation,
        slot,
    })
}

/// The exchange of an admitted request: the request seams, the upstream,
/// the reply's (see the module docs).
async fn relay<W: Wire>(
    gateway: Arc<Gateway>,
    headers: &HeaderMap,
    query: Option<String>,
    admitted: Admitted<W::Read>,
    started: Instant,
) -> Response {
    let Admitted {
        body,
        root,
        read,
        conversation,
        mut slot,
    } = admitted;
    let Some(served) = gateway.served::<W>() else {
        return refuse::<W>(Refusal::NotFound, "no upstream");
    };
    let id = super::new_id(W::ID_PREFIX);
    let id_header = HeaderValue::from_str(&id).ok();
    let conversation = conversation.or_else(|| W::CHAINED.then(|| format!("chain/{id}")));
    let chain = conversation.clone().filter(|_| W::CHAINED);
    let mut lease = gateway.session(
        served.provider(&read.request().model),
        EventBus::new(),
        &id,
        conversation,
    );
    let exchange = lease.begin_exchange();
    let session = lease.session();
    let mut request = read.request().clone();
    request.headers = Headers(Forwarder::upstream_headers(headers));
    session.note_unjudged("provider_request", &unjudged(&request.messages));
    let judged = super::hold::judge::<W>(&gateway, session, &exchange, request, &mut slot).await;
    let judged = match judged {
        Ok(judged) => judged,
        Err(Stopped::Limited(mut response)) => {
            if let Some(id) = id_header {
                response.headers_mut().insert(REQUEST_ID, id);
            }
            return response;
        }
        Err(Stopped::Refused(refused)) => {
            let unjudged = session.unjudged().map(super::events::unjudged_line);
            let by = refused.by.map(|by| format!(" ({by})")).unwrap_or_default();
            drop(lease);
            gateway
                .metrics
                .timing(std::time::Duration::ZERO, started.elapsed());
            let mut response = match unjudged {
                Some(line) => refuse::<W>(Refusal::Unjudged, &line),
                None => refuse::<W>(
                    Refusal::Blocked,
                    &format!("blocked by policy{by}: {}", refused.reason),
                ),
            };
            if let Some(id) = id_header {
                response.headers_mut().insert(REQUEST_ID, id);
            }
            return response;
        }
    };
    lease.judged();
    // From here the exchange runs to its end whether the client stays or
    // not: a reply it leaves is still read, judged and charged.
    let upstream = Upstream {
        gateway,
        query,
        body,
        root,
        read,
        judged,
        lease,
        exchange,
        slot,
        id: id_header,
        started,
        chain,
    };
    crate::listen::to_the_end(forward_and_answer::<W>(upstream), || {
        refuse::<W>(Refusal::Upstream, "the exchange failed")
    })
    .await
}

/// What goes upstream once the request was judged.
struct Upstream<R> {
    gateway: Arc<Gateway>,
    query: Option<String>,
    body: Bytes,
    root: crate::jsondoc::Node,
    read: R,
    judged: crate::agent::RelayRequest,
    lease: super::sessions::Lease,
    exchange: Exchange,
    slot: Slot,
    id: Option<HeaderValue>,
    started: Instant,
    /// The conversation a response id it gets belongs to (a chained wire).
    chain: Option<String>,
}

/// The judged request sent upstream, and the answer judged.
async fn forward_and_answer<W: Wire>(mut upstream: Upstream<W::Read>) -> Response {
    let Some(served) = upstream.gateway.served::<W>() else {
        return refuse::<W>(Refusal::NotFound, "no upstream");
    };
    let sent = match upstream
        .read
        .write(&upstream.body, &upstream.root, &upstream.judged)
    {
        Ok(sent) => sent,
        Err(line) => return refuse::<W>(Refusal::Upstream, &line),
    };
    drop((upstream.body, upstream.root, upstream.read));
    // The body is read and written for the upstream: it no longer counts
    // against the buffer.
    upstream.slot.claim.release_bytes();
    let upstream_started = Instant::now();
    let counted = Arc::clone(&upstream.gateway);
    let retries = upstream.lease.session().retry_recorder();
    upstream.lease.sent();
    let response = match served
        .forwarder
        .send(
            W::PATH,
            upstream.query.as_deref(),
            &upstream.judged.headers.0,
            Bytes::from(sent),
            &move |status, attempt| {
                counted.metrics.upstream_retry();
                retries(status, attempt);
            },
        )
        .await
    {
        Ok(response) => response,
        Err(error) => {
            if !error.1 {
                upstream.lease.not_billed();
            }
            return refuse::<W>(Refusal::Upstream, &error.0);
        }
    };
    let answered = Answered {
        lease: upstream.lease,
        exchange: upstream.exchange,
        model: upstream.judged.model,
        slot: upstream.slot,
        timing: Timing {
            gateway: Arc::clone(&upstream.gateway),
            started: upstream.started,
            upstream_started,
        },
        id: upstream.id,
        limit: served.forwarder.max_body(),
        chain: upstream.chain,
    };
    // Boxed: the answer's future is most of an exchange's, and this one's
    // is moved whole into its box by `to_the_end` (see there).
    Box::pin(answer_with::<W>(answered, response)).await
}

/// What an exchange holds once the upstream answered.
struct Answered {
    lease: super::sessions::Lease,
    exchange: Exchange,
    /// The model the request went to.
    model: String,
    slot: Slot,
    timing: Timing,
    /// The request's id, for its header.
    id: Option<HeaderValue>,
    /// The most bytes of a reply read.
    limit: u64,
    /// The conversation a response id it gets belongs to (a chained wire).
    chain: Option<String>,
}

/// The upstream's answer, judged: a stream relayed, a reply written back,
/// an error's message judged; its status and headers as they came.
async fn answer_with<W: Wire>(answered: Answered, response: Reply) -> Response {
    let Answered {
        mut lease,
        exchange,
        model,
        slot,
        timing,
        id,
        limit,
        chain,
    } = answered;
    let status = response.status;
    let mut headers_back = returned_headers(&response.headers);
    if let Some(id) = id {
        headers_back.insert(REQUEST_ID, id);
    }
    let is_stream = response
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !status.is_success() {
        lease.not_billed();
    }
    if status.is_success() && is_stream {
        let hold_all = lease
            .session()
            .hold_stream(&exchange, timing.gateway.stream_policy);
        return stream::<W>(
            lease,
            exchange,
            response.body,
            headers_back,
            hold_all,
            limit,
            model,
            slot,
            timing,
            chain,
        );
    }
    let bytes = match read_body(response.body, limit).await {
        Ok(bytes) => bytes,
        Err(error) => return refuse::<W>(Refusal::Upstream, &error.0),
    };
    let upstream_spent = timing.upstream_started.elapsed();
    let body = if status.is_success() {
        match judge_reply::<W>(&mut lease, &exchange, &model, &bytes).await {
            Ok((body, reply_id)) => {
                if let (Some(id), Some(chain)) = (reply_id, chain) {
                    timing.gateway.chains.record(id, chain);
                }
                body
            }
            Err(line) => return refuse::<W>(Refusal::Upstream, &line),
        }
    } else {
        super::wire::judged_error(lease.session(), &exchange, &bytes)
    };
    let unjudged = lease.session().unjudged().map(super::events::unjudged_line);
    drop(lease);
    drop(slot);
    timing
        .gateway
        .metrics
        .timing(upstream_spent, timing.started.elapsed());
    if let Some(line) = unjudged {
        let mut response = refuse::<W>(Refusal::Unjudged, &line);
        if let Some(id) = headers_back.get(REQUEST_ID) {
            response.headers_mut().insert(REQUEST_ID, id.clone());
        }
        return response;
    }
    respond(status, headers_back, body)
}

/// The kinds of block no pack reads (images, documents, thinking, server
/// tools' blocks), counted: `image ×2, document`.
fn unjudged(messages: &[crate::types::Message]) -> String {
    counted(
        messages
            .iter()
            .flat_map(|m| m.blocks.iter())
            .filter(|block| block.kind != "text")
            .map(|block| block.kind.as_str()),
    )
}

/// `kinds` counted, in the order they first come: `image ×2, document`.
pub(super) fn counted<'a>(kinds: impl Iterator<Item = &'a str>) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for kind in kinds {
        match counts.iter_mut().find(|(seen, _)| *seen == kind) {
            Some((_, count)) => *count += 1,
            None => counts.push((kind, 1)),
        }
    }
    counts
        .iter()
        .map(|(kind, count)| {
            if *count == 1 {
                (*kind).to_owned()
            } else {
                format!("{kind} ×{count}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A whole reply charged to `lease`'s call, judged and written back; the
/// id a later request can continue it by.
async fn judge_reply<W: Wire>(
    lease: &mut super::sessions::Lease,
    exchange: &Exchange,
    model: &str,
    bytes: &[u8],
) -> Result<(Vec<u8>, Option<String>), String> {
    let root = parse(bytes, &Limits::default())
        .map_err(|e| format!("the upstream's reply cannot be read: {e}"))?;
    let reply = W::Reply::read(bytes, &root)?;
    lease.charge(model, reply.usage(), true);
    let session = lease.session();
    session.note_unjudged("model_response", &counted(reply.unjudged().into_iter()));
    let mut judged = Vec::new();
    for choice in reply.choices() {
        judged.push(session.judge_choice(exchange, choice).await);
    }
    Ok((reply.write(bytes, &root, &judged)?, reply.reply_id()))
}

/// A response of `status` with the upstream's `headers` and `body`.
fn respond(status: StatusCode, mut headers: HeaderMap, body: Vec<u8>) -> Response {
    if !headers.contains_key(header::CONTENT_TYPE) {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    (status, headers, body).into_response()
}

/// What a stream reports when it ends.
struct Timing {
    gateway: Arc<Gateway>,
    started: Instant,
    upstream_started: Instant,
}

/// A streamed reply: the wire's relay, polled by the response body on the
/// client connection's own task (`listen::streamed`: a client that stops
/// reading holds back the upstream, never memory; one that hangs up ends
/// the writing, not the reading: the relay goes on to its end on a task
/// of its own, and the usage still counts).
#[allow(
    clippy::too_many_arguments,
    reason = "one call site: the pieces of one exchange, handed over whole"
)]
fn stream<W: Wire>(
    mut lease: super::sessions::Lease,
    exchange: Exchange,
    body: ReplyBody,
    mut headers: HeaderMap,
    hold_all: bool,
    limit: u64,
    model: String,
    slot: Slot,
    timing: Timing,
    chain: Option<String>,
) -> Response {
    let stalled = crate::listen::stalled();
    let body = crate::listen::streamed(move |writer| async move {
        let session = lease.session();
        let mut out = Out::new(writer);
        let relayed = W::relay(StreamContext {
            judging: Judging {
                session,
                exchange: &exchange,
                hold_all,
            },
            pump: Pump::new(body, limit),
            out: &mut out,
        });
        // A client that took nothing for the write timeout lost its
        // connection: the relay is dropped, and the upstream call with it.
        let streamed = match stalled {
            Some(stalled) => tokio::select! {
                streamed = relayed => Some(streamed),
                () = stalled => None,
            },
            None => Some(relayed.await),
        };
        // A stream cancelled for the write timeout never reached the end
        // its usage comes with: its call ends not knowing what it cost,
        // and the packs that count (token-budget) keep their estimate.
        if streamed.is_some() {
            out.flush().await;
        }
        drop(out);
        if let Some(streamed) = streamed {
            let complete = streamed.broken.is_none();
            if let (Some(id), Some(chain)) = (streamed.response_id, chain) {
                timing.gateway.chains.record(id, chain);
            }
            lease.charge(&model, streamed.usage, complete);
        }
        drop(lease);
        drop(slot);
        timing
            .gateway
            .metrics
            .timing(timing.upstream_started.elapsed(), timing.started.elapsed());
    });
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    (StatusCode::OK, headers, body).into_response()
}
