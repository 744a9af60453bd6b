//! The MCP servers whose tools `run` offers and `tools list` lists: the
//! `--mcp` flags, or the configuration file's `[mcp.servers.NAME]`, each
//! checked into a [`ServerSpec`] and started.

use super::args::McpArgs;
use super::failure::Failure;
use super::settings::McpServer;
use chimera_host::config::McpServerEntry;
use chimera_host::mcp::{McpServers, ServerSpec, Transport};
use std::path::Path;
use std::time::Duration;

/// The servers `args` configure, started in `dir` (see
/// [`McpServers::start`]: one that fails is a line, and the rest go on).
///
/// # Errors
///
/// A usage failure naming the bad flag or `[mcp.servers.NAME]` key.
pub(crate) fn start_servers(args: &McpArgs, dir: &Path) -> Result<McpServers, Failure> {
    let specs = server_specs(args).map_err(Failure::usage)?;
    Ok(McpServers::start(&specs, dir))
}

/// The servers `--mcp` or the file gave; each name once.
fn server_specs(args: &McpArgs) -> Result<Vec<ServerSpec>, String> {
    let specs: Vec<ServerSpec> = args
        .servers
        .iter()
        .map(|server| match server {
            McpServer::Flag(flag) => ServerSpec::parse_flag(flag).map_err(|e| e.to_string()),
            McpServer::Entry(name, entry) => {
                spec_of(name, entry).map_err(|e| format!("[mcp.servers.{name}]: {e}"))
            }
        })
        .collect::<Result<_, _>>()?;
    for (i, spec) in specs.iter().enumerate() {
        if specs[..i].iter().any(|other| other.name == spec.name) {
            return Err(format!(
                "--mcp {}: a server of that name is given twice",
                spec.name
            ));
        }
    }
    Ok(specs)
}

/// One `[mcp.servers.NAME]` table as a server.
fn spec_of(name: &str, entry: &McpServerEntry) -> Result<ServerSpec, String> {
    let transport = match (&entry.command, &entry.url) {
        (Some(command), None) => Transport::Stdio {
            command: command.clone(),
            args: entry.args.clone().unwrap_or_default(),
            env: entry.env.clone().unwrap_or_default(),
        },
        (None, Some(url)) => {
            if entry.args.is_some() || entry.env.is_some() {
                return Err("`args` and `env` are for a `command`, not a `url`".to_owned());
            }
            let bearer_token = entry
                .bearer_token_env
                .as_ref()
                .map(|var| {
                    std::env::var(var)
                        .map_err(|_| format!("bearer_token_env: the variable {var} is not set"))
                })
                .transpose()?;
            Transport::Http {
                url: url.clone(),
                bearer_token,
            }
        }
        (Some(_), Some(_)) => return Err("give a `command` or a `url`, not both".to_owned()),
        (None, None) => return Err("give a `command` (stdio) or a `url` (HTTP)".to_owned()),
    };
    if entry.bearer_token_env.is_some() && entry.command.is_some() {
        return Err("`bearer_token_env` is for a `url`, not a `command`".to_owned());
    }
    let mut spec = ServerSpec::new(name, transport).map_err(|e| e.to_string())?;
    for (key, value, slot) in [
        (
            "startup_timeout_secs",
            entry.startup_timeout_secs,
            &mut spec.startup_timeout,
        ),
        (
            "call_timeout_secs",
            entry.call_timeout_secs,
            &mut spec.call_timeout,
        ),
    ] {
        match value {
            Some(0) => return Err(format!("{key} must be at least 1")),
            Some(secs) => *slot = Duration::from_secs(secs),
            None => {}
        }
    }
    Ok(spec)
}
