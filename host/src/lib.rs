//! # chimera-host
//!
//! The host side of Chimera: host-native conversation [`types`], the
//! [`interception`] seams and their chains, and the [`plugins`] registry,
//! manager and loader that bring compiled policy packs into a process.
//!
//! ```no_run
//! use chimera_host::plugins::{PluginManager, Registry};
//! use std::sync::Arc;
//!
//! let registry = Arc::new(Registry::new());
//! let manager = PluginManager::new(Arc::clone(&registry), vec!["plugins".into()]);
//! manager.load("plan-gate", "")?;           // by entry-point name, default config
//! let bundle = registry.snapshot();         // the plugin chains, merged per turn
//! # Ok::<(), chimera_host::plugins::LoadError>(())
//! ```
#![deny(missing_docs)]

pub mod agent;
pub mod cli;
pub mod interception;
pub mod plugins;
pub mod providers;
mod text;
pub mod tools;
pub mod types;
