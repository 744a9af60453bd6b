//! The command line: the outward contract tests, scripts and users rely on
//! (README.md, "Using it"). Add to it freely; rename nothing without keeping
//! the old name working.
//!
//! One file past 700 lines on purpose: every subcommand's flags side by
//! side (they share groups: the pack, trust and state flags), read and
//! kept as one contract.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// What `chimera -h` (and a bare `chimera`) opens with.
const ABOUT: &str =
    "Chimera runs an AI coding agent whose policies are plugin packs you load by name. \
Start with `chimera demo`, then `chimera packs list` and `chimera run`.";

/// What `chimera --help` opens with.
const LONG_ABOUT: &str = "Chimera runs an AI coding agent (a model that reads, writes and runs \
commands in a workspace) whose policies are plugin packs you load by name: plan before \
editing, redact secrets, ask before a tool runs, cap the tokens spent, and more. Packs are \
compiled libraries; a rebuilt pack is swapped into a running session.

Start with:
  chimera demo          a scripted session showing the bundled packs at work
  chimera packs list    the packs chimera finds, by name
  chimera run --provider openai --model gpt-4o-mini --pack plan-gate \"add a README\"
                        a session with a real model (OPENAI_API_KEY set)";

/// Chimera: an agent host whose policies ship as compiled, hot-swappable packs.
#[derive(Debug, Parser)]
#[command(
    name = "chimera",
    version,
    long_version = super::version::long_version(),
    about = ABOUT,
    long_about = LONG_ABOUT
)]
pub(crate) struct Cli {
    /// The configuration file to use instead of ./chimera.toml and the
    /// per-user one (~/.config/chimera/chimera.toml).
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) config: Option<PathBuf>,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once at start-up; boxing the run arguments buys nothing"
)]
pub(crate) enum Command {
    /// Run an agent session.
    Run(RunArgs),
    /// The embedded default: a scripted session with the bundled packs.
    Demo(DemoArgs),
    /// Inspect packs.
    #[command(subcommand)]
    Packs(PacksCommand),
    /// Author packs: generate a pack crate, replay policy test cases.
    #[command(subcommand)]
    Pack(PackCommand),
    /// The configuration file, chimera.toml.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// The audit log `run --audit FILE` writes.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// The built-in tools.
    #[command(subcommand)]
    Tools(ToolsCommand),
    /// Serve the packs as a guardrail gateway for OpenAI-compatible clients.
    Serve(ServeArgs),
    /// Put the packs in front of MCP servers.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// The child process of an isolated pack (started by chimera itself).
    #[command(name = "pack-host", hide = true)]
    PackHost(PackHostArgs),
}

/// `chimera serve`: the packs judge every request and reply that passes
/// between a client and the upstream.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The address to listen on (port 0: any free port; the address taken
    /// is printed as `listening on http://ADDR`).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8787")]
    pub(crate) listen: std::net::SocketAddr,
    /// The chat-completions upstream's base URL, up to and including
    /// `/v1` (`POST /v1/chat/completions` goes there).
    #[arg(long, value_name = "URL")]
    pub(crate) upstream: Option<String>,
    /// The environment variable holding the gateway's key for that
    /// upstream (clients' keys never go upstream).
    #[arg(long = "upstream-key-env", value_name = "VAR")]
    pub(crate) upstream_key_env: Option<String>,
    /// A model clients may ask that upstream for (repeatable; passed on
    /// as it is).
    #[arg(long = "model", value_name = "NAME")]
    pub(crate) models: Vec<String>,
    /// The Messages upstream's base URL, without `/v1` (`POST
    /// /v1/messages` goes there).
    #[arg(long = "anthropic-upstream", value_name = "URL")]
    pub(crate) anthropic_upstream: Option<String>,
    /// The environment variable holding the gateway's key for the
    /// Messages upstream.
    #[arg(long = "anthropic-key-env", value_name = "VAR")]
    pub(crate) anthropic_key_env: Option<String>,
    /// A model clients may ask the Messages upstream for (repeatable).
    #[arg(long = "anthropic-model", value_name = "NAME")]
    pub(crate) anthropic_models: Vec<String>,
    /// A pack to load, in load order (repeatable), with its JSON config.
    #[arg(long = "pack", value_name = "NAME[=JSON_CONFIG]")]
    pub(crate) packs: Vec<String>,
    /// The SHA-256 (hex) of a client key to accept (repeatable); with none,
    /// no key is asked for. `chimera serve --hash-key` prints one.
    #[arg(long = "client-key-sha256", value_name = "HEX")]
    pub(crate) client_key_hashes: Vec<String>,
    /// The SHA-256 (hex) of the key `/metrics` asks for (`Authorization:
    /// Bearer` or `x-api-key`). With client keys and neither this nor
    /// `--metrics-listen`, `/metrics` is refused: no client key opens it.
    #[arg(long = "metrics-key-sha256", value_name = "HEX")]
    pub(crate) metrics_key_sha256: Option<String>,
    /// Serve `/metrics` on this address alone (not on `--listen`); the
    /// address taken is printed as `metrics on http://ADDR/metrics`.
    #[arg(long = "metrics-listen", value_name = "ADDR")]
    pub(crate) metrics_listen: Option<std::net::SocketAddr>,
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
    /// appends the verdict.
    #[arg(long, value_name = "downgrade|allow", default_value = "downgrade")]
    pub(crate) stream_policy: StreamPolicyArg,
    /// Append every decision on every request to this audit log (each line
    /// names its request).
    #[arg(long, value_name = "FILE")]
    pub(crate) audit: Option<PathBuf>,
    /// Print the SHA-256 of the key in the environment variable VAR (the
    /// form --client-key-sha256 takes) and exit.
    #[arg(long = "hash-key", value_name = "VAR")]
    pub(crate) hash_key: Option<String>,
    /// Watch the loaded packs' files and hot-swap rebuilt ones; requests
    /// in flight finish on the version they started with.
    #[arg(long)]
    pub(crate) watch: bool,
    /// Run pack NAME in a sandboxed child process (repeatable);
    /// `CHIMERA_ISOLATE=all` isolates every pack.
    #[arg(long = "isolate", value_name = "NAME")]
    pub(crate) isolate: Vec<String>,
    /// Run loaded pack NAME in monitor mode (repeatable): its decisions
    /// are recorded (events, the audit log, /metrics with
    /// `mode="monitor"`) but never enforced.
    #[arg(long = "monitor", value_name = "NAME")]
    pub(crate) monitor: Vec<String>,
    /// In this server, let what loaded pack NAME cannot judge (an error, a
    /// call past its deadline, its process restarting) follow each seam's
    /// own policy instead of being refused (repeatable; by default every
    /// pack fails closed).
    #[arg(long = "fail-open", value_name = "NAME")]
    pub(crate) fail_open: Vec<String>,
    #[command(flatten)]
    pub(crate) search: SearchArgs,
    #[command(flatten)]
    pub(crate) trust: TrustArgs,
    #[command(flatten)]
    pub(crate) state: StateArgs,
    #[command(flatten)]
    pub(crate) limits: ClientLimitArgs,
}

/// What one client may hold of the gateway: time, bytes, requests.
#[derive(Debug, Args, Clone)]
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

/// Where gate state is kept, and what gates do while it is unreachable.
#[derive(Debug, Args, Clone)]
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
    /// NAME=fail_closed or NAME=fail_open.
    #[arg(long = "state-policy", value_name = "NAME=POLICY")]
    pub(crate) policies: Vec<String>,
}

/// `chimera mcp`.
#[derive(Debug, Subcommand)]
pub(crate) enum McpCommand {
    /// Be an MCP server (stdio) that starts the MCP server CMD and relays
    /// to it, judging every message both ways by the loaded packs: point
    /// an MCP client at `chimera mcp guard --pack … CMD ARGS…` instead of
    /// `CMD ARGS…`. With --url, serve streamable HTTP in front of a remote
    /// MCP server instead.
    Guard(Box<McpGuardArgs>),
    /// Start the MCP server CMD, list its tools and pin each one (hashes
    /// of its description and schemas) in the MCP lock: a guard then
    /// withholds a tool that drifted, a new one and a renamed one.
    Pin(McpPinArgs),
}

/// Where a server's pins are: the lock file and the server's name in it.
#[derive(Debug, Args)]
pub(crate) struct PinArgs {
    /// The MCP lock file (default: chimera-mcp.lock in the working
    /// directory, when it exists).
    #[arg(long = "mcp-lock", value_name = "FILE")]
    pub(crate) mcp_lock: Option<PathBuf>,
    /// The server's name in the lock (default: its command line).
    #[arg(long = "server-name", value_name = "NAME")]
    pub(crate) server_name: Option<String>,
}

/// `chimera mcp pin`.
#[derive(Debug, Args)]
pub(crate) struct McpPinArgs {
    #[command(flatten)]
    pub(crate) pins: PinArgs,
    /// The MCP server to start and pin: its program and arguments (after
    /// `--`, or from the first argument that is not a flag).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true,
        value_name = "CMD"
    )]
    pub(crate) command: Vec<String>,
}

/// `chimera mcp guard`.
#[derive(Debug, Args)]
pub(crate) struct McpGuardArgs {
    /// A pack to load, in load order (repeatable), with its JSON config.
    #[arg(long = "pack", value_name = "NAME[=JSON_CONFIG]")]
    pub(crate) packs: Vec<String>,
    /// Watch the loaded packs' files and hot-swap rebuilt ones.
    #[arg(long)]
    pub(crate) watch: bool,
    /// Run pack NAME in a sandboxed child process (repeatable).
    #[arg(long = "isolate", value_name = "NAME")]
    pub(crate) isolate: Vec<String>,
    /// Run loaded pack NAME in monitor mode (repeatable): its decisions
    /// are recorded (the audit log) but never enforced.
    #[arg(long = "monitor", value_name = "NAME")]
    pub(crate) monitor: Vec<String>,
    /// In this server, let what loaded pack NAME cannot judge (an error, a
    /// call past its deadline, its process restarting) follow each seam's
    /// own policy instead of being refused (repeatable; by default every
    /// pack fails closed).
    #[arg(long = "fail-open", value_name = "NAME")]
    pub(crate) fail_open: Vec<String>,
    /// Append every decision on every message to this audit log (each
    /// line names the request's JSON-RPC id).
    #[arg(long, value_name = "FILE")]
    pub(crate) audit: Option<PathBuf>,
    /// Refuse every call of the MCP tool TOOL (repeatable; a name, or a
    /// glob pattern: `write_*`), after the packs' `tool_call` chain, as
    /// `run --deny` does.
    #[arg(long = "deny", value_name = "TOOL")]
    pub(crate) deny: Vec<String>,
    /// Tools that would need an operator's approval (repeatable; a name
    /// or a glob pattern): the guard has no operator, so it refuses them,
    /// saying so.
    #[arg(long = "ask", value_name = "TOOL")]
    pub(crate) ask: Vec<String>,
    #[command(flatten)]
    pub(crate) pins: PinArgs,
    #[command(flatten)]
    pub(crate) search: SearchArgs,
    #[command(flatten)]
    pub(crate) trust: TrustArgs,
    /// Guard the remote MCP server at URL (streamable HTTP) instead of
    /// starting one: the guard then serves streamable HTTP itself, on
    /// --listen.
    #[arg(
        long,
        visible_alias = "upstream-url",
        value_name = "URL",
        conflicts_with = "command"
    )]
    pub(crate) url: Option<String>,
    /// With --url: where the guard serves its clients (its endpoint is
    /// any path of this address).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:8933",
        requires = "url"
    )]
    pub(crate) listen: std::net::SocketAddr,
    /// With --url: a host name the guard also answers requests for
    /// (repeatable; by default only its own address and localhost, so a
    /// web page cannot reach it through DNS rebinding).
    #[arg(long = "allowed-host", value_name = "HOST", requires = "url")]
    pub(crate) allowed_hosts: Vec<String>,
    /// The MCP server to start and guard: its program and arguments (after
    /// `--`, or from the first argument that is not a flag).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required_unless_present = "url",
        value_name = "CMD"
    )]
    pub(crate) command: Vec<String>,
}

/// `chimera pack-host`: serves one isolated pack over the socket on stdout,
/// loading the sealed pack file on stdin.
#[derive(Debug, Args)]
pub(crate) struct PackHostArgs {
    /// The pack, with its JSON config.
    #[arg(long = "pack", value_name = "NAME[=JSON_CONFIG]")]
    pub(crate) pack: String,
    /// The host's gate state is shared with other processes.
    #[arg(long)]
    pub(crate) state_shared: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum PackCommand {
    /// Generate a pack crate that builds, tests and loads as it is.
    New(PackNewArgs),
    /// Replay policy test cases through the real loaded packs.
    Test(PackTestArgs),
}

/// `chimera pack new`.
#[derive(Debug, Args)]
pub(crate) struct PackNewArgs {
    /// The pack's name (also its entry-point name and crate name).
    #[arg(value_name = "NAME")]
    pub(crate) name: String,

    /// Where to create the crate (default: ./NAME).
    #[arg(long, value_name = "DIR")]
    pub(crate) path: Option<PathBuf>,

    /// Depend on the SDK crate (chimera-plugin-api) in DIR instead of the
    /// registry version this chimera was built with (or, run from a
    /// checkout, the checkout's plugin-api).
    #[arg(long = "sdk-path", value_name = "DIR")]
    pub(crate) sdk_path: Option<PathBuf>,
}

/// `chimera pack test`.
#[derive(Debug, Args)]
pub(crate) struct PackTestArgs {
    #[command(flatten)]
    pub(crate) search: SearchArgs,

    /// A case file, a directory of them, or a pack crate's directory (its
    /// `tests/cases`, with the library cargo built for it searched first)
    /// (default: ./tests/cases).
    #[arg(value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,

    /// Rewrite each case's golden file with what the run produced.
    #[arg(long, conflicts_with = "from_record")]
    pub(crate) bless: bool,

    /// Search only the --plugins-dir directories, the cases' own and the
    /// bundled packs (not $`CHIMERA_PLUGIN_PATH` or the per-user directory),
    /// so an installed copy of the pack under test neither conflicts with
    /// nor stands in for the build.
    #[arg(long)]
    pub(crate) isolated: bool,

    /// Turn a recording (`chimera run --record FILE`) into a case named by
    /// --name in DIR, and write its golden file from a replay.
    #[arg(long = "from-record", value_name = "FILE", requires = "name")]
    pub(crate) from_record: Option<PathBuf>,

    /// The name of the case --from-record writes (DIR/NAME.toml).
    #[arg(long, value_name = "CASE", requires = "from_record")]
    pub(crate) name: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Print the effective settings and where each value came from.
    Show {
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Trust a project's chimera.toml at its current contents (a project
    /// file names code to load, so it is used only once trusted, and again
    /// after every change).
    Trust {
        /// The file (default: ./chimera.toml).
        #[arg(value_name = "FILE")]
        file: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum AuditCommand {
    /// Check an audit log's hash chain: a deleted or edited line is reported.
    Verify {
        /// The audit log.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// A head this command printed earlier (kept where the log's writers
        /// cannot reach it): fail unless that line is still in the log, so
        /// lines cut from its end are detected too.
        #[arg(long = "expect-head", value_name = "HASH")]
        expect_head: Option<String>,
    },
    /// Verify an audit log, then say per pack and interceptor how many
    /// decisions of each kind it made, and how many it would have made in
    /// monitor mode (recorded, not enforced).
    #[command(visible_alias = "summary", alias = "summarize")]
    Summarise {
        /// The audit log.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// A head `audit verify` printed earlier: fail unless that line is
        /// still in the log.
        #[arg(long = "expect-head", value_name = "HASH")]
        expect_head: Option<String>,
        /// One JSON object instead of the readable text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ToolsCommand {
    /// List the tools a run offers, with their argument schemas: the
    /// built-in ones, then each MCP server's (`NAME__tool`).
    List {
        /// One JSON object per tool.
        #[arg(long)]
        json: bool,

        #[command(flatten)]
        mcp: McpArgs,

        /// The directory MCP server commands start in (default: the current directory).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
}

/// The MCP servers whose tools a session offers.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct McpArgs {
    /// An MCP server whose tools the model is offered, as `NAME__TOOL`
    /// (repeatable; replaces the configuration file's `[mcp.servers]`):
    /// `NAME=COMMAND [ARGS…]`, started in the workspace and spoken to on
    /// stdio, or `NAME=URL`, a streamable-HTTP endpoint.
    #[arg(long = "mcp", value_name = "NAME=COMMAND|URL")]
    pub(crate) servers: Vec<String>,

    /// The configuration file's `[mcp.servers]`, when no `--mcp` is given.
    #[arg(skip)]
    pub(crate) from_file: Vec<(String, chimera_host::config::McpServerEntry)>,
}

/// Where packs are found.
#[derive(Debug, Args, Clone)]
pub(crate) struct SearchArgs {
    /// A directory to search for packs (repeatable). Also searched:
    /// $`CHIMERA_PLUGIN_PATH` (colon-separated), the per-user data directory
    /// (~/.local/share/chimera/plugins), and the bundled packs beside the
    /// chimera executable, in that precedence: a pack here or in
    /// $`CHIMERA_PLUGIN_PATH` is used instead of a per-user or bundled copy.
    /// Never the current directory, unless named here.
    #[arg(long = "plugins-dir", value_name = "DIR")]
    pub(crate) plugins_dirs: Vec<PathBuf>,
}

/// How far loaded code is trusted, and how failing packs are contained.
#[derive(Debug, Args, Clone)]
pub(crate) struct TrustArgs {
    /// Refuse every pack file that a chimera.lock in its directory does not
    /// pin (a lock file, where one exists, is always enforced).
    #[arg(long)]
    pub(crate) locked: bool,

    /// The lock file to enforce, kept outside the plugins directories
    /// (written by `chimera packs lock --lock FILE`; implies --locked).
    #[arg(long, value_name = "FILE")]
    pub(crate) lock: Option<PathBuf>,

    /// Load from directories or files that others can write, or that are
    /// symlinks leading elsewhere (with a warning).
    #[arg(long = "allow-insecure-plugins-dir")]
    pub(crate) allow_insecure: bool,

    /// Load-test each pack in a child process before loading it (always done
    /// for hot reloads unless --no-probe-on-reload).
    #[arg(long)]
    pub(crate) probe: bool,

    /// Do not probe rebuilt packs before hot-swapping them in.
    #[arg(long = "no-probe-on-reload")]
    pub(crate) no_probe_on_reload: bool,

    /// How long a probe may take, in seconds.
    #[arg(long = "probe-timeout", value_name = "SECS", default_value_t = 10)]
    pub(crate) probe_timeout: u64,

    /// Quarantine a pack after this many interceptor errors within the window.
    #[arg(long = "quarantine-after", value_name = "N", default_value_t = 20)]
    pub(crate) quarantine_after: u32,

    /// The window for --quarantine-after and budget overruns, in seconds.
    #[arg(long = "quarantine-window", value_name = "SECS", default_value_t = 60)]
    pub(crate) quarantine_window: u64,

    /// Report an interceptor call longer than this (milliseconds; 0: off);
    /// five overruns within the window quarantine the pack.
    #[arg(long = "call-budget-ms", value_name = "MS", default_value_t = 100)]
    pub(crate) call_budget_ms: u64,

    /// What a call's budget grows by for each MiB of input it is handed
    /// (milliseconds), so a large text is no overrun for a pack that reads
    /// it at a steady pace.
    #[arg(
        long = "call-budget-per-mib-ms",
        value_name = "MS",
        default_value_t = 50
    )]
    pub(crate) call_budget_per_mib_ms: u64,

    /// How many processes each isolated pack runs (`--isolate`), to
    /// answer that many calls at once; each has its own memory, so a pack
    /// that remembers across calls keeps that in the host's gate state.
    #[arg(long = "isolate-processes", value_name = "N", default_value_t = 1)]
    pub(crate) isolate_processes: usize,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) search: SearchArgs,

    #[command(flatten)]
    pub(crate) trust: TrustArgs,

    /// Load a pack by entry-point name, optionally with its JSON config
    /// (repeatable; command-line order is load order).
    #[arg(long = "pack", value_name = "NAME[=JSON_CONFIG]")]
    pub(crate) packs: Vec<String>,

    /// Use the scripted model with this script file.
    #[arg(long, value_name = "FILE")]
    pub(crate) script: Option<PathBuf>,

    /// A real provider instead of a script: `openai` (any OpenAI-compatible
    /// chat-completions server) or `anthropic`.
    #[arg(long, value_name = "NAME")]
    pub(crate) provider: Option<String>,

    /// The provider's base URL (default: $`OPENAI_BASE_URL` or
    /// <https://api.openai.com/v1>; $`ANTHROPIC_BASE_URL` or <https://api.anthropic.com>).
    #[arg(long = "base-url", value_name = "URL")]
    pub(crate) base_url: Option<String>,

    /// The model name (required with --provider).
    #[arg(long, value_name = "M")]
    pub(crate) model: Option<String>,

    /// The environment variable holding the API key (default
    /// `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`).
    #[arg(long = "api-key-env", value_name = "VAR")]
    pub(crate) api_key_env: Option<String>,

    /// A header of the provider's per-request header surface, `K: V` or
    /// `K:V` (repeatable): the scripted model's, or the `OpenAI` provider's
    /// extra headers.
    #[arg(long = "header", value_name = "K: V")]
    pub(crate) headers: Vec<String>,

    /// Stream the model's replies (text shows as it arrives).
    #[arg(long)]
    pub(crate) stream: bool,

    /// With `--stream`, when a pack gates whole replies (`model_response`
    /// or `output`) but not streamed text: `downgrade` turns streaming off
    /// for the run (one line says so); `allow` keeps it on.
    #[arg(
        long = "stream-policy",
        value_name = "POLICY",
        default_value = "downgrade"
    )]
    pub(crate) stream_policy: StreamPolicyArg,

    /// Run bash without its write sandbox (Landlock: writes only inside the
    /// workspace and a private TMPDIR). The file tools stay confined.
    #[arg(long = "no-bash-sandbox")]
    pub(crate) no_bash_sandbox: bool,

    /// The directory tools are confined to (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,

    /// Print one JSON object per line instead of the readable transcript.
    #[arg(long)]
    pub(crate) json: bool,

    /// After the first prompt (if any), read one user turn per stdin line.
    #[arg(long = "turns-from-stdin")]
    pub(crate) turns_from_stdin: bool,

    /// Watch the loaded packs' files and hot-swap rebuilt ones; a reloaded
    /// pack takes effect on the next turn.
    #[arg(long)]
    pub(crate) watch: bool,

    /// Run this loaded pack in a sandboxed child process of its own
    /// (repeatable): a crash or a hang there blocks the call instead of
    /// taking the session down. `CHIMERA_ISOLATE=all` isolates every pack.
    #[arg(long = "isolate", value_name = "NAME")]
    pub(crate) isolate: Vec<String>,

    /// Run this loaded pack in monitor mode (repeatable): its decisions
    /// are recorded (`--json` events with `"monitor": true`, the audit
    /// log) but never enforced — nothing it blocks is blocked, nothing it
    /// changes is changed, and its failures never block.
    #[arg(long = "monitor", value_name = "NAME")]
    pub(crate) monitor: Vec<String>,

    /// Scripted model: append every request, as received after all seams, to FILE.
    #[arg(long = "record-requests", value_name = "FILE")]
    pub(crate) record_requests: Option<PathBuf>,

    /// Provider calls allowed per turn.
    #[arg(long = "max-steps", value_name = "N", default_value_t = 25)]
    pub(crate) max_steps: usize,

    /// The loop each turn runs: react (the default), plan-and-execute,
    /// reflexion, tree-of-thought, plan-act or retry.
    #[arg(long, value_name = "NAME")]
    pub(crate) strategy: Option<String>,

    /// The strategy's setting, as JSON: `{"max_plan_steps": N}`
    /// (plan-and-execute), `{"reflect_every": N}` (reflexion),
    /// `{"candidates": N}` (tree-of-thought), `{"attempts": N}` (retry).
    #[arg(long = "strategy-config", value_name = "JSON")]
    pub(crate) strategy_config: Option<String>,

    /// The system prompt.
    #[arg(long, value_name = "TEXT")]
    pub(crate) system: Option<String>,

    /// Ask before running these tools (repeatable): a name, or a glob
    /// pattern (`mcp_*`).
    #[arg(long = "ask", value_name = "TOOL")]
    pub(crate) ask: Vec<String>,

    /// Never run these tools (repeatable): a name, or a glob pattern
    /// (`write_*`).
    #[arg(long = "deny", value_name = "TOOL")]
    pub(crate) deny: Vec<String>,

    #[command(flatten)]
    pub(crate) mcp: McpArgs,

    /// Approve every `--ask` (and every pack's question) without prompting.
    #[arg(long, conflicts_with_all = ["approvals", "no"])]
    pub(crate) yes: bool,

    /// Reject every `--ask` (and every pack's question) without prompting.
    #[arg(long, conflicts_with = "approvals")]
    pub(crate) no: bool,

    /// Answer `--ask` prompts from FILE: one JSON object per line, in the
    /// order the prompts come, `{"answer": "allow"}` or `{"answer": "reject"}`
    /// (optionally with `"tool": NAME`, which must match the call asked
    /// about). A prompt with no line left is rejected.
    #[arg(long, value_name = "FILE")]
    pub(crate) approvals: Option<PathBuf>,

    /// Turns a compaction keeps whole (a context-window pack asks for
    /// compactions); the older ones are replaced by a summary.
    #[arg(long = "compact-keep-turns", value_name = "N", default_value_t = chimera_host::agent::DEFAULT_KEEP_TURNS)]
    pub(crate) compact_keep_turns: usize,

    /// Price provider calls by FILE: `{"MODEL": {"input": USD, "output":
    /// USD}}` per million tokens, over the built-in list prices. Packs see
    /// the session's cost in the session facts (a budget gate caps it).
    #[arg(long, value_name = "FILE")]
    pub(crate) prices: Option<PathBuf>,

    /// Append one JSON line per interceptor decision to FILE, hash-chained
    /// so `chimera audit verify FILE` detects a deleted or edited line.
    #[arg(long, value_name = "FILE")]
    pub(crate) audit: Option<PathBuf>,

    /// Record the session (every provider request and reply) to FILE, to
    /// replay later as a policy test case (`chimera pack test`).
    #[arg(long, value_name = "FILE")]
    pub(crate) record: Option<PathBuf>,

    /// The first user turn.
    #[arg(value_name = "PROMPT")]
    pub(crate) prompt: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    #[command(flatten)]
    pub(crate) search: SearchArgs,

    /// Print one JSON object per line instead of the readable transcript.
    #[arg(long)]
    pub(crate) json: bool,

    /// Keep the demo's workspace directory instead of removing it.
    #[arg(long = "keep-workspace")]
    pub(crate) keep_workspace: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum PacksCommand {
    /// List the packs on the search path (read from manifests; no pack code runs).
    List {
        #[command(flatten)]
        search: SearchArgs,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Load-test one pack file (in this process) and print its entry points.
    Check {
        /// The pack file.
        #[arg(required_unless_present = "sealed_stdin")]
        file: Option<PathBuf>,
        /// Load the sealed pack handed over on standard input (how the
        /// probe runs; not for people).
        #[arg(long = "sealed-stdin", hide = true, conflicts_with = "file")]
        sealed_stdin: bool,
        /// Also build this pack with this config (repeatable).
        #[arg(long = "pack", value_name = "NAME[=JSON_CONFIG]")]
        packs: Vec<String>,
        /// One JSON object per pack.
        #[arg(long)]
        json: bool,
        /// Check a file in a directory others can write.
        #[arg(long = "allow-insecure-plugins-dir")]
        allow_insecure: bool,
    },
    /// Pin every pack file in each plugins directory in its chimera.lock
    /// (trust on first use; no pack code runs).
    Lock {
        #[command(flatten)]
        search: SearchArgs,
        /// Write one lock for every directory here instead (absolute paths),
        /// to keep outside the plugins directories and pass to `run --lock`.
        #[arg(long, value_name = "FILE")]
        lock: Option<PathBuf>,
    },
    /// Check each plugins directory against its chimera.lock.
    Verify {
        #[command(flatten)]
        search: SearchArgs,
        /// Check against this lock (see `packs lock --lock`) instead.
        #[arg(long, value_name = "FILE")]
        lock: Option<PathBuf>,
    },
}

/// `--stream-policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StreamPolicyArg {
    /// Turn streaming off for the run.
    Downgrade,
    /// Keep streaming on.
    Allow,
}

impl From<StreamPolicyArg> for chimera_host::agent::StreamPolicy {
    fn from(policy: StreamPolicyArg) -> Self {
        match policy {
            StreamPolicyArg::Downgrade => chimera_host::agent::StreamPolicy::Downgrade,
            StreamPolicyArg::Allow => chimera_host::agent::StreamPolicy::Allow,
        }
    }
}
