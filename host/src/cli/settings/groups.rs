//! The settings every command that loads packs shares, and `run`'s: each
//! field is one setting, its flag (clap), its help (the doc comment), its
//! default (clap's) and its key in `chimera.toml` (serde: the section is
//! the group's place in [`Settings`](super::Settings), the key the field's
//! name, which is also its clap id). A field that is a flag only is
//! `#[serde(skip)]`; one that is a file key only is `#[arg(skip)]`.

use super::values;
use clap::{ArgAction, Args};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The packs a command loads and how they are trusted: the search path,
/// `--pack` (with `--isolate` and `--monitor`) and `[trust]`, one group
/// for `run`, `serve` and `mcp guard` alike.
#[derive(Debug, Clone, Args, Serialize)]
pub(crate) struct LoadArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) search: SearchArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) pack: PackArgs,
    #[command(flatten)]
    pub(crate) trust: TrustArgs,
}

/// Where packs are found (`plugins_dirs`).
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub(crate) struct SearchArgs {
    /// A directory to search for packs (repeatable). Also searched:
    /// $`CHIMERA_PLUGIN_PATH` (colon-separated), the per-user data directory
    /// (~/.local/share/chimera/plugins), and the bundled packs beside the
    /// chimera executable, in that precedence: a pack here or in
    /// $`CHIMERA_PLUGIN_PATH` is used instead of a per-user or bundled copy.
    /// Never the current directory, unless named here (in the file:
    /// `plugins_dirs`).
    #[arg(long = "plugins-dir", value_name = "DIR")]
    #[serde(deserialize_with = "values::relative_paths")]
    pub(crate) plugins_dirs: Vec<PathBuf>,
}

/// The packs a command loads, and how (in the file: `[[packs]]` entries,
/// with `isolate = true` and `mode = "monitor"`).
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub(crate) struct PackArgs {
    /// Load a pack by entry-point name, optionally with its JSON config
    /// (repeatable; command-line order is load order; replaces the file's
    /// packs, with their `isolate`, `mode` and `on_unavailable`).
    #[arg(long = "pack", value_name = "NAME[=JSON_CONFIG]")]
    pub(crate) packs: Vec<String>,

    /// Run this loaded pack in a sandboxed child process of its own
    /// (repeatable): a crash or a hang there blocks the call instead of
    /// taking the process down. `CHIMERA_ISOLATE=all` isolates every pack.
    #[arg(long = "isolate", value_name = "NAME")]
    pub(crate) isolate: Vec<String>,

    /// Run this loaded pack in monitor mode (repeatable): its decisions
    /// are recorded (events with `"monitor": true`, the audit log,
    /// /metrics with `mode="monitor"`) but never enforced — nothing it
    /// blocks is blocked, nothing it changes is changed, and its failures
    /// never block.
    #[arg(long = "monitor", value_name = "NAME")]
    pub(crate) monitor: Vec<String>,
}

/// What a server (`serve`, `mcp guard`) does about a pack that cannot
/// judge (in the file: `on_unavailable` of a `[[packs]]` entry).
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub(crate) struct ServingArgs {
    /// In this server, let what loaded pack NAME cannot judge (an error, a
    /// call past its deadline, its process restarting) follow each seam's
    /// own policy instead of being refused (repeatable; by default every
    /// pack fails closed).
    #[arg(long = "fail-open", value_name = "NAME")]
    pub(crate) fail_open: Vec<String>,
}

/// How far loaded code is trusted, and how failing packs are contained
/// (`[trust]`).
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub(crate) struct TrustArgs {
    /// Refuse every pack file that a chimera.lock in its directory does not
    /// pin (a lock file, where one exists, is always enforced).
    #[arg(long)]
    pub(crate) locked: bool,

    /// The lock file to enforce, kept outside the plugins directories
    /// (written by `chimera packs lock --lock FILE`; implies --locked).
    #[arg(long, value_name = "FILE")]
    #[serde(deserialize_with = "values::relative_path")]
    pub(crate) lock: Option<PathBuf>,

    /// Load from directories or files that others can write, or that are
    /// symlinks leading elsewhere (with a warning).
    #[arg(long = "allow-insecure-plugins-dir")]
    pub(crate) allow_insecure_plugins_dir: bool,

    /// Load-test each pack in a child process before loading it (always done
    /// for hot reloads unless --no-probe-on-reload).
    #[arg(long)]
    pub(crate) probe: bool,

    /// Do not probe rebuilt packs before hot-swapping them in (in the file:
    /// `probe_on_reload = false`).
    #[arg(long = "no-probe-on-reload", action = ArgAction::SetFalse)]
    pub(crate) probe_on_reload: bool,

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

/// The model a session talks to (`[provider]`). `--provider` and
/// `--script` choose where the model comes from: either one on the
/// command line replaces the file's choice of both.
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub(crate) struct ProviderArgs {
    /// A real provider instead of a script: `openai` (any OpenAI-compatible
    /// chat-completions server) or `anthropic` (in the file: `[provider]
    /// name`, where `scripted` with `script` names the scripted model).
    #[arg(long = "provider", value_name = "NAME")]
    pub(crate) name: Option<String>,

    /// The one model the session's provider is asked for (required with
    /// --provider; `serve --upstream-model` instead lists the models a
    /// gateway's clients may ask for).
    #[arg(long, value_name = "M")]
    pub(crate) model: Option<String>,

    /// The provider's base URL (default: $`OPENAI_BASE_URL` or
    /// <https://api.openai.com/v1>; $`ANTHROPIC_BASE_URL` or
    /// <https://api.anthropic.com>). `serve --upstream` is a gateway's.
    #[arg(long = "base-url", value_name = "URL")]
    pub(crate) base_url: Option<String>,

    /// The environment variable holding the API key (default
    /// `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`).
    #[arg(long = "api-key-env", value_name = "VAR")]
    pub(crate) api_key_env: Option<String>,

    /// Use the scripted model with this script file.
    #[arg(long, value_name = "FILE")]
    #[serde(deserialize_with = "values::relative_path")]
    pub(crate) script: Option<PathBuf>,

    /// A header of the provider's per-request header surface, `K: V` or
    /// `K:V` (repeatable): the scripted model's, or the `OpenAI` provider's
    /// extra headers (in the file: `[provider] headers`).
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
}

/// Who may run which tool, and who answers (`[approvals]`). `--yes`,
/// `--no` and `--approvals` choose who answers: any one of them on the
/// command line replaces the file's `answer` and `answers_file`.
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub(crate) struct ApprovalArgs {
    /// Ask before running these tools (repeatable): a name, or a glob
    /// pattern (`mcp_*`).
    #[arg(long = "ask", value_name = "TOOL")]
    pub(crate) ask: Vec<String>,

    /// Never run these tools (repeatable): a name, or a glob pattern
    /// (`write_*`).
    #[arg(long = "deny", value_name = "TOOL")]
    pub(crate) deny: Vec<String>,

    /// Approve every `--ask` (and every pack's question) without prompting
    /// (in the file: `answer = "yes"`).
    #[arg(long, conflicts_with_all = ["answers_file", "no"])]
    #[serde(skip)]
    pub(crate) yes: bool,

    /// Reject every `--ask` (and every pack's question) without prompting
    /// (in the file: `answer = "no"`).
    #[arg(long, conflicts_with = "answers_file")]
    #[serde(skip)]
    pub(crate) no: bool,

    /// `yes` approves every ask, `no` rejects every ask: `--yes`, `--no`
    /// on the command line.
    #[arg(skip)]
    pub(crate) answer: Option<Answer>,

    /// Answer `--ask` prompts from FILE: one JSON object per line, in the
    /// order the prompts come, `{"answer": "allow"}` or `{"answer": "reject"}`
    /// (optionally with `"tool": NAME`, which must match the call asked
    /// about). A prompt with no line left is rejected (in the file:
    /// `[approvals] answers_file`).
    #[arg(long = "approvals", value_name = "FILE")]
    #[serde(deserialize_with = "values::relative_path")]
    pub(crate) answers_file: Option<PathBuf>,
}

/// The session itself (`[session]`).
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub(crate) struct SessionArgs {
    /// The system prompt.
    #[arg(long, value_name = "TEXT")]
    pub(crate) system: Option<String>,

    /// Provider calls allowed per turn.
    #[arg(long = "max-steps", value_name = "N", default_value_t = 25)]
    pub(crate) max_steps: usize,

    /// The directory tools are confined to (default: the current directory).
    #[arg(long, value_name = "DIR")]
    #[serde(deserialize_with = "values::relative_path")]
    pub(crate) workspace: Option<PathBuf>,

    /// Price provider calls by FILE: `{"MODEL": {"input": USD, "output":
    /// USD}}` per million tokens, over the built-in list prices. Packs see
    /// the session's cost in the session facts (a budget gate caps it).
    #[arg(long, value_name = "FILE")]
    #[serde(deserialize_with = "values::relative_path")]
    pub(crate) prices: Option<PathBuf>,

    /// Turns a compaction keeps whole (a context-window pack asks for
    /// compactions); the older ones are replaced by a summary.
    #[arg(long = "compact-keep-turns", value_name = "N", default_value_t = chimera_host::agent::DEFAULT_KEEP_TURNS)]
    pub(crate) compact_keep_turns: usize,

    /// Run bash without its write sandbox (Landlock: writes only inside the
    /// workspace and a private TMPDIR). The file tools stay confined (in
    /// the file: `bash_sandbox = false`).
    #[arg(long = "no-bash-sandbox", action = ArgAction::SetFalse)]
    pub(crate) bash_sandbox: bool,

    /// The loop each turn runs: react (the default), plan-and-execute,
    /// reflexion, tree-of-thought, plan-act or retry.
    #[arg(long, value_name = "NAME")]
    pub(crate) strategy: Option<String>,

    /// The strategy's setting, as JSON (in the file, a table):
    /// `{"max_plan_steps": N}` (plan-and-execute), `{"reflect_every": N}`
    /// (reflexion), `{"candidates": N}` (tree-of-thought), `{"attempts":
    /// N}` (retry).
    #[arg(long = "strategy-config", value_name = "JSON")]
    #[serde(deserialize_with = "values::json_text")]
    pub(crate) strategy_config: Option<String>,

    /// Append one JSON line per interceptor decision to FILE, hash-chained
    /// so `chimera audit verify FILE` detects a deleted or edited line.
    #[arg(long, value_name = "FILE")]
    #[serde(deserialize_with = "values::relative_path")]
    pub(crate) audit: Option<PathBuf>,
}

/// The MCP servers whose tools a session offers (`[mcp]`).
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub(crate) struct McpArgs {
    /// An MCP server whose tools the model is offered, as `NAME__TOOL`
    /// (repeatable; replaces the configuration file's `[mcp.servers]`):
    /// `NAME=COMMAND [ARGS…]`, started in the workspace and spoken to on
    /// stdio, or `NAME=URL`, a streamable-HTTP endpoint.
    #[arg(long = "mcp", value_name = "NAME=COMMAND|URL", value_parser = values::mcp_flag)]
    #[serde(with = "values::mcp_servers")]
    pub(crate) servers: Vec<values::McpServer>,
}

/// `--stream-policy`, `stream_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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

/// `[approvals] answer`, `--yes` / `--no`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Answer {
    /// Approve every ask.
    Yes,
    /// Reject every ask.
    No,
}
