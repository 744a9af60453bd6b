//! MCP servers as tools of a session: each configured server is started
//! (a command on standard input and output) or reached (a streamable-HTTP
//! URL) through the official Rust SDK, `rmcp`, its tools are listed once,
//! and each is offered to the model as `SERVER__tool` (see
//! [`McpTool`](super::McpTool)). The session treats them as it treats its
//! built-in tools: every call passes the `tool_call` seam, the permission
//! policy and the hooks, and its result passes `tool_result`.
//!
//! A server is hostile until checked, and never takes the run down. One
//! that cannot start, does not finish its handshake and listing within its
//! start-up timeout, dies, sends something that is not a JSON-RPC message,
//! or leaves a call unanswered past its call timeout is stopped, said in
//! one warning line, and its tools go away: they are no longer offered
//! from the next turn on, and a call to one is an error result naming why.

use super::connection::Server;
use super::stdio::{self, Exit};
use super::tool::{listed_tools, McpTool};
use crate::tools::Tool;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Handle;

/// How long a server may take to start, shake hands and list its tools.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one call may wait for its answer before the server is taken
/// for hung and stopped.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// The longest server name: `SERVER__tool` must stay within the 64
/// characters model APIs allow a function name.
pub const MAX_SERVER_NAME: usize = 32;

/// How one server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A command started in the workspace, spoken to on its standard input
    /// and output (one JSON-RPC message a line).
    Stdio {
        /// The program (looked up on `PATH` when it has no `/`).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to the environment it inherits.
        env: BTreeMap<String, String>,
    },
    /// A streamable-HTTP endpoint.
    Http {
        /// Its URL (`http://` or `https://`).
        url: String,
        /// Sent as `Authorization: Bearer …` when set.
        bearer_token: Option<String>,
    },
}

/// One configured server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// Its name: the prefix of its tools' names.
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// See [`DEFAULT_STARTUP_TIMEOUT`].
    pub startup_timeout: Duration,
    /// See [`DEFAULT_CALL_TIMEOUT`].
    pub call_timeout: Duration,
}

impl ServerSpec {
    /// A server named `name` (checked by [`check_name`]) on `transport`,
    /// with the default timeouts.
    ///
    /// # Errors
    ///
    /// [`ServerSpecError`] saying what is wrong with the name or the
    /// transport.
    pub fn new(name: &str, transport: Transport) -> Result<Self, ServerSpecError> {
        check_name(name)?;
        match &transport {
            Transport::Stdio { command, .. } if command.trim().is_empty() => {
                return Err(ServerSpecError::EmptyCommand(name.to_owned()));
            }
            Transport::Http { url, .. }
                if !(url.starts_with("http://") || url.starts_with("https://")) =>
            {
                return Err(ServerSpecError::NotHttp {
                    name: name.to_owned(),
                    url: url.clone(),
                });
            }
            _ => {}
        }
        Ok(ServerSpec {
            name: name.to_owned(),
            transport,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
        })
    }

    /// The `--mcp` flag's `NAME=URL` (`http://…`, `https://…`) or
    /// `NAME=COMMAND ARGS…` (split as a POSIX shell splits words, quotes
    /// included).
    ///
    /// # Errors
    ///
    /// [`ServerSpecError`] saying what to write instead.
    pub fn parse_flag(text: &str) -> Result<Self, ServerSpecError> {
        let Some((name, rest)) = text.split_once('=') else {
            return Err(ServerSpecError::Flag(text.to_owned()));
        };
        let rest = rest.trim();
        if rest.starts_with("http://") || rest.starts_with("https://") {
            return ServerSpec::new(
                name,
                Transport::Http {
                    url: rest.to_owned(),
                    bearer_token: None,
                },
            );
        }
        let Some(mut words) = shlex::split(rest) else {
            return Err(ServerSpecError::Words {
                name: name.to_owned(),
                rest: rest.to_owned(),
            });
        };
        let command = if words.is_empty() {
            String::new()
        } else {
            words.remove(0)
        };
        ServerSpec::new(
            name,
            Transport::Stdio {
                command,
                args: words,
                env: BTreeMap::new(),
            },
        )
    }
}

/// Checks a server's name: 1 to [`MAX_SERVER_NAME`] letters, digits, `-`
/// and `_`, neither starting nor ending with `_` and without `__` (which
/// separates it from the tool's name).
///
/// # Errors
///
/// [`ServerSpecError::Name`], whose line says what a name may be.
pub fn check_name(name: &str) -> Result<(), ServerSpecError> {
    let fits = !name.is_empty()
        && name.len() <= MAX_SERVER_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && !name.starts_with('_')
        && !name.ends_with('_')
        && !name.contains("__");
    if fits {
        Ok(())
    } else {
        Err(ServerSpecError::Name(name.escape_debug().to_string()))
    }
}

/// Why a server's specification was refused: one line saying what to
/// write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServerSpecError {
    /// The name breaks [`check_name`]'s rule (the name, escaped).
    #[error(
        "MCP server name `{0}`: a name is 1 to {MAX_SERVER_NAME} letters, digits, `-` and `_`, \
         without `__` and not starting or ending with `_` (its tools are called NAME__tool)"
    )]
    Name(String),
    /// A stdio server with no command.
    #[error("MCP server {0}: the command is empty")]
    EmptyCommand(String),
    /// A remote server whose URL is not http(s).
    #[error("MCP server {name}: the URL {url} is neither http:// nor https://")]
    NotHttp {
        /// The server's name.
        name: String,
        /// The URL given.
        url: String,
    },
    /// An `--mcp` flag without `NAME=`.
    #[error("--mcp {0}: expected NAME=COMMAND [ARGS…] or NAME=URL")]
    Flag(String),
    /// An `--mcp` command line that does not split into words.
    #[error("--mcp {name}: cannot split `{rest}` into words (an unclosed quote?)")]
    Words {
        /// The server's name.
        name: String,
        /// What follows `NAME=`.
        rest: String,
    },
}

/// The configured servers of one session, started, with their tools.
/// Dropping it stops them all (without a line).
pub struct McpServers {
    servers: Vec<Arc<Server>>,
    tools: Vec<Arc<McpTool>>,
    /// One per server: ends once its connection (and process) is gone.
    supervisors: Vec<tokio::task::JoinHandle<()>>,
    handle: Option<Handle>,
}

impl McpServers {
    /// No servers.
    #[must_use]
    pub fn none() -> Self {
        McpServers {
            servers: Vec::new(),
            tools: Vec::new(),
            supervisors: Vec::new(),
            handle: None,
        }
    }

    /// Starts every server in `specs` at once (commands in `dir`), each
    /// within its start-up timeout, and lists their tools. A server that
    /// fails is one warning line naming it and why, and offers nothing;
    /// the others go on.
    #[must_use]
    pub fn start(specs: &[ServerSpec], dir: &Path) -> Self {
        if specs.is_empty() {
            return McpServers::none();
        }
        let Some(handle) = crate::runtime::handle() else {
            for spec in specs {
                tracing::warn!(
                    "MCP server {}: the system gave the MCP client no thread; its tools are not offered",
                    spec.name
                );
            }
            return McpServers::none();
        };
        let (sender, receiver) = std::sync::mpsc::channel();
        for spec in specs {
            let sender = sender.clone();
            let spec = spec.clone();
            let dir = dir.to_owned();
            let inner = handle.clone();
            handle.spawn(async move {
                let started = connect(&spec, &dir, inner).await;
                let _ = sender.send((spec.name.clone(), started));
            });
        }
        drop(sender);
        let mut started: BTreeMap<String, Started> = BTreeMap::new();
        for (name, outcome) in receiver {
            match outcome {
                Ok(server) => {
                    started.insert(name, server);
                }
                Err(why) => {
                    tracing::warn!("MCP server {name}: {why}; its tools are not offered");
                }
            }
        }
        let mut servers = McpServers::none();
        servers.handle = Some(handle);
        // In the order configured, so the tools are offered in that order.
        for spec in specs {
            if let Some(server) = started.remove(&spec.name) {
                servers.tools.extend(
                    listed_tools(&server.server, server.listed)
                        .into_iter()
                        .map(Arc::new),
                );
                servers.servers.push(server.server);
                servers.supervisors.push(server.supervisor);
            }
        }
        servers
    }

    /// Judges every tool's listing (name, description, schema texts) by
    /// `registry`'s `provider_request` chain, as the MCP guard does: a
    /// tool a pack blocks (prompt-injection's tool poisoning) is not
    /// offered, one line each; a text a pack changes is offered changed.
    pub fn judge_listings(&mut self, registry: &crate::plugins::Registry) {
        let chains = registry.get_all();
        if chains.provider_request.is_empty() {
            return;
        }
        let audited = super::judge::Audited::of(None, "listing");
        let mut kept = Vec::with_capacity(self.tools.len());
        for tool in std::mem::take(&mut self.tools) {
            let src = tool.listing();
            let Ok(root) = crate::jsondoc::parse(&src, &crate::jsondoc::Limits::default()) else {
                continue;
            };
            match super::judge::judge_listed_tool(&audited, &chains, &src, &root) {
                super::judge::Verdict::Pass => kept.push(tool),
                super::judge::Verdict::Edited(splice) => {
                    let judged = splice
                        .render(&src)
                        .ok()
                        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok());
                    if let (Some(judged), Some(mut tool)) = (judged, Arc::into_inner(tool)) {
                        tool.relist(&judged);
                        kept.push(Arc::new(tool));
                    }
                }
                super::judge::Verdict::Withheld(why) => {
                    tracing::warn!("MCP tool {} is not offered: {why}", tool.name());
                }
            }
        }
        self.tools = kept;
    }

    /// Every tool of every server still there, in order.
    #[must_use]
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools
            .iter()
            .filter(|tool| tool.is_offered())
            .map(|tool| Arc::clone(tool) as Arc<dyn Tool>)
            .collect()
    }

    /// The names of the servers that started.
    #[must_use]
    pub fn started(&self) -> Vec<&str> {
        self.servers.iter().map(|s| s.name.as_str()).collect()
    }
}

impl Drop for McpServers {
    fn drop(&mut self) {
        for server in &self.servers {
            server.go_quietly("the session ended");
        }
        let Some(handle) = &self.handle else {
            return;
        };
        // Each supervisor kills its process if it has not ended by then.
        let supervisors = std::mem::take(&mut self.supervisors);
        let (done, finished) = std::sync::mpsc::channel();
        handle.spawn(async move {
            for supervisor in supervisors {
                let _ = supervisor.await;
            }
            let _ = done.send(());
        });
        let _ = finished.recv_timeout(Duration::from_secs(3));
    }
}

/// A server whose handshake and listing succeeded.
struct Started {
    server: Arc<Server>,
    listed: Vec<rmcp::model::Tool>,
    supervisor: tokio::task::JoinHandle<()>,
}

/// What the client says of itself in the handshake.
fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("chimera", env!("CARGO_PKG_VERSION")),
    )
}

/// Starts or reaches `spec`'s server, shakes hands and lists its tools,
/// all within its start-up timeout.
async fn connect(spec: &ServerSpec, dir: &Path, handle: Handle) -> Result<Started, String> {
    match &spec.transport {
        Transport::Stdio { command, args, env } => {
            let child = stdio::spawn(command, args, env, dir)?;
            let (transport, process) = (child.transport, child.process);
            let within = spec.startup_timeout;
            let handshake =
                tokio::time::timeout(within, handshake(client_config(), transport)).await;
            match handshake {
                Ok(Ok((running, listed))) => {
                    let server = server(spec, &running, handle);
                    let supervisor =
                        tokio::spawn(supervise_stdio(Arc::clone(&server), running, process));
                    Ok(Started {
                        server,
                        listed,
                        supervisor,
                    })
                }
                Ok(Err(error)) => {
                    // The process's own end says more than the handshake's.
                    let ended = process.reap(Duration::from_secs(2)).await;
                    Err(match ended {
                        Exit::Killed => format!("the handshake failed: {error}"),
                        ended => ended.to_string(),
                    })
                }
                Err(_) => {
                    process.reap(Duration::ZERO).await;
                    Err(format!(
                        "did not finish starting within {} s; stopped",
                        within.as_secs()
                    ))
                }
            }
        }
        Transport::Http { url, bearer_token } => {
            // rustls for the SDK's HTTP client: the ring provider, as for
            // the rest of the host (once per process; a second install is
            // refused harmlessly).
            let _ = rustls::crypto::ring::default_provider().install_default();
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            config.auth_header.clone_from(bearer_token);
            let transport = StreamableHttpClientTransport::from_config(config);
            let within = spec.startup_timeout;
            match tokio::time::timeout(within, handshake(client_config(), transport)).await {
                Ok(Ok((running, listed))) => {
                    let server = server(spec, &running, handle);
                    let supervisor = tokio::spawn(supervise_http(Arc::clone(&server), running));
                    Ok(Started {
                        server,
                        listed,
                        supervisor,
                    })
                }
                Ok(Err(error)) => Err(format!("cannot reach {url}: {error}")),
                Err(_) => Err(format!(
                    "{url} did not finish starting within {} s",
                    within.as_secs()
                )),
            }
        }
    }
}

type Running = RunningService<RoleClient, ClientConfig>;

/// The MCP handshake on `transport`, then the whole tool list.
async fn handshake<T, E, A>(
    config: ClientConfig,
    transport: T,
) -> Result<(Running, Vec<rmcp::model::Tool>), String>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let running = config.serve(transport).await.map_err(|e| e.to_string())?;
    let listed = running
        .peer()
        .list_all_tools()
        .await
        .map_err(|e| format!("cannot list its tools: {e}"))?;
    Ok((running, listed))
}

fn server(spec: &ServerSpec, running: &Running, handle: Handle) -> Arc<Server> {
    Arc::new(Server::new(
        spec.name.clone(),
        running.peer().clone(),
        spec.call_timeout,
        handle,
        running.cancellation_token(),
    ))
}

/// Waits for a stdio server's connection to end (its output closed or
/// unreadable, or the connection stopped), then for its process (killed if
/// it does not end at once), and takes the server away saying how it ended.
async fn supervise_stdio(server: Arc<Server>, running: Running, process: stdio::Process) {
    let _ = running.waiting().await;
    let grace = if server.gone().is_some() {
        Duration::ZERO
    } else {
        Duration::from_secs(1)
    };
    let ended = process.reap(grace).await;
    server.go(ended.to_string());
}

/// Waits for a streamable-HTTP connection to end, then takes the server
/// away.
async fn supervise_http(server: Arc<Server>, running: Running) {
    let _ = running.waiting().await;
    server.go("the connection ended");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_names_a_command_with_its_words_or_a_url() {
        let spec = ServerSpec::parse_flag("fs=node 'my server.js' --root .").unwrap();
        assert_eq!(spec.name, "fs");
        assert_eq!(
            spec.transport,
            Transport::Stdio {
                command: "node".into(),
                args: vec!["my server.js".into(), "--root".into(), ".".into()],
                env: BTreeMap::new(),
            }
        );
        let spec = ServerSpec::parse_flag("remote=https://example.com/mcp").unwrap();
        assert_eq!(
            spec.transport,
            Transport::Http {
                url: "https://example.com/mcp".into(),
                bearer_token: None
            }
        );
    }

    #[test]
    fn a_bad_flag_or_name_is_one_line_saying_what_to_write() {
        for (flag, says) in [
            ("fs", "expected NAME=COMMAND [ARGS…] or NAME=URL"),
            ("fs=", "the command is empty"),
            ("fs=node 'open", "an unclosed quote?"),
            ("a__b=node x", "without `__`"),
            ("_a=node x", "not starting or ending with `_`"),
            ("a.b=node x", "letters, digits"),
        ] {
            let error = ServerSpec::parse_flag(flag).unwrap_err().to_string();
            assert!(error.contains(says), "{flag}: {error}");
            assert!(!error.contains('\n'), "{error}");
        }
        let long = format!("{}=node x", "a".repeat(MAX_SERVER_NAME + 1));
        assert!(ServerSpec::parse_flag(&long).is_err());
        let ftp = ServerSpec::new(
            "x",
            Transport::Http {
                url: "ftp://x".into(),
                bearer_token: None,
            },
        );
        assert!(ftp
            .unwrap_err()
            .to_string()
            .contains("neither http:// nor https://"));
    }
}
