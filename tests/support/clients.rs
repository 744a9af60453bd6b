//! The real clients people point at a model API, each run for one tool
//! round trip against a base URL: Claude Code (`claude -p`, with its own
//! tools, and again with a stdio MCP server that has instructions), the
//! `OpenAI` Agents SDK (with a chat-completions model), `LangChain`'s
//! `ChatOpenAI` and `ChatAnthropic`, the Vercel AI SDK (`generateText` on
//! `openai.chat(...)` and `anthropic(...)`), and the official `openai` and
//! `anthropic` Python SDKs driven by hand, streamed and not.
//!
//! The npm clients ([`NPM_PACKAGES`], pinned) live in a directory the
//! tests own (`target/clients`, installed once per machine: `.ci/run`
//! installs them before the tests, and the first test that needs them does
//! otherwise); the Python ones live in the venv of [`python`](super::python).
//! Where they cannot be had, the tests that need them say so in one line
//! and skip, or fail with that line when `CHIMERA_REQUIRE_REAL_PARTS` is
//! set, as `.ci/run` sets it (see [`real_parts`](super::real_parts)).
//!
//! Every client runs with a cleared environment (`PATH`, a scratch `HOME`,
//! and what it is told here), in a scratch directory, bounded in time.
//! The base URL is the server's root (`http://127.0.0.1:PORT`): the
//! chat-completions clients are given it with `/v1` appended, the Messages
//! clients as it is (the Vercel SDK's Anthropic provider with `/v1`, as it
//! wants). The loopback model for each is [`Client::upstream`].

use super::http::{tool_model_calls, Reply};
use super::{python, real_parts};
use serde_json::{json, Value};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The npm clients, pinned: (package, version).
pub const NPM_PACKAGES: &[(&str, &str)] = &[
    ("@anthropic-ai/claude-code", "2.1.332"),
    ("ai", "7.0.173"),
    ("@ai-sdk/openai", "4.0.118"),
    ("@ai-sdk/anthropic", "4.0.105"),
    ("zod", "4.6.7"),
];

/// How long one client run may take before it is killed.
pub const RUN_LIMIT: Duration = Duration::from_secs(180);

/// Where the npm clients are installed.
pub fn clients_dir() -> PathBuf {
    super::workspace_root().join("target/clients")
}

/// The scripts that drive the Python and Node clients.
fn scripts_dir() -> PathBuf {
    super::workspace_root().join("tests/support/clients")
}

/// The installed version of npm package `package` under `dir`, if any.
fn npm_version(dir: &Path, package: &str) -> Option<String> {
    let manifest = dir.join("node_modules").join(package).join("package.json");
    let manifest: Value = serde_json::from_slice(&std::fs::read(manifest).ok()?).ok()?;
    manifest["version"].as_str().map(str::to_owned)
}

/// The directory holding the npm clients at their pinned versions, or
/// `None` (said once, on stderr) when they cannot be installed.
///
/// # Panics
///
/// When they cannot be installed and `CHIMERA_REQUIRE_REAL_PARTS` is set.
pub fn npm_clients() -> Option<&'static Path> {
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let mut first = false;
    let installed = INSTALLED.get_or_init(|| {
        first = true;
        install_npm()
    });
    match installed {
        Ok(dir) => Some(dir),
        Err(why) => {
            real_parts::missing(&format!("the npm clients cannot be had: {why}"), first);
            None
        }
    }
}

fn install_npm() -> Result<PathBuf, String> {
    let node = Command::new("node")
        .arg("--version")
        .output()
        .map_err(|e| format!("node cannot run ({e}); .ci/run installs it"))?;
    if !node.status.success() {
        return Err("node --version failed; .ci/run installs node".to_owned());
    }
    let dir = clients_dir();
    let pinned = |dir: &Path| {
        NPM_PACKAGES
            .iter()
            .all(|(package, version)| npm_version(dir, package).as_deref() == Some(*version))
    };
    if pinned(&dir) && claude_bin(&dir).is_file() {
        return Ok(dir);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let packages: Vec<String> = NPM_PACKAGES
        .iter()
        .map(|(package, version)| format!("{package}@{version}"))
        .collect();
    let out = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
        .arg(&dir)
        .args(&packages)
        .output()
        .map_err(|e| format!("npm cannot run ({e}); .ci/run installs it"))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "npm install failed: {}",
            why.lines().last().unwrap_or("no output")
        ));
    }
    if pinned(&dir) && claude_bin(&dir).is_file() {
        Ok(dir)
    } else {
        Err("npm installed them but not at their pinned versions".to_owned())
    }
}

/// Claude Code's executable under `dir`.
fn claude_bin(dir: &Path) -> PathBuf {
    dir.join("node_modules/.bin/claude")
}

/// The wire a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// `POST /v1/chat/completions`.
    ChatCompletions,
    /// The Anthropic Messages API, `POST /v1/messages`.
    Messages,
}

/// The tool call the loopback model asks a client for, and the text the
/// client's tool answers with (which only running the tool gives).
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// Calls the model makes before it, one a turn: Claude Code's
    /// `ToolSearch`, which loads a deferred MCP tool.
    pub first: Vec<(&'static str, Value)>,
    /// The tool's name, as the client offers it.
    pub name: &'static str,
    /// The arguments the model sends.
    pub arguments: Value,
    /// A text the tool's result holds.
    pub result: &'static str,
}

/// The instructions of Claude Code's MCP server ([`Client::ClaudeCodeMcp`]).
pub const MCP_INSTRUCTIONS: &str =
    "Chimera fidelity instructions: the secret tool knows every secret word.";

/// One real client, set up for one tool round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// Claude Code, `claude -p`, running its own `Bash` tool.
    ClaudeCode,
    /// Claude Code with a stdio MCP server that has instructions
    /// ([`MCP_INSTRUCTIONS`]), running the server's `secret` tool.
    ClaudeCodeMcp,
    /// The `OpenAI` Agents SDK, `OpenAIChatCompletionsModel`, `Runner.run_sync`.
    OpenAiAgents,
    /// `LangChain`'s `ChatOpenAI` with a bound tool.
    LangChainOpenAi,
    /// `LangChain`'s `ChatAnthropic` with a bound tool.
    LangChainAnthropic,
    /// The Vercel AI SDK, `generateText` on `openai.chat(...)`.
    VercelOpenAi,
    /// The Vercel AI SDK, `generateText` on `anthropic(...)`.
    VercelAnthropic,
    /// The `openai` Python SDK, by hand, not streamed.
    OpenAiSdk,
    /// The `openai` Python SDK, by hand, streamed (with usage).
    OpenAiSdkStreamed,
    /// The `anthropic` Python SDK, by hand, not streamed.
    AnthropicSdk,
    /// The `anthropic` Python SDK, by hand, streamed.
    AnthropicSdkStreamed,
}

impl Client {
    /// Every client.
    pub const ALL: [Client; 11] = [
        Client::ClaudeCode,
        Client::ClaudeCodeMcp,
        Client::OpenAiAgents,
        Client::LangChainOpenAi,
        Client::LangChainAnthropic,
        Client::VercelOpenAi,
        Client::VercelAnthropic,
        Client::OpenAiSdk,
        Client::OpenAiSdkStreamed,
        Client::AnthropicSdk,
        Client::AnthropicSdkStreamed,
    ];

    /// Its name: the corpus file `tests/data/fidelity/<name>.json`.
    pub fn name(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude-code",
            Client::ClaudeCodeMcp => "claude-code-mcp",
            Client::OpenAiAgents => "openai-agents",
            Client::LangChainOpenAi => "langchain-openai",
            Client::LangChainAnthropic => "langchain-anthropic",
            Client::VercelOpenAi => "vercel-ai-openai",
            Client::VercelAnthropic => "vercel-ai-anthropic",
            Client::OpenAiSdk => "openai-python",
            Client::OpenAiSdkStreamed => "openai-python-stream",
            Client::AnthropicSdk => "anthropic-python",
            Client::AnthropicSdkStreamed => "anthropic-python-stream",
        }
    }

    /// The wire it speaks.
    pub fn wire(self) -> Wire {
        match self {
            Client::ClaudeCode
            | Client::ClaudeCodeMcp
            | Client::LangChainAnthropic
            | Client::VercelAnthropic
            | Client::AnthropicSdk
            | Client::AnthropicSdkStreamed => Wire::Messages,
            Client::OpenAiAgents
            | Client::LangChainOpenAi
            | Client::VercelOpenAi
            | Client::OpenAiSdk
            | Client::OpenAiSdkStreamed => Wire::ChatCompletions,
        }
    }

    /// The package (and pinned version, where the tests pin one) that
    /// the client is, as the corpus names it.
    pub fn package(self) -> &'static str {
        match self {
            Client::ClaudeCode | Client::ClaudeCodeMcp => "@anthropic-ai/claude-code@2.1.332",
            Client::OpenAiAgents => "openai-agents==0.24.0",
            Client::LangChainOpenAi => "langchain-openai==1.8.1",
            Client::LangChainAnthropic => "langchain-anthropic==1.7.10",
            Client::VercelOpenAi => "ai@7.0.173 @ai-sdk/openai@4.0.118",
            Client::VercelAnthropic => "ai@7.0.173 @ai-sdk/anthropic@4.0.105",
            Client::OpenAiSdk | Client::OpenAiSdkStreamed => "openai (Python)",
            Client::AnthropicSdk | Client::AnthropicSdkStreamed => "anthropic (Python)",
        }
    }

    /// The tool call the model asks it for.
    pub fn tool_call(self) -> ToolCall {
        match self {
            Client::ClaudeCode => ToolCall {
                first: Vec::new(),
                name: "Bash",
                arguments: json!({"command": "echo chimera-$((6*7))",
                    "description": "Print the marker"}),
                result: "chimera-42",
            },
            Client::ClaudeCodeMcp => ToolCall {
                first: vec![(
                    "ToolSearch",
                    json!({"query": "select:mcp__chimera__secret", "max_results": 1}),
                )],
                name: "mcp__chimera__secret",
                arguments: json!({"word": "ocelot"}),
                result: "OCELOT-6",
            },
            _ => ToolCall {
                first: Vec::new(),
                name: "secret",
                arguments: json!({"word": "ocelot"}),
                result: "OCELOT-6",
            },
        }
    }

    /// The loopback model for its round trip (see [`tool_model_calls`]).
    pub fn upstream(self) -> Reply {
        let call = self.tool_call();
        let mut calls: Vec<(String, Value)> = call
            .first
            .into_iter()
            .map(|(name, arguments)| (name.to_owned(), arguments))
            .collect();
        calls.push((call.name.to_owned(), call.arguments));
        tool_model_calls(calls)
    }

    /// Runs it against `base_url` with `key` for one tool round trip, or
    /// `None` when it cannot be had here (see the module's doc).
    pub fn run(self, base_url: &str, key: &str) -> Option<RoundTrip> {
        match self {
            Client::ClaudeCode => claude_code(base_url, key),
            Client::ClaudeCodeMcp => claude_code_with_mcp(base_url, key),
            Client::OpenAiAgents => openai_agents(base_url, key),
            Client::LangChainOpenAi => langchain(base_url, key, Wire::ChatCompletions),
            Client::LangChainAnthropic => langchain(base_url, key, Wire::Messages),
            Client::VercelOpenAi => vercel_ai(base_url, key, Wire::ChatCompletions),
            Client::VercelAnthropic => vercel_ai(base_url, key, Wire::Messages),
            Client::OpenAiSdk => openai_sdk(base_url, key, false),
            Client::OpenAiSdkStreamed => openai_sdk(base_url, key, true),
            Client::AnthropicSdk => anthropic_sdk(base_url, key, false),
            Client::AnthropicSdkStreamed => anthropic_sdk(base_url, key, true),
        }
    }
}

/// What one client run did.
#[derive(Debug, Clone)]
pub struct RoundTrip {
    /// Whether it exited with success (and in time).
    pub success: bool,
    /// Its standard output: the final answer.
    pub stdout: String,
    /// Its standard error (and a line saying so when it was killed for
    /// taking longer than [`RUN_LIMIT`]).
    pub stderr: String,
}

impl RoundTrip {
    /// The final answer: the standard output, trimmed.
    pub fn answer(&self) -> &str {
        self.stdout.trim()
    }
}

/// A scratch place for one run: `home` (its `HOME`) and `work` (its
/// working directory), removed when dropped.
struct Scratch {
    _dir: tempfile::TempDir,
    home: PathBuf,
    work: PathBuf,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let home = dir.path().join("home");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&home).expect("a scratch HOME");
        std::fs::create_dir_all(&work).expect("a scratch working directory");
        Scratch {
            _dir: dir,
            home,
            work,
        }
    }

    /// `program` with a cleared environment: `PATH`, this `HOME`, a UTF-8
    /// locale, in `work`, reading nothing.
    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("LANG", "C.UTF-8")
            .current_dir(&self.work)
            .stdin(Stdio::null());
        command
    }
}

/// Runs `command` to its end or for [`RUN_LIMIT`], whichever is first.
pub fn run_bounded(mut command: Command) -> RoundTrip {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the client starts");
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = pipe.read_to_end(&mut text);
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = reader(Box::new(child.stdout.take().expect("its stdout")));
    let stderr = reader(Box::new(child.stderr.take().expect("its stderr")));
    let deadline = Instant::now() + RUN_LIMIT;
    let (success, late) = loop {
        if let Some(status) = child.try_wait().expect("wait for the client") {
            break (status.success(), false);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break (false, true);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = stderr.join().expect("its stderr is read");
    if late {
        stderr.push_str(&format!("\nkilled after {}s\n", RUN_LIMIT.as_secs()));
    }
    RoundTrip {
        success,
        stdout: stdout.join().expect("its stdout is read"),
        stderr,
    }
}

/// The environment Claude Code runs with: the base URL, the key, and no
/// traffic but to the base URL.
fn claude_command(scratch: &Scratch, dir: &Path, base_url: &str, key: &str) -> Command {
    let mut command = scratch.command(claude_bin(dir));
    command
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", key)
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    command
}

/// Claude Code (`claude -p`, its default tools) asked to run a shell
/// command: the model asks for `Bash` (allowed with `--allowedTools`),
/// Claude Code runs it and sends its output back.
pub fn claude_code(base_url: &str, key: &str) -> Option<RoundTrip> {
    let dir = npm_clients()?;
    let scratch = Scratch::new();
    let mut command = claude_command(&scratch, dir, base_url, key);
    command.args([
        "-p",
        "Run the shell command that prints the marker, then tell me what it printed.",
        "--allowedTools",
        "Bash",
    ]);
    Some(run_bounded(command))
}

/// Claude Code with a stdio MCP server (`tests/support/clients/mcp_server.py`,
/// the `mcp` SDK's `MCPServer` with [`MCP_INSTRUCTIONS`]) given by
/// `--mcp-config` (and `--strict-mcp-config`): the model asks for the
/// server's `secret` tool (allowed with `--allowedTools`), Claude Code
/// calls it and sends its result back.
pub fn claude_code_with_mcp(base_url: &str, key: &str) -> Option<RoundTrip> {
    let dir = npm_clients()?;
    let python = python::sdk_python()?;
    let scratch = Scratch::new();
    let config = scratch.work.join("mcp.json");
    let server = json!({"mcpServers": {"chimera": {
        "type": "stdio",
        "command": python,
        "args": [scripts_dir().join("mcp_server.py")],
    }}});
    std::fs::write(&config, server.to_string()).expect("write the MCP config");
    let mut command = claude_command(&scratch, dir, base_url, key);
    command
        .args([
            "-p",
            "What is the secret form of the word ocelot? Use the secret tool.",
            "--allowedTools",
            "mcp__chimera__secret",
            "--strict-mcp-config",
            "--mcp-config",
        ])
        .arg(&config);
    Some(run_bounded(command))
}

/// Runs Python script `script` (in `tests/support/clients`) with `args`
/// after the base URL and key, or `None` when the venv cannot be had (see
/// the module's doc).
pub fn python_script(script: &str, base_url: &str, key: &str, args: &[&str]) -> Option<RoundTrip> {
    let python = python::sdk_python()?;
    let scratch = Scratch::new();
    let mut command = scratch.command(python);
    command
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("OPENAI_AGENTS_DISABLE_TRACING", "1")
        .arg(scripts_dir().join(script))
        .args([base_url, key])
        .args(args);
    Some(run_bounded(command))
}

/// The `OpenAI` Agents SDK: an `Agent` with a `@function_tool` and an
/// `OpenAIChatCompletionsModel` on `base_url/v1` (tracing off), run with
/// `Runner.run_sync`; prints the final output.
pub fn openai_agents(base_url: &str, key: &str) -> Option<RoundTrip> {
    python_script("openai_agents.py", base_url, key, &[])
}

/// `LangChain`'s `ChatOpenAI` (on `base_url/v1`) or `ChatAnthropic` (on
/// `base_url`) with a `@tool` bound, driven by hand: invoke, run the tool
/// calls, invoke again; prints the final text.
pub fn langchain(base_url: &str, key: &str, wire: Wire) -> Option<RoundTrip> {
    let which = match wire {
        Wire::ChatCompletions => "openai",
        Wire::Messages => "anthropic",
    };
    python_script("langchain_chat.py", base_url, key, &[which])
}

/// The official `openai` Python SDK driven by hand on chat completions
/// (`base_url/v1`), streamed (with `include_usage`) or not; prints the
/// final text.
pub fn openai_sdk(base_url: &str, key: &str, stream: bool) -> Option<RoundTrip> {
    let mode = if stream { "stream" } else { "plain" };
    python_script("openai_sdk.py", base_url, key, &[mode])
}

/// The official `anthropic` Python SDK driven by hand on the Messages API
/// (`base_url`), streamed (`messages.stream`) or not; prints the final
/// text.
pub fn anthropic_sdk(base_url: &str, key: &str, stream: bool) -> Option<RoundTrip> {
    let mode = if stream { "stream" } else { "plain" };
    python_script("anthropic_sdk.py", base_url, key, &[mode])
}

/// The Vercel AI SDK: `generateText` with one `tool` and
/// `stopWhen: stepCountIs(2)`, on `createOpenAI(...).chat(...)` or
/// `createAnthropic(...)(...)`, both given `base_url/v1`; prints the final
/// text.
pub fn vercel_ai(base_url: &str, key: &str, wire: Wire) -> Option<RoundTrip> {
    // Node resolves the script's imports beside it: it runs from there,
    // copied once per test run.
    static COPIED: OnceLock<PathBuf> = OnceLock::new();
    let dir = npm_clients()?;
    let script = COPIED.get_or_init(|| {
        let source = std::fs::read(scripts_dir().join("vercel.mjs")).expect("the Vercel script");
        super::publish(dir, "vercel.mjs", &source)
    });
    let which = match wire {
        Wire::ChatCompletions => "openai",
        Wire::Messages => "anthropic",
    };
    let scratch = Scratch::new();
    let mut command = scratch.command("node");
    command.arg(script).args([base_url, key, which]);
    Some(run_bounded(command))
}
