//! # tool-timeout
//!
//! Gives every tool call a deadline on `tool_call`; the host enforces it.
//! A call still running at its deadline is stopped: the host records the
//! error result
//!
//! ```text
//! tool <name> exceeded timeout <duration>; raise via gates.tool_timeout.per_tool.<name>: <duration>
//! ```
//!
//! emits a `tool_timeout` event (tool, call id, deadline, this gate, turn),
//! kills a shell command's whole process tree, and drops the late result
//! when it comes (`late_result_suppressed`: `tool <name> already timed out;
//! suppressing late result`). A result before the deadline is recorded as
//! usual; concurrent calls have independent deadlines.
//!
//! Configuration: `default_timeout` (a duration, default `30s`) and
//! `per_tool` (tool name or glob → duration). A call's deadline is its
//! exact name's entry, else the longest matching glob's (`mcp.sub.*` wins
//! over `mcp.*`), else the default. Durations are Go-style: `50ms`, `1.5s`,
//! `2m`, `1h30m`; zero, negative or malformed ones refuse the load.

mod duration;
mod gate;

pub use duration::{format, parse};
pub use gate::{Config, ToolTimeout};

chimera_plugin_api::export_packs!(ToolTimeout);
