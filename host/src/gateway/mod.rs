//! `chimera serve`: the packs as a guardrail gateway for clients that run
//! their own agent, speaking the `OpenAI` chat-completions wire and the
//! Anthropic Messages wire to them, and the same wire to the upstream.
//!
//! ```text
//!  client ──POST /v1/chat/completions | /v1/messages──▶ key check ─▶ body cap
//!         ─▶ read (400 on bad input) ─▶ model (404 unless served on that wire)
//!         ─▶ concurrency slot (429 when full)
//!         ─▶ AgentSession::relay: tool_result ─▶ context ─▶ provider_request ─▶ upstream
//!            ─▶ stream_chunk (each delta; only judged text is sent) ─▶ model_response
//!            ─▶ tool_call (each proposed call) ─▶ output (gate retries re-ask upstream)
//!  client ◀── reply | event stream | error object, in the client's wire ◀──
//! ```
//!
//! Each request is relayed by a session of its own on the shared registry,
//! so every pack the registry holds (load order first, then the host's
//! chains) judges it exactly as in `chimera run`; a hot swap takes effect
//! at the next request while requests in flight finish on the chains they
//! merged. A conversation (named by `x-chimera-session`, or the client's
//! key) carries its turns and charges from request to request: see
//! [`sessions`](self::sessions) for what is kept per key and per session.
//!
//! # Status codes
//!
//! | status | when | chat completions `error.type` / `code` | messages `error.type` |
//! |---|---|---|---|
//! | 400 | the body is not a request of the wire (the line names the field) | `invalid_request_error` | `invalid_request_error` |
//! | 401 | client keys are configured and the key is not one of them | `authentication_error` / `invalid_api_key` | `authentication_error` |
//! | 403 | a gate blocked the request before the upstream was asked | `permission_error` / `blocked_by_policy` | `permission_error` |
//! | 404 | the model is not one the gateway serves on that wire | `invalid_request_error` / `model_not_found` | `invalid_request_error` |
//! | 413 | the body is over the cap | `invalid_request_error` / `body_too_large` | `request_too_large` |
//! | 431 | the headers are over the cap | `invalid_request_error` / `headers_too_large` | `invalid_request_error` |
//! | 429 | every request slot is taken (`Retry-After: 1`) | `rate_limit_error` / `gateway_busy` | `rate_limit_error` |
//! | 502 | the upstream failed (after its retries) | `upstream_error` / `upstream_failed` | `api_error` |
//!
//! A reply a gate vetoed is a 200 whose text is the gate's notice, ending
//! with `finish_reason: content_filter` (chat completions) or
//! `stop_reason: refusal` (messages); a refused tool call is dropped and
//! its refusal line joins the text. A stream whose upstream dies ends with
//! an error event (a chunk carrying `error`; an `error` event) and no end
//! marker.

mod anthropic;
mod metrics;
mod openai;
pub mod sessions;
mod stream;
mod timed;
mod wire;

use crate::agent::{AgentEvent, AgentSession, EventBus, Relayed};
use crate::audit::{AuditLog, Exchange};
pub use crate::config::SessionScope;
use crate::plugins::Registry;
use crate::providers::{
    AnthropicConfig, AnthropicProvider, HttpSettings, OpenAiConfig, OpenAiProvider, Provider,
};
use crate::state::StateService;
use crate::tools::Workspace;
use crate::types::Headers;
use anthropic::Anthropic;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use metrics::Metrics;
use openai::OpenAi;
use serde_json::{json, Value};
use sessions::{Conversations, Lease, Resumed};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use timed::Timed;
use tokio::sync::Semaphore;
use wire::{Head, Kind, Refusal, Wire};

/// The largest request body taken by default (4 MiB).
pub const DEFAULT_BODY_CAP: usize = 4 * 1024 * 1024;

/// The most bytes of request headers taken by default (32 KiB).
pub const DEFAULT_HEADER_CAP: usize = 32 * 1024;

/// The most requests relayed at once by default.
pub const DEFAULT_CONCURRENCY: usize = 256;

/// An upstream of one wire: where it is, the gateway's key for it, and
/// the models clients may ask it for.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// Its base URL: up to and including `/v1` for chat completions
    /// (`https://api.openai.com/v1`); the bare host for Messages
    /// (`https://api.anthropic.com`).
    pub base_url: String,
    /// The gateway's own key for it; a client's key never goes upstream,
    /// nor into a pack.
    pub key: Option<String>,
    /// The model names clients may ask for (each passed upstream as it is).
    pub models: Vec<String>,
}

/// What a gateway serves, and where it sends the traffic.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// The chat-completions upstream (`POST /v1/chat/completions`).
    pub openai: Option<Upstream>,
    /// The Messages upstream (`POST /v1/messages`).
    pub anthropic: Option<Upstream>,
    /// SHA-256 (hex) of each accepted client key; empty: no key asked for.
    pub client_key_hashes: Vec<String>,
    /// The largest request body taken, in bytes.
    pub body_cap: usize,
    /// The most requests relayed at once; more are answered 429.
    pub concurrency: usize,
    /// The most conversations kept (the least recently used is forgotten).
    pub max_sessions: usize,
    /// What names a conversation.
    pub session_scope: SessionScope,
    /// The most bytes of request headers taken (names and values); more
    /// are answered 431.
    pub header_cap: usize,
    /// Timeouts, retries and size limits of the calls to the upstreams.
    pub http: HttpSettings,
}

impl Default for GatewayConfig {
    /// No upstream, no client keys, the default caps.
    fn default() -> Self {
        GatewayConfig {
            openai: None,
            anthropic: None,
            client_key_hashes: Vec::new(),
            body_cap: DEFAULT_BODY_CAP,
            concurrency: DEFAULT_CONCURRENCY,
            max_sessions: sessions::DEFAULT_MAX_SESSIONS,
            session_scope: SessionScope::Header,
            header_cap: DEFAULT_HEADER_CAP,
            http: HttpSettings::default(),
        }
    }
}

/// The SHA-256 (hex) a client key is configured by, so the configuration
/// never holds a key itself.
#[must_use]
pub fn key_hash(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .fold(String::with_capacity(64), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        })
}

/// The models of one wire, each with its provider.
type Served = BTreeMap<String, Arc<dyn Provider>>;

/// A running gateway's shared state.
pub struct Gateway {
    openai: Served,
    anthropic: Served,
    registry: Arc<Registry>,
    workspace: Workspace,
    client_keys: BTreeSet<String>,
    body_cap: usize,
    header_cap: usize,
    session_scope: SessionScope,
    audit: Option<AuditLog>,
    slots: Arc<Semaphore>,
    conversations: Arc<Conversations>,
    metrics: Metrics,
    state: Option<StateService>,
}

impl Gateway {
    /// A gateway for `config`, its sessions merging `registry`'s packs;
    /// `workspace` is a directory of its own (relayed sessions run no
    /// tools, but a session is rooted somewhere).
    #[must_use]
    pub fn new(config: &GatewayConfig, registry: Arc<Registry>, workspace: Workspace) -> Self {
        let served = |upstream: &Option<Upstream>,
                      make: &dyn Fn(&Upstream, &str) -> Arc<dyn Provider>|
         -> Served {
            upstream
                .iter()
                .flat_map(|upstream| {
                    upstream
                        .models
                        .iter()
                        .map(|model| (model.clone(), make(upstream, model)))
                })
                .collect()
        };
        let openai = served(&config.openai, &|upstream, model| {
            Arc::new(OpenAiProvider::new(OpenAiConfig {
                base_url: upstream.base_url.clone(),
                model: model.to_owned(),
                api_key: upstream.key.clone(),
                headers: Headers::default(),
                http: config.http,
            }))
        });
        let anthropic = served(&config.anthropic, &|upstream, model| {
            Arc::new(AnthropicProvider::new(AnthropicConfig {
                base_url: upstream.base_url.clone(),
                model: model.to_owned(),
                api_key: upstream.key.clone(),
                max_tokens: anthropic::DEFAULT_MAX_TOKENS,
                http: config.http,
            }))
        });
        Gateway {
            openai,
            anthropic,
            registry,
            workspace,
            client_keys: config.client_key_hashes.iter().cloned().collect(),
            body_cap: config.body_cap,
            header_cap: config.header_cap,
            session_scope: config.session_scope,
            audit: None,
            slots: Arc::new(Semaphore::new(config.concurrency.max(1))),
            conversations: Arc::new(Conversations::new(config.max_sessions)),
            metrics: Metrics::default(),
            state: None,
        }
    }

    /// Records every decision on the requests it relays in `audit`, each
    /// line naming its request (see [`crate::audit`]).
    #[must_use]
    pub fn with_audit(mut self, audit: AuditLog) -> Self {
        self.audit = Some(audit);
        self
    }

    /// Reports the health of the gate-state store the packs count in on
    /// `/metrics` (operations, failures, fallbacks, outages, up).
    #[must_use]
    pub fn with_state(mut self, state: StateService) -> Self {
        self.state = Some(state);
        self
    }

    /// The routes: `POST /v1/chat/completions`, `POST /v1/messages`,
    /// `GET /v1/models`, `GET /metrics`, `GET /healthz`, `GET /readyz`.
    pub fn router(self: Arc<Self>) -> Router {
        Router::new()
            .route("/v1/chat/completions", post(relay::<OpenAi>))
            .route("/v1/messages", post(relay::<Anthropic>))
            .route("/v1/models", get(models))
            .route("/metrics", get(metrics))
            .route("/healthz", get(|| async { "ok" }))
            .route("/readyz", get(|| async { "ready" }))
            .with_state(self)
    }

    /// Serves on `listener` until `shutdown` completes; requests in flight
    /// then finish before this returns.
    ///
    /// # Errors
    ///
    /// The I/O error that stopped the server (accepting on the listener).
    pub async fn serve(
        self: Arc<Self>,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        use axum::serve::ListenerExt as _;
        // Replies are written as a head and then a body: without
        // TCP_NODELAY, Nagle's algorithm holds the second write for the
        // client's delayed ACK (up to 40 ms on Linux).
        let listener = listener.tap_io(|stream| {
            let _ = stream.set_nodelay(true);
        });
        axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown)
            .await
    }

    /// The models wire `W` serves.
    fn served<W: Wire>(&self) -> &Served {
        match W::KIND {
            Kind::OpenAi => &self.openai,
            Kind::Anthropic => &self.anthropic,
        }
    }

    /// A session relaying a request of `conversation` (or, with none, of
    /// its own, as `request`) on `provider`, publishing on `bus` (whose
    /// decisions the metrics count).
    fn session(
        &self,
        provider: Arc<dyn Provider>,
        bus: EventBus,
        request: &str,
        conversation: Option<String>,
    ) -> Lease {
        self.metrics.watch(&bus);
        let resumed = conversation.map(|id| Resumed {
            start: self.conversations.start(&id),
            conversations: Arc::clone(&self.conversations),
            id,
        });
        let session_id = resumed.as_ref().map_or(request, |r| r.id.as_str());
        if let Some(audit) = &self.audit {
            audit.attach_exchange(
                &bus,
                Exchange {
                    request: request.to_owned(),
                    session: session_id.to_owned(),
                    turn: resumed.as_ref().map_or(0, |r| r.start.turns()),
                },
            );
        }
        let session = AgentSession::builder(provider, self.workspace.clone())
            .registry(Arc::clone(&self.registry))
            .events(bus)
            .session_id(session_id)
            .build();
        Lease::new(session, resumed, self.audit.clone())
    }

    /// `false` when client keys are configured and the request's key is
    /// not one of them.
    fn accepts_key(&self, headers: &HeaderMap) -> bool {
        self.client_keys.is_empty()
            || presented_key(headers).is_some_and(|key| self.client_keys.contains(&key_hash(key)))
    }
}

/// The key a request presents (`Authorization: Bearer`, or `x-api-key`).
fn presented_key(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .map(str::trim)
        .filter(|key| !key.is_empty())
}

/// `refusal` saying `message`, in wire `W`'s shape (a 429 with
/// `Retry-After: 1`).
fn refuse<W: Wire>(refusal: Refusal, message: &str) -> Response {
    let mut response = json_response(refusal.status(), &W::error(refusal, message));
    if refusal == Refusal::Busy {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.to_string(),
    )
        .into_response()
}

/// The response for a relay that ended without a reply.
fn refused<W: Wire>(relayed: Relayed) -> Response {
    match relayed {
        Relayed::Blocked { reason, by } => {
            let by = by.map(|by| format!(" ({by})")).unwrap_or_default();
            refuse::<W>(
                Refusal::Blocked,
                &format!("blocked by policy{by}: {reason}"),
            )
        }
        Relayed::Failed(failure) => refuse::<W>(
            Refusal::Upstream,
            &format!("the upstream failed: {}", failure.message()),
        ),
        Relayed::Reply(reply) => {
            json_response(StatusCode::OK, &W::reply(&reply, &new_head::<W>("")))
        }
    }
}

/// `GET /v1/models`: every model served, on either wire.
async fn models(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    if !gateway.accepts_key(&headers) {
        return refuse::<OpenAi>(Refusal::BadKey, BAD_KEY);
    }
    let data: Vec<Value> = gateway
        .openai
        .keys()
        .chain(gateway.anthropic.keys())
        .map(|id| json!({"id": id, "object": "model", "created": 0, "owned_by": "chimera", "type": "model", "display_name": id}))
        .collect();
    json_response(
        StatusCode::OK,
        &json!({"object": "list", "data": data, "has_more": false}),
    )
}

const BAD_KEY: &str = "the API key is missing or not accepted by this gateway";

/// A fresh reply head for `model`.
fn new_head<W: Wire>(model: &str) -> Head {
    Head {
        id: format!("{}{:016x}", W::ID_PREFIX, fastrand::u64(..)),
        model: model.to_owned(),
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    }
}

/// `GET /metrics`.
async fn metrics(State(gateway): State<Arc<Gateway>>) -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4"),
        )],
        gateway.metrics.render(gateway.state.as_ref()),
    )
        .into_response()
}

/// `POST` of wire `W`, counted by status.
async fn relay<W: Wire>(
    State(gateway): State<Arc<Gateway>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let response = answer::<W>(Arc::clone(&gateway), &headers, body).await;
    gateway.metrics.request(W::NAME, response.status().as_u16());
    response
}

/// Key, body cap, read, model, slot, then the relay.
async fn answer<W: Wire>(gateway: Arc<Gateway>, headers: &HeaderMap, body: Body) -> Response {
    let started = Instant::now();
    let header_bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if header_bytes > gateway.header_cap {
        return refuse::<W>(
            Refusal::HeadersTooLarge,
            &format!(
                "the request headers are over this gateway's cap of {} bytes",
                gateway.header_cap
            ),
        );
    }
    if !gateway.accepts_key(headers) {
        return refuse::<W>(Refusal::BadKey, BAD_KEY);
    }
    let conversation =
        match sessions::conversation(headers, presented_key(headers), gateway.session_scope) {
            Ok(conversation) => conversation,
            Err(line) => return refuse::<W>(Refusal::BadRequest, &line),
        };
    let Ok(body) = axum::body::to_bytes(body, gateway.body_cap).await else {
        return refuse::<W>(
            Refusal::TooLarge,
            &format!(
                "the request body is over this gateway's cap of {} bytes (or broke off)",
                gateway.body_cap
            ),
        );
    };
    let request = match W::parse(&body) {
        Ok(request) => request,
        Err(line) => return refuse::<W>(Refusal::BadRequest, &line),
    };
    let Some(provider) = gateway.served::<W>().get(&request.model).cloned() else {
        let served: Vec<&str> = gateway.served::<W>().keys().map(String::as_str).collect();
        return refuse::<W>(
            Refusal::UnknownModel,
            &format!(
                "the model '{}' is not served here on {} (served: {})",
                wire::one_word(&request.model),
                W::NAME,
                if served.is_empty() {
                    "none".to_owned()
                } else {
                    served.join(", ")
                }
            ),
        );
    };
    let Ok(slot) = Arc::clone(&gateway.slots).try_acquire_owned() else {
        return refuse::<W>(
            Refusal::Busy,
            "the gateway is at its concurrency limit; retry shortly",
        );
    };
    let head = new_head::<W>(&request.model);
    let timed = Arc::new(Timed::new(provider));
    if request.relay.stream {
        let relaying = stream::Relaying {
            gateway,
            timed,
            started,
            _slot: slot,
        };
        stream::respond::<W>(relaying, request, head, conversation).await
    } else {
        let provider: Arc<dyn Provider> = Arc::clone(&timed) as Arc<dyn Provider>;
        let mut lease = gateway.session(provider, EventBus::new(), &head.id, conversation);
        let relayed = lease.session().relay(request.relay).await;
        drop(lease);
        drop(slot);
        gateway.metrics.timing(timed.spent(), started.elapsed());
        match relayed {
            Relayed::Reply(reply) => json_response(StatusCode::OK, &W::reply(&reply, &head)),
            other => refused::<W>(other),
        }
    }
}

/// The text a relayed session released, as its `assistant_delta` events
/// come, waiting to be sent.
#[derive(Clone, Default)]
struct Released(Arc<Mutex<VecDeque<String>>>);

impl Released {
    /// A bus whose deltas land here.
    fn bus(&self) -> EventBus {
        let bus = EventBus::new();
        let queue = Arc::clone(&self.0);
        bus.subscribe(move |event| {
            if let AgentEvent::AssistantDelta { content } = event {
                if !content.is_empty() {
                    queue
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push_back(content.clone());
                }
            }
        });
        bus
    }

    fn pop(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop_front()
    }

    fn is_empty(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_empty()
    }
}
