//! The command line: the outward contract tests, scripts and users rely on
//! (README.md, "Using it"). Add to it freely; rename nothing without keeping
//! the old name working.
//!
//! The flags that are settings (a key in `chimera.toml` too) are declared
//! in their groups, in `settings`; a command flattens the groups it takes
//! and says here how it takes the layered result back.

pub(crate) use super::settings::gateway::{ClientLimitArgs, GatewayArgs, StateArgs};
use super::settings::groups::{ApprovalArgs, ProviderArgs, SessionArgs};
pub(crate) use super::settings::groups::{
    LoadArgs, McpArgs, PackArgs, SearchArgs, ServingArgs, TrustArgs,
};
use super::settings::{Settings, TakesSettings};
use clap::{Args, Parser, Subcommand};
use serde::Serialize;
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
#[derive(Debug, Args, Serialize)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) serve: GatewayArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) load: LoadArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) serving: ServingArgs,
    #[command(flatten)]
    pub(crate) state: StateArgs,
    /// Print the SHA-256 of the key in the environment variable VAR (the
    /// form --client-key-sha256 takes) and exit.
    #[arg(long = "hash-key", value_name = "VAR")]
    #[serde(skip)]
    pub(crate) hash_key: Option<String>,
}

impl TakesSettings for ServeArgs {
    fn adopt(&mut self, settings: Settings) {
        self.serve = settings.serve;
        self.load = settings.load;
        self.serving = settings.serving;
        self.state = settings.state;
    }
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
#[derive(Debug, Args, Serialize)]
pub(crate) struct McpGuardArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) load: LoadArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) serving: ServingArgs,
    /// Watch the loaded packs' files and hot-swap rebuilt ones.
    #[arg(long)]
    #[serde(skip)]
    pub(crate) watch: bool,
    /// Append every decision on every message to this audit log (each
    /// line names the request's JSON-RPC id).
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub(crate) audit: Option<PathBuf>,
    /// Refuse every call of the MCP tool TOOL (repeatable; a name, or a
    /// glob pattern: `write_*`), after the packs' `tool_call` chain, as
    /// `run --deny` does.
    #[arg(long = "deny", value_name = "TOOL")]
    #[serde(skip)]
    pub(crate) deny: Vec<String>,
    /// Tools that would need an operator's approval (repeatable; a name
    /// or a glob pattern): the guard has no operator, so it refuses them,
    /// saying so (where `run --ask` asks).
    #[arg(long = "ask", value_name = "TOOL")]
    #[serde(skip)]
    pub(crate) ask: Vec<String>,
    #[command(flatten)]
    #[serde(skip)]
    pub(crate) pins: PinArgs,
    /// Guard the remote MCP server at URL (streamable HTTP) instead of
    /// starting one: the guard then serves streamable HTTP itself, on
    /// --listen.
    #[arg(
        long,
        visible_alias = "upstream-url",
        value_name = "URL",
        conflicts_with = "command"
    )]
    #[serde(skip)]
    pub(crate) url: Option<String>,
    /// With --url: where the guard serves its clients (its endpoint is
    /// any path of this address).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:8933",
        requires = "url"
    )]
    #[serde(skip)]
    pub(crate) listen: std::net::SocketAddr,
    /// With --url: a host name the guard also answers requests for
    /// (repeatable; by default only its own address and localhost, so a
    /// web page cannot reach it through DNS rebinding).
    #[arg(long = "allowed-host", value_name = "HOST", requires = "url")]
    #[serde(skip)]
    pub(crate) allowed_hosts: Vec<String>,
    /// The MCP server to start and guard: its program and arguments (after
    /// `--`, or from the first argument that is not a flag).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required_unless_present = "url",
        value_name = "CMD"
    )]
    #[serde(skip)]
    pub(crate) command: Vec<String>,
}

impl TakesSettings for McpGuardArgs {
    fn adopt(&mut self, settings: Settings) {
        self.load = settings.load;
        self.serving = settings.serving;
    }
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
    List(ToolsListArgs),
}

/// `chimera tools list`.
#[derive(Debug, Args, Serialize)]
pub(crate) struct ToolsListArgs {
    /// One JSON object per tool.
    #[arg(long)]
    #[serde(skip)]
    pub(crate) json: bool,

    #[command(flatten)]
    pub(crate) mcp: McpArgs,

    /// The directory MCP server commands start in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    #[serde(skip)]
    pub(crate) workspace: Option<PathBuf>,
}

impl TakesSettings for ToolsListArgs {
    fn adopt(&mut self, settings: Settings) {
        self.mcp = settings.mcp;
    }
}

/// `chimera run`: its settings' groups, then the flags that are its own.
#[derive(Debug, Args, Serialize)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) load: LoadArgs,

    #[command(flatten)]
    pub(crate) provider: ProviderArgs,

    #[command(flatten)]
    pub(crate) session: SessionArgs,

    #[command(flatten)]
    pub(crate) approvals: ApprovalArgs,

    #[command(flatten)]
    pub(crate) mcp: McpArgs,

    /// Print one JSON object per line instead of the readable transcript.
    #[arg(long)]
    #[serde(skip)]
    pub(crate) json: bool,

    /// After the first prompt (if any), read one user turn per stdin line.
    #[arg(long = "turns-from-stdin")]
    #[serde(skip)]
    pub(crate) turns_from_stdin: bool,

    /// Watch the loaded packs' files and hot-swap rebuilt ones; a reloaded
    /// pack takes effect on the next turn.
    #[arg(long)]
    #[serde(skip)]
    pub(crate) watch: bool,

    /// Scripted model: append every request, as received after all seams, to FILE.
    #[arg(long = "record-requests", value_name = "FILE")]
    #[serde(skip)]
    pub(crate) record_requests: Option<PathBuf>,

    /// Record the session (every provider request and reply) to FILE, to
    /// replay later as a policy test case (`chimera pack test`).
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub(crate) record: Option<PathBuf>,

    /// The first user turn.
    #[arg(value_name = "PROMPT")]
    #[serde(skip)]
    pub(crate) prompt: Option<String>,
}

impl TakesSettings for RunArgs {
    fn adopt(&mut self, settings: Settings) {
        self.load = settings.load;
        self.provider = settings.provider;
        self.session = settings.session;
        self.approvals = settings.approvals;
        self.mcp = settings.mcp;
    }
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
