//! What `chimera.toml` may say, and how its text is read: a regular file
//! (never a FIFO), at most 1 MiB, UTF-8; unknown keys and wrong types are
//! errors naming the key's line. Every key is optional. Relative paths are
//! resolved against the file's directory by whoever uses them
//! ([`Loaded::resolve`](super::Loaded::resolve)).

use super::ConfigError;
use crate::files::read_user_file;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The file's name, in the project directory and the user config directory.
pub const FILE_NAME: &str = "chimera.toml";

/// Configuration files and the trust store are small; anything larger is
/// refused rather than read.
pub(crate) const MAX_FILE_BYTES: u64 = 1 << 20;

/// The file's contents.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Directories to search for packs, before the environment's.
    pub plugins_dirs: Option<Vec<PathBuf>>,
    /// The packs, in load order.
    pub packs: Option<Vec<PackEntry>>,
    /// Trust and containment.
    #[serde(default)]
    pub trust: TrustSection,
    /// Which model the session talks to.
    #[serde(default)]
    pub provider: ProviderSection,
    /// Who may run which tool, and who answers.
    #[serde(default)]
    pub approvals: ApprovalsSection,
    /// The session itself.
    #[serde(default)]
    pub session: SessionSection,
    /// The gateway (`chimera serve`).
    #[serde(default)]
    pub serve: ServeSection,
    /// Where gate state is kept.
    #[serde(default)]
    pub state: StateSection,
    /// MCP servers whose tools a run offers.
    #[serde(default)]
    pub mcp: McpSection,
}

/// `[mcp]`: the MCP servers whose tools `chimera run` offers the model
/// (as `NAME__tool`) and `chimera tools list` lists.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    /// `[mcp.servers.NAME]`, by name.
    pub servers: Option<std::collections::BTreeMap<String, McpServerEntry>>,
}

/// `[mcp.servers.NAME]`: one server, either a `command` started in the
/// workspace and spoken to on its standard input and output, or the `url`
/// of a streamable-HTTP endpoint.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerEntry {
    /// The program (looked up on `PATH` when it has no `/`).
    pub command: Option<String>,
    /// Its arguments.
    pub args: Option<Vec<String>>,
    /// Variables added to the environment it inherits.
    pub env: Option<std::collections::BTreeMap<String, String>>,
    /// The streamable-HTTP endpoint, instead of a command.
    pub url: Option<String>,
    /// The environment variable holding a token sent as
    /// `Authorization: Bearer …` to `url`.
    pub bearer_token_env: Option<String>,
    /// How long it may take to start and list its tools, in seconds.
    pub startup_timeout_secs: Option<u64>,
    /// How long one call may wait for its answer, in seconds; past it the
    /// server is stopped and its tools go away.
    pub call_timeout_secs: Option<u64>,
}

/// `[state]`: where gate state (budgets, rate limits, loop caps) is kept,
/// and what gates do while that store is down (the `--state-*` flags).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateSection {
    /// The Redis every replica shares (`redis://127.0.0.1:6379`); without
    /// it, this process alone.
    pub redis: Option<String>,
    /// How long one operation may take, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// `fail_closed` (refuse, the default) or `fail_open` (count in this
    /// process) while the store is down.
    pub on_unavailable: Option<crate::state::FailPolicy>,
    /// Per pack, by name: its own `on_unavailable`.
    pub policies: Option<std::collections::BTreeMap<String, crate::state::FailPolicy>>,
}

/// `[serve]`: the gateway (the `chimera serve` flags of the same names).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeSection {
    /// The address to listen on (`127.0.0.1:8787`).
    pub listen: Option<std::net::SocketAddr>,
    /// The SHA-256 (hex) of each accepted client key.
    pub client_key_sha256: Option<Vec<String>>,
    /// The SHA-256 (hex) of the key `/metrics` asks for.
    pub metrics_key_sha256: Option<String>,
    /// A listener of `/metrics`' own (then not served on `listen`).
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// The largest request body taken, in bytes.
    pub body_cap: Option<usize>,
    /// The most bytes of request headers taken.
    pub header_cap: Option<usize>,
    /// The most requests relayed at once.
    pub concurrency: Option<usize>,
    /// The most conversations kept.
    pub max_sessions: Option<usize>,
    /// What names a conversation: `header` (`x-chimera-session` within
    /// the key, else the key) or `key` (the key alone).
    pub session_scope: Option<SessionScope>,
    /// How long connecting to an upstream may take, in seconds.
    pub upstream_connect_timeout: Option<u64>,
    /// How long an upstream may take to answer (and then to send its
    /// whole reply), in seconds.
    pub upstream_timeout: Option<u64>,
    /// How often the gateway itself retries an upstream 429 or 5xx (0,
    /// the default: the client's SDK retries).
    pub upstream_retries: Option<u32>,
    /// A streamed request when a pack gates whole replies only:
    /// `downgrade` holds each reply until it is judged whole, `allow`
    /// streams it and appends the verdict.
    pub stream_policy: Option<StreamPolicyName>,
    /// Hot-swap rebuilt packs.
    pub watch: Option<bool>,
    /// The audit log of every decision (as `--audit FILE`).
    pub audit: Option<PathBuf>,
    /// How long a request's headers may take, in seconds (and an idle
    /// connection may wait for the next request).
    pub header_timeout: Option<u64>,
    /// How long a request's body may take, in seconds (408).
    pub body_timeout: Option<u64>,
    /// How long a client may take nothing written to it, in seconds (its
    /// connection closed, a stream to it cancelled).
    pub write_timeout: Option<u64>,
    /// The most request-body bytes buffered across all requests (429).
    pub buffer_cap: Option<usize>,
    /// The most request-body bytes one key's requests buffer (429).
    pub key_buffer_cap: Option<usize>,
    /// The most requests one key has in flight (429).
    pub key_concurrency: Option<usize>,
    /// A rate limiter's pause: 0 answers 429 with `retry-after`; more
    /// holds the request, without a concurrency slot, up to that many
    /// seconds.
    pub rate_limit_hold: Option<u64>,
    /// `[serve.openai]`: the chat-completions upstream.
    pub openai: Option<UpstreamSection>,
    /// `[serve.anthropic]`: the Messages upstream.
    pub anthropic: Option<UpstreamSection>,
}

/// `[serve.openai]`, `[serve.anthropic]`: one upstream.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamSection {
    /// Its base URL.
    pub base_url: Option<String>,
    /// The environment variable holding the gateway's key for it.
    pub key_env: Option<String>,
    /// The models clients may ask it for.
    pub models: Option<Vec<String>>,
}

/// `[[packs]]`: one pack, by entry-point name, with its config.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackEntry {
    /// The entry-point name.
    pub name: String,
    /// The pack's config, written as a TOML table (handed over as JSON).
    pub config: Option<toml::Table>,
    /// Run it in a sandboxed child process of its own (`--isolate NAME`).
    pub isolate: Option<bool>,
    /// `enforce` (the default) or `monitor`: its decisions recorded but
    /// never enforced (`--monitor NAME`).
    pub mode: Option<crate::interception::PackMode>,
    /// In a server (`chimera serve`): `fail_closed` (the default) refuses
    /// what this pack cannot judge (an error, a call past its deadline,
    /// its process restarting); `fail_open` lets each seam's own policy
    /// decide instead (`--fail-open NAME`).
    pub on_unavailable: Option<crate::state::FailPolicy>,
}

/// `[trust]`: trust and containment (the flags of the same names).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustSection {
    /// Refuse a plugins directory without a lock file.
    pub locked: Option<bool>,
    /// The one lock file to consult.
    pub lock: Option<PathBuf>,
    /// Accept a plugins directory others may write to.
    pub allow_insecure_plugins_dir: Option<bool>,
    /// Run new pack content in a throw-away process first.
    pub probe: Option<bool>,
    /// Probe each rebuilt pack before a hot swap.
    pub probe_on_reload: Option<bool>,
    /// How long a probe may take, in seconds.
    pub probe_timeout: Option<u64>,
    /// Failures within the window that quarantine a pack.
    pub quarantine_after: Option<u32>,
    /// The quarantine window, in seconds.
    pub quarantine_window: Option<u64>,
    /// A pack call's time budget, in milliseconds.
    pub call_budget_ms: Option<u64>,
    /// What a call's budget grows by per MiB of its input, in
    /// milliseconds.
    pub call_budget_per_mib_ms: Option<u64>,
    /// How many processes each isolated pack runs.
    pub isolate_processes: Option<usize>,
}

/// `[provider]`: the model.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSection {
    /// `openai`, `anthropic` or `scripted` (with `script`).
    pub name: Option<String>,
    /// The model name.
    pub model: Option<String>,
    /// The API's base URL.
    pub base_url: Option<String>,
    /// The environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// The scripted model's script.
    pub script: Option<PathBuf>,
    /// Extra request headers, `"Name: value"`.
    pub headers: Option<Vec<String>>,
    /// Stream replies.
    pub stream: Option<bool>,
    /// What a pack that gates whole replies does to streaming.
    pub stream_policy: Option<StreamPolicyName>,
}

/// `[approvals]`: who may run which tool, and who answers.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsSection {
    /// Tools to ask about before each call.
    pub ask: Option<Vec<String>>,
    /// Tools never to run.
    pub deny: Option<Vec<String>>,
    /// `yes` approves every ask, `no` rejects every ask.
    pub answer: Option<Answer>,
    /// Answers, one JSON object per line (as `--approvals FILE`).
    pub answers_file: Option<PathBuf>,
}

/// `[session]`: the session itself.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSection {
    /// The system prompt.
    pub system: Option<String>,
    /// Provider calls per turn.
    pub max_steps: Option<usize>,
    /// The workspace directory.
    pub workspace: Option<PathBuf>,
    /// A price table file.
    pub prices: Option<PathBuf>,
    /// Turns a compaction keeps whole.
    pub compact_keep_turns: Option<usize>,
    /// Confine `bash`'s writes (Landlock).
    pub bash_sandbox: Option<bool>,
    /// `react`, `plan-and-execute`, `reflexion`, `tree-of-thought`,
    /// `plan-act` or `retry`.
    pub strategy: Option<String>,
    /// The strategy's settings, as a table (`{ candidates = 2 }`).
    pub strategy_config: Option<toml::Table>,
    /// The audit log every run appends to (as `--audit FILE`).
    pub audit: Option<PathBuf>,
}

/// What names a gateway conversation (`[serve] session_scope`,
/// `chimera serve --session-scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionScope {
    /// The `x-chimera-session` header within the client's key, else the
    /// key: a client may start a fresh conversation (and so a fresh
    /// per-conversation budget) by naming one.
    #[default]
    Header,
    /// The client's key alone; the header is ignored, so a per-session
    /// budget is a per-key budget no client can step out of.
    Key,
}

impl std::str::FromStr for SessionScope {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "header" => Ok(SessionScope::Header),
            "key" => Ok(SessionScope::Key),
            other => Err(format!(
                "unknown session scope `{}` (expected header or key)",
                crate::types::one_line(other)
            )),
        }
    }
}

/// `[approvals] answer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    /// Approve every ask.
    Yes,
    /// Reject every ask.
    No,
}

/// `[provider] stream_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamPolicyName {
    /// Turn streaming off for a pack that gates whole replies only.
    Downgrade,
    /// Keep it on.
    Allow,
}

impl FileConfig {
    /// Refuses what the schema cannot: both ways of answering approvals.
    ///
    /// # Errors
    ///
    /// `ConfigError::Invalid` when `[approvals]` sets both `answer` and
    /// `answers_file`.
    pub fn check(&self, path: &Path) -> Result<(), ConfigError> {
        let approvals = &self.approvals;
        if approvals.answer.is_some() && approvals.answers_file.is_some() {
            return Err(ConfigError::Invalid {
                path: path.to_owned(),
                problem: "[approvals] sets both answer and answers_file; keep one".to_owned(),
            });
        }
        Ok(())
    }
}

/// Reads the user-named file at `path` as configuration text.
pub(crate) fn read(path: &Path) -> Result<String, ConfigError> {
    read_user_file(path, MAX_FILE_BYTES).map_err(|reason| ConfigError::Read {
        path: path.to_owned(),
        reason,
    })
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(0, |before| before.matches('\n').count())
        + 1
}

/// Parses `text` (read from `path`); an error names the line and the problem.
///
/// # Errors
///
/// `ConfigError::Parse` when `text` is not TOML or does not fit the
/// configuration schema (an unknown key, a value of the wrong type).
pub fn parse(path: &Path, text: &str) -> Result<FileConfig, ConfigError> {
    toml::from_str(text).map_err(|error| ConfigError::Parse {
        path: path.to_owned(),
        line: error.span().map(|span| line_of(text, span.start)),
        message: error.message().trim().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<FileConfig, String> {
        parse(Path::new("chimera.toml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn an_unknown_key_is_refused_with_its_line() {
        let error = parsed("packs = []\n\n[trust]\nprobe = true\nprobbe = true\n").unwrap_err();
        assert!(error.starts_with("chimera.toml line 5: "), "{error}");
        assert!(error.contains("probbe"), "{error}");
        assert!(!error.contains('\n'), "{error}");
    }

    #[test]
    fn a_wrong_type_is_refused_with_its_line() {
        let error = parsed("[session]\nmax_steps = \"many\"\n").unwrap_err();
        assert!(error.starts_with("chimera.toml line 2: "), "{error}");
    }

    #[test]
    fn both_ways_of_answering_approvals_are_refused() {
        let config = parse(
            Path::new("c.toml"),
            "[approvals]\nanswer = \"yes\"\nanswers_file = \"a.jsonl\"\n",
        )
        .unwrap();
        let error = config.check(Path::new("c.toml")).unwrap_err().to_string();
        assert_eq!(
            error,
            "c.toml: [approvals] sets both answer and answers_file; keep one"
        );
    }
}
