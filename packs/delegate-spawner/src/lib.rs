//! # delegate-spawner
//!
//! Sub-agents as policy: rewrites matching tool calls into calls to the
//! delegate tool, on the `tool_call` seam. A call matches when its name is
//! not the delegate tool itself and it is in `names`, or starts with
//! `prefix` (an empty prefix disables prefix matching). The rewrite keeps
//! the call id and passes exactly one argument, `task`: the call's `task`
//! if truthy, else its `prompt`; if that is not a non-blank string, the
//! rendering `<name>: <JSON of the other arguments, keys sorted>` (Python's
//! `json.dumps` layout, e.g. `spawn_lookup: {"query": "bean varieties"}`).
//! Non-matching calls pass untouched, with no decision.
//!
//! Without a delegate tool installed, the rewritten call fails loudly
//! (`Unknown tool: delegate`) and the run goes on.
//!
//! Configuration: `prefix` (default `spawn_`), `names` (default none),
//! `delegate_tool` (default `delegate`).

mod config;
mod pydump;
mod rewrite;

pub use config::Config;
pub use rewrite::DelegateSpawner;

chimera_plugin_api::export_packs!(DelegateSpawner);
