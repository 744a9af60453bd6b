//! # chimera-host
//!
//! The host side of Chimera: host-native conversation [`types`], the
//! [`interception`] seams and their chains, the [`plugins`] registry,
//! manager and loader that bring compiled policy packs into a process, the
//! [`agent`] session and its loop, the workspace-confined [`tools`], the
//! model [`providers`], and the tamper-evident [`audit`] log of every
//! interceptor decision.
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
pub mod interception;
pub mod isolate;
pub mod mcp;
pub mod pack_test;
pub mod plugins;
pub mod providers;
pub(crate) mod runtime;
pub mod state;
pub mod tools;
pub mod types;

#[cfg(test)]
mod test_support;
