//! # plan-gate
//!
//! Blocks write, edit and shell tools until the model has *issued* a call to
//! a planning tool since the most recent user message, and tells the model
//! exactly how to unblock itself:
//!
//! ```text
//! plan-gate: no plan recorded this turn — call one of [think, todo] to record a plan before using write_file
//! ```
//!
//! * `tool_call` (the gate): a plan tool marks the conversation planned and
//!   passes (issuing is enough, even if the tool is not installed); a gated
//!   tool in an unplanned conversation is blocked; anything else passes.
//! * `context` (the watcher): before every provider call, recomputes
//!   "planned" from the outgoing messages alone — planned iff an assistant
//!   message after the last user message carries a plan-tool call. So every
//!   new user message re-arms the gate, mid-run steering included.
//!
//! State is per conversation, keyed by the session id the host maintains:
//! two sessions never share a gate. At most 256 conversations are remembered
//! (least recently written first out; an evicted one is armed again).
//!
//! Configuration (JSON, every key optional): `gated_tools` (default
//! `apply_patch`, `bash`, `edit_file`, `replace_in_file`, `write_file`) and
//! `plan_tools` (default `think`, `todo`). Names match exactly.

mod config;
mod gate;
mod lanes;

pub use config::Config;
pub use gate::PlanGate;

chimera_plugin_api::export_packs!(PlanGate);
