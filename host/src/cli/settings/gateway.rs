//! The gateway's settings (`[serve]`, `[serve.openai]`,
//! `[serve.anthropic]`) and where gate state is kept (`[state]`), declared
//! as [`groups`](super::groups) are: one field per setting.

use super::groups::StreamPolicyArg;
use super::values;
use clap::Args;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;

/// `chimera serve`'s own settings (`[serve]`): the packs judge every
/// request and reply that passes between a client and the upstream.
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub(crate) struct GatewayArgs {
    /// The address to listen on (port 0: any free port; the address taken
    /// is printed as `listening on http://ADDR`).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8787")]
    pub(crate) listen: SocketAddr,

    #[command(flatten)]
    pub(crate) openai: OpenAiUpstreamArgs,

    #[command(flatten)]
    pub(crate) anthropic: AnthropicUpstreamArgs,

    /// The SHA-256 (hex) of a client key to accept (repeatable); with none,
    /// no key is asked for. `chimera serve --hash-key` prints one.
    #[arg(long = "client-key-sha256", value_name = "HEX")]
    pub(crate) client_key_sha256: Vec<String>,

    /// The SHA-256 (hex) of the key `/metrics` asks for (`Authorization:
    /// Bearer` or `x-api-key`). With client keys and neither this nor
    /// `--metrics-listen`, `/metrics` is refused: no client key opens it.
    #[arg(long = "metrics-key-sha256", value_name = "HEX")]
    pub(crate) metrics_key_sha256: Option<String>,

    /// Serve `/metrics` on this address alone (not on `--listen`); the
    /// address taken is printed as `metrics on http://ADDR/metrics`.
    #[arg(long = "metrics-listen", value_name = "ADDR")]
    pub(crate) metrics_listen: Option<SocketAddr>,

    /// The largest request body taken, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = chimera_host::gateway::DEFAULT_BODY_CAP)]
    pub(crate) body_cap: usize,

    /// The most bytes of request headers taken, names and values (more
    /// are answered 431).
    #[arg(long, value_name = "BYTES", default_value_t = chimera_host::gateway::DEFAULT_HEADER_CAP)]
    pub(crate) header_cap: usize,

    /// The most requests relayed at once (more are answered 429).
    #[arg(long, value_name = "N", default_value_t = chimera_host::gateway::DEFAULT_CONCURRENCY)]
    pub(crate) concurrency: usize,

    /// The most conversations kept between requests (named by the
    /// x-chimera-session header or the client's key); the least recently
    /// used is forgotten.
    #[arg(long, value_name = "N", default_value_t = chimera_host::gateway::sessions::DEFAULT_MAX_SESSIONS)]
    pub(crate) max_sessions: usize,

    /// What names a conversation: `header` (x-chimera-session within the
    /// key, else the key) or `key` (the key alone: a client cannot start a
    /// fresh per-conversation budget by naming a new conversation).
    #[arg(long, value_name = "header|key", default_value = "header")]
    pub(crate) session_scope: chimera_host::gateway::SessionScope,

    /// How long connecting to an upstream may take, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub(crate) upstream_connect_timeout: u64,

    /// How long an upstream may take to answer, and then to send its whole
    /// reply, in seconds (then the client gets a 502, or an error event).
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    pub(crate) upstream_timeout: u64,

    /// How often the gateway itself retries an upstream 429 or 5xx (0: it
    /// passes them on with their retry-after, and the client retries).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) upstream_retries: u32,

    /// A streamed request when a pack gates whole replies only (json-schema,
    /// output-length, a `model_response` gate): `downgrade` holds each
    /// reply's text until the reply is judged whole; `allow` streams it and
    /// appends the verdict (`run --stream-policy` decides the same for a
    /// session's own stream).
    #[arg(long, value_name = "downgrade|allow", default_value = "downgrade")]
    pub(crate) stream_policy: StreamPolicyArg,

    /// Append every decision on every request to this audit log (each line
    /// names its request).
    #[arg(long, value_name = "FILE")]
    #[serde(deserialize_with = "values::relative_path")]
    pub(crate) audit: Option<PathBuf>,

    /// How many threads serve clients (default: one per CPU). Each accepts
    /// connections of its own and serves them to their end, with their
    /// upstream connections; a call that blocks (an isolated pack, a
    /// remote state store) moves the thread's other connections aside.
    #[arg(long, value_name = "N")]
    pub(crate) threads: Option<usize>,

    /// Watch the loaded packs' files and hot-swap rebuilt ones; requests
    /// in flight finish on the version they started with.
    #[arg(long)]
    pub(crate) watch: bool,

    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) limits: ClientLimitArgs,
}

/// The chat-completions upstream (`[serve.openai]`). Its URL on the
/// command line chooses it whole: the file's `key_env` and `models` are
/// then not mixed in.
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub(crate) struct OpenAiUpstreamArgs {
    /// The chat-completions upstream's base URL, up to and including
    /// `/v1` (`POST /v1/chat/completions` goes there; in the file:
    /// `[serve.openai] base_url`, with `key_env` and `models`).
    #[arg(id = "serve.openai.base_url", long = "upstream", value_name = "URL")]
    pub(crate) base_url: Option<String>,

    /// The environment variable holding the gateway's key for that
    /// upstream (clients' keys never go upstream).
    #[arg(
        id = "serve.openai.key_env",
        long = "upstream-key-env",
        value_name = "VAR"
    )]
    pub(crate) key_env: Option<String>,

    /// A model clients may ask that upstream for (repeatable; passed on
    /// as it is). `--model` is the old name; `run --model` is different:
    /// the one model a session asks its provider for.
    #[arg(
        id = "serve.openai.models",
        long = "upstream-model",
        visible_alias = "model",
        value_name = "NAME"
    )]
    pub(crate) models: Vec<String>,
}

/// The Messages upstream (`[serve.anthropic]`), chosen as
/// [`OpenAiUpstreamArgs`] is.
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub(crate) struct AnthropicUpstreamArgs {
    /// The Messages upstream's base URL, without `/v1` (`POST
    /// /v1/messages` goes there; in the file: `[serve.anthropic]
    /// base_url`, with `key_env` and `models`).
    #[arg(
        id = "serve.anthropic.base_url",
        long = "anthropic-upstream",
        value_name = "URL"
    )]
    pub(crate) base_url: Option<String>,

    /// The environment variable holding the gateway's key for the
    /// Messages upstream.
    #[arg(
        id = "serve.anthropic.key_env",
        long = "anthropic-key-env",
        value_name = "VAR"
    )]
    pub(crate) key_env: Option<String>,

    /// A model clients may ask the Messages upstream for (repeatable).
    #[arg(
        id = "serve.anthropic.models",
        long = "anthropic-model",
        value_name = "NAME"
    )]
    pub(crate) models: Vec<String>,
}

/// What one client may hold of the gateway: time, bytes, requests (keys
/// of `[serve]`).
#[derive(Debug, Args, Clone, Serialize, Deserialize)]
pub(crate) struct ClientLimitArgs {
    /// How long a request's headers may take to arrive (and an idle
    /// keep-alive connection may wait for the next request), in seconds;
    /// then the connection is closed.
    #[arg(long, value_name = "SECS", default_value_t = chimera_host::gateway::DEFAULT_HEADER_TIMEOUT.as_secs())]
    pub(crate) header_timeout: u64,
    /// How long a request's body may take to arrive, in seconds (then 408).
    #[arg(long, value_name = "SECS", default_value_t = chimera_host::gateway::DEFAULT_BODY_TIMEOUT.as_secs())]
    pub(crate) body_timeout: u64,
    /// How long a client may take none of what is written to it, in
    /// seconds: then its connection is closed, and a stream relayed to it
    /// stops (its upstream call cancelled, its slot freed).
    #[arg(long, value_name = "SECS", default_value_t = chimera_host::gateway::DEFAULT_WRITE_TIMEOUT.as_secs())]
    pub(crate) write_timeout: u64,
    /// The most request-body bytes buffered across all requests in
    /// flight (more are answered 429).
    #[arg(long, value_name = "BYTES", default_value_t = chimera_host::gateway::DEFAULT_BUFFER_CAP)]
    pub(crate) buffer_cap: usize,
    /// The most request-body bytes one client key's requests buffer (more
    /// are answered 429).
    #[arg(long, value_name = "BYTES", default_value_t = chimera_host::gateway::DEFAULT_KEY_BUFFER_CAP)]
    pub(crate) key_buffer_cap: usize,
    /// The most requests one client key has in flight (more are answered
    /// 429); requests without a key count as one client.
    #[arg(long, value_name = "N", default_value_t = chimera_host::gateway::DEFAULT_KEY_CONCURRENCY)]
    pub(crate) key_concurrency: usize,
    /// What a rate limiter's pause does, in seconds: 0 answers 429 with
    /// retry-after at once; more holds the request, without a concurrency
    /// slot, for up to this long.
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub(crate) rate_limit_hold: u64,
}

/// Where gate state is kept, and what gates do while it is unreachable
/// (`[state]`).
#[derive(Debug, Args, Clone, Serialize, Deserialize)]
#[allow(
    clippy::doc_markdown,
    reason = "clap prints these comments as --help, where backticks would show"
)]
pub(crate) struct StateArgs {
    /// Keep gate state (token budgets, rate limits, loop caps) in this
    /// Redis (redis://HOST:PORT[/DB]): every replica using it enforces one
    /// budget. Without it, gate state lives in this process.
    #[arg(long = "state-redis", value_name = "URL")]
    pub(crate) redis: Option<String>,
    /// How long one state operation may take, in milliseconds; past it the
    /// store counts as down for a second.
    #[arg(long = "state-timeout-ms", value_name = "MS", default_value_t = 100)]
    pub(crate) timeout_ms: u64,
    /// What gates do while the store is down: fail_closed (refuse, with
    /// the reason) or fail_open (count in this process until it answers).
    #[arg(
        long = "state-on-unavailable",
        value_name = "fail_closed|fail_open",
        default_value = "fail_closed"
    )]
    pub(crate) on_unavailable: chimera_host::state::FailPolicy,
    /// One pack's own policy while the store is down (repeatable):
    /// NAME=fail_closed or NAME=fail_open (in the file, a table of NAME =
    /// POLICY).
    #[arg(long = "state-policy", value_name = "NAME=POLICY")]
    #[serde(deserialize_with = "values::policies")]
    pub(crate) policies: Vec<String>,
}
