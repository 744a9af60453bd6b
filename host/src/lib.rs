//! # chimera-host
//!
//! The host side of Chimera:
//!
//! - [`types`]: host-native conversation types, which interceptors,
//!   providers, tools and the transcript all speak.
//! - [`interception`]: the seven seams, their chains, the runner, and
//!   merging.
//! - [`plugins`]: the interceptor registry, in-process plugins, and the
//!   manager and loader that bring compiled policy packs into a process.
//! - [`isolate`]: isolated packs, each run in a sandboxed child process
//!   (the pack host).
//! - [`agent`]: the session (a conversation across turns), its `ReAct`
//!   loop and the other strategies a turn can run.
//! - [`tools`]: the tools the agent can call, confined to a workspace
//!   directory.
//! - [`providers`]: model providers: the scripted model, OpenAI-compatible
//!   chat completions and Anthropic's Messages API.
//! - [`audit`]: the tamper-evident log of every interceptor decision, and
//!   its check.
//! - [`config`]: the `chimera.toml` schema, the plugin search path, the
//!   per-user directories and pack specs, shared by every command that
//!   runs packs.
//! - [`files`]: the files a user names and the files the host writes for
//!   them, read as hostile until checked.
//! - [`state`]: gate state that outlives one process (counters and token
//!   buckets, in process or in Redis), so gateway replicas enforce one
//!   budget.
//! - [`gateway`]: `chimera serve`, the packs as a guardrail gateway
//!   speaking the chat-completions and Messages wires.
//! - [`jsondoc`]: JSON as written: parsed to byte spans, edited by splicing.
//! - [`mcp`]: MCP under the same seams: `chimera mcp guard` in front of a
//!   stdio MCP server, and tools from MCP servers.
//! - [`pack_test`]: policy test cases for packs (`chimera pack test`), and
//!   real sessions recorded to become such cases.
//!
//! Load packs by name and run a session under them:
//!
//! ```no_run
//! use chimera_host::agent::AgentSession;
//! use chimera_host::plugins::{PluginManager, Registry};
//! use chimera_host::providers::ScriptedModel;
//! use chimera_host::tools::{ToolSet, Workspace};
//! use std::path::PathBuf;
//! use std::sync::Arc;
//!
//! let registry = Arc::new(Registry::new());
//! let manager = PluginManager::new(Arc::clone(&registry), vec![PathBuf::from("plugins")]);
//! manager.load("plan-gate", "")?; // by entry-point name, default config
//!
//! let model = ScriptedModel::from_json(r#"{"responses": [{"content": "done"}]}"#)?;
//! let mut session = AgentSession::builder(Arc::new(model), Workspace::new(".")?)
//!     .tools(ToolSet::standard())
//!     .registry(registry) // plugin chains, merged at the start of every turn
//!     .build();
//! let result = session.run_turn("hello");
//! assert!(result.success);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Three ways to gate a tool call
//!
//! They run in this order for every call, and each can refuse it:
//!
//! 1. **The `tool_call` seam** ([`interception`]): policy that ships as a
//!    pack or must see (and may rewrite) every call before anything else
//!    does — a pack's verdict is fail-closed, and its rewrite is what
//!    everything after it sees.
//! 2. **`PreToolUse` hooks** ([`agent::Hooks`]): the embedding application's
//!    own checks in plain Rust, with no ABI and no pack — patching
//!    arguments, or deciding permission outright for tools it knows.
//! 3. **The permission policy** ([`agent::PermissionPolicy`]): the user's
//!    standing allow / ask / deny per tool (`--ask`, `--deny`), answered by
//!    an [`agent::Approver`]; one approval covers exactly one call.
#![deny(missing_docs)]

pub mod agent;
pub mod audit;
pub mod config;
pub mod files;
pub mod gateway;
pub(crate) mod http1;
pub mod interception;
pub mod isolate;
pub mod jsondoc;
pub mod lanes;
pub(crate) mod listen;
pub mod mcp;
pub mod pack_test;
pub mod plugins;
pub mod providers;
pub(crate) mod runtime;
pub mod state;
pub mod tools;
pub mod types;
pub(crate) mod upstream;

#[cfg(test)]
mod test_support;
