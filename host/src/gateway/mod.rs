//! `chimera serve`: the packs as a guardrail gateway in front of an
//! `OpenAI`-compatible upstream, for clients that run their own agent.
//!
//! ```text
//!  client ──POST /v1/chat/completions──▶ key check ─▶ body cap ─▶ read (400 on bad input)
//!         ─▶ model (404 unless served) ─▶ concurrency slot (429 when full)
//!         ─▶ AgentSession::relay: tool_result ─▶ context ─▶ provider_request ─▶ upstream
//!            ─▶ stream_chunk (each delta; only judged text is sent) ─▶ model_response
//!            ─▶ tool_call (each proposed call) ─▶ output (gate retries re-ask upstream)
//!  client ◀── chat.completion | chunk stream | error object ◀──
//! ```
//!
//! Each request is relayed by a session of its own on the shared registry,
//! so every pack the registry holds (load order first, then the host's
//! chains) judges it exactly as in `chimera run`; a hot swap takes effect
//! at the next request while requests in flight finish on the chains they
//! merged. What a session would carry between turns (pack state keyed to a
//! conversation, budgets) is not kept between requests yet.
//!
//! # Status codes
//!
//! | status | when | `error.type` / `code` |
//! |---|---|---|
//! | 400 | the body is not a chat-completions request (the line names the field) | `invalid_request_error` |
//! | 401 | client keys are configured and the bearer key is not one of them | `authentication_error` / `invalid_api_key` |
//! | 403 | a gate blocked the request before the upstream was asked | `permission_error` / `blocked_by_policy` |
//! | 404 | the model is not one the gateway serves | `invalid_request_error` / `model_not_found` |
//! | 413 | the body is over the cap | `invalid_request_error` / `body_too_large` |
//! | 429 | every request slot is taken (`Retry-After: 1`) | `rate_limit_error` / `gateway_busy` |
//! | 502 | the upstream failed (after its retries) | `upstream_error` / `upstream_failed` |
//!
//! A reply a gate vetoed is a 200 whose text is the gate's notice and whose
//! `finish_reason` is `content_filter`; a refused tool call is dropped from
//! `tool_calls` and its refusal line joins the text. A stream whose
//! upstream dies ends with an `error` chunk and no `[DONE]`.

mod openai;
mod stream;

use crate::agent::{AgentEvent, AgentSession, EventBus, Relayed, Reply};
use crate::plugins::Registry;
use crate::providers::{HttpSettings, OpenAiConfig, OpenAiProvider, Provider};
use crate::tools::Workspace;
use crate::types::Headers;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use openai::{ChatRequest, ChunkHead};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::Semaphore;

/// The largest request body taken by default (4 MiB).
pub const DEFAULT_BODY_CAP: usize = 4 * 1024 * 1024;

/// The most requests relayed at once by default.
pub const DEFAULT_CONCURRENCY: usize = 256;

/// What a gateway serves, and where it sends the traffic.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// The upstream's base URL (`https://api.openai.com/v1`), chat
    /// completions below it.
    pub upstream: String,
    /// The gateway's own key for the upstream; a client's key never goes
    /// upstream, nor into a pack.
    pub upstream_key: Option<String>,
    /// The model names clients may ask for (each passed upstream as it is).
    pub models: Vec<String>,
    /// SHA-256 (hex) of each accepted client key; empty: no key asked for.
    pub client_key_hashes: Vec<String>,
    /// The largest request body taken, in bytes.
    pub body_cap: usize,
    /// The most requests relayed at once; more are answered 429.
    pub concurrency: usize,
}

impl GatewayConfig {
    /// A gateway in front of `upstream` serving `models`, no client keys,
    /// the default caps.
    #[must_use]
    pub fn new(upstream: impl Into<String>, models: Vec<String>) -> Self {
        GatewayConfig {
            upstream: upstream.into(),
            upstream_key: None,
            models,
            client_key_hashes: Vec::new(),
            body_cap: DEFAULT_BODY_CAP,
            concurrency: DEFAULT_CONCURRENCY,
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

/// A running gateway's shared state.
pub struct Gateway {
    providers: BTreeMap<String, Arc<dyn Provider>>,
    registry: Arc<Registry>,
    workspace: Workspace,
    client_keys: BTreeSet<String>,
    body_cap: usize,
    slots: Arc<Semaphore>,
}

impl Gateway {
    /// A gateway for `config`, its sessions merging `registry`'s packs;
    /// `workspace` is a directory of its own (relayed sessions run no
    /// tools, but a session is rooted somewhere).
    #[must_use]
    pub fn new(config: &GatewayConfig, registry: Arc<Registry>, workspace: Workspace) -> Self {
        let providers = config
            .models
            .iter()
            .map(|model| {
                let provider: Arc<dyn Provider> = Arc::new(OpenAiProvider::new(OpenAiConfig {
                    base_url: config.upstream.clone(),
                    model: model.clone(),
                    api_key: config.upstream_key.clone(),
                    headers: Headers::default(),
                    http: HttpSettings::default(),
                }));
                (model.clone(), provider)
            })
            .collect();
        Gateway {
            providers,
            registry,
            workspace,
            client_keys: config.client_key_hashes.iter().cloned().collect(),
            body_cap: config.body_cap,
            slots: Arc::new(Semaphore::new(config.concurrency.max(1))),
        }
    }

    /// The routes: `POST /v1/chat/completions`, `GET /v1/models`,
    /// `GET /healthz`, `GET /readyz`.
    pub fn router(self: Arc<Self>) -> Router {
        Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/v1/models", get(models))
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
        axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown)
            .await
    }

    /// A session relaying one request on `provider`, publishing on `bus`.
    fn session(&self, provider: &Arc<dyn Provider>, bus: EventBus) -> AgentSession {
        AgentSession::builder(Arc::clone(provider), self.workspace.clone())
            .registry(Arc::clone(&self.registry))
            .events(bus)
            .build()
    }

    /// The 401 when client keys are configured and the request's bearer
    /// key is not one of them.
    fn refuse_key(&self, headers: &HeaderMap) -> Option<Response> {
        if self.client_keys.is_empty() {
            return None;
        }
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()));
        match presented {
            Some(key) if self.client_keys.contains(&key_hash(key.trim())) => None,
            _ => Some(error(
                StatusCode::UNAUTHORIZED,
                "the API key is missing or not accepted by this gateway",
                "authentication_error",
                Some("invalid_api_key"),
            )),
        }
    }
}

/// An error response in the `OpenAI` wire's shape.
fn error(status: StatusCode, message: &str, kind: &str, code: Option<&str>) -> Response {
    json_response(status, &openai::error_body(message, kind, code))
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
fn refused(relayed: Relayed) -> Response {
    match relayed {
        Relayed::Blocked { reason, by } => {
            let by = by.map(|by| format!(" ({by})")).unwrap_or_default();
            error(
                StatusCode::FORBIDDEN,
                &format!("blocked by policy{by}: {reason}"),
                "permission_error",
                Some("blocked_by_policy"),
            )
        }
        Relayed::Failed(failure) => error(
            StatusCode::BAD_GATEWAY,
            &format!("the upstream failed: {}", failure.message()),
            "upstream_error",
            Some("upstream_failed"),
        ),
        Relayed::Reply(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal error: a reply was taken for a refusal",
            "server_error",
            None,
        ),
    }
}

async fn models(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    if let Some(response) = gateway.refuse_key(&headers) {
        return response;
    }
    let data: Vec<Value> = gateway
        .providers
        .keys()
        .map(|id| json!({"id": id, "object": "model", "created": 0, "owned_by": "chimera"}))
        .collect();
    json_response(StatusCode::OK, &json!({"object": "list", "data": data}))
}

async fn chat_completions(
    State(gateway): State<Arc<Gateway>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Some(response) = gateway.refuse_key(&headers) {
        return response;
    }
    let Ok(body) = axum::body::to_bytes(body, gateway.body_cap).await else {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!(
                "the request body is over this gateway's cap of {} bytes (or broke off)",
                gateway.body_cap
            ),
            "invalid_request_error",
            Some("body_too_large"),
        );
    };
    let request = match openai::parse_request(&body) {
        Ok(request) => request,
        Err(line) => {
            return error(
                StatusCode::BAD_REQUEST,
                &line,
                "invalid_request_error",
                None,
            )
        }
    };
    let Some(provider) = gateway.providers.get(&request.model).cloned() else {
        let served: Vec<&str> = gateway.providers.keys().map(String::as_str).collect();
        return error(
            StatusCode::NOT_FOUND,
            &format!(
                "the model '{}' is not served here (served: {})",
                crate::types::one_line(&request.model),
                served.join(", ")
            ),
            "invalid_request_error",
            Some("model_not_found"),
        );
    };
    let Ok(slot) = Arc::clone(&gateway.slots).try_acquire_owned() else {
        let mut response = error(
            StatusCode::TOO_MANY_REQUESTS,
            "the gateway is at its concurrency limit; retry shortly",
            "rate_limit_error",
            Some("gateway_busy"),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return response;
    };
    let head = Head {
        id: format!("chatcmpl-{:016x}", fastrand::u64(..)),
        model: request.model.clone(),
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    };
    if request.relay.stream {
        stream::respond(&gateway, &provider, request, head, slot).await
    } else {
        let mut session = gateway.session(&provider, EventBus::new());
        let relayed = session.relay(request.relay).await;
        drop(slot);
        match relayed {
            Relayed::Reply(reply) => json_response(
                StatusCode::OK,
                &openai::completion(&reply, &head.model, &head.id, head.created),
            ),
            other => refused(other),
        }
    }
}

/// What every chunk of one reply repeats, owned.
struct Head {
    id: String,
    model: String,
    created: u64,
}

impl Head {
    fn chunk_head(&self) -> ChunkHead<'_> {
        ChunkHead {
            id: &self.id,
            model: &self.model,
            created: self.created,
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

/// A judged reply's chunks after what was streamed.
fn closing(head: &Head, reply: &Reply, sent: &str, include_usage: bool) -> Bytes {
    Bytes::from(openai::closing_chunks(
        &head.chunk_head(),
        reply,
        sent,
        include_usage,
    ))
}
