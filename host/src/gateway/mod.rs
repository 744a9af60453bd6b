//! `chimera serve`: the packs as a guardrail gateway for clients that run
//! their own agent, speaking the `OpenAI` chat-completions and Responses
//! wires and the Anthropic Messages wire to them (see [`responses`] for
//! the Responses wire's own shapes), and the same wire to the upstream;
//! the requests that only carry input (`count_tokens`, `embeddings`) pass
//! the request seams (see [`inputs`]).
//!
//! ```text
//!  client ──POST /v1/chat/completions | /v1/messages──▶ key check ─▶ body cap
//!         ─▶ parse once (400 on what cannot be read) ─▶ views ─▶ model (404)
//!         ─▶ concurrency slot (429 when full)
//!         ─▶ tool_result ─▶ context ─▶ provider_request on the views
//!         ─▶ the client's own body, with what the seams changed spliced in ─▶ upstream
//!         ─▶ its reply: stream_chunk (each text delta) ─▶ model_response
//!            ─▶ tool_call (each proposed call) ─▶ output (gate retries re-ask upstream)
//!  client ◀── the upstream's reply, status and headers, with the verdicts written in ◀──
//! ```
//!
//! The gateway judges views of the client's own document and relays
//! everything else unchanged: unknown fields, key order, numbers as
//! written, `cache_control`, `thinking` blocks and signatures, images,
//! documents, server tools, `n`, beta and version headers (see
//! [`views`](self::views) and each wire's module for what a view is and
//! where a replacement is written). Every text the model reads is judged
//! on every request — each system block, every message of every role, tool
//! results, tool descriptions — because a client can send any history.
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
//! The upstream's own statuses pass through with their headers
//! (`retry-after`, request ids) and bodies (the error message judged); the
//! gateway does not retry for the client unless `upstream_retries` says
//! so. Its own answers:
//!
//! | status | when | chat completions, Responses `error.type` / `code` | messages `error.type` |
//! |---|---|---|---|
//! | 400 | the body is not a request of the wire (the line names the field) | `invalid_request_error` | `invalid_request_error` |
//! | 401 | client keys are configured and the key is not one of them | `authentication_error` / `invalid_api_key` | `authentication_error` |
//! | 403 | a gate blocked the request before the upstream was asked | `permission_error` / `blocked_by_policy` | `permission_error` |
//! | 404 | the model is not one the gateway serves on that wire, or the route is unknown | `invalid_request_error` / `not_found` | `not_found_error` |
//! | 408 | the body did not arrive within the body timeout | `invalid_request_error` / `request_timeout` | `invalid_request_error` |
//! | 413 | the body is over the cap | `invalid_request_error` / `body_too_large` | `request_too_large` |
//! | 431 | the headers are over the cap | `invalid_request_error` / `headers_too_large` | `invalid_request_error` |
//! | 429 | every request slot is taken, or the key's, or the buffer of request bodies is full (`Retry-After: 1`) | `rate_limit_error` / `gateway_busy` | `rate_limit_error` |
//! | 429 | a rate limiter paused the request (`Retry-After`: its wait; see [`hold`](self::hold)) | `rate_limit_error` / `rate_limit_exceeded` | `rate_limit_error` |
//! | 502 | the upstream gave no answer, or one that cannot be read | `upstream_error` / `upstream_failed` | `api_error` |
//! | 503 | a pack could not judge the request or the reply (an error, a call past its deadline, its process restarting, a quarantine; `Retry-After: 1`) | `server_error` / `policy_unavailable` | `api_error` |
//!
//! Every refusal but 408, 429, 502 and 503 carries `x-should-retry: false`.
//! What one client may hold (its requests in flight, the bytes of its
//! bodies, the time its headers, body and reads take) is bounded so no
//! client takes another's share: see [`bounds`](self::bounds) and
//! [`listen`](self::listen). A reply
//! a gate vetoed is a 200 whose text is the gate's notice, ending with
//! `finish_reason: content_filter` (chat completions) or `stop_reason:
//! end_turn` (messages: with `refusal`, Claude Code shows its own
//! usage-policy message instead of the notice); a refused tool call is
//! dropped and its refusal line joins the text (Messages: its block
//! becomes a text block). A stream the upstream ends early, or that
//! breaks off, ends with an error event and no end marker.

mod anthropic;
mod bounds;
mod chains;
mod events;
mod exchange;
mod forward;
mod hold;
mod inputs;
mod keys;
mod metrics;
mod models;
mod openai;
mod request_views;
mod responses;
pub mod sessions;
mod views;
mod wire;

use crate::agent::{AgentSession, EventBus, StreamPolicy};
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
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
pub use bounds::{
    ClientLimits, DEFAULT_BODY_TIMEOUT, DEFAULT_BUFFER_CAP, DEFAULT_HEADER_TIMEOUT,
    DEFAULT_KEY_BUFFER_CAP, DEFAULT_KEY_CONCURRENCY, DEFAULT_WRITE_TIMEOUT,
};
use forward::{Forwarder, KeyStyle};
use inputs::{CountTokens, Embeddings};
pub use keys::key_hash;
use keys::{presented_key_hash, presents_key};
use metrics::Metrics;
use openai::OpenAi;
use responses::Responses;
use serde_json::Value;
use sessions::{Conversations, Lease, Resumed};
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;
use wire::{Kind, Refusal, Wire};

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
    /// The model names clients may ask for, each a name or a pattern
    /// (`*` any run of characters, `?` one: `claude-*`, `*`); the name a
    /// client asks for goes upstream as it is.
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
    /// Timeouts and size limits of the calls to the upstreams.
    pub http: HttpSettings,
    /// How often the gateway itself retries an upstream 429 or 5xx (0: it
    /// passes them to the client, whose SDK retries).
    pub upstream_retries: u32,
    /// A streamed request when a pack gates whole replies only:
    /// `Downgrade` holds each reply's text until the reply is judged whole,
    /// `Allow` streams it and appends the verdict.
    pub stream_policy: StreamPolicy,
    /// What one client may hold: timeouts, buffered bytes, requests in
    /// flight, and what a rate limit's pause does.
    pub limits: ClientLimits,
    /// Who may read `/metrics`.
    pub metrics: MetricsAccess,
}

/// Who may read `/metrics`: what it shows (every client's requests and
/// what the packs decided on them, the store's address) is the operator's,
/// never a client's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum MetricsAccess {
    /// On the gateway's listener, to a request presenting no key or any
    /// key while no client keys are configured; refused (401) while they
    /// are, since a client key must not open it.
    #[default]
    Listener,
    /// On the gateway's listener, to a request presenting the key of this
    /// SHA-256 (hex) alone.
    Key(String),
    /// Not on the gateway's listener (404 there): on a listener of its own
    /// ([`Gateway::metrics_router`]), optionally behind the key of this
    /// SHA-256.
    Apart(Option<String>),
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
            upstream_retries: 0,
            stream_policy: StreamPolicy::Downgrade,
            limits: ClientLimits::default(),
            metrics: MetricsAccess::Listener,
        }
    }
}

/// The most providers kept for the gateway's own calls (gate retries,
/// summaries), one per model name asked for.
const PROVIDERS_KEPT: usize = 64;

/// One wire's upstream as the gateway uses it.
struct Served {
    upstream: Upstream,
    kind: Kind,
    forwarder: Forwarder,
    http: HttpSettings,
    /// A provider per model name, for the calls the gateway makes itself.
    providers: Mutex<HashMap<String, Arc<dyn Provider>>>,
}

impl Served {
    fn new(upstream: &Upstream, kind: Kind, config: &GatewayConfig) -> Self {
        let style = match kind {
            Kind::OpenAi => KeyStyle::Bearer,
            Kind::Anthropic => KeyStyle::Anthropic,
        };
        Served {
            upstream: upstream.clone(),
            kind,
            forwarder: Forwarder::new(
                upstream.base_url.trim_end_matches('/'),
                upstream.key.clone(),
                style,
                &config.http,
                config.upstream_retries,
            ),
            http: config.http,
            providers: Mutex::new(HashMap::new()),
        }
    }

    /// Whether a client may ask for `model`.
    fn serves(&self, model: &str) -> bool {
        self.upstream
            .models
            .iter()
            .any(|pattern| glob(pattern, model))
    }

    /// The served names, for an error line.
    fn listed(&self) -> String {
        if self.upstream.models.is_empty() {
            "none".to_owned()
        } else {
            self.upstream.models.join(", ")
        }
    }

    /// The provider for the gateway's own calls at `model`.
    fn provider(&self, model: &str) -> Arc<dyn Provider> {
        let mut providers = self
            .providers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(provider) = providers.get(model) {
            return Arc::clone(provider);
        }
        if providers.len() >= PROVIDERS_KEPT {
            providers.clear();
        }
        let upstream = &self.upstream;
        let provider: Arc<dyn Provider> = match self.kind {
            Kind::OpenAi => Arc::new(OpenAiProvider::new(OpenAiConfig {
                base_url: upstream.base_url.clone(),
                model: model.to_owned(),
                api_key: upstream.key.clone(),
                headers: Headers::default(),
                http: self.http,
            })),
            Kind::Anthropic => Arc::new(AnthropicProvider::new(AnthropicConfig {
                base_url: upstream.base_url.clone(),
                model: model.to_owned(),
                api_key: upstream.key.clone(),
                max_tokens: anthropic::DEFAULT_MAX_TOKENS,
                http: self.http,
            })),
        };
        providers.insert(model.to_owned(), Arc::clone(&provider));
        provider
    }
}

/// Whether `name` matches `pattern` (`*` any run of characters, `?` one).
fn glob(pattern: &str, name: &str) -> bool {
    let (pattern, name): (Vec<char>, Vec<char>) =
        (pattern.chars().collect(), name.chars().collect());
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == '?' || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    p = sp + 1;
                    n = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// A running gateway's shared state.
pub struct Gateway {
    openai: Option<Served>,
    anthropic: Option<Served>,
    registry: Arc<Registry>,
    workspace: Workspace,
    client_keys: BTreeSet<String>,
    header_cap: usize,
    session_scope: SessionScope,
    stream_policy: StreamPolicy,
    audit: Option<AuditLog>,
    slots: Arc<Semaphore>,
    limits: ClientLimits,
    bounds: Arc<bounds::Bounds>,
    conversations: Arc<Conversations>,
    chains: chains::Chains,
    metrics: Metrics,
    metrics_access: MetricsAccess,
    state: Option<StateService>,
}

impl Gateway {
    /// A gateway for `config`, its sessions merging `registry`'s packs;
    /// `workspace` is a directory of its own (relayed sessions run no
    /// tools, but a session is rooted somewhere).
    #[must_use]
    pub fn new(config: &GatewayConfig, registry: Arc<Registry>, workspace: Workspace) -> Self {
        Gateway {
            openai: config
                .openai
                .as_ref()
                .map(|u| Served::new(u, Kind::OpenAi, config)),
            anthropic: config
                .anthropic
                .as_ref()
                .map(|u| Served::new(u, Kind::Anthropic, config)),
            registry,
            workspace,
            client_keys: config.client_key_hashes.iter().cloned().collect(),
            header_cap: config.header_cap,
            session_scope: config.session_scope,
            stream_policy: config.stream_policy,
            audit: None,
            slots: Arc::new(Semaphore::new(config.concurrency.max(1))),
            limits: config.limits,
            bounds: Arc::new(bounds::Bounds::new(&config.limits, config.body_cap)),
            conversations: Arc::new(Conversations::new(config.max_sessions)),
            chains: chains::Chains::new(config.max_sessions),
            metrics: Metrics::default(),
            metrics_access: config.metrics.clone(),
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

    /// The routes: `POST /v1/chat/completions`, `POST /v1/responses`,
    /// `POST /v1/embeddings`, `POST /v1/messages`, `POST
    /// /v1/messages/count_tokens`, `GET /v1/models`, `GET /metrics`, `GET /healthz`, `GET /readyz`;
    /// anything else is a 404 error in the wire its path names.
    pub fn router(self: Arc<Self>) -> Router {
        Router::new()
            .route("/v1/chat/completions", post(relay::<OpenAi>))
            .route("/v1/messages", post(relay::<Anthropic>))
            .route("/v1/messages/count_tokens", post(relay::<CountTokens>))
            .route("/v1/responses", post(relay::<Responses>))
            .route("/v1/embeddings", post(relay::<Embeddings>))
            .route("/v1/models", get(models::models))
            .route("/metrics", get(metrics))
            .route("/healthz", get(|| async { "ok" }))
            .route("/readyz", get(|| async { "ready" }))
            .fallback(unknown_route)
            .with_state(self)
    }

    /// The routes of a listener of `/metrics`' own
    /// ([`MetricsAccess::Apart`]): `GET /metrics` and nothing else.
    pub fn metrics_router(self: Arc<Self>) -> Router {
        Router::new()
            .route("/metrics", get(metrics_apart))
            .with_state(self)
    }

    /// Serves on `listener` until `shutdown` completes; requests in flight
    /// then finish before this returns. Each connection is held to the
    /// header and write timeouts (see [`listen`](self::listen)).
    ///
    /// # Errors
    ///
    /// The I/O error that stopped the server (accepting on the listener).
    pub async fn serve(
        self: Arc<Self>,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let limits = crate::listen::ConnectionLimits {
            header_timeout: self.limits.header_timeout,
            write_timeout: self.limits.write_timeout,
            header_cap: self.header_cap,
        };
        let service = hyper_util::service::TowerToHyperService::new(self.router());
        crate::listen::serve(service, listener, limits, shutdown).await
    }

    /// What streamed replies do with the packs loaded now, in one line, when
    /// a pack judges whole replies only (for the start-up log): held whole
    /// until judged (`downgrade`), or streamed with the verdict appended
    /// (`allow`).
    #[must_use]
    pub fn stream_line(&self) -> Option<String> {
        let plugins = self.registry.snapshot()?;
        let (packs, which) = crate::agent::whole_reply_gates(&plugins);
        if packs.is_empty() {
            return None;
        }
        Some(match self.stream_policy {
            StreamPolicy::Downgrade => format!(
                "streamed replies are held whole until judged: {} (--stream-policy allow streams them and appends the verdict)",
                which.join("; ")
            ),
            StreamPolicy::Allow => format!(
                "streamed replies stream as they come and the verdict is appended: {} (a veto cannot take back what streamed)",
                which.join("; ")
            ),
        })
    }

    /// The upstream wire `W` goes to, when one is configured.
    fn served<W: Wire>(&self) -> Option<&Served> {
        match W::KIND {
            Kind::OpenAi => self.openai.as_ref(),
            Kind::Anthropic => self.anthropic.as_ref(),
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

    /// `false` when client keys are configured and the request's key (of
    /// SHA-256 `hash`, see [`presented_key_hash`]) is not one of them.
    fn accepts_key(&self, hash: Option<&str>) -> bool {
        self.client_keys.is_empty() || hash.is_some_and(|hash| self.client_keys.contains(hash))
    }
}

/// `refusal` saying `message`, in wire `W`'s shape (a 429 with
/// `Retry-After: 1`; a final refusal with `x-should-retry: false`).
fn refuse<W: Wire>(refusal: Refusal, message: &str) -> Response {
    let mut response = json_response(refusal.status(), &W::error(refusal, message));
    let headers = response.headers_mut();
    if matches!(refusal, Refusal::Busy | Refusal::Unjudged) {
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    if refusal.final_answer() {
        headers.insert("x-should-retry", HeaderValue::from_static("false"));
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

/// Any other route: a 404 in the wire its path names (Messages for
/// `/v1/messages…`, chat completions otherwise).
async fn unknown_route(uri: Uri) -> Response {
    let line = format!("no route {} on this gateway", wire::one_word(uri.path()));
    if uri.path().starts_with("/v1/messages") {
        refuse::<Anthropic>(Refusal::NotFound, &line)
    } else {
        refuse::<OpenAi>(Refusal::NotFound, &line)
    }
}

const BAD_KEY: &str = "the API key is missing or not accepted by this gateway";

/// A fresh id for a request, beginning with `prefix` (what its audit
/// lines name).
fn new_id(prefix: &str) -> String {
    // Written digit by digit: `format!` took ~800 instructions of a
    // request's ~83 000 for this and the session's id.
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let random = fastrand::u64(..);
    let mut id = String::with_capacity(prefix.len() + 16);
    id.push_str(prefix);
    for shift in (0..16).rev().map(|digit| digit * 4) {
        let digit = usize::try_from(random >> shift & 0xf).unwrap_or(0);
        id.push(char::from(HEX[digit]));
    }
    id
}

/// `GET /metrics` on the gateway's listener, to whom [`MetricsAccess`]
/// lets read it.
async fn metrics(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    let presents = |hash: &str| presents_key(&headers, hash);
    match &gateway.metrics_access {
        MetricsAccess::Apart(_) => plain(
            StatusCode::NOT_FOUND,
            "/metrics is served on a listener of its own",
        ),
        MetricsAccess::Key(hash) if !presents(hash) => {
            plain(StatusCode::UNAUTHORIZED, "/metrics needs the metrics key")
        }
        MetricsAccess::Listener if !gateway.client_keys.is_empty() => plain(
            StatusCode::UNAUTHORIZED,
            "/metrics is not open to client keys: give it a key of its own \
             (--metrics-key-sha256) or a listener of its own (--metrics-listen)",
        ),
        _ => metrics_page(&gateway),
    }
}

/// `GET /metrics` on its own listener, behind its key when it has one.
async fn metrics_apart(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    match &gateway.metrics_access {
        MetricsAccess::Apart(Some(hash)) if !presents_key(&headers, hash) => {
            plain(StatusCode::UNAUTHORIZED, "/metrics needs the metrics key")
        }
        _ => metrics_page(&gateway),
    }
}

/// The metrics, as Prometheus text.
fn metrics_page(gateway: &Gateway) -> Response {
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

/// A plain-text answer of one line.
fn plain(status: StatusCode, line: &str) -> Response {
    (status, format!("{line}\n")).into_response()
}

/// `POST` of wire `W`, counted by status; its headers read in place
/// (axum's `HeaderMap` extractor would clone each value).
async fn relay<W: Wire>(
    State(gateway): State<Arc<Gateway>>,
    request: axum::extract::Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let query = parts.uri.query().map(str::to_owned);
    let response = exchange::answer::<W>(Arc::clone(&gateway), &parts.headers, query, body).await;
    gateway.metrics.request(W::NAME, response.status().as_u16());
    response
}

#[cfg(test)]
mod tests {
    use super::{glob, new_id};

    #[test]
    fn an_id_is_its_prefix_and_sixteen_hex_digits_of_a_random_number() {
        let ids: Vec<String> = (0..64).map(|_| new_id("chatcmpl-")).collect();
        for id in &ids {
            let digits = id.strip_prefix("chatcmpl-").unwrap();
            assert_eq!(digits.len(), 16, "{id}");
            let number = u64::from_str_radix(digits, 16).unwrap();
            assert_eq!(format!("{number:016x}"), digits, "{id}");
        }
        // Every digit place takes more than one value across the ids.
        for place in 9..25 {
            let seen: std::collections::HashSet<u8> =
                ids.iter().map(|id| id.as_bytes()[place]).collect();
            assert!(seen.len() > 1, "place {place}: {ids:?}");
        }
    }

    #[test]
    fn model_patterns_match_names_the_operator_cannot_foresee() {
        for (pattern, name, matches) in [
            ("claude-*", "claude-opus-4-8", true),
            ("claude-*", "gpt-4o", false),
            ("*", "anything", true),
            ("gpt-4o", "gpt-4o", true),
            ("gpt-4o", "gpt-4o-mini", false),
            ("gpt-?o", "gpt-4o", true),
            ("*-mini", "gpt-4o-mini", true),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "aXbY", false),
        ] {
            assert_eq!(glob(pattern, name), matches, "{pattern} {name}");
        }
    }
}
